"""LeaderEpochFileCache: epoch -> start offset of a partition, kept in its leader-epoch-checkpoint file.

Semantics follow Kafka's LeaderEpochFileCache: entries have strictly increasing epochs and start
offsets; assigning an entry removes any that would break that order; `end_offset_for` answers
OffsetsForLeaderEpoch.
"""

from __future__ import annotations

import bisect
import logging
import threading

from storage.checkpoints import LEADER_EPOCH_CHECKPOINT, EpochEntry, LeaderEpochCheckpointFile

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochFileCache:
    """Thread-safe; every change is written through to the checkpoint file."""

    def __init__(self, partition_dir: str) -> None:
        self._checkpoint = LeaderEpochCheckpointFile(f"{partition_dir}/{LEADER_EPOCH_CHECKPOINT}")
        self._lock = threading.RLock()
        self._entries: list[EpochEntry] = self._checkpoint.read()

    @property
    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        with self._lock:
            return self._entries[-1].epoch if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Records that `epoch` starts at `start_offset`; a no-op when that is already known."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        entries = self._entries  # the append path's common case, without the lock: nothing to do
        if entries and entries[-1].epoch == epoch and start_offset >= entries[-1].start_offset:
            return
        with self._lock:
            last = self._entries[-1] if self._entries else None
            if last is not None and last.epoch == epoch and start_offset >= last.start_offset:
                return
            kept = [e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset]
            dropped = [e for e in self._entries[len(kept) :] if e.epoch != epoch]
            if dropped:
                log.warning(
                    "%s: new epoch entry (%d, %d) truncates non-monotonic entries %s",
                    self._checkpoint.path,
                    epoch,
                    start_offset,
                    dropped,
                )
            self._entries = [*kept, EpochEntry(epoch, start_offset)]
            self._flush()

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the record at `offset` was written in, if known."""
        with self._lock:
            i = bisect.bisect_right([e.start_offset for e in self._entries], offset)
            return self._entries[i - 1].epoch if i else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch: the start offset of the first epoch above
        `requested_epoch`, paired with the largest known epoch <= requested_epoch; the log end offset
        for the latest epoch; (-1, -1) when the epoch is undefined or above every known epoch."""
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH or not self._entries:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if self._entries[-1].epoch == requested_epoch:
                return requested_epoch, log_end_offset
            epochs = [e.epoch for e in self._entries]
            higher = bisect.bisect_right(epochs, requested_epoch)
            if higher == len(epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if higher == 0:
                return requested_epoch, self._entries[0].start_offset
            return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """Removes entries starting at or after `end_offset` (the log was truncated to it)."""
        with self._lock:
            if end_offset >= 0 and self._entries and self._entries[-1].start_offset >= end_offset:
                self._entries = [e for e in self._entries if e.start_offset < end_offset]
                self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drops entries wholly before `start_offset`; the last of them is kept, moved to start there."""
        with self._lock:
            before = [e for e in self._entries if e.start_offset <= start_offset]
            if not before:
                return
            rest = self._entries[len(before) :]
            first = EpochEntry(before[-1].epoch, start_offset)
            if [first, *rest] != self._entries:
                self._entries = [first, *rest]
                self._flush()

    def clear_and_flush(self) -> None:
        with self._lock:
            self._entries = []
            self._flush()

    def _flush(self) -> None:
        self._checkpoint.write(self._entries)
