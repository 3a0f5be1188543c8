"""Stand-ins for what the transaction coordinator needs of the broker: producer ids, and the partition
leaders its markers go to (``__transaction_state`` is ``tests.coordinator.fakes.FakeOffsetsTopic``:
real logs), plus a coordinator built over them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from coordinator.transaction_coordinator import TransactionConfig, TransactionCoordinator, TxnMarker
from protocol.errors import ErrorCode
from tests.coordinator.conftest import Clock, until
from tests.coordinator.fakes import FakeOffsetsTopic

PARTITIONS = 4


class FakeProducerIds:
    def __init__(self, first: int = 1000) -> None:
        self.next = first
        self.fail: Exception | None = None

    async def generate_producer_id(self) -> int:
        await asyncio.sleep(0)  # an allocation may wait (for a ZooKeeper block)
        if self.fail is not None:
            raise self.fail
        pid = self.next
        self.next += 1
        return pid


@dataclass
class FakeMarkerTransport:
    """Partition leaders as a test sets them. Every WriteTxnMarkers is recorded; a node answers NONE
    unless ``errors`` says otherwise for a partition (one answer each, then NONE), or is unreachable."""

    leaders: dict[tuple[str, int], int | None] = field(default_factory=dict)
    default_leader: int = 1
    deleted: set[str] = field(default_factory=set)
    unreachable: set[int] = field(default_factory=set)
    errors: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    sent: list[tuple[int, list[TxnMarker]]] = field(default_factory=list)
    hold: asyncio.Event | None = None  # when set (an Event), answers wait for it
    delivered: list[tuple[int, int, bool, tuple[str, int]]] = field(default_factory=list)

    def leader_of(self, topic: str, partition: int) -> int | None:
        return self.leaders.get((topic, partition), self.default_leader)

    def topic_exists(self, topic: str) -> bool:
        return topic not in self.deleted

    async def write_markers(self, node_id: int, markers: list[TxnMarker]) -> dict[tuple[int, str, int], int]:
        self.sent.append((node_id, list(markers)))
        if self.hold is not None:
            await self.hold.wait()
        if node_id in self.unreachable:
            raise ConnectionError(f"node {node_id} is unreachable")
        answer: dict[tuple[int, str, int], int] = {}
        for marker in markers:
            for tp in marker.partitions:
                queued = self.errors.get(tp)
                error = queued.pop(0) if queued else ErrorCode.NONE
                if self.leader_of(*tp) != node_id and error == ErrorCode.NONE:
                    error = ErrorCode.NOT_LEADER_OR_FOLLOWER  # it moved meanwhile
                answer[(marker.producer_id, tp[0], tp[1])] = error
                if error == ErrorCode.NONE:
                    self.delivered.append((marker.producer_id, marker.producer_epoch, marker.commit, tp))
        return answer

    def marked(self, topic: str, partition: int) -> list[TxnMarker]:
        """The markers sent for a partition, in order."""
        return [m for _, markers in self.sent for m in markers if (topic, partition) in m.partitions]


@dataclass
class TxnEnv:
    topic: FakeOffsetsTopic
    producer_ids: FakeProducerIds
    transport: FakeMarkerTransport
    clock: Clock
    coordinator: TransactionCoordinator
    config: TransactionConfig

    def state(self, transactional_id: str) -> str:
        return self.coordinator.handle_describe(transactional_id).state

    async def settled(self, transactional_id: str, state: str, timeout: float = 5.0) -> None:
        await until(lambda: self.state(transactional_id) == state, timeout)

    async def init(
        self, tid: str, timeout_ms: int = 60000, pid: int = -1, epoch: int = -1
    ) -> tuple[int, int, int]:
        answer = self.coordinator.handle_init_producer_id(tid, timeout_ms, pid, epoch)
        result = await asyncio.wait_for(answer, 5)
        return result.error, result.producer_id, result.producer_epoch

    async def begin(self, tid: str, *partitions: tuple[str, int], timeout_ms: int = 60000) -> tuple[int, int]:
        """InitProducerId, then AddPartitions: the (producer id, epoch) of an Ongoing transaction."""
        error, pid, epoch = await self.init(tid, timeout_ms)
        assert error == ErrorCode.NONE
        added = await self.coordinator.handle_add_partitions(tid, pid, epoch, list(partitions))
        assert set(added.values()) == {ErrorCode.NONE}
        return pid, epoch

    async def reopen(self, epoch: int = 1) -> TransactionCoordinator:
        """A new coordinator over the same logs (the partitions moved to another broker)."""
        coordinator = TransactionCoordinator(
            2, self.config, self.topic, self.producer_ids, self.transport, self.clock, retry_backoff_ms=10
        )
        coordinator.startup()
        for p in range(PARTITIONS):
            coordinator.on_election(p, epoch)
        await until(lambda: coordinator.manager.owned_partitions == set(range(PARTITIONS)))
        return coordinator


async def start_env(tmp_path: Path, config: TransactionConfig | None = None) -> TxnEnv:
    config = config or TransactionConfig(num_partitions=PARTITIONS, transaction_max_timeout_ms=120000)
    topic = FakeOffsetsTopic(tmp_path, PARTITIONS)
    topic.leading.update(range(PARTITIONS))
    clock = Clock()
    producer_ids = FakeProducerIds()
    transport = FakeMarkerTransport()
    coordinator = TransactionCoordinator(
        1, config, topic, producer_ids, transport, clock, retry_backoff_ms=10
    )
    coordinator.startup()
    for p in range(PARTITIONS):
        coordinator.on_election(p, 0)
    await until(lambda: coordinator.manager.owned_partitions == set(range(PARTITIONS)))
    return TxnEnv(topic, producer_ids, transport, clock, coordinator, config)


async def stop_env(env: TxnEnv, *others: TransactionCoordinator) -> None:
    for c in (env.coordinator, *others):
        await c.shutdown()
    env.topic.close()


def ids_in_partition(partition: int, count: int, num_partitions: int = PARTITIONS) -> list[str]:
    """Transactional ids that live in the given partition."""
    from coordinator.group_metadata_manager import partition_for

    found = []
    i = 0
    while len(found) < count:
        tid = f"txn-{i}"
        if partition_for(tid, num_partitions) == partition:
            found.append(tid)
        i += 1
    return found


Predicate = Callable[[], object]
