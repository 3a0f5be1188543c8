"""The group and offset APIs as Kafka 3.9 (ZooKeeper mode) answers them, handler by handler against a
fake coordinator: OffsetCommit v0 in ZooKeeper and v1's commit timestamp, v9's member epoch for classic
groups, OffsetFetch v0 from ZooKeeper and v9, DescribeGroups' authorized operations."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.exceptions import NoNodeError

from broker.group_apis import GROUP_OPERATIONS, GroupApis, zk_consumer_offset_path
from coordinator.group_metadata import GroupSummary, MemberSummary, OffsetAndMetadata
from network.handler_pool import Parked
from protocol.errors import ErrorCode
from protocol.messages import (
    DescribeGroupsRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from server_common.futures import completed

OMITTED = -(2**31)


class FakeZk:
    def __init__(self) -> None:
        self.nodes: dict[str, bytes] = {}

    async def get(self, path: str) -> tuple[bytes, Any] | None:
        return (self.nodes[path], None) if path in self.nodes else None

    async def set(self, path: str, data: bytes) -> None:
        if path not in self.nodes:
            raise NoNodeError()
        self.nodes[path] = data

    async def create(self, path: str, data: bytes, makepath: bool = False) -> None:
        assert makepath
        self.nodes[path] = data


class FakeCoordinator:
    def __init__(self) -> None:
        self.commits: list[tuple[Any, ...]] = []
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        self.manager = SimpleNamespace(config=SimpleNamespace(max_metadata_size=10))
        self.group_error = ErrorCode.NONE

    def handle_commit_offsets(self, group, member_id, instance_id, generation, offsets):  # type: ignore[no-untyped-def]
        self.commits.append((group, member_id, instance_id, generation, offsets))
        return completed(dict.fromkeys(offsets, ErrorCode.NONE))

    def handle_fetch_offsets(self, group_id, partitions):  # type: ignore[no-untyped-def]
        if self.group_error:
            return self.group_error, {}
        return ErrorCode.NONE, {tp: self.offsets.get(tp) for tp in partitions}

    def unstable_offsets(self, group_id, partitions):  # type: ignore[no-untyped-def]
        return set()

    def handle_describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        if group_id == "elsewhere":
            return ErrorCode.NOT_COORDINATOR, GroupSummary("", "", "", [])
        member = MemberSummary("m1", None, "c", "/h", b"meta", b"assign")
        return ErrorCode.NONE, GroupSummary("Stable", "consumer", "range", [member])

    def handle_list_groups(self, states: set[str]) -> tuple[int, list[tuple[str, str, str]]]:
        return ErrorCode.NONE, [("g", "consumer", "Stable")]


class FakeCache:
    def partition(self, topic: str, partition: int) -> Any:
        return object() if topic == "t" and partition < 2 else None


@pytest.fixture
def apis() -> GroupApis:
    apis = GroupApis.__new__(GroupApis)
    apis.metadata_cache = FakeCache()  # type: ignore[assignment]
    apis.coordinator = FakeCoordinator()  # type: ignore[assignment]
    apis.zk = FakeZk()  # type: ignore[assignment]
    return apis


def call(handler: Any, version: int, body: Any) -> Any:
    async def run() -> Any:
        result = await handler(SimpleNamespace(body=body, version=version, client_id="c", peer="h:1"))
        if isinstance(result, Parked):  # the response once the coordinator answers
            return await result.response
        return result

    return asyncio.run(run())


def commit_body(*partitions: tuple[str, int, int, str | None], **fields: Any) -> OffsetCommitRequest:
    topics: dict[str, list[Any]] = {}
    for topic, index, offset, metadata in partitions:
        topics.setdefault(topic, []).append(
            OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=index,
                committed_offset=offset,
                committed_metadata=metadata,
                commit_timestamp=fields.pop("commit_timestamp", -1),
            )
        )
    return OffsetCommitRequest(
        group_id="g",
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name=n, partitions=ps) for n, ps in topics.items()
        ],
        **fields,
    )


def errors_of(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def test_offset_commit_v0_is_stored_in_zookeeper(apis: GroupApis) -> None:
    body = commit_body(("t", 0, 42, None), ("t", 1, 7, "x" * 11), ("t", 5, 1, None), ("u", 0, 1, None))
    response = call(apis.handle_offset_commit, 0, body)
    assert errors_of(response) == {
        ("t", 0): ErrorCode.NONE,
        ("t", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE,
        ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("u", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    zk = apis.zk
    assert isinstance(zk, FakeZk)
    assert zk.nodes == {"/consumers/g/offsets/t/0": b"42"}
    assert apis.coordinator.commits == []  # type: ignore[attr-defined]
    call(apis.handle_offset_commit, 0, commit_body(("t", 0, 43, None)))  # an existing node is set
    assert zk.nodes[zk_consumer_offset_path("g", "t", 0)] == b"43"


def test_offset_fetch_v0_reads_zookeeper(apis: GroupApis) -> None:
    assert isinstance(apis.zk, FakeZk)
    apis.zk.nodes["/consumers/g/offsets/t/0"] = b"42"
    apis.coordinator.offsets[("t", 1)] = OffsetAndMetadata(99)  # type: ignore[index]
    body = OffsetFetchRequest(
        group_id="g",
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1, 9])],
    )
    response = call(apis.handle_offset_fetch, 0, body)
    got = [
        (p.partition_index, p.committed_offset, p.metadata, p.error_code)
        for p in response.topics[0].partitions
    ]
    assert got == [
        (0, 42, "", ErrorCode.NONE),
        (1, -1, "", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),  # not in ZooKeeper: v0 never asks the group
        (9, -1, "", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert response.error_code == ErrorCode.NONE


def test_v0_offsets_without_zookeeper_are_unsupported(apis: GroupApis) -> None:
    apis.zk = None
    response = call(apis.handle_offset_commit, 0, commit_body(("t", 0, 42, None)))
    assert errors_of(response) == {("t", 0): ErrorCode.UNSUPPORTED_VERSION}


def test_offset_commit_v1_keeps_the_commit_timestamp(apis: GroupApis) -> None:
    body = commit_body(
        ("t", 0, 5, None), generation_id_or_member_epoch=3, member_id="m", commit_timestamp=1234
    )
    call(apis.handle_offset_commit, 1, body)
    ((group, member, _, generation, offsets),) = apis.coordinator.commits  # type: ignore[attr-defined]
    assert (group, member, generation) == ("g", "m", 3)
    assert offsets[("t", 0)].commit_timestamp == 1234
    assert offsets[("t", 0)].expire_timestamp == -1


def test_offset_commit_v9_member_epoch_is_the_classic_generation(apis: GroupApis) -> None:
    body = commit_body(("t", 0, 5, "m"), generation_id_or_member_epoch=7, member_id="member-1")
    response = call(apis.handle_offset_commit, 9, body)
    assert errors_of(response) == {("t", 0): ErrorCode.NONE}
    ((_, member, _, generation, offsets),) = apis.coordinator.commits  # type: ignore[attr-defined]
    assert (member, generation, offsets[("t", 0)].metadata) == ("member-1", 7, "m")


def test_offset_fetch_v9_answers_classic_groups_whatever_the_member_epoch(apis: GroupApis) -> None:
    apis.coordinator.offsets[("t", 0)] = OffsetAndMetadata(11, 2, "md")  # type: ignore[index]
    body = OffsetFetchRequest(
        groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id="g",
                member_id="someone",
                member_epoch=42,
                topics=[OffsetFetchRequest.OffsetFetchRequestTopics(name="t", partition_indexes=[0])],
            )
        ]
    )
    response = call(apis.handle_offset_fetch, 9, body)
    [group] = response.groups
    [p] = group.topics[0].partitions
    assert (group.error_code, p.committed_offset, p.committed_leader_epoch, p.metadata) == (0, 11, 2, "md")


def test_offset_fetch_v1_group_error_at_the_partition_level(apis: GroupApis) -> None:
    apis.coordinator.group_error = ErrorCode.NOT_COORDINATOR  # type: ignore[attr-defined]
    body = OffsetFetchRequest(
        group_id="g", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]
    )
    [p] = call(apis.handle_offset_fetch, 1, body).topics[0].partitions
    assert (p.committed_offset, p.error_code) == (-1, ErrorCode.NOT_COORDINATOR)
    response = call(apis.handle_offset_fetch, 2, body)
    assert (response.error_code, response.topics) == (ErrorCode.NOT_COORDINATOR, [])


@pytest.mark.parametrize("version", [3, 4, 5])
def test_describe_groups_lists_every_group_operation_without_an_authorizer(
    apis: GroupApis, version: int
) -> None:
    body = DescribeGroupsRequest(groups=["g", "elsewhere"], include_authorized_operations=True)
    found, elsewhere = call(apis.handle_describe_groups, version, body).groups
    assert GROUP_OPERATIONS == (1 << 3) | (1 << 6) | (1 << 8) == 328  # READ, DELETE, DESCRIBE
    assert found.authorized_operations == GROUP_OPERATIONS
    assert (elsewhere.error_code, elsewhere.authorized_operations) == (ErrorCode.NOT_COORDINATOR, OMITTED)
    body = DescribeGroupsRequest(groups=["g"], include_authorized_operations=False)
    [found] = call(apis.handle_describe_groups, version, body).groups
    assert found.authorized_operations == OMITTED


def test_list_groups_v5_type_filter_is_case_insensitive(apis: GroupApis) -> None:
    for types, expected in (
        ([], ["g"]),
        (["CLASSIC"], ["g"]),
        (["consumer"], []),
        (["nope", "Classic"], ["g"]),
    ):
        body = ListGroupsRequest(states_filter=[], types_filter=types)
        response = call(apis.handle_list_groups, 5, body)
        assert [g.group_id for g in response.groups] == expected
        assert all(g.group_type == "classic" for g in response.groups)
