"""Preferred and unclean elections, the auto-rebalance check and partition reassignment, on the
controller's state machines over in-memory ZooKeeper state and a recording sender."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from controller.context import (
    ControllerContext,
    PartitionReplica,
    PartitionStatus,
    ReplicaAssignment,
    ReplicaStatus,
    TopicPartition,
)
from controller.election import preferred_replica_election, reassign_partition_election
from controller.partition_state_machine import PartitionStateMachine
from controller.reassignment import PartitionReassignmentManager
from controller.replica_election import ElectionTrigger, ElectionType, ReplicaElectionManager
from controller.replica_state_machine import ReplicaStateMachine
from controller.request_batch import ControllerBrokerRequestBatch
from controller.topic_deletion import TopicDeletionManager
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from tests.controller.fakes import FakeZk, RecordingSender, make_context
from zk.znodes import PartitionState

LEADER_AND_ISR, UPDATE_METADATA, STOP_REPLICA = (
    ApiKey.LEADER_AND_ISR,
    ApiKey.UPDATE_METADATA,
    ApiKey.STOP_REPLICA,
)
T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


@dataclass
class Controller:
    context: ControllerContext
    zk: FakeZk
    sender: RecordingSender
    partitions: PartitionStateMachine
    replicas: ReplicaStateMachine
    deletion: TopicDeletionManager
    elections: ReplicaElectionManager
    reassignments: PartitionReassignmentManager

    def set_state(self, tp: TopicPartition, leader: int, isr: tuple[int, ...], epoch: int = 0) -> None:
        """A partition online with this leader and ISR, in ZooKeeper and in the context."""
        self.zk.states[tp] = self.context.leadership[tp] = PartitionState(leader, epoch, isr, 3, epoch)
        self.context.partition_states[tp] = PartitionStatus.ONLINE
        for replica in self.context.replicas(tp):
            self.context.replica_states[PartitionReplica(tp, replica)] = ReplicaStatus.ONLINE

    def leader_and_isr(self, broker_id: int) -> dict[TopicPartition, object]:
        """The latest LeaderAndIsr partition state sent to a broker, per partition."""
        return {
            TopicPartition(t.topic_name, p.partition_index): p
            for r in self.sender.to(broker_id, LEADER_AND_ISR)
            for t in r.topic_states
            for p in t.partition_states
        }

    def stop_replicas(self, broker_id: int) -> list[tuple[TopicPartition, bool]]:
        return [
            (TopicPartition(t.topic_name, p.partition_index), p.delete_partition)
            for r in self.sender.to(broker_id, STOP_REPLICA)
            for t in r.topic_states
            for p in t.partition_states
        ]


def _controller(
    live: list[int], assignments: dict[str, dict[int, list[int]]], imbalance: int = 10
) -> Controller:
    context = make_context(live, assignments)
    zk = FakeZk()
    sender = RecordingSender()
    batch = ControllerBrokerRequestBatch(9001, context, sender, lambda *args: None)
    prefix = "[Controller id=9001 epoch=3]"
    partitions = PartitionStateMachine(context, zk, batch, False, prefix)  # type: ignore[arg-type]
    replicas = ReplicaStateMachine(context, zk, batch, prefix)  # type: ignore[arg-type]
    deletion = TopicDeletionManager(context, zk, partitions, replicas, batch, prefix)  # type: ignore[arg-type]
    elections = ReplicaElectionManager(context, zk, partitions, imbalance, prefix)  # type: ignore[arg-type]
    reassignments = PartitionReassignmentManager(
        context,
        zk,  # type: ignore[arg-type]
        partitions,
        replicas,
        batch,
        deletion,
        prefix,
    )
    return Controller(context, zk, sender, partitions, replicas, deletion, elections, reassignments)


# -- algorithms -------------------------------------------------------------------------------------


def test_the_preferred_replica_leads_only_when_alive_and_in_sync() -> None:
    assert preferred_replica_election([1, 2, 3], [2, 1], {1, 2, 3}).leader == 1  # type: ignore[union-attr]
    assert preferred_replica_election([1, 2, 3], [2, 1], {1, 2, 3}).isr == (2, 1)  # type: ignore[union-attr]
    assert preferred_replica_election([1, 2, 3], [2, 3], {1, 2, 3}) is None
    assert preferred_replica_election([1, 2, 3], [1, 2], {2, 3}) is None
    assert reassign_partition_election([4, 2], [1, 2, 4], {1, 2}).leader == 2  # type: ignore[union-attr]
    assert reassign_partition_election([4, 5], [1, 2], {1, 2, 4, 5}) is None


def test_reassign_to_keeps_the_origin_replicas_of_a_reassignment_in_progress() -> None:
    start = ReplicaAssignment((1, 2, 3))
    moving = start.reassign_to([4, 5, 6])
    assert moving == ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    assert (moving.origin, moving.target, moving.is_being_reassigned) == ((1, 2, 3), (4, 5, 6), True)
    # A new target replaces the old one; the origin stays what the partition had before either.
    assert moving.reassign_to([1, 4]) == ReplicaAssignment((1, 4, 2, 3), (4,), (2, 3))
    cancelled = moving.reassign_to(moving.origin)
    assert cancelled == ReplicaAssignment((1, 2, 3)) and not cancelled.is_being_reassigned


# -- elections --------------------------------------------------------------------------------------


async def test_preferred_election_answers_every_partition_as_kafka_does() -> None:
    c = _controller([1, 2, 3], {"t": {0: [1, 2], 1: [1, 2], 2: [2, 3]}, "doomed": {0: [1]}})
    c.set_state(T0, 2, (2, 1), epoch=4)  # preferred 1 in sync: elected
    c.set_state(T1, 2, (2,))  # preferred 1 not in sync
    c.set_state(T2, 2, (2, 3))  # already led by its preferred replica
    c.context.topics_to_be_deleted.add("doomed")
    asked = [T0, T1, T2, TopicPartition("doomed", 0), TopicPartition("t", 9)]
    results = await c.elections.elect(asked, ElectionType.PREFERRED, ElectionTrigger.ADMIN_CLIENT)
    assert results[T0] == 1
    assert c.zk.states[T0] == PartitionState(1, 5, (2, 1), 3, 5)  # the ISR stays, the epoch moves
    assert results[T1][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE  # type: ignore[index]
    assert "preferred replica 1" in results[T1][1]  # type: ignore[index]
    assert results[T2][0] == ErrorCode.ELECTION_NOT_NEEDED  # type: ignore[index]
    assert results[TopicPartition("doomed", 0)] == (
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        "The topic is being deleted",
    )
    assert results[TopicPartition("t", 9)] == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "The partition does not exist.",
    )
    # Both replicas of t-0 learn the new leader.
    for broker_id in (1, 2):
        state = c.leader_and_isr(broker_id)[T0]
        assert (state.leader, state.leader_epoch) == (1, 5)  # type: ignore[attr-defined]


async def test_unclean_election_picks_a_live_out_of_sync_replica_only_when_there_is_no_leader() -> None:
    c = _controller([2, 3], {"t": {0: [1, 2], 1: [3, 2], 2: [1]}})
    c.set_state(T0, -1, (1,), epoch=2)  # offline: its only in-sync replica is dead
    c.set_state(T1, 3, (3,))  # led
    c.set_state(T2, -1, (1,))  # offline, and no replica alive at all
    results = await c.elections.elect([T0, T1, T2], ElectionType.UNCLEAN, ElectionTrigger.ADMIN_CLIENT)
    assert results[T0] == 2 and c.zk.states[T0] == PartitionState(2, 3, (2,), 3, 3)
    assert results[T1][0] == ErrorCode.ELECTION_NOT_NEEDED  # type: ignore[index]
    assert results[T2][0] == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE  # type: ignore[index]


async def test_the_znode_request_is_carried_out_then_deleted() -> None:
    c = _controller([1, 2], {"t": {0: [1, 2], 1: [2, 1]}})
    c.set_state(T0, 2, (1, 2))
    c.set_state(T1, 2, (2, 1))
    c.zk.preferred_request = [T0, T1, TopicPartition("nope", 0)]
    await c.elections.on_request_znode()
    assert c.zk.states[T0].leader == 1 and c.zk.states[T1].leader == 2
    assert c.zk.preferred_request is None
    await c.elections.on_request_znode()  # nothing there: nothing done
    assert c.zk.writes == 1


@pytest.mark.parametrize(
    ("not_led", "expected_elections"),
    [(1, 0), (2, 2)],  # 1 of 10 is exactly 10%: balanced enough; 2 of 10 is over
)
async def test_auto_rebalance_elects_when_a_broker_leads_too_few_of_its_preferred_partitions(
    not_led: int, expected_elections: int
) -> None:
    c = _controller([1, 2], {"t": {p: [1, 2] for p in range(10)}})
    for p in range(10):
        c.set_state(TopicPartition("t", p), 2 if p < not_led else 1, (1, 2))
    await c.elections.check_auto_rebalance()
    moved = [p for p in range(10) if c.zk.states[TopicPartition("t", p)].leader_epoch == 1]
    assert len(moved) == expected_elections
    assert all(c.zk.states[TopicPartition("t", p)].leader == 1 for p in range(10)) == bool(expected_elections)


async def test_auto_rebalance_skips_preferred_replicas_out_of_sync_and_waits_for_reassignments() -> None:
    c = _controller([1, 2], {"t": {0: [1, 2], 1: [1, 2]}})
    c.set_state(T0, 2, (2,))  # preferred 1 is not in sync
    c.set_state(T1, 2, (1, 2))
    c.context.partitions_being_reassigned.add(T1)
    await c.elections.check_auto_rebalance()
    assert c.zk.writes == 0
    c.context.partitions_being_reassigned.clear()
    await c.elections.check_auto_rebalance()
    assert c.zk.states[T1].leader == 1 and c.zk.states[T0].leader == 2


# -- reassignment -----------------------------------------------------------------------------------


async def test_a_reassignment_adds_replicas_waits_for_the_isr_then_moves_leadership_and_removes() -> None:
    c = _controller([1, 2, 3], {"t": {0: [1, 2]}})
    c.set_state(T0, 1, (1, 2), epoch=5)
    results = await c.reassignments.alter({T0: [2, 3]})
    assert results == {T0: (ErrorCode.NONE, None)}
    # U: RS = TRS + ORS, AR and RR, in ZooKeeper and in the context.
    moving = ReplicaAssignment((2, 3, 1), (3,), (1,))
    assert c.zk.assignments[T0] == moving == c.context.full_assignment(T0)
    assert T0 in c.context.partitions_being_reassigned
    # A: a new leader epoch, LeaderAndIsr to every replica of RS, the new replica started.
    assert c.zk.states[T0] == PartitionState(1, 6, (1, 2), 3, 6)
    for broker_id in (1, 2, 3):
        state = c.leader_and_isr(broker_id)[T0]
        assert (state.leader_epoch, state.replicas, state.adding_replicas, state.removing_replicas) == (  # type: ignore[attr-defined]
            6,
            [2, 3, 1],
            [3],
            [1],
        )
    assert c.context.replica_state(PartitionReplica(T0, 3)) is ReplicaStatus.NEW
    assert c.stop_replicas(1) == []
    # The leader adds 3 to the ISR: B.
    c.zk.states[T0] = c.context.leadership[T0] = PartitionState(1, 6, (1, 2, 3), 3, 7)
    await c.reassignments.on_isr_change([T0])
    assert c.context.full_assignment(T0) == ReplicaAssignment((2, 3)) == c.zk.assignments[T0]
    assert T0 not in c.context.partitions_being_reassigned
    final = c.zk.states[T0]
    assert (final.leader, final.isr) == (2, (2, 3))  # led by a target replica; 1 is out of the ISR
    assert (TopicPartition("t", 0), True) in c.stop_replicas(1)  # and deleted from broker 1
    assert c.context.replica_state(PartitionReplica(T0, 1)) is ReplicaStatus.NON_EXISTENT
    assert c.leader_and_isr(3)[T0].leader == 2  # type: ignore[attr-defined]
    metadata = [
        p for r in c.sender.to(3, UPDATE_METADATA) for t in r.topic_states for p in t.partition_states
    ]
    assert metadata[-1].replicas == [2, 3] and metadata[-1].isr == [2, 3]


async def test_a_reassignment_within_the_isr_completes_at_once() -> None:
    c = _controller([1, 2, 3], {"t": {0: [1, 2, 3]}})
    c.set_state(T0, 1, (1, 2, 3))
    await c.reassignments.alter({T0: [3, 2]})
    assert c.zk.assignments[T0] == ReplicaAssignment((3, 2))
    assert c.zk.states[T0].leader == 3 and set(c.zk.states[T0].isr) == {2, 3}
    assert (T0, True) in c.stop_replicas(1)
    assert not c.context.partitions_being_reassigned


async def test_cancelling_goes_back_to_the_origin_replicas_and_deletes_the_added_ones() -> None:
    c = _controller([1, 2, 3], {"t": {0: [1, 2]}})
    c.set_state(T0, 1, (1, 2))
    await c.reassignments.alter({T0: [3, 2]})
    assert c.reassignments.list(None) == {T0: ReplicaAssignment((3, 2, 1), (3,), (1,))}
    assert await c.reassignments.alter({T0: None}) == {T0: (ErrorCode.NONE, None)}
    # The origin replicas in RS order, as Kafka's ReplicaAssignment computes them.
    assert c.zk.assignments[T0] == ReplicaAssignment((2, 1)) == c.context.full_assignment(T0)
    assert (T0, True) in c.stop_replicas(3)
    assert c.reassignments.list(None) == {} and c.reassignments.list([T0]) == {}
    assert c.zk.states[T0].leader == 1
    again = await c.reassignments.alter({T0: None})
    assert again == {T0: (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")}


async def test_reassignments_are_checked_as_kafka_checks_them() -> None:
    c = _controller([1, 2, 3], {"t": {0: [1, 2]}, "doomed": {0: [1]}})
    c.set_state(T0, 1, (1, 2))
    c.context.topics_to_be_deleted.add("doomed")
    results = await c.reassignments.alter(
        {
            T0: [],
            T1: [2, 2],
            T2: [-1],
            TopicPartition("t", 3): [4],
            TopicPartition("t", 4): [1],
            TopicPartition("doomed", 0): [2],
        }
    )
    assert results[T0][0] == results[T1][0] == results[T2][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "not alive" in results[TopicPartition("t", 3)][1]  # type: ignore[operator]
    assert results[TopicPartition("t", 4)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results[TopicPartition("doomed", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert c.zk.writes == 0


async def test_the_request_znode_loses_what_cannot_start_and_what_completes() -> None:
    c = _controller([1, 2, 3], {"t": {0: [1, 2], 1: [1, 2]}})
    c.set_state(T0, 1, (1, 2))
    c.set_state(T1, 1, (1, 2))
    c.zk.reassign_request = {T0: [2, 1], T1: [1, 3], TopicPartition("t", 7): [1]}
    started = await c.reassignments.on_request_znode()
    assert started == {T0, T1}
    # t-0 completed at once (a reorder, which moves no leadership: that takes a preferred election),
    # t-7 does not exist: only t-1 is left, waiting for broker 3.
    assert c.zk.reassign_request == {T1: [1, 3]}
    assert c.zk.assignments[T0] == ReplicaAssignment((2, 1)) and c.zk.states[T0].leader == 1
    c.zk.states[T1] = c.context.leadership[T1] = PartitionState(1, 1, (1, 2, 3), 3, 2)
    await c.reassignments.on_isr_change([T1])
    assert c.zk.reassign_request is None
    assert c.zk.assignments[T1] == ReplicaAssignment((1, 3))


async def test_an_api_reassignment_takes_the_partition_out_of_the_request_znode() -> None:
    c = _controller([1, 2, 3], {"t": {0: [1, 2], 1: [1, 2]}})
    c.set_state(T0, 1, (1, 2))
    c.set_state(T1, 1, (1, 2))
    c.zk.reassign_request = {T0: [1, 3], T1: [1, 3]}
    await c.reassignments.alter({T0: [2, 3]})
    assert c.zk.reassign_request == {T1: [1, 3]}


async def test_a_reassignment_resumes_from_the_assignment_read_back_after_a_failover() -> None:
    c = _controller([1, 2, 3], {"t": {0: [2, 3, 1]}})
    # What a controller that died in phase A left: RS, AR and RR in /brokers/topics, the ISR grown since.
    c.context.set_full_assignment(T0, ReplicaAssignment((2, 3, 1), (3,), (1,)))
    c.context.partitions_being_reassigned.add(T0)
    c.set_state(T0, 1, (1, 2, 3), epoch=6)
    await c.reassignments.resume(lambda tp, a: True)
    assert c.zk.assignments[T0] == ReplicaAssignment((2, 3))
    assert c.zk.states[T0].leader == 2 and c.zk.states[T0].isr == (2, 3)
    assert (T0, True) in c.stop_replicas(1)


async def test_topic_deletion_waits_for_the_topics_reassignments() -> None:
    c = _controller([1, 2, 3], {"t": {0: [1, 2]}})
    c.set_state(T0, 1, (1, 2))
    await c.reassignments.alter({T0: [2, 3]})
    await c.deletion.enqueue_topics_for_deletion({"t"})
    assert "t" not in c.context.topics_with_deletion_started
    c.zk.states[T0] = c.context.leadership[T0] = PartitionState(1, 1, (1, 2, 3), 3, 2)
    await c.reassignments.on_isr_change([T0])
    assert "t" in c.context.topics_with_deletion_started
