"""LogLoader: opens a partition's log directory (Kafka's LogLoader).

Owns what happens once, when a log opens: finishing what a crash interrupted (temporary and `.deleted`
files removed, a compaction's `.swap` segment put in place of the segments it replaces), opening the
segments and rebuilding the indexes that are missing or fail their sanity check, and then either
trusting the data after a clean shutdown or recovering every segment from the recovery point on:
each batch validated, the log truncated at the first invalid one, the offset, time and transaction
indexes and the leader-epoch cache rebuilt. Producer state is rebuilt at the log end from the newest
snapshot plus the batches after it (`rebuild_producer_state`, which the running log also calls after a
truncation). The running log (storage.log) takes over the segments it returns.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from protocol.record_batch import BatchHeader
from storage.config import LogConfig
from storage.errors import CorruptIndexError
from storage.leader_epoch import LeaderEpochFileCache
from storage.producer_state import ProducerStateManager
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


@dataclass(slots=True)
class LoadedLog:
    """What loading found: the segments in offset order (the last one active) and the offsets."""

    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int


def floor_segment_index(segments: Sequence[LogSegment], offset: int) -> int:
    """Index of the segment that would hold `offset` (-1 when it lies before all of them)."""
    return bisect.bisect_right(segments, offset, key=_base_offset) - 1


def _base_offset(segment: LogSegment) -> int:
    return segment.base_offset


def rebuild_producer_state(
    producer_state: ProducerStateManager,
    segments: Sequence[LogSegment],
    log_start_offset: int,
    last_offset: int,
    now_ms: int,
) -> None:
    """Producer state at `last_offset`: the newest snapshot at or below it plus the batches after."""
    producer_state.truncate_and_reload(log_start_offset, last_offset, now_ms)
    start = max(producer_state.map_end_offset, log_start_offset)
    if last_offset > start:
        for segment in segments[max(0, floor_segment_index(segments, start)) :]:
            if segment.base_offset >= last_offset:
                break
            found = segment.translate_offset(start)
            if found is None:
                continue
            view = segment.view()
            for pos, header in segment.batches(found.position):
                if header.base_offset >= last_offset:
                    break
                completed = producer_state.replay_batch(view, pos, header)
                if completed is not None:
                    producer_state.complete_txn(completed)
    producer_state.update_map_end_offset(last_offset)
    producer_state.take_snapshot()


class LogLoader:
    """Loads the log in `directory` once; `load` hands back the opened segments."""

    def __init__(
        self,
        directory: str,
        name: str,
        config: LogConfig,
        time_ms: Callable[[], int],
        leader_epoch_cache: LeaderEpochFileCache,
        producer_state: ProducerStateManager,
    ) -> None:
        self.dir = directory
        self.name = name
        self.config = config
        self._time_ms = time_ms
        self.leader_epoch_cache = leader_epoch_cache
        self.producer_state = producer_state
        self._segments: list[LogSegment] = []

    def load(self, log_start_offset: int, recovery_point: int, had_clean_shutdown: bool) -> LoadedLog:
        """Opens and, after an unclean shutdown, recovers the segments."""
        try:
            return self._load(log_start_offset, recovery_point, had_clean_shutdown)
        except BaseException:
            # A log that cannot load (out of descriptors, say) must not keep the segments it opened.
            for segment in self._segments:
                segment.close_handlers()
            raise

    def _new_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        return LogSegment.for_config(self.dir, base_offset, self.config, self._time_ms, suffix=suffix)

    def _load(self, log_start_offset: int, recovery_point: int, had_clean_shutdown: bool) -> LoadedLog:
        self._remove_temp_files_and_complete_swaps()
        rebuild = self._open_segments()
        if not self._segments:
            self._segments.append(self._new_segment(log_start_offset))
        for segment in rebuild:
            segment.recover()
        log_start_offset = max(log_start_offset, self._segments[0].base_offset)
        if had_clean_shutdown:
            log_end_offset = self._segments[-1].read_next_offset()
            self._rebuild_producer_state(log_start_offset, log_end_offset)
            recovery_point = log_end_offset
        else:
            log_end_offset = self._recover(log_start_offset, recovery_point)
            recovery_point = min(recovery_point, log_end_offset)
        return LoadedLog(self._segments, log_start_offset, log_end_offset, recovery_point)

    def _open_segments(self) -> list[LogSegment]:
        """Opens every `.log` file's segment, deleting indexes without one; returns the segments whose
        indexes are missing or corrupt."""
        rebuild: list[LogSegment] = []
        for name in sorted(os.listdir(self.dir)):
            if name.endswith(LOG_SUFFIX) and name[:-4].isdigit():
                base = int(name[:-4])
                missing_index = not all(
                    os.path.exists(segment_path(self.dir, base, s)) for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
                )
                segment = self._new_segment(base)
                self._segments.append(segment)
                if missing_index:
                    rebuild.append(segment)
                else:
                    try:
                        segment.sanity_check()
                    except CorruptIndexError as e:
                        log.warning("Rebuilding the indexes of %s: %s", segment.log_path, e)
                        rebuild.append(segment)
            elif name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
                prefix = name.split(".", 1)[0]
                if prefix.isdigit() and not os.path.exists(os.path.join(self.dir, prefix + LOG_SUFFIX)):
                    log.info("Deleting index %s without a log file", name)
                    os.unlink(os.path.join(self.dir, name))
        return rebuild

    def _remove_temp_files_and_complete_swaps(self) -> None:
        """Deletes `.deleted` and `.cleaned` files and finishes a compaction swap cut by a crash: a `.swap`
        segment replaces the segments its offsets cover."""
        swaps: list[int] = []
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX)) or name.endswith(".tmp"):
                os.unlink(path)
            elif name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                swaps.append(int(name.split(".", 1)[0]))
        for base in sorted(swaps):
            swap = self._new_segment(base, suffix=SWAP_SUFFIX)
            swap.recover()
            end = swap.read_next_offset()
            for name in os.listdir(self.dir):
                prefix = name.split(".", 1)[0]
                if name.endswith(LOG_SUFFIX) and prefix.isdigit() and base <= int(prefix) < end:
                    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(segment_path(self.dir, int(prefix), suffix))
            swap.change_file_suffixes(SWAP_SUFFIX, "")
            swap.close()
            log.info("Completed the interrupted swap of segment %d in %s", base, self.dir)
        for name in os.listdir(self.dir):
            if name.endswith(SWAP_SUFFIX):
                os.unlink(os.path.join(self.dir, name))

    def _recover(self, log_start_offset: int, recovery_point: int) -> int:
        """Scans every segment from the one holding the recovery point, truncating at the first invalid
        batch and dropping the segments after it; producer state and transaction indexes are rebuilt.
        Returns the log end offset."""
        segments = self._segments
        first = max(0, floor_segment_index(segments, recovery_point))
        if first < len(segments):
            self._rebuild_producer_state(log_start_offset, segments[first].base_offset)
        psm = self.producer_state
        for i in range(first, len(segments)):
            segment = segments[i]
            psm.update_map_end_offset(segment.base_offset)
            truncated = segment.recover(self.leader_epoch_cache, self._recover_batch_state)
            psm.update_map_end_offset(segment.read_next_offset())
            if truncated:
                for later in segments[i + 1 :]:
                    log.warning(
                        "Deleting segment %s after the truncated %s", later.log_path, segment.log_path
                    )
                    later.delete()
                del segments[i + 1 :]
                break
        log_end_offset = segments[-1].read_next_offset()
        self._rebuild_producer_state(log_start_offset, log_end_offset)
        return log_end_offset

    def _recover_batch_state(self, view: memoryview, pos: int, header: BatchHeader) -> AbortedTxn | None:
        """Replays one batch into producer state during segment recovery; an abort yields its index entry."""
        psm = self.producer_state
        completed = psm.replay_batch(view, pos, header)
        psm.update_map_end_offset(header.last_offset + 1)
        if completed is None:
            return None
        aborted = None
        if completed.is_aborted:
            lso = psm.last_stable_offset(completed)
            aborted = AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso)
        psm.complete_txn(completed)
        return aborted

    def _rebuild_producer_state(self, log_start_offset: int, last_offset: int) -> None:
        rebuild_producer_state(
            self.producer_state, self._segments, log_start_offset, last_offset, self._time_ms()
        )
