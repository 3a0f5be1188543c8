"""The transaction coordinator's protocol flows over real logs standing in for __transaction_state,
fake producer ids and a fake marker transport: InitProducerId (epoch bumps, fencing an ongoing
transaction, KIP-360, producer id rotation, timeouts), AddPartitions, verification, EndTxn (commit,
abort, retries, the illegal ones), markers retried through leader changes, deleted topics and
unreachable leaders, coordinator failover completing Prepare*, timeouts, id expiry, load/unload."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from coordinator.transaction_coordinator import TransactionConfig
from coordinator.transaction_metadata import TransactionState
from coordinator.transaction_records import decode_key, decode_value
from protocol import record_batch
from protocol.errors import ErrorCode, KafkaError
from tests.coordinator.conftest import until
from tests.coordinator.txn_fakes import PARTITIONS, TxnEnv, ids_in_partition, start_env, stop_env

E = ErrorCode
A = ("a", 0)
B = ("b", 1)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[TxnEnv]:
    e = await start_env(tmp_path)
    try:
        yield e
    finally:
        await stop_env(e)


def records(env: TxnEnv, partition: int) -> list[record_batch.Record]:
    """Every record of a __transaction_state partition, across its segments."""
    log = env.topic.logs[partition]
    out: list[record_batch.Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = bytes(log.read(offset, 1 << 30).records)
        for pos, header in record_batch.iter_headers(data):
            out.extend(record_batch.decode_records(data, pos))
            offset = header.last_offset + 1
    return out


def log_states(env: TxnEnv, tid: str) -> list[tuple[str, int, int]]:
    """(state, producer id, epoch) of every record of ``tid`` in its __transaction_state partition."""
    out = []
    for r in records(env, env.coordinator.partition_for(tid)):
        if r.key is not None and decode_key(r.key) == tid and r.value is not None:
            v = decode_value(r.value)
            out.append((TransactionState(v.transaction_status).state_name, v.producer_id, v.producer_epoch))
    return out


# -- InitProducerId ---------------------------------------------------------------------------------


async def test_init_gives_a_producer_id_and_bumps_the_epoch_each_time(env: TxnEnv) -> None:
    assert await env.init("t1") == (E.NONE, 1000, 0)
    assert await env.init("t1") == (E.NONE, 1000, 1)
    assert await env.init("t2") == (E.NONE, 1001, 0)
    assert log_states(env, "t1") == [("Empty", 1000, 0), ("Empty", 1000, 1)]
    d = env.coordinator.handle_describe("t1")
    assert (d.error, d.state, d.producer_id, d.producer_epoch, d.transaction_timeout_ms) == (
        E.NONE,
        "Empty",
        1000,
        1,
        60000,
    )


async def test_init_refuses_bad_timeouts_and_requests(env: TxnEnv) -> None:
    assert (await env.init("t", timeout_ms=0))[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert (await env.init("t", timeout_ms=120001))[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert (await env.init("t", timeout_ms=120000))[0] == E.NONE
    assert (await env.init(""))[0] == E.INVALID_REQUEST
    assert (await env.init("t", pid=5))[0] == E.INVALID_REQUEST  # a producer id without an epoch


async def test_idempotent_producer_gets_a_fresh_id(env: TxnEnv) -> None:
    result = await env.coordinator.handle_init_producer_id(None, 0)
    assert result == (E.NONE, 1000, 0)


async def test_producer_id_allocation_failure_is_the_answer(env: TxnEnv) -> None:
    env.producer_ids.fail = KafkaError(E.COORDINATOR_LOAD_IN_PROGRESS)
    assert await env.init("t") == (E.COORDINATOR_LOAD_IN_PROGRESS, -1, -1)
    env.producer_ids.fail = RuntimeError("boom")
    assert await env.init("t") == (E.UNKNOWN_SERVER_ERROR, -1, -1)


async def test_init_fences_an_ongoing_transaction_by_aborting_it(env: TxnEnv) -> None:
    pid, epoch = await env.begin("t", A, B)
    # A second producer with the same id: the ongoing transaction is aborted first.
    assert await env.init("t") == (E.CONCURRENT_TRANSACTIONS, -1, -1)
    await env.settled("t", "CompleteAbort")
    markers = env.transport.marked(*A)
    assert [(m.producer_id, m.producer_epoch, m.commit) for m in markers] == [(pid, epoch + 1, False)]
    # The retry bumps once more; the old producer is fenced everywhere.
    assert await env.init("t") == (E.NONE, pid, epoch + 2)
    c = env.coordinator
    assert set((await c.handle_add_partitions("t", pid, epoch, [A])).values()) == {E.PRODUCER_FENCED}
    assert await c.handle_end_txn("t", pid, epoch, True) == E.PRODUCER_FENCED
    assert log_states(env, "t")[-3:] == [
        ("PrepareAbort", pid, 1),
        ("CompleteAbort", pid, 1),
        ("Empty", pid, 2),
    ]


async def test_init_while_a_transaction_completes_is_concurrent(env: TxnEnv) -> None:
    pid, epoch = await env.begin("t", A)
    env.transport.hold = asyncio.Event()
    assert await env.coordinator.handle_end_txn("t", pid, epoch, True) == E.NONE
    assert env.state("t") == "PrepareCommit"
    assert (await env.init("t"))[0] == E.CONCURRENT_TRANSACTIONS
    env.transport.hold.set()
    await env.settled("t", "CompleteCommit")
    assert (await env.init("t"))[0] == E.NONE


async def test_kip_360_recovery_retry_and_fencing(env: TxnEnv) -> None:
    _, pid, _ = await env.init("t")
    assert await env.init("t") == (E.NONE, pid, 1)
    # The producer recovers with its current epoch: bumped.
    assert await env.init("t", pid=pid, epoch=1) == (E.NONE, pid, 2)
    # It did not get the answer and retries with the epoch it had: the same answer.
    assert await env.init("t", pid=pid, epoch=1) == (E.NONE, pid, 2)
    # A new producer comes along (no expected epoch): the last epoch is forgotten.
    assert await env.init("t") == (E.NONE, pid, 3)
    assert (await env.init("t", pid=pid, epoch=2))[0] == E.PRODUCER_FENCED
    # Another producer id altogether: fenced.
    assert (await env.init("t", pid=pid + 50, epoch=3))[0] == E.PRODUCER_FENCED


async def test_kip_360_on_an_unknown_id_gets_a_new_producer(env: TxnEnv) -> None:
    assert await env.init("fresh", pid=4242, epoch=7) == (E.NONE, 1000, 0)


async def test_epoch_exhaustion_rotates_the_producer_id(env: TxnEnv) -> None:
    _, pid, _ = await env.init("t")
    _, current = env.coordinator.manager.get_transaction_state("t")
    assert current is not None
    current.metadata.producer_epoch = 32766  # Short.MaxValue - 1: no more bumps for this id
    assert await env.init("t") == (E.NONE, pid + 1, 0)
    d = env.coordinator.handle_describe("t")
    assert (d.producer_id, d.producer_epoch) == (pid + 1, 0)
    assert current.metadata.last_producer_id == pid


async def test_kip_360_rotation_and_its_retry(env: TxnEnv) -> None:
    _, pid, _ = await env.init("t")
    _, current = env.coordinator.manager.get_transaction_state("t")
    assert current is not None
    current.metadata.producer_epoch = 32766
    # The producer recovers with its exhausted epoch: a new producer id.
    assert await env.init("t", pid=pid, epoch=32766) == (E.NONE, pid + 1, 0)
    # It never got the answer and retries: the previous producer id with an exhausted epoch is
    # recognised, and it gets the same answer.
    assert await env.init("t", pid=pid, epoch=32766) == (E.NONE, pid + 1, 0)
    # Any other epoch of the previous producer id is fenced.
    assert (await env.init("t", pid=pid, epoch=32000))[0] == E.PRODUCER_FENCED


async def test_fencing_that_exhausts_the_epoch_then_rotates(env: TxnEnv) -> None:
    pid, _ = await env.begin("t", A)
    _, current = env.coordinator.manager.get_transaction_state("t")
    assert current is not None
    current.metadata.producer_epoch = 32765
    assert (await env.init("t"))[0] == E.CONCURRENT_TRANSACTIONS  # fenced with 32766
    await env.settled("t", "CompleteAbort")
    assert await env.init("t") == (E.NONE, pid + 1, 0)


# -- AddPartitions and verification -----------------------------------------------------------------


async def test_add_partitions_starts_and_extends_a_transaction(env: TxnEnv) -> None:
    pid, epoch = await env.begin("t", A)
    c = env.coordinator
    appends = env.topic.appends
    assert await c.handle_add_partitions("t", pid, epoch, [A]) == {A: E.NONE}
    assert env.topic.appends == appends  # already in the transaction: nothing written
    assert await c.handle_add_partitions("t", pid, epoch, [A, B]) == {A: E.NONE, B: E.NONE}
    d = c.handle_describe("t")
    assert (d.state, d.partitions, d.transaction_start_time_ms) == ("Ongoing", [A, B], env.clock.now)
    assert d.topics == {"a": [0], "b": [1]}


async def test_add_partitions_errors(env: TxnEnv) -> None:
    c = env.coordinator
    assert await c.handle_add_partitions("unknown", 1, 0, [A]) == {A: E.INVALID_PRODUCER_ID_MAPPING}
    assert await c.handle_add_partitions("", 1, 0, [A]) == {A: E.INVALID_REQUEST}
    _, pid, epoch = await env.init("t")
    assert await c.handle_add_partitions("t", pid + 1, epoch, [A]) == {A: E.INVALID_PRODUCER_ID_MAPPING}
    assert await c.handle_add_partitions("t", pid, epoch - 1, [A]) == {A: E.PRODUCER_FENCED}
    env.topic.hold = True  # the first add is not replicated yet: a second one is concurrent
    first = c.handle_add_partitions("t", pid, epoch, [A])
    assert await c.handle_add_partitions("t", pid, epoch, [B]) == {B: E.CONCURRENT_TRANSACTIONS}
    env.topic.release()
    assert await first == {A: E.NONE}


async def test_add_partitions_while_completing_is_concurrent(env: TxnEnv) -> None:
    pid, epoch = await env.begin("t", A)
    env.transport.hold = asyncio.Event()
    assert await env.coordinator.handle_end_txn("t", pid, epoch, False) == E.NONE
    assert await env.coordinator.handle_add_partitions("t", pid, epoch, [B]) == {B: E.CONCURRENT_TRANSACTIONS}
    env.transport.hold.set()
    await env.settled("t", "CompleteAbort")
    # The next transaction may start.
    assert await env.coordinator.handle_add_partitions("t", pid, epoch, [B]) == {B: E.NONE}


async def test_add_partitions_write_failures_are_translated_and_clear_the_pending_state(env: TxnEnv) -> None:
    _, pid, epoch = await env.init("t")
    c = env.coordinator
    for append_error, answer in [
        (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
        (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
        (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
        (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
    ]:
        env.topic.fail_with = append_error
        assert await c.handle_add_partitions("t", pid, epoch, [A]) == {A: answer}
        assert env.state("t") == "Empty"
    env.topic.fail_with = None
    assert await c.handle_add_partitions("t", pid, epoch, [A]) == {A: E.NONE}


async def test_verify_partitions(env: TxnEnv) -> None:
    c = env.coordinator
    assert c.handle_verify_partitions("unknown", 1, 0, [A]) == {A: E.INVALID_PRODUCER_ID_MAPPING}
    pid, epoch = await env.begin("t", A)
    assert c.handle_verify_partitions("t", pid, epoch, [A, B]) == {A: E.NONE, B: E.TRANSACTION_ABORTABLE}
    assert c.handle_verify_partitions("t", pid + 1, epoch, [A]) == {A: E.INVALID_PRODUCER_ID_MAPPING}
    assert c.handle_verify_partitions("t", pid, epoch + 1, [A]) == {A: E.PRODUCER_FENCED}
    assert c.handle_verify_partitions("", pid, epoch, [A]) == {A: E.INVALID_REQUEST}
    env.transport.hold = asyncio.Event()
    assert await c.handle_end_txn("t", pid, epoch, True) == E.NONE
    assert c.handle_verify_partitions("t", pid, epoch, [A]) == {A: E.CONCURRENT_TRANSACTIONS}
    env.transport.hold.set()
    await env.settled("t", "CompleteCommit")
    # A partition whose marker is written is no longer in the transaction.
    assert c.handle_verify_partitions("t", pid, epoch, [A]) == {A: E.TRANSACTION_ABORTABLE}


# -- EndTxn -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
async def test_end_txn_writes_prepare_then_markers_then_complete(env: TxnEnv, commit: bool) -> None:
    pid, epoch = await env.begin("t", A, B)
    env.transport.leaders[B] = 2
    assert await env.coordinator.handle_end_txn("t", pid, epoch, commit) == E.NONE
    kind = "Commit" if commit else "Abort"
    await env.settled("t", f"Complete{kind}")
    nodes = sorted((node, m.partitions) for node, markers in env.transport.sent for m in markers)
    assert nodes == [(1, (A,)), (2, (B,))]
    marker = env.transport.marked(*A)[0]
    assert (marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, marker.commit) == (
        pid,
        epoch,
        0,
        commit,
    )
    states = [s for s, _, _ in log_states(env, "t")]
    assert states == ["Empty", "Ongoing", f"Prepare{kind}", f"Complete{kind}"]
    assert env.coordinator.handle_describe("t").partitions == []
    assert env.coordinator.markers.num_txns_with_pending_markers == 0


async def test_end_txn_answers_once_prepare_is_replicated(env: TxnEnv) -> None:
    pid, epoch = await env.begin("t", A)
    env.topic.hold = True
    answer = env.coordinator.handle_end_txn("t", pid, epoch, True)
    await asyncio.sleep(0.05)
    assert not answer.done() and env.transport.sent == []
    env.topic.release()
    assert await answer == E.NONE


async def test_end_txn_retries_and_illegal_requests(env: TxnEnv) -> None:
    c = env.coordinator
    assert await c.handle_end_txn("unknown", 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    _, pid, epoch = await env.init("t")
    # Nothing was added: Kafka refuses to end an Empty transaction.
    assert await c.handle_end_txn("t", pid, epoch, True) == E.INVALID_TXN_STATE
    assert await c.handle_end_txn("t", pid, epoch, False) == E.INVALID_TXN_STATE
    assert set((await c.handle_add_partitions("t", pid, epoch, [A])).values()) == {E.NONE}
    assert await c.handle_end_txn("t", pid + 1, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert await c.handle_end_txn("t", pid, epoch + 1, True) == E.PRODUCER_FENCED
    assert await c.handle_end_txn("t", pid, epoch - 1, True) == E.PRODUCER_FENCED
    env.transport.hold = asyncio.Event()
    assert await c.handle_end_txn("t", pid, epoch, True) == E.NONE
    # While markers are written: the same request is concurrent, the other kind illegal.
    assert await c.handle_end_txn("t", pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
    # (CompleteCommit is pending: Kafka checks that first)
    assert await c.handle_end_txn("t", pid, epoch, False) == E.CONCURRENT_TRANSACTIONS
    env.transport.hold.set()
    await env.settled("t", "CompleteCommit")
    # Completed: a retried commit succeeds, an abort is illegal.
    assert await c.handle_end_txn("t", pid, epoch, True) == E.NONE
    assert await c.handle_end_txn("t", pid, epoch, False) == E.INVALID_TXN_STATE


async def test_end_txn_of_the_other_kind_in_prepare_without_pending_is_illegal(env: TxnEnv) -> None:
    pid, epoch = await env.begin("t", A)
    # A coordinator that loaded PrepareAbort and has not prepared its completion yet.
    _, current = env.coordinator.manager.get_transaction_state("t")
    assert current is not None
    current.metadata.state = TransactionState.PREPARE_ABORT
    assert await env.coordinator.handle_end_txn("t", pid, epoch, True) == E.INVALID_TXN_STATE
    assert await env.coordinator.handle_end_txn("t", pid, epoch, False) == E.CONCURRENT_TRANSACTIONS


async def test_end_txn_prepare_write_failure_sends_no_markers(env: TxnEnv) -> None:
    pid, epoch = await env.begin("t", A)
    env.topic.fail_with = E.NOT_ENOUGH_REPLICAS
    assert await env.coordinator.handle_end_txn("t", pid, epoch, True) == E.COORDINATOR_NOT_AVAILABLE
    assert env.state("t") == "Ongoing" and env.transport.sent == []
    env.topic.fail_with = None
    assert await env.coordinator.handle_end_txn("t", pid, epoch, True) == E.NONE
    await env.settled("t", "CompleteCommit")


# -- markers ----------------------------------------------------------------------------------------


async def test_markers_follow_a_leader_change(env: TxnEnv) -> None:
    pid, epoch = await env.begin("t", A)
    env.transport.errors[A] = [E.NOT_LEADER_OR_FOLLOWER]
    env.transport.leaders[A] = 1
    assert await env.coordinator.handle_end_txn("t", pid, epoch, True) == E.NONE
    await until(lambda: len(env.transport.sent) >= 1)
    env.transport.leaders[A] = 3  # the new leader
    await env.settled("t", "CompleteCommit")
    assert [node for node, _ in env.transport.sent] == [1, 3]


async def test_markers_wait_for_a_leader_and_a_reachable_node(env: TxnEnv) -> None:
    pid, epoch = await env.begin("t", A, B)
    env.transport.leaders[A] = None  # no live leader
    env.transport.leaders[B] = 2
    env.transport.unreachable.add(2)
    assert await env.coordinator.handle_end_txn("t", pid, epoch, False) == E.NONE
    await until(lambda: sum(node == 2 for node, _ in env.transport.sent) >= 3)
    assert env.state("t") == "PrepareAbort"
    assert env.coordinator.handle_describe("t").partitions == [A, B]
    env.transport.leaders[A] = 1
    env.transport.unreachable.clear()
    await env.settled("t", "CompleteAbort")


async def test_retriable_marker_errors_are_retried(env: TxnEnv) -> None:
    pid, epoch = await env.begin("t", A)
    env.transport.errors[A] = [E.NOT_ENOUGH_REPLICAS, E.REQUEST_TIMED_OUT, E.UNKNOWN_TOPIC_OR_PARTITION]
    assert await env.coordinator.handle_end_txn("t", pid, epoch, True) == E.NONE
    await env.settled("t", "CompleteCommit")
    assert len(env.transport.marked(*A)) == 4


async def test_partitions_of_deleted_topics_are_dropped(env: TxnEnv) -> None:
    pid, epoch = await env.begin("t", A, B)
    env.transport.deleted.add("b")
    assert await env.coordinator.handle_end_txn("t", pid, epoch, True) == E.NONE
    await env.settled("t", "CompleteCommit")
    assert env.transport.marked(*B) == []


async def test_unsupported_partitions_are_given_up(env: TxnEnv) -> None:
    pid, epoch = await env.begin("t", A)
    env.transport.errors[A] = [E.UNSUPPORTED_FOR_MESSAGE_FORMAT]
    assert await env.coordinator.handle_end_txn("t", pid, epoch, True) == E.NONE
    await env.settled("t", "CompleteCommit")


async def test_a_fenced_marker_stops_the_transactions_markers(env: TxnEnv) -> None:
    pid, epoch = await env.begin("t", A)
    env.transport.errors[A] = [E.INVALID_PRODUCER_EPOCH]
    assert await env.coordinator.handle_end_txn("t", pid, epoch, True) == E.NONE
    await until(lambda: env.coordinator.markers.num_txns_with_pending_markers == 0)
    await asyncio.sleep(0.05)
    assert env.state("t") == "PrepareCommit" and len(env.transport.marked(*A)) == 1


async def test_completion_write_is_retried_when_replicas_are_missing(env: TxnEnv) -> None:
    pid, epoch = await env.begin("t", A)
    env.transport.hold = asyncio.Event()
    assert await env.coordinator.handle_end_txn("t", pid, epoch, True) == E.NONE
    env.topic.fail_with = E.NOT_ENOUGH_REPLICAS
    env.transport.hold.set()
    await until(lambda: env.topic.appends >= 6)  # init, add, prepare, then failing completions
    assert env.state("t") == "PrepareCommit"
    env.topic.fail_with = None
    env.coordinator.markers._wakeup.set()
    await env.settled("t", "CompleteCommit")


# -- failover, load and unload ----------------------------------------------------------------------


async def test_a_new_coordinator_completes_prepared_transactions(env: TxnEnv) -> None:
    commit_id, abort_id = "c-1", "a-1"
    cpid, cepoch = await env.begin(commit_id, A)
    apid, aepoch = await env.begin(abort_id, B)
    env.transport.hold = asyncio.Event()  # the markers never get out before the coordinator dies
    assert await env.coordinator.handle_end_txn(commit_id, cpid, cepoch, True) == E.NONE
    assert await env.coordinator.handle_end_txn(abort_id, apid, aepoch, False) == E.NONE
    await env.coordinator.shutdown()
    env.transport.hold = None
    env.transport.sent.clear()
    other = await env.reopen(epoch=1)
    try:
        await until(lambda: other.handle_describe(commit_id).state == "CompleteCommit")
        await until(lambda: other.handle_describe(abort_id).state == "CompleteAbort")
        assert [(m.commit, m.coordinator_epoch) for m in env.transport.marked(*A)] == [(True, 1)]
        assert [(m.commit, m.coordinator_epoch) for m in env.transport.marked(*B)] == [(False, 1)]
        # The reloaded ids keep their producer ids and epochs.
        assert other.handle_describe(commit_id).producer_id == cpid
        assert (await other.handle_init_producer_id(commit_id, 60000)) == (E.NONE, cpid, cepoch + 1)
    finally:
        await other.shutdown()


async def test_requests_while_loading_and_after_resignation(env: TxnEnv) -> None:
    tid = ids_in_partition(2, 1)[0]
    _, pid, epoch = await env.init(tid)
    c = env.coordinator
    c.on_resignation(2, 1)
    assert (await env.init(tid))[0] == E.NOT_COORDINATOR
    assert await c.handle_end_txn(tid, pid, epoch, True) == E.NOT_COORDINATOR
    assert c.handle_describe(tid).error == E.NOT_COORDINATOR
    c.on_election(2, 2)
    assert (await env.init(tid))[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert c.handle_list([], [])[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    await until(lambda: 2 in c.manager.owned_partitions)
    assert await env.init(tid) == (E.NONE, pid, epoch + 1)


async def test_stale_resignation_and_election_are_ignored(env: TxnEnv) -> None:
    tid = ids_in_partition(1, 1)[0]
    await env.init(tid)
    c = env.coordinator
    c.on_election(1, 5)
    await until(lambda: c.manager.transaction_metadata_cache[1].coordinator_epoch == 5)
    c.on_resignation(1, 4)  # older than the epoch loaded
    assert 1 in c.manager.owned_partitions
    c.on_election(1, 3)
    assert 1 not in c.manager.loading_partitions
    c.on_resignation(1, None)  # StopReplica: always
    assert 1 not in c.manager.owned_partitions
    c.on_resignation(1, 7)  # a follower at epoch 7 now
    c.on_election(1, 6)  # an election older than that, arriving late
    assert 1 not in c.manager.loading_partitions and 1 not in c.manager.owned_partitions
    c.on_election(1, 8)
    await until(lambda: 1 in c.manager.owned_partitions)


async def test_a_write_completing_after_the_partition_moved_is_not_applied(env: TxnEnv) -> None:
    tid = ids_in_partition(3, 1)[0]
    _, pid, epoch = await env.init(tid)
    env.topic.hold = True
    added = env.coordinator.handle_add_partitions(tid, pid, epoch, [A])
    env.coordinator.on_resignation(3, 1)
    env.coordinator.on_election(3, 2)
    await until(lambda: 3 in env.coordinator.manager.owned_partitions)
    env.topic.release()
    assert await added == {A: E.NOT_COORDINATOR}


async def test_resignation_drops_pending_markers(env: TxnEnv) -> None:
    tid = ids_in_partition(0, 1)[0]
    pid, epoch = await env.begin(tid, A)
    env.transport.leaders[A] = None
    assert await env.coordinator.handle_end_txn(tid, pid, epoch, True) == E.NONE
    assert env.coordinator.markers.num_txns_with_pending_markers == 1
    env.coordinator.on_resignation(0, 1)
    assert env.coordinator.markers.num_txns_with_pending_markers == 0
    assert env.coordinator.markers.queued_markers() == 0


# -- timeouts and expiry ----------------------------------------------------------------------------


async def test_timed_out_transactions_are_aborted_with_an_epoch_bump(env: TxnEnv) -> None:
    pid, epoch = await env.begin("slow", A, timeout_ms=1000)
    await env.begin("fast", B, timeout_ms=60000)
    env.clock.now += 1001
    outcomes = env.coordinator.abort_timed_out_transactions()
    assert len(outcomes) == 1 and await outcomes[0] == E.NONE
    await env.settled("slow", "CompleteAbort")
    assert env.state("fast") == "Ongoing"
    assert [(m.producer_epoch, m.commit) for m in env.transport.marked(*A)] == [(epoch + 1, False)]
    # The producer is fenced: its commit is refused.
    assert await env.coordinator.handle_end_txn("slow", pid, epoch, True) == E.PRODUCER_FENCED


async def test_the_periodic_task_aborts_timed_out_transactions(tmp_path: Path) -> None:
    env = await start_env(
        tmp_path,
        TransactionConfig(num_partitions=PARTITIONS, abort_timed_out_transaction_cleanup_interval_ms=20),
    )
    try:
        await env.begin("t", A, timeout_ms=100)
        env.clock.now += 200
        await env.settled("t", "CompleteAbort")
    finally:
        await stop_env(env)


async def test_a_failed_fence_write_does_not_bump_twice(env: TxnEnv) -> None:
    _, epoch = await env.begin("t", A, timeout_ms=1000)
    env.clock.now += 1001
    env.topic.fail_with = E.NOT_ENOUGH_REPLICAS
    outcomes = env.coordinator.abort_timed_out_transactions()
    assert await outcomes[0] == E.COORDINATOR_NOT_AVAILABLE
    env.topic.fail_with = None
    outcomes = env.coordinator.abort_timed_out_transactions()
    assert await outcomes[0] == E.NONE
    await env.settled("t", "CompleteAbort")
    assert env.coordinator.handle_describe("t").producer_epoch == epoch + 1


async def test_expired_ids_are_tombstoned_and_removed(env: TxnEnv) -> None:
    await env.init("idle")
    await env.begin("busy", A)
    env.clock.now += env.config.transactional_id_expiration_ms + 1
    assert await env.coordinator.remove_expired_transactional_ids() == 1
    assert env.coordinator.handle_describe("idle").error == E.TRANSACTIONAL_ID_NOT_FOUND
    assert env.state("busy") == "Ongoing"  # an ongoing transaction does not expire
    tombstones = [r for r in records(env, env.coordinator.partition_for("idle")) if r.value is None]
    assert [decode_key(r.key) for r in tombstones if r.key is not None] == ["idle"]
    # A reload does not bring it back; the id starts over with a new producer id.
    other = await env.reopen(epoch=1)
    try:
        assert other.handle_describe("idle").error == E.TRANSACTIONAL_ID_NOT_FOUND
        assert other.handle_describe("busy").state == "Ongoing"
    finally:
        await other.shutdown()


async def test_expiry_that_fails_to_write_keeps_the_id(env: TxnEnv) -> None:
    await env.init("idle")
    env.clock.now += env.config.transactional_id_expiration_ms + 1
    env.topic.fail_with = E.NOT_ENOUGH_REPLICAS
    assert await env.coordinator.remove_expired_transactional_ids() == 0
    env.topic.fail_with = None
    assert env.state("idle") == "Empty"
    assert (await env.init("idle"))[0] == E.NONE


# -- Describe and List ------------------------------------------------------------------------------


async def test_describe_and_list(env: TxnEnv) -> None:
    c = env.coordinator
    assert c.handle_describe("nope").error == E.TRANSACTIONAL_ID_NOT_FOUND
    assert c.handle_describe("").error == E.INVALID_REQUEST
    await env.init("e")
    p1, _ = await env.begin("o", A)
    env.clock.now += 5000
    error, listed = c.handle_list([], [])
    assert error == E.NONE and sorted(listed) == [("e", 1000, "Empty"), ("o", p1, "Ongoing")]
    assert c.handle_list(["Ongoing"], [])[1] == [("o", p1, "Ongoing")]
    assert c.handle_list([], [1000])[1] == [("e", 1000, "Empty")]
    assert c.handle_list(["Bogus"], [])[1] == []
    assert c.unknown_state_filters(["Bogus", "Empty"]) == ["Bogus"]
    # Running longer than the duration (Kafka's filter; an Empty id has no start time and always passes).
    assert c.handle_list(["Ongoing"], [], duration_ms=4000)[1] == [("o", p1, "Ongoing")]
    assert c.handle_list(["Ongoing"], [], duration_ms=6000)[1] == []
    await c.shutdown()
    assert c.handle_list([], [])[0] == E.COORDINATOR_NOT_AVAILABLE
    assert c.handle_describe("o").error == E.COORDINATOR_NOT_AVAILABLE


async def test_a_repeated_election_keeps_the_markers_going(env: TxnEnv) -> None:
    tid = ids_in_partition(1, 1)[0]
    pid, epoch = await env.begin(tid, A)
    env.transport.leaders[A] = None
    assert await env.coordinator.handle_end_txn(tid, pid, epoch, True) == E.NONE
    env.coordinator.on_election(1, 0)  # the same LeaderAndIsr again
    env.coordinator.on_resignation(1, -1)  # and a stale resignation
    assert env.coordinator.markers.num_txns_with_pending_markers == 1
    env.transport.leaders[A] = 1
    await env.settled(tid, "CompleteCommit")


async def test_a_newer_election_reloads_and_completes(env: TxnEnv) -> None:
    tid = ids_in_partition(1, 1)[0]
    pid, epoch = await env.begin(tid, A)
    env.transport.leaders[A] = None
    assert await env.coordinator.handle_end_txn(tid, pid, epoch, True) == E.NONE
    env.coordinator.on_election(1, 3)  # the leader epoch moved on while this broker stays leader
    assert env.coordinator.markers.num_txns_with_pending_markers == 0
    await until(lambda: 1 not in env.coordinator.manager.loading_partitions)
    env.transport.leaders[A] = 1
    await env.settled(tid, "CompleteCommit")
    assert {m.coordinator_epoch for m in env.transport.marked(*A)} == {3}


async def test_many_producers_through_flaky_leaders(env: TxnEnv) -> None:
    """Producers run transactions side by side while leaders move and answer retriable errors: each
    transaction ends with exactly one delivered marker per partition, of its kind, and a new
    coordinator loads the same states."""
    rng = random.Random(17)
    partitions = [(t, p) for t in ("x", "y") for p in range(3)]
    retriable = [E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS, E.REQUEST_TIMED_OUT]
    c = env.coordinator
    outcomes: dict[tuple[int, int], tuple[bool, set[tuple[str, int]]]] = {}

    async def retry(call: Callable[[], Awaitable[int]]) -> int:
        while True:
            error = await call()
            if error != E.CONCURRENT_TRANSACTIONS:
                return error
            await asyncio.sleep(0.005)

    async def producer(tid: str) -> None:
        async def init() -> int:
            nonlocal pid, epoch
            result = await c.handle_init_producer_id(tid, 60000)
            pid, epoch = result.producer_id, result.producer_epoch
            return result.error

        pid = epoch = -1
        assert await retry(init) == E.NONE
        for _ in range(3):
            tps = set(rng.sample(partitions, rng.randint(1, 4)))

            async def add(tps: set[tuple[str, int]] = tps) -> int:
                errors = set((await c.handle_add_partitions(tid, pid, epoch, sorted(tps))).values())
                assert len(errors) == 1
                return errors.pop()

            assert await retry(add) == E.NONE
            commit = rng.random() < 0.5
            assert await c.handle_end_txn(tid, pid, epoch, commit) == E.NONE
            outcomes[(pid, len([k for k in outcomes if k[0] == pid]))] = (commit, tps)

    async def chaos() -> None:
        for _ in range(60):
            tp = rng.choice(partitions)
            if rng.random() < 0.3:
                env.transport.leaders[tp] = rng.choice([None, 1, 2, 3])
            else:
                env.transport.errors.setdefault(tp, []).append(rng.choice(retriable))
            await asyncio.sleep(0.003)
        for tp in partitions:
            env.transport.leaders[tp] = 1

    ids = [f"p-{i}" for i in range(12)]
    await asyncio.wait_for(asyncio.gather(chaos(), *(producer(tid) for tid in ids)), 30)
    for tid in ids:
        await until(lambda tid=tid: env.state(tid) in ("CompleteCommit", "CompleteAbort"))
    attempts = sum(len(m.partitions) for _, markers in env.transport.sent for m in markers)
    assert attempts > len(env.transport.delivered)  # some were refused and retried
    # One delivered marker per transaction and partition, of the transaction's kind.
    delivered: dict[int, list[tuple[bool, tuple[str, int]]]] = {}
    for pid, _, commit, tp in env.transport.delivered:
        delivered.setdefault(pid, []).append((commit, tp))
    for pid in {k[0] for k in outcomes}:
        expected = sorted(
            (commit, tp) for (p, _), (commit, tps) in outcomes.items() if p == pid for tp in tps
        )
        assert sorted(delivered[pid]) == expected
    before = {tid: c.handle_describe(tid) for tid in ids}
    other = await env.reopen(epoch=1)
    try:
        assert {tid: other.handle_describe(tid) for tid in ids} == before
    finally:
        await other.shutdown()
