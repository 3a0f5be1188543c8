"""Log: one partition's running log of segments (Kafka's UnifiedLog and LocalLog); opening it is
storage.log_loader's work, validating what is appended storage.log_validator's.

Owns the segment list and the offsets (log start, high watermark, log end, recovery point), appends
(offsets assigned by patching batch headers in place, producer state and leader epochs updated, the
segment rolled), reads for fetches, ListOffsets by time, truncation, retention and DeleteRecords,
flushing, and the segment swap of a compaction.

The broker calls append/read synchronously from its event loop. A Log is thread-safe: an RLock guards
the segment list and offsets, so the cleaner thread can swap segments and a flush thread can fsync while
the loop appends. Lock order: `_flush_lock` before `_lock`; the cleaner holds `_cleaner_lock` while it
reads this log's segments, and truncation raises `_abort_cleaning` and waits for it.

Segments leaving the log (retention, truncation, compaction) are renamed `.deleted` at once and their
descriptors closed and files removed after file.delete.delay.ms (delete_pending_files), so a sendfile
of a fetch result stays valid meanwhile.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from protocol import record_batch
from protocol.record_batch import ATTR_TRANSACTIONAL, BatchHeader
from storage.checkpoints import fsync_dir
from storage.config import LogConfig
from storage.errors import (
    InvalidTxnStateError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    UnexpectedAppendOffsetError,
)
from storage.fetch import FetchDataInfo, LogOffsetMetadata
from storage.leader_epoch import LeaderEpochFileCache
from storage.log_loader import LogLoader, rebuild_producer_state
from storage.log_validator import LogValidator
from storage.partition_metadata import InconsistentTopicIdError, PartitionMetadataFile, topic_id_string
from storage.producer_state import (
    SENTINEL,
    AppendOrigin,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateManager,
    VerificationGuard,
)
from storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    segment_path,
)
from storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

# Told how long each flush that wrote something took, in ms, from the thread that flushed: Kafka's
# LogFlushStats timer, which is one per process there too (the broker's metrics set it). None: untimed.
flush_timer: Callable[[float], None] | None = None

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# `<topic>-<partition>.<uuid hex>-future|-delete|-stray` (Kafka's LocalLog.parseTopicPartitionName).
_MOVING_DIR = re.compile(r"^(.+-\d+)\.[0-9a-f]{32}-(?:future|delete|stray)$")


def parse_topic_partition(dir_name: str) -> tuple[str, int]:
    """`<topic>-<partition>` -> (topic, partition); topics may themselves contain '-'. Also Kafka's
    `<topic>-<partition>.<uuid>-future` (a replica moving between log dirs) and `-delete` names."""
    moving = _MOVING_DIR.match(dir_name)
    if moving is not None:
        dir_name = moving.group(1)
    topic, sep, partition = dir_name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{dir_name!r} is not a <topic>-<partition> log directory name")
    return topic, int(partition)


@dataclass(slots=True)
class LogAppendInfo:
    """What an append did: offsets assigned (or, for a duplicate, those of the original append)."""

    first_offset: int
    last_offset: int
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    log_append_time: int = -1
    log_start_offset: int = 0
    num_records: int = 0
    valid_bytes: int = 0
    duplicate: bool = False


class TimestampAndOffset(NamedTuple):
    """A ListOffsets answer: timestamp (-1 when not by time), offset, and the leader epoch of that offset."""

    timestamp: int
    offset: int
    leader_epoch: int | None


class Log:
    """A partition log in `directory` (named `<topic>-<partition>`)."""

    def __init__(
        self,
        directory: str,
        config: LogConfig,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        had_clean_shutdown: bool = False,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        time_ms: Callable[[], int] = now_ms,
        transaction_verification_enabled: bool = False,
    ) -> None:
        self.dir = os.path.abspath(directory)
        self.topic, self.partition = parse_topic_partition(os.path.basename(self.dir))
        self.name = f"{self.topic}-{self.partition}"
        self.config = config
        self._time_ms = time_ms
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self.cleaner_lock = threading.Lock()
        self.abort_cleaning_event = threading.Event()
        self._pending_deletes: list[tuple[int, LogSegment | str]] = []
        self._pending_roll_flush: int | None = None
        self._upper_bound_cache: tuple[int, int, int] | None = None  # offset, segment base, position
        self.last_flush_ms = time_ms()
        self.closed = False
        os.makedirs(self.dir, exist_ok=True)
        # KIP-516: the topic id this directory belongs to, from its partition.metadata (None until a
        # LeaderAndIsr names one: assign_topic_id); a corrupt file refuses to open (KafkaStorageError).
        self.partition_metadata = PartitionMetadataFile(self.dir)
        self.topic_id: uuid.UUID | None = self.partition_metadata.read()
        self.leader_epoch_cache = LeaderEpochFileCache(self.dir)
        self.producer_state = ProducerStateManager(self.dir, producer_id_expiration_ms, self.name)
        self.producer_state.transaction_verification_enabled = transaction_verification_enabled
        loaded = LogLoader(
            self.dir, self.name, config, time_ms, self.leader_epoch_cache, self.producer_state
        ).load(log_start_offset, recovery_point, had_clean_shutdown)
        self._segments = loaded.segments
        self._bases = [s.base_offset for s in loaded.segments]
        self._log_start_offset = loaded.log_start_offset
        self._leo = loaded.log_end_offset
        self.recovery_point = loaded.recovery_point
        self._hw = self._log_start_offset
        try:
            if self._leo < self._log_start_offset:
                log.warning(
                    "%s: log end %d is below the log start %d; starting afresh there",
                    self.name,
                    self._leo,
                    self._log_start_offset,
                )
                self._truncate_fully_locked(self._log_start_offset)
            self.leader_epoch_cache.truncate_from_end(self._leo)
            self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
            self.active_segment.make_active()
        except BaseException:
            # A log that cannot open (out of descriptors, say) must not keep the segments it opened.
            for segment in self._segments:
                segment.close_handlers()
            raise

    def _new_segment(self, base_offset: int, suffix: str = "", jitter: int = 0) -> LogSegment:
        return LogSegment.for_config(
            self.dir, base_offset, self.config, self._time_ms, suffix=suffix, roll_jitter_ms=jitter
        )

    def _rebuild_producer_state(self, last_offset: int) -> None:
        rebuild_producer_state(
            self.producer_state, self._segments, self._log_start_offset, last_offset, self._time_ms()
        )

    # --- segments ------------------------------------------------------------------------------------

    def _floor_index(self, offset: int) -> int:
        return bisect.bisect_right(self._bases, offset) - 1

    def _add_segment(self, segment: LogSegment) -> None:
        i = bisect.bisect_left(self._bases, segment.base_offset)
        if i < len(self._bases) and self._bases[i] == segment.base_offset:
            self._segments[i] = segment
        else:
            self._segments.insert(i, segment)
            self._bases.insert(i, segment.base_offset)

    def _remove_segment(self, segment: LogSegment) -> None:
        i = self._segments.index(segment)
        del self._segments[i]
        del self._bases[i]

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        with self._lock:
            return list(self._segments)

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def size(self) -> int:
        """Bytes in all segments."""
        with self._lock:
            return sum(s.size for s in self._segments)

    # --- offsets -------------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        with self._lock:
            active = self.active_segment
            return LogOffsetMetadata(self._leo, active.base_offset, active.size)

    @property
    def high_watermark(self) -> int:
        return self._hw

    def update_high_watermark(self, high_watermark: int) -> int:
        """Sets the high watermark, clamped to [log start, log end]; returns the value set."""
        with self._lock:
            self._hw = min(max(high_watermark, self._log_start_offset), self._leo)
            self.producer_state.on_high_watermark_updated(self._hw)
            return self._hw

    def maybe_increment_high_watermark(self, high_watermark: int) -> bool:
        """Moves the high watermark forward only; True if it moved."""
        with self._lock:
            if high_watermark <= self._hw:
                return False
            self.update_high_watermark(high_watermark)
            return True

    @property
    def first_unstable_offset(self) -> int | None:
        return self.producer_state.first_unstable_offset()

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may see: the first open transaction's offset or the HW."""
        with self._lock:
            unstable = self.producer_state.first_unstable_offset()
            return self._hw if unstable is None else min(unstable, self._hw)

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch; (-1, -1) when unknown."""
        with self._lock:
            return self.leader_epoch_cache.end_offset_for(leader_epoch, self._leo)

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        self.leader_epoch_cache.assign(leader_epoch, start_offset)

    # --- transaction verification (KIP-890 part 1) ---------------------------------------------------

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        with self._lock:
            return self.producer_state.has_ongoing_transaction(producer_id)

    def maybe_start_transaction_verification(
        self, producer_id: int, sequence: int, epoch: int
    ) -> VerificationGuard:
        """The guard a transactional append of this producer must carry once the coordinator has verified
        the partition is in its transaction; SENTINEL when its transaction here is ongoing already (no
        verification needed)."""
        with self._lock:
            psm = self.producer_state
            if psm.has_ongoing_transaction(producer_id):
                return SENTINEL
            return psm.maybe_create_verification_state_entry(
                producer_id, sequence, epoch, self._time_ms()
            ).guard

    def verification_guard(self, producer_id: int) -> VerificationGuard:
        with self._lock:
            return self.producer_state.verification_guard(producer_id)

    def active_producers(self) -> list[tuple[int, int, int, int, int, int]]:
        """(producer id, epoch, last sequence, last timestamp, coordinator epoch, first offset of the
        ongoing transaction or -1) of every producer the state knows (DescribeProducers)."""
        with self._lock:
            return [
                (
                    pid,
                    e.producer_epoch,
                    e.last_seq,
                    e.last_timestamp,
                    e.coordinator_epoch,
                    -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
                )
                for pid, e in self.producer_state.producers.items()
            ]

    # --- appends -------------------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytearray | memoryview | bytes,
        leader_epoch: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard = SENTINEL,
    ) -> LogAppendInfo:
        """Appends batches as the leader: offsets are assigned by patching each batch's base offset and
        partition leader epoch (and LogAppendTime when the topic asks) in the caller's buffer, which must
        be writable (bytes are copied first). Raises the storage errors for invalid batches, producer
        sequence or epoch problems; a retried batch already in the log is not appended again and its
        original offsets are returned with duplicate=True. With transaction verification on, a client's
        transactional batch that does not continue an ongoing transaction needs the guard of its
        producer's verification (InvalidTxnStateError otherwise)."""
        buf = memoryview(records if not isinstance(records, bytes) else bytearray(records))
        return self._append(buf, origin, leader_epoch, verification_guard)

    def append_as_follower(self, records: bytearray | memoryview | bytes) -> LogAppendInfo:
        """Appends batches fetched from the leader, keeping their offsets (which must not go backwards)."""
        return self._append(memoryview(records), AppendOrigin.REPLICATION, None)

    def _append(
        self,
        buf: memoryview,
        origin: AppendOrigin,
        leader_epoch: int | None,
        verification_guard: VerificationGuard = SENTINEL,
    ) -> LogAppendInfo:
        now = self._time_ms()
        config = self.config
        batches, valid_bytes = LogValidator.validate_append(buf, config, origin, self.name, now)
        if not batches:
            return LogAppendInfo(self._leo, self._leo - 1, log_start_offset=self._log_start_offset)
        if valid_bytes < len(buf):
            buf = buf[:valid_bytes]
        with self._lock:
            self._check_open()
            assign = leader_epoch is not None
            log_append_time = now if assign and config.log_append_time else -1
            offset = self._leo
            first_offset = offset if assign else batches[0][1].base_offset
            if not assign and first_offset < self._leo:
                raise UnexpectedAppendOffsetError(
                    f"Unexpected offset in append to {self.name}. First offset {first_offset} is less than "
                    f"the next offset {self._leo}. First 10 offsets in append: "
                    f"{[h.base_offset for _, h in batches[:10]]}"
                )
            # Per batch, in the log's offsets: its first offset, and (size, last offset, max timestamp).
            bases: list[int] = []
            placed: list[tuple[int, int, int]] = []
            max_ts, offset_of_max_ts, num_records, has_producer = -1, -1, 0, False
            overhead = record_batch.LOG_OVERHEAD
            if leader_epoch is not None:
                set_base, set_epoch, set_time = (
                    record_batch.set_base_offset,
                    record_batch.set_partition_leader_epoch,
                    record_batch.set_log_append_time,
                )
                for pos, header in batches:
                    set_base(buf, pos, offset)
                    set_epoch(buf, pos, leader_epoch)
                    if log_append_time >= 0:
                        set_time(buf, pos, log_append_time)
                        ts = log_append_time
                    else:
                        ts = header.max_timestamp
                    bases.append(offset)
                    offset += header.last_offset_delta + 1
                    if ts > max_ts:
                        max_ts, offset_of_max_ts = ts, offset - 1
                    num_records += header.records_count
                    has_producer = has_producer or header.producer_id >= 0
                    placed.append((header.batch_length + overhead, offset - 1, ts))
            else:
                for _, header in batches:
                    base = header.base_offset
                    if base < offset:
                        raise OffsetsOutOfOrderError(
                            f"Out of order offsets found in append to {self.name}: {base} after {offset - 1}"
                        )
                    ts = header.max_timestamp
                    bases.append(base)
                    offset = base + header.last_offset_delta + 1
                    if ts > max_ts:
                        max_ts, offset_of_max_ts = ts, offset - 1
                    num_records += header.records_count
                    has_producer = has_producer or header.producer_id >= 0
                    placed.append((header.batch_length + overhead, offset - 1, ts))
            last_offset = offset - 1

            segment = self._maybe_roll(valid_bytes, max_ts, first_offset, last_offset, now)
            infos, completed, duplicate = (
                self._analyze_producer_state(buf, batches, bases, placed, origin, verification_guard)
                if has_producer
                else ({}, [], None)
            )
            if duplicate is not None:
                return LogAppendInfo(
                    duplicate.first_offset,
                    duplicate.last_offset,
                    max_timestamp=duplicate.timestamp,
                    offset_of_max_timestamp=duplicate.last_offset,
                    log_append_time=duplicate.timestamp if log_append_time >= 0 else -1,
                    log_start_offset=self._log_start_offset,
                    duplicate=True,
                )
            if leader_epoch is not None:
                self.leader_epoch_cache.assign(leader_epoch, first_offset)
            else:
                for _, header in batches:
                    if header.partition_leader_epoch >= 0:
                        self.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)

            segment.append(buf, placed)

            psm = self.producer_state
            for info in infos.values():
                psm.update(info)
                if info.transactional:
                    # A first offset or a marker now stands for the transaction: its verification is spent.
                    psm.clear_verification_state_entry(info.producer_id)
            for txn in completed:
                lso = psm.last_stable_offset(txn)
                if txn.is_aborted:
                    segment.append_txn(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
                psm.complete_txn(txn)
            psm.update_map_end_offset(last_offset + 1)
            self._leo = last_offset + 1
            unflushed = self._leo - self.recovery_point
            result = LogAppendInfo(
                first_offset,
                last_offset,
                max_ts,
                offset_of_max_ts,
                log_append_time,
                self._log_start_offset,
                num_records,
                valid_bytes,
            )
        if unflushed >= config.flush_messages:
            self.flush()
        return result

    def _analyze_producer_state(
        self,
        buf: memoryview,
        batches: list[tuple[int, BatchHeader]],
        bases: list[int],
        placed: list[tuple[int, int, int]],
        origin: AppendOrigin,
        verification_guard: VerificationGuard = SENTINEL,
    ) -> tuple[dict[int, ProducerAppendInfo], list[CompletedTxn], _Duplicate | None]:
        infos: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        psm = self.producer_state
        for (pos, header), base, (_, _, ts) in zip(batches, bases, placed, strict=True):
            pid = header.producer_id
            if pid < 0:
                continue
            info = infos.get(pid)
            if origin is AppendOrigin.CLIENT:
                entry = psm.last_entry(pid)
                meta = entry.find_duplicate_batch(header) if entry is not None else None
                if meta is not None:
                    return infos, completed, _Duplicate(meta.first_offset, meta.last_offset, meta.timestamp)
                if (
                    header.attributes & ATTR_TRANSACTIONAL
                    and psm.transaction_verification_enabled
                    and not header.is_control
                    # Ongoing here, or opened by an earlier batch of this same append.
                    and not (info is not None and info.updated.current_txn_first_offset is not None)
                    and not psm.has_ongoing_transaction(pid)
                    and not psm.verification_guard(pid).verify(verification_guard)
                ):
                    # KIP-890: a transactional batch the transaction coordinator has not confirmed is
                    # part of an ongoing transaction would hold the last stable offset back forever.
                    raise InvalidTxnStateError(
                        f"Record of producer {pid} for {self.name} was not part of an ongoing transaction"
                    )
            if info is None:
                info = infos[pid] = psm.prepare_update(pid, origin)
            txn = info.append_batch(buf, pos, header, base, ts)
            if header.attributes & ATTR_TRANSACTIONAL:
                info.transactional = True
            if txn is not None:
                completed.append(txn)
        return infos, completed, None

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"log {self.name} is closed")

    # --- rolling -------------------------------------------------------------------------------------

    def _maybe_roll(
        self, messages_size: int, max_timestamp: int, first_offset: int, last_offset: int, now: int
    ) -> LogSegment:
        segment = self.active_segment
        config = self.config
        if segment.should_roll(
            max_segment_bytes=config.segment_bytes,
            max_segment_ms=config.segment_ms,
            messages_size=messages_size,
            max_timestamp_in_messages=max_timestamp,
            max_offset_in_messages=last_offset,
            now_ms=now,
        ):
            log.debug("Rolling %s at offset %d (segment of %d bytes)", self.name, first_offset, segment.size)
            return self.roll(first_offset)
        return segment

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Starts a new active segment at max(expected_next_offset, log end offset); the producer state is
        snapshotted there and the previous segment is flushed by the next flush_dirty call."""
        with self._lock:
            new_offset = max(expected_next_offset or 0, self._leo)
            active = self.active_segment
            if active.base_offset == new_offset:
                if active.size == 0:
                    return active
                raise ValueError(
                    f"{self.name}: cannot roll to {new_offset}, a non-empty segment starts there"
                )
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                path = segment_path(self.dir, new_offset, suffix)
                if os.path.exists(path):
                    log.warning("Deleting stale %s before rolling %s", path, self.name)
                    os.unlink(path)
            active.on_become_inactive()
            segment = self._new_segment(new_offset, jitter=self.config.random_segment_jitter())
            self._add_segment(segment)
            self.producer_state.update_map_end_offset(new_offset)
            self.producer_state.take_snapshot()
            self._pending_roll_flush = new_offset
            return segment

    # --- reads ---------------------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        upper_bound: int | None = None,
        min_one_message: bool = True,
        include_aborted_transactions: bool = False,
    ) -> FetchDataInfo:
        """Up to max_bytes from the batch holding `offset`, from one segment, below `upper_bound` (the
        high watermark or last stable offset; default the log end). With min_one_message the first batch
        is returned whole even if larger. Raises OffsetOutOfRangeError outside [log start, log end]."""
        with self._lock:
            leo = self._leo
            if offset < self._log_start_offset or offset > leo:
                raise OffsetOutOfRangeError(
                    f"Received request for offset {offset} for partition {self.name}, but we only have log "
                    f"segments in the range {self._log_start_offset} to {leo}."
                )
            max_offset = leo if upper_bound is None else min(upper_bound, leo)
            i = self._floor_index(offset)
            if offset >= max_offset:
                segment = self._segments[max(i, 0)]
                position = segment.size if offset == leo else -1
                return self._empty_fetch(
                    LogOffsetMetadata(offset, segment.base_offset, position), include_aborted_transactions
                )
            bound_base, bound_position = self._offset_position(max_offset)
            while i < len(self._segments):
                segment = self._segments[i]
                max_position = bound_position if segment.base_offset == bound_base else segment.size
                found = segment.read(offset, max_bytes, max_position, min_one_message)
                if found is not None:
                    aborted = None
                    if include_aborted_transactions:
                        aborted = self.collect_aborted_transactions(
                            found.offset_metadata.message_offset, max_offset
                        )
                    return FetchDataInfo(
                        found.offset_metadata,
                        segment.fd,
                        found.position,
                        found.length,
                        segment.slice,
                        found.first_entry_incomplete,
                        aborted,
                    )
                i += 1
            return self._empty_fetch(LogOffsetMetadata(offset), include_aborted_transactions)

    @staticmethod
    def _empty_fetch(metadata: LogOffsetMetadata, include_aborted: bool) -> FetchDataInfo:
        return FetchDataInfo(metadata, aborted_transactions=[] if include_aborted else None)

    def _offset_position(self, offset: int) -> tuple[int, int]:
        """(segment base, byte position) where the batch holding `offset` starts (the end for the LEO)."""
        if offset >= self._leo:
            active = self.active_segment
            return active.base_offset, active.size
        cached = self._upper_bound_cache
        if cached is not None and cached[0] == offset:
            return cached[1], cached[2]
        i = max(self._floor_index(offset), 0)
        segment = self._segments[i]
        found = segment.translate_offset(offset)
        result = (segment.base_offset, segment.size if found is None else found.position)
        self._upper_bound_cache = (offset, *result)
        return result

    def convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where `offset` lives (Kafka's convertToOffsetMetadataOrThrow)."""
        return self.read(offset, 1, min_one_message=False).fetch_offset_metadata

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset), for read_committed fetches."""
        with self._lock:
            out: list[AbortedTxn] = []
            # An abort is indexed in the segment of its marker, which may lie beyond the upper bound
            # (another producer's open transaction holds the LSO below it): the search goes on until an
            # entry whose last stable offset reaches the upper bound shows nothing later can overlap
            # (Kafka's TxnIndexSearchResult.isComplete).
            for segment in self._segments[max(self._floor_index(start_offset), 0) :]:
                found, complete = segment.txn_index.search(start_offset, upper_bound_offset)
                out.extend(found)
                if complete:
                    break
            return out

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: the first offset with a timestamp >= `timestamp`, or for the special values
        EARLIEST_TIMESTAMP (-2), LATEST_TIMESTAMP (-1, the log end), MAX_TIMESTAMP (-3) and
        EARLIEST_LOCAL_TIMESTAMP (-4). None when no record is that recent."""
        with self._lock:
            epoch_for = self.leader_epoch_cache.epoch_for_offset
            if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                return TimestampAndOffset(-1, self._log_start_offset, epoch_for(self._log_start_offset))
            if timestamp == LATEST_TIMESTAMP:
                return TimestampAndOffset(-1, self._leo, self.leader_epoch_cache.latest_epoch)
            if timestamp == MAX_TIMESTAMP:
                # The first segment with the largest timestamp, then the first record holding it in the
                # first batch with it: the record's own offset (KAFKA-16310), the batch's leader epoch.
                if not self._segments:
                    return None
                newest = max(self._segments, key=lambda s: s.max_timestamp_so_far.timestamp)
                found_max = newest.find_max_timestamp_record()
                if found_max is None:
                    return None
                max_ts, max_offset, batch_epoch = found_max
                return TimestampAndOffset(max_ts, max_offset, batch_epoch if batch_epoch >= 0 else None)
            for segment in self._segments:
                if segment.size and segment.largest_timestamp >= timestamp:
                    found = segment.find_offset_by_timestamp(timestamp, self._log_start_offset)
                    if found is not None:
                        return TimestampAndOffset(found.timestamp, found.offset, epoch_for(found.offset))
            return None

    # --- truncation ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _cleaning_paused(self) -> Iterator[None]:
        """Stops a running compaction of this log (it checks the flag between batches) and keeps the
        cleaner out until the block ends."""
        self.abort_cleaning_event.set()
        with self.cleaner_lock:
            self.abort_cleaning_event.clear()
            yield

    def truncate_to(self, target_offset: int) -> bool:
        """Removes everything at or after target_offset (a follower diverged); True if anything went."""
        if target_offset < 0:
            raise ValueError(f"cannot truncate {self.name} to a negative offset {target_offset}")
        if target_offset >= self._leo:
            return False
        with self._cleaning_paused(), self._lock:
            if self._segments[0].base_offset > target_offset:
                self._truncate_fully_locked(target_offset)
                return True
            doomed = [s for s in self._segments if s.base_offset > target_offset]
            self._async_delete_segments(doomed)
            active = self.active_segment
            active.truncate_to(target_offset)
            self._pending_roll_flush = None
            # A batch holding target_offset goes whole, so the data may end below it; the log start
            # follows the target down as in Kafka, and a log left with no data at or above its start
            # starts afresh there.
            new_start = min(self._log_start_offset, target_offset)
            data_end = active.read_next_offset()
            if data_end < new_start:
                self._truncate_fully_locked(new_start)
            else:
                self._leo = data_end
                self._after_truncation(new_start)
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Deletes every segment and starts empty at new_offset (a follower far behind the leader's start)."""
        with self._cleaning_paused(), self._lock:
            self._truncate_fully_locked(new_offset)

    def _truncate_fully_locked(self, new_offset: int) -> None:
        self.producer_state.truncate_fully_and_start_at(new_offset)
        self._async_delete_segments(list(self._segments))
        self._add_segment(self._new_segment(new_offset))
        self.active_segment.make_active()
        self.leader_epoch_cache.clear_and_flush()
        self._leo = new_offset
        self._pending_roll_flush = None
        self._after_truncation(new_offset)

    def _after_truncation(self, log_start_offset: int) -> None:
        self._log_start_offset = log_start_offset
        self._upper_bound_cache = None
        self.leader_epoch_cache.truncate_from_end(self._leo)
        self._rebuild_producer_state(self._leo)
        self._hw = min(self._hw, self._leo)
        self.recovery_point = min(self.recovery_point, self._leo)

    # --- log start offset and retention --------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: moves the log start offset up to `offset` (at most the high watermark) and deletes
        the segments wholly below it; returns the new log start offset."""
        with self._lock:
            if offset > self._hw:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {offset} of partition {self.name} since it is "
                    f"larger than the high watermark {self._hw}"
                )
            self._maybe_increment_log_start_offset(offset)
            self._delete_segments(self._deletable_segments(self._breaches_log_start))
            return self._log_start_offset

    def _maybe_increment_log_start_offset(self, offset: int) -> None:
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
            self.producer_state.on_log_start_offset_incremented(offset)
            self._hw = max(self._hw, offset)

    def delete_old_segments(self) -> int:
        """Retention: whole segments past retention.ms (by their largest timestamp) or beyond
        retention.bytes, when cleanup.policy has delete, and segments below the log start offset.
        Only segments below the high watermark go. Returns the number deleted."""
        now = self._time_ms()
        with self._lock:
            config = self.config
            deleted = 0
            if config.delete:
                if config.retention_ms >= 0:
                    deleted += self._delete_segments(
                        self._deletable_segments(
                            lambda s, _nxt: now - s.largest_timestamp > config.retention_ms
                        )
                    )
                if config.retention_bytes >= 0:
                    deleted += self._delete_segments(
                        self._deletable_segments(self._retention_size_predicate())
                    )
            deleted += self._delete_segments(self._deletable_segments(self._breaches_log_start))
            return deleted

    def _breaches_log_start(self, _segment: LogSegment, next_segment: LogSegment | None) -> bool:
        return next_segment is not None and next_segment.base_offset <= self._log_start_offset

    def _retention_size_predicate(self) -> Callable[[LogSegment, LogSegment | None], bool]:
        diff = sum(s.size for s in self._segments) - self.config.retention_bytes

        def should_delete(segment: LogSegment, _next: LogSegment | None) -> bool:
            nonlocal diff
            if diff - segment.size >= 0:
                diff -= segment.size
                return True
            return False

        return should_delete

    def _deletable_segments(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool]
    ) -> list[LogSegment]:
        out = []
        segments = self._segments
        for i, segment in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self._leo
            if upper > self._hw or (nxt is None and segment.size == 0) or not predicate(segment, nxt):
                break
            out.append(segment)
        return out

    def _delete_segments(self, doomed: list[LogSegment]) -> int:
        if not doomed:
            return 0
        if len(doomed) == len(self._segments):
            self.roll()
        self._async_delete_segments(doomed)
        self._maybe_increment_log_start_offset(self._segments[0].base_offset)
        return len(doomed)

    def _async_delete_segments(self, doomed: list[LogSegment]) -> None:
        """Removes segments from the log now, renames their files `.deleted` and queues the removal."""
        due = self._time_ms() + self.config.file_delete_delay_ms
        for segment in doomed:
            if segment in self._segments:
                self._remove_segment(segment)
            segment.change_file_suffixes("", DELETED_SUFFIX)
            self._pending_deletes.append((due, segment))
            snapshot = self.producer_state.snapshot_path(segment.base_offset)
            if snapshot is not None and segment.base_offset not in self._bases:
                os.replace(snapshot, snapshot + DELETED_SUFFIX)
                self.producer_state.forget_snapshot(segment.base_offset)
                self._pending_deletes.append((due, snapshot + DELETED_SUFFIX))
        self._upper_bound_cache = None

    def delete_pending_files(self) -> int:
        """Closes and removes `.deleted` files whose file.delete.delay.ms has passed; returns how many
        segments went. Skipped while the cleaner works on this log (it may still read them)."""
        if not self.cleaner_lock.acquire(blocking=False):
            return 0
        try:
            with self._flush_lock:
                now = self._time_ms()
                with self._lock:
                    due = [item for item in self._pending_deletes if item[0] <= now]
                    self._pending_deletes = [item for item in self._pending_deletes if item not in due]
                for _, item in due:
                    if isinstance(item, LogSegment):
                        item.delete()
                    else:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(item)
                return sum(isinstance(item, LogSegment) for _, item in due)
        finally:
            self.cleaner_lock.release()

    def last_batches_of_producers(self) -> dict[int, tuple[int, int]]:
        """Producer id -> (last data offset or -1, epoch) of every producer the state knows (Kafka's
        lastRecordsOfActiveProducers), read under the lock appends update it with: the cleaner calls
        this from its thread, once per cleaned group."""
        with self._lock:
            return {
                pid: (entry.last_data_offset, entry.producer_epoch)
                for pid, entry in self.producer_state.producers.items()
            }

    def remove_expired_producers(self) -> list[int]:
        with self._lock:
            return self.producer_state.remove_expired_producers(self._time_ms())

    # --- flushing ------------------------------------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsyncs the segments (and their indexes, snapshots, directory) holding data below `offset`
        (default: the log end) and raises the recovery point to it. May block: call it off the loop."""
        with self._flush_lock:
            started = time.monotonic()
            with self._lock:
                target = self._leo if offset is None else min(offset, self._leo)
                if target <= self.recovery_point:
                    return
                segments = [
                    s
                    for i, s in enumerate(self._segments)
                    if s.base_offset < target
                    and (
                        i + 1 == len(self._segments)
                        or self._segments[i + 1].base_offset > self.recovery_point
                    )
                ]
                snapshots = [o for o in self.producer_state.snapshots if self.recovery_point < o <= target]
            for segment in segments:
                segment.flush()
            for snapshot_offset in snapshots:
                path = self.producer_state.snapshot_path(snapshot_offset)
                if path is not None:
                    with contextlib.suppress(FileNotFoundError):
                        fd = os.open(path, os.O_RDONLY)
                        try:
                            os.fsync(fd)
                        finally:
                            os.close(fd)
            fsync_dir(self.dir)
            with self._lock:
                self.recovery_point = max(self.recovery_point, min(target, self._leo))
                self.last_flush_ms = self._time_ms()
                if self._pending_roll_flush is not None and self._pending_roll_flush <= target:
                    self._pending_roll_flush = None
            timer = flush_timer
            if timer is not None:
                timer((time.monotonic() - started) * 1000)

    def flush_if_due(self) -> bool:
        """The periodic flush: segments rolled since the last flush, or everything when flush.ms passed."""
        with self._lock:
            rolled = self._pending_roll_flush
            due = self._time_ms() - self.last_flush_ms >= self.config.flush_ms
        if due:
            self.flush()
        elif rolled is not None:
            self.flush(rolled)
        return due or rolled is not None

    # --- compaction support (used by storage.cleaner) ------------------------------------------------

    def create_cleaned_segment(self, base_offset: int) -> LogSegment:
        """A new `.cleaned` segment for the cleaner to write, replacing leftovers of an earlier attempt."""
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(segment_path(self.dir, base_offset, suffix + CLEANED_SUFFIX))
        return self._new_segment(base_offset, suffix=CLEANED_SUFFIX)

    def replace_segments(self, new_segment: LogSegment, old_segments: list[LogSegment]) -> bool:
        """Swaps a compacted `.cleaned` segment in for `old_segments`, crash-safely (Kafka's order:
        .cleaned -> .swap, old -> .deleted, .swap -> final). False if the log changed meanwhile."""
        with self._lock:
            if (
                self.closed
                or any(s not in self._segments for s in old_segments)
                or self.active_segment in old_segments
            ):
                return False
            new_segment.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
            for old in old_segments:
                self._remove_segment(old)
            self._add_segment(new_segment)
            self._async_delete_segments(old_segments)
            new_segment.change_file_suffixes(SWAP_SUFFIX, "")
            return True

    # --- lifecycle -----------------------------------------------------------------------------------

    def assign_topic_id(self, topic_id: uuid.UUID) -> bool:
        """KIP-516 (Kafka's UnifiedLog.assignTopicId): the log learns the topic id it belongs to and
        writes it to partition.metadata (atomically, fsynced) before anything else happens to it. True
        when newly assigned; False when the log had it already; InconsistentTopicIdError when the log
        belongs to another id (the log of a deleted topic is never taken for a re-created one's)."""
        with self._lock:
            if self.topic_id is not None:
                if self.topic_id != topic_id:
                    raise InconsistentTopicIdError(
                        f"Tried to assign topic ID {topic_id_string(topic_id)} to log for topic partition "
                        f"{self.name}, but log already contained topic ID {topic_id_string(self.topic_id)}"
                    )
                return False
            if self.closed:
                raise KafkaStorageError(f"the log of {self.name} is closed: its topic id is not written")
            self.partition_metadata.write(topic_id)
            self.topic_id = topic_id
            return True

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config

    def close(self) -> None:
        """Snapshots producer state at the log end, trims indexes and releases files (clean shutdown)."""
        with self._cleaning_paused(), self._flush_lock, self._lock:
            if self.closed:
                return
            self.producer_state.update_map_end_offset(self._leo)
            self.producer_state.take_snapshot(sync=True)
            for segment in self._segments:
                segment.close()
            for _, item in self._pending_deletes:
                if isinstance(item, LogSegment):
                    item.delete()
            self._pending_deletes.clear()
            self.closed = True

    def close_handlers(self) -> None:
        """Releases descriptors and maps without writing anything (the log is being deleted)."""
        with self._cleaning_paused(), self._flush_lock, self._lock:
            pending = [item for _, item in self._pending_deletes if isinstance(item, LogSegment)]
            for segment in self._segments + pending:
                segment.close_handlers()
            self._pending_deletes.clear()
            self.closed = True

    def __repr__(self) -> str:
        return (
            f"Log({self.name}, start={self._log_start_offset}, end={self._leo}, hw={self._hw}, "
            f"segments={len(self._segments)})"
        )


class _Duplicate(NamedTuple):
    first_offset: int
    last_offset: int
    timestamp: int
