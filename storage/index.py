"""Memory-mapped sparse segment indexes: `.index` (offset -> position) and `.timeindex` (timestamp -> offset).

Layout is Kafka's: big-endian fixed-size entries, offsets stored relative to the segment's base offset.
An index of a segment being written is preallocated to segment.index.bytes (zero filled) and trimmed to
its entries when the segment stops being active or is closed. Lookups are binary searches over the map.
Callers (the segment, under the log's lock) serialize access.
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import NamedTuple

from storage.errors import CorruptIndexError

_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, physical position
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class _MappedIndex:
    """A file of fixed-size entries mapped into memory, with a count of the valid ones."""

    ENTRY_SIZE = 0

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size - max_index_size % self.ENTRY_SIZE
        self._closed = False
        # Only the map holds a descriptor (its own duplicate): one per mapped index, none when empty.
        created = not os.path.exists(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if created:
                os.ftruncate(fd, self.max_index_size)
            length = os.fstat(fd).st_size
            self._mm: mmap.mmap | None = mmap.mmap(fd, length) if length else None
        finally:
            os.close(fd)
        self._length = length
        self._entries = 0 if created else self._count_entries(length // self.ENTRY_SIZE)

    def _count_entries(self, slots: int) -> int:
        """Valid entries of a file that may still be preallocated (not trimmed after a crash): the
        zero-filled tail is found by binary search, entries are never all-zero in a valid prefix."""
        if slots == 0 or not self._is_zero(slots - 1):
            return slots
        lo, hi = 0, slots - 1  # the first zero slot lies in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if self._is_zero(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _is_zero(self, slot: int) -> bool:
        assert self._mm is not None
        start = slot * self.ENTRY_SIZE
        return not any(self._mm[start : start + self.ENTRY_SIZE])

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._length // self.ENTRY_SIZE

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    @property
    def file_size(self) -> int:
        return self._length

    def resize(self, new_size: int) -> None:
        """Grows (preallocates) or trims the file; never below the valid entries."""
        new_size = max(new_size - new_size % self.ENTRY_SIZE, self.size_in_bytes)
        if new_size == self._length:
            return
        if self._mm is not None and new_size:
            self._mm.resize(new_size)  # ftruncate and remap through the map's own descriptor
        else:
            if self._mm is not None:
                self._mm.close()
                self._mm = None
            os.truncate(self.path, new_size)
            if new_size:
                fd = os.open(self.path, os.O_RDWR)
                try:
                    self._mm = mmap.mmap(fd, new_size)
                finally:
                    os.close(fd)
        self._length = new_size

    def trim_to_valid_size(self) -> None:
        self.resize(self.size_in_bytes)

    def reset(self) -> None:
        """Drops every entry and preallocates again (the segment is being rebuilt or emptied)."""
        self._truncate_to_entries(0)
        self.resize(self.max_index_size)

    def _truncate_to_entries(self, n: int) -> None:
        if n < self._entries and self._mm is not None:
            # Zero the dropped entries so a crash before trimming cannot resurrect them.
            self._mm[n * self.ENTRY_SIZE : self._entries * self.ENTRY_SIZE] = bytes(
                (self._entries - n) * self.ENTRY_SIZE
            )
        self._entries = n

    def _ensure_room(self) -> None:
        if self._entries >= self.max_entries:
            self._grow()

    def _grow(self) -> None:
        self.resize(max(self.max_index_size, self._length + self.ENTRY_SIZE))

    def _largest_lower_bound(self, key: int, key_struct: struct.Struct, field_at: int) -> int:
        """The last slot whose key (at byte `field_at` of the entry) is <= key, or -1."""
        mm, size, n = self._mm, self.ENTRY_SIZE, self._entries
        if n == 0 or mm is None or key_struct.unpack_from(mm, field_at)[0] > key:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if key_struct.unpack_from(mm, mid * size + field_at)[0] <= key:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def flush(self) -> None:
        """fsync through a fresh descriptor: the mapped pages are the file's page cache, and this does
        not touch the map another thread may be resizing."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Trims the file to its entries and releases the map."""
        if self._closed:
            return
        self.trim_to_valid_size()
        self.close_without_trim()

    def close_without_trim(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._closed = True

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.close_without_trim()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class OffsetIndex(_MappedIndex):
    """Sparse map of offset -> byte position of the batch holding it (8-byte entries)."""

    ENTRY_SIZE = 8

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._last_offset = self._read_last_offset()

    def _read_last_offset(self) -> int:
        return self.entry(self._entries - 1).offset if self._entries else self.base_offset

    @property
    def last_offset(self) -> int:
        return self._last_offset

    def entry(self, n: int) -> OffsetPosition:
        assert self._mm is not None
        rel, pos = _OFFSET_ENTRY.unpack_from(self._mm, n * 8)
        return OffsetPosition(self.base_offset + rel, pos)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The last entry at or below target_offset, or (base_offset, 0)."""
        slot = self._largest_lower_bound(target_offset - self.base_offset, _INT, 0)
        return OffsetPosition(self.base_offset, 0) if slot < 0 else self.entry(slot)

    def append(self, offset: int, position: int) -> None:
        if self._entries and offset <= self._last_offset:
            raise ValueError(
                f"{self.path}: offset {offset} at position {position} is not after "
                f"last offset {self._last_offset}"
            )
        if self.is_full:
            self._ensure_room()
        assert self._mm is not None
        _OFFSET_ENTRY.pack_into(self._mm, self._entries * 8, offset - self.base_offset, position)
        self._entries += 1
        self._last_offset = offset

    def append_many(self, entries: list[tuple[int, int]]) -> None:
        """Appends (offset, position) pairs, increasing, in one go (the append path's batch of entries)."""
        if entries[0][0] <= self._last_offset and self._entries:
            raise ValueError(
                f"{self.path}: offset {entries[0][0]} is not after last offset {self._last_offset}"
            )
        while self._entries + len(entries) > self.max_entries:
            self._grow()
        mm, pack, base, n = self._mm, _OFFSET_ENTRY.pack_into, self.base_offset, self._entries
        for offset, position in entries:
            pack(mm, n * 8, offset - base, position)
            n += 1
        self._entries = n
        self._last_offset = entries[-1][0]

    def truncate_to(self, offset: int) -> None:
        """Removes entries at or after `offset`."""
        slot = self._largest_lower_bound(offset - self.base_offset, _INT, 0)
        if slot < 0:
            keep = 0
        else:
            keep = slot if self.entry(slot).offset == offset else slot + 1
        self._truncate_to_entries(keep)
        self._last_offset = self._read_last_offset()

    def sanity_check(self, log_size: int) -> None:
        if self._length % self.ENTRY_SIZE:
            raise CorruptIndexError(f"{self.path}: size {self._length} is not a multiple of 8")
        if self._entries:
            # The first and last entries bound the rest: offsets and positions only grow.
            first, last = self.entry(0), self.entry(self._entries - 1)
            if first.offset < self.base_offset or last.offset < first.offset:
                raise CorruptIndexError(
                    f"{self.path}: offsets {first.offset}..{last.offset} are out of order"
                )
            if first.position > last.position or last.position >= log_size:
                raise CorruptIndexError(
                    f"{self.path}: positions {first.position}..{last.position} exceed the log ({log_size})"
                )


class TimeIndex(_MappedIndex):
    """Sparse map of max timestamp so far -> offset (12-byte entries); one slot is kept for the entry
    written when the segment becomes inactive, as Kafka does."""

    ENTRY_SIZE = 12

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._last = self._read_last_entry()

    def _read_last_entry(self) -> TimestampOffset:
        return self.entry(self._entries - 1) if self._entries else TimestampOffset(-1, self.base_offset)

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        return self._last

    def entry(self, n: int) -> TimestampOffset:
        assert self._mm is not None
        ts, rel = _TIME_ENTRY.unpack_from(self._mm, n * 12)
        return TimestampOffset(ts, self.base_offset + rel)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Adds (timestamp, offset) if timestamp is larger than the last entry's."""
        if not skip_full_check and self.is_full:
            raise ValueError(f"{self.path}: attempt to append to a full time index")
        if self._entries and offset < self._last.offset:
            raise ValueError(f"{self.path}: offset {offset} is below the last entry's {self._last.offset}")
        if self._entries and timestamp < self._last.timestamp:
            raise ValueError(
                f"{self.path}: timestamp {timestamp} is below the last entry's {self._last.timestamp}"
            )
        if self._entries == 0 or timestamp > self._last.timestamp:
            self._ensure_room()
            assert self._mm is not None
            _TIME_ENTRY.pack_into(self._mm, self._entries * 12, timestamp, offset - self.base_offset)
            self._entries += 1
            self._last = TimestampOffset(timestamp, offset)

    def maybe_append_many(self, entries: list[tuple[int, int]]) -> None:
        """maybe_append of each (timestamp, offset), in order."""
        last_ts = self._last.timestamp if self._entries else None
        for timestamp, offset in entries:
            if last_ts is None or timestamp > last_ts:
                self.maybe_append(timestamp, offset)
                last_ts = timestamp

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The last entry with timestamp <= target, or (-1, base_offset)."""
        slot = self._largest_lower_bound(target_timestamp, _LONG, 0)
        return TimestampOffset(-1, self.base_offset) if slot < 0 else self.entry(slot)

    def truncate_to(self, offset: int) -> None:
        """Removes entries pointing at or after `offset`."""
        slot = self._largest_lower_bound(offset - self.base_offset, _INT, 8)
        if slot < 0:
            keep = 0
        else:
            keep = slot if self.entry(slot).offset == offset else slot + 1
        self._truncate_to_entries(keep)
        self._last = self._read_last_entry()

    def sanity_check(self) -> None:
        if self._length % self.ENTRY_SIZE:
            raise CorruptIndexError(f"{self.path}: size {self._length} is not a multiple of 12")
        if self._entries:
            if self._last.offset < self.base_offset:
                raise CorruptIndexError(
                    f"{self.path}: last offset {self._last.offset} below base {self.base_offset}"
                )
            if self._last.timestamp < self.entry(0).timestamp:
                raise CorruptIndexError(f"{self.path}: last timestamp below the first")
