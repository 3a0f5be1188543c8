"""TransactionCoordinator: Kafka 3.9's transaction coordinator, for the transactional ids whose
``__transaction_state`` partition this broker leads. What the broker calls, and the coordinator's life.

- **InitProducerId** gives a transactional id its producer id and bumps its epoch, which fences the
  previous producer of that id. An ongoing transaction of the previous producer is aborted first
  (PrepareEpochFence, then PrepareAbort with the bumped epoch, markers, CompleteAbort) and the caller
  gets CONCURRENT_TRANSACTIONS until it is done. KIP-360: a producer that names its producer id and
  epoch recovers with a bump if nobody else initialized since, is answered again if it retries a call
  that succeeded, and is PRODUCER_FENCED otherwise. When the epoch is exhausted (Short.MaxValue - 1)
  the id gets a new producer id with epoch 0. The timeout must lie in (0, transaction.max.timeout.ms].
- **AddPartitionsToTxn** (and AddOffsetsToTxn through it) moves Empty/CompleteX to Ongoing and adds
  partitions; while a transaction completes it answers CONCURRENT_TRANSACTIONS.
- **Verification** (KIP-890, AddPartitionsToTxn v4+ verify_only): whether partitions are in the
  producer's ongoing transaction, writing nothing.
- **EndTxn** writes PrepareCommit/PrepareAbort and answers once that is written; the markers then go
  to the partitions' leaders (``transaction_markers``) and CompleteCommit/CompleteAbort is written.
- **Timeouts**: every ``abort_timed_out_transaction_cleanup_interval_ms`` transactions open longer than
  their timeout are aborted with an epoch bump (the producer is fenced). Every
  ``remove_expired_transactional_id_cleanup_interval_ms`` ids idle for
  ``transactional_id_expiration_ms`` are removed.
- **Leadership**: ``on_election`` loads a partition and completes the PrepareCommit/PrepareAbort it
  finds; ``on_resignation`` drops it.
- **DescribeTransactions / ListTransactions** data.

Answers that wait for a write are ``asyncio`` futures (``server_common.futures``); nothing blocks the
loop. Errors are Kafka's and version-independent; the broker maps them per request version.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple, Protocol

from coordinator.transaction_markers import TransactionMarkerChannelManager, TxnMarker, TxnMarkerTransport
from coordinator.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from coordinator.transaction_state_manager import (
    CoordinatorEpochAndTxnMetadata,
    TransactionStateConfig,
    TransactionStateManager,
    TransactionTopic,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.topic import TRANSACTION_STATE_TOPIC
from server_common.futures import completed, forward, then

__all__ = [
    "InitProducerIdResult",
    "ProducerIdGenerator",
    "TransactionConfig",
    "TransactionCoordinator",
    "TransactionDescription",
    "TransactionListing",
    "TransactionTopic",
    "TxnMarker",
    "TxnMarkerTransport",
]

log = logging.getLogger(__name__)

_S = TransactionState


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class TransactionConfig(TransactionStateConfig):
    """Kafka's names and defaults: the state manager's (transaction.state.log.*, expiration, the
    maximum timeout; appends and marker writes bounded by request_timeout_ms) and the periodic tasks'."""

    abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    remove_expired_transactional_id_cleanup_interval_ms: int = 3600000


class InitProducerIdResult(NamedTuple):
    error: int
    producer_id: int
    producer_epoch: int


class ProducerIdGenerator(Protocol):
    async def generate_producer_id(self) -> int: ...


@dataclass
class TransactionDescription:
    """One transactional id as DescribeTransactions shows it (Kafka's state names)."""

    transactional_id: str
    error: int
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    partitions: list[tuple[str, int]] = field(default_factory=list)

    @property
    def topics(self) -> dict[str, list[int]]:
        by_topic: dict[str, list[int]] = {}
        for topic, p in self.partitions:
            by_topic.setdefault(topic, []).append(p)
        return by_topic


class TransactionListing(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str


def _error_result(error: int) -> InitProducerIdResult:
    return InitProducerIdResult(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)


def _error_of(exc: BaseException) -> int:
    """Kafka's Errors.forException for a failed producer id allocation."""
    if isinstance(exc, KafkaError):
        return int(exc.code)
    return ErrorCode.UNKNOWN_SERVER_ERROR


class _NeedProducerId:
    """prepare_init's answer when the epoch is exhausted and a new producer id is needed first."""


_NEED_PRODUCER_ID = _NeedProducerId()


class TransactionCoordinator:
    def __init__(
        self,
        broker_id: int,
        config: TransactionConfig,
        topic: TransactionTopic,
        producer_ids: ProducerIdGenerator,
        markers: TxnMarkerTransport,
        time_ms: Callable[[], int] = _now_ms,
        retry_backoff_ms: int = 100,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.time_ms = time_ms
        self.producer_ids = producer_ids
        self.manager = TransactionStateManager(broker_id, config, topic, time_ms)
        self.markers = TransactionMarkerChannelManager(
            self.manager,
            markers,
            retry_backoff_ms=retry_backoff_ms,
            request_timeout_ms=config.request_timeout_ms,
        )
        self.active = False
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle --------------------------------------------------------------------------------

    def startup(self) -> None:
        log.info("transaction coordinator %d starting", self.broker_id)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(
                self._periodically(
                    self.config.abort_timed_out_transaction_cleanup_interval_ms, self._abort_round
                ),
                name="transaction-abort",
            ),
            loop.create_task(
                self._periodically(
                    self.config.remove_expired_transactional_id_cleanup_interval_ms, self._expire_round
                ),
                name="transactional-id-expiration",
            ),
        ]
        self.markers.start()
        self.active = True

    async def shutdown(self) -> None:
        self.active = False
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        await self.markers.shutdown()
        self.manager.shutdown()
        log.info("transaction coordinator %d shut down", self.broker_id)

    async def _periodically(self, interval_ms: int, round_: Callable[[], asyncio.Future[int] | None]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                outcome = round_()
                if outcome is not None:
                    await outcome
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("periodic transaction task failed")

    def _abort_round(self) -> None:
        self.abort_timed_out_transactions()

    def _expire_round(self) -> asyncio.Future[int]:
        return self.manager.remove_expired_transactional_ids()

    def partition_for(self, transactional_id: str) -> int:
        return self.manager.partition_for(transactional_id)

    def on_election(self, partition: int, coordinator_epoch: int) -> None:
        """This broker now leads ``__transaction_state-<partition>``: load it, then complete the
        PrepareCommit/PrepareAbort transactions found there."""
        log.info(
            "elected as the transaction coordinator of partition %d at epoch %d", partition, coordinator_epoch
        )
        if not self.manager.is_new_election(partition, coordinator_epoch):
            return  # loaded or loading at this epoch already, or a stale election: nothing changes
        # Whatever an earlier term left behind goes first.
        self.markers.remove_markers_for_txn_topic_partition(partition)
        self.manager.load_transactions_for_txn_topic_partition(
            partition, coordinator_epoch, self.markers.add_txn_markers_to_send
        )

    def on_resignation(self, partition: int, coordinator_epoch: int | None) -> None:
        """This broker no longer leads ``__transaction_state-<partition>``: drop its ids and markers."""
        log.info(
            "resigned as the transaction coordinator of partition %d at epoch %s",
            partition,
            coordinator_epoch,
        )
        if not self.manager.is_current_resignation(partition, coordinator_epoch):
            log.info("ignoring a stale resignation of partition %d at epoch %s", partition, coordinator_epoch)
            return
        self.manager.remove_transactions_for_txn_topic_partition(partition, coordinator_epoch)
        self.markers.remove_markers_for_txn_topic_partition(partition)

    # -- InitProducerId ---------------------------------------------------------------------------

    def handle_init_producer_id(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        expected_producer_id: int = -1,
        expected_epoch: int = -1,
    ) -> asyncio.Future[InitProducerIdResult]:
        if transactional_id is None:
            # An idempotent producer: any broker hands it a fresh producer id.
            return self._with_new_producer_id(
                lambda pid: completed(InitProducerIdResult(ErrorCode.NONE, pid, 0))
            )
        if transactional_id == "":
            return completed(_error_result(ErrorCode.INVALID_REQUEST))
        if (expected_producer_id == NO_PRODUCER_ID) != (expected_epoch == NO_PRODUCER_EPOCH):
            return completed(_error_result(ErrorCode.INVALID_REQUEST))
        if not self.manager.validate_transaction_timeout_ms(transaction_timeout_ms):
            return completed(_error_result(ErrorCode.INVALID_TRANSACTION_TIMEOUT))
        expected = None if expected_producer_id == NO_PRODUCER_ID else (expected_producer_id, expected_epoch)
        error, current = self.manager.get_transaction_state(transactional_id)
        if error != ErrorCode.NONE:
            return completed(_error_result(error))
        if current is None:
            return self._with_new_producer_id(
                lambda pid: self._init_new(transactional_id, transaction_timeout_ms, expected, pid)
            )
        return self._init(transactional_id, transaction_timeout_ms, expected, current, None)

    def _with_new_producer_id(
        self, use: Callable[[int], asyncio.Future[InitProducerIdResult]]
    ) -> asyncio.Future[InitProducerIdResult]:
        """Allocates a producer id (a task: the allocator may have to ask ZooKeeper for a block),
        then continues with it; an allocation failure is the answer."""
        result: asyncio.Future[InitProducerIdResult] = asyncio.get_running_loop().create_future()
        allocation = asyncio.ensure_future(self.producer_ids.generate_producer_id())

        def allocated(done: asyncio.Future[int]) -> None:
            if done.cancelled():
                result.cancel()
                return
            exc = done.exception()
            if exc is not None:
                log.warning("producer id allocation failed: %s", exc)
                result.set_result(_error_result(_error_of(exc)))
                return
            try:
                forward(use(done.result()), result)
            except Exception as e:  # a bug: answer rather than leave the client hanging
                log.exception("InitProducerId failed")
                result.set_exception(e)

        allocation.add_done_callback(allocated)
        return result

    def _init_new(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None, producer_id: int
    ) -> asyncio.Future[InitProducerIdResult]:
        created = TransactionMetadata(
            transactional_id,
            producer_id,
            NO_PRODUCER_ID,
            NO_PRODUCER_EPOCH,
            NO_PRODUCER_EPOCH,
            timeout_ms,
            _S.EMPTY,
            set(),
            -1,
            self.time_ms(),
        )
        error, current = self.manager.put_transaction_state_if_not_exists(created)
        if error != ErrorCode.NONE or current is None:
            return completed(_error_result(error if error != ErrorCode.NONE else ErrorCode.NOT_COORDINATOR))
        # Another InitProducerId may have created it meanwhile: this one's producer id is then unused.
        return self._init(transactional_id, timeout_ms, expected, current, None)

    def _init(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        current: CoordinatorEpochAndTxnMetadata,
        new_producer_id: int | None,
    ) -> asyncio.Future[InitProducerIdResult]:
        prepared = self._prepare_init_producer_id_transit(
            timeout_ms, current.metadata, expected, new_producer_id
        )
        if isinstance(prepared, _NeedProducerId):

            def with_pid(pid: int) -> asyncio.Future[InitProducerIdResult]:
                # Look again: the id may have changed while the producer id was allocated.
                error, again = self.manager.get_transaction_state(transactional_id)
                if error != ErrorCode.NONE or again is None:
                    return completed(
                        _error_result(error if error != ErrorCode.NONE else ErrorCode.NOT_COORDINATOR)
                    )
                return self._init(transactional_id, timeout_ms, expected, again, pid)

            return self._with_new_producer_id(with_pid)
        if isinstance(prepared, int):
            return completed(_error_result(prepared))
        transit = prepared
        coordinator_epoch = current.coordinator_epoch
        if transit.txn_state is _S.PREPARE_EPOCH_FENCE:
            # Abort the previous producer's transaction first; the caller retries and then gets the
            # epoch bumped once more (or a new producer id if fencing exhausted the epochs).
            aborted = self._end_transaction(
                transactional_id, transit.producer_id, transit.producer_epoch, False, is_from_client=False
            )
            return then(
                aborted,
                lambda error: _error_result(
                    ErrorCode.CONCURRENT_TRANSACTIONS if error == ErrorCode.NONE else error
                ),
            )

        def written(error: int) -> InitProducerIdResult:
            if error != ErrorCode.NONE:
                log.info("returning %s to %s's InitProducerId", ErrorCode(error).name, transactional_id)
                return _error_result(error)
            log.info(
                "initialized transactional id %s with producer id %d and epoch %d on partition %s-%d",
                transactional_id,
                transit.producer_id,
                transit.producer_epoch,
                TRANSACTION_STATE_TOPIC,
                self.partition_for(transactional_id),
            )
            return InitProducerIdResult(ErrorCode.NONE, transit.producer_id, transit.producer_epoch)

        return then(
            self.manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit), written
        )

    def _prepare_init_producer_id_transit(
        self,
        timeout_ms: int,
        metadata: TransactionMetadata,
        expected: tuple[int, int] | None,
        new_producer_id: int | None,
    ) -> TxnTransitMetadata | int | _NeedProducerId:
        """Kafka's prepareInitProducerIdTransit: the transition, an error, or the need of a new
        producer id (the epoch is exhausted)."""
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected is not None and not self._valid_expected_producer_id(metadata, expected):
            return ErrorCode.PRODUCER_FENCED
        state = metadata.state
        if state in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if state in (_S.COMPLETE_ABORT, _S.COMPLETE_COMMIT, _S.EMPTY):
            if metadata.is_producer_epoch_exhausted and (
                expected is None or expected[1] == metadata.producer_epoch
            ):
                if new_producer_id is None:
                    return _NEED_PRODUCER_ID
                return metadata.prepare_producer_id_rotation(
                    new_producer_id, timeout_ms, self.time_ms(), expected is not None
                )
            error, transit = metadata.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], self.time_ms()
            )
            return transit if transit is not None else error
        if state is _S.ONGOING:
            return metadata.prepare_fence_producer_epoch()
        raise AssertionError(
            f"{metadata.transactional_id} is in state {state.state_name}, which it never should be"
        )

    @staticmethod
    def _valid_expected_producer_id(metadata: TransactionMetadata, expected: tuple[int, int]) -> bool:
        """KIP-360: fence the caller unless the id was just created (epoch -1), it names the current
        producer id (its epoch is checked by the bump), or it names the previous producer id with an
        exhausted epoch (a retry after a rotation whose answer it never got)."""
        producer_id, epoch = expected
        return (
            metadata.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == metadata.producer_id
            or (producer_id == metadata.last_producer_id and is_epoch_exhausted(epoch))
        )

    # -- AddPartitionsToTxn -----------------------------------------------------------------------

    def handle_add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]]
    ) -> asyncio.Future[dict[tuple[str, int], int]]:
        def each(error: int) -> dict[tuple[str, int], int]:
            return {tp: error for tp in partitions}

        if not transactional_id:
            return completed(each(ErrorCode.INVALID_REQUEST))
        error, current = self.manager.get_transaction_state(transactional_id)
        if error != ErrorCode.NONE:
            return completed(each(error))
        if current is None:
            return completed(each(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
        metadata = current.metadata
        wanted = set(partitions)
        if metadata.producer_id != producer_id:
            return completed(each(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
        if metadata.producer_epoch != producer_epoch:
            return completed(each(ErrorCode.PRODUCER_FENCED))
        if metadata.pending_transition_in_progress or metadata.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return completed(each(ErrorCode.CONCURRENT_TRANSACTIONS))
        if metadata.state is _S.ONGOING and wanted <= metadata.topic_partitions:
            return completed(each(ErrorCode.NONE))  # already there: nothing to write
        transit = metadata.prepare_add_partitions(wanted, self.time_ms())
        return then(
            self.manager.append_transaction_to_log(transactional_id, current.coordinator_epoch, transit), each
        )

    def handle_verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """KIP-890 verification (Kafka's handleVerifyPartitionsInTransaction): NONE for each partition
        in the producer's transaction, TRANSACTION_ABORTABLE for the others (the partition leader
        turns it into INVALID_TXN_STATE for clients that predate it, as Kafka's
        AddPartitionsToTxnManager does); an unknown id or producer INVALID_PRODUCER_ID_MAPPING, an
        old epoch PRODUCER_FENCED, a completing transaction CONCURRENT_TRANSACTIONS."""

        def each(error: int) -> dict[tuple[str, int], int]:
            return {tp: error for tp in partitions}

        if not transactional_id:
            return each(ErrorCode.INVALID_REQUEST)
        error, current = self.manager.get_transaction_state(transactional_id)
        if error != ErrorCode.NONE:
            return each(error)
        if current is None:
            return each(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        metadata = current.metadata
        if metadata.producer_id != producer_id:
            return each(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if metadata.producer_epoch != producer_epoch:
            return each(ErrorCode.PRODUCER_FENCED)
        if metadata.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return each(ErrorCode.CONCURRENT_TRANSACTIONS)
        # Partitions enter the set once their AddPartitions is written and leave it once the
        # markers are: membership is the answer, whatever is pending.
        return {
            tp: ErrorCode.NONE if tp in metadata.topic_partitions else ErrorCode.TRANSACTION_ABORTABLE
            for tp in partitions
        }

    # -- EndTxn -----------------------------------------------------------------------------------

    def handle_end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> asyncio.Future[int]:
        return self._end_transaction(
            transactional_id, producer_id, producer_epoch, commit, is_from_client=True
        )

    def _end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        is_from_client: bool,
    ) -> asyncio.Future[int]:
        if not transactional_id:
            return completed(int(ErrorCode.INVALID_REQUEST))
        error, current = self.manager.get_transaction_state(transactional_id)
        if error != ErrorCode.NONE:
            return completed(error)
        if current is None:
            return completed(int(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
        metadata = current.metadata
        coordinator_epoch = current.coordinator_epoch
        is_epoch_fence = False
        kind = "commit" if commit else "abort"
        if metadata.producer_id != producer_id:
            return completed(int(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
        # A client must use the current epoch; the coordinator's own aborts carry the bumped one.
        if (
            is_from_client and producer_epoch != metadata.producer_epoch
        ) or producer_epoch < metadata.producer_epoch:
            return completed(int(ErrorCode.PRODUCER_FENCED))
        if metadata.pending_transition_in_progress and metadata.pending_state is not _S.PREPARE_EPOCH_FENCE:
            return completed(int(ErrorCode.CONCURRENT_TRANSACTIONS))
        state = metadata.state
        if state is _S.ONGOING:
            next_state = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
            if next_state is _S.PREPARE_ABORT and metadata.pending_state is _S.PREPARE_EPOCH_FENCE:
                # The fence becomes the abort: clear it, and write the abort with the bumped epoch.
                is_epoch_fence = True
                metadata.pending_state = None
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            transit = metadata.prepare_abort_or_commit(next_state, self.time_ms())
        elif state is _S.COMPLETE_COMMIT:
            # A retry of a commit that completed is answered as it was; anything else is illegal.
            return completed(int(ErrorCode.NONE if commit else self._invalid(transactional_id, state, kind)))
        elif state is _S.COMPLETE_ABORT:
            return completed(
                int(ErrorCode.NONE if not commit else self._invalid(transactional_id, state, kind))
            )
        elif state is _S.PREPARE_COMMIT:
            return completed(
                int(
                    ErrorCode.CONCURRENT_TRANSACTIONS
                    if commit
                    else self._invalid(transactional_id, state, kind)
                )
            )
        elif state is _S.PREPARE_ABORT:
            return completed(
                int(
                    ErrorCode.CONCURRENT_TRANSACTIONS
                    if not commit
                    else self._invalid(transactional_id, state, kind)
                )
            )
        elif state is _S.EMPTY:
            return completed(self._invalid(transactional_id, state, kind))
        else:
            raise AssertionError(
                f"{transactional_id} is in state {state.state_name}, which it never should be"
            )

        def written(error: int) -> int:
            if error != ErrorCode.NONE:
                log.info(
                    "not sending %s's markers: writing its %s failed with %s",
                    transactional_id,
                    transit.txn_state.state_name,
                    ErrorCode(error).name,
                )
                if is_epoch_fence:
                    lookup, again = self.manager.get_transaction_state(transactional_id)
                    if (
                        lookup == ErrorCode.NONE
                        and again is not None
                        and again.coordinator_epoch == coordinator_epoch
                    ):
                        # The epoch was bumped in memory but not written: do not bump it again.
                        again.metadata.has_failed_epoch_fence = True
                return error
            return self._send_markers_after_prepare(
                transactional_id, producer_id, producer_epoch, commit, coordinator_epoch
            )

        return then(
            self.manager.append_transaction_to_log(transactional_id, coordinator_epoch, transit), written
        )

    def _send_markers_after_prepare(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
    ) -> int:
        kind = "commit" if commit else "abort"
        error, current = self.manager.get_transaction_state(transactional_id)
        if error != ErrorCode.NONE:
            return error
        if current is None:
            log.error(
                "%s is coordinated here but has no metadata after its %s was written", transactional_id, kind
            )
            return ErrorCode.NOT_COORDINATOR
        if current.coordinator_epoch != coordinator_epoch:
            log.debug("%s's coordinator epoch changed after its %s was written", transactional_id, kind)
            return ErrorCode.NOT_COORDINATOR
        metadata = current.metadata
        if metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        expected = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
        if metadata.state is not expected:
            return self._invalid(transactional_id, metadata.state, kind)
        complete = metadata.prepare_complete(self.time_ms())
        # The client is answered now; the markers and the completion follow.
        self.markers.add_txn_markers_to_send(coordinator_epoch, commit, metadata, complete)
        return ErrorCode.NONE

    @staticmethod
    def _invalid(transactional_id: str, state: TransactionState, kind: str) -> int:
        log.debug("%s is in state %s and cannot %s", transactional_id, state.state_name, kind)
        return ErrorCode.INVALID_TXN_STATE

    # -- timeouts ---------------------------------------------------------------------------------

    def abort_timed_out_transactions(self) -> list[asyncio.Future[int]]:
        """Aborts, with an epoch bump that fences the producer, every ongoing transaction open longer
        than its timeout (Kafka's abortTimedOutTransactions). Returns the aborts' outcomes."""
        outcomes = []
        for timed_out in self.manager.timed_out_transactions():
            error, current = self.manager.get_transaction_state(timed_out.transactional_id)
            if error != ErrorCode.NONE or current is None:
                continue
            metadata = current.metadata
            if metadata.producer_id != timed_out.producer_id:
                log.error(
                    "%s's producer id changed; not aborting its timed-out transaction",
                    timed_out.transactional_id,
                )
                continue
            if metadata.pending_transition_in_progress:
                continue
            log.info(
                "aborting %s's transaction (producer id %d, epoch %d): it timed out after %d ms",
                timed_out.transactional_id,
                timed_out.producer_id,
                timed_out.producer_epoch,
                metadata.txn_timeout_ms,
            )
            fence = metadata.prepare_fence_producer_epoch()
            outcome = self._end_transaction(
                metadata.transactional_id,
                fence.producer_id,
                fence.producer_epoch,
                False,
                is_from_client=False,
            )
            outcome.add_done_callback(partial(_log_abort, timed_out.transactional_id))
            outcomes.append(outcome)
        return outcomes

    def remove_expired_transactional_ids(self) -> asyncio.Future[int]:
        return self.manager.remove_expired_transactional_ids()

    # -- DescribeTransactions / ListTransactions --------------------------------------------------

    def handle_describe(self, transactional_id: str) -> TransactionDescription:
        if not self.active:
            return TransactionDescription(transactional_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not transactional_id:
            return TransactionDescription(transactional_id, ErrorCode.INVALID_REQUEST)
        error, current = self.manager.get_transaction_state(transactional_id)
        if error != ErrorCode.NONE:
            return TransactionDescription(transactional_id, error)
        if current is None or current.metadata.state is _S.DEAD:
            return TransactionDescription(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        m = current.metadata
        return TransactionDescription(
            transactional_id,
            ErrorCode.NONE,
            m.state.state_name,
            m.producer_id,
            m.producer_epoch,
            m.txn_timeout_ms,
            m.txn_start_timestamp,
            sorted(m.topic_partitions),
        )

    def handle_list(
        self, states: list[str], producer_ids: list[int], duration_ms: int = -1
    ) -> tuple[int, list[TransactionListing]]:
        """(error, [(transactional id, producer id, state)]) filtered as Kafka's ListTransactions.
        State filters that name no state are ``unknown_state_filters(states)``."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        error, found, _ = self.manager.list_transaction_states(set(producer_ids), set(states), duration_ms)
        return error, [
            TransactionListing(m.transactional_id, m.producer_id, m.state.state_name) for m in found
        ]

    @staticmethod
    def unknown_state_filters(states: list[str]) -> list[str]:
        """The state filters of a ListTransactions that name no state (its UnknownStateFilters)."""
        return [s for s in states if TransactionState.from_name(s) is None]


def _log_abort(transactional_id: str, done: asyncio.Future[int]) -> None:
    if done.cancelled() or done.exception() is not None:
        return
    error = done.result()
    if error == ErrorCode.NONE:
        log.info("rolled back %s's timed-out transaction", transactional_id)
    elif error in (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    ):
        log.debug(
            "rollback of %s's timed-out transaction cancelled: %s", transactional_id, ErrorCode(error).name
        )
    else:
        log.warning(
            "rollback of %s's timed-out transaction failed: %s", transactional_id, ErrorCode(error).name
        )
