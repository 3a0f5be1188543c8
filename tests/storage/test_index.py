"""Offset and time indexes: preallocation, trimming, binary-search lookups, truncation, crash leftovers,
and maps that hold no descriptor."""

import os
import threading

import pytest

from storage.errors import CorruptIndexError
from storage.index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from tests.storage.helpers import descriptors_limited, open_descriptors


def test_offset_index_is_preallocated_then_trimmed(tmp_path):
    path = str(tmp_path / "00000000000000000100.index")
    idx = OffsetIndex(path, 100, 1000)
    assert os.path.getsize(path) == 1000  # rounded down to a multiple of 8
    idx.append(110, 4096)
    idx.append(120, 8192)
    idx.close()
    assert os.path.getsize(path) == 16
    with open(path, "rb") as f:
        assert f.read() == bytes.fromhex("0000000a000010000000001400002000")


def test_offset_index_lookup_is_floor(tmp_path):
    idx = OffsetIndex(str(tmp_path / "x.index"), 1000, 8 * 1000)
    for i in range(1, 500):
        idx.append(1000 + i * 10, i * 100)
    assert idx.lookup(999) == OffsetPosition(1000, 0)
    assert idx.lookup(1000) == OffsetPosition(1000, 0)
    assert idx.lookup(1009) == OffsetPosition(1000, 0)
    assert idx.lookup(1010) == OffsetPosition(1010, 100)
    assert idx.lookup(1015) == OffsetPosition(1010, 100)
    assert idx.lookup(5990) == OffsetPosition(5990, 49900)
    assert idx.lookup(10**12) == OffsetPosition(5990, 49900)
    with pytest.raises(ValueError):
        idx.append(5990, 50000)


def test_offset_index_truncate_and_full(tmp_path):
    idx = OffsetIndex(str(tmp_path / "x.index"), 0, 8 * 4)
    for i in range(1, 5):
        idx.append(i * 10, i * 100)
    assert idx.is_full
    idx.truncate_to(30)
    assert idx.entries == 2 and idx.last_offset == 20
    idx.truncate_to(25)
    assert idx.entries == 2
    idx.truncate_to(0)
    assert idx.entries == 0 and idx.lookup(50) == OffsetPosition(0, 0)


def test_reopened_untrimmed_index_finds_its_entries(tmp_path):
    path = str(tmp_path / "x.index")
    idx = OffsetIndex(path, 0, 8 * 100)
    for i in range(1, 8):
        idx.append(i, i * 64)
    idx.close_without_trim()  # as after kill -9: preallocated file, zero tail
    assert os.path.getsize(path) == 800
    again = OffsetIndex(path, 0, 8 * 100)
    assert again.entries == 7 and again.last_offset == 7


def test_sanity_check_catches_entries_past_the_log(tmp_path):
    idx = OffsetIndex(str(tmp_path / "x.index"), 0, 80)
    idx.append(5, 1000)
    idx.sanity_check(2000)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(500)


def test_time_index_appends_only_increasing_timestamps(tmp_path):
    idx = TimeIndex(str(tmp_path / "x.timeindex"), 50, 12 * 10)
    idx.maybe_append(100, 50)
    idx.maybe_append(100, 55)  # same timestamp: skipped
    idx.maybe_append(200, 60)
    assert idx.entries == 2
    assert idx.lookup(99) == TimestampOffset(-1, 50)
    assert idx.lookup(150) == TimestampOffset(100, 50)
    assert idx.lookup(10**15) == TimestampOffset(200, 60)
    with pytest.raises(ValueError):
        idx.maybe_append(300, 40)


def test_time_index_keeps_a_slot_for_the_final_entry(tmp_path):
    idx = TimeIndex(str(tmp_path / "x.timeindex"), 0, 12 * 3)
    idx.maybe_append(1, 1)
    idx.maybe_append(2, 2)
    assert idx.is_full
    with pytest.raises(ValueError):
        idx.maybe_append(3, 3)
    idx.maybe_append(3, 3, skip_full_check=True)
    assert idx.last_entry == TimestampOffset(3, 3)


def test_time_index_truncate(tmp_path):
    idx = TimeIndex(str(tmp_path / "x.timeindex"), 0, 12 * 10)
    for i in range(1, 6):
        idx.maybe_append(i * 100, i * 10)
    idx.truncate_to(30)
    assert idx.last_entry == TimestampOffset(200, 20)
    idx.close()
    assert os.path.getsize(tmp_path / "x.timeindex") == 24


def test_an_index_holds_no_descriptor(tmp_path):
    """As Kafka's AbstractIndex: the file is opened to map it (or to resize it) and closed at once."""
    before = open_descriptors()
    offsets = OffsetIndex(str(tmp_path / "x.index"), 0, 8 * 4)
    times = TimeIndex(str(tmp_path / "x.timeindex"), 0, 12 * 16)
    assert open_descriptors() == before
    offsets.append_many([(i, i * 100) for i in range(1, 10)])  # past the preallocation: remapped larger
    for i in range(1, 10):
        times.maybe_append(i * 1000, i)
    offsets.trim_to_valid_size()
    times.trim_to_valid_size()
    assert open_descriptors() == before
    assert offsets.lookup(5) == OffsetPosition(5, 500) and offsets.entries == 9
    assert times.lookup(4500) == TimestampOffset(4000, 4)
    offsets.close()
    times.close()
    assert open_descriptors() == before
    assert os.path.getsize(tmp_path / "x.index") == 9 * 8
    assert OffsetIndex(str(tmp_path / "x.index"), 0, 8 * 4).lookup(9) == OffsetPosition(9, 900)


def test_lookups_on_another_thread_survive_remaps(tmp_path):
    """A map is replaced on resize; a reader on another thread (the cleaner's) must never touch an
    unmapped one (that would crash the process, not raise)."""
    idx = OffsetIndex(str(tmp_path / "x.index"), 0, 8 * 64)
    for i in range(1, 33):
        idx.append(i * 10, i * 100)
    stop = threading.Event()
    wrong: list[OffsetPosition] = []

    def look_up() -> None:
        while not stop.is_set():
            found = idx.lookup(155)
            if found != OffsetPosition(150, 1500):
                wrong.append(found)

    reader = threading.Thread(target=look_up)
    reader.start()
    try:
        for _ in range(500):
            idx.trim_to_valid_size()
            idx.resize(8 * 64)
    finally:
        stop.set()
        reader.join()
    assert not wrong


def test_an_index_that_cannot_be_resized_keeps_its_map(tmp_path):
    """Resizing opens the file (as Kafka's resize opens a RandomAccessFile): out of descriptors, it
    fails and the index goes on with its old map."""
    idx = OffsetIndex(str(tmp_path / "x.index"), 0, 8 * 4)
    idx.append_many([(i, i * 100) for i in range(1, 5)])
    with descriptors_limited(0), pytest.raises(OSError, match="Too many open files"):
        idx.append(5, 500)  # full: needs a larger map
    assert idx.entries == 4 and idx.file_size == 32 and idx.lookup(4) == OffsetPosition(4, 400)
    idx.append(5, 500)
    assert idx.lookup(9) == OffsetPosition(5, 500)
