"""LogSegment: one `<base offset>.log` file of record batches with its `.index`, `.timeindex` and `.txnindex`.

Writes go to the file with os.write (the kernel has the bytes when append returns); reads locate batches
with the sparse offset index and scan batch headers of a read-only map of the file. The map is taken
lazily and retaken when the file has grown past it; maps are never closed explicitly because fetch
results may still hold views of them (they are released when the last view goes).

A segment holds one descriptor, its `.log` file's, as Kafka's FileRecords does (the indexes are mapped
without one); a read map, once taken, holds a duplicate of it until it is released.
"""

from __future__ import annotations

import logging
import mmap
import os
from collections.abc import Callable, Iterator
from typing import NamedTuple

from protocol import record_batch
from protocol.record_batch import HEADER_SIZE, BatchHeader, CorruptRecordError
from storage.config import LogConfig
from storage.fetch import LogOffsetMetadata
from storage.index import OffsetIndex, TimeIndex, TimestampOffset
from storage.leader_epoch import LeaderEpochFileCache
from storage.txn_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

INT_MAX = 2**31 - 1
TIMESTAMP_TYPE_LOG_APPEND = 1


def filename_prefix(offset: int) -> str:
    """Kafka's 20-digit zero-padded offset used in segment and snapshot file names."""
    return f"{offset:020d}"


def segment_path(directory: str, base_offset: int, suffix: str) -> str:
    return os.path.join(directory, filename_prefix(base_offset) + suffix)


class BatchPosition(NamedTuple):
    """A batch found by translate_offset: its last offset, byte position and size."""

    offset: int
    position: int
    size: int


class SegmentRead(NamedTuple):
    """Byte range a segment read yields (before the log wraps it in FetchDataInfo)."""

    offset_metadata: LogOffsetMetadata
    position: int
    length: int
    first_entry_incomplete: bool


class LogSegment:
    """A segment; the owning Log serializes every mutating call."""

    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        roll_jitter_ms: int = 0,
        time_ms: Callable[[], int],
        suffix: str = "",
    ) -> None:
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.roll_jitter_ms = roll_jitter_ms
        self._time_ms = time_ms
        self.log_path = segment_path(directory, base_offset, LOG_SUFFIX + suffix)
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            self._size = os.fstat(self._fd).st_size
            self.offset_index = OffsetIndex(
                segment_path(directory, base_offset, INDEX_SUFFIX + suffix), base_offset, max_index_size
            )
            self.time_index = TimeIndex(
                segment_path(directory, base_offset, TIME_INDEX_SUFFIX + suffix), base_offset, max_index_size
            )
            self.txn_index = TransactionIndex(
                segment_path(directory, base_offset, TXN_INDEX_SUFFIX + suffix), base_offset
            )
        except BaseException:
            # Out of descriptors, maps or space: a segment that cannot open keeps nothing open.
            for name in ("offset_index", "time_index"):
                if hasattr(self, name):
                    getattr(self, name).close_without_trim()
            os.close(self._fd)
            raise
        self._map: mmap.mmap | None = None
        self._view: memoryview | None = None
        self.created_ms = time_ms()
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self._max_ts: TimestampOffset | None = None  # loaded lazily from the time index

    @classmethod
    def for_config(
        cls,
        directory: str,
        base_offset: int,
        config: LogConfig,
        time_ms: Callable[[], int],
        *,
        suffix: str = "",
        roll_jitter_ms: int = 0,
    ) -> LogSegment:
        """A segment sized by the topic's index settings."""
        return cls(
            directory,
            base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            roll_jitter_ms=roll_jitter_ms,
            time_ms=time_ms,
            suffix=suffix,
        )

    # --- state ---------------------------------------------------------------------------------------

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def size(self) -> int:
        return self._size

    @property
    def max_timestamp_so_far(self) -> TimestampOffset:
        if self._max_ts is None:
            self._max_ts = self._load_largest_timestamp()
        return self._max_ts

    def _load_largest_timestamp(self) -> TimestampOffset:
        """The time index's last entry, then the batches after it (Kafka's loadLargestTimestamp)."""
        best = self.time_index.last_entry
        start = self.offset_index.lookup(best.offset).position if best.timestamp >= 0 else 0
        for _, header in self.batches(start):
            if header.max_timestamp > best.timestamp:
                best = TimestampOffset(header.max_timestamp, header.last_offset)
        return best

    @property
    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the file's mtime when none (Kafka's rule for retention.ms)."""
        ts = self.max_timestamp_so_far.timestamp
        return ts if ts >= 0 else self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        return int(os.stat(self.log_path).st_mtime * 1000)

    def set_last_modified_ms(self, ms: int) -> None:
        os.utime(self.log_path, ns=(ms * 1_000_000, ms * 1_000_000))

    def first_batch_timestamp(self) -> int | None:
        """The first batch's max timestamp (what segment.ms and max.compaction.lag.ms measure from)."""
        if self._rolling_based_timestamp is None and self._size:
            self._rolling_based_timestamp = record_batch.read_header(self.view(), 0).max_timestamp
        return self._rolling_based_timestamp

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT_MAX

    def should_roll(
        self,
        *,
        max_segment_bytes: int,
        max_segment_ms: int,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
    ) -> bool:
        """Kafka's LogSegment.shouldRoll: size, age (by first record timestamp, with jitter), a full
        index, or an offset that the 4-byte relative index cannot hold."""
        return (
            self._size > max_segment_bytes - messages_size
            or (
                self._size > 0
                and self._time_waited_for_roll(now_ms, max_timestamp_in_messages)
                > max_segment_ms - self.roll_jitter_ms
            )
            or self.offset_index.is_full
            or self.time_index.is_full
            or not self.can_convert_to_relative_offset(max_offset_in_messages)
        )

    def _time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        first = self.first_batch_timestamp()
        if first is not None and first >= 0:
            return message_timestamp - first
        return now_ms - self.created_ms

    # --- the mapped file -----------------------------------------------------------------------------

    def view(self) -> memoryview:
        """A read-only memoryview of the whole file as written so far (no copy)."""
        if self._view is None or len(self._view) < self._size:
            if self._size == 0:
                return memoryview(b"")
            self._map = mmap.mmap(self._fd, self._size, prot=mmap.PROT_READ)
            self._view = memoryview(self._map)
        return self._view[: self._size]

    def slice(self, position: int, length: int) -> memoryview:
        return self.view()[position : position + length]

    def batches(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each complete batch in [start, end)."""
        if start >= self._size:
            return iter(())
        return record_batch.iter_headers(self.view(), start, self._size if end is None else end)

    def _drop_map(self) -> None:
        self._map = None
        self._view = None

    # --- writes --------------------------------------------------------------------------------------

    def append(self, buf: memoryview, batches: list[tuple[int, int, int]]) -> None:
        """Writes `buf` (whole batches) at the end of the file; `batches` holds (size, last offset, max
        timestamp) of each batch in order. An index entry is added when more than index.interval.bytes
        were written since the last one (Kafka's per-batch rule)."""
        position = self._size
        if position == 0 and batches:
            self._rolling_based_timestamp = batches[0][2]
        view = buf
        while view:
            view = view[os.write(self._fd, view) :]
        max_ts = self.max_timestamp_so_far
        max_value, max_offset = max_ts
        since = self._bytes_since_last_index_entry
        interval = self.index_interval_bytes
        offset_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        for size, last_offset, timestamp in batches:
            if timestamp > max_value:
                max_value, max_offset = timestamp, last_offset
            if since > interval:
                offset_entries.append((last_offset, position))
                time_entries.append((max_value, max_offset))
                since = 0
            position += size
            since += size
        if offset_entries:
            self.offset_index.append_many(offset_entries)
            self.time_index.maybe_append_many(time_entries)
        self._bytes_since_last_index_entry = since
        if max_value != max_ts.timestamp:
            self._max_ts = TimestampOffset(max_value, max_offset)
        self._size = position

    def append_txn(self, txn: AbortedTxn) -> None:
        self.txn_index.append(txn)

    # --- reads ---------------------------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchPosition | None:
        """The first batch whose last offset is >= offset, searched from the index entry below it."""
        start = max(self.offset_index.lookup(offset).position, starting_position)
        for pos, header in self.batches(start):
            if header.last_offset >= offset:
                return BatchPosition(header.last_offset, pos, header.size)
        return None

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = False
    ) -> SegmentRead | None:
        """Kafka's LogSegment.read: None when start_offset is past this segment; otherwise up to max_size
        bytes from the batch holding it, not beyond max_position. The last batch may be partial."""
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        metadata = LogOffsetMetadata(start_offset, self.base_offset, found.position)
        adjusted = max(max_size, found.size) if min_one_message else max_size
        limit = self._size if max_position is None else max_position
        length = max(0, min(limit - found.position, adjusted))
        return SegmentRead(metadata, found.position, length, adjusted < found.size)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> TimestampOffset | None:
        """The first record at or after `starting_offset` with a timestamp >= `timestamp`."""
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        view = self.view()
        for pos, header in self.batches(position):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            if header.timestamp_type == TIMESTAMP_TYPE_LOG_APPEND:
                return TimestampOffset(header.max_timestamp, max(header.base_offset, starting_offset))
            for record in record_batch.decode_records(view, pos):
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return TimestampOffset(record.timestamp, record.offset)
        return None

    def find_max_timestamp_record(self) -> tuple[int, int, int] | None:
        """ListOffsets MAX_TIMESTAMP (Kafka 3.8+, KAFKA-16310): (timestamp, offset, batch leader epoch)
        of the first record holding this segment's largest timestamp. The segment tracks that timestamp
        with its batch's last offset; the batch is found from there and its records searched (a
        LogAppendTime batch's records all carry its max timestamp: its first record). None when empty."""
        target = self.max_timestamp_so_far
        position = self.offset_index.lookup(target.offset).position if target.timestamp >= 0 else 0
        view = self.view()
        for pos, header in self.batches(position):
            if header.max_timestamp != target.timestamp:
                continue
            for record in record_batch.decode_records(view, pos):
                if record.timestamp == header.max_timestamp:
                    return header.max_timestamp, record.offset, header.partition_leader_epoch
            return None
        return None

    def read_next_offset(self) -> int:
        """The offset after the last batch (scans from the last index entry)."""
        next_offset = self.base_offset
        for _, header in self.batches(self.offset_index.lookup(2**63 - 1).position):
            next_offset = header.last_offset + 1
        return next_offset

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        return self.txn_index.collect(fetch_offset, upper_bound_offset)

    # --- recovery and truncation -------------------------------------------------------------------

    def sanity_check(self) -> None:
        """Raises CorruptIndexError if an index is malformed or points past the data."""
        self.offset_index.sanity_check(self._size)
        self.time_index.sanity_check()
        self.txn_index.sanity_check()

    def recover(
        self,
        epoch_cache: LeaderEpochFileCache | None = None,
        on_batch: Callable[[memoryview, int, BatchHeader], AbortedTxn | None] | None = None,
    ) -> int:
        """Rebuilds the indexes by validating every batch; truncates the file at the first invalid or
        incomplete batch. `on_batch` replays each valid batch into producer state and returns the
        aborted-transaction entry its marker completes, which rebuilds the transaction index. Returns
        the number of bytes truncated."""
        self.offset_index.reset()
        self.time_index.reset()
        if on_batch is not None:
            self.txn_index.reset()
        view = self.view()
        size = self._size
        valid = last_index_entry = 0
        expected = self.base_offset
        max_ts = TimestampOffset(-1, self.base_offset)
        reason = "incomplete batch"
        while valid < size:
            try:
                if size - valid < HEADER_SIZE:
                    break
                header = record_batch.read_header(view, valid)
                if header.size < HEADER_SIZE:
                    raise CorruptRecordError(f"batch length {header.batch_length} below the minimum")
                if valid + header.size > size:
                    break
                if not record_batch.crc_ok(view, valid, header):
                    raise CorruptRecordError("CRC mismatch")
                if header.base_offset < expected or header.last_offset < header.base_offset:
                    raise CorruptRecordError(
                        f"offsets [{header.base_offset}, {header.last_offset}] do not follow {expected - 1}"
                    )
                if not self.can_convert_to_relative_offset(header.last_offset):
                    raise CorruptRecordError(f"offset {header.last_offset} overflows the segment")
            except CorruptRecordError as e:
                reason = str(e)
                break
            if header.max_timestamp > max_ts.timestamp:
                max_ts = TimestampOffset(header.max_timestamp, header.last_offset)
            if valid - last_index_entry > self.index_interval_bytes:
                self.offset_index.append(header.last_offset, valid)
                self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                last_index_entry = valid
            epoch = header.partition_leader_epoch
            if epoch_cache is not None and epoch >= 0:
                latest = epoch_cache.latest_epoch
                if latest is None or epoch > latest:  # as Kafka: only newer epochs, never rewrite history
                    epoch_cache.assign(epoch, header.base_offset)
            if on_batch is not None:
                aborted = on_batch(view, valid, header)
                if aborted is not None:
                    self.txn_index.append(aborted)
            valid += header.size
            expected = header.last_offset + 1
        del view
        truncated = size - valid
        if truncated:
            log.warning(
                "Found invalid messages in log segment %s at byte offset %d (offset %d): %s; "
                "truncating %d bytes",
                self.log_path,
                valid,
                expected,
                reason,
                truncated,
            )
            self._truncate_file(valid)
        if max_ts.timestamp >= 0:
            self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
        self._max_ts = max_ts
        self._bytes_since_last_index_entry = 0
        return truncated

    def _truncate_file(self, size: int) -> None:
        self._drop_map()
        os.ftruncate(self._fd, size)
        self._size = size
        if size == 0:
            self.created_ms = self._time_ms()
            self._rolling_based_timestamp = None

    def truncate_to(self, offset: int) -> int:
        """Removes every batch ending at or after `offset` (a batch holding it goes whole); returns the
        bytes removed. Indexes are preallocated again: the segment becomes the active one."""
        found = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        if found is None:
            return 0
        removed = self._size - found.position
        self._truncate_file(found.position)
        self._bytes_since_last_index_entry = 0
        self._max_ts = None
        return removed

    # --- lifecycle -----------------------------------------------------------------------------------

    def make_active(self) -> None:
        """Preallocates the indexes again (a segment loaded from disk becomes the one written to)."""
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)

    def on_become_inactive(self) -> None:
        """Writes the final time index entry and trims the indexes (the segment was rolled)."""
        max_ts = self.max_timestamp_so_far
        if max_ts.timestamp >= 0:
            self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def flush(self) -> None:
        os.fsync(self._fd)
        for index in (self.offset_index, self.time_index, self.txn_index):
            index.flush()

    def close(self) -> None:
        if self._fd < 0:
            return
        max_ts = self.max_timestamp_so_far
        if max_ts.timestamp >= 0:
            self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        os.close(self._fd)
        self._fd = -1
        self._drop_map()

    def close_handlers(self) -> None:
        """Releases descriptors and maps without trimming or writing (the files are going away)."""
        self.offset_index.close_without_trim()
        self.time_index.close_without_trim()
        self.txn_index.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._drop_map()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Renames all files of the segment (e.g. '' -> '.deleted', '.cleaned' -> '.swap')."""

        def renamed(path: str) -> str:
            if not path.endswith(old_suffix):
                raise ValueError(f"{path} does not end with {old_suffix!r}")
            return path[: len(path) - len(old_suffix)] + new_suffix

        new_log = renamed(self.log_path)
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        for index in (self.offset_index, self.time_index, self.txn_index):
            index.rename(renamed(index.path))

    def delete(self) -> None:
        """Closes and removes every file of the segment."""
        self.close_handlers()
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        try:
            os.unlink(self.log_path)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size}, path={self.log_path})"
