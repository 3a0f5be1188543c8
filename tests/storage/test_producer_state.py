"""Idempotence and transactions: duplicates, sequence gaps, epochs, snapshots, LSO and the .txnindex."""

import os

import pytest

from protocol import record_batch as rb
from protocol.errors import ErrorCode
from storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from storage.producer_state import SENTINEL, AppendOrigin
from tests.storage.helpers import batch, marker, read_all

PID = 1000


def produce(log, seq, n=1, epoch=0, pid=PID, transactional=False):
    return log.append_as_leader(
        batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional),
        leader_epoch=0,
    )


def end_txn(log, commit, epoch=0, pid=PID, coordinator_epoch=0):
    return log.append_as_leader(
        marker(pid, epoch, commit=commit, coordinator_epoch=coordinator_epoch),
        leader_epoch=0,
        origin=AppendOrigin.COORDINATOR,
    )


def test_duplicate_of_any_of_the_last_five_batches_is_not_appended(make_log):
    log = make_log()
    infos = [produce(log, seq * 2, n=2) for seq in range(6)]
    end = log.log_end_offset
    for i in range(1, 6):
        dup = produce(log, i * 2, n=2)
        assert dup.duplicate
        assert (dup.first_offset, dup.last_offset) == (infos[i].first_offset, infos[i].last_offset)
    assert log.log_end_offset == end
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 0, n=2)  # older than the 5 retained batches: out of order


def test_sequence_gap_and_stale_epoch(make_log):
    log = make_log()
    produce(log, 0, n=3)
    with pytest.raises(OutOfOrderSequenceError) as e:
        produce(log, 5)
    assert e.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    produce(log, 3)
    produce(log, 0, epoch=1)  # new epoch restarts at 0
    with pytest.raises(InvalidProducerEpochError) as e:
        produce(log, 4, epoch=0)
    assert e.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 7, epoch=2)  # a new epoch must start at 0


def test_unknown_producer_accepts_any_sequence(make_log):
    """Kafka 2.5+ (KIP-360): no state for the producer, any sequence is accepted."""
    log = make_log()
    info = produce(log, 42)
    assert info.last_offset == 0
    produce(log, 43)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 45)


def test_sequence_wraps_at_int_max(make_log):
    log = make_log()
    produce(log, 2**31 - 1)
    produce(log, 0)


def test_a_failed_append_changes_nothing(make_log):
    log = make_log()
    produce(log, 0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(
            batch(1, producer_id=PID, producer_epoch=0, base_sequence=1)
            + batch(1, producer_id=PID, producer_epoch=0, base_sequence=9),
            leader_epoch=0,
        )
    assert log.log_end_offset == 1
    produce(log, 1)


def test_followers_skip_checks(make_log):
    log = make_log()
    b = batch(1, producer_id=PID, producer_epoch=0, base_sequence=50)
    log.append_as_follower(b)
    assert log.producer_state.last_entry(PID).last_seq == 50


def test_state_survives_restart_via_snapshot(make_log):
    log = make_log({"segment.bytes": 400})
    for seq in range(10):
        produce(log, seq)
    log.close()
    assert any(n.endswith(".snapshot") for n in os.listdir(log.dir))
    again = make_log({"segment.bytes": 400}, had_clean_shutdown=True)
    assert again.producer_state.last_entry(PID).last_seq == 9
    assert produce(again, 9).duplicate
    produce(again, 10)


def test_state_is_rebuilt_without_snapshots(make_log):
    log = make_log()
    for seq in range(4):
        produce(log, seq)
    log.close()
    for name in os.listdir(log.dir):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(log.dir, name))
    again = make_log(had_clean_shutdown=False)
    assert again.producer_state.last_entry(PID).last_seq == 3
    with pytest.raises(OutOfOrderSequenceError):
        produce(again, 7)


def test_corrupt_snapshot_falls_back(make_log):
    log = make_log()
    for seq in range(3):
        produce(log, seq)
    log.close()
    (snapshot,) = [n for n in os.listdir(log.dir) if n.endswith(".snapshot")]
    path = os.path.join(log.dir, snapshot)
    with open(path, "r+b") as f:
        f.seek(10)
        f.write(b"\xff\xff")
    again = make_log(had_clean_shutdown=True)
    assert again.producer_state.last_entry(PID).last_seq == 2


def test_producer_expiration(make_log, clock):
    log = make_log(producer_id_expiration_ms=1000)
    produce(log, 0)
    clock.now += 10**12  # batch timestamps are fixed in the past; expire relative to them
    assert log.remove_expired_producers() == [PID]
    produce(log, 17)  # unknown again: any sequence


def test_transaction_lso_and_commit(make_log):
    log = make_log()
    log.append_as_leader(batch(1), leader_epoch=0)
    produce(log, 0, n=2, transactional=True)  # offsets 1-2
    log.append_as_leader(batch(1), leader_epoch=0)  # 3
    log.update_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset == 1
    assert log.last_stable_offset == 1
    info = end_txn(log, commit=True)  # 4
    assert info.first_offset == 4
    assert log.last_stable_offset == 1  # completed, but the marker is not yet below the high watermark
    log.update_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset is None and log.last_stable_offset == 5
    assert log.collect_aborted_transactions(0, 5) == []


def test_abort_writes_txn_index_and_read_committed_sees_it(make_log):
    log = make_log()
    produce(log, 0, n=2, transactional=True)  # 0-1
    produce(log, 0, n=1, pid=PID + 1, transactional=True)  # 2, another open txn
    end_txn(log, commit=False)  # 3
    (aborted,) = log.collect_aborted_transactions(0, 10)
    assert (aborted.producer_id, aborted.first_offset, aborted.last_offset) == (PID, 0, 3)
    assert aborted.last_stable_offset == 2  # the other producer's open txn
    txnindex = log.active_segment.txn_index.path
    assert txnindex.endswith("00000000000000000000.txnindex") and os.path.getsize(txnindex) == 34
    log.update_high_watermark(log.log_end_offset)
    data = log.read(0, 1 << 20, upper_bound=log.last_stable_offset, include_aborted_transactions=True)
    assert [t.producer_id for t in data.aborted_transactions] == [PID]
    assert log.last_stable_offset == 2


def test_txn_index_is_rebuilt_by_recovery(make_log):
    log = make_log()
    produce(log, 0, n=2, transactional=True)
    end_txn(log, commit=False)
    log.close()
    os.unlink(log.active_segment.txn_index.path)
    again = make_log(had_clean_shutdown=False)
    assert [(t.first_offset, t.last_offset) for t in again.collect_aborted_transactions(0, 10)] == [(0, 2)]


def test_open_transaction_survives_restart(make_log):
    log = make_log()
    produce(log, 0, transactional=True)
    log.close()
    again = make_log(had_clean_shutdown=True)
    assert again.first_unstable_offset == 0
    end_txn(again, commit=True)
    again.update_high_watermark(again.log_end_offset)
    assert again.first_unstable_offset is None


def test_transactional_state_errors(make_log):
    log = make_log()
    produce(log, 0, transactional=True)
    with pytest.raises(InvalidTxnStateError):
        produce(log, 1, transactional=False)
    end_txn(log, commit=True, coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFencedError):
        end_txn(log, commit=True, coordinator_epoch=4)
    produce(log, 0, epoch=1)
    with pytest.raises(InvalidProducerEpochError):
        end_txn(log, commit=False, epoch=0, coordinator_epoch=5)


def test_control_batches_are_readable(make_log):
    log = make_log()
    produce(log, 0, transactional=True)
    end_txn(log, commit=True)
    assert [r.offset for r in read_all(log)] == [0, 1]


# --- KIP-890 part 1: transaction verification ------------------------------------------------------


def verified_log(make_log, **kwargs):
    return make_log(transaction_verification_enabled=True, **kwargs)


def produce_verified(log, seq, guard, n=1, epoch=0, pid=PID):
    return log.append_as_leader(
        batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True),
        leader_epoch=0,
        verification_guard=guard,
    )


def test_unverified_transactional_batch_from_a_client_is_refused_and_not_written(make_log):
    log = verified_log(make_log)
    with pytest.raises(InvalidTxnStateError) as e:
        produce(log, 0, transactional=True)
    assert e.value.error_code == ErrorCode.INVALID_TXN_STATE
    assert log.log_end_offset == 0 and log.first_unstable_offset is None
    with pytest.raises(InvalidTxnStateError):
        produce_verified(log, 0, SENTINEL)  # the sentinel never verifies anything


def test_verified_batch_opens_the_transaction_and_later_batches_need_no_guard(make_log):
    log = verified_log(make_log)
    guard = log.maybe_start_transaction_verification(PID, 0, 0)
    assert guard is not SENTINEL and log.verification_guard(PID) is guard
    produce_verified(log, 0, guard, n=2)
    assert log.has_ongoing_transaction(PID) and log.first_unstable_offset == 0
    assert log.verification_guard(PID) is SENTINEL  # spent by the first append
    assert log.maybe_start_transaction_verification(PID, 2, 0) is SENTINEL  # ongoing: nothing to verify
    produce(log, 2, transactional=True)  # continues the ongoing transaction
    end_txn(log, commit=True)
    with pytest.raises(InvalidTxnStateError):
        produce(log, 3, transactional=True)  # a new transaction needs a new verification


def test_a_marker_written_during_verification_voids_the_guard(make_log):
    """The ABA race KIP-890 closes: the coordinator ends the transaction (its marker reaches this
    partition) after the leader started verifying; the verified append must not reopen it."""
    log = verified_log(make_log)
    guard = log.maybe_start_transaction_verification(PID, 0, 0)
    end_txn(log, commit=False)
    with pytest.raises(InvalidTxnStateError):
        produce_verified(log, 0, guard)
    assert log.log_end_offset == 1  # only the marker
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 1
    fresh = log.maybe_start_transaction_verification(PID, 0, 0)
    assert fresh is not guard and not fresh.verify(guard)
    produce_verified(log, 0, fresh)
    assert log.first_unstable_offset == 1


def test_one_guard_covers_every_batch_of_its_append(make_log):
    log = verified_log(make_log)
    guard = log.maybe_start_transaction_verification(PID, 0, 0)
    two = batch(1, producer_id=PID, producer_epoch=0, base_sequence=0, transactional=True) + batch(
        1, producer_id=PID, producer_epoch=0, base_sequence=1, transactional=True
    )
    info = log.append_as_leader(two, leader_epoch=0, verification_guard=guard)
    assert (info.first_offset, info.last_offset) == (0, 1)


def test_verification_keeps_the_lowest_sequence_seen(make_log):
    """A higher sequence cannot overtake a lower one whose verification failed (Kafka's
    VerificationStateEntry): it is out of order until the lower one is written."""
    log = verified_log(make_log)
    log.maybe_start_transaction_verification(PID, 5, 0)
    guard = log.maybe_start_transaction_verification(PID, 3, 0)
    assert log.producer_state.verification_state_entry(PID).lowest_sequence == 3
    with pytest.raises(OutOfOrderSequenceError):
        produce_verified(log, 5, guard)
    produce_verified(log, 3, guard)
    assert log.log_end_offset == 1
    bumped = log.producer_state.maybe_create_verification_state_entry(PID + 1, 7, 0, 0)
    bumped.maybe_update_lowest_sequence_and_epoch(0, 1)  # a new epoch starts the count again
    assert (bumped.epoch, bumped.lowest_sequence) == (1, 0)


def test_unused_verifications_expire_with_producer_ids(make_log, clock):
    log = verified_log(make_log, producer_id_expiration_ms=1000)
    guard = log.maybe_start_transaction_verification(PID, 0, 0)
    clock.advance(999)
    log.remove_expired_producers()
    assert log.verification_guard(PID) is guard
    clock.advance(1)
    log.remove_expired_producers()
    assert log.verification_guard(PID) is SENTINEL
    with pytest.raises(InvalidTxnStateError):
        produce_verified(log, 0, guard)


def test_only_client_appends_need_verification(make_log):
    log = verified_log(make_log)
    log.append_as_follower(
        bytearray(
            rb.encode_batch(
                [rb.Record(0, 1_700_000_000_000, None, b"f")],
                base_offset=0,
                producer_id=PID,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=True,
            )
        )
    )
    assert log.first_unstable_offset == 0
    end_txn(log, commit=True)  # markers come from the coordinator, unverified
    log.append_as_leader(
        batch(1, producer_id=PID + 1, producer_epoch=0, base_sequence=0, transactional=True),
        leader_epoch=0,
        origin=AppendOrigin.COORDINATOR,
    )
    assert log.has_ongoing_transaction(PID + 1)


def test_without_verification_a_transactional_batch_is_trusted(make_log):
    log = make_log()  # a log nobody told to verify (storage alone, tools)
    produce(log, 0, transactional=True)
    assert log.first_unstable_offset == 0


def test_verification_does_not_touch_non_transactional_producers(make_log):
    log = verified_log(make_log)
    produce(log, 0, n=3)
    produce(log, 3)
    assert log.log_end_offset == 4 and log.producer_state.verification_state_entry(PID) is None


# --- LSO, markers and the aborted-transaction index ------------------------------------------------


def test_lso_follows_the_oldest_open_transaction_and_the_high_watermark(make_log):
    log = make_log()
    produce(log, 0, pid=1, transactional=True)  # 0: txn of 1
    produce(log, 0, pid=2, transactional=True)  # 1: txn of 2
    log.append_as_leader(batch(1), leader_epoch=0)  # 2
    log.update_high_watermark(3)
    assert log.last_stable_offset == 0
    end_txn(log, commit=True, pid=2)  # 3: 2 commits, 1 still open
    log.update_high_watermark(4)
    assert log.last_stable_offset == 0
    end_txn(log, commit=False, pid=1)  # 4: 1 aborts
    assert log.last_stable_offset == 0  # the abort marker is not replicated yet
    log.update_high_watermark(4)
    assert log.last_stable_offset == 0
    log.update_high_watermark(5)
    assert log.first_unstable_offset is None and log.last_stable_offset == 5
    (aborted,) = log.collect_aborted_transactions(0, 5)
    assert (aborted.producer_id, aborted.first_offset, aborted.last_offset, aborted.last_stable_offset) == (
        1,
        0,
        4,
        5,
    )


def test_an_abort_indexed_in_a_later_segment_is_found(make_log):
    """An aborted transaction whose marker lies in a segment past the fetch's upper bound (another
    producer's open transaction holds the LSO below it) must still be returned, even when an earlier
    segment holds another abort (Kafka's search goes on until an entry's LSO reaches the bound)."""
    log = make_log()
    produce(log, 0, pid=1, transactional=True)  # 0: A, aborted later in a later segment
    produce(log, 0, pid=3, transactional=True)  # 1: C
    end_txn(log, commit=False, pid=3)  # 2: C aborted, indexed in segment 0 with LSO 0
    produce(log, 0, pid=2, transactional=True)  # 3: B, stays open
    log.roll()
    end_txn(log, commit=False, pid=1)  # 4: A aborted, indexed in segment 4 with LSO 3
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 3
    found = log.collect_aborted_transactions(0, log.last_stable_offset)
    assert sorted((t.producer_id, t.first_offset) for t in found) == [(1, 0), (3, 1)]
    data = log.read(0, 1 << 20, upper_bound=log.last_stable_offset, include_aborted_transactions=True)
    assert {t.producer_id for t in data.aborted_transactions} == {1, 3}


def test_ongoing_transaction_survives_an_unclean_restart_without_snapshots(make_log):
    log = make_log({"segment.bytes": 300})
    log.append_as_leader(batch(1), leader_epoch=0)  # 0
    produce(log, 0, pid=7, transactional=True)  # 1
    for _ in range(5):
        log.append_as_leader(batch(1), leader_epoch=0)
    assert log.num_segments > 1
    log.close()
    for name in os.listdir(log.dir):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(log.dir, name))
    again = make_log({"segment.bytes": 300}, had_clean_shutdown=False)
    again.update_high_watermark(again.log_end_offset)
    assert again.first_unstable_offset == 1 and again.last_stable_offset == 1
    assert again.producer_state.last_entry(7).current_txn_first_offset == 1
    end_txn(again, commit=True, pid=7)
    again.update_high_watermark(again.log_end_offset)
    assert again.last_stable_offset == again.log_end_offset


def test_snapshot_taken_while_a_transaction_is_open_restores_it(make_log):
    log = make_log({"segment.bytes": 300})
    produce(log, 0, pid=7, transactional=True)  # 0
    log.roll()  # snapshot at 1 holds the open transaction
    log.append_as_leader(batch(1), leader_epoch=0)
    log.close()
    snapshots = sorted(n for n in os.listdir(log.dir) if n.endswith(".snapshot"))
    assert snapshots[0] == "00000000000000000001.snapshot"
    again = make_log({"segment.bytes": 300}, had_clean_shutdown=True)
    assert again.producer_state.last_entry(7).current_txn_first_offset == 0
    assert again.first_unstable_offset == 0
    end_txn(again, commit=False, pid=7)
    assert [(t.first_offset, t.last_offset) for t in again.collect_aborted_transactions(0, 10)] == [(0, 2)]
