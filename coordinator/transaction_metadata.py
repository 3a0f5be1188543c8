"""A transactional id's state, and the state machine of its transactions (Kafka 3.9's TransactionMetadata).

States and their legal previous states, as Kafka's:

| state | id | from |
|---|---|---|
| Empty | 0 | Empty, CompleteCommit, CompleteAbort (InitProducerId) |
| Ongoing | 1 | Ongoing, Empty, CompleteCommit, CompleteAbort (AddPartitionsToTxn / AddOffsetsToTxn) |
| PrepareCommit | 2 | Ongoing (EndTxn commit) |
| PrepareAbort | 3 | Ongoing, PrepareEpochFence (EndTxn abort, fencing, timeout) |
| CompleteCommit | 4 | PrepareCommit (every marker written) |
| CompleteAbort | 5 | PrepareAbort (every marker written) |
| Dead | 6 | Empty, CompleteCommit, CompleteAbort (expiration of the transactional id) |
| PrepareEpochFence | 7 | Ongoing (an InitProducerId or a timeout bumps the epoch of an ongoing transaction) |

A change is made in two steps, as Kafka does: a ``prepare_*`` method checks it, sets the pending
state (which blocks other changes: CONCURRENT_TRANSACTIONS) and returns the target as a
``TxnTransitMetadata``; once that is written to ``__transaction_state``, ``complete_transition_to``
applies it. A write that fails clears the pending state. Illegal changes raise
``IllegalTransactionState`` (Kafka's IllegalStateException): the coordinator checks its requests
first and answers INVALID_TXN_STATE, CONCURRENT_TRANSACTIONS and the like, so that reaching one is
a bug.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767

TopicPartition = tuple[str, int]


class IllegalTransactionState(RuntimeError):
    """A transition the state machine does not allow (a bug in the caller, as in Kafka)."""


class TransactionState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """Kafka's name, as DescribeTransactions and ListTransactions show it."""
        return _NAMES[self]

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return _VALID_PREVIOUS[self]

    @property
    def is_expiration_allowed(self) -> bool:
        return self in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        )

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        try:
            return cls(state_id)
        except ValueError:
            raise IllegalTransactionState(f"unknown transaction state id {state_id}") from None


_S = TransactionState
_NAMES = {
    _S.EMPTY: "Empty",
    _S.ONGOING: "Ongoing",
    _S.PREPARE_COMMIT: "PrepareCommit",
    _S.PREPARE_ABORT: "PrepareAbort",
    _S.COMPLETE_COMMIT: "CompleteCommit",
    _S.COMPLETE_ABORT: "CompleteAbort",
    _S.DEAD: "Dead",
    _S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}
_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Kafka keeps Short.MaxValue out of clients' hands so that it can always fence a producer."""
    return producer_epoch >= SHORT_MAX - 1


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The target of a prepared transition: what is written to the log, and applied once written."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


class TransactionMetadata:
    """One transactional id: its producer id and epoch, state, partitions, timeout and timestamps."""

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        last_producer_id: int,
        producer_epoch: int,
        last_producer_epoch: int,
        txn_timeout_ms: int,
        state: TransactionState,
        topic_partitions: set[TopicPartition] | None = None,
        txn_start_timestamp: int = -1,
        txn_last_update_timestamp: int = -1,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.last_producer_id = last_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.topic_partitions: set[TopicPartition] = set(topic_partitions or ())
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        # The state a prepared transition goes to, until it is written (or fails).
        self.pending_state: TransactionState | None = None
        # A fence whose write failed has bumped the epoch in memory already: do not bump it twice.
        self.has_failed_epoch_fence = False

    def __repr__(self) -> str:
        return (
            f"TransactionMetadata(transactional_id={self.transactional_id!r}, "
            f"producer_id={self.producer_id}, last_producer_id={self.last_producer_id}, "
            f"producer_epoch={self.producer_epoch}, "
            f"last_producer_epoch={self.last_producer_epoch}, txn_timeout_ms={self.txn_timeout_ms}, "
            f"state={self.state.state_name}, pending_state={self.pending_state}, "
            f"topic_partitions={sorted(self.topic_partitions)}, "
            f"txn_start_timestamp={self.txn_start_timestamp}, "
            f"txn_last_update_timestamp={self.txn_last_update_timestamp})"
        )

    # -- partitions -------------------------------------------------------------------------------

    def add_partitions(self, partitions: set[TopicPartition] | frozenset[TopicPartition]) -> None:
        self.topic_partitions |= partitions

    def remove_partition(self, partition: TopicPartition) -> None:
        """A partition's marker is written (or the partition is gone): only while markers are sent."""
        if self.state not in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            raise IllegalTransactionState(
                f"{self.transactional_id}: removing partition {partition} whose marker was sent in state "
                f"{self.state.state_name} (pending {self.pending_state})"
            )
        self.topic_partitions.discard(partition)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (
            TransactionState.ONGOING,
            TransactionState.PREPARE_ABORT,
            TransactionState.PREPARE_COMMIT,
        )

    # -- prepared transitions ---------------------------------------------------------------------

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current state as a transit, without a pending state (Kafka uses it in tests)."""
        return TxnTransitMetadata(
            self.producer_id,
            self.last_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            self.state,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        if self.producer_epoch == SHORT_MAX:
            raise IllegalTransactionState("cannot fence a producer whose epoch is Short.MaxValue")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare_transition_to(
            TransactionState.PREPARE_EPOCH_FENCE,
            self.producer_id,
            bumped,
            NO_PRODUCER_EPOCH,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def prepare_increment_producer_epoch(
        self, new_txn_timeout_ms: int, expected_producer_epoch: int | None, update_timestamp: int
    ) -> tuple[int, TxnTransitMetadata | None]:
        """InitProducerId's epoch bump: (NONE, transit), or (PRODUCER_FENCED, None) when a KIP-360
        producer's expected epoch is neither the current nor the last one.

        An exhausted epoch cannot be bumped (the caller rotates the producer id instead). Kafka
        raises here even for a KIP-360 retry that needs no bump, or a fenced producer; Samsa answers
        those as it would with any other epoch."""
        bumped = self.producer_epoch + 1
        if self.is_producer_epoch_exhausted and (
            expected_producer_epoch is None or expected_producer_epoch == self.producer_epoch
        ):
            raise IllegalTransactionState(
                f"cannot allocate more producer epochs for producer id {self.producer_id}"
            )
        if expected_producer_epoch is None:
            # A new producer (or one without KIP-360): bump; a new producer's -1 becomes 0.
            next_epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == self.producer_epoch:
            # The producer recovers after an error and nobody else initialized since: bump, and
            # remember the epoch it had so that a retry of this call is recognised.
            next_epoch, last_epoch = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            # A retry of a call that succeeded: the current epoch again, unbumped.
            next_epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            log.info(
                "expected producer epoch %d of %s is neither the current %d nor the last %d",
                expected_producer_epoch,
                self.transactional_id,
                self.producer_epoch,
                self.last_producer_epoch,
            )
            return ErrorCode.PRODUCER_FENCED, None
        return ErrorCode.NONE, self._prepare_transition_to(
            TransactionState.EMPTY,
            self.producer_id,
            next_epoch,
            last_epoch,
            new_txn_timeout_ms,
            frozenset(),
            -1,
            update_timestamp,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, new_txn_timeout_ms: int, update_timestamp: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        if self.has_pending_transaction:
            raise IllegalTransactionState("cannot rotate producer ids while a transaction is pending")
        return self._prepare_transition_to(
            TransactionState.EMPTY,
            new_producer_id,
            0,
            self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            new_txn_timeout_ms,
            frozenset(),
            -1,
            update_timestamp,
        )

    def prepare_add_partitions(
        self, added: set[TopicPartition] | frozenset[TopicPartition], update_timestamp: int
    ) -> TxnTransitMetadata:
        starts = self.state in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_ABORT,
            TransactionState.COMPLETE_COMMIT,
        )
        return self._prepare_transition_to(
            TransactionState.ONGOING,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions | set(added)),
            update_timestamp if starts else self.txn_start_timestamp,
            update_timestamp,
        )

    def prepare_abort_or_commit(
        self, new_state: TransactionState, update_timestamp: int
    ) -> TxnTransitMetadata:
        return self._prepare_transition_to(
            new_state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp,
            update_timestamp,
        )

    def prepare_complete(self, update_timestamp: int) -> TxnTransitMetadata:
        new_state = (
            TransactionState.COMPLETE_COMMIT
            if self.state is TransactionState.PREPARE_COMMIT
            else TransactionState.COMPLETE_ABORT
        )
        # The Prepare state is written: a fence that failed before is no longer pending.
        self.has_failed_epoch_fence = False
        return self._prepare_transition_to(
            new_state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_timestamp,
            update_timestamp,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare_transition_to(
            TransactionState.DEAD,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def _prepare_transition_to(
        self,
        new_state: TransactionState,
        new_producer_id: int,
        new_epoch: int,
        new_last_epoch: int,
        new_txn_timeout_ms: int,
        new_partitions: frozenset[TopicPartition],
        new_txn_start_timestamp: int,
        update_timestamp: int,
    ) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransactionState(
                f"{self.transactional_id}: preparing a transition to {new_state.state_name} while "
                f"{self.pending_state.state_name} is pending"
            )
        if new_producer_id < 0:
            raise IllegalTransactionState(f"illegal new producer id {new_producer_id}")
        # A new transactional id has epoch -1 until its first InitProducerId, and may die so.
        if new_state is not TransactionState.DEAD and new_epoch < 0:
            raise IllegalTransactionState(f"illegal new producer epoch {new_epoch}")
        if self.state not in new_state.valid_previous_states:
            raise IllegalTransactionState(
                f"{self.transactional_id}: {new_state.state_name} cannot follow {self.state.state_name}"
            )
        self.pending_state = new_state
        return TxnTransitMetadata(
            new_producer_id,
            self.producer_id,
            new_epoch,
            new_last_epoch,
            new_txn_timeout_ms,
            new_state,
            new_partitions,
            new_txn_start_timestamp,
            update_timestamp,
        )

    # -- completing a transition ------------------------------------------------------------------

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Applies a prepared transition once it is written to the log (Kafka's checks included)."""
        to_state = self.pending_state
        if to_state is None:
            raise IllegalTransactionState(
                f"{self.transactional_id}: completing a transition to {transit.txn_state.state_name} "
                "without a pending state"
            )
        if to_state is not transit.txn_state:
            self._transition_failure(transit)
        if to_state is TransactionState.EMPTY:  # InitProducerId
            if (
                (self.producer_epoch != transit.producer_epoch and not self._valid_epoch_bump(transit))
                or transit.topic_partitions
                or transit.txn_start_timestamp != -1
            ):
                self._transition_failure(transit)
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
        elif to_state is TransactionState.ONGOING:  # AddPartitions
            if (
                not self._valid_epoch(transit)
                or not self.topic_partitions <= transit.topic_partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
            ):
                self._transition_failure(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.add_partitions(transit.topic_partitions)
        elif to_state in (TransactionState.PREPARE_ABORT, TransactionState.PREPARE_COMMIT):  # EndTxn
            if (
                not self._valid_epoch(transit)
                or self.topic_partitions != transit.topic_partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or self.txn_start_timestamp != transit.txn_start_timestamp
            ):
                self._transition_failure(transit)
        elif to_state in (TransactionState.COMPLETE_ABORT, TransactionState.COMPLETE_COMMIT):  # markers
            if (
                not self._valid_epoch(transit)
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or transit.txn_start_timestamp == -1
            ):
                self._transition_failure(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions.clear()
        elif to_state is TransactionState.PREPARE_EPOCH_FENCE:
            # Never written: the fence turns into PrepareAbort before anything is appended.
            self._transition_failure(transit)
        else:  # Dead
            raise IllegalTransactionState(
                f"{self.transactional_id}: a Dead transactional id is removed from the cache, not completed"
            )
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.state = to_state

    def _valid_epoch(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id

    def _valid_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 or (
            transit.producer_epoch == 0 and transit.producer_id != self.producer_id
        )

    def _transition_failure(self, transit: TxnTransitMetadata) -> None:
        log.error("%r: the transition to %r failed; this should not happen", self, transit)
        raise IllegalTransactionState(
            f"{self.transactional_id}: transition to {transit} has unexpected metadata"
        )
