"""Memory-mapped sparse segment indexes: `.index` (offset -> position) and `.timeindex` (timestamp -> offset).

Layout is Kafka's: big-endian fixed-size entries, offsets stored relative to the segment's base offset.
An index of a segment being written is preallocated to segment.index.bytes (zero filled) and trimmed to
its entries when the segment stops being active or is closed. Lookups are binary searches over the map.

As Kafka's AbstractIndex, an index holds its map but no file descriptor: the file is opened to map it
(and to resize it) and closed at once. Python 3.11's mmap keeps a duplicate descriptor for the map's
lifetime, which made every partition hold three descriptors instead of one, so the map is taken with
libc's mmap directly. Unmapping memory still in use would crash the process rather than raise, so every
access to a map holds the index's remap lock (Kafka's remapLock), and the map is never handed out.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import struct
import threading
from typing import NamedTuple

from storage.errors import CorruptIndexError

_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, physical position
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")

# libc's mmap and munmap, called with the GIL held (PyDLL): no Python thread runs while a map changes.
_libc = ctypes.PyDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int64,
]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_MAP_FAILED = ctypes.c_void_p(-1).value


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class _FileMap:
    """A shared read-write map of the first ``length`` bytes of the file open as ``fd``; the caller may
    close ``fd`` once this is made, the map stays valid until ``close``."""

    def __init__(self, fd: int, length: int) -> None:
        self._address = 0  # nothing to unmap should the map fail
        address = _libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            errno = ctypes.get_errno()
            raise OSError(errno, f"mmap of {length} bytes failed: {os.strerror(errno)}")
        self._address = address
        self._length = length
        self._raw = memoryview((ctypes.c_ubyte * length).from_address(address))
        self.buf = self._raw.cast("B")

    def close(self) -> None:
        if not self._address:
            return
        # release() raises BufferError while anything still holds the view: a map leaked that way is
        # better than one unmapped under a reader.
        self.buf.release()
        self._raw.release()
        address, self._address = self._address, 0
        if _libc.munmap(address, self._length) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"munmap failed: {os.strerror(errno)}")

    def __del__(self) -> None:
        # As Python's mmap: an index dropped without being closed does not keep its map.
        self.close()


def _open_map(path: str, preallocate: int | None) -> tuple[_FileMap | None, int]:
    """(map, file length) of the index file at ``path``, created with ``preallocate`` bytes unless
    that is None (the file exists); no map for an empty file. The file is closed again."""
    fd = os.open(path, os.O_RDWR | (os.O_CREAT if preallocate is not None else 0), 0o644)
    try:
        if preallocate is not None:
            os.ftruncate(fd, preallocate)
            length = preallocate
        else:
            length = os.fstat(fd).st_size
        return (_FileMap(fd, length) if length else None), length
    finally:
        os.close(fd)


class _MappedIndex:
    """A file of fixed-size entries mapped into memory, with a count of the valid ones."""

    ENTRY_SIZE = 0

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size - max_index_size % self.ENTRY_SIZE
        self._closed = False
        self._remap_lock = threading.RLock()
        created = not os.path.exists(path)
        self._mm, self._length = _open_map(path, self.max_index_size if created else None)
        self._entries = 0 if created else self._count_entries(self._length // self.ENTRY_SIZE)

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
        return not any(self._mm.buf[start : start + self.ENTRY_SIZE])

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
        with self._remap_lock:
            if new_size == self._length:
                return
            # The new map first: an index that cannot be resized (no descriptor, no memory) keeps its
            # old map and length. Nothing reads the old map once the file shrank: the lock is held.
            fd = os.open(self.path, os.O_RDWR)
            try:
                os.ftruncate(fd, new_size)
                try:
                    new_map = _FileMap(fd, new_size) if new_size else None
                except OSError:
                    os.ftruncate(fd, self._length)  # the old map must not reach past the end of the file
                    raise
            finally:
                os.close(fd)
            old, self._mm, self._length = self._mm, new_map, new_size
            if old is not None:
                old.close()

    def trim_to_valid_size(self) -> None:
        self.resize(self.size_in_bytes)

    def reset(self) -> None:
        """Drops every entry and preallocates again (the segment is being rebuilt or emptied)."""
        self._truncate_to_entries(0)
        self.resize(self.max_index_size)

    def _truncate_to_entries(self, n: int) -> None:
        with self._remap_lock:
            if n < self._entries and self._mm is not None:
                # Zero the dropped entries so a crash before trimming cannot resurrect them.
                self._mm.buf[n * self.ENTRY_SIZE : self._entries * self.ENTRY_SIZE] = bytes(
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
        with self._remap_lock:
            size, n = self.ENTRY_SIZE, self._entries
            if n == 0 or self._mm is None:
                return -1
            buf, unpack = self._mm.buf, key_struct.unpack_from
            if unpack(buf, field_at)[0] > key:
                return -1
            lo, hi = 0, n - 1
            while lo < hi:
                mid = (lo + hi + 1) >> 1
                if unpack(buf, mid * size + field_at)[0] <= key:
                    lo = mid
                else:
                    hi = mid - 1
            return lo

    def _read(self, entry: struct.Struct, n: int) -> tuple[int, int]:
        with self._remap_lock:
            assert self._mm is not None
            return entry.unpack_from(self._mm.buf, n * self.ENTRY_SIZE)

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
        with self._remap_lock:
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
        rel, pos = self._read(_OFFSET_ENTRY, n)
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
        with self._remap_lock:
            if self.is_full:
                self._ensure_room()
            assert self._mm is not None
            _OFFSET_ENTRY.pack_into(self._mm.buf, self._entries * 8, offset - self.base_offset, position)
            self._entries += 1
            self._last_offset = offset

    def append_many(self, entries: list[tuple[int, int]]) -> None:
        """Appends (offset, position) pairs, increasing, in one go (the append path's batch of entries)."""
        if entries[0][0] <= self._last_offset and self._entries:
            raise ValueError(
                f"{self.path}: offset {entries[0][0]} is not after last offset {self._last_offset}"
            )
        with self._remap_lock:
            while self._entries + len(entries) > self.max_entries:
                self._grow()
            assert self._mm is not None
            buf, pack, base, n = self._mm.buf, _OFFSET_ENTRY.pack_into, self.base_offset, self._entries
            for offset, position in entries:
                pack(buf, n * 8, offset - base, position)
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
        ts, rel = self._read(_TIME_ENTRY, n)
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
            with self._remap_lock:
                self._ensure_room()
                assert self._mm is not None
                _TIME_ENTRY.pack_into(self._mm.buf, self._entries * 12, timestamp, offset - self.base_offset)
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
