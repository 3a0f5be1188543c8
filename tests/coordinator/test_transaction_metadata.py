"""TransactionMetadata's state machine as Kafka 3.9's: the legal previous states of every state, each
prepare_* transition and its completion, epoch bumps (KIP-360 included), producer id rotation,
fencing, and the transitions Kafka refuses."""

from __future__ import annotations

import itertools

import pytest

from coordinator.transaction_metadata import (
    IllegalTransactionState,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from protocol.errors import ErrorCode

S = TransactionState
T0 = 1_000
TP1 = ("t", 0)
TP2 = ("t", 1)

LEGAL = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def meta(
    state: S = S.EMPTY, epoch: int = 3, partitions: set[tuple[str, int]] | None = None
) -> TransactionMetadata:
    start = -1 if state is S.EMPTY else T0
    return TransactionMetadata("tx", 100, -1, epoch, -1, 60000, state, partitions or set(), start, T0)


def test_names_ids_and_legal_previous_states_are_kafkas() -> None:
    assert [s.state_name for s in S] == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]
    assert [int(s) for s in S] == list(range(8))
    for state, previous in LEGAL.items():
        assert state.valid_previous_states == previous
        assert S.from_name(state.state_name) is state
    assert S.from_name("ongoing") is None
    assert {s for s in S if s.is_expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    with pytest.raises(IllegalTransactionState):
        S.from_id(8)


def _prepare(m: TransactionMetadata, target: S) -> TxnTransitMetadata:
    """The prepare_* method that leads to ``target``."""
    if target is S.EMPTY:
        return m.prepare_increment_producer_epoch(60000, None, T0 + 1)[1]  # type: ignore[return-value]
    if target is S.ONGOING:
        return m.prepare_add_partitions({TP1}, T0 + 1)
    if target in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return m.prepare_abort_or_commit(target, T0 + 1)
    if target in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        return m.prepare_complete(T0 + 1)
    if target is S.DEAD:
        return m.prepare_dead()
    return m.prepare_fence_producer_epoch()


@pytest.mark.parametrize(
    "current,target",
    [
        (c, t)
        for c, t in itertools.product(S, S)
        # prepare_complete picks its target from the current state: test it from Prepare* only
        if not (t in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and c in (S.PREPARE_COMMIT, S.PREPARE_ABORT))
    ],
)
def test_every_transition_is_legal_exactly_when_kafka_allows_it(current: S, target: S) -> None:
    m = meta(current, partitions=set() if current is S.EMPTY else {TP1})
    legal = current in LEGAL[target]
    if target in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        legal = False  # from anything but its Prepare state
    if legal:
        transit = _prepare(m, target)
        assert m.pending_state is target and transit.txn_state is target
    else:
        with pytest.raises(IllegalTransactionState):
            _prepare(m, target)
        assert m.pending_state is None


def test_a_pending_transition_blocks_another() -> None:
    m = meta()
    m.prepare_add_partitions({TP1}, T0 + 1)
    with pytest.raises(IllegalTransactionState):
        m.prepare_add_partitions({TP2}, T0 + 2)


def test_init_add_commit_complete_round() -> None:
    m = TransactionMetadata("tx", 100, -1, -1, -1, 60000, S.EMPTY, set(), -1, T0)
    error, transit = m.prepare_increment_producer_epoch(30000, None, T0 + 1)
    assert error == ErrorCode.NONE and transit is not None
    assert (transit.producer_epoch, transit.last_producer_epoch) == (0, -1)
    m.complete_transition_to(transit)
    assert (m.state, m.producer_epoch, m.txn_timeout_ms, m.pending_state) == (S.EMPTY, 0, 30000, None)

    m.complete_transition_to(m.prepare_add_partitions({TP1}, T0 + 2))
    assert m.state is S.ONGOING and m.topic_partitions == {TP1} and m.txn_start_timestamp == T0 + 2
    m.complete_transition_to(m.prepare_add_partitions({TP2}, T0 + 3))
    assert m.topic_partitions == {TP1, TP2} and m.txn_start_timestamp == T0 + 2  # started once

    m.complete_transition_to(m.prepare_abort_or_commit(S.PREPARE_COMMIT, T0 + 4))
    assert m.state is S.PREPARE_COMMIT and m.topic_partitions == {TP1, TP2}
    complete = m.prepare_complete(T0 + 5)
    assert complete.txn_state is S.COMPLETE_COMMIT and complete.topic_partitions == frozenset()
    m.remove_partition(TP1)
    m.remove_partition(TP2)
    m.complete_transition_to(complete)
    assert m.state is S.COMPLETE_COMMIT and not m.topic_partitions and m.txn_last_update_timestamp == T0 + 5
    # The next transaction starts afresh.
    m.complete_transition_to(m.prepare_add_partitions({TP2}, T0 + 6))
    assert m.txn_start_timestamp == T0 + 6


def test_remove_partition_only_while_markers_are_sent() -> None:
    with pytest.raises(IllegalTransactionState):
        meta(S.ONGOING, partitions={TP1}).remove_partition(TP1)
    m = meta(S.PREPARE_ABORT, partitions={TP1})
    m.remove_partition(TP1)
    assert not m.topic_partitions


def test_completion_without_or_with_another_pending_state_is_refused() -> None:
    m = meta(S.ONGOING, partitions={TP1})
    other = TransactionMetadata("tx", 100, -1, 3, -1, 60000, S.ONGOING, {TP1}, T0, T0)
    transit = other.prepare_abort_or_commit(S.PREPARE_COMMIT, T0)
    with pytest.raises(IllegalTransactionState):
        m.complete_transition_to(transit)  # nothing pending
    m.prepare_abort_or_commit(S.PREPARE_ABORT, T0)
    with pytest.raises(IllegalTransactionState):
        m.complete_transition_to(transit)  # PrepareAbort pending, PrepareCommit given


def test_completion_checks_epoch_and_partitions() -> None:
    m = meta(S.ONGOING, partitions={TP1})
    transit = m.prepare_add_partitions({TP2}, T0 + 1)
    m.producer_epoch += 1  # someone bumped the epoch meanwhile
    with pytest.raises(IllegalTransactionState):
        m.complete_transition_to(transit)


def test_fence_bumps_the_epoch_once_even_if_its_write_failed() -> None:
    m = meta(S.ONGOING, epoch=5, partitions={TP1})
    fence = m.prepare_fence_producer_epoch()
    assert (fence.txn_state, fence.producer_epoch) == (S.PREPARE_EPOCH_FENCE, 6)
    assert fence.last_producer_epoch == -1
    assert fence.topic_partitions == {TP1}
    m.pending_state = None
    m.has_failed_epoch_fence = True
    assert m.prepare_fence_producer_epoch().producer_epoch == 5
    m.pending_state = None
    m.producer_epoch = 32767
    m.has_failed_epoch_fence = False
    with pytest.raises(IllegalTransactionState):
        m.prepare_fence_producer_epoch()


def test_the_fence_itself_is_never_completed() -> None:
    m = meta(S.ONGOING, partitions={TP1})
    with pytest.raises(IllegalTransactionState):
        m.complete_transition_to(m.prepare_fence_producer_epoch())


def test_dead_is_never_completed() -> None:
    m = meta(S.COMPLETE_COMMIT)
    with pytest.raises(IllegalTransactionState):
        m.complete_transition_to(m.prepare_dead())


@pytest.mark.parametrize(
    "expected,outcome",
    [
        (None, (ErrorCode.NONE, 6, -1)),  # a new producer: bump
        (5, (ErrorCode.NONE, 6, 5)),  # KIP-360 recovery with the current epoch: bump, remember 5
        (4, (ErrorCode.NONE, 5, 4)),  # a retry of a recovery that succeeded: same epoch again
        (3, (ErrorCode.PRODUCER_FENCED, None, None)),  # neither: fenced
    ],
)
def test_epoch_bump_with_and_without_an_expected_epoch(
    expected: int | None, outcome: tuple[int, int | None, int | None]
) -> None:
    m = TransactionMetadata("tx", 100, -1, 5, 4, 60000, S.EMPTY, set(), -1, T0)
    error, transit = m.prepare_increment_producer_epoch(60000, expected, T0 + 1)
    got = (error, transit.producer_epoch, transit.last_producer_epoch) if transit else (error, None, None)
    assert got == outcome
    assert (m.pending_state is S.EMPTY) == (transit is not None)


def test_a_new_ids_first_recovery_bumps_from_no_epoch() -> None:
    m = TransactionMetadata("tx", 100, -1, -1, -1, 60000, S.EMPTY, set(), -1, T0)
    error, transit = m.prepare_increment_producer_epoch(60000, 17, T0)
    assert error == ErrorCode.NONE and transit is not None
    assert (transit.producer_epoch, transit.last_producer_epoch) == (0, -1)


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    assert not is_epoch_exhausted(32765) and is_epoch_exhausted(32766)
    m = meta(S.COMPLETE_ABORT, epoch=32766)
    with pytest.raises(IllegalTransactionState):
        m.prepare_increment_producer_epoch(60000, None, T0)
    with pytest.raises(IllegalTransactionState):
        m.prepare_increment_producer_epoch(60000, 32766, T0)
    # A KIP-360 caller with another epoch needs no bump: fenced (Kafka would raise).
    assert m.prepare_increment_producer_epoch(60000, 17, T0) == (ErrorCode.PRODUCER_FENCED, None)
    m.last_producer_epoch = 32765  # its retry after the bump to 32766 is answered unbumped
    error, retry = m.prepare_increment_producer_epoch(60000, 32765, T0)
    assert error == ErrorCode.NONE and retry is not None and retry.producer_epoch == 32766
    m.pending_state = None
    transit = m.prepare_producer_id_rotation(200, 60000, T0 + 1, record_last_epoch=True)
    assert (transit.producer_id, transit.last_producer_id, transit.producer_epoch) == (200, 100, 0)
    assert transit.last_producer_epoch == 32766
    m.complete_transition_to(transit)
    assert (m.producer_id, m.last_producer_id, m.producer_epoch, m.state) == (200, 100, 0, S.EMPTY)
    with pytest.raises(IllegalTransactionState):
        meta(S.ONGOING, partitions={TP1}).prepare_producer_id_rotation(300, 1, T0, False)
