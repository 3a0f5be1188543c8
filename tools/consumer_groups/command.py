"""What every action of ``samsa consumer-groups`` shares: ``GroupCommand``, with the admin client, the
parsed arguments, the requests about groups and offsets (ListGroups, DescribeGroups, OffsetFetch,
Metadata, ListOffsets) and the ``Error: ...`` report; the group and member it describes; and
``CommandError``, a failure that ends the command."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from protocol.api import ApiKey
from protocol.errors import ErrorCode, description
from protocol.messages import (
    ConsumerProtocolAssignment,
    DescribeGroupsRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    OffsetFetchRequest,
)
from tools.admin_client import AdminClient, AdminError

MISSING = "-"
LATEST, EARLIEST = -1, -2  # ListOffsets' special timestamps
CONSUMER_PROTOCOL = "consumer"
FIRST_BATCHED_OFFSET_FETCH = 8  # OffsetFetch v8 takes a list of groups

TopicPartition = tuple[str, int]


class CommandError(Exception):
    """A failure while executing: ``Error: Executing consumer group command failed due to <message>``."""


def print_error(message: str) -> None:
    print(f"\nError: {message}")


def parse_topic_partitions(arg: str) -> tuple[str, list[int] | None]:
    """``topic`` or ``topic:0,1,2``."""
    if ":" not in arg:
        return arg, None
    topic, _, partitions = arg.partition(":")
    numbers = []
    for p in partitions.split(","):
        try:
            numbers.append(int(p))
        except ValueError:
            raise CommandError(f'For input string: "{p}"') from None
    return topic, numbers


def decode_assignment(data: bytes | memoryview | None) -> list[TopicPartition]:
    """The partitions of a ConsumerProtocolAssignment (empty when the member has none yet)."""
    if not data or len(data) < 2:
        return []
    version = int.from_bytes(data[:2], "big", signed=True)
    assignment = ConsumerProtocolAssignment.decode(memoryview(data)[2:], min(max(version, 0), 3))
    return [(t.topic, p) for t in assignment.assigned_partitions for p in t.partitions]


def committed_of(result: Any) -> dict[TopicPartition, int]:
    """The committed offsets in one group's OffsetFetch result (its topics and partitions)."""
    # A negative offset means the group has no offset for the partition.
    return {
        (t.name, p.partition_index): p.committed_offset
        for t in result.topics
        for p in t.partitions
        if p.error_code == ErrorCode.NONE and p.committed_offset >= 0
    }


@dataclass
class GroupListing:
    """A group as ListGroups lists it; ``coordinator``: the broker that listed it (each broker lists
    the groups it coordinates)."""

    group_id: str
    protocol_type: str
    state: str
    coordinator: int


async def list_groups_of(
    admin: AdminClient, node: int, states: list[str] | None = None
) -> list[GroupListing]:
    """ListGroups of broker ``node`` (in ``states``; all when none), asking again while its coordinator
    is loading; CommandError in words when it answers another error."""
    request = ListGroupsRequest(states_filter=states or [])
    deadline = time.monotonic() + admin.timeout
    while True:
        response = await admin.send_to_node(ApiKey.LIST_GROUPS, request, node)
        if response.error_code == ErrorCode.NONE:
            return [
                GroupListing(g.group_id, g.protocol_type, g.group_state or "Unknown", node)
                for g in response.groups
            ]
        if response.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            raise CommandError(description(response.error_code))
        await asyncio.sleep(0.1)


@dataclass
class Member:
    consumer_id: str
    group_instance_id: str
    client_id: str
    host: str
    assignment: list[TopicPartition]


@dataclass
class Group:
    group_id: str
    state: str
    assignment_strategy: str
    members: list[Member]


class GroupCommand:
    """One action of kafka-consumer-groups.sh (``run``) and the requests it makes; ``failed`` says
    whether it printed an error."""

    def __init__(self, admin: AdminClient, args: argparse.Namespace) -> None:
        self.admin = admin
        self.args = args
        self.failed = False

    async def run(self) -> None:
        raise NotImplementedError

    def error(self, message: str) -> None:
        self.failed = True
        print_error(message)

    async def list_groups(self, states: list[str] | None = None) -> list[tuple[str, str]]:
        """(group id, state) of every consumer group of every broker, sorted by group id."""
        listed = await asyncio.gather(
            *(list_groups_of(self.admin, node, states) for node in sorted(self.admin.brokers))
        )
        groups: dict[str, str] = {}
        for listings in listed:
            for g in listings:
                if g.protocol_type in (CONSUMER_PROTOCOL, ""):
                    groups[g.group_id] = g.state
        return sorted(groups.items())

    async def group_ids(self) -> list[str]:
        if self.args.all_groups:
            return [g for g, _ in await self.list_groups()]
        return list(dict.fromkeys(self.args.group))

    async def describe_group(self, group_id: str) -> Group:
        response = await self.admin.send_to_coordinator(
            group_id,
            ApiKey.DESCRIBE_GROUPS,
            DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False),
            lambda r: [g.error_code for g in r.groups],
        )
        described = response.groups[0]
        if described.error_code != ErrorCode.NONE:
            raise CommandError(described.error_message or description(described.error_code))
        if described.protocol_type not in (CONSUMER_PROTOCOL, ""):
            raise CommandError(f"GroupId {group_id} is not a consumer group ({described.protocol_type}).")
        members = [
            Member(
                m.member_id,
                m.group_instance_id or "",
                m.client_id,
                m.client_host,
                decode_assignment(m.member_assignment),
            )
            for m in described.members
        ]
        return Group(group_id, described.group_state, described.protocol_data, members)

    async def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """Every offset the group has committed (OffsetFetch for all topics)."""
        batched = self.admin.version(ApiKey.OFFSET_FETCH) >= FIRST_BATCHED_OFFSET_FETCH
        if batched:
            request = OffsetFetchRequest(
                groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group_id, topics=None)],
                require_stable=False,
            )
        else:
            request = OffsetFetchRequest(group_id=group_id, topics=None, require_stable=False)

        def result_of(response: Any) -> Any:
            return response.groups[0] if batched else response

        response = await self.admin.send_to_coordinator(
            group_id, ApiKey.OFFSET_FETCH, request, lambda r: [result_of(r).error_code]
        )
        result = result_of(response)
        if result.error_code != ErrorCode.NONE:
            raise CommandError(description(result.error_code))
        return committed_of(result)

    async def partitions_of(self, topics: Iterable[str]) -> dict[str, list[int]]:
        """The partitions of each topic; CommandError for a topic that does not exist."""
        names = sorted(set(topics))
        if not names:
            return {}
        metadata = await self.admin.metadata(names)
        found = {}
        for t in metadata.topics:
            if t.error_code != ErrorCode.NONE:
                raise CommandError(description(t.error_code))
            found[t.name] = sorted(p.partition_index for p in t.partitions)
        return found

    async def log_offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """ListOffsets at ``timestamp`` (LATEST, EARLIEST or epoch ms) from each partition's leader;
        partitions without a leader or with an error are left out. -1 where no record is that recent."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        metadata = await self.admin.metadata(sorted({t for t, _ in wanted}))
        leaders = {
            (t.name, p.partition_index): p.leader_id
            for t in metadata.topics
            if t.error_code == ErrorCode.NONE
            for p in t.partitions
        }
        by_leader: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for topic, partition in wanted:
            leader = leaders.get((topic, partition), -1)
            if leader >= 0:
                by_leader[leader][topic].append(partition)

        async def ask(leader: int, topics: dict[str, list[int]]) -> Any:
            request = ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name=topic,
                        partitions=[
                            ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                            for p in partitions
                        ],
                    )
                    for topic, partitions in topics.items()
                ],
            )
            try:
                return await self.admin.send_to_node(ApiKey.LIST_OFFSETS, request, leader)
            except AdminError:
                return None

        responses = await asyncio.gather(*(ask(leader, topics) for leader, topics in by_leader.items()))
        return {
            (t.name, p.partition_index): p.offset
            for response in responses
            if response is not None
            for t in response.topics
            for p in t.partitions
            if p.error_code == ErrorCode.NONE
        }
