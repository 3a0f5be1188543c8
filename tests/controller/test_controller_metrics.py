"""The controller's metrics (controller/controller_metrics.py): the KafkaController gauges read from the
context, the ControllerState ids and timers of the event manager, and the election counters."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from controller.context import PartitionReplica, PartitionStatus, ReplicaStatus, TopicPartition
from controller.controller_metrics import (
    ControllerState,
    register_kafka_controller_metrics,
    state_of,
)
from controller.event_manager import ControllerEventManager
from controller.events import BrokerChange, ControllerEvent, ReplicaLeaderElection, TopicChange
from controller.log_dir_events import LogDirEventNotification
from controller.partition_state_machine import PartitionStateMachine
from controller.request_batch import ControllerBrokerRequestBatch
from server_common.metrics import Metrics
from tests.controller.fakes import FakeZk, RecordingSender, make_context
from zk.znodes import PartitionState

K = "kafka_controller_kafkacontroller_"


def fake_controller(context: object, events: ControllerEventManager | None = None) -> SimpleNamespace:
    async def process(event: ControllerEvent) -> None:
        pass

    return SimpleNamespace(
        context=context,
        is_active=context is not None,
        event_manager=ControllerEventManager(process, "test") if events is None else events,
        on_elected=None,
    )


def registered(controller: SimpleNamespace) -> Metrics:
    metrics = Metrics(process=False)
    register_kafka_controller_metrics(metrics, controller)  # type: ignore[arg-type]
    return metrics


def test_the_gauges_read_the_active_controllers_context() -> None:
    context = make_context([1, 2, 3], {"a": {0: [1, 2], 1: [2, 1], 2: [3]}, "b": {0: [4]}, "gone": {0: [1]}})
    a0, a1, a2, b0, gone0 = (
        TopicPartition("a", 0),
        TopicPartition("a", 1),
        TopicPartition("a", 2),
        TopicPartition("b", 0),
        TopicPartition("gone", 0),
    )
    context.leadership = {
        a0: PartitionState(1, 0, (1, 2), 3),
        a1: PartitionState(1, 0, (1, 2), 3),  # not its preferred replica (2)
        a2: PartitionState(3, 0, (3,), 3),
        b0: PartitionState(-1, 0, (4,), 3),
        gone0: PartitionState(2, 0, (1,), 3),  # being deleted: not counted as imbalanced
    }
    context.partition_states = {tp: PartitionStatus.ONLINE for tp in (a0, a1, a2)}
    context.partition_states[b0] = PartitionStatus.OFFLINE
    context.partition_states[gone0] = PartitionStatus.OFFLINE
    context.topics_to_be_deleted = {"gone"}
    context.topics_with_deletion_started = {"gone"}
    context.replica_states[PartitionReplica(gone0, 1)] = ReplicaStatus.DELETION_INELIGIBLE
    metrics = registered(fake_controller(context))
    assert metrics.sample(K + "activecontrollercount") == 1
    assert metrics.sample(K + "offlinepartitionscount") == 1  # b-0; gone-0's deletion has started
    assert metrics.sample(K + "preferredreplicaimbalancecount") == 2  # a-1, and b-0 without a leader
    assert metrics.sample(K + "globaltopiccount") == 3
    assert metrics.sample(K + "globalpartitioncount") == 5
    assert metrics.sample(K + "activebrokercount") == 3
    assert metrics.sample(K + "topicstodeletecount") == 1
    assert metrics.sample(K + "replicastodeletecount") == 1
    assert metrics.sample(K + "replicasineligibletodeletecount") == 1
    assert metrics.sample(K + "controllerstate") == 0  # Idle


def test_a_standby_controller_reports_zero() -> None:
    metrics = registered(fake_controller(None))
    for name in ("activecontrollercount", "offlinepartitionscount", "globaltopiccount", "activebrokercount"):
        assert metrics.sample(K + name) == 0, name


def test_a_reassignment_adding_the_preferred_replica_is_balanced_until_it_joins_the_isr() -> None:
    context = make_context([1, 2, 3], {"t": {0: [3, 1]}})
    tp = TopicPartition("t", 0)
    context.adding_replicas[tp] = (3,)
    context.leadership[tp] = PartitionState(1, 0, (1,), 3)
    metrics = registered(fake_controller(context))
    assert metrics.sample(K + "preferredreplicaimbalancecount") == 0
    context.leadership[tp] = PartitionState(1, 0, (1, 3), 3)
    assert metrics.sample(K + "preferredreplicaimbalancecount") == 1


def test_events_have_kafkas_controller_states_and_timer_names() -> None:
    assert state_of(None) is ControllerState.Idle
    assert state_of(BrokerChange()) is ControllerState.BrokerChange
    assert state_of(TopicChange()) is ControllerState.TopicChange
    assert state_of(LogDirEventNotification()) is ControllerState.LogDirChange
    assert ControllerState.BrokerChange.rate_and_time_metric == "LeaderElectionRateAndTimeMs"
    assert ControllerState.AlterPartitionReassignment.rate_and_time_metric == (
        "PartitionReassignmentRateAndTimeMs"
    )
    assert ControllerState.TopicChange.rate_and_time_metric == "TopicChangeRateAndTimeMs"
    assert ControllerState.Idle.rate_and_time_metric is None
    assert ControllerState.UpdateMetadataResponseReceived.rate_and_time_metric is None


async def test_the_event_manager_reports_queue_size_state_queue_time_and_processing_time() -> None:
    release = asyncio.Event()
    seen: list[float] = []
    metrics_box: list[Metrics] = []

    async def process(event: ControllerEvent) -> None:
        metrics = metrics_box[0]
        seen.append(metrics.sample(K + "controllerstate") or 0)
        if isinstance(event, BrokerChange):
            await release.wait()

    events = ControllerEventManager(process, "test")
    metrics = registered(fake_controller(make_context([1], {}), events))
    metrics_box.append(metrics)
    events.start()
    events.put(BrokerChange())
    events.put(TopicChange())
    events.put(ReplicaLeaderElection(None, None))
    await asyncio.sleep(0.05)
    assert metrics.sample(K + "controllerstate") == ControllerState.BrokerChange
    assert metrics.sample("kafka_controller_controllereventmanager_eventqueuesize") == 2
    release.set()
    for _ in range(100):
        if len(seen) == 3 and events.current is None:
            break
        await asyncio.sleep(0.01)
    await events.close()
    assert seen == [
        ControllerState.BrokerChange,
        ControllerState.TopicChange,
        ControllerState.ManualLeaderBalance,
    ]
    assert metrics.sample(K + "controllerstate") == 0
    assert metrics.sample("kafka_controller_controllereventmanager_eventqueuetimems_count") == 3
    # The TopicChange waited behind the BrokerChange (>= 50 ms), which took as long.
    assert metrics.sample("kafka_controller_controllereventmanager_eventqueuetimems_sum") >= 50
    assert metrics.sample("kafka_controller_controllerstats_leaderelectionrateandtimems_count") == 1
    assert metrics.sample("kafka_controller_controllerstats_leaderelectionrateandtimems_sum") >= 50
    assert metrics.sample("kafka_controller_controllerstats_topicchangerateandtimems_count") == 1
    assert metrics.sample("kafka_controller_controllerstats_manualleaderbalancerateandtimems_count") == 1
    # Every state's timer is there from the start, as Kafka's.
    assert metrics.sample("kafka_controller_controllerstats_updatefeaturesrateandtimems_count") == 0


async def test_unclean_and_clean_elections_are_counted() -> None:
    context = make_context([2], {"clean": {0: [1, 2]}, "dirty": {0: [2, 1]}})
    zk = FakeZk()
    clean, dirty = TopicPartition("clean", 0), TopicPartition("dirty", 0)
    zk.states[clean] = context.leadership[clean] = PartitionState(-1, 3, (1, 2), 3, 5)
    zk.states[dirty] = context.leadership[dirty] = PartitionState(-1, 3, (1,), 3, 5)
    for tp in (clean, dirty):
        context.partition_states[tp] = PartitionStatus.OFFLINE
    controller = fake_controller(context)
    metrics = registered(controller)
    batch = ControllerBrokerRequestBatch(9001, context, RecordingSender(), lambda *args: None)
    partitions = PartitionStateMachine(context, zk, batch, True, "[test]")  # type: ignore[arg-type]
    partitions.on_elected = controller.on_elected
    results = await partitions.trigger_online_partition_state_change()
    assert results == {clean: None, dirty: None}
    assert metrics.sample("kafka_controller_controllerstats_uncleanleaderelections_total") == 1
    assert metrics.sample("samsa_controller_leader_elections_total", {"strategy": "offline"}) == 2
    assert metrics.sample("samsa_controller_leader_elections_total", {"strategy": "preferred replica"}) == 0
