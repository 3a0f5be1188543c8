"""Recovery on open: torn and corrupt tails, corruption mid-segment, indexes, swap files, the clean marker."""

import logging
import os

from protocol import record_batch as rb
from storage.segment import LogSegment
from tests.storage.helpers import batch, read_all


def build(make_log, n=30, props=None):
    log = make_log(props or {"segment.bytes": 600, "index.interval.bytes": 100})
    sizes = []
    for i in range(n):
        info = log.append_as_leader(batch(1, value_size=40, timestamp=1000 + i), leader_epoch=1)
        sizes.append(info.valid_bytes)
    log.close_handlers()  # like kill -9: nothing trimmed, no snapshot at the end
    return log, sizes[0]


def reopen(make_log, log, **kwargs):
    kwargs.setdefault("had_clean_shutdown", False)
    return make_log(dict(log.config.overrides), **kwargs)


def check_consistent(log):
    offsets = [r.offset for r in read_all(log)]
    assert offsets == list(range(log.log_start_offset, log.log_end_offset))
    for segment in log.segments:
        segment.sanity_check()
        for i in range(segment.offset_index.entries):
            offset, position = segment.offset_index.entry(i)
            assert position < segment.size
            assert rb.read_header(segment.view(), position).last_offset == offset


def test_unclean_reopen_keeps_everything(make_log):
    log, _ = build(make_log)
    again = reopen(make_log, log)
    assert again.log_end_offset == 30
    check_consistent(again)


def test_torn_tail_is_truncated(make_log, caplog):
    log, _ = build(make_log)
    last = log.segments[-1].log_path
    with open(last, "ab") as f:
        f.write(bytes(batch(1, value_size=40))[:-7])  # a write cut short
    with caplog.at_level(logging.WARNING):
        again = reopen(make_log, log)
    assert again.log_end_offset == 30
    assert any(os.path.basename(last) in r.getMessage() for r in caplog.records)
    check_consistent(again)


def test_zeroed_tail_is_truncated(make_log):
    log, _ = build(make_log)
    with open(log.segments[-1].log_path, "ab") as f:
        f.write(bytes(4096))
    again = reopen(make_log, log)
    assert again.log_end_offset == 30
    check_consistent(again)


def test_corruption_mid_segment_truncates_there_and_drops_later_segments(make_log, caplog):
    log, size = build(make_log)
    victim = log.segments[1]
    bad_offset = victim.base_offset + 2
    with open(victim.log_path, "r+b") as f:
        f.seek(2 * size + 70)  # inside the third batch's records
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    with caplog.at_level(logging.WARNING):
        again = reopen(make_log, log)
    assert again.log_end_offset == bad_offset
    assert again.num_segments == 2
    assert any("CRC" in r.getMessage() and f"offset {bad_offset}" in r.getMessage() for r in caplog.records)
    check_consistent(again)
    assert again.append_as_leader(batch(1), leader_epoch=2).first_offset == bad_offset


def test_corruption_in_the_tail_of_the_last_segment(make_log):
    log, size = build(make_log)
    last = log.segments[-1]
    batches = last.size // size
    with open(last.log_path, "r+b") as f:
        f.seek(last.size - 3)
        f.write(b"\x00\x01\x02")
    again = reopen(make_log, log)
    assert again.log_end_offset == last.base_offset + batches - 1
    check_consistent(again)


def test_bad_length_field(make_log):
    log, size = build(make_log)
    last = log.segments[-1]
    with open(last.log_path, "r+b") as f:
        f.seek(size + 8)
        f.write((3).to_bytes(4, "big"))
    again = reopen(make_log, log)
    assert again.log_end_offset == last.base_offset + 1
    check_consistent(again)


def test_missing_and_corrupt_indexes_are_rebuilt(make_log):
    log, _ = build(make_log)
    first = log.segments[0]
    os.unlink(first.offset_index.path)
    os.unlink(log.segments[1].time_index.path)
    with open(log.segments[2].offset_index.path, "r+b") as f:
        f.write((0).to_bytes(4, "big") + (10**9).to_bytes(4, "big"))  # points past the data
    again = reopen(make_log, log, had_clean_shutdown=True)
    assert again.segments[0].offset_index.entries > 0
    assert again.segments[1].time_index.entries > 0
    check_consistent(again)


def test_recovery_starts_at_the_recovery_point(make_log, monkeypatch):
    log, _ = build(make_log)
    recovered = []
    original = LogSegment.recover

    def spy(self, *args, **kwargs):
        recovered.append(self.base_offset)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LogSegment, "recover", spy)
    third = log.segments[2].base_offset
    reopen(make_log, log, recovery_point=third + 1)
    assert recovered == [s.base_offset for s in log.segments[2:]]
    recovered.clear()
    reopen(make_log, log, had_clean_shutdown=True)
    assert recovered == []


def test_interrupted_swap_is_completed(make_log):
    log, _ = build(make_log, props={"segment.bytes": 600})
    first, second = log.segments[0], log.segments[1]
    # the cleaner had written a merged segment as .swap and renamed nothing else yet
    merged_end = log.segments[2].base_offset
    with open(first.log_path, "rb") as a, open(second.log_path, "rb") as b:
        data = a.read() + b.read()
    with open(first.log_path.replace(".log", ".log.swap"), "wb") as f:
        f.write(data)
    with open(first.log_path.replace(".log", ".log.cleaned"), "wb") as f:
        f.write(b"junk")
    again = reopen(make_log, log)
    names = os.listdir(again.dir)
    assert not any(n.endswith((".swap", ".cleaned")) for n in names)
    assert again.segments[0].base_offset == first.base_offset
    assert again.segments[1].base_offset == merged_end
    assert again.log_end_offset == 30
    check_consistent(again)
