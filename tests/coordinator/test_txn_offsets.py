"""Transactional offset commits (TxnOffsetCommit) in the group coordinator, over fake
``__consumer_offsets`` replicas (real logs): offsets pending per producer until the transaction's
marker, materialised on commit and dropped on abort; the transactional batch in the log; loading a
partition with committed, aborted and still open transactions; KIP-447's member checks (v3+); the
producer epoch fenced by the log; OffsetFetch's require_stable; and the broker handler's version
differences."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any

import pytest

import coordinator.group_metadata_manager as manager_module
from broker.group_apis import GroupApis
from coordinator.group_coordinator import GroupCoordinator
from coordinator.group_metadata import GroupState, OffsetAndMetadata
from coordinator.group_metadata_manager import GroupMetadataManager
from network.handler_pool import Parked
from protocol import record_batch
from protocol.errors import ErrorCode
from protocol.messages import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from tests.coordinator.conftest import Env, until

T0 = ("t", 0)
T1 = ("t", 1)
PID = 4000
EPOCH = 3


def offset(value: int, metadata: str = "") -> OffsetAndMetadata:
    return OffsetAndMetadata(value, -1, metadata, 1)


async def txn_commit(
    env: Env,
    group: str,
    offsets: dict[tuple[str, int], OffsetAndMetadata],
    *,
    producer_id: int = PID,
    epoch: int = EPOCH,
    member_id: str = "",
    instance: str | None = None,
    generation: int = -1,
    coordinator: GroupCoordinator | None = None,
) -> dict[tuple[str, int], int]:
    c = coordinator or env.coordinator
    return await c.handle_txn_commit_offsets(
        group, "txn-id", producer_id, epoch, member_id, instance, generation, offsets
    )


def fetched(env: Env, group: str, *tps: tuple[str, int], coordinator: GroupCoordinator | None = None) -> Any:
    c = coordinator or env.coordinator
    error, found = c.handle_fetch_offsets(group, list(tps))
    assert error == ErrorCode.NONE
    return {tp: None if o is None else o.offset for tp, o in found.items()}


def end_txn(
    env: Env,
    group: str,
    commit: bool,
    producer_id: int = PID,
    *,
    epoch: int = EPOCH,
    manager: GroupMetadataManager | None = None,
) -> None:
    """The marker is written to the group's partition, then the WriteTxnMarkers handler reports it."""
    m = manager or env.manager
    partition = m.partition_for(group)
    env.topic.write_marker(partition, producer_id, epoch, commit)
    m.handle_txn_completion(producer_id, [partition], commit)


async def test_txn_offsets_are_visible_only_after_the_commit_marker(env: Env) -> None:
    assert await txn_commit(env, "g", {T0: offset(7, "m")}) == {T0: ErrorCode.NONE}
    group = env.manager.get_group("g")
    assert group is not None and group.is_(GroupState.EMPTY)  # created for the commit
    assert fetched(env, "g", T0) == {T0: None}
    assert env.coordinator.unstable_offsets("g", [T0, T1]) == {T0}
    assert group.active_producers == {PID} and group.has_offsets
    end_txn(env, "g", commit=True)
    assert fetched(env, "g", T0) == {T0: 7}
    assert env.coordinator.handle_fetch_offsets("g", [T0])[1][T0] == offset(7, "m")
    assert env.coordinator.unstable_offsets("g", [T0]) == set()
    assert not group.pending_txn_offset_commits and not env.manager.open_groups_for_producer(PID)


async def test_txn_offsets_are_written_in_a_transactional_batch_of_the_producer(env: Env) -> None:
    await txn_commit(env, "g", {T0: offset(7), T1: offset(8)})
    log = env.topic.logs[env.manager.partition_for("g")]
    data = bytes(log.read(log.log_start_offset, 1 << 20).records)
    ((_, header),) = list(record_batch.iter_headers(data))
    assert header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (PID, EPOCH, -1)
    assert header.records_count == 2
    # The log tracks the open transaction: its last stable offset stays at the commit's records.
    assert log.last_stable_offset == header.base_offset


async def test_txn_offsets_are_dropped_after_the_abort_marker(env: Env) -> None:
    assert (await env.coordinator.handle_commit_offsets("g", "", None, -1, {T0: offset(5)}))[T0] == 0
    await txn_commit(env, "g", {T0: offset(9), T1: offset(9)})
    end_txn(env, "g", commit=False)
    assert fetched(env, "g", T0, T1) == {T0: 5, T1: None}
    assert not env.manager.get_group("g").has_pending_offset_commits_from_producer(PID)


async def test_a_marker_completes_only_its_producer_in_its_partition(env: Env) -> None:
    other = next(
        g for g in ("h", "i", "j", "k", "l") if env.manager.partition_for(g) != env.manager.partition_for("g")
    )
    await txn_commit(env, "g", {T0: offset(1)})
    await txn_commit(env, "g", {T1: offset(2)}, producer_id=PID + 1)
    await txn_commit(env, other, {T0: offset(3)})
    end_txn(env, "g", commit=True)
    assert fetched(env, "g", T0, T1) == {T0: 1, T1: None}
    assert fetched(env, other, T0) == {T0: None}  # its marker goes to its own partition
    assert env.coordinator.unstable_offsets("g", [T0, T1]) == {T1}
    end_txn(env, other, commit=True)
    end_txn(env, "g", commit=True, producer_id=PID + 1)
    assert fetched(env, "g", T1) == {T1: 2} and fetched(env, other, T0) == {T0: 3}


async def test_the_newest_record_wins_between_transactional_and_plain_commits(env: Env) -> None:
    # The plain commit's record comes after the transactional one: the commit marker keeps it.
    await txn_commit(env, "g", {T0: offset(10)})
    await env.coordinator.handle_commit_offsets("g", "", None, -1, {T0: offset(11)})
    end_txn(env, "g", commit=True)
    assert fetched(env, "g", T0) == {T0: 11}
    # The transactional record comes last: it wins once committed.
    await txn_commit(env, "g", {T0: offset(12)})
    assert fetched(env, "g", T0) == {T0: 11}
    end_txn(env, "g", commit=True)
    assert fetched(env, "g", T0) == {T0: 12}


async def test_the_producers_last_commit_of_a_partition_in_a_transaction_wins(env: Env) -> None:
    await txn_commit(env, "g", {T0: offset(1)})
    await txn_commit(env, "g", {T0: offset(2)})
    end_txn(env, "g", commit=True)
    assert fetched(env, "g", T0) == {T0: 2}


async def test_txn_commit_answers_once_replicated_and_a_failed_write_is_forgotten(env: Env) -> None:
    env.topic.hold = True
    pending = env.coordinator.handle_txn_commit_offsets("g", "x", PID, EPOCH, "", None, -1, {T0: offset(4)})
    await asyncio.sleep(0.01)
    assert not pending.done()
    assert env.coordinator.unstable_offsets("g", [T0]) == {T0}  # being written counts as pending
    env.topic.release()
    assert (await pending)[T0] == ErrorCode.NONE
    env.topic.hold = False
    end_txn(env, "g", commit=True)
    env.topic.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (await txn_commit(env, "g", {T0: offset(5)}))[T0] == ErrorCode.NOT_COORDINATOR
    group = env.manager.get_group("g")
    assert not group.has_pending_offset_commits_from_producer(PID)
    assert not env.manager.open_groups_for_producer(PID)
    assert fetched(env, "g", T0) == {T0: 4}


async def test_an_older_producer_epoch_is_fenced_by_the_log_without_losing_the_pending_offsets(
    env: Env,
) -> None:
    await txn_commit(env, "g", {T0: offset(20)}, epoch=EPOCH + 1)
    # A zombie of the previous epoch: the log refuses its batch.
    assert (await txn_commit(env, "g", {T0: offset(15)}, epoch=EPOCH))[T0] == ErrorCode.INVALID_PRODUCER_EPOCH
    end_txn(env, "g", commit=True, epoch=EPOCH + 1)
    assert fetched(env, "g", T0) == {T0: 20}


async def test_metadata_too_large(env: Env) -> None:
    errors = await txn_commit(env, "g", {T0: offset(1, "x" * 4097), T1: offset(1)})
    assert errors == {T0: ErrorCode.OFFSET_METADATA_TOO_LARGE, T1: ErrorCode.NONE}


async def test_member_checks_of_v3(env: Env) -> None:
    (a,) = await env.stable_group("g", 1)
    assert (await txn_commit(env, "g", {T0: offset(1)}, member_id=a.member_id, generation=7))[T0] == (
        ErrorCode.ILLEGAL_GENERATION
    )
    assert (await txn_commit(env, "g", {T0: offset(1)}, member_id="stranger", generation=1))[T0] == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    assert (await txn_commit(env, "g", {T0: offset(1)}, member_id=a.member_id, generation=1))[T0] == (
        ErrorCode.NONE
    )
    # Without member id and generation (TxnOffsetCommit before v3) a group with members accepts it,
    # unlike OffsetCommit.
    assert (await txn_commit(env, "g", {T1: offset(1)}))[T1] == ErrorCode.NONE
    # A group unknown here is created, and a member of it is unknown.
    assert (await txn_commit(env, "new", {T0: offset(1)}, member_id="m", generation=2))[T0] == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    assert env.manager.get_group("new").is_(GroupState.EMPTY)
    assert (await txn_commit(env, "", {T0: offset(1)}))[T0] == ErrorCode.INVALID_GROUP_ID


async def test_static_member_fenced_in_v3(env: Env) -> None:
    old = await env.join("s", instance="i1")
    await env.sync("s", old, {old.member_id: b"a"})
    new = await env.join("s", instance="i1")  # the instance restarted: the old member id is fenced
    assert new.member_id != old.member_id
    fenced = await txn_commit(env, "s", {T0: offset(1)}, member_id=old.member_id, instance="i1", generation=1)
    assert fenced[T0] == ErrorCode.FENCED_INSTANCE_ID
    ok = await txn_commit(
        env, "s", {T0: offset(1)}, member_id=new.member_id, instance="i1", generation=new.generation_id
    )
    assert ok[T0] == ErrorCode.NONE


async def test_not_coordinator_and_loading(env: Env) -> None:
    p = env.manager.partition_for("g")
    env.topic.leading.discard(p)
    env.coordinator.on_resignation(p, 1)
    assert (await txn_commit(env, "g", {T0: offset(1)}))[T0] == ErrorCode.NOT_COORDINATOR
    env.topic.leading.add(p)
    env.coordinator.on_election(p, 2)
    assert (await txn_commit(env, "g", {T0: offset(1)}))[T0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    await until(lambda: p in env.manager.owned_partitions)


async def test_a_group_with_open_transactional_offsets_is_not_removed(env: Env) -> None:
    await txn_commit(env, "g", {T0: offset(3)})
    env.clock.now += env.manager.config.retention_ms * 2
    assert await env.manager.expire_offsets() == 0
    group = env.manager.get_group("g")
    assert group is not None and not group.is_(GroupState.DEAD)
    end_txn(env, "g", commit=True)
    assert fetched(env, "g", T0) == {T0: 3}


async def test_deleting_offsets_drops_their_pending_transactional_commits(env: Env) -> None:
    await txn_commit(env, "g", {T0: offset(3), T1: offset(4)})
    error, errors = await env.coordinator.handle_delete_offsets("g", [T0])
    assert error == ErrorCode.NONE and errors == {T0: ErrorCode.NONE}
    end_txn(env, "g", commit=True)
    assert fetched(env, "g", T0, T1) == {T0: None, T1: 4}


async def test_load_replays_committed_aborted_and_open_transactions(env: Env) -> None:
    (a,) = await env.stable_group("g", 1)
    await env.coordinator.handle_commit_offsets("g", a.member_id, None, 1, {T0: offset(1)})
    await txn_commit(env, "g", {T0: offset(2), T1: offset(2)}, producer_id=1)  # committed
    end_txn(env, "g", commit=True, producer_id=1)
    await txn_commit(env, "g", {T0: offset(3), T1: offset(3)}, producer_id=2)  # aborted
    end_txn(env, "g", commit=False, producer_id=2)
    await txn_commit(env, "g", {T0: offset(4)}, producer_id=3)  # still open
    await txn_commit(env, "txn-only", {T0: offset(5)}, producer_id=3)  # a group with open offsets only
    # The newest record wins: a plain commit after producer 4's transactional one, then its marker.
    await txn_commit(env, "plain", {T0: offset(6)}, producer_id=4)
    await env.coordinator.handle_commit_offsets("plain", "", None, -1, {T0: offset(7)})
    end_txn(env, "plain", commit=True, producer_id=4)
    before = {g: fetched(env, g, T0, T1) for g in ("g", "txn-only", "plain")}

    moved = await env.reopen()
    after = {g: fetched(env, g, T0, T1, coordinator=moved) for g in ("g", "txn-only", "plain")}
    assert (
        after
        == before
        == {
            "g": {T0: 2, T1: 2},
            "txn-only": {T0: None, T1: None},
            "plain": {T0: 7, T1: None},
        }
    )
    g = moved.manager.get_group("g")
    assert g.is_(GroupState.STABLE) and g.active_producers == {3}
    assert moved.manager.get_group("txn-only").is_(GroupState.EMPTY)
    assert moved.unstable_offsets("g", [T0, T1]) == {T0}
    assert moved.manager.open_groups_for_producer(3) == {"g", "txn-only"}
    # The open transaction commits after the move: its marker reaches the new coordinator.
    partitions = {moved.manager.partition_for(group) for group in ("g", "txn-only")}
    for partition in partitions:  # one marker per partition of the transaction
        env.topic.write_marker(partition, 3, EPOCH, True)
    moved.manager.handle_txn_completion(3, partitions, True)
    assert fetched(env, "g", T0, coordinator=moved) == {T0: 4}
    assert fetched(env, "txn-only", T0, coordinator=moved) == {T0: 5}
    await moved.shutdown()


async def test_load_of_an_aborted_open_transaction_after_reload(env: Env) -> None:
    await txn_commit(env, "g", {T0: offset(8)})
    moved = await env.reopen()
    end_txn(env, "g", commit=False, manager=moved.manager)
    assert fetched(env, "g", T0, coordinator=moved) == {T0: None}
    again = await env.reopen()
    assert fetched(env, "g", T0, coordinator=again) == {T0: None}
    assert again.manager.get_group("g") is None  # nothing of it is left in the log
    await moved.shutdown()
    await again.shutdown()


async def test_a_marker_written_while_the_partition_loads_is_applied(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    await txn_commit(env, "g", {T0: offset(9)})
    p = env.manager.partition_for("g")
    read_done, resume = threading.Event(), threading.Event()
    original = manager_module.read_partition

    def slow_read(*args: Any) -> Any:
        loaded = original(*args)
        read_done.set()
        resume.wait(5)
        return loaded

    monkeypatch.setattr(manager_module, "read_partition", slow_read)
    manager = GroupMetadataManager(1, env.manager.config, env.topic, env.clock)
    coordinator = GroupCoordinator(1, env.coordinator.config, manager)
    coordinator.startup()
    coordinator.on_election(p, 1)
    await until(read_done.is_set)
    # The log was read before the marker landed.
    end_txn(env, "g", commit=True, manager=manager)
    resume.set()
    await until(lambda: p in manager.owned_partitions)
    assert fetched(env, "g", T0, coordinator=coordinator) == {T0: 9}
    await coordinator.shutdown()


async def test_unloading_forgets_the_producers_groups(env: Env) -> None:
    await txn_commit(env, "g", {T0: offset(1)})
    p = env.manager.partition_for("g")
    env.coordinator.on_resignation(p, 5)
    assert not env.manager.open_groups_for_producer(PID)
    env.manager.handle_txn_completion(PID, [p], True)  # the group moved away: nothing to do here


# -- the broker's handlers ---------------------------------------------------------------------------


class _Cache:
    def partition(self, topic: str, partition: int) -> object | None:
        return object() if topic == "t" and partition < 2 else None


@dataclass
class _Request:
    version: int
    body: Any


class _Verifier:
    """The AddPartitionsToTxnManager's side: the partitions it does not verify, with their errors."""

    def __init__(self, error: int = ErrorCode.NONE) -> None:
        self.error = error
        self.asked: list[tuple[str, int, int, list[tuple[str, int]], bool]] = []

    def verify_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: list[tuple[str, int]],
        generic: bool,
    ) -> asyncio.Future[dict[tuple[str, int], int]]:
        self.asked.append((transactional_id, producer_id, epoch, partitions, generic))
        future: asyncio.Future[dict[tuple[str, int], int]] = asyncio.get_running_loop().create_future()
        future.set_result({tp: self.error for tp in partitions} if self.error else {})
        return future


@dataclass
class _Partition:
    log: Any


class _Replicas:
    """The ReplicaManager's side: the verifier (None: verification off) and the offsets partitions'
    logs (the fake topic's)."""

    def __init__(self, env: Env, verifier: _Verifier | None) -> None:
        self.env = env
        self.add_partitions_to_txn = verifier

    def get_partition(self, topic: str, partition: int) -> _Partition | None:
        return _Partition(self.env.topic.logs[partition]) if topic == "__consumer_offsets" else None


def _apis(env: Env, verifier: _Verifier | None = None) -> GroupApis:
    apis = GroupApis.__new__(GroupApis)
    apis.coordinator = env.coordinator
    apis.metadata_cache = _Cache()  # type: ignore[assignment]
    apis.replica_manager = _Replicas(env, verifier)  # type: ignore[assignment]
    return apis


async def _answer(result: Any) -> Any:
    if isinstance(result, Parked):
        return await asyncio.wait_for(result.response, 5)
    return result


def _txn_request(version: int, group: str = "g", **kw: Any) -> TxnOffsetCommitRequest:
    return TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id=group,
        producer_id=kw.pop("producer_id", PID),
        producer_epoch=EPOCH,
        generation_id=kw.pop("generation_id", -1),
        member_id=kw.pop("member_id", ""),
        group_instance_id=None,
        topics=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                name=name,
                partitions=[
                    TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                        partition_index=p,
                        committed_offset=11,
                        committed_leader_epoch=2,
                        committed_metadata="md",
                    )
                    for p in partitions
                ],
            )
            for name, partitions in kw.pop("topics", [("t", [0, 1, 7]), ("unknown", [0])])
        ],
    )


def _errors(response: TxnOffsetCommitResponse) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def test_handler_commits_and_skips_unknown_partitions(env: Env) -> None:
    apis = _apis(env)
    response = await _answer(await apis.handle_txn_offset_commit(_Request(3, _txn_request(3))))  # type: ignore[arg-type]
    assert _errors(response) == {
        T0: ErrorCode.NONE,
        T1: ErrorCode.NONE,
        ("t", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("unknown", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    apis.on_txn_marker_written(env.manager.partition_for("g"), PID, True)
    committed = env.coordinator.handle_fetch_offsets("g", [T0])[1][T0]
    assert (committed.offset, committed.leader_epoch, committed.metadata) == (11, 2, "md")


async def test_handler_ignores_the_leader_epoch_before_v2_and_the_member_before_v3(env: Env) -> None:
    await env.stable_group("g", 1)
    apis = _apis(env)
    request = _txn_request(1, member_id="someone", generation_id=9)  # fields v1 cannot carry
    response = await _answer(await apis.handle_txn_offset_commit(_Request(1, request)))  # type: ignore[arg-type]
    assert _errors(response)[T0] == ErrorCode.NONE
    apis.on_txn_marker_written(env.manager.partition_for("g"), PID, True)
    assert env.coordinator.handle_fetch_offsets("g", [T0])[1][T0].leader_epoch == -1
    response = await _answer(await apis.handle_txn_offset_commit(_Request(3, request)))  # type: ignore[arg-type]
    assert _errors(response)[T0] == ErrorCode.UNKNOWN_MEMBER_ID


async def test_handler_maps_loading_for_v0_and_v1(env: Env) -> None:
    p = env.manager.partition_for("g")
    env.manager.loading_partitions.add(p)
    env.manager.owned_partitions.discard(p)
    apis = _apis(env)
    for version, expected in (
        (1, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (2, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
    ):
        request = _txn_request(version, topics=[("t", [0])])
        response = await _answer(await apis.handle_txn_offset_commit(_Request(version, request)))  # type: ignore[arg-type]
        assert _errors(response) == {T0: expected}


async def test_handler_verifies_the_offsets_partition_with_the_transaction_coordinator(env: Env) -> None:
    verifier = _Verifier(ErrorCode.INVALID_TXN_STATE)
    apis = _apis(env, verifier)
    request = _txn_request(4, topics=[("t", [0])])
    response = await _answer(await apis.handle_txn_offset_commit(_Request(4, request)))  # type: ignore[arg-type]
    # Not part of the transaction (no AddOffsetsToTxn): refused, nothing pending.
    assert _errors(response) == {T0: ErrorCode.INVALID_TXN_STATE}
    p = env.manager.partition_for("g")
    assert verifier.asked == [("tx", PID, EPOCH, [("__consumer_offsets", p)], True)]
    assert env.coordinator.unstable_offsets("g", [T0]) == set()
    # An unreachable coordinator: retriable.
    verifier.error = ErrorCode.NETWORK_EXCEPTION
    response = await _answer(await apis.handle_txn_offset_commit(_Request(4, request)))  # type: ignore[arg-type]
    assert _errors(response) == {T0: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
    # Verified: written; then the transaction is ongoing in the partition and is not asked again.
    verifier.error = ErrorCode.NONE
    response = await _answer(await apis.handle_txn_offset_commit(_Request(4, request)))  # type: ignore[arg-type]
    assert _errors(response) == {T0: ErrorCode.NONE}
    asked = len(verifier.asked)
    response = await _answer(await apis.handle_txn_offset_commit(_Request(3, request)))  # type: ignore[arg-type]
    assert _errors(response) == {T0: ErrorCode.NONE} and len(verifier.asked) == asked
    # A group served elsewhere is not verified: NOT_COORDINATOR as before.
    env.topic.leading.discard(p)
    env.coordinator.on_resignation(p, 7)
    response = await _answer(await apis.handle_txn_offset_commit(_Request(4, request)))  # type: ignore[arg-type]
    assert _errors(response) == {T0: ErrorCode.NOT_COORDINATOR} and len(verifier.asked) == asked


def test_handler_error_mapping_per_version() -> None:
    from broker.group_apis import _txn_offset_commit_error

    assert _txn_offset_commit_error(ErrorCode.PRODUCER_FENCED, 4) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert _txn_offset_commit_error(ErrorCode.TRANSACTION_ABORTABLE, 3) == ErrorCode.INVALID_TXN_STATE
    assert _txn_offset_commit_error(ErrorCode.TRANSACTION_ABORTABLE, 4) == ErrorCode.TRANSACTION_ABORTABLE
    assert _txn_offset_commit_error(ErrorCode.ILLEGAL_GENERATION, 3) == ErrorCode.ILLEGAL_GENERATION


async def test_offset_fetch_require_stable(env: Env) -> None:
    await env.coordinator.handle_commit_offsets("g", "", None, -1, {T0: offset(1), T1: offset(1)})
    await txn_commit(env, "g", {T0: offset(2)})
    apis = _apis(env)
    topics = [OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])]

    def by_partition(response: OffsetFetchResponse) -> dict[int, tuple[int, int]]:
        return {
            p.partition_index: (p.committed_offset, p.error_code)
            for t in response.topics
            for p in t.partitions
        }

    stable = await apis.handle_offset_fetch(
        _Request(7, OffsetFetchRequest(group_id="g", topics=topics, require_stable=True))
    )  # type: ignore[arg-type]
    assert by_partition(stable) == {0: (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT), 1: (1, ErrorCode.NONE)}
    # Without require_stable (and before v7) the committed offset is answered.
    loose = await apis.handle_offset_fetch(
        _Request(7, OffsetFetchRequest(group_id="g", topics=topics, require_stable=False))
    )  # type: ignore[arg-type]
    assert by_partition(loose) == {0: (1, ErrorCode.NONE), 1: (1, ErrorCode.NONE)}
    old = await apis.handle_offset_fetch(_Request(6, OffsetFetchRequest(group_id="g", topics=topics)))  # type: ignore[arg-type]
    assert by_partition(old) == {0: (1, ErrorCode.NONE), 1: (1, ErrorCode.NONE)}
    # v8: per group, and with every partition (no topics named).
    v8 = await apis.handle_offset_fetch(
        _Request(  # type: ignore[arg-type]
            8,
            OffsetFetchRequest(
                groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g", topics=None)],
                require_stable=True,
            ),
        )
    )
    ((group,),) = [v8.groups]
    assert {p.partition_index: p.error_code for t in group.topics for p in t.partitions} == {
        0: ErrorCode.UNSTABLE_OFFSET_COMMIT,
        1: ErrorCode.NONE,
    }
    end_txn(env, "g", commit=True)
    stable = await apis.handle_offset_fetch(
        _Request(7, OffsetFetchRequest(group_id="g", topics=topics, require_stable=True))
    )  # type: ignore[arg-type]
    assert by_partition(stable) == {0: (2, ErrorCode.NONE), 1: (1, ErrorCode.NONE)}
