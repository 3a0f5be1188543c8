"""LogSegment on its own: append with sparse indexing, reads, translate at index boundaries, truncation."""

import os

from protocol import record_batch as rb
from storage.segment import LogSegment
from tests.storage.helpers import Clock, batch


def open_segment(tmp_path, base=0, interval=100, max_index=4096):
    return LogSegment(
        str(tmp_path), base, index_interval_bytes=interval, max_index_size=max_index, time_ms=Clock()
    )


def append_batches(segment, start_offset, count, values_per_batch=1, ts=1000):
    offset = start_offset
    for i in range(count):
        buf = batch(values_per_batch, timestamp=ts + i)
        rb.set_base_offset(buf, 0, offset)
        h = rb.read_header(buf)
        segment.append(memoryview(buf), [(h.size, h.last_offset, h.max_timestamp)])
        offset = h.last_offset + 1
    return offset


def test_file_names_are_20_digit_base_offsets(tmp_path):
    seg = open_segment(tmp_path, base=1234)
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000001234.index",
        "00000000000000001234.log",
        "00000000000000001234.timeindex",
    ]
    seg.close()


def test_sparse_index_every_interval_bytes(tmp_path):
    seg = open_segment(tmp_path, interval=200)
    append_batches(seg, 0, 50)
    size = rb.read_header(seg.view(), 0).size
    assert seg.size == 50 * size
    # an entry whenever more than 200 bytes went in since the last one
    expected = sum(1 for _ in range(0, 50 * size, size)) // (200 // size + 1)
    assert abs(seg.offset_index.entries - expected) <= 1
    for i in range(seg.offset_index.entries):
        offset, position = seg.offset_index.entry(i)
        assert rb.read_header(seg.view(), position).last_offset == offset
    seg.close()


def test_translate_offset_at_and_around_index_entries(tmp_path):
    seg = open_segment(tmp_path, interval=1)
    append_batches(seg, 0, 20, values_per_batch=3)  # offsets 0..59, batches of 3
    for i in range(seg.offset_index.entries):
        indexed = seg.offset_index.entry(i).offset
        for target in (indexed - 1, indexed, min(indexed + 1, 59)):
            found = seg.translate_offset(target)
            header = rb.read_header(seg.view(), found.position)
            assert header.base_offset <= target <= header.last_offset
    assert seg.translate_offset(60) is None
    assert seg.read_next_offset() == 60
    seg.close()


def test_read_respects_max_size_max_position_and_min_one_message(tmp_path):
    seg = open_segment(tmp_path)
    append_batches(seg, 0, 10, values_per_batch=1)
    size = rb.read_header(seg.view(), 0).size
    r = seg.read(3, 2 * size)
    assert (r.position, r.length, r.first_entry_incomplete) == (3 * size, 2 * size, False)
    r = seg.read(3, 10, min_one_message=True)
    assert r.length == size
    r = seg.read(3, 10, min_one_message=False)
    assert (r.length, r.first_entry_incomplete) == (10, True)
    r = seg.read(3, 10**6, max_position=5 * size)
    assert r.length == 2 * size
    assert seg.read(10, 100) is None
    seg.close()


def test_find_offset_by_timestamp(tmp_path):
    seg = open_segment(tmp_path, interval=1)
    append_batches(seg, 0, 10, values_per_batch=2, ts=1000)  # batch i: timestamps 1000+i, 1001+i
    assert seg.find_offset_by_timestamp(1000, 0) == (1000, 0)
    assert seg.find_offset_by_timestamp(1005, 0) == (1005, 9)
    assert seg.find_offset_by_timestamp(1005, 13) == (1007, 13)
    assert seg.find_offset_by_timestamp(5000, 0) is None
    seg.close()


def test_truncate_to_removes_whole_batches_and_index_entries(tmp_path):
    seg = open_segment(tmp_path, interval=1)
    append_batches(seg, 0, 10, values_per_batch=2)
    size = rb.read_header(seg.view(), 0).size
    removed = seg.truncate_to(7)  # inside the batch 6..7: the batch goes
    assert removed == 7 * size
    assert seg.read_next_offset() == 6
    assert seg.offset_index.last_offset < 6
    assert seg.max_timestamp_so_far.offset == 5
    seg.close()


def test_close_trims_indexes_and_reopen_keeps_them(tmp_path):
    seg = open_segment(tmp_path, interval=1, max_index=4096)
    append_batches(seg, 0, 5)
    entries = seg.offset_index.entries
    seg.close()
    assert os.path.getsize(tmp_path / "00000000000000000000.index") == entries * 8
    again = open_segment(tmp_path, interval=1)
    again.sanity_check()
    assert again.offset_index.entries == entries
    assert again.max_timestamp_so_far.timestamp == 1004
    again.close()


def test_recover_rebuilds_indexes(tmp_path):
    seg = open_segment(tmp_path, interval=1)
    append_batches(seg, 0, 30)
    before = [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)]
    seg.close()
    os.unlink(tmp_path / "00000000000000000000.index")
    again = open_segment(tmp_path, interval=1)
    assert again.recover() == 0
    assert [again.offset_index.entry(i) for i in range(again.offset_index.entries)] == before
    again.close()
