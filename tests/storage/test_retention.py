"""Retention by time and bytes, log start offset (DeleteRecords), delayed deletion of `.deleted` files."""

import os

import pytest

from storage.errors import OffsetOutOfRangeError
from tests.storage.helpers import batch, read_all


def fill(log, n, timestamp=lambda i: 1000 + i, value_size=100):
    for i in range(n):
        log.append_as_leader(batch(1, timestamp=timestamp(i), value_size=value_size), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)


def files(log, suffix):
    return sorted(n for n in os.listdir(log.dir) if n.endswith(suffix))


def test_retention_by_time_uses_largest_timestamp(make_log, clock):
    log = make_log({"segment.bytes": 500, "retention.ms": 10_000, "file.delete.delay.ms": 1000})
    old = clock.now - 60_000
    fill(log, 10, timestamp=lambda i: old if i < 6 else clock.now)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    deleted = log.delete_old_segments()
    # segments holding only old records go; the one holding offset 6 (a recent record) stays
    assert deleted > 0
    assert log.log_start_offset == log.segments[0].base_offset
    assert log.segments[0].base_offset <= 6 < (log.segments[1].base_offset if log.num_segments > 1 else 99)
    assert [r.offset for r in read_all(log)] == list(range(log.log_start_offset, 10))
    assert len(files(log, ".log.deleted")) == deleted
    assert log.delete_pending_files() == 0  # file.delete.delay.ms not over
    clock.advance(1000)
    assert log.delete_pending_files() == deleted
    assert files(log, ".deleted") == []


def test_retention_by_bytes(make_log):
    log = make_log({"segment.bytes": 500, "retention.bytes": 1000})
    fill(log, 20)
    total_before = log.size
    log.delete_old_segments()
    assert log.size <= 1000 + log.active_segment.size or log.size < total_before
    # only whole segments, oldest first, while the rest still exceeds retention.bytes
    assert log.size - log.segments[0].size < 1000
    assert log.log_start_offset == log.segments[0].base_offset


def test_retention_never_passes_the_high_watermark(make_log, clock):
    log = make_log({"segment.bytes": 300, "retention.ms": 0})
    fill(log, 10, timestamp=lambda i: 0)
    log.update_high_watermark(3)
    log.delete_old_segments()
    assert all(s.base_offset <= 3 for s in log.segments[:1])
    assert log.log_start_offset <= 3


def test_retention_of_everything_rolls_a_new_segment(make_log):
    log = make_log({"segment.bytes": 300, "retention.ms": 0})
    fill(log, 5, timestamp=lambda i: 0)
    log.delete_old_segments()
    assert log.num_segments == 1
    assert log.active_segment.size == 0
    assert log.log_start_offset == log.log_end_offset == 5


def test_compact_only_topics_keep_old_segments(make_log):
    log = make_log({"segment.bytes": 300, "retention.ms": 0, "cleanup.policy": "compact"})
    for i in range(5):
        log.append_as_leader(batch([b"v"], keys=[b"k%d" % i], timestamp=0), leader_epoch=0)
    log.update_high_watermark(5)
    assert log.delete_old_segments() == 0


def test_delete_records_before(make_log):
    log = make_log({"segment.bytes": 500})
    fill(log, 20)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(21)
    second = log.segments[1].base_offset
    assert log.delete_records_before(second + 1) == second + 1
    assert log.segments[0].base_offset == second  # whole segments below the start are gone
    assert read_all(log)[0].offset == second + 1
    assert log.leader_epoch_cache.entries[0].start_offset == second + 1


def test_deleted_segment_stays_readable_until_removed(make_log, clock):
    log = make_log({"segment.bytes": 300, "retention.ms": 0, "file.delete.delay.ms": 500})
    fill(log, 6, timestamp=lambda i: 0)
    data = log.read(0, 1 << 20)
    log.delete_old_segments()
    assert bytes(data.records)  # still mapped, descriptor still open
    os.pread(data.fd, data.length, data.position)
    clock.advance(500)
    log.delete_pending_files()
