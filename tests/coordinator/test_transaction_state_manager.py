"""TransactionStateManager: the partition mapping, replaying __transaction_state (tombstones, records
that cannot be read, small read buffers), loading and unloading with coordinator epochs, writes
completed only once written and only under the same coordinator epoch, timed-out transactions."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.group_metadata_manager import partition_for
from coordinator.transaction_metadata import TransactionMetadata, TransactionState, TxnTransitMetadata
from coordinator.transaction_records import decode_value, transaction_log_key, transaction_log_value
from coordinator.transaction_state_manager import (
    TransactionStateConfig,
    TransactionStateManager,
    metadata_from_value,
    read_partition,
    value_from_transit,
)
from protocol import record_batch
from protocol.errors import ErrorCode
from tests.coordinator.conftest import Clock, until
from tests.coordinator.fakes import FakeOffsetsTopic

S = TransactionState


@pytest.fixture
def topic(tmp_path: Path) -> Iterator[FakeOffsetsTopic]:
    t = FakeOffsetsTopic(tmp_path, 1)
    t.leading.add(0)
    yield t
    t.close()


def manager(topic: FakeOffsetsTopic, clock: Clock | None = None) -> TransactionStateManager:
    return TransactionStateManager(1, TransactionStateConfig(num_partitions=1), topic, clock or Clock())


def write(topic: FakeOffsetsTopic, *records: tuple[bytes, bytes | None]) -> None:
    batch = record_batch.encode_batch(
        [record_batch.Record(i, 1, k, v) for i, (k, v) in enumerate(records)], base_offset=0
    )
    topic.append(0, batch, 1, 1000)


def value(state: S, pid: int = 7, epoch: int = 1, partitions: set[tuple[str, int]] | None = None) -> bytes:
    transit = TxnTransitMetadata(pid, -1, epoch, -1, 60000, state, frozenset(partitions or ()), 5, 6)
    return transaction_log_value(value_from_transit(transit))


def test_partition_mapping_is_the_group_coordinators() -> None:
    m = TransactionStateManager(1, TransactionStateConfig(num_partitions=50), None, Clock())  # type: ignore[arg-type]
    for tid in ["a", "my-transactional-id", "polygenelubricants", "é"]:
        assert m.partition_for(tid) == partition_for(tid, 50)
    assert m.partition_for("polygenelubricants") == 0


def test_timeout_validation() -> None:
    m = TransactionStateManager(1, TransactionStateConfig(transaction_max_timeout_ms=1000), None, Clock())  # type: ignore[arg-type]
    assert [m.validate_transaction_timeout_ms(t) for t in (-1, 0, 1, 1000, 1001)] == [
        False,
        False,
        True,
        True,
        False,
    ]


def test_records_round_trip_through_metadata() -> None:
    partitions = frozenset({("b", 1), ("a", 2), ("a", 0)})
    transit = TxnTransitMetadata(7, 3, 2, -1, 1000, S.ONGOING, partitions, 10, 20)
    v = value_from_transit(transit)
    assert v.transaction_partitions == [("a", [0, 2]), ("b", [1])]
    m = metadata_from_value("tx", decode_value(transaction_log_value(v)))
    assert (m.producer_id, m.producer_epoch, m.last_producer_epoch, m.txn_timeout_ms, m.state) == (
        7,
        2,
        -1,
        1000,
        S.ONGOING,
    )
    assert m.topic_partitions == {("a", 0), ("a", 2), ("b", 1)}
    assert (m.txn_start_timestamp, m.txn_last_update_timestamp, m.pending_state) == (10, 20, None)
    empty = TxnTransitMetadata(7, 3, 2, -1, 1000, S.EMPTY, frozenset(), -1, 20)
    assert value_from_transit(empty).transaction_partitions is None
    with pytest.raises(ValueError):
        value_from_transit(TxnTransitMetadata(7, 3, 2, -1, 1000, S.EMPTY, frozenset({("a", 0)}), -1, 20))


async def test_replay_keeps_the_last_record_and_honours_tombstones(topic: FakeOffsetsTopic) -> None:
    for epoch in range(5):
        write(topic, (transaction_log_key("t1"), value(S.EMPTY, epoch=epoch)))
    write(topic, (transaction_log_key("t2"), value(S.ONGOING, partitions={("x", 0)})))
    write(topic, (transaction_log_key("gone"), value(S.EMPTY)), (transaction_log_key("gone"), None))
    write(topic, (transaction_log_key("t3"), value(S.PREPARE_COMMIT, partitions={("x", 1)})))
    loaded = read_partition(topic.logs[0], 50, "test")  # smaller than one batch: one batch per read
    assert sorted(loaded) == ["t1", "t2", "t3"]
    assert loaded["t1"].producer_epoch == 4 and loaded["t1"].state is S.EMPTY
    assert loaded["t2"].topic_partitions == {("x", 0)}
    assert loaded["t3"].state is S.PREPARE_COMMIT


async def test_unreadable_records_are_skipped(
    topic: FakeOffsetsTopic, caplog: pytest.LogCaptureFixture
) -> None:
    write(topic, (b"\x00\x05junk", b"x"), (transaction_log_key("bad"), b"\x00\x09"))
    write(topic, (transaction_log_key("bad-state"), value(S.EMPTY)[:16] + b"\x09" + value(S.EMPTY)[17:]))
    write(topic, (transaction_log_key("ok"), value(S.EMPTY)))
    with caplog.at_level(logging.WARNING):
        loaded = read_partition(topic.logs[0], 1 << 20, "test")
    assert list(loaded) == ["ok"]
    assert sum("ignoring the record" in r.message for r in caplog.records) == 3


async def test_loading_answers_load_in_progress_then_the_metadata(topic: FakeOffsetsTopic) -> None:
    write(topic, (transaction_log_key("t"), value(S.EMPTY)))
    m = manager(topic)
    assert m.get_transaction_state("t") == (ErrorCode.NOT_COORDINATOR, None)
    m.load_transactions_for_txn_topic_partition(0, 3, lambda *a: None)
    assert m.get_transaction_state("t") == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None)
    await until(lambda: 0 in m.owned_partitions)
    error, current = m.get_transaction_state("t")
    assert error == ErrorCode.NONE and current is not None and current.coordinator_epoch == 3
    assert m.get_transaction_state("unknown") == (ErrorCode.NONE, None)
    created = TransactionMetadata("new", 1, -1, -1, -1, 1000, S.EMPTY)
    assert m.put_transaction_state_if_not_exists(created)[1].metadata is created  # type: ignore[union-attr]
    again = TransactionMetadata("new", 2, -1, -1, -1, 1000, S.EMPTY)
    assert m.put_transaction_state_if_not_exists(again)[1].metadata is created  # type: ignore[union-attr]


async def test_prepared_transactions_are_handed_over_after_loading(topic: FakeOffsetsTopic) -> None:
    write(topic, (transaction_log_key("c"), value(S.PREPARE_COMMIT, partitions={("x", 0)})))
    write(topic, (transaction_log_key("a"), value(S.PREPARE_ABORT, partitions={("x", 1)})))
    write(topic, (transaction_log_key("o"), value(S.ONGOING, partitions={("x", 2)})))
    m = manager(topic)
    handed: list[tuple[int, bool, str, S]] = []

    def send(epoch: int, commit: bool, metadata: TransactionMetadata, transit: TxnTransitMetadata) -> None:
        # Not loading any more by then: the completion can be written.
        assert m.get_transaction_state(metadata.transactional_id)[0] == ErrorCode.NONE
        handed.append((epoch, commit, metadata.transactional_id, transit.txn_state))

    m.load_transactions_for_txn_topic_partition(0, 4, send)
    await until(lambda: 0 in m.owned_partitions)
    assert sorted(handed) == [(4, False, "a", S.COMPLETE_ABORT), (4, True, "c", S.COMPLETE_COMMIT)]


async def test_unload_while_loading_drops_the_load(topic: FakeOffsetsTopic) -> None:
    write(topic, (transaction_log_key("t"), value(S.EMPTY)))
    m = manager(topic)
    m.load_transactions_for_txn_topic_partition(0, 3, lambda *a: None)
    m.remove_transactions_for_txn_topic_partition(0, 4)
    await until(lambda: not m._loads)
    assert m.get_transaction_state("t") == (ErrorCode.NOT_COORDINATOR, None)
    m.load_transactions_for_txn_topic_partition(0, 5, lambda *a: None)
    await until(lambda: 0 in m.owned_partitions)
    assert m.get_transaction_state("t")[1] is not None


async def test_load_without_leadership_loads_nothing(topic: FakeOffsetsTopic) -> None:
    write(topic, (transaction_log_key("t"), value(S.EMPTY)))
    topic.leading.clear()
    m = manager(topic)
    m.load_transactions_for_txn_topic_partition(0, 1, lambda *a: None)
    await until(lambda: 0 in m.owned_partitions)
    assert m.get_transaction_state("t") == (ErrorCode.NONE, None)


async def test_a_write_is_applied_only_once_written_and_under_the_same_epoch(topic: FakeOffsetsTopic) -> None:
    m = manager(topic)
    m.load_transactions_for_txn_topic_partition(0, 1, lambda *a: None)
    await until(lambda: 0 in m.owned_partitions)
    meta = TransactionMetadata("t", 9, -1, 0, -1, 1000, S.EMPTY, set(), -1, 1)
    m.put_transaction_state_if_not_exists(meta)
    topic.hold = True
    written = m.append_transaction_to_log("t", 1, meta.prepare_add_partitions({("x", 0)}, 2))
    assert not written.done() and meta.state is S.EMPTY and meta.pending_state is S.ONGOING
    topic.release()
    assert await written == ErrorCode.NONE and meta.state is S.ONGOING and meta.pending_state is None
    # A stale coordinator epoch is refused before writing.
    transit = meta.prepare_add_partitions({("x", 1)}, 3)
    assert await m.append_transaction_to_log("t", 0, transit) == ErrorCode.NOT_COORDINATOR
    meta.pending_state = None
    # A failed write clears the pending state unless the caller retries it.
    topic.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
    transit = meta.prepare_add_partitions({("x", 1)}, 3)
    retried = await m.append_transaction_to_log("t", 1, transit, lambda e: True)
    assert retried == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert meta.pending_state is S.ONGOING
    assert await m.append_transaction_to_log("t", 1, transit) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert meta.pending_state is None and meta.topic_partitions == {("x", 0)}


async def test_timed_out_transactions(topic: FakeOffsetsTopic) -> None:
    clock = Clock()
    m = manager(topic, clock)
    m.load_transactions_for_txn_topic_partition(0, 1, lambda *a: None)
    await until(lambda: 0 in m.owned_partitions)
    now = clock.now
    for tid, state, start, timeout in [
        ("late", S.ONGOING, now - 2000, 1000),
        ("early", S.ONGOING, now - 500, 1000),
        ("done", S.COMPLETE_COMMIT, now - 5000, 1000),
        ("pending", S.ONGOING, now - 5000, 1000),
    ]:
        meta = TransactionMetadata(tid, 1, -1, 0, -1, timeout, state, {("x", 0)}, start, start)
        m.put_transaction_state_if_not_exists(meta)
        if tid == "pending":
            meta.prepare_abort_or_commit(S.PREPARE_COMMIT, now)
    assert [(t.transactional_id, t.producer_id, t.producer_epoch) for t in m.timed_out_transactions()] == [
        ("late", 1, 0)
    ]
