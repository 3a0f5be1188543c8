"""The broker's application of the controller's LeaderAndIsr and StopReplica, in process over real
logs: a request of many partitions creates their logs off the event loop and yields to it, yet applies
its partitions in order and completely before it answers, never interleaved with another such request;
each request logs a few summary lines however many partitions it names; and a log that cannot be
created (no descriptors left) fails only its partition, with KAFKA_STORAGE_ERROR."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import pytest

from broker.metadata_cache import BrokerInfo, MetadataCache
from broker.replica_manager import ReplicaManager
from protocol.errors import ErrorCode
from protocol.record_batch import Record, encode_batch
from storage.log_manager import LogManager
from tests.broker.controller_requests import leader_and_isr, stop_replica
from tests.storage.helpers import descriptors_limited

BROKER = 1
MANY = 1_000


@pytest.fixture
def manager(logs: LogManager) -> Iterator[ReplicaManager]:
    cache = MetadataCache("cluster")
    cache.add_broker(BrokerInfo(BROKER, None))
    replicas = ReplicaManager(BROKER, logs, cache)
    try:
        yield replicas
    finally:
        replicas.shutdown()


def led(topic: str, count: int, leader_epoch: int = 0) -> object:
    return leader_and_isr(topic, {p: [BROKER] for p in range(count)}, leader_epoch=leader_epoch)


def produce_one(manager: ReplicaManager, topic: str, partition: int) -> int:
    batch = encode_batch([Record(0, int(time.time() * 1000), None, b"v")], base_offset=0)
    [result] = manager.append_records([(topic, partition, memoryview(bytearray(batch)))], 1).values()
    return result.error


async def test_many_partitions_are_applied_without_holding_the_loop(manager: ReplicaManager) -> None:
    """The loop keeps turning while a LeaderAndIsr of MANY new partitions is applied (before, it was
    held for the whole application); the answer comes once all of them lead, in the request's order."""
    roles: list[tuple[str, int, bool]] = []
    manager.role_listeners.append(lambda topic, p, leads, _epoch: roles.append((topic, p, leads)))
    gaps: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    error, errors, _ = await manager.become_leader_or_follower(led("wide", MANY), 6)
    done.set()
    await ticker

    assert error == ErrorCode.NONE
    assert list(errors) == [("wide", p) for p in range(MANY)]
    assert set(errors.values()) == {ErrorCode.NONE}
    assert roles == [("wide", p, True) for p in range(MANY)]
    assert all(manager.get_partition("wide", p).is_leader for p in range(MANY))  # type: ignore[union-attr]
    # Generous bounds for a shared machine (a garbage collection alone can take ~0.1 s): the point
    # is that the loop ran all along.
    assert len(gaps) >= 10
    assert max(gaps) < 0.5


async def test_a_partition_not_yet_applied_answers_as_before(manager: ReplicaManager) -> None:
    """While a request is being applied, a produce to one of its partitions not applied yet is refused
    as if the request had not come (this broker hosts no such partition); after, it is accepted."""
    seen: list[int] = []
    applying = asyncio.create_task(manager.become_leader_or_follower(led("wide", MANY), 6))
    while not applying.done():
        seen.append(produce_one(manager, "wide", MANY - 1))
        await asyncio.sleep(0)
    await applying
    assert seen and set(seen) == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert produce_one(manager, "wide", MANY - 1) == ErrorCode.NONE


async def test_requests_are_applied_one_after_the_other(manager: ReplicaManager) -> None:
    """Two LeaderAndIsr and a StopReplica sent at once are applied whole, one after the other, in the
    order they came (Kafka's replicaStateChangeLock)."""
    roles: list[tuple[str, bool]] = []
    manager.role_listeners.append(lambda topic, _p, leads, _epoch: roles.append((topic, leads)))
    first = asyncio.create_task(manager.become_leader_or_follower(led("a", 300), 6))
    second = asyncio.create_task(manager.become_leader_or_follower(led("b", 300), 6))
    stop = asyncio.create_task(manager.stop_replicas(stop_replica("a", list(range(300)), delete=True), 3))
    await asyncio.gather(first, second, stop)
    assert roles == [("a", True)] * 300 + [("b", True)] * 300 + [("a", False)] * 300
    assert manager.get_partition("a", 0) is None and manager.log_manager.get_log("a", 0) is None
    assert manager.get_partition("b", 299) is not None


async def test_a_resend_logs_one_line(manager: ReplicaManager, caplog: pytest.LogCaptureFixture) -> None:
    """A controller resending MANY partitions at an epoch the broker has: each is refused as before,
    with one INFO line for the request (before, one a partition: ~520,000 lines after a crash)."""
    await manager.become_leader_or_follower(led("wide", MANY), 6)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="broker.replica_manager"):
        _, errors, _ = await manager.become_leader_or_follower(led("wide", MANY), 6)
    assert set(errors.values()) == {ErrorCode.STALE_CONTROLLER_EPOCH}
    ignored = [r for r in caplog.records if r.getMessage().startswith("ignoring LeaderAndIsr")]
    assert len(ignored) == 1 and ignored[0].levelno == logging.INFO
    assert f"for {MANY} partitions" in ignored[0].getMessage()
    assert "wide-0 (epoch 0 <= 0), wide-1 (epoch 0 <= 0)" in ignored[0].getMessage()
    assert f"and {MANY - 5} more" in ignored[0].getMessage()
    assert len(caplog.records) == 2  # and the summary of the request


async def test_a_fenced_request_changes_nothing(manager: ReplicaManager) -> None:
    error, errors, _ = await manager.become_leader_or_follower(
        led("wide", 10), 6, fenced=ErrorCode.STALE_CONTROLLER_EPOCH
    )
    assert error == ErrorCode.STALE_CONTROLLER_EPOCH
    assert set(errors.values()) == {ErrorCode.STALE_CONTROLLER_EPOCH}
    assert manager.partitions() == [] and manager.log_manager.all_logs() == []


async def test_out_of_descriptors_fails_only_those_partitions(
    manager: ReplicaManager, caplog: pytest.LogCaptureFixture
) -> None:
    """When the descriptors run out, the partitions whose logs cannot be created get
    KAFKA_STORAGE_ERROR, logged once with their count; the others lead and take produces, and a
    resend once descriptors are free brings the failed ones online (before: the handler crashed)."""
    with descriptors_limited(120), caplog.at_level(logging.INFO, logger="broker.replica_manager"):
        error, errors, _ = await manager.become_leader_or_follower(led("wide", 300), 6)
    assert error == ErrorCode.NONE
    failed = [tp for tp, code in errors.items() if code == ErrorCode.KAFKA_STORAGE_ERROR]
    applied = [tp for tp, code in errors.items() if code == ErrorCode.NONE]
    assert failed and applied and len(failed) + len(applied) == 300
    [line] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert f"cannot open the logs of {len(failed)} partitions" in line.getMessage()
    assert "Too many open files" in line.getMessage()
    assert produce_one(manager, *applied[-1]) == ErrorCode.NONE
    assert produce_one(manager, *failed[0]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    _, errors, _ = await manager.become_leader_or_follower(led("wide", 300), 6)
    assert {errors[tp] for tp in failed} == {ErrorCode.NONE}
    assert {errors[tp] for tp in applied} == {ErrorCode.STALE_CONTROLLER_EPOCH}
    assert produce_one(manager, *failed[0]) == ErrorCode.NONE


async def test_stop_replica_of_many_partitions_logs_one_line(
    manager: ReplicaManager, caplog: pytest.LogCaptureFixture
) -> None:
    await manager.become_leader_or_follower(led("wide", MANY), 6)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="broker.replica_manager"):
        _, errors = await manager.stop_replicas(stop_replica("wide", list(range(MANY)), delete=True), 3)
    assert set(errors.values()) == {ErrorCode.NONE}
    assert manager.partitions() == [] and manager.log_manager.all_logs() == []
    [line] = caplog.records
    assert f"stopped and deleted {MANY} replicas: wide-0, wide-1" in line.getMessage()
