"""Values a read returns: where an offset lives on disk (LogOffsetMetadata) and the result of a read
(FetchDataInfo), a byte range of a segment file that a response carries as is: the network layer sends
it with os.sendfile (it is a `network.send.FileRegion`), and in-process readers take its bytes through
a memoryview of the mapped log."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from storage.txn_index import AbortedTxn


class LogOffsetMetadata(NamedTuple):
    """An offset with the segment and byte position holding it (-1/-1 when unknown), as in Kafka; the
    fetch purgatory compares positions to count accumulated bytes."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position: int = -1

    def on_same_segment(self, other: LogOffsetMetadata) -> bool:
        return self.segment_base_offset == other.segment_base_offset and self.segment_base_offset >= 0

    def position_diff(self, other: LogOffsetMetadata) -> int:
        """Bytes between two offsets of one segment."""
        return self.relative_position - other.relative_position


class FetchDataInfo:
    """The result of Log.read: `length` bytes at `position` of the file descriptor `fd` (a .log segment),
    with where the read started, whether its first batch was cut short, and the aborted transactions a
    read_committed fetch must be told of.

    `records` is a zero-copy memoryview of the mapped segment; it stays valid while the log is not
    truncated below it, so copy it if it must outlive a truncation. The descriptor stays open at least
    file.delete.delay.ms after its segment leaves the log, which bounds how long a sendfile may lag.
    """

    __slots__ = (
        "_view",
        "aborted_transactions",
        "fd",
        "fetch_offset_metadata",
        "first_entry_incomplete",
        "length",
        "position",
    )

    def __init__(
        self,
        fetch_offset_metadata: LogOffsetMetadata,
        fd: int = -1,
        position: int = 0,
        length: int = 0,
        view: Callable[[int, int], memoryview] | None = None,
        first_entry_incomplete: bool = False,
        aborted_transactions: list[AbortedTxn] | None = None,
    ) -> None:
        self.fetch_offset_metadata = fetch_offset_metadata
        self.fd = fd
        self.position = position
        self.length = length
        self._view = view
        self.first_entry_incomplete = first_entry_incomplete
        self.aborted_transactions = aborted_transactions

    def __len__(self) -> int:
        return self.length

    @property
    def records(self) -> memoryview:
        if self._view is None or self.length == 0:
            return memoryview(b"")
        return self._view(self.position, self.length)

    def __repr__(self) -> str:
        return (
            f"FetchDataInfo({self.fetch_offset_metadata}, fd={self.fd}, position={self.position}, "
            f"length={self.length}, first_entry_incomplete={self.first_entry_incomplete})"
        )
