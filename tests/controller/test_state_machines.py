"""The partition and replica state machines, and AlterPartition's checks, over in-memory ZooKeeper state
and a recording sender."""

from __future__ import annotations

import pytest

from controller.alter_partition import IsrChange, alter_partition
from controller.context import (
    ControllerContext,
    PartitionReplica,
    PartitionStatus,
    ReplicaStatus,
    TopicPartition,
)
from controller.controller_zk import ControllerMovedError
from controller.election import ElectionStrategy
from controller.partition_state_machine import PartitionStateMachine
from controller.replica_state_machine import ReplicaStateMachine
from controller.request_batch import ControllerBrokerRequestBatch
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from tests.controller.fakes import FakeZk, RecordingSender, make_context
from zk.znodes import PartitionState

LEADER_AND_ISR, UPDATE_METADATA, STOP_REPLICA = (
    ApiKey.LEADER_AND_ISR,
    ApiKey.UPDATE_METADATA,
    ApiKey.STOP_REPLICA,
)
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def _machines(
    context: ControllerContext, zk: FakeZk, unclean: bool = False
) -> tuple[PartitionStateMachine, ReplicaStateMachine, RecordingSender]:
    sender = RecordingSender()
    batch = ControllerBrokerRequestBatch(9001, context, sender, lambda *args: None)
    prefix = "[Controller id=9001 epoch=3]"
    return (
        PartitionStateMachine(context, zk, batch, unclean, prefix),  # type: ignore[arg-type]
        ReplicaStateMachine(context, zk, batch, prefix),  # type: ignore[arg-type]
        sender,
    )


def _partition_states(requests: list) -> dict[tuple[str, int], object]:
    return {
        (t.topic_name, p.partition_index): p
        for r in requests
        for t in r.topic_states
        for p in t.partition_states
    }


async def test_new_partitions_get_a_leader_or_stay_new_when_no_replica_lives() -> None:
    context = make_context([1, 2], {"t": {0: [1, 2], 1: [3]}})
    zk = FakeZk()
    partitions, _, sender = _machines(context, zk)
    await partitions.handle_state_changes([T0, T1], PartitionStatus.NEW)
    results = await partitions.handle_state_changes(
        [T0, T1], PartitionStatus.ONLINE, ElectionStrategy.OFFLINE
    )
    assert results[T0] is None and results[T1] is not None
    assert zk.states[T0] == PartitionState(1, 0, (1, 2), 3, 0)
    assert T1 not in zk.states
    assert context.partition_state(T0) is PartitionStatus.ONLINE
    assert context.partition_state(T1) is PartitionStatus.NEW
    for broker_id in (1, 2):
        assert sender.kinds(broker_id) == [LEADER_AND_ISR, UPDATE_METADATA]
        [state] = _partition_states(sender.to(broker_id, LEADER_AND_ISR)).values()
        assert (state.leader, state.isr, state.replicas, state.is_new, state.partition_epoch) == (
            1,
            [1, 2],
            [1, 2],
            True,
            0,
        )
        assert list(_partition_states(sender.to(broker_id, UPDATE_METADATA))) == [("t", 0)]
    assert sender.to(3) == []


async def test_an_election_that_loses_a_zk_version_race_rereads_and_retries() -> None:
    context = make_context([2, 3], {"t": {0: [1, 2, 3]}})
    zk = FakeZk()
    zk.states[T0] = PartitionState(1, 4, (1, 2, 3), 2, 7)
    context.leadership[T0] = zk.states[T0]
    context.partition_states[T0] = PartitionStatus.OFFLINE
    zk.races.add(T0)
    partitions, _, sender = _machines(context, zk)
    results = await partitions.trigger_online_partition_state_change()
    assert results == {T0: None}
    # Written on the version the race left (8), so it is now 9; the ISR keeps its live members.
    assert zk.states[T0] == PartitionState(2, 5, (2, 3), 3, 9)
    assert context.leadership[T0] == zk.states[T0]
    [state] = _partition_states(sender.to(3, LEADER_AND_ISR)).values()
    assert (state.leader, state.leader_epoch, state.partition_epoch, state.is_new) == (2, 5, 9, False)
    [metadata] = _partition_states(sender.to(2, UPDATE_METADATA)).values()
    assert metadata.offline_replicas == [1]


async def test_without_a_live_isr_member_the_topic_config_decides_on_unclean_election() -> None:
    context = make_context([2], {"clean": {0: [1, 2]}, "dirty": {0: [1, 2]}})
    zk = FakeZk()
    zk.configs["clean"] = {"unclean.leader.election.enable": "false"}
    zk.configs["dirty"] = {"unclean.leader.election.enable": "true"}
    clean, dirty = TopicPartition("clean", 0), TopicPartition("dirty", 0)
    for tp in (clean, dirty):
        zk.states[tp] = context.leadership[tp] = PartitionState(-1, 3, (1,), 3, 5)
        context.partition_states[tp] = PartitionStatus.OFFLINE
    partitions, _, _ = _machines(context, zk, unclean=True)  # the default says yes; "clean" says no
    results = await partitions.trigger_online_partition_state_change()
    assert results[dirty] is None and results[clean] is not None
    assert zk.states[dirty] == PartitionState(2, 4, (2,), 3, 6)
    assert zk.states[clean] == PartitionState(-1, 3, (1,), 3, 5)
    assert context.partition_state(clean) is PartitionStatus.OFFLINE


async def test_a_state_written_by_a_newer_controller_is_left_alone() -> None:
    context = make_context([2], {"t": {0: [1, 2]}})
    zk = FakeZk()
    zk.states[T0] = PartitionState(1, 0, (1, 2), 4, 1)  # controller epoch 4 > ours (3)
    context.leadership[T0] = PartitionState(1, 0, (1, 2), 3, 0)
    context.partition_states[T0] = PartitionStatus.OFFLINE
    partitions, _, sender = _machines(context, zk)
    results = await partitions.trigger_online_partition_state_change()
    assert results[T0] is not None
    assert zk.writes == 0 and sender.sent == []


async def test_a_deposed_controller_sends_nothing_of_the_change_it_was_making() -> None:
    context = make_context([1, 2], {"t": {0: [1, 2]}})
    zk = FakeZk()
    partitions, _, sender = _machines(context, zk)
    await partitions.handle_state_changes([T0], PartitionStatus.NEW)
    zk.moved = True
    with pytest.raises(ControllerMovedError):
        await partitions.handle_state_changes([T0], PartitionStatus.ONLINE, ElectionStrategy.OFFLINE)
    assert sender.sent == [] and zk.states == {}


async def test_invalid_transitions_are_refused() -> None:
    context = make_context([1], {"t": {0: [1]}})
    partitions, replicas, sender = _machines(context, FakeZk())
    results = await partitions.handle_state_changes([T0], PartitionStatus.ONLINE, ElectionStrategy.OFFLINE)
    assert results[T0] is not None and context.partition_state(T0) is PartitionStatus.NON_EXISTENT
    await replicas.handle_state_changes([PartitionReplica(T0, 1)], ReplicaStatus.DELETION_STARTED)
    assert context.replica_state(PartitionReplica(T0, 1)) is ReplicaStatus.NON_EXISTENT
    assert sender.sent == []


async def test_a_replica_going_offline_is_stopped_and_leaves_the_isr() -> None:
    context = make_context([1, 3], {"t": {0: [1, 2, 3]}})
    zk = FakeZk()
    zk.states[T0] = context.leadership[T0] = PartitionState(1, 6, (1, 2, 3), 3, 2)
    context.replica_states[PartitionReplica(T0, 2)] = ReplicaStatus.ONLINE
    _, replicas, sender = _machines(context, zk)
    await replicas.handle_state_changes([PartitionReplica(T0, 2)], ReplicaStatus.OFFLINE)
    assert zk.states[T0] == PartitionState(1, 7, (1, 3), 3, 3)
    assert context.replica_state(PartitionReplica(T0, 2)) is ReplicaStatus.OFFLINE
    for broker_id in (1, 3):
        [state] = _partition_states(sender.to(broker_id, LEADER_AND_ISR)).values()
        assert (state.leader, state.leader_epoch, state.isr) == (1, 7, [1, 3])
    # Broker 2 is not live: its StopReplica (epoch 6, no delete) is dropped by the batch.
    assert sender.to(2) == []


async def test_a_leader_going_offline_leaves_the_partition_leaderless_until_elected() -> None:
    context = make_context([2], {"t": {0: [1]}})
    zk = FakeZk()
    zk.states[T0] = context.leadership[T0] = PartitionState(1, 0, (1,), 3, 0)
    context.replica_states[PartitionReplica(T0, 1)] = ReplicaStatus.ONLINE
    _, replicas, sender = _machines(context, zk)
    await replicas.handle_state_changes([PartitionReplica(T0, 1)], ReplicaStatus.OFFLINE)
    assert zk.states[T0] == PartitionState(-1, 1, (1,), 3, 1)
    [metadata] = _partition_states(sender.to(2, UPDATE_METADATA)).values()
    assert (metadata.leader, metadata.offline_replicas) == (-1, [1])


async def test_startup_sends_every_live_broker_a_full_leader_and_isr() -> None:
    context = make_context([1, 2, 3], {"t": {0: [1, 2], 1: [2, 4]}})
    zk = FakeZk()
    zk.states[T0] = context.leadership[T0] = PartitionState(1, 0, (1, 2), 2, 0)
    zk.states[T1] = context.leadership[T1] = PartitionState(2, 0, (2, 4), 2, 0)
    _, replicas, sender = _machines(context, zk)
    await replicas.startup()
    first = {b: sender.to(b, LEADER_AND_ISR)[0] for b in (1, 2, 3)}
    assert all(r.type == 2 for r in first.values())
    assert set(_partition_states([first[1]])) == {("t", 0)}
    assert set(_partition_states([first[2]])) == {("t", 0), ("t", 1)}
    assert first[3].topic_states == []
    # Broker 4 is dead: its replica goes offline and leaves the ISR of t-1, which broker 2 is then told.
    assert context.replica_state(PartitionReplica(T1, 4)) is ReplicaStatus.OFFLINE
    assert zk.states[T1] == PartitionState(2, 1, (2,), 3, 1)
    update = sender.to(2, LEADER_AND_ISR)[1]
    assert update.type == 1 and _partition_states([update])[("t", 1)].isr == [2]


async def test_alter_partition_checks_each_change_against_the_known_state() -> None:
    context = make_context([1, 2, 3], {"t": {0: [1, 2, 3], 1: [1, 2]}, "gone": {0: [1]}})
    zk = FakeZk()
    zk.states[T0] = context.leadership[T0] = PartitionState(1, 4, (1, 2, 3), 3, 6)
    context.leadership[TopicPartition("gone", 0)] = PartitionState(1, 0, (1,), 3, 0)
    context.topics_to_be_deleted.add("gone")
    sender = RecordingSender()
    batch = ControllerBrokerRequestBatch(9001, context, sender, lambda *args: None)
    context.shutting_down_broker_ids.add(3)
    changes = {
        T0: IsrChange(4, (1, 2), 6),
        T1: IsrChange(0, (1,), 0),  # no state yet
        TopicPartition("gone", 0): IsrChange(0, (1,), 0),
    }
    results = await alter_partition(context, zk, batch, 1, changes, "")  # type: ignore[arg-type]
    assert results[T0] == PartitionState(1, 4, (1, 2), 3, 7) == zk.states[T0]
    assert results[T1] == results[TopicPartition("gone", 0)] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    [metadata] = sender.to(2, UPDATE_METADATA)
    assert _partition_states([metadata])[("t", 0)].isr == [1, 2]
    newer = await alter_partition(context, zk, batch, 1, {T0: IsrChange(5, (1,), 7)}, "")  # type: ignore[arg-type]
    assert newer[T0] == ErrorCode.NOT_CONTROLLER  # the leader knows a newer state than this controller
    back = await alter_partition(context, zk, batch, 1, {T0: IsrChange(4, (1, 2, 3), 7)}, "")  # type: ignore[arg-type]
    assert back[T0] == ErrorCode.INELIGIBLE_REPLICA  # 3 is shutting down
    recovering = await alter_partition(context, zk, batch, 1, {T0: IsrChange(4, (1,), 7, None, 1)}, "")  # type: ignore[arg-type]
    assert recovering[T0] == ErrorCode.INVALID_REQUEST
