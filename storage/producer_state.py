"""Producer state of a partition (Kafka's ProducerStateManager): idempotence and transactions.

Per producer id: the epoch, the last 5 batches' sequence ranges and offsets (duplicate detection), the
coordinator epoch and the first offset of the open transaction. Also the open transactions (their first
offsets bound the last stable offset) and completed ones not yet below the high watermark.

State is snapshotted to `<offset>.snapshot` in Kafka's format (version 1: int16 version, uint32
CRC32C of the rest, then an array of entries: producer id int64, epoch int16, last sequence int32, last
offset int64, offset delta int32, timestamp int64, coordinator epoch int32, current txn first offset
int64) and rebuilt on load from the newest snapshot plus the batches after it.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import logging
import os
import re
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

import crc32c

from protocol import record_batch
from protocol.record_batch import BatchHeader, Record
from storage.checkpoints import write_atomically
from storage.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from storage.segment import SNAPSHOT_SUFFIX, filename_prefix

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NUM_BATCHES_TO_RETAIN = 5
INT_MAX = 2**31 - 1

_SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CONTROL_KEY = struct.Struct(">hh")  # version, type (0 abort, 1 commit)
_CONTROL_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")


class AppendOrigin(enum.Enum):
    """Who appends: a producer (checked), a coordinator (markers, offsets), or a follower (trusted)."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Sequences wrap at Int.MaxValue (Kafka's DefaultRecordBatch.decrementSequence)."""
    return sequence - decrement if sequence >= decrement else INT_MAX - (decrement - sequence) + 1


def parse_end_txn_marker(record: Record) -> tuple[bool, int]:
    """(is_abort, coordinator_epoch) of a control record holding a transaction marker."""
    if record.key is None or record.value is None or len(record.key) < 4 or len(record.value) < 6:
        raise ValueError("control record is not a transaction marker")
    _, control_type = _CONTROL_KEY.unpack_from(record.key)
    if control_type not in (0, 1):
        raise ValueError(f"unknown control record type {control_type}")
    _, coordinator_epoch = _CONTROL_VALUE.unpack_from(record.value)
    return control_type == 0, coordinator_epoch


class VerificationGuard:
    """A token tying a produce's verification to the append it allows (Kafka's VerificationGuard): only
    the guard of the producer's current verification entry lets a transactional batch in, and
    SENTINEL (no verification asked for) never does."""

    __slots__ = ("value",)
    _ids = itertools.count(1)

    def __init__(self, value: int | None = None) -> None:
        self.value = next(VerificationGuard._ids) if value is None else value

    def verify(self, presented: VerificationGuard) -> bool:
        """Whether ``presented`` (the guard an append carries) is this one and not the sentinel."""
        return presented is not SENTINEL and presented.value == self.value

    def __repr__(self) -> str:
        return f"VerificationGuard({self.value})"


SENTINEL = VerificationGuard(0)


class VerificationStateEntry:
    """A verification under way for one producer (Kafka's VerificationStateEntry): its guard, when it
    started (entries left unverified expire with producer.id.expiration.ms), and the lowest sequence
    and epoch seen while verifying, so that a higher sequence cannot overtake a lower one that failed
    verification with a retriable error."""

    __slots__ = ("epoch", "guard", "lowest_sequence", "timestamp")

    def __init__(self, timestamp: int, sequence: int, epoch: int) -> None:
        self.timestamp = timestamp
        self.guard = VerificationGuard()
        self.lowest_sequence = sequence
        self.epoch = epoch

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence


class BatchMetadata(NamedTuple):
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass
class TxnMetadata:
    producer_id: int
    first_offset: int
    last_offset: int | None = None


@dataclass
class ProducerStateEntry:
    """What the broker remembers of one producer id."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batch_metadata: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        if self.producer_epoch != epoch:
            self.batch_metadata.clear()
            self.producer_epoch = epoch
            return True
        return False

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, other: ProducerStateEntry) -> None:
        self.maybe_update_producer_epoch(other.producer_epoch)
        self.batch_metadata.extend(other.batch_metadata)
        self.coordinator_epoch = other.coordinator_epoch
        self.current_txn_first_offset = other.current_txn_first_offset
        self.last_timestamp = other.last_timestamp

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        """The retained batch with exactly this epoch and sequence range, if any."""
        if header.producer_epoch != self.producer_epoch:
            return None
        for meta in self.batch_metadata:
            if meta.first_seq == header.base_sequence and meta.last_seq == header.last_sequence:
                return meta
        return None


class ProducerAppendInfo:
    """The changes one append makes to one producer, validated before anything is written."""

    def __init__(
        self,
        producer_id: int,
        current: ProducerStateEntry | None,
        origin: AppendOrigin,
        partition: str = "",
        verification: VerificationStateEntry | None = None,
    ) -> None:
        self.producer_id = producer_id
        self.origin = origin
        self.verification = verification
        self._partition = partition
        self.current = current if current is not None else ProducerStateEntry(producer_id)
        self.updated = ProducerStateEntry(
            producer_id,
            producer_epoch=self.current.producer_epoch,
            coordinator_epoch=self.current.coordinator_epoch,
            last_timestamp=self.current.last_timestamp,
            current_txn_first_offset=self.current.current_txn_first_offset,
        )
        self.started_transactions: list[TxnMetadata] = []
        self.transactional = False  # a transactional batch or marker was staged (its verification is spent)

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated.producer_epoch:
            message = (
                f"Epoch of producer {self.producer_id} at offset {offset} in {self._partition} is {epoch}, "
                f"which is smaller than the last seen epoch {self.updated.producer_epoch}"
            )
            if self.origin is AppendOrigin.REPLICATION:
                log.warning("%s", message)
            else:
                raise InvalidProducerEpochError(message)

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        verification = self.verification
        # Only the append's first batch of the producer: the rest follow it in sequence.
        if verification is not None and self.updated.is_empty and first_seq > verification.lowest_sequence:
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset {offset} in "
                f"{self._partition}: {first_seq} (incoming seq. number), {verification.lowest_sequence} "
                "(earliest seen sequence)"
            )
        if epoch != self.updated.producer_epoch:
            if first_seq != 0 and self.updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} "
                    f"at offset {offset} in {self._partition}: {epoch} (request epoch), "
                    f"{first_seq} (seq. number), "
                    f"{self.updated.producer_epoch} (current producer epoch)"
                )
            return
        if not self.updated.is_empty:
            current_last_seq = self.updated.last_seq
        elif epoch == self.current.producer_epoch:
            current_last_seq = self.current.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        # With no state for the producer (its records were all removed by retention or DeleteRecords)
        # any sequence is accepted, as Kafka does since 2.5 (KIP-360).
        in_sequence = first_seq == current_last_seq + 1 or (first_seq == 0 and current_last_seq == INT_MAX)
        if not (self.current.producer_epoch == NO_PRODUCER_EPOCH or in_sequence):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset {offset} in "
                f"{self._partition}: {first_seq} (incoming seq. number), {current_last_seq} "
                "(current end sequence number)"
            )

    def append_batch(
        self, buf: memoryview, pos: int, header: BatchHeader, first_offset: int, max_timestamp: int
    ) -> CompletedTxn | None:
        """Stages the batch at `pos` of `buf`, placed at `first_offset`; a transaction marker returns the
        transaction it completes (Kafka's ProducerAppendInfo.append)."""
        if header.is_control:
            records = record_batch.decode_records(buf, pos)
            if not records:
                return None
            is_abort, coordinator_epoch = parse_end_txn_marker(records[0])
            return self.append_end_txn_marker(
                header.producer_epoch, is_abort, coordinator_epoch, first_offset, records[0].timestamp
            )
        self.append_data_batch(header, first_offset, max_timestamp)
        return None

    def append_data_batch(self, header: BatchHeader, first_offset: int, max_timestamp: int) -> None:
        """Validates and stages a data batch whose offsets start at `first_offset`."""
        if self.origin is not AppendOrigin.REPLICATION:
            self._check_producer_epoch(header.producer_epoch, first_offset)
            if self.origin is AppendOrigin.CLIENT:
                self._check_sequence(header.producer_epoch, header.base_sequence, first_offset)
        delta = header.last_offset_delta
        self.updated.add_batch(
            header.producer_epoch, header.last_sequence, first_offset + delta, delta, max_timestamp
        )
        if self.updated.current_txn_first_offset is not None and not header.is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {self.producer_id} at offset {first_offset} "
                f"in {self._partition}"
            )
        if header.is_transactional and self.updated.current_txn_first_offset is None:
            self.updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(
        self, epoch: int, is_abort: bool, coordinator_epoch: int, offset: int, timestamp: int
    ) -> CompletedTxn:
        self._check_producer_epoch(epoch, offset)
        if self.updated.coordinator_epoch > coordinator_epoch:
            message = (
                f"Invalid coordinator epoch for producer {self.producer_id} at offset {offset} in "
                f"{self._partition}: {coordinator_epoch} (zombie), {self.updated.coordinator_epoch} (current)"
            )
            if self.origin is AppendOrigin.REPLICATION:
                log.info("%s", message)
            else:
                raise TransactionCoordinatorFencedError(message)
        first_offset = self.updated.current_txn_first_offset
        if first_offset is None:
            first_offset = offset
            self.started_transactions.append(TxnMetadata(self.producer_id, offset))
        self.updated.maybe_update_producer_epoch(epoch)
        self.updated.current_txn_first_offset = None
        self.updated.coordinator_epoch = coordinator_epoch
        self.updated.last_timestamp = timestamp
        return CompletedTxn(self.producer_id, first_offset, offset, is_abort)


class ProducerStateManager:
    """Owned by one Log and called under its lock."""

    def __init__(self, partition_dir: str, producer_id_expiration_ms: int, partition: str = "") -> None:
        self.dir = partition_dir
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.partition = partition
        self.producers: dict[int, ProducerStateEntry] = {}
        # KIP-890: set by the broker (transaction.partition.verification.enable); a log nobody told
        # (tools, tests of storage alone) trusts its callers, as a Kafka log without the config would.
        self.transaction_verification_enabled = False
        self._verification: dict[int, VerificationStateEntry] = {}
        self._ongoing: dict[int, TxnMetadata] = {}  # first offset -> txn, insertion ordered by offset
        self._unreplicated: dict[int, TxnMetadata] = {}
        self.map_end_offset = 0
        self.last_snapshot_offset = 0
        self.snapshots: list[int] = self._list_snapshots()

    def _list_snapshots(self) -> list[int]:
        found = []
        for name in os.listdir(self.dir):
            m = _SNAPSHOT_NAME.match(name)
            if m:
                found.append(int(m.group(1)))
        return sorted(found)

    def _snapshot_path(self, offset: int) -> str:
        return os.path.join(self.dir, filename_prefix(offset) + SNAPSHOT_SUFFIX)

    # --- appends -------------------------------------------------------------------------------------

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        return ProducerAppendInfo(
            producer_id,
            self.producers.get(producer_id),
            origin,
            self.partition,
            self._verification.get(producer_id) if self._verification else None,
        )

    def replay_batch(self, buf: memoryview, pos: int, header: BatchHeader) -> CompletedTxn | None:
        """Applies a batch already in the log (loading, recovery, truncation); a transaction marker
        returns the transaction it completes, for the caller to complete once indexed."""
        if header.producer_id < 0:
            return None
        info = self.prepare_update(header.producer_id, AppendOrigin.REPLICATION)
        completed = info.append_batch(buf, pos, header, header.base_offset, header.max_timestamp)
        self.update(info)
        return completed

    def update(self, info: ProducerAppendInfo) -> None:
        entry = self.producers.get(info.producer_id)
        if entry is None:
            entry = self.producers[info.producer_id] = ProducerStateEntry(info.producer_id)
        entry.update(info.updated)
        for txn in info.started_transactions:
            self._ongoing[txn.first_offset] = txn

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    # --- transactions --------------------------------------------------------------------------------

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None

    def maybe_create_verification_state_entry(
        self, producer_id: int, sequence: int, epoch: int, now_ms: int
    ) -> VerificationStateEntry:
        """The producer's verification entry, created if it has none; a lower sequence or higher epoch
        is noted in it."""
        entry = self._verification.get(producer_id)
        if entry is None:
            entry = self._verification[producer_id] = VerificationStateEntry(now_ms, sequence, epoch)
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return entry

    def verification_state_entry(self, producer_id: int) -> VerificationStateEntry | None:
        return self._verification.get(producer_id)

    def clear_verification_state_entry(self, producer_id: int) -> None:
        self._verification.pop(producer_id, None)

    def verification_guard(self, producer_id: int) -> VerificationGuard:
        entry = self._verification.get(producer_id)
        return SENTINEL if entry is None else entry.guard

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open or not yet replicated transaction."""
        candidates = [*self._unreplicated, *self._ongoing]
        return min(candidates) if candidates else None

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once `completed` is done: the next open transaction of another producer, or after it."""
        for first_offset in sorted(self._ongoing):
            if self._ongoing[first_offset].producer_id != completed.producer_id:
                return first_offset
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        txn = self._ongoing.pop(completed.first_offset, None)
        if txn is None:
            raise ValueError(f"{self.partition}: completed transaction {completed} was not open")
        txn.last_offset = completed.last_offset
        self._unreplicated[completed.first_offset] = txn

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        self._remove_unreplicated_before(high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated_before(log_start_offset)
        self.map_end_offset = max(self.map_end_offset, log_start_offset)

    def _remove_unreplicated_before(self, offset: int) -> None:
        for first_offset, txn in list(self._unreplicated.items()):
            if txn.last_offset is not None and txn.last_offset < offset:
                del self._unreplicated[first_offset]

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Forgets producers without an open transaction idle for producer.id.expiration.ms."""
        expired = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset is None
            and now_ms - e.last_timestamp >= self.producer_id_expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        # Verifications that never led to an append (the coordinator refused, the producer went away).
        for pid, verification in list(self._verification.items()):
            if now_ms - verification.timestamp >= self.producer_id_expiration_ms:
                del self._verification[pid]
        return expired

    # --- snapshots -----------------------------------------------------------------------------------

    def take_snapshot(self, sync: bool = False) -> None:
        """Writes the state at map_end_offset unless a snapshot there exists already."""
        if self.map_end_offset <= self.last_snapshot_offset:
            return
        offset = self.map_end_offset
        entries = [
            _SNAPSHOT_ENTRY.pack(
                pid,
                e.producer_epoch,
                e.last_seq,
                e.last_data_offset,
                e.last_offset_delta,
                e.last_timestamp,
                e.coordinator_epoch,
                -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
            )
            for pid, e in self.producers.items()
        ]
        body = struct.pack(">i", len(entries)) + b"".join(entries)
        data = struct.pack(">hI", _SNAPSHOT_VERSION, crc32c.crc32c(body)) + body
        write_atomically(self._snapshot_path(offset), data, sync=sync)
        if offset not in self.snapshots:
            self.snapshots.append(offset)
            self.snapshots.sort()
        self.last_snapshot_offset = offset

    def _read_snapshot(self, offset: int) -> list[ProducerStateEntry]:
        path = self._snapshot_path(offset)
        with open(path, "rb") as f:
            data = f.read()
        if len(data) < _SNAPSHOT_HEADER.size:
            raise CorruptSnapshotError(f"{path}: {len(data)} bytes is too short")
        version, crc, count = _SNAPSHOT_HEADER.unpack_from(data)
        if version != _SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"{path}: unknown snapshot version {version}")
        if crc32c.crc32c(data[6:]) != crc:
            raise CorruptSnapshotError(f"{path}: CRC mismatch")
        if len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
            raise CorruptSnapshotError(f"{path}: {count} entries do not match the size {len(data)}")
        entries = []
        for i in range(count):
            pid, epoch, last_seq, last_offset, delta, ts, coord_epoch, txn_first = (
                _SNAPSHOT_ENTRY.unpack_from(data, _SNAPSHOT_HEADER.size + i * _SNAPSHOT_ENTRY.size)
            )
            entry = ProducerStateEntry(
                pid,
                epoch,
                coordinator_epoch=coord_epoch,
                last_timestamp=ts,
                current_txn_first_offset=None if txn_first < 0 else txn_first,
            )
            if last_offset >= 0:
                entry.batch_metadata.append(BatchMetadata(last_seq, last_offset, delta, ts))
            entries.append(entry)
        return entries

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        """Drops snapshots outside (log start, log end] and, unless the state is already at the log end,
        reloads from the newest remaining snapshot; the caller replays batches from map_end_offset."""
        for offset in list(self.snapshots):
            if offset > log_end_offset or offset < log_start_offset:
                self.remove_and_delete_snapshot(offset)
        if log_end_offset != self.map_end_offset:
            self.producers.clear()
            self._ongoing.clear()
            self._unreplicated.clear()
            self._load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while self.snapshots:
            offset = self.snapshots[-1]
            try:
                entries = self._read_snapshot(offset)
            except (CorruptSnapshotError, OSError) as e:
                log.warning("Deleting unreadable producer snapshot of %s: %s", self.partition, e)
                self.remove_and_delete_snapshot(offset)
                continue
            for entry in entries:
                expired = (
                    entry.current_txn_first_offset is None
                    and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
                )
                if not expired:
                    self.producers[entry.producer_id] = entry
                    if entry.current_txn_first_offset is not None:
                        first = entry.current_txn_first_offset
                        self._ongoing[first] = TxnMetadata(entry.producer_id, first)
            self.map_end_offset = self.last_snapshot_offset = offset
            return
        self.map_end_offset = log_start_offset
        self.last_snapshot_offset = 0

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        for snapshot in list(self.snapshots):
            self.remove_and_delete_snapshot(snapshot)
        self.last_snapshot_offset = 0
        self.map_end_offset = offset

    def remove_and_delete_snapshot(self, offset: int) -> None:
        if offset in self.snapshots:
            self.snapshots.remove(offset)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._snapshot_path(offset))

    def snapshot_path(self, offset: int) -> str | None:
        return self._snapshot_path(offset) if offset in self.snapshots else None

    def forget_snapshot(self, offset: int) -> None:
        """Stops tracking a snapshot whose file the log renamed for asynchronous deletion."""
        if offset in self.snapshots:
            self.snapshots.remove(offset)
