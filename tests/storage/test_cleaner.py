"""Compaction: latest value per key, offsets kept, tombstones after delete.retention.ms, dirty ratio,
compaction lag, the checkpoint, concurrent appends, aborts on truncation, and transactions: aborted
records dropped, markers kept while their transaction has a batch left then removed after a delete
horizon, the transaction index of cleaned segments, and read_committed reads of a cleaned log."""

import os
import random
import threading

from protocol import record_batch as rb
from storage.checkpoints import OffsetCheckpointFile
from storage.cleaner import LogCleaner
from storage.producer_state import AppendOrigin
from tests.storage.helpers import batch, marker, read_all

COMPACT = {"cleanup.policy": "compact", "segment.bytes": 1024, "min.cleanable.dirty.ratio": 0.01}


def put(log, key, value, **kwargs):
    values = [value]
    return log.append_as_leader(batch(values, keys=[key], **kwargs), leader_epoch=0)


def fill_keys(log, rounds, keys=10):
    for r in range(rounds):
        for k in range(keys):
            put(log, b"k%d" % k, b"r%d" % r)
    log.update_high_watermark(log.log_end_offset)


def latest(records):
    out = {}
    for r in records:
        out[r.key] = r.value
    return {k: v for k, v in out.items() if v is not None}


def test_compaction_keeps_latest_value_per_key_and_offsets(make_log):
    log = make_log(COMPACT)
    fill_keys(log, 10)
    before = read_all(log)
    active = log.active_segment
    cleaner = LogCleaner(lambda: [log])
    stats = cleaner.clean_once()
    assert stats is not None and stats.segments_cleaned > 0
    after = read_all(log)
    assert latest(after) == latest(before)
    offsets = [r.offset for r in after]
    assert offsets == sorted(offsets) and set(offsets) <= {r.offset for r in before}
    cleaned_part = [r for r in after if r.offset < stats.end_offset]
    assert len({r.key for r in cleaned_part}) == len(cleaned_part)  # one record per key
    assert log.active_segment is active  # never touched
    assert log.log_end_offset == 100
    assert not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(log.dir))
    for segment in log.segments:
        segment.sanity_check()
    assert log.append_as_leader(batch([b"x"], keys=[b"k1"]), leader_epoch=0).first_offset == 100


def test_checkpoint_records_first_dirty_offset(make_log, tmp_path):
    log = make_log(COMPACT)
    fill_keys(log, 5)
    cleaner = LogCleaner(lambda: [log])
    stats = cleaner.clean_once()
    checkpoint = OffsetCheckpointFile(str(tmp_path / "cleaner-offset-checkpoint")).read()
    assert checkpoint == {("topic", 0): stats.end_offset}
    assert cleaner.first_dirty_offset(log) == stats.end_offset
    assert cleaner.clean_once() is None  # nothing dirty left


def test_dirty_ratio_threshold(make_log):
    log = make_log({**COMPACT, "min.cleanable.dirty.ratio": 0.9})
    fill_keys(log, 5)
    cleaner = LogCleaner(lambda: [log])
    cleaner.clean(log)  # forced: everything cleaned once
    fill_keys(log, 1)  # a little dirt over a large clean section
    candidate = cleaner.grab_filthiest_log()
    assert candidate is None


def test_min_compaction_lag_protects_recent_segments(make_log, clock):
    log = make_log({**COMPACT, "min.compaction.lag.ms": 60_000})
    for r in range(6):
        for k in range(10):
            put(log, b"k%d" % k, b"r%d" % r, timestamp=clock.now - 120_000 if r < 3 else clock.now)
    log.update_high_watermark(log.log_end_offset)
    cleaner = LogCleaner(lambda: [log])
    stats = cleaner.clean_once()
    assert stats.end_offset <= 40  # stops at the first segment with a record younger than the lag
    recent = [r for r in read_all(log) if r.offset >= 30]
    assert len(recent) == 30


def test_tombstones_removed_after_delete_retention(make_log, clock):
    log = make_log({**COMPACT, "delete.retention.ms": 1000})
    fill_keys(log, 3)
    for k in range(5):
        put(log, b"k%d" % k, None)
    fill_keys(log, 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    cleaner = LogCleaner(lambda: [log], time_ms=clock)
    cleaner.clean_once()
    after_first = read_all(log)
    tombstones = [r for r in after_first if r.value is None]
    assert {r.key for r in tombstones} == {b"k%d" % k for k in range(5)}
    headers = [h for s in log.segments for _, h in s.batches() if h.records_count and h.has_delete_horizon]
    assert headers and all(h.base_timestamp == clock.now + 1000 for h in headers)
    clock.advance(999)
    cleaner.clean(log)
    assert len([r for r in read_all(log) if r.value is None]) == 5
    clock.advance(1)
    assert cleaner.grab_filthiest_log() is not None  # the horizon passed: worth cleaning again
    cleaner.clean_once()
    after = read_all(log)
    assert [r for r in after if r.value is None] == []
    assert latest(after) == {b"k%d" % k: b"r2" for k in range(5, 10)}


def test_compact_delete_policy_also_applies_retention(make_log, clock):
    log = make_log({**COMPACT, "cleanup.policy": "compact,delete", "retention.ms": 1000})
    for k in range(30):
        put(log, b"k%d" % k, b"v", timestamp=clock.now - 5000)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() > 0
    assert log.log_start_offset > 0 and log.log_start_offset == log.segments[0].base_offset


def test_aborted_transactions_are_dropped_and_producer_state_kept(make_log):
    log = make_log(COMPACT)
    log.append_as_leader(batch([b"committed"], keys=[b"a"]), leader_epoch=0)
    log.append_as_leader(
        batch(
            [b"aborted"], keys=[b"a"], producer_id=5, producer_epoch=0, base_sequence=0, transactional=True
        ),
        leader_epoch=0,
    )
    log.append_as_leader(marker(5, 0, commit=False), leader_epoch=0, origin=AppendOrigin.COORDINATOR)
    fill_keys(log, 3, keys=20)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    entries = [t for s in log.segments for t in s.txn_index.entries]
    cleaner = LogCleaner(lambda: [log])
    for _ in range(2):
        cleaner.clean(log)
        fill_keys(log, 1, keys=20)
        log.roll()
        log.update_high_watermark(log.log_end_offset)
    records = read_all(log)
    assert [r.value for r in records if r.key == b"a"] == [b"committed"]
    # the producer's only data batch is kept, emptied, so its sequence state survives
    kept = [h for s in log.segments for _, h in s.batches() if h.producer_id == 5 and not h.is_control]
    assert len(kept) == 1 and kept[0].records_count == 0 and kept[0].last_offset == 1
    # a batch of the aborted transaction remains: its marker and its aborted-transaction entry stay
    markers = [h for s in log.segments for _, h in s.batches() if h.producer_id == 5 and h.is_control]
    assert len(markers) == 1 and markers[0].records_count == 1 and not markers[0].has_delete_horizon
    assert [t for s in log.segments for t in s.txn_index.entries] == entries


def test_cleaning_with_concurrent_appends(make_log):
    log = make_log({**COMPACT, "segment.bytes": 2048})
    fill_keys(log, 20)
    cleaner = LogCleaner(lambda: [log])
    stop = threading.Event()
    results = []

    def clean_loop():
        while not stop.is_set():
            results.append(cleaner.clean(log))

    thread = threading.Thread(target=clean_loop)
    thread.start()
    try:
        for r in range(20, 60):
            for k in range(10):
                put(log, b"k%d" % k, b"r%d" % r)
            log.update_high_watermark(log.log_end_offset)
            for offset in range(log.log_start_offset, log.log_end_offset, 37):
                data = log.read(offset, 4096)
                if data.length:
                    rb.read_header(data.records, 0)
    finally:
        stop.set()
        thread.join()
    assert any(s is not None and s.segments_cleaned for s in results)
    assert latest(read_all(log)) == {b"k%d" % k: b"r59" for k in range(10)}
    assert log.log_end_offset == 600


def test_truncation_aborts_cleaning(make_log):
    log = make_log(COMPACT)
    fill_keys(log, 10)
    cleaner = LogCleaner(lambda: [log])
    log.abort_cleaning_event.set()
    assert cleaner.clean(log) is None
    log.abort_cleaning_event.clear()
    log.truncate_to(55)
    assert cleaner.clean(log) is not None
    assert log.log_end_offset == 55


def test_cleaner_threads_start_and_stop(make_log):
    log = make_log(COMPACT)
    fill_keys(log, 5)
    cleaner = LogCleaner(lambda: [log], backoff_ms=10)
    cleaner.start()
    try:
        for _ in range(200):
            if cleaner.last_stats is not None:
                break
            threading.Event().wait(0.01)
    finally:
        cleaner.shutdown()
    assert cleaner.last_stats is not None


# --- transactions: markers, aborted data and the transaction index ----------------------------------


def txn_put(log, producer_id, sequence, keys, values=None, epoch=0):
    values = values if values is not None else [b"t-%d" % sequence] * len(keys)
    data = batch(
        values,
        keys=keys,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        transactional=True,
    )
    return log.append_as_leader(data, leader_epoch=0)


def end_txn(log, producer_id, *, commit, epoch=0):
    info = log.append_as_leader(
        marker(producer_id, epoch, commit=commit), leader_epoch=0, origin=AppendOrigin.COORDINATOR
    )
    return info.first_offset


def headers(log):
    return [h for s in log.segments for _, h in s.batches()]


def marker_at(log, offset):
    found = [h for h in headers(log) if h.is_control and h.base_offset == offset]
    return found[0] if found else None


def txn_index_entries(log):
    return [t for s in log.segments for t in s.txn_index.entries]


def dirty_round(log, keys=10):
    """Overwrites plain keys and rolls, so the next cleaning has a dirty section."""
    fill_keys(log, 1, keys=keys)
    log.roll()
    log.update_high_watermark(log.log_end_offset)


def test_committed_txn_marker_gets_a_horizon_once_its_data_is_compacted_then_disappears(make_log, clock):
    log = make_log({**COMPACT, "delete.retention.ms": 1000})
    txn_put(log, 5, 0, [b"a", b"b"])
    first_marker = end_txn(log, 5, commit=True)
    txn_put(log, 5, 2, [b"c"])  # the producer moves on: the first transaction's batch is not its last
    second_marker = end_txn(log, 5, commit=True)
    put(log, b"a", b"new")
    put(log, b"b", b"new")
    dirty_round(log)
    cleaner = LogCleaner(lambda: [log], time_ms=clock)

    cleaner.clean(log)  # the transaction's records go; its batch was met, so the marker stays as is
    assert not [r for r in read_all(log) if r.value == b"t-0"]
    first = marker_at(log, first_marker)
    assert first is not None and not first.has_delete_horizon

    dirty_round(log)
    cleaner.clean(log)  # nothing of the transaction is left: the marker gets its horizon
    first = marker_at(log, first_marker)
    assert first is not None and first.has_delete_horizon and first.base_timestamp == clock.now + 1000
    assert first.records_count == 1
    second = marker_at(log, second_marker)
    assert second is not None and not second.has_delete_horizon  # its transaction's record c remains

    clock.advance(999)
    dirty_round(log)
    cleaner.clean(log)
    assert marker_at(log, first_marker) is not None  # the horizon has not passed

    clock.advance(1)
    assert cleaner.grab_filthiest_log() is not None  # the horizon passed: worth cleaning again
    cleaner.clean_once()
    assert marker_at(log, first_marker) is None
    assert marker_at(log, second_marker) is not None
    assert [r.value for r in read_all(log) if r.key == b"c"] == [b"t-2"]
    assert {r.key: r.value for r in read_all(log) if r.key in (b"a", b"b")} == {b"a": b"new", b"b": b"new"}
    for segment in log.segments:
        segment.sanity_check()


def test_marker_stays_while_its_transaction_keeps_a_record(make_log, clock):
    log = make_log({**COMPACT, "delete.retention.ms": 1000})
    txn_put(log, 5, 0, [b"x", b"a"])
    kept_marker = end_txn(log, 5, commit=True)
    txn_put(log, 5, 2, [b"c"])
    end_txn(log, 5, commit=True)
    put(log, b"a", b"new")  # one record of the transaction is compacted away, x is not
    dirty_round(log)
    cleaner = LogCleaner(lambda: [log], time_ms=clock)
    for _ in range(4):
        cleaner.clean(log)
        clock.advance(5000)
        dirty_round(log)
    header = marker_at(log, kept_marker)
    assert header is not None and not header.has_delete_horizon and header.records_count == 1
    assert [r.value for r in read_all(log) if r.key == b"x"] == [b"t-0"]
    assert [r.value for r in read_all(log) if r.key == b"a"] == [b"new"]


def test_aborted_data_dropped_and_its_marker_removed_after_the_horizon(make_log, clock):
    log = make_log({**COMPACT, "delete.retention.ms": 1000})
    put(log, b"a", b"committed")
    txn_put(log, 5, 0, [b"a", b"z"], [b"aborted", b"aborted"])
    abort_marker = end_txn(log, 5, commit=False)
    txn_put(log, 5, 2, [b"c"])  # the aborted batch is not the producer's last
    end_txn(log, 5, commit=True)
    dirty_round(log)
    (entry,) = txn_index_entries(log)
    assert (entry.producer_id, entry.first_offset, entry.last_offset) == (5, 1, abort_marker)
    cleaner = LogCleaner(lambda: [log], time_ms=clock)

    cleaner.clean(log)
    assert [r for r in read_all(log) if r.value == b"aborted"] == []
    assert [r.value for r in read_all(log) if r.key == b"a"] == [b"committed"]
    assert not [h for h in headers(log) if h.producer_id == 5 and h.base_offset == 1]
    # the transaction's batch was met in this cleaning: the marker and its index entry stay
    header = marker_at(log, abort_marker)
    assert header is not None and not header.has_delete_horizon
    assert txn_index_entries(log) == [entry]

    dirty_round(log)
    cleaner.clean(log)  # nothing of it is left: the marker gets a horizon, the index entry goes
    header = marker_at(log, abort_marker)
    assert header is not None and header.has_delete_horizon and header.base_timestamp == clock.now + 1000
    assert txn_index_entries(log) == []

    clock.advance(1000)
    cleaner.clean_once()
    assert marker_at(log, abort_marker) is None
    assert [r.value for r in read_all(log) if r.key == b"a"] == [b"committed"]
    assert [r.value for r in read_all(log) if r.key == b"c"] == [b"t-2"]


def test_producer_last_marker_is_kept_empty_when_it_has_no_data(make_log, clock):
    log = make_log({**COMPACT, "delete.retention.ms": 1000})
    txn_put(log, 9, 0, [b"d"])
    end_txn(log, 9, commit=True)
    fence = end_txn(log, 9, commit=False, epoch=1)  # an epoch bump with no data of its own
    put(log, b"d", b"new")
    dirty_round(log)
    cleaner = LogCleaner(lambda: [log], time_ms=clock)
    for _ in range(3):
        cleaner.clean(log)
        clock.advance(1000)
        dirty_round(log)
    # the fencing marker carries the producer's epoch: emptied, not dropped
    header = marker_at(log, fence)
    assert header is not None and header.records_count == 0 and header.producer_epoch == 1
    assert [h for h in headers(log) if h.producer_id == 9] == [header]


def read_committed(log):
    """Records a read_committed consumer gets from the log start to the LSO, following Kafka's
    consumer: each fetch's reported aborted transactions, taken in first-offset order, make the
    transactional batches of their producer skipped until that producer's ABORT marker."""
    out = []
    offset = log.log_start_offset
    lso = log.last_stable_offset
    while offset < lso:
        data = log.read(offset, 1 << 30, upper_bound=lso, include_aborted_transactions=True)
        if data.length == 0:
            break
        pending = sorted(data.aborted_transactions, key=lambda t: t.first_offset)
        aborted_producers = set()
        view = data.records
        for pos, header in rb.iter_headers(view):
            while pending and pending[0].first_offset <= header.last_offset:
                aborted_producers.add(pending.pop(0).producer_id)
            if header.is_control:
                records = rb.decode_records(view, pos)
                if records and records[0].key[2:4] == b"\x00\x00":  # ABORT
                    aborted_producers.discard(header.producer_id)
            elif not (header.is_transactional and header.producer_id in aborted_producers):
                out.extend(r for r in rb.decode_records(view, pos) if r.offset >= offset)
            offset = header.last_offset + 1
    return out


def test_read_committed_reads_of_a_cleaned_log_stay_correct(make_log, clock):
    rng = random.Random(17)
    log = make_log({**COMPACT, "delete.retention.ms": 1000})
    cleaner = LogCleaner(lambda: [log], time_ms=clock)
    written = []  # (offset, key, value, txn) in offset order; txn None for plain records
    outcome = {}  # txn -> committed?
    open_txn = {}  # producer -> (txn, next sequence)
    sequences = {7: 0, 8: 0, 9: 0}
    aborted_values = set()

    def expected():
        lso = log.last_stable_offset
        latest_values = {}
        for offset, key, value, txn in written:
            if offset < lso and (txn is None or outcome.get(txn) is True):
                latest_values[key] = value
        return {k: v for k, v in latest_values.items() if v is not None}

    def check():
        records = read_committed(log)
        assert latest(records) == expected()
        assert not [r for r in records if r.value in aborted_values]

    txn_ids = iter(range(1_000_000))
    for step in range(600):
        producer = rng.choice([None, 7, 8, 9])
        key = b"k%d" % rng.randrange(12)
        if producer is None:
            value = None if rng.random() < 0.1 else b"plain-%d" % step
            info = put(log, key, value)
            written.append((info.first_offset, key, value, None))
        elif producer in open_txn and rng.random() < 0.35:
            txn, _ = open_txn.pop(producer)
            commit = rng.random() < 0.6
            end_txn(log, producer, commit=commit)
            outcome[txn] = commit
            if not commit:
                aborted_values.update(v for _, _, v, t in written if t == txn)
        else:
            txn, _ = open_txn.get(producer, (next(txn_ids), 0))
            value = b"txn-%d-%d" % (txn, step)
            info = txn_put(log, producer, sequences[producer], [key], [value])
            sequences[producer] += 1
            open_txn[producer] = (txn, 0)
            written.append((info.first_offset, key, value, txn))
        log.update_high_watermark(log.log_end_offset)
        if step % 50 == 49:
            check()
            lso = log.last_stable_offset
            stats = cleaner.clean(log)  # open transactions hold the LSO: cleaning stops short of them
            assert stats is not None and stats.end_offset <= lso
            check()
            clock.advance(600)
    for producer in list(open_txn):
        txn, _ = open_txn.pop(producer)
        end_txn(log, producer, commit=False)
        outcome[txn] = False
        aborted_values.update(v for _, _, v, t in written if t == txn)
    markers_before = sum(h.is_control for h in headers(log))
    for _ in range(4):
        dirty_round(log, keys=12)
        for k in range(12):
            written.append((log.log_end_offset - 12 + k, b"k%d" % k, b"r0", None))
        check()
        cleaner.clean(log)
        check()
        clock.advance(1000)

    # The cleaned section keeps no aborted record, and a marker only while a batch of its transaction
    # remains (or it holds the producer's epoch).
    first_dirty = cleaner.first_dirty_offset(log)
    batch_since_marker = set()
    remaining_markers = 0
    for segment in log.segments:
        view = segment.view()
        for pos, header in segment.batches():
            if header.last_offset >= first_dirty:
                break
            if header.is_control:
                remaining_markers += 1
                last = log.producer_state.last_entry(header.producer_id)
                assert header.producer_id in batch_since_marker or (
                    last.last_data_offset < 0 and last.producer_epoch == header.producer_epoch
                )
                batch_since_marker.discard(header.producer_id)
            elif header.is_transactional:
                batch_since_marker.add(header.producer_id)
                assert not [r for r in rb.decode_records(view, pos) if r.value in aborted_values]
    assert remaining_markers < markers_before / 4
