"""Log compaction (Kafka's LogCleaner and LogCleanerManager), run off the event loop.

For a log with cleanup.policy containing compact, the cleaner picks the log with the highest dirty
ratio above min.cleanable.dirty.ratio (or whose oldest dirty record is past max.compaction.lag.ms),
builds a map key -> last offset over the dirty section [first dirty, first uncleanable), and rewrites
the segments from the log start up to the map's end, keeping for each key only its latest record.
Offsets are preserved (gaps appear); tombstones get a delete horizon of now + delete.retention.ms on
their first cleaning and are dropped by a cleaning after it (KIP-534).

Transactions (KIP-98, Kafka's CleanedTransactionMetadata): the cleaner follows each producer's
transactions through the batches in offset order, knowing the aborted ones from the transaction
index. Records of aborted transactions are dropped. A marker (COMMIT or ABORT control batch) is kept
as long as a batch of its transaction was met in this cleaning; once none is left, the marker is
given a delete horizon like a tombstone (written as the batch's base timestamp) and a cleaning after
the horizon drops it. The `.txnindex` of a cleaned segment keeps only the aborted transactions whose
marker was kept because some of their batches remain, so read_committed fetches still learn of every
aborted batch left. The last batch of each producer the producer state knows (its last data batch,
or its last marker when it has no data) is kept, emptied if need be, so its sequence and epoch
survive. The first uncleanable offset is the smallest of the active segment's base, the last stable
offset (so every transaction the cleaner meets is decided) and the first segment younger than
min.compaction.lag.ms. Cleaned segments are written as `.cleaned` and swapped in atomically
(Log.replace_segments). The first dirty offset of each log is kept in the `cleaner-offset-checkpoint`
of its log dir.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from protocol import record_batch
from protocol.record_batch import BatchHeader, Record
from storage.checkpoints import CLEANER_CHECKPOINT, OffsetCheckpointFile
from storage.log import Log
from storage.segment import INT_MAX, LogSegment
from storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

_WRITE_CHUNK = 1 << 20


class CleaningAborted(Exception):
    """The log was truncated, closed or changed while being cleaned; the work is discarded."""


@dataclass
class CleanerStats:
    """What one cleaning did (also kept as LogCleaner.last_stats)."""

    log: str = ""
    first_dirty_offset: int = 0
    end_offset: int = 0
    segments_cleaned: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    groups: list[int] = field(default_factory=list)


@dataclass
class CleaningCandidate:
    """A compacted log with its dirty section, as the cleaner measured it."""

    log: Log
    first_dirty: int
    first_uncleanable: int
    cleanable_bytes: int
    total_bytes: int
    needs_compaction_now: bool
    horizon_due: bool

    @property
    def ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


class LogCleaner:
    """Compacts logs returned by `logs()`; call clean_once() or run start()/shutdown() threads."""

    def __init__(
        self,
        logs: Callable[[], Iterable[Log]],
        *,
        dedupe_buffer_size: int = 128 * 1024 * 1024,
        backoff_ms: int = 15_000,
        time_ms: Callable[[], int] | None = None,
    ) -> None:
        self._logs = logs
        # Kafka's SkimpyOffsetMap holds a 16-byte hash and an 8-byte offset per key.
        self.max_map_entries = max(1, dedupe_buffer_size // 24)
        self.backoff_ms = backoff_ms
        self._time_ms = time_ms
        self._checkpoint_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()  # set on shutdown or reconfigure: a backing-off thread looks again
        self._num_threads = 0
        self._threads: list[threading.Thread] = []
        self._delete_horizons: dict[str, int] = {}  # log dir -> earliest delete horizon written
        self.last_stats: CleanerStats | None = None

    # --- checkpoints ---------------------------------------------------------------------------------

    @staticmethod
    def _checkpoint_file(log_: Log) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(os.path.join(os.path.dirname(log_.dir), CLEANER_CHECKPOINT))

    def first_dirty_offset(self, log_: Log) -> int:
        """The checkpointed first dirty offset, reset to the log start when out of range (Kafka's rule)."""
        with self._checkpoint_lock:
            offsets = self._checkpoint_file(log_).read()
        checkpointed = offsets.get((log_.topic, log_.partition))
        start = log_.log_start_offset
        if checkpointed is None or checkpointed < start or checkpointed > log_.active_segment.base_offset:
            return start
        return checkpointed

    def _update_checkpoint(self, log_: Log, offset: int | None) -> None:
        with self._checkpoint_lock:
            file = self._checkpoint_file(log_)
            offsets = file.read()
            if offset is None:
                offsets.pop((log_.topic, log_.partition), None)
            else:
                offsets[(log_.topic, log_.partition)] = offset
            file.write(offsets)

    def remove_checkpoint(self, log_: Log) -> None:
        """Forgets a deleted log's first dirty offset."""
        self._update_checkpoint(log_, None)

    # --- choosing a log ------------------------------------------------------------------------------

    def _now(self, log_: Log) -> int:
        return self._time_ms() if self._time_ms is not None else log_._time_ms()

    def _candidate(self, log_: Log) -> CleaningCandidate:
        now = self._now(log_)
        first_dirty = self.first_dirty_offset(log_)
        config = log_.config
        segments = log_.segments
        active_base = segments[-1].base_offset
        first_uncleanable = min(active_base, log_.last_stable_offset)
        dirty = [s for s in segments[:-1] if s.base_offset >= first_dirty]
        if config.min_compaction_lag_ms > 0:
            for segment in dirty:
                if segment.largest_timestamp > now - config.min_compaction_lag_ms:
                    first_uncleanable = min(first_uncleanable, segment.base_offset)
                    break
        cleanable = total = 0
        for i, segment in enumerate(segments[:-1]):
            end = segments[i + 1].base_offset
            if end <= first_uncleanable:
                total += segment.size
                if segment.base_offset >= first_dirty:
                    cleanable += segment.size
        needs_now = False
        if dirty and config.max_compaction_lag_ms < 2**63 - 1:
            first_ts = dirty[0].first_batch_timestamp()
            needs_now = (
                first_ts is not None and first_ts >= 0 and now - first_ts > config.max_compaction_lag_ms
            )
        horizon = self._delete_horizons.get(log_.dir)
        horizon_due = horizon is not None and now >= horizon
        return CleaningCandidate(
            log_, first_dirty, first_uncleanable, cleanable, total, needs_now, horizon_due
        )

    def grab_filthiest_log(self) -> CleaningCandidate | None:
        """The compacted log most in need of cleaning, or None."""
        best: CleaningCandidate | None = None
        for log_ in self._logs():
            if log_.closed or not log_.config.compact:
                continue
            candidate = self._candidate(log_)
            eligible = (
                candidate.cleanable_bytes > 0
                and (
                    candidate.ratio > log_.config.min_cleanable_dirty_ratio or candidate.needs_compaction_now
                )
            ) or (candidate.horizon_due and candidate.total_bytes > 0)
            if eligible and (best is None or candidate.ratio > best.ratio):
                best = candidate
        return best

    # --- running -------------------------------------------------------------------------------------

    def clean_once(self) -> CleanerStats | None:
        """Cleans the filthiest log, if any; returns what was done."""
        candidate = self.grab_filthiest_log()
        if candidate is None:
            return None
        return self.clean(candidate.log)

    def clean(self, log_: Log) -> CleanerStats | None:
        """Compacts `log_` now (whatever its dirty ratio); None if it was busy or aborted."""
        if not log_.cleaner_lock.acquire(blocking=False):
            return None
        try:
            if log_.abort_cleaning_event.is_set() or log_.closed:
                return None
            candidate = self._candidate(log_)
            stats = self._clean(candidate)
        except CleaningAborted as e:
            log.info("Cleaning of %s aborted: %s", log_.name, e)
            return None
        finally:
            log_.cleaner_lock.release()
        self._update_checkpoint(log_, stats.end_offset)
        self.last_stats = stats
        return stats

    def start(self, num_threads: int = 1) -> None:
        """Runs cleaner threads (log.cleaner.threads) until shutdown()."""
        self._stop.clear()
        self._num_threads = num_threads
        self._start_threads()

    def _start_threads(self) -> None:
        alive = {int(t.name.rsplit("-", 1)[1]) for t in self._threads if t.is_alive()}
        self._threads = [t for t in self._threads if t.is_alive()]
        for i in range(self._num_threads):
            if i in alive:
                continue
            thread = threading.Thread(
                target=self._run, args=(i,), name=f"kafka-log-cleaner-thread-{i}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def reconfigure(self, num_threads: int, dedupe_buffer_size: int, backoff_ms: int) -> None:
        """Dynamic broker configs (Kafka's LogCleaner.reconfigure): log.cleaner.backoff.ms and
        log.cleaner.dedupe.buffer.size apply from the next cleaning; log.cleaner.threads starts threads
        at once, and a thread beyond the new number stops after the cleaning it is doing (a cleaning is
        never cut short). Does nothing to the threads of a cleaner not started (log.cleaner.enable)."""
        self.max_map_entries = max(1, dedupe_buffer_size // 24)
        self.backoff_ms = backoff_ms
        if num_threads == self._num_threads:
            return
        old, self._num_threads = self._num_threads, num_threads
        self._wake.set()  # threads waiting out the backoff look at their number again
        if self._threads and not self._stop.is_set():
            self._start_threads()
            log.info("log cleaner threads: %d -> %d", old, num_threads)

    def _run(self, index: int = 0) -> None:
        while not self._stop.is_set() and index < self._num_threads:
            try:
                stats = self.clean_once()
            except Exception:
                log.exception("Log cleaner failed; backing off")
                stats = None
            if stats is None:
                self._wake.clear()
                if self._stop.is_set() or index >= self._num_threads:
                    break
                self._wake.wait(self.backoff_ms / 1000)

    def shutdown(self) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    # --- cleaning ------------------------------------------------------------------------------------

    def _clean(self, candidate: CleaningCandidate) -> CleanerStats:
        log_ = candidate.log
        stats = CleanerStats(log=log_.name, first_dirty_offset=candidate.first_dirty)
        all_segments = log_.segments  # one snapshot: appends may roll meanwhile
        segments = all_segments[:-1]
        ends = [s.base_offset for s in all_segments[1:]]
        dirty = [
            (s, end)
            for s, end in zip(segments, ends, strict=True)
            if s.base_offset >= candidate.first_dirty and end <= candidate.first_uncleanable
        ]
        if not dirty and not candidate.horizon_due:
            stats.end_offset = candidate.first_dirty
            return stats
        # Below the first uncleanable offset (<= the LSO) every transaction is decided, so the aborted
        # ones are all in the transaction index (an abort is indexed in its marker's segment, which the
        # search reaches even beyond the bound).
        aborted = log_.collect_aborted_transactions(log_.log_start_offset, candidate.first_uncleanable)
        offset_map: dict[bytes, int] = {}
        map_end = candidate.first_dirty
        map_txns = _TransactionTracker(aborted)
        for segment, end in dirty:
            self._check_abort(log_)
            self._build_offset_map(log_, segment, offset_map, map_txns, stats)
            map_end = end
            if len(offset_map) >= self.max_map_entries:
                break
        stats.end_offset = map_end
        to_clean = [s for s, end in zip(segments, ends, strict=True) if end <= map_end]
        now = self._now(log_)
        horizon: int | None = None
        # One tracker across the groups: a transaction's data and its marker may be in different ones.
        txns = _TransactionTracker(aborted)
        for group in self._group_segments(log_, to_clean, dict(zip(segments, ends, strict=True))):
            self._check_abort(log_)
            cleaned, group_horizon = self._clean_group(log_, group, offset_map, txns, now, stats)
            if group_horizon is not None:
                horizon = group_horizon if horizon is None else min(horizon, group_horizon)
            if not log_.replace_segments(cleaned, group):
                cleaned.delete()
                raise CleaningAborted("segments changed during cleaning")
            stats.segments_cleaned += len(group)
            stats.groups.append(len(group))
        if horizon is None:
            self._delete_horizons.pop(log_.dir, None)
        else:
            self._delete_horizons[log_.dir] = horizon
        log.info(
            "Cleaned %s: %d segments up to offset %d, %d/%d records kept, %d -> %d bytes",
            log_.name,
            stats.segments_cleaned,
            map_end,
            stats.records_retained,
            stats.records_read,
            stats.bytes_read,
            stats.bytes_written,
        )
        return stats

    @staticmethod
    def _check_abort(log_: Log) -> None:
        if log_.abort_cleaning_event.is_set() or log_.closed:
            raise CleaningAborted(f"{log_.name} is being truncated or closed")

    def _build_offset_map(
        self,
        log_: Log,
        segment: LogSegment,
        offset_map: dict[bytes, int],
        txns: _TransactionTracker,
        stats: CleanerStats,
    ) -> None:
        view = segment.view()
        decode = record_batch.decode_records
        for pos, header in segment.batches():
            if header.is_control:
                txns.on_control_batch_read(header, decode(view, pos))
                continue
            if txns.on_batch_read(header):  # aborted: its keys must not hide committed values
                continue
            for record in decode(view, pos):
                if record.key is not None:
                    offset_map[record.key] = record.offset
            self._check_abort(log_)

    @staticmethod
    def _group_segments(
        log_: Log, segments: list[LogSegment], end_of: dict[LogSegment, int]
    ) -> list[list[LogSegment]]:
        """Consecutive segments whose sum fits segment.bytes and the index sizes, and whose offsets fit
        the 4-byte relative offsets of one segment (Kafka's groupSegmentsBySize)."""
        max_size = log_.config.segment_bytes
        max_index = log_.config.segment_index_bytes
        groups: list[list[LogSegment]] = []
        i = 0
        while i < len(segments):
            group = [segments[i]]
            size = segments[i].size
            index_size = segments[i].offset_index.size_in_bytes
            time_size = segments[i].time_index.size_in_bytes
            i += 1
            while i < len(segments):
                nxt = segments[i]
                if (
                    size + nxt.size > max_size
                    or index_size + nxt.offset_index.size_in_bytes > max_index
                    or time_size + nxt.time_index.size_in_bytes > max_index
                    or end_of[nxt] - 1 - group[0].base_offset > INT_MAX
                ):
                    break
                group.append(nxt)
                size += nxt.size
                index_size += nxt.offset_index.size_in_bytes
                time_size += nxt.time_index.size_in_bytes
                i += 1
            groups.append(group)
        return groups

    def _clean_group(
        self,
        log_: Log,
        group: list[LogSegment],
        offset_map: dict[bytes, int],
        txns: _TransactionTracker,
        now: int,
        stats: CleanerStats,
    ) -> tuple[LogSegment, int | None]:
        cleaned = log_.create_cleaned_segment(group[0].base_offset)
        last_batches = log_.last_batches_of_producers()
        pending = bytearray()
        pending_meta: list[tuple[int, int, int]] = []
        horizon_written: int | None = None
        delete_retention = log_.config.delete_retention_ms
        try:
            for old in group:
                view = old.view()
                stats.bytes_read += old.size
                for pos, header in old.batches():
                    self._check_abort(log_)
                    out, horizon = self._filter_batch(
                        view, pos, header, offset_map, txns, last_batches, now, delete_retention, stats
                    )
                    if out is None:
                        continue
                    if horizon is not None:
                        horizon_written = (
                            horizon if horizon_written is None else min(horizon_written, horizon)
                        )
                    out_header = record_batch.read_header(out, 0)
                    pending += out
                    pending_meta.append((len(out), out_header.last_offset, out_header.max_timestamp))
                    if len(pending) >= _WRITE_CHUNK:
                        cleaned.append(memoryview(pending), pending_meta)
                        stats.bytes_written += len(pending)
                        pending, pending_meta = bytearray(), []
            # The old segments' aborted-transaction entries are not copied: the tracker gives back
            # those whose marker this group kept because some of their batches remain (Kafka's
            # cleanedIndex); the others describe nothing left in the log.
            for txn in txns.take_index_entries():
                cleaned.append_txn(txn)
            if pending:
                cleaned.append(memoryview(pending), pending_meta)
                stats.bytes_written += len(pending)
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.set_last_modified_ms(group[-1].last_modified_ms)
        except BaseException:
            cleaned.delete()
            raise
        return cleaned, horizon_written

    @staticmethod
    def _filter_batch(
        view: memoryview,
        pos: int,
        header: BatchHeader,
        offset_map: dict[bytes, int],
        txns: _TransactionTracker,
        last_batches: dict[int, tuple[int, int]],
        now: int,
        delete_retention_ms: int,
        stats: CleanerStats,
    ) -> tuple[bytes | memoryview | None, int | None]:
        """The batch as it should be written to the cleaned segment (None to drop it), and the delete
        horizon it carries if it still holds tombstones or a marker waiting to be dropped."""
        original = view[pos : pos + header.size]
        records = record_batch.decode_records(view, pos)
        stats.records_read += len(records)
        if header.is_control:
            # A marker whose transaction has no batch left goes the way of a tombstone: a horizon on
            # this cleaning, dropped by a cleaning after it.
            can_discard = txns.on_control_batch_read(header, records)
            discard_records = can_discard and header.has_delete_horizon and header.base_timestamp <= now
        else:
            can_discard = txns.on_batch_read(header)  # aborted
            discard_records = can_discard
        if discard_records:
            kept: list[Record] = []
        elif header.is_control:
            kept = records
        else:
            retain_deletes = not header.has_delete_horizon or now < header.base_timestamp
            kept = [
                r
                for r in records
                if r.key is not None
                and r.offset >= offset_map.get(r.key, -1)
                and (r.value is not None or retain_deletes)
            ]
        stats.records_retained += len(kept)
        awaiting_horizon = any(r.value is None for r in kept) or (
            header.is_control and can_discard and bool(kept)
        )
        if not awaiting_horizon:
            horizon = None
        elif header.has_delete_horizon:
            horizon = header.base_timestamp
        else:
            horizon = now + delete_retention_ms
        if not kept:
            # An empty batch is kept only for its producer's state; one emptied by an earlier
            # cleaning goes as soon as its producer has moved on.
            if not _is_last_batch_of_producer(header, last_batches):
                return None, None
            if not records:
                return original, None
        elif len(kept) == len(records) and (horizon is None or header.has_delete_horizon):
            return original, horizon
        return record_batch.encode_batch(
            kept,
            base_offset=header.base_offset,
            compression=header.compression,
            timestamp_type=header.timestamp_type,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            is_transactional=header.is_transactional,
            is_control=header.is_control,
            partition_leader_epoch=header.partition_leader_epoch,
            last_offset_delta=header.last_offset_delta,
            delete_horizon_ms=horizon,
        ), horizon


def _is_last_batch_of_producer(header: BatchHeader, last_batches: dict[int, tuple[int, int]]) -> bool:
    """Whether the batch must stay (emptied if need be) because it holds what the producer state would
    be rebuilt from: the producer's last sequence, or, when it has no data, its last epoch's marker."""
    if header.producer_id < 0:
        return False
    last = last_batches.get(header.producer_id)
    if last is None:
        return False
    last_data_offset, epoch = last
    if last_data_offset >= 0:
        return header.last_offset == last_data_offset
    return header.is_control and header.producer_epoch == epoch


_CONTROL_KEY = struct.Struct(">hh")  # version, type (Kafka's ControlRecordType key)


class _OngoingAbort:
    """An aborted transaction met in the cleaning, until its marker."""

    __slots__ = ("batch_seen", "txn")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.batch_seen = False


class _TransactionTracker:
    """Follows transactions through one cleaning's batches, read in offset order (Kafka's
    CleanedTransactionMetadata): says which data batches are aborted and which markers may go, and
    collects the aborted-transaction entries the cleaned segment must keep."""

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._upcoming = sorted(aborted, key=lambda txn: txn.first_offset)
        self._next = 0
        self._aborted: dict[int, _OngoingAbort] = {}  # producer id -> its aborted txn begun so far
        self._committed: set[int] = set()  # producers with a batch of a non-aborted txn met so far
        self._index_entries: list[AbortedTxn] = []

    def _begin_aborted_up_to(self, offset: int) -> None:
        upcoming = self._upcoming
        while self._next < len(upcoming) and upcoming[self._next].first_offset <= offset:
            txn = upcoming[self._next]
            self._next += 1
            self._aborted.setdefault(txn.producer_id, _OngoingAbort(txn))

    def on_batch_read(self, header: BatchHeader) -> bool:
        """Notes a data batch; True if it belongs to an aborted transaction."""
        self._begin_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._aborted.get(header.producer_id)
        if ongoing is not None:
            ongoing.batch_seen = True
            return True
        self._committed.add(header.producer_id)
        return False

    def on_control_batch_read(self, header: BatchHeader, records: list[Record]) -> bool:
        """Notes a control batch; True if no batch of the transaction it ends was met, so it may go."""
        self._begin_aborted_up_to(header.last_offset)
        if not records:
            return True  # emptied by an earlier cleaning
        key = records[0].key
        if key is None or len(key) < _CONTROL_KEY.size:
            return False  # not a marker we understand: keep it
        _, control_type = _CONTROL_KEY.unpack_from(key)
        producer_id = header.producer_id
        if control_type == record_batch.CONTROL_ABORT:
            ongoing = self._aborted.pop(producer_id, None)
            if ongoing is not None and ongoing.batch_seen:
                # A batch of it was met in this cleaning (dropped now, or kept empty for its
                # producer): the marker stays, with its index entry, until a cleaning meets none.
                self._index_entries.append(ongoing.txn)
                return False
            return True
        if control_type == record_batch.CONTROL_COMMIT:
            if producer_id in self._committed:
                self._committed.discard(producer_id)
                return False
            return True
        return False

    def take_index_entries(self) -> list[AbortedTxn]:
        """The aborted transactions whose markers were kept since the last call, in marker order."""
        entries, self._index_entries = self._index_entries, []
        return entries
