"""Consumer groups on a real cluster (ZooKeeper, a controller, three brokers) with real clients.

- aiokafka, kafka-python and confluent-kafka consumers in one group share a 12-partition topic: each
  gets a disjoint share and together they cover it; DescribeGroups agrees with what they were given.
- Committed offsets survive a restart of the group's coordinator (clean, or SIGKILL in the slow tier):
  the group moves with the leadership of its __consumer_offsets partition and a new consumer resumes
  from the commits.
- A member's commit with a generation that a rebalance replaced gets ILLEGAL_GENERATION.
- A static member (group.instance.id) restarted within its session gets its partitions back without
  a rebalance: the other member keeps its partitions throughout.
- Cooperative (incremental) rebalancing works over the classic protocol (librdkafka's
  cooperative-sticky): partitions move without the others being revoked.
- The group APIs' version differences on the wire: batched FindCoordinator and OffsetFetch, the
  transaction key type, per-partition errors of OffsetFetch v1, LeaveGroup before v3, ListGroups
  filters, DescribeGroups, OffsetDelete and DeleteGroups.

Each client member runs as a subprocess (tests/support/group_member.py).
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.group_metadata_manager import partition_for
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    Message,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from tests.support.cluster import Cluster
from tests.support.events import JsonEvents
from tests.support.raw_client import RawClient
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

HELPER = Path(__file__).parents[1] / "support" / "group_member.py"
PARTITIONS = 12
SESSION_MS = 10_000
MODULES = {"aiokafka": "aiokafka", "kafka-python": "kafka", "confluent-kafka": "confluent_kafka"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer) -> Iterator[Cluster]:
    """Three brokers with Kafka's group settings (offsets replicated 3 times), one controller."""
    chroot = f"{zookeeper_server.connect_string}/samsa-consumer-groups"
    running = Cluster(tmp_path_factory.mktemp("consumer-groups"), chroot).start()
    try:
        yield running
    finally:
        running.stop()


_names = itertools.count()


def new_topic(cluster: Cluster, label: str, records_per_partition: int = 0) -> str:
    topic = f"{label}-{next(_names)}"
    cluster.create_topic(topic, PARTITIONS, replication_factor=3)
    if records_per_partition:

        async def produce() -> None:
            from aiokafka import AIOKafkaProducer

            producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
            await producer.start()
            try:
                for p in range(PARTITIONS):
                    for i in range(records_per_partition):
                        await producer.send(topic, b"%d-%d" % (p, i), partition=p)
                await producer.flush()
            finally:
                await producer.stop()

        asyncio.run(produce())
    return topic


# -- raw protocol helpers -------------------------------------------------------------------------


def request(bootstrap: str, api_key: int, version: int, body: Message, timeout: float = 10.0) -> Any:
    client = RawClient(bootstrap, timeout)
    try:
        return client.request(api_key, version, body)
    finally:
        client.close()


def find_coordinator(cluster: Cluster, group: str, timeout: float = 30.0) -> tuple[int, str]:
    """(broker id, bootstrap) of the group's coordinator, once some live broker names one."""
    deadline = time.monotonic() + timeout
    while True:
        for broker in cluster.brokers.values():
            if not broker.alive:
                continue
            response = request(
                broker.bootstrap, ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(key=group)
            )
            if response.error_code == ErrorCode.NONE and cluster.broker(response.node_id).alive:
                return response.node_id, f"{response.host}:{response.port}"
        if time.monotonic() > deadline:
            raise TimeoutError(f"no coordinator for {group} after {timeout} s")
        time.sleep(0.2)


def describe_group(cluster: Cluster, group: str) -> Any:
    _, coordinator = find_coordinator(cluster, group)
    response = request(coordinator, ApiKey.DESCRIBE_GROUPS, 4, DescribeGroupsRequest(groups=[group]))
    return response.groups[0]


def fetch_offsets(cluster: Cluster, group: str, topic: str) -> dict[int, int]:
    deadline = time.monotonic() + 30
    while True:
        _, coordinator = find_coordinator(cluster, group)
        body = OffsetFetchRequest(
            group_id=group,
            topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(
                    name=topic, partition_indexes=list(range(PARTITIONS))
                )
            ],
        )
        response = request(coordinator, ApiKey.OFFSET_FETCH, 5, body)
        if response.error_code == ErrorCode.NONE:
            return {p.partition_index: p.committed_offset for t in response.topics for p in t.partitions}
        if time.monotonic() > deadline:
            raise TimeoutError(f"OffsetFetch of {group}: {ErrorCode(response.error_code).name}")
        time.sleep(0.2)


def assignment_partitions(data: bytes) -> set[int]:
    """The partitions of a ConsumerProtocolAssignment (one topic in these tests)."""
    pos = 2
    (topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    partitions: set[int] = set()
    for _ in range(topics):
        (length,) = struct.unpack_from(">h", data, pos)
        pos += 2 + length
        (count,) = struct.unpack_from(">i", data, pos)
        partitions.update(struct.unpack_from(f">{count}i", data, pos + 4))
        pos += 4 + 4 * count
    return partitions


# -- client members -------------------------------------------------------------------------------


class GroupMember:
    """A consumer of one of the Python clients in a subprocess (group_member.py), stopped by PID."""

    def __init__(
        self,
        client: str,
        cluster: Cluster,
        topic: str,
        group: str,
        workdir: Path,
        instance: str | None = None,
        strategy: str | None = None,
    ) -> None:
        if importlib.util.find_spec(MODULES[client]) is None:
            pytest.skip(f"{client} is not installed")
        self.client = client
        self.stderr_path = workdir / f"{client}-{instance or 'dynamic'}-{next(_names)}.stderr"
        self._stderr = open(self.stderr_path, "w")  # closed in _reap()
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(HELPER),
                client,
                cluster.bootstrap,
                topic,
                group,
                instance or "-",
                str(SESSION_MS),
                *([strategy] if strategy else []),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        self._events = JsonEvents(self.process.stdout)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return self._events.of(kind)

    @property
    def assignment(self) -> set[int] | None:
        assigned = self.of("assigned")
        return set(assigned[-1]["partitions"]) if assigned else None

    def wait(self, condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = condition()
            if found:
                return found
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        events = self._events.all()
        raise AssertionError(f"{self.client}: {what} did not happen; events {events}\n{self.stderr()}")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def commit(self, offsets: dict[int, int]) -> str | None:
        done = len(self.of("committed"))
        self.send("commit " + ",".join(f"{p}:{o}" for p, o in offsets.items()))
        self.wait(lambda: len(self.of("committed")) > done, "the commit")
        return self.of("committed")[done]["error"]

    def close(self, timeout: float = 30.0) -> None:
        """Closes the consumer (a dynamic member leaves the group) and waits for the process."""
        if self.process.poll() is None:
            try:
                self.send("close")
                self.process.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        self._reap()

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self._reap()

    def _reap(self) -> None:
        self.process.wait()
        self._stderr.close()


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Callable[..., GroupMember]]:
    started: list[GroupMember] = []

    def start(
        client: str,
        cluster: Cluster,
        topic: str,
        group: str,
        instance: str | None = None,
        strategy: str | None = None,
    ) -> GroupMember:
        member = GroupMember(client, cluster, topic, group, tmp_path, instance, strategy)
        started.append(member)
        return member

    yield start
    for member in started:
        member.kill()


def disjoint_cover(group_members: list[GroupMember]) -> bool:
    shares = [m.assignment for m in group_members]
    if any(not share for share in shares):
        return False
    union = set().union(*shares)  # type: ignore[misc]
    return union == set(range(PARTITIONS)) and sum(len(s) for s in shares) == PARTITIONS  # type: ignore[arg-type]


# -- tests ----------------------------------------------------------------------------------------


def test_three_clients_share_a_topic(cluster: Cluster, members: Callable[..., GroupMember]) -> None:
    topic = new_topic(cluster, "mixed")
    group = f"mixed-group-{next(_names)}"
    consumers = [
        members(client, cluster, topic, group) for client in ("aiokafka", "kafka-python", "confluent-kafka")
    ]
    consumers[0].wait(lambda: disjoint_cover(consumers), "a disjoint assignment covering the topic")

    # The coordinator's view agrees. aiokafka supports only roundrobin, so that is what the group uses.
    deadline = time.monotonic() + 30
    while True:
        described = describe_group(cluster, group)
        shares = {m.client_id: assignment_partitions(m.member_assignment) for m in described.members}
        if described.group_state == "Stable" and sorted(map(sorted, shares.values())) == sorted(
            sorted(c.assignment or ()) for c in consumers
        ):
            break
        assert time.monotonic() < deadline, f"DescribeGroups disagrees: {described}"
        time.sleep(0.2)
    assert described.protocol_type == "consumer" and described.protocol_data == "roundrobin"
    assert len(described.members) == 3 and all(m.client_host == "/127.0.0.1" for m in described.members)

    # Dynamic members leave on close; the last one leaves the group empty.
    for consumer in consumers:
        consumer.close()
    deadline = time.monotonic() + 30
    while describe_group(cluster, group).group_state != "Empty":
        assert time.monotonic() < deadline, "the group did not become empty"
        time.sleep(0.2)


@pytest.mark.parametrize(
    "kill",
    [pytest.param(False, id="clean-shutdown"), pytest.param(True, id="sigkill", marks=pytest.mark.slow)],
)
def test_commits_survive_a_coordinator_restart(
    cluster: Cluster, members: Callable[..., GroupMember], kill: bool
) -> None:
    topic = new_topic(cluster, "durable", records_per_partition=10)
    group = f"durable-group-{next(_names)}"
    first = members("kafka-python", cluster, topic, group)
    first.wait(lambda: first.assignment == set(range(PARTITIONS)), "the whole topic assigned")
    committed = {p: p % 9 + 1 for p in range(PARTITIONS)}  # below the 10 records of each partition
    assert first.commit(committed) is None
    first.close()
    assert fetch_offsets(cluster, group, topic) == committed

    coordinator_id, _ = find_coordinator(cluster, group)
    broker = cluster.broker(coordinator_id)
    if kill:
        broker.signal(signal.SIGKILL)
        broker.process.wait()  # type: ignore[union-attr]
    else:
        broker.stop()  # controlled shutdown: leadership moves before the broker goes
    # Another replica of the group's offsets partition takes over (after a killed broker's session ends).
    moved_to, _ = find_coordinator(cluster, group, timeout=60)
    assert moved_to != coordinator_id
    assert fetch_offsets(cluster, group, topic) == committed
    broker.start()
    cluster.wait_for(lambda zk: str(coordinator_id) in zk.get_children("/brokers/ids"), "the broker back")

    # A consumer of another client resumes where the commits left off.
    second = members("confluent-kafka", cluster, topic, group)
    second.wait(lambda: len(second.of("first")) == PARTITIONS, "a record of every partition")
    assert {e["partition"]: e["offset"] for e in second.of("first")} == committed
    second.close()


def test_cooperative_rebalancing(cluster: Cluster, members: Callable[..., GroupMember]) -> None:
    """librdkafka's cooperative-sticky assignor over the classic protocol: members join one by one,
    partitions move incrementally, and those that stay with a member are never revoked from it."""
    topic = new_topic(cluster, "cooperative")
    group = f"cooperative-group-{next(_names)}"
    joined: list[GroupMember] = []
    for _ in range(3):
        joined.append(members("confluent-kafka", cluster, topic, group, strategy="cooperative-sticky"))
        joined[0].wait(lambda: disjoint_cover(joined), f"{len(joined)} members sharing the topic")
    first = joined[0]
    # The first member held everything, then gave partitions away without losing the rest at once.
    revoked = [set(e["partitions"]) for e in first.of("revoked")]
    assert revoked and all(len(r) < PARTITIONS for r in revoked), first.events
    assert len(first.assignment or ()) == PARTITIONS // 3
    described = describe_group(cluster, group)
    assert described.protocol_data == "cooperative-sticky" and len(described.members) == 3


def _join(client: RawClient, group: str, member_id: str) -> int:
    """Sends JoinGroup v5 (a roundrobin consumer) without waiting for the answer."""
    body = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=SESSION_MS,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[
            JoinGroupRequest.JoinGroupRequestProtocol(name="roundrobin", metadata=b"\x00\x00\x00\x00\x00\x00")
        ],
    )
    return client.send(ApiKey.JOIN_GROUP, 5, body)


def _joined(client: RawClient) -> Any:
    return client.receive(ApiKey.JOIN_GROUP, 5)[1]


def _commit(client: RawClient, group: str, topic: str, member_id: str, generation: int) -> int:
    body = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)
                ],
            )
        ],
    )
    return client.request(ApiKey.OFFSET_COMMIT, 7, body).topics[0].partitions[0].error_code


def test_stale_generation_commit_is_refused(cluster: Cluster) -> None:
    topic = new_topic(cluster, "stale")
    group = f"stale-group-{next(_names)}"
    _, coordinator = find_coordinator(cluster, group)
    a, b = RawClient(coordinator, 30), RawClient(coordinator, 30)
    try:
        _join(a, group, "")
        required = _joined(a)
        assert required.error_code == ErrorCode.MEMBER_ID_REQUIRED
        member_a = required.member_id
        _join(a, group, member_a)
        first = _joined(a)  # after group.initial.rebalance.delay.ms
        assert first.error_code == ErrorCode.NONE and first.generation_id == 1 and first.leader == member_a
        sync = SyncGroupRequest(
            group_id=group,
            generation_id=1,
            member_id=member_a,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=member_a, assignment=b"")],
        )
        assert a.request(ApiKey.SYNC_GROUP, 3, sync).error_code == ErrorCode.NONE
        assert _commit(a, group, topic, member_a, 1) == ErrorCode.NONE

        # A second member joins: A learns of the rebalance by heartbeat and rejoins.
        _join(b, group, "")
        member_b = _joined(b).member_id
        _join(b, group, member_b)
        heartbeat = HeartbeatRequest(group_id=group, generation_id=1, member_id=member_a)
        deadline = time.monotonic() + 10
        while a.request(ApiKey.HEARTBEAT, 1, heartbeat).error_code != ErrorCode.REBALANCE_IN_PROGRESS:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        _join(a, group, member_a)
        second_a, second_b = _joined(a), _joined(b)
        assert second_a.generation_id == second_b.generation_id == 2
        # A commit that still carries generation 1 is from a member that missed the rebalance.
        assert _commit(a, group, topic, member_a, 1) == ErrorCode.ILLEGAL_GENERATION
        assert _commit(b, group, topic, "unknown-member", 2) == ErrorCode.UNKNOWN_MEMBER_ID
        assert _commit(a, group, topic, member_a, 2) == ErrorCode.REBALANCE_IN_PROGRESS  # not synced yet
    finally:
        a.close()
        b.close()


def test_static_member_rejoins_without_rebalance(
    cluster: Cluster, members: Callable[..., GroupMember]
) -> None:
    topic = new_topic(cluster, "static")
    group = f"static-group-{next(_names)}"
    one = members("confluent-kafka", cluster, topic, group, instance="instance-1")
    two = members("confluent-kafka", cluster, topic, group, instance="instance-2")
    one.wait(lambda: disjoint_cover([one, two]), "a disjoint assignment covering the topic")
    share, other_share = one.assignment, two.assignment
    assigned_before = len(two.of("assigned"))
    revoked_before = len(two.of("revoked"))

    one.kill()  # no LeaveGroup: a static member's session keeps its place
    again = members("confluent-kafka", cluster, topic, group, instance="instance-1")
    again.wait(lambda: again.assignment is not None, "an assignment")
    assert again.assignment == share
    time.sleep(2)  # heartbeats would have told the other member of a rebalance by now
    assert two.assignment == other_share
    assert len(two.of("assigned")) == assigned_before and len(two.of("revoked")) == revoked_before
    described = describe_group(cluster, group)
    assert described.group_state == "Stable"
    assert sorted(m.group_instance_id for m in described.members) == ["instance-1", "instance-2"]


def _simple_commit(
    bootstrap: str, group: str, topic: str, offsets: dict[int, int], version: int = 8
) -> list[int]:
    body = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=p,
                        committed_offset=o,
                        committed_leader_epoch=-1,
                        committed_metadata=f"m{p}",
                    )
                    for p, o in offsets.items()
                ],
            )
        ],
    )
    response = request(bootstrap, ApiKey.OFFSET_COMMIT, version, body)
    return [p.error_code for t in response.topics for p in t.partitions]


def test_group_apis_on_the_wire(cluster: Cluster) -> None:
    topic = new_topic(cluster, "wire")
    one, two = f"wire-a-{next(_names)}", f"wire-b-{next(_names)}"
    any_broker = cluster.broker(1).bootstrap
    find_coordinator(cluster, one)  # creates __consumer_offsets if needed and waits for a leader

    # FindCoordinator v4 batches keys. The transaction key's first request creates __transaction_state
    # (nothing here did before) and is answered COORDINATOR_NOT_AVAILABLE until it has leaders.
    batched = request(
        any_broker,
        ApiKey.FIND_COORDINATOR,
        4,
        FindCoordinatorRequest(key_type=0, coordinator_keys=[one, two]),
    )
    assert [(c.key, c.error_code) for c in batched.coordinators] == [(one, 0), (two, 0)]
    txn = request(
        any_broker, ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=["t"])
    )
    assert txn.coordinators[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert txn.coordinators[0].node_id == -1

    _, coordinator_one = find_coordinator(cluster, one)
    _, coordinator_two = find_coordinator(cluster, two)
    assert _simple_commit(coordinator_one, one, topic, {0: 5, 1: 6}) == [0, 0]
    assert _simple_commit(coordinator_two, two, topic, {2: 7}, version=2) == [0]
    unknown = _simple_commit(coordinator_one, one, "no-such-topic", {0: 1})
    assert unknown == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]

    # OffsetFetch v8: several groups in one request (to each group's coordinator).
    for group, coordinator, expected in (
        (one, coordinator_one, {0: 5, 1: 6}),
        (two, coordinator_two, {2: 7}),
    ):
        body = OffsetFetchRequest(
            groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)]
        )
        (fetched,) = request(coordinator, ApiKey.OFFSET_FETCH, 8, body).groups
        assert fetched.error_code == 0
        assert {
            p.partition_index: (p.committed_offset, p.metadata) for t in fetched.topics for p in t.partitions
        } == {p: (o, f"m{p}") for p, o in expected.items()}
    # Before v2 a broker that is not the coordinator says so in every partition.
    elsewhere = next(b.bootstrap for b in cluster.brokers.values() if b.bootstrap != coordinator_one)
    body = OffsetFetchRequest(
        group_id=one,
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1])],
    )
    v1 = request(elsewhere, ApiKey.OFFSET_FETCH, 1, body)
    assert [p.error_code for p in v1.topics[0].partitions] == [ErrorCode.NOT_COORDINATOR] * 2
    assert request(elsewhere, ApiKey.OFFSET_FETCH, 3, body).error_code == ErrorCode.NOT_COORDINATOR

    # LeaveGroup before v3 has one error; ListGroups filters by state (v4) and type (v5).
    leave = request(
        coordinator_one, ApiKey.LEAVE_GROUP, 1, LeaveGroupRequest(group_id=one, member_id="nobody")
    )
    assert leave.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    listed = request(coordinator_one, ApiKey.LIST_GROUPS, 5, ListGroupsRequest(states_filter=["EMPTY"]))
    assert (one, "Empty", "classic") in {(g.group_id, g.group_state, g.group_type) for g in listed.groups}
    none = request(coordinator_one, ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=["consumer"]))
    assert none.groups == []
    # A group this coordinator would have, but never saw, is Dead.
    never = next(
        f"never-{i}" for i in itertools.count() if partition_for(f"never-{i}", 50) == partition_for(one, 50)
    )
    described = request(
        coordinator_one,
        ApiKey.DESCRIBE_GROUPS,
        5,
        DescribeGroupsRequest(groups=[one, never], include_authorized_operations=True),
    )
    assert [(g.group_state, g.protocol_type, g.members) for g in described.groups] == [
        ("Empty", "", []),
        ("Dead", "", []),
    ]
    assert described.groups[0].authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)

    # OffsetDelete, then DeleteGroups: the group and its offsets are gone.
    body = OffsetDeleteRequest(
        group_id=one,
        topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(
                name=topic, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)]
            )
        ],
    )
    deleted = request(coordinator_one, ApiKey.OFFSET_DELETE, 0, body)
    assert deleted.error_code == 0 and deleted.topics[0].partitions[0].error_code == 0
    assert fetch_offsets(cluster, one, topic)[0] == -1 and fetch_offsets(cluster, one, topic)[1] == 6
    result = request(coordinator_one, ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=[one, one]))
    assert [(r.group_id, r.error_code) for r in result.results] == [(one, 0)]
    result = request(coordinator_one, ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=[one]))
    assert result.results[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert set(fetch_offsets(cluster, one, topic).values()) == {-1}
