"""TransactionMarkerChannelManager: writing a finished transaction's COMMIT/ABORT markers to the leaders
of its partitions, then its CompleteCommit/CompleteAbort to ``__transaction_state`` (Kafka 3.9's
TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler).

Markers are grouped per destination leader (``TxnMarkerTransport.leader_of``) and sent with one
WriteTxnMarkers per leader at a time (``write_markers``), from one sender task. What a leader
answers, per partition:

- NONE: the partition has its marker (removed from the transaction's pending partitions);
- UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR (and anything unexpected): retried after a backoff, to
  whichever broker leads the partition by then; so are partitions without a live leader and
  leaders that cannot be reached;
- INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: the producer or coordinator moved on; this
  coordinator stops sending the transaction's markers;
- UNSUPPORTED_FOR_MESSAGE_FORMAT, UNSUPPORTED_VERSION: the partition is given up (the producer could
  not have written to it either).

Partitions of deleted topics (``topic_exists`` false) are dropped. Once no partition is left, the
completion is appended to the log; an append that finds no available replicas is retried. Every
step first checks that this broker still coordinates the transactional id with the same coordinator
epoch; otherwise the markers are dropped (a load of the partition resends them).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from coordinator.transaction_metadata import (
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from coordinator.transaction_state_manager import TransactionStateManager

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TxnMarker:
    """One producer's marker for some partitions."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[tuple[str, int], ...]


class TxnMarkerTransport(Protocol):
    """How markers reach partition leaders (the broker implements it: broker/txn_marker_transport.py)."""

    def leader_of(self, topic: str, partition: int) -> int | None:
        """The node id of the partition's leader, None if it has no live leader now."""
        ...

    def topic_exists(self, topic: str) -> bool:
        """False once the topic is deleted: its partitions need no marker."""
        ...

    async def write_markers(self, node_id: int, markers: list[TxnMarker]) -> dict[tuple[int, str, int], int]:
        """WriteTxnMarkers to node_id: {(producer_id, topic, partition): error code}. Raises
        ConnectionError/OSError/TimeoutError when the node cannot be reached (the coordinator retries)."""
        ...


@dataclass(eq=False)
class PendingCompleteTxn:
    """A transaction whose markers are being written, and the completion to append afterwards."""

    transactional_id: str
    coordinator_epoch: int
    metadata: TransactionMetadata
    new_metadata: TxnTransitMetadata


@dataclass(eq=False)
class _MarkerEntry:
    pending: PendingCompleteTxn
    marker: TxnMarker


_RETRIABLE = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
_FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
_PREPARED = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})
_GIVE_UP_PARTITION = frozenset({ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})


class TransactionMarkerChannelManager:
    def __init__(
        self,
        manager: TransactionStateManager,
        transport: TxnMarkerTransport,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30000,
    ) -> None:
        self.manager = manager
        self.transport = transport
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self.transactions_with_pending_markers: dict[str, PendingCompleteTxn] = {}
        self._queues: dict[int, list[_MarkerEntry]] = {}  # destination node -> markers to send
        self._retries: list[tuple[float, _MarkerEntry]] = []  # (due on the loop's clock, entry)
        self._log_append_retries: list[PendingCompleteTxn] = []
        self._in_flight: dict[int, asyncio.Task[None]] = {}
        self._wakeup = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._run(), name="txn-marker-sender")

    async def shutdown(self) -> None:
        tasks = [t for t in (self._sender, *self._in_flight.values()) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._sender = None
        self._in_flight.clear()
        self._queues.clear()
        self._retries.clear()
        self._log_append_retries.clear()
        self.transactions_with_pending_markers.clear()

    @property
    def num_txns_with_pending_markers(self) -> int:
        return len(self.transactions_with_pending_markers)

    def queued_markers(self) -> int:
        return sum(len(q) for q in self._queues.values()) + len(self._retries)

    # -- adding markers ---------------------------------------------------------------------------

    def add_txn_markers_to_send(
        self,
        coordinator_epoch: int,
        commit: bool,
        metadata: TransactionMetadata,
        new_metadata: TxnTransitMetadata,
    ) -> None:
        """The transaction's PrepareCommit/PrepareAbort is written: write its markers, then complete it."""
        tid = metadata.transactional_id
        pending = PendingCompleteTxn(tid, coordinator_epoch, metadata, new_metadata)
        previous = self.transactions_with_pending_markers.get(tid)
        if previous is not None:
            log.info("replacing the pending completion of %s", tid)
        self.transactions_with_pending_markers[tid] = pending
        self.add_txn_markers_to_broker_queue(
            metadata.producer_id, metadata.producer_epoch, commit, pending, set(metadata.topic_partitions)
        )
        self.maybe_write_txn_completion(tid)

    def add_txn_markers_to_broker_queue(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        pending: PendingCompleteTxn,
        partitions: set[TopicPartition],
    ) -> None:
        by_destination: dict[int | None, set[TopicPartition]] = {}
        deleted: set[TopicPartition] = set()
        for tp in partitions:
            if not self.transport.topic_exists(tp[0]):
                deleted.add(tp)
            else:
                by_destination.setdefault(self.transport.leader_of(*tp), set()).add(tp)
        loop = asyncio.get_running_loop()
        for node, tps in by_destination.items():
            entry = _MarkerEntry(
                pending,
                TxnMarker(producer_id, producer_epoch, pending.coordinator_epoch, commit, tuple(sorted(tps))),
            )
            if node is None:
                # No live leader now: look again after the backoff.
                self._retries.append((loop.time() + self.retry_backoff_ms / 1000, entry))
            else:
                self._queues.setdefault(node, []).append(entry)
        if deleted:
            self._drop_deleted_partitions(pending, deleted)
        self._wakeup.set()

    def _drop_deleted_partitions(self, pending: PendingCompleteTxn, deleted: set[TopicPartition]) -> None:
        tid = pending.transactional_id
        error, current = self.manager.get_transaction_state(tid)
        if (
            error != ErrorCode.NONE
            or current is None
            or current.coordinator_epoch != pending.coordinator_epoch
        ):
            log.info(
                "%s is no longer coordinated here with epoch %d; not sending its markers",
                tid,
                pending.coordinator_epoch,
            )
            self.remove_markers_for_txn(pending)
            return
        log.info("partitions %s of %s's transaction are deleted: they need no marker", sorted(deleted), tid)
        for tp in deleted:
            current.metadata.remove_partition(tp)
        self.maybe_write_txn_completion(tid)

    # -- completion -------------------------------------------------------------------------------

    def maybe_write_txn_completion(self, transactional_id: str) -> None:
        pending = self.transactions_with_pending_markers.get(transactional_id)
        if pending is not None and not pending.metadata.topic_partitions:
            del self.transactions_with_pending_markers[transactional_id]
            self._write_txn_completion(pending)

    def _write_txn_completion(self, pending: PendingCompleteTxn) -> None:
        tid = pending.transactional_id
        error, current = self.manager.get_transaction_state(tid)
        if error != ErrorCode.NONE:
            # Not the coordinator any more, or loading again: the load completes the transaction.
            log.info("not completing %s: %s", tid, ErrorCode(error).name)
        elif current is None:
            log.error("%s is coordinated here but has no metadata; not completing it", tid)
        elif current.coordinator_epoch != pending.coordinator_epoch:
            log.info("%s's coordinator epoch changed; not completing it", tid)
        else:
            self._try_append_to_log(pending)

    def _try_append_to_log(self, pending: PendingCompleteTxn) -> None:
        written = self.manager.append_transaction_to_log(
            pending.transactional_id,
            pending.coordinator_epoch,
            pending.new_metadata,
            retry_on_error=lambda e: e == ErrorCode.COORDINATOR_NOT_AVAILABLE,
        )

        def done(future: asyncio.Future[int]) -> None:
            error = future.result() if not future.cancelled() else ErrorCode.COORDINATOR_NOT_AVAILABLE
            if error == ErrorCode.NONE:
                log.debug("completed %s's transaction", pending.transactional_id)
            elif error == ErrorCode.COORDINATOR_NOT_AVAILABLE:
                log.info("writing %s's completion failed for now; retrying", pending.transactional_id)
                self._log_append_retries.append(pending)
                self._wakeup.set()
            elif error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
                log.info("not the coordinator of %s any more; a load completes it", pending.transactional_id)
            else:
                log.error(
                    "unexpected error %s writing %s's completion",
                    ErrorCode(error).name,
                    pending.transactional_id,
                )

        written.add_done_callback(done)

    # -- removal ----------------------------------------------------------------------------------

    def remove_markers_for_txn(self, pending: PendingCompleteTxn) -> None:
        if self.transactions_with_pending_markers.get(pending.transactional_id) is pending:
            del self.transactions_with_pending_markers[pending.transactional_id]

    def remove_markers_for_txn_topic_partition(self, txn_topic_partition: int) -> None:
        """This broker stopped (or restarts) coordinating the partition: forget its markers."""

        def ours(pending: PendingCompleteTxn) -> bool:
            return self.manager.partition_for(pending.transactional_id) == txn_topic_partition

        for node, queue in list(self._queues.items()):
            kept = [e for e in queue if not ours(e.pending)]
            for e in queue:
                if ours(e.pending):
                    self.remove_markers_for_txn(e.pending)
            self._queues[node] = kept
        for _, e in self._retries:
            if ours(e.pending):
                self.remove_markers_for_txn(e.pending)
        self._retries = [(due, e) for due, e in self._retries if not ours(e.pending)]
        self._log_append_retries = [p for p in self._log_append_retries if not ours(p)]
        for tid, pending in list(self.transactions_with_pending_markers.items()):
            if ours(pending):
                del self.transactions_with_pending_markers[tid]

    # -- sending ----------------------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            timeout = None
            if self._retries:
                timeout = max(0.0, min(due for due, _ in self._retries) - loop.time())
            if not self._wakeup.is_set():
                try:
                    await asyncio.wait_for(self._wakeup.wait(), timeout)
                except TimeoutError:
                    pass
            self._wakeup.clear()
            try:
                self._generate_requests()
            except Exception:
                log.exception("sending transaction markers failed")

    def _generate_requests(self) -> None:
        appends, self._log_append_retries = self._log_append_retries, []
        for pending in appends:
            self._try_append_to_log(pending)
        now = asyncio.get_running_loop().time()
        due = [e for when, e in self._retries if when <= now]
        self._retries = [(when, e) for when, e in self._retries if when > now]
        for entry in due:
            self._requeue(entry, set(entry.marker.partitions))
        for node, queue in list(self._queues.items()):
            if not queue or node in self._in_flight:
                continue
            del self._queues[node]
            task = asyncio.get_running_loop().create_task(
                self._send(node, queue), name=f"txn-markers-to-{node}"
            )
            self._in_flight[node] = task

    async def _send(self, node: int, entries: list[_MarkerEntry]) -> None:
        try:
            try:
                errors = await asyncio.wait_for(
                    self.transport.write_markers(node, [e.marker for e in entries]),
                    self.request_timeout_ms / 1000,
                )
            except (ConnectionError, OSError, TimeoutError) as e:
                log.info("WriteTxnMarkers to node %d failed (%s); retrying", node, e)
                self._on_disconnected(entries)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("WriteTxnMarkers to node %d failed; retrying", node)
                self._on_disconnected(entries)
            else:
                self._on_response(node, entries, errors)
        finally:
            if self._in_flight.get(node) is asyncio.current_task():
                del self._in_flight[node]
            self._wakeup.set()

    def _current(self, entry: _MarkerEntry) -> TransactionMetadata | None:
        """The transaction's metadata if this broker still coordinates it at the marker's epoch;
        otherwise the markers are dropped and None is returned."""
        pending = entry.pending
        error, current = self.manager.get_transaction_state(pending.transactional_id)
        if (
            error != ErrorCode.NONE
            or current is None
            or current.coordinator_epoch != entry.marker.coordinator_epoch
        ):
            log.info(
                "not the coordinator of %s at epoch %d any more; dropping its markers",
                pending.transactional_id,
                entry.marker.coordinator_epoch,
            )
            self.remove_markers_for_txn(pending)
            return None
        if current.metadata is not pending.metadata or current.metadata.state not in _PREPARED:
            log.info(
                "%s's transaction is no longer the one the markers were for; dropping them",
                pending.transactional_id,
            )
            self.remove_markers_for_txn(pending)
            return None
        return current.metadata

    def _on_disconnected(self, entries: list[_MarkerEntry]) -> None:
        for entry in entries:
            if self._current(entry) is not None:
                self._retry(entry, set(entry.marker.partitions))

    def _on_response(
        self, node: int, entries: list[_MarkerEntry], errors: dict[tuple[int, str, int], int]
    ) -> None:
        for entry in entries:
            metadata = self._current(entry)
            if metadata is None:
                continue
            marker = entry.marker
            tid = entry.pending.transactional_id
            retry: set[TopicPartition] = set()
            abort_sending = False
            for tp in marker.partitions:
                error = errors.get((marker.producer_id, tp[0], tp[1]))
                if error is None:
                    log.warning("node %d's WriteTxnMarkers answer misses %s for %s; retrying", node, tp, tid)
                    retry.add(tp)
                elif error == ErrorCode.NONE:
                    metadata.remove_partition(tp)
                elif error in _RETRIABLE:
                    log.info("marker of %s for %s failed with %s; retrying", tid, tp, ErrorCode(error).name)
                    retry.add(tp)
                elif error in _FENCED:
                    log.info(
                        "marker of %s for %s failed with %s; no more markers for it",
                        tid,
                        tp,
                        ErrorCode(error).name,
                    )
                    self.remove_markers_for_txn(entry.pending)
                    abort_sending = True
                    break
                elif error in _GIVE_UP_PARTITION:
                    log.info(
                        "marker of %s for %s failed with %s; giving the partition up",
                        tid,
                        tp,
                        ErrorCode(error).name,
                    )
                    metadata.remove_partition(tp)
                else:
                    log.error(
                        "unexpected error %s writing %s's marker for %s; retrying", _name(error), tid, tp
                    )
                    retry.add(tp)
            if abort_sending:
                continue
            if retry:
                self._retry(entry, retry)
            else:
                self.maybe_write_txn_completion(tid)

    def _retry(self, entry: _MarkerEntry, partitions: set[TopicPartition]) -> None:
        again = _MarkerEntry(entry.pending, entry.marker)
        if partitions != set(entry.marker.partitions):
            m = entry.marker
            again = _MarkerEntry(
                entry.pending,
                TxnMarker(
                    m.producer_id, m.producer_epoch, m.coordinator_epoch, m.commit, tuple(sorted(partitions))
                ),
            )
        self._retries.append((asyncio.get_running_loop().time() + self.retry_backoff_ms / 1000, again))
        self._wakeup.set()

    def _requeue(self, entry: _MarkerEntry, partitions: set[TopicPartition]) -> None:
        """A retry is due: to the partitions' current leaders, if this broker still coordinates it."""
        if self._current(entry) is None:
            return
        m = entry.marker
        self.add_txn_markers_to_broker_queue(
            m.producer_id, m.producer_epoch, m.commit, entry.pending, partitions
        )


def _name(error: int) -> str:
    try:
        return ErrorCode(error).name
    except ValueError:
        return str(error)
