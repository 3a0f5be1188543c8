"""The per-segment aborted-transaction index (`.txnindex`), in Kafka's format.

Each entry (34 bytes, big-endian): version int16 (0), producer id int64, first offset int64,
last offset int64, last stable offset int64. An entry is added to the segment holding the abort
marker; read_committed fetches collect the entries overlapping the range they return. The file is
created on the first entry and is not preallocated.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from storage.errors import CorruptIndexError

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """Entries are kept in memory too: aborts are rare and the file is read whole when opened."""

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] = []
        self._fd = -1
        if os.path.exists(path):
            self._open()
            self._entries = self._read_all()

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    def _read_all(self) -> list[AbortedTxn]:
        size = os.fstat(self._fd).st_size
        data = os.pread(self._fd, size, 0)
        out = []
        for pos in range(0, size - size % ENTRY_SIZE, ENTRY_SIZE):
            _version, *fields = _ENTRY.unpack_from(data, pos)
            out.append(AbortedTxn(*fields))
        return out

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def append(self, txn: AbortedTxn) -> None:
        if self._entries and txn.last_offset <= self._entries[-1].last_offset:
            raise ValueError(
                f"{self.path}: aborted txn last offset {txn.last_offset} is not after "
                f"{self._entries[-1].last_offset}"
            )
        if self._fd < 0:
            self._open()
        os.write(self._fd, _ENTRY.pack(0, *txn))
        self._entries.append(txn)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset)."""
        return [
            t for t in self._entries if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset
        ]

    def search(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The entries overlapping [fetch_offset, upper_bound_offset), and whether the search may stop
        here: an entry whose last stable offset reaches the upper bound was written when every
        transaction overlapping the range had completed (Kafka's TransactionIndex.collectAbortedTxns)."""
        found = []
        for t in self._entries:
            if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset:
                found.append(t)
            if t.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Removes entries whose abort marker is at or after `offset`."""
        keep = [t for t in self._entries if t.last_offset < offset]
        if len(keep) != len(self._entries):
            self._entries = keep
            if self._fd >= 0:
                os.ftruncate(self._fd, len(keep) * ENTRY_SIZE)

    def reset(self) -> None:
        self.truncate_to(-1)

    def sanity_check(self) -> None:
        if self._fd >= 0:
            size = os.fstat(self._fd).st_size
            if size % ENTRY_SIZE:
                raise CorruptIndexError(f"{self.path}: size {size} is not a multiple of {ENTRY_SIZE}")

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
