"""ClusterSnapshot: what the console shows of a cluster at one moment, read with the admin APIs any
Kafka-compatible cluster answers.

Metadata gives brokers, the controller, topics and each partition's leader, replicas and ISR;
DescribeLogDirs (each live broker) the replicas' sizes; ListOffsets (each leader) the log start and end
offsets; DescribeConfigs each topic's ``min.insync.replicas``. ``SnapshotCache`` shares one snapshot
between every page and viewer for ``max_age`` seconds, so that a page costs the cluster a few requests
however many people look at it. A broker that holds replicas but is missing from Metadata is down.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from console.client import ClusterUnavailable, ConsoleClient
from protocol.api import ApiKey
from protocol.errors import ErrorCode, description
from protocol.messages import DescribeConfigsRequest, DescribeLogDirsRequest
from tools.admin_client import AdminClient, AdminError
from tools.get_offsets import list_offsets
from tools.partition_leaders import Failure, TopicPartition

TOPIC_RESOURCE = 2  # DescribeConfigs' resource type for a topic
EARLIEST, LATEST = -2, -1
OFFSETS_TIMEOUT_MS = 5_000
DEFAULT_MIN_ISR = 1


@dataclass
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    start_offset: int | None = None  # None: the leader did not say
    end_offset: int | None = None
    size: int | None = None  # bytes in the leader's replica (DescribeLogDirs)
    error: str | None = None  # the partition's error in Metadata, in words

    @property
    def offline(self) -> bool:
        return self.leader < 0

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def messages(self) -> int | None:
        if self.start_offset is None or self.end_offset is None:
            return None
        return max(0, self.end_offset - self.start_offset)


@dataclass
class TopicInfo:
    name: str
    internal: bool
    partitions: list[PartitionInfo]
    min_insync_replicas: int = DEFAULT_MIN_ISR
    error: str | None = None
    message_rate: float | None = None  # records/s appended, from the end offsets of two snapshots

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)

    @property
    def size(self) -> int:
        return sum(p.size or 0 for p in self.partitions)

    @property
    def messages(self) -> int:
        return sum(p.messages or 0 for p in self.partitions)

    def under_min_isr(self) -> list[PartitionInfo]:
        return [p for p in self.partitions if not p.offline and len(p.isr) < self.min_insync_replicas]


@dataclass
class BrokerInfo:
    id: int
    host: str | None
    port: int | None
    rack: str | None
    up: bool
    controller: bool = False
    leaders: int = 0
    replicas: int = 0
    log_size: int | None = None  # None: its log dirs could not be read


@dataclass
class ClusterSnapshot:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicInfo]
    taken_at: float = field(default_factory=time.time)
    warnings: list[str] = field(default_factory=list)  # what could not be read, in words

    def partitions(self) -> Iterable[PartitionInfo]:
        for topic in self.topics.values():
            yield from topic.partitions

    @property
    def under_replicated(self) -> int:
        return sum(1 for p in self.partitions() if p.under_replicated)

    @property
    def under_min_isr(self) -> int:
        return sum(len(t.under_min_isr()) for t in self.topics.values())

    @property
    def offline(self) -> int:
        return sum(1 for p in self.partitions() if p.offline)


async def take_snapshot(admin: AdminClient) -> ClusterSnapshot:
    """Reads the whole cluster: Metadata, then log dirs, offsets and min ISR settings together."""
    metadata = await admin.metadata(None)
    brokers = {
        b.node_id: BrokerInfo(
            b.node_id, b.host, b.port, b.rack, up=True, controller=b.node_id == metadata.controller_id
        )
        for b in metadata.brokers
    }
    topics: dict[str, TopicInfo] = {}
    for t in metadata.topics:
        if t.error_code != ErrorCode.NONE:
            topics[t.name] = TopicInfo(t.name, t.is_internal, [], error=description(t.error_code))
            continue
        partitions = [
            PartitionInfo(
                t.name,
                p.partition_index,
                p.leader_id,
                p.leader_epoch,
                list(p.replica_nodes),
                list(p.isr_nodes),
                list(p.offline_replicas),
                error=None
                if p.error_code in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)
                else description(p.error_code),
            )
            for p in sorted(t.partitions, key=lambda p: p.partition_index)
        ]
        topics[t.name] = TopicInfo(t.name, t.is_internal, partitions)
    for p in (p for t in topics.values() for p in t.partitions):
        for replica in p.replicas:
            broker = brokers.setdefault(replica, BrokerInfo(replica, None, None, None, up=False))
            broker.replicas += 1
        if p.leader in brokers:
            brokers[p.leader].leaders += 1
    snapshot = ClusterSnapshot(
        metadata.cluster_id, metadata.controller_id, dict(sorted(brokers.items())), topics
    )
    await asyncio.gather(
        _read_log_dirs(admin, snapshot), _read_offsets(admin, snapshot), _read_min_isr(admin, snapshot)
    )
    return snapshot


async def _read_log_dirs(admin: AdminClient, snapshot: ClusterSnapshot) -> None:
    sizes: dict[tuple[str, int, int], int] = {}

    async def ask(broker: BrokerInfo) -> None:
        try:
            response = await admin.send_to_node(
                ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest(topics=None), broker.id
            )
        except AdminError as e:
            snapshot.warnings.append(f"Log dirs of broker {broker.id}: {e}")
            return
        if not response.results:
            code = response.error_code or ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            snapshot.warnings.append(f"Log dirs of broker {broker.id}: {description(code)}")
            return
        total = 0
        for log_dir in response.results:
            for topic in log_dir.topics:
                for p in topic.partitions:
                    if not p.is_future_key:
                        sizes[(topic.name, p.partition_index, broker.id)] = p.partition_size
                        total += p.partition_size
        broker.log_size = total

    await asyncio.gather(*(ask(b) for b in snapshot.brokers.values() if b.up))
    for p in snapshot.partitions():
        p.size = sizes.get((p.topic, p.partition, p.leader))


async def _read_offsets(admin: AdminClient, snapshot: ClusterSnapshot) -> None:
    partitions: list[TopicPartition] = [
        (p.topic, p.partition) for p in snapshot.partitions() if not p.offline
    ]
    if not partitions:
        return

    earliest, latest = await asyncio.gather(
        list_offsets(admin, partitions, EARLIEST, OFFSETS_TIMEOUT_MS),
        list_offsets(admin, partitions, LATEST, OFFSETS_TIMEOUT_MS),
    )
    failed = 0
    for p in snapshot.partitions():
        start, end = earliest.get((p.topic, p.partition)), latest.get((p.topic, p.partition))
        if isinstance(start, int) and isinstance(end, int):
            p.start_offset, p.end_offset = start, end
        elif isinstance(start, Failure) or isinstance(end, Failure):
            failed += 1
    if failed:
        snapshot.warnings.append(f"Offsets of {failed} partition(s) could not be read")


async def _read_min_isr(admin: AdminClient, snapshot: ClusterSnapshot) -> None:
    names = [name for name, t in snapshot.topics.items() if t.error is None]
    if not names:
        return
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=TOPIC_RESOURCE, resource_name=name, configuration_keys=["min.insync.replicas"]
            )
            for name in names
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    try:
        response = await admin.send(ApiKey.DESCRIBE_CONFIGS, request)
    except AdminError as e:
        snapshot.warnings.append(f"Topic configs: {e}")
        return
    for result in response.results:
        topic = snapshot.topics.get(result.resource_name)
        if topic is None or result.error_code != ErrorCode.NONE:
            continue
        for config in result.configs:
            if config.name == "min.insync.replicas" and config.value and config.value.isdigit():
                topic.min_insync_replicas = int(config.value)


class SnapshotCache:
    """One snapshot shared by every page for ``max_age`` seconds; concurrent readers wait for the same
    refresh. ClusterUnavailable, in words, when the cluster cannot be read."""

    def __init__(self, client: ConsoleClient, max_age: float = 2.0) -> None:
        self.client = client
        self.max_age = max_age
        self._snapshot: ClusterSnapshot | None = None
        self._refreshing: asyncio.Task[ClusterSnapshot] | None = None

    async def get(self, fresh: bool = False) -> ClusterSnapshot:
        """The shared snapshot; ``fresh``: one taken after this call (after an action changed the cluster)."""
        snapshot = self._snapshot
        if snapshot is not None and not fresh and time.time() - snapshot.taken_at < self.max_age:
            return snapshot
        if self._refreshing is None or fresh:
            self._refreshing = asyncio.ensure_future(self._take())
        task = self._refreshing
        try:
            return await asyncio.shield(task)
        finally:
            if self._refreshing is task and task.done():
                self._refreshing = None

    async def knowing(self, topic: str | None) -> ClusterSnapshot:
        """The shared snapshot, taken again when it does not know ``topic`` yet (one just created)."""
        snapshot = await self.get()
        if topic and topic not in snapshot.topics:
            snapshot = await self.get(fresh=True)
        return snapshot

    def invalidate(self) -> None:
        self._snapshot = None

    async def _take(self) -> ClusterSnapshot:
        admin = await self.client.admin()
        try:
            snapshot = await take_snapshot(admin)
        except (AdminError, OSError, TimeoutError) as e:
            await self.client.reset()
            raise ClusterUnavailable(f"Cannot read the cluster's metadata: {e}") from None
        if self._snapshot is not None:
            _rates(self._snapshot, snapshot)
        self._snapshot = snapshot
        return snapshot


def _rates(before: ClusterSnapshot, after: ClusterSnapshot) -> None:
    elapsed = after.taken_at - before.taken_at
    if elapsed <= 0:
        return
    for name, topic in after.topics.items():
        old = before.topics.get(name)
        if old is None:
            continue
        ends = {p.partition: p.end_offset for p in old.partitions if p.end_offset is not None}
        appended = [
            p.end_offset - ends[p.partition]
            for p in topic.partitions
            if p.end_offset is not None and p.partition in ends
        ]
        if appended:
            topic.message_rate = max(0, sum(appended)) / elapsed
