"""TransactionStateManager: the transactional ids this broker coordinates, and their persistence in
``__transaction_state`` (Kafka 3.9's TransactionStateManager).

A transactional id lives in partition ``abs(hashCode(id)) % transaction.state.log.num.partitions``
(the mapping of ``coordinator.group_metadata_manager.partition_for``), and the broker leading that
partition is its coordinator. The cache holds, per partition this broker leads, the coordinator epoch
(the partition's leader epoch when it was loaded) and the metadata of each id. When the broker
becomes the leader it replays the partition from its log start, off the event loop (requests for its
ids get COORDINATOR_LOAD_IN_PROGRESS meanwhile); transactions found in PrepareCommit/PrepareAbort are
handed to the marker channel to be completed. When it stops leading, the partition's ids go
(NOT_COORDINATOR from then on).

Every transition is appended with acks=-1 and applied to the cache only once it is written, and only
if the coordinator epoch has not changed meanwhile (Kafka's appendTransactionToLog). Ids idle for
``transactional.id.expiration.ms`` in Empty/CompleteCommit/CompleteAbort are tombstoned and removed.

The manager does not import the broker: it gets a ``TransactionTopic`` (the same protocol as the
group coordinator's ``OffsetsTopic``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

from coordinator.group_metadata_manager import AppendResult, OffsetsTopic, PartitionLog, partition_for
from coordinator.transaction_metadata import (
    NO_PRODUCER_ID,
    IllegalTransactionState,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from coordinator.transaction_records import (
    TRANSACTION_LOG_VALUE_VERSION,
    TransactionLogValue,
    UnknownRecordError,
    decode_key,
    decode_value,
    transaction_log_key,
    transaction_log_value,
)
from protocol import record_batch
from protocol.errors import ErrorCode
from protocol.primitives import DecodeError
from protocol.topic import TRANSACTION_STATE_TOPIC
from server_common.futures import all_of, completed, then

log = logging.getLogger(__name__)

# The same two operations as __consumer_offsets: the leader's log, and an append reporting once
# replicated. The broker hands over its replicas of __transaction_state.
TransactionTopic = OffsetsTopic

_TOMBSTONES_PER_BATCH = 1000


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class TransactionStateConfig:
    """What the manager needs of the coordinator's settings (``transaction_coordinator.TransactionConfig``
    extends it)."""

    num_partitions: int = 50
    transactional_id_expiration_ms: int = 604800000
    transaction_max_timeout_ms: int = 900000
    load_buffer_size: int = 5242880
    required_acks: int = -1
    request_timeout_ms: int = 30000
    value_version: int = TRANSACTION_LOG_VALUE_VERSION


class CoordinatorEpochAndTxnMetadata(NamedTuple):
    coordinator_epoch: int
    metadata: TransactionMetadata


class TransactionalIdAndProducerIdEpoch(NamedTuple):
    transactional_id: str
    producer_id: int
    producer_epoch: int


class PendingCompletion(NamedTuple):
    """A transaction found in PrepareCommit/PrepareAbort by a load, with its prepared completion."""

    coordinator_epoch: int
    commit: bool
    metadata: TransactionMetadata
    transit: TxnTransitMetadata


SendMarkers = Callable[[int, bool, TransactionMetadata, TxnTransitMetadata], None]


@dataclass
class TxnMetadataCacheEntry:
    coordinator_epoch: int
    metadata_per_transactional_id: dict[str, TransactionMetadata] = field(default_factory=dict)


def metadata_from_value(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    """The metadata a record describes (Kafka's readTxnRecordValue): no pending state, and the last
    epoch unknown (the log does not keep it)."""
    state = TransactionState.from_id(value.transaction_status)
    metadata = TransactionMetadata(
        transactional_id,
        value.producer_id,
        value.previous_producer_id,
        value.producer_epoch,
        -1,
        value.transaction_timeout_ms,
        state,
        set(),
        value.transaction_start_timestamp_ms,
        value.transaction_last_update_timestamp_ms,
    )
    if state is not TransactionState.EMPTY:
        for topic, ids in value.transaction_partitions or []:
            metadata.add_partitions({(topic, p) for p in ids})
    return metadata


def value_from_transit(transit: TxnTransitMetadata) -> TransactionLogValue:
    """The record of a transition (Kafka's valueToBytes): an Empty transaction has null partitions."""
    if transit.txn_state is TransactionState.EMPTY and transit.topic_partitions:
        raise ValueError(f"an Empty transaction cannot have partitions: {transit}")
    partitions: list[tuple[str, list[int]]] | None = None
    if transit.txn_state is not TransactionState.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(transit.topic_partitions):
            by_topic.setdefault(topic, []).append(p)
        partitions = list(by_topic.items())
    return TransactionLogValue(
        transit.producer_id,
        transit.producer_epoch,
        transit.txn_timeout_ms,
        int(transit.txn_state),
        partitions,
        transit.txn_last_update_timestamp,
        transit.txn_start_timestamp,
    )


def read_partition(
    partition_log: PartitionLog, buffer_size: int, name: str
) -> dict[str, TransactionMetadata]:
    """Replays a ``__transaction_state`` partition from its start to its end: the last record of each
    transactional id wins, a tombstone removes it. Blocking file work: run it off the event loop."""
    loaded: dict[str, TransactionMetadata] = {}
    offset, end = partition_log.log_start_offset, partition_log.log_end_offset
    while offset < end:
        data = bytes(partition_log.read(offset, buffer_size).records)
        before = offset
        for pos, header in record_batch.iter_headers(data):
            offset = header.last_offset + 1
            if header.is_control:
                continue
            for record in record_batch.decode_records(data, pos):
                if record.key is None:
                    log.warning("%s: ignoring a record without key at offset %d", name, record.offset)
                    continue
                try:
                    transactional_id = decode_key(record.key)
                    if record.value is None:
                        loaded.pop(transactional_id, None)
                    else:
                        loaded[transactional_id] = metadata_from_value(
                            transactional_id, decode_value(record.value)
                        )
                except (DecodeError, UnknownRecordError, IllegalTransactionState) as e:
                    log.warning("%s: ignoring the record at offset %d: %s", name, record.offset, e)
        if offset == before:
            break  # nothing more below the end (compacted or truncated away)
    return loaded


def append_error_to_coordinator_error(error: int) -> int:
    """Kafka's translation of a __transaction_state append error for the transaction's requests."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,  # the client retries on COORDINATOR_NOT_AVAILABLE
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


class TransactionStateManager:
    def __init__(
        self,
        broker_id: int,
        config: TransactionStateConfig,
        topic: TransactionTopic,
        time_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.topic = topic
        self.time_ms = time_ms
        # partition -> the coordinator epoch it is being loaded with
        self.loading_partitions: dict[int, int] = {}
        self.transaction_metadata_cache: dict[int, TxnMetadataCacheEntry] = {}
        self._loads: dict[int, asyncio.Task[None]] = {}
        # The newest coordinator epoch seen per partition, in elections and resignations: an older
        # election arriving late is ignored even once the partition is unloaded.
        self._epochs: dict[int, int] = {}
        self._shutting_down = False

    # -- partitions -------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    @property
    def owned_partitions(self) -> set[int]:
        return set(self.transaction_metadata_cache)

    def validate_transaction_timeout_ms(self, txn_timeout_ms: int) -> bool:
        return 0 < txn_timeout_ms <= self.config.transaction_max_timeout_ms

    # -- the cache --------------------------------------------------------------------------------

    def get_transaction_state(
        self, transactional_id: str
    ) -> tuple[int, CoordinatorEpochAndTxnMetadata | None]:
        """(NONE, the id's metadata or None if unknown), or (COORDINATOR_LOAD_IN_PROGRESS /
        NOT_COORDINATOR, None) when this broker is loading or does not lead its partition."""
        return self._get_and_maybe_add(transactional_id, None)

    def put_transaction_state_if_not_exists(
        self, metadata: TransactionMetadata
    ) -> tuple[int, CoordinatorEpochAndTxnMetadata | None]:
        """Adds the metadata unless the id has one already; returns the one in the cache."""
        return self._get_and_maybe_add(metadata.transactional_id, metadata)

    def _get_and_maybe_add(
        self, transactional_id: str, created: TransactionMetadata | None
    ) -> tuple[int, CoordinatorEpochAndTxnMetadata | None]:
        partition = self.partition_for(transactional_id)
        if partition in self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
        entry = self.transaction_metadata_cache.get(partition)
        if entry is None:
            return ErrorCode.NOT_COORDINATOR, None
        metadata = entry.metadata_per_transactional_id.get(transactional_id)
        if metadata is None and created is not None:
            metadata = entry.metadata_per_transactional_id.setdefault(transactional_id, created)
        if metadata is None:
            return ErrorCode.NONE, None
        return ErrorCode.NONE, CoordinatorEpochAndTxnMetadata(entry.coordinator_epoch, metadata)

    def all_metadata(self) -> list[TransactionMetadata]:
        return [
            m
            for entry in self.transaction_metadata_cache.values()
            for m in entry.metadata_per_transactional_id.values()
        ]

    def timed_out_transactions(self) -> list[TransactionalIdAndProducerIdEpoch]:
        """Ongoing transactions older than their timeout, without a transition in progress."""
        now = self.time_ms()
        return [
            TransactionalIdAndProducerIdEpoch(m.transactional_id, m.producer_id, m.producer_epoch)
            for m in self.all_metadata()
            if m.pending_state is None
            and m.state is TransactionState.ONGOING
            and m.txn_start_timestamp + m.txn_timeout_ms < now
        ]

    def list_transaction_states(
        self, filter_producer_ids: set[int], filter_state_names: set[str], filter_duration_ms: int = -1
    ) -> tuple[int, list[TransactionMetadata], list[str]]:
        """(error, the matching transactions, the state filters that name no state) as Kafka's
        listTransactionStates: Dead ids are never listed; a duration keeps those running longer."""
        if self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], []
        states: set[TransactionState] = set()
        unknown: list[str] = []
        for name in filter_state_names:
            state = TransactionState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                states.add(state)
        now = self.time_ms()
        found = []
        for m in self.all_metadata():
            if m.state is TransactionState.DEAD:
                continue
            if filter_producer_ids and m.producer_id not in filter_producer_ids:
                continue
            if filter_state_names and m.state not in states:
                continue
            if filter_duration_ms >= 0 and now - m.txn_start_timestamp <= filter_duration_ms:
                continue
            found.append(m)
        return ErrorCode.NONE, found, unknown

    # -- loading and unloading --------------------------------------------------------------------

    def _newest_epoch(self, partition: int) -> int | None:
        current = self.transaction_metadata_cache.get(partition)
        epochs = [self.loading_partitions.get(partition), current.coordinator_epoch if current else None]
        return max((e for e in epochs if e is not None), default=None)

    def is_new_election(self, partition: int, coordinator_epoch: int) -> bool:
        """Whether an election at this epoch loads the partition: not when it is loaded or loading at
        this epoch already (a repeated LeaderAndIsr), nor when a newer epoch was seen (a stale one)."""
        newest = self._newest_epoch(partition)
        if newest is not None and coordinator_epoch <= newest:
            return False
        return coordinator_epoch >= self._epochs.get(partition, coordinator_epoch)

    def is_current_resignation(self, partition: int, coordinator_epoch: int | None) -> bool:
        """Whether a resignation applies: always without an epoch (StopReplica), else unless older
        than the epoch the partition was loaded with."""
        newest = self._newest_epoch(partition)
        return coordinator_epoch is None or newest is None or coordinator_epoch >= newest

    def _saw_epoch(self, partition: int, coordinator_epoch: int | None) -> None:
        if coordinator_epoch is not None and coordinator_epoch > self._epochs.get(partition, -1):
            self._epochs[partition] = coordinator_epoch

    def load_transactions_for_txn_topic_partition(
        self, partition: int, coordinator_epoch: int, send_txn_markers: SendMarkers
    ) -> None:
        """Starts loading a partition this broker now leads (Kafka: scheduled on its own thread)."""
        if not self.is_new_election(partition, coordinator_epoch):
            log.info(
                "not loading %s-%d at epoch %d: loaded or loading at epoch %s",
                TRANSACTION_STATE_TOPIC,
                partition,
                coordinator_epoch,
                self._newest_epoch(partition),
            )
            return
        self._saw_epoch(partition, coordinator_epoch)
        self.loading_partitions[partition] = coordinator_epoch
        previous = self._loads.pop(partition, None)
        if previous is not None:
            previous.cancel()
        task = asyncio.get_running_loop().create_task(
            self._load(partition, coordinator_epoch, send_txn_markers),
            name=f"load-{TRANSACTION_STATE_TOPIC}-{partition}",
        )
        self._loads[partition] = task
        task.add_done_callback(partial(self._load_ended, partition))

    def _load_ended(self, partition: int, task: asyncio.Task[None]) -> None:
        if self._loads.get(partition) is task:
            del self._loads[partition]

    async def _load(self, partition: int, coordinator_epoch: int, send_txn_markers: SendMarkers) -> None:
        name = f"{TRANSACTION_STATE_TOPIC}-{partition}"
        started = time.monotonic()
        loaded: dict[str, TransactionMetadata] = {}
        try:
            partition_log = self.topic.leader_log(partition)
            if partition_log is None:
                log.warning("attempted to load %s, but this broker does not lead it", name)
            else:
                loaded = await asyncio.get_running_loop().run_in_executor(
                    None, read_partition, partition_log, self.config.load_buffer_size, name
                )
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("error loading transactions from %s", name)
        if self._shutting_down or self.loading_partitions.get(partition) != coordinator_epoch:
            return  # unloaded, or loaded again with a newer epoch, meanwhile
        previous = self.transaction_metadata_cache.get(partition)
        if previous is not None:
            log.warning("replacing the transactions of %s at epoch %d", name, previous.coordinator_epoch)
        self.transaction_metadata_cache[partition] = TxnMetadataCacheEntry(coordinator_epoch, loaded)
        pending: list[PendingCompletion] = []
        now = self.time_ms()
        for metadata in loaded.values():
            if metadata.state is TransactionState.PREPARE_ABORT:
                pending.append(
                    PendingCompletion(coordinator_epoch, False, metadata, metadata.prepare_complete(now))
                )
            elif metadata.state is TransactionState.PREPARE_COMMIT:
                pending.append(
                    PendingCompletion(coordinator_epoch, True, metadata, metadata.prepare_complete(now))
                )
        # Out of loading first, so that completing these transactions is not refused as loading.
        del self.loading_partitions[partition]
        log.info(
            "loaded %d transactional ids from %s (epoch %d) in %.0f ms",
            len(loaded),
            name,
            coordinator_epoch,
            (time.monotonic() - started) * 1000,
        )
        for p in pending:
            log.info("completing %s's transaction after loading %s", p.metadata.transactional_id, name)
            send_txn_markers(p.coordinator_epoch, p.commit, p.metadata, p.transit)

    def remove_transactions_for_txn_topic_partition(
        self, partition: int, coordinator_epoch: int | None = None
    ) -> None:
        """This broker no longer leads the partition (StopReplica without epoch, or become-follower)."""
        if not self.is_current_resignation(partition, coordinator_epoch):
            log.info(
                "not unloading %s-%d: epoch %s is stale",
                TRANSACTION_STATE_TOPIC,
                partition,
                coordinator_epoch,
            )
            return
        self._saw_epoch(partition, coordinator_epoch)
        self.loading_partitions.pop(partition, None)
        task = self._loads.pop(partition, None)
        if task is not None:
            task.cancel()
        entry = self.transaction_metadata_cache.pop(partition, None)
        if entry is not None:
            log.info(
                "unloaded %d transactional ids of %s-%d",
                len(entry.metadata_per_transactional_id),
                TRANSACTION_STATE_TOPIC,
                partition,
            )

    def shutdown(self) -> None:
        self._shutting_down = True
        for task in self._loads.values():
            task.cancel()
        self._loads.clear()
        self.loading_partitions.clear()
        self.transaction_metadata_cache.clear()

    # -- writes -----------------------------------------------------------------------------------

    def _batch(self, records: list[tuple[bytes, bytes | None]]) -> bytes:
        now = self.time_ms()
        return record_batch.encode_batch(
            [record_batch.Record(i, now, key, value) for i, (key, value) in enumerate(records)], base_offset=0
        )

    def append_transaction_to_log(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        transit: TxnTransitMetadata,
        retry_on_error: Callable[[int], bool] = lambda error: False,
    ) -> asyncio.Future[int]:
        """Appends the transition (acks=-1); once written, and if the coordinator epoch is unchanged,
        completes it in the cache. The future gives the error the request answers. A failed write
        clears the pending state unless ``retry_on_error`` says the caller retries it."""
        error, current = self.get_transaction_state(transactional_id)
        if error != ErrorCode.NONE:
            return completed(error)
        if current is None or current.coordinator_epoch != coordinator_epoch:
            return completed(int(ErrorCode.NOT_COORDINATOR))
        value = transaction_log_value(value_from_transit(transit), self.config.value_version)
        batch = self._batch([(transaction_log_key(transactional_id), value)])
        try:
            appended = self.topic.append(
                self.partition_for(transactional_id),
                batch,
                self.config.required_acks,
                self.config.request_timeout_ms,
            )
        except Exception:
            log.exception("appending %s's transition failed", transactional_id)
            appended = completed(AppendResult(ErrorCode.UNKNOWN_SERVER_ERROR))
        result: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def done(future: asyncio.Future[AppendResult]) -> None:
            if future.cancelled():
                append_error: int = ErrorCode.REQUEST_TIMED_OUT
            elif future.exception() is not None:
                log.warning("appending %s's transition failed: %s", transactional_id, future.exception())
                append_error = ErrorCode.UNKNOWN_SERVER_ERROR
            else:
                append_error = future.result().error
            outcome = self._appended(
                transactional_id, coordinator_epoch, transit, retry_on_error, append_error
            )
            if not result.done():
                result.set_result(outcome)

        if appended.done():
            done(appended)
        else:
            appended.add_done_callback(done)
        return result

    def _appended(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        transit: TxnTransitMetadata,
        retry_on_error: Callable[[int], bool],
        append_error: int,
    ) -> int:
        error = append_error_to_coordinator_error(append_error)
        lookup_error, current = self.get_transaction_state(transactional_id)
        if error == ErrorCode.NONE:
            if lookup_error != ErrorCode.NONE:
                log.info(
                    "%s's %s was written but its metadata is gone: %s",
                    transactional_id,
                    transit.txn_state.state_name,
                    ErrorCode(lookup_error).name,
                )
                return lookup_error
            if current is None or current.coordinator_epoch != coordinator_epoch:
                # The partition moved away and back meanwhile: the client finds the coordinator again.
                log.info(
                    "%s's coordinator epoch changed while %s was written",
                    transactional_id,
                    transit.txn_state.state_name,
                )
                return ErrorCode.NOT_COORDINATOR
            current.metadata.complete_transition_to(transit)
            return ErrorCode.NONE
        log.info(
            "writing %s's %s failed: %s (%s)",
            transactional_id,
            transit.txn_state.state_name,
            ErrorCode(append_error).name,
            ErrorCode(error).name,
        )
        if (
            lookup_error == ErrorCode.NONE
            and current is not None
            and current.coordinator_epoch == coordinator_epoch
        ):
            if not retry_on_error(error):
                current.metadata.pending_state = None
        return error

    # -- expiration -------------------------------------------------------------------------------

    def _should_expire(self, metadata: TransactionMetadata, now: int) -> bool:
        return (
            metadata.state.is_expiration_allowed
            and metadata.txn_last_update_timestamp <= now - self.config.transactional_id_expiration_ms
        )

    def remove_expired_transactional_ids(self) -> asyncio.Future[int]:
        """Tombstones the ids idle for transactional.id.expiration.ms (Empty, CompleteCommit or
        CompleteAbort, nothing pending) and drops them once written. The future gives how many went."""
        now = self.time_ms()
        writes: list[asyncio.Future[int]] = []
        for partition, entry in list(self.transaction_metadata_cache.items()):
            expired: list[tuple[TransactionMetadata, TxnTransitMetadata]] = []
            for metadata in entry.metadata_per_transactional_id.values():
                if metadata.pending_state is None and self._should_expire(metadata, now):
                    expired.append((metadata, metadata.prepare_dead()))
            for i in range(0, len(expired), _TOMBSTONES_PER_BATCH):
                chunk = expired[i : i + _TOMBSTONES_PER_BATCH]
                batch = self._batch([(transaction_log_key(m.transactional_id), None) for m, _ in chunk])
                appended = self.topic.append(
                    partition, batch, self.config.required_acks, self.config.request_timeout_ms
                )
                writes.append(
                    then(
                        appended, partial(self._tombstones_written, partition, entry.coordinator_epoch, chunk)
                    )
                )
        return then(all_of(writes), sum)

    def _tombstones_written(
        self,
        partition: int,
        coordinator_epoch: int,
        expired: list[tuple[TransactionMetadata, TxnTransitMetadata]],
        result: AppendResult,
    ) -> int:
        entry = self.transaction_metadata_cache.get(partition)
        removed = 0
        for metadata, transit in expired:
            tid = metadata.transactional_id
            if (
                result.error == ErrorCode.NONE
                and entry is not None
                and entry.coordinator_epoch == coordinator_epoch
                and entry.metadata_per_transactional_id.get(tid) is metadata
                and metadata.pending_state is TransactionState.DEAD
                and metadata.producer_epoch == transit.producer_epoch
            ):
                del entry.metadata_per_transactional_id[tid]
                removed += 1
                log.info("removed expired transactional id %s", tid)
            else:
                log.warning(
                    "could not remove expired transactional id %s: tombstone error %s, pending %s",
                    tid,
                    ErrorCode(result.error).name,
                    metadata.pending_state,
                )
                if metadata.pending_state is TransactionState.DEAD:
                    metadata.pending_state = None
        return removed


__all__ = [
    "NO_PRODUCER_ID",
    "CoordinatorEpochAndTxnMetadata",
    "PendingCompletion",
    "TransactionStateConfig",
    "TransactionStateManager",
    "TransactionTopic",
    "TransactionalIdAndProducerIdEpoch",
    "TxnMetadataCacheEntry",
    "append_error_to_coordinator_error",
    "metadata_from_value",
    "read_partition",
    "value_from_transit",
]
