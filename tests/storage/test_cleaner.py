"""Compaction: latest value per key, offsets kept, tombstones after delete.retention.ms, dirty ratio,
compaction lag, aborted transactions, the checkpoint, concurrent appends, and aborts on truncation."""

import os
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
    LogCleaner(lambda: [log]).clean(log)
    records = read_all(log)
    assert [r.value for r in records if r.key == b"a"] == [b"committed"]
    # the producer's only data batch is kept, emptied, so its sequence state survives
    kept = [h for s in log.segments for _, h in s.batches() if h.producer_id == 5 and not h.is_control]
    assert len(kept) == 1 and kept[0].records_count == 0 and kept[0].last_offset == 1


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
