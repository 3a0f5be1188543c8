"""ControllerBrokerRequestBatch: one request of each kind per broker, in Kafka's order, with the right
epochs and the deletion sentinels."""

from __future__ import annotations

from controller.context import TopicPartition
from controller.request_batch import ControllerBrokerRequestBatch
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import StopReplicaResponse
from tests.controller.fakes import RecordingSender, make_context
from zk.znodes import PartitionState

LEADER_AND_ISR, UPDATE_METADATA, STOP_REPLICA = (
    ApiKey.LEADER_AND_ISR,
    ApiKey.UPDATE_METADATA,
    ApiKey.STOP_REPLICA,
)


def _batch(context, deletions=None):  # type: ignore[no-untyped-def]
    sender = RecordingSender()
    callback = (lambda *args: deletions.append(args)) if deletions is not None else (lambda *args: None)
    return ControllerBrokerRequestBatch(9001, context, sender, callback), sender


def test_each_broker_gets_one_request_of_each_kind_in_kafkas_order() -> None:
    context = make_context([1, 2, 3], {"a": {0: [1, 2], 1: [2, 1]}, "b": {0: [2]}})
    for tp, leader in ((TopicPartition("a", 0), 1), (TopicPartition("a", 1), 2), (TopicPartition("b", 0), 2)):
        context.leadership[tp] = PartitionState(leader, 5, tuple(context.replicas(tp)), 3, 8)
    batch, sender = _batch(context)
    batch.new_batch()
    for tp in context.leadership:
        batch.add_stop_replica([9], tp, delete=False)  # not live: dropped
    batch.add_stop_replica([2], TopicPartition("b", 0), delete=False)
    for tp, state in context.leadership.items():
        batch.add_leader_and_isr(context.replicas(tp), tp, state, is_new=False)
    batch.send()
    assert sender.kinds(2) == [LEADER_AND_ISR, UPDATE_METADATA, STOP_REPLICA]
    assert sender.kinds(1) == [LEADER_AND_ISR, UPDATE_METADATA]
    assert sender.kinds(3) == [UPDATE_METADATA]
    assert sender.to(9) == []
    [request] = sender.to(2, LEADER_AND_ISR)
    assert (request.controller_id, request.controller_epoch, request.broker_epoch, request.type) == (
        9001,
        3,
        102,
        1,
    )
    assert [
        (t.topic_name, [p.partition_index for p in t.partition_states]) for t in request.topic_states
    ] == [
        ("a", [0, 1]),
        ("b", [0]),
    ]
    assert request.topic_states[0].topic_id == context.topic_ids["a"]
    assert sorted((leader.broker_id, leader.port) for leader in request.live_leaders) == [
        (1, 9001),
        (2, 9002),
    ]
    [metadata] = sender.to(3, UPDATE_METADATA)
    assert (metadata.broker_epoch, sorted(b.id for b in metadata.live_brokers)) == (103, [1, 2, 3])
    assert sum(len(t.partition_states) for t in metadata.topic_states) == 3
    [stop] = sender.to(2, STOP_REPLICA)
    assert [
        (t.topic_name, [(p.partition_index, p.leader_epoch, p.delete_partition) for p in t.partition_states])
        for t in stop.topic_states
    ] == [("b", [(0, 5, False)])]
    assert batch.empty


def test_topics_being_deleted_go_out_with_leader_and_epoch_minus_two() -> None:
    context = make_context([1], {"gone": {0: [1]}})
    tp = TopicPartition("gone", 0)
    context.leadership[tp] = PartitionState(1, 5, (1,), 3, 8)
    context.topics_to_be_deleted.add("gone")
    deletions: list = []
    batch, sender = _batch(context, deletions)
    batch.new_batch()
    batch.add_update_metadata([1], [tp])
    batch.add_stop_replica([1], tp, delete=True)
    batch.add_stop_replica([1], tp, delete=False)  # a delete already asked for is kept
    batch.send()
    [metadata] = sender.to(1, UPDATE_METADATA)
    assert metadata.topic_states[0].partition_states[0].leader == -2
    [stop] = sender.to(1, STOP_REPLICA)
    state = stop.topic_states[0].partition_states[0]
    assert (state.leader_epoch, state.delete_partition) == (-2, True)
    # The answer reaches the deletion callback, with each deleted partition's error.
    callback = sender.callbacks[-1]
    assert callback is not None
    callback(
        StopReplicaResponse(
            error_code=0,
            partition_errors=[
                StopReplicaResponse.StopReplicaPartitionError(
                    topic_name="gone", partition_index=0, error_code=ErrorCode.KAFKA_STORAGE_ERROR
                )
            ],
        )
    )
    assert deletions == [(1, 0, {tp: ErrorCode.KAFKA_STORAGE_ERROR})]


def test_a_full_leader_and_isr_goes_out_even_empty_and_metadata_can_carry_no_partitions() -> None:
    context = make_context([1, 2], {"t": {0: [1]}})
    context.leadership[TopicPartition("t", 0)] = PartitionState(1, 0, (1,), 3, 0)
    batch, sender = _batch(context)
    batch.new_batch()
    batch.mark_full([2])
    batch.add_update_metadata([1, 2], [])
    batch.send()
    [full] = sender.to(2, LEADER_AND_ISR)
    assert (full.type, full.topic_states, full.live_leaders) == (2, [], [])
    assert sender.to(1, LEADER_AND_ISR) == []
    [metadata] = sender.to(1, UPDATE_METADATA)
    assert metadata.topic_states == [] and len(metadata.live_brokers) == 2
    # None means every partition that has a leader and ISR.
    batch.new_batch()
    batch.add_update_metadata([1], None)
    batch.send()
    assert len(sender.to(1, UPDATE_METADATA)[-1].topic_states) == 1


def test_the_requests_encode_at_the_versions_sent() -> None:
    context = make_context([1, 2], {"t": {0: [1, 2]}})
    tp = TopicPartition("t", 0)
    context.leadership[tp] = PartitionState(1, 0, (1, 2), 3, 0)
    batch, sender = _batch(context)
    batch.new_batch()
    batch.add_leader_and_isr([1, 2], tp, context.leadership[tp], is_new=True)
    batch.add_stop_replica([2], tp, delete=False)
    batch.send()
    versions = {LEADER_AND_ISR: 6, UPDATE_METADATA: 7, STOP_REPLICA: 3}
    for _, key, body in sender.sent:
        decoded = type(body).decode(body.encode(versions[key]), versions[key])
        assert decoded == body
