"""The controller process's own metrics (``register_controller_metrics``), as Kafka's KafkaController,
ControllerEventManager and ControllerStats define them, named as the Prometheus JMX exporter's Kafka
rules name those MBeans (``kafka.controller:type=KafkaController,name=OfflinePartitionsCount`` ->
``kafka_controller_kafkacontroller_offlinepartitionscount``).

- KafkaController gauges, read from the active controller's context when scraped (0 on a standby, as
  Kafka's): ActiveControllerCount, OfflinePartitionsCount, PreferredReplicaImbalanceCount,
  GlobalTopicCount, GlobalPartitionCount, ActiveBrokerCount, TopicsToDeleteCount,
  ReplicasToDeleteCount, TopicsIneligibleToDeleteCount, ReplicasIneligibleToDeleteCount, and
  ControllerState: the ``ControllerState`` id of the event being processed (0 = Idle).
- ControllerEventManager: EventQueueSize (gauge), EventQueueTimeMs (histogram: queued to taken).
- ControllerStats: one ``<State>RateAndTimeMs`` histogram per controller state, of the milliseconds its
  events take (the BrokerChange one keeps Kafka's old name, LeaderElectionRateAndTimeMs; reassignment
  events are PartitionReassignmentRateAndTimeMs), and UncleanLeaderElectionsPerSec as a counter.
- Samsa's own: ``samsa_controller_leader_elections_total{strategy}``, the leaders elected for existing
  partitions by election strategy (``offline``, ``unclean`` (ElectLeaders UNCLEAN), ``preferred
  replica``, ``reassignment``, ``controlled shutdown``), which Kafka has no meter for.

The ZooKeeper session's metrics (zk/zk_metrics.py) are the controller's too.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING

from controller.context import ControllerContext, PartitionStatus, ReplicaStatus, TopicPartition
from controller.election import Election, ElectionStrategy
from controller.events import (
    AlterPartitionReceived,
    ApiPartitionReassignment,
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    ControlledShutdown,
    ControllerChange,
    ControllerEvent,
    ListPartitionReassignments,
    PartitionModifications,
    PreferredReplicaElectionRequested,
    ReplicaLeaderElection,
    SessionExpired,
    Startup,
    StopReplicaResponseReceived,
    TopicChange,
    TopicDeletion,
    ZkPartitionReassignment,
)
from controller.log_dir_events import LeaderAndIsrResponseReceived, LogDirEventNotification
from server_common.metrics import HistogramChild, Metrics
from zk.zk_metrics import register_zookeeper_metrics

if TYPE_CHECKING:
    from controller.controller import KafkaController
    from controller.server import ControllerServer


class ControllerState(enum.IntEnum):
    """Kafka's ControllerState ids (what the ControllerState gauge reads)."""

    Idle = 0
    ControllerChange = 1
    BrokerChange = 2
    TopicChange = 3
    TopicDeletion = 4
    AlterPartitionReassignment = 5
    AutoLeaderBalance = 6
    ManualLeaderBalance = 7
    ControlledShutdown = 8
    IsrChange = 9
    LeaderAndIsrResponseReceived = 10
    LogDirChange = 11
    ControllerShutdown = 12
    UncleanLeaderElectionEnable = 13
    TopicUncleanLeaderElectionEnable = 14
    ListPartitionReassignment = 15
    UpdateMetadataResponseReceived = 16
    UpdateFeatures = 17

    @property
    def rate_and_time_metric(self) -> str | None:
        """Kafka's ControllerState.rateAndTimeMetricName."""
        if self in (ControllerState.Idle, ControllerState.UpdateMetadataResponseReceived):
            return None
        if self is ControllerState.BrokerChange:
            return "LeaderElectionRateAndTimeMs"
        if self is ControllerState.AlterPartitionReassignment:
            return "PartitionReassignmentRateAndTimeMs"
        return f"{self.name}RateAndTimeMs"


# Each Samsa event's state, as Kafka's ControllerEvent.state (the /admin/preferred_replica_election
# znode becomes a ReplicaLeaderElection event in Kafka).
EVENT_STATES: dict[type[ControllerEvent], ControllerState] = {
    Startup: ControllerState.ControllerChange,
    ControllerChange: ControllerState.ControllerChange,
    SessionExpired: ControllerState.ControllerChange,
    BrokerChange: ControllerState.BrokerChange,
    TopicChange: ControllerState.TopicChange,
    PartitionModifications: ControllerState.TopicChange,
    TopicDeletion: ControllerState.TopicDeletion,
    StopReplicaResponseReceived: ControllerState.TopicDeletion,
    ZkPartitionReassignment: ControllerState.AlterPartitionReassignment,
    ApiPartitionReassignment: ControllerState.AlterPartitionReassignment,
    ListPartitionReassignments: ControllerState.ListPartitionReassignment,
    AutoPreferredReplicaLeaderElection: ControllerState.AutoLeaderBalance,
    ReplicaLeaderElection: ControllerState.ManualLeaderBalance,
    PreferredReplicaElectionRequested: ControllerState.ManualLeaderBalance,
    ControlledShutdown: ControllerState.ControlledShutdown,
    AlterPartitionReceived: ControllerState.IsrChange,
    LeaderAndIsrResponseReceived: ControllerState.LeaderAndIsrResponseReceived,
    LogDirEventNotification: ControllerState.LogDirChange,
}


def state_of(event: ControllerEvent | None) -> ControllerState:
    if event is None:
        return ControllerState.Idle
    return EVENT_STATES.get(type(event), ControllerState.Idle)


# -- what the gauges read from the active controller's context, as Kafka's updateMetrics -------------


def offline_partitions(context: ControllerContext) -> int:
    """Partitions in the OfflinePartition state, but those of topics whose deletion has started."""
    return sum(
        1
        for tp, status in context.partition_states.items()
        if status is PartitionStatus.OFFLINE and tp.topic not in context.topics_with_deletion_started
    )


def has_preferred_leader(context: ControllerContext, tp: TopicPartition) -> bool:
    """Kafka's ControllerContext.hasPreferredLeader: the leader is the first replica; a partition whose
    first replica is being added by a reassignment counts as balanced until that replica is in the ISR."""
    assignment = context.full_assignment(tp)
    state = context.leadership[tp]
    if not assignment.replicas:
        return True
    preferred = assignment.replicas[0]
    if assignment.is_being_reassigned and preferred in assignment.adding:
        return preferred not in state.isr
    return state.leader == preferred


def preferred_replica_imbalance(context: ControllerContext) -> int:
    """Partitions with a leader other than their preferred replica, topics queued for deletion apart."""
    return sum(
        1
        for tp in context.leadership
        if not context.is_topic_queued_for_deletion(tp.topic) and not has_preferred_leader(context, tp)
    )


def replicas_to_delete(context: ControllerContext, ineligible: bool) -> int:
    """The replicas of topics queued for deletion not deleted yet (``ineligible``: those ineligible)."""
    count = 0
    for topic in context.topics_to_be_deleted:
        for replica in context.replicas_for_topic(topic):
            state = context.replica_state(replica)
            if ineligible:
                count += state is ReplicaStatus.DELETION_INELIGIBLE
            else:
                count += state is not ReplicaStatus.DELETION_SUCCESSFUL
    return count


class _EventMetrics:
    """The event manager's observer: EventQueueTimeMs and each state's RateAndTimeMs."""

    def __init__(self, queue_time: HistogramChild, by_state: dict[ControllerState, HistogramChild]) -> None:
        self.queue_time = queue_time
        self.by_state = by_state

    def dequeued(self, event: ControllerEvent, queue_time_ms: float) -> None:
        self.queue_time.observe(queue_time_ms)

    def processed(self, event: ControllerEvent, processing_time_ms: float) -> None:
        timer = self.by_state.get(state_of(event))
        if timer is not None:
            timer.observe(processing_time_ms)


def register_controller_metrics(metrics: Metrics, server: ControllerServer) -> None:
    """Defines the controller's metrics in ``metrics``, reading ``server``'s parts."""
    register_zookeeper_metrics(metrics, server.zk)
    register_kafka_controller_metrics(metrics, server.controller)


def register_kafka_controller_metrics(metrics: Metrics, controller: KafkaController) -> None:
    """The KafkaController, ControllerEventManager and ControllerStats metrics of ``controller`` (before
    its startup: its elections are counted from then on)."""
    prefix = "kafka_controller_kafkacontroller_"

    def when_active(read: Callable[[ControllerContext], int]) -> Callable[[], int]:
        def gauge() -> int:
            context = controller.context
            return 0 if context is None else read(context)

        return gauge

    metrics.gauge(
        prefix + "activecontrollercount",
        "1 if this controller is the active one, else 0",
        lambda: 1 if controller.is_active else 0,
    )
    active_gauges: dict[str, tuple[str, Callable[[ControllerContext], int]]] = {
        "offlinepartitionscount": ("Partitions without a live leader", offline_partitions),
        "preferredreplicaimbalancecount": (
            "Partitions whose leader is not their preferred replica",
            preferred_replica_imbalance,
        ),
        "globaltopiccount": ("Topics in the cluster", lambda c: len(c.assignments)),
        "globalpartitioncount": (
            "Partitions with a leader and ISR in the cluster",
            lambda c: len(c.leadership),
        ),
        "activebrokercount": (
            "Registered brokers (shutting down ones included)",
            lambda c: len(c.live_brokers),
        ),
        "topicstodeletecount": ("Topics queued for deletion", lambda c: len(c.topics_to_be_deleted)),
        "replicastodeletecount": (
            "Replicas of topics queued for deletion not deleted yet",
            lambda c: replicas_to_delete(c, ineligible=False),
        ),
        "topicsineligibletodeletecount": (
            "Topics queued for deletion that cannot be deleted now",
            lambda c: len(c.topics_ineligible_for_deletion),
        ),
        "replicasineligibletodeletecount": (
            "Replicas of topics queued for deletion that cannot be deleted now",
            lambda c: replicas_to_delete(c, ineligible=True),
        ),
    }
    for name, (doc, read) in active_gauges.items():
        metrics.gauge(prefix + name, f"{doc} (0 on a standby controller)", when_active(read))
    events = controller.event_manager
    metrics.gauge(
        prefix + "controllerstate",
        "Kafka's ControllerState id of the event being processed (0: Idle)",
        lambda: int(state_of(events.current)),
    )
    metrics.gauge(
        "kafka_controller_controllereventmanager_eventqueuesize",
        "Events waiting in the controller's event queue",
        lambda: len(events),
    )
    queue_time = metrics.histogram(
        "kafka_controller_controllereventmanager_eventqueuetimems",
        "Milliseconds an event waited in the controller's event queue",
    ).labels()
    by_state: dict[ControllerState, HistogramChild] = {}
    for state in ControllerState:
        timer = state.rate_and_time_metric
        if timer is not None:
            by_state[state] = metrics.histogram(
                f"kafka_controller_controllerstats_{timer.lower()}",
                f"Milliseconds the controller took to process a {state.name} event",
            ).labels()
    events.observer = _EventMetrics(queue_time, by_state)

    unclean = metrics.counter(
        "kafka_controller_controllerstats_uncleanleaderelections",
        "Leaders elected from outside the ISR (data may have been lost)",
    ).labels()
    elections = metrics.counter(
        "samsa_controller_leader_elections",
        "Leaders elected for existing partitions, by election strategy",
        ("strategy",),
    )
    by_strategy = {strategy: elections.labels(strategy.value) for strategy in ElectionStrategy}

    def on_elected(strategy: ElectionStrategy, election: Election) -> None:
        by_strategy[strategy].inc()
        if election.unclean:
            unclean.inc()

    controller.on_elected = on_elected
