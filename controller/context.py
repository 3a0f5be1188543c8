"""ControllerContext: the active controller's picture of the cluster (Kafka's ControllerContext).

Everything the controller knows while it is active lives here: its epoch and the zkVersion of
``/controller_epoch`` that fences its writes, the live brokers with their epochs, the topics with their
ids and replica assignments (with the replicas being added and removed by reassignments in progress),
each partition's leader and ISR as last read from or written to ZooKeeper, the state of every partition
and replica in the two state machines, and the topics being deleted.
A context belongs to one reign: resigning drops it, and the next election loads a new one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from zk.znodes import BrokerRegistration, PartitionState


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class PartitionReplica(NamedTuple):
    partition: TopicPartition
    replica: int

    def __str__(self) -> str:
        return f"[{self.partition}, replica {self.replica}]"


class PartitionStatus(Enum):
    """The partition state machine's states."""

    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


class ReplicaStatus(Enum):
    """The replica state machine's states."""

    NON_EXISTENT = "NonExistentReplica"
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"


@dataclass(frozen=True)
class ReplicaAssignment:
    """A partition's full replica set (RS) and, while it is being reassigned, the replicas being added
    (AR) and removed (RR), as Kafka 2.4+ keeps them in ``/brokers/topics/<t>``. The origin replicas (ORS)
    are RS - AR, the target replicas (TRS) RS - RR."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """The assignment while moving from the origin replicas to ``target``: RS = TRS + ORS (target
        first, so that the preferred replica is the target's), AR = RS - ORS, RR = RS - TRS."""
        origin = self.origin
        full = tuple(dict.fromkeys([*target, *origin]))
        return ReplicaAssignment(
            full, tuple(r for r in full if r not in origin), tuple(r for r in full if r not in target)
        )


@dataclass(frozen=True)
class LiveBroker:
    """A registered broker: its registration and its epoch (the czxid of ``/brokers/ids/<id>``)."""

    registration: BrokerRegistration
    epoch: int

    @property
    def id(self) -> int:
        return self.registration.id


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = -1
    live_brokers: dict[int, LiveBroker] = field(default_factory=dict)
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    leadership: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionStatus] = field(default_factory=dict)
    replica_states: dict[PartitionReplica, ReplicaStatus] = field(default_factory=dict)
    topics_to_be_deleted: set[str] = field(default_factory=set)
    topics_with_deletion_started: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    # Reassignments in progress: the replicas being added and removed (RS is in ``assignments``).
    adding_replicas: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    partitions_being_reassigned: set[TopicPartition] = field(default_factory=set)
    # JBOD: per broker, the partitions whose replica there is in a failed log dir (learnt from the
    # KAFKA_STORAGE_ERROR of its LeaderAndIsr responses; controller.log_dir_events).
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    # -- brokers --------------------------------------------------------------------------------

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    @property
    def live_broker_ids(self) -> set[int]:
        """Brokers that may lead: registered and not shutting down."""
        return set(self.live_brokers) - self.shutting_down_broker_ids

    def broker_epoch(self, broker_id: int) -> int:
        broker = self.live_brokers.get(broker_id)
        return broker.epoch if broker is not None else -1

    def is_replica_online(
        self, broker_id: int, include_shutting_down: bool = False, partition: TopicPartition | None = None
    ) -> bool:
        """Kafka's isReplicaOnline: the broker is live (and, unless told, not shutting down) and, when
        ``partition`` is given, its replica of it is not in a failed log dir."""
        if partition is not None and partition in self.replicas_on_offline_dirs.get(broker_id, ()):
            return False
        if include_shutting_down:
            return broker_id in self.live_brokers
        return broker_id in self.live_brokers and broker_id not in self.shutting_down_broker_ids

    # -- topics and partitions ------------------------------------------------------------------

    @property
    def all_topics(self) -> set[str]:
        return set(self.assignments)

    def add_topic(self, topic: str, topic_id: uuid.UUID, partitions: dict[int, list[int]]) -> None:
        self.topic_ids[topic] = topic_id
        self.assignments.setdefault(topic, {}).update({p: list(r) for p, r in partitions.items()})

    def remove_topic(self, topic: str) -> None:
        for partition in self.partitions_for_topic(topic):
            self.leadership.pop(partition, None)
            self.partition_states.pop(partition, None)
        for replica in [r for r in self.replica_states if r.partition.topic == topic]:
            del self.replica_states[replica]
        for partition in [tp for tp in self.partitions_being_reassigned if tp.topic == topic]:
            self.partitions_being_reassigned.discard(partition)
            self.adding_replicas.pop(partition, None)
            self.removing_replicas.pop(partition, None)
        self.assignments.pop(topic, None)
        self.topic_ids.pop(topic, None)
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)

    def replicas(self, partition: TopicPartition) -> list[int]:
        return self.assignments.get(partition.topic, {}).get(partition.partition, [])

    def full_assignment(self, partition: TopicPartition) -> ReplicaAssignment:
        return ReplicaAssignment(
            tuple(self.replicas(partition)),
            self.adding_replicas.get(partition, ()),
            self.removing_replicas.get(partition, ()),
        )

    def set_full_assignment(self, partition: TopicPartition, assignment: ReplicaAssignment) -> None:
        """Replaces the partition's replicas (RS) and its replicas being added and removed."""
        self.assignments.setdefault(partition.topic, {})[partition.partition] = list(assignment.replicas)
        for adding_or_removing, replicas in (
            (self.adding_replicas, assignment.adding),
            (self.removing_replicas, assignment.removing),
        ):
            if replicas:
                adding_or_removing[partition] = replicas
            else:
                adding_or_removing.pop(partition, None)

    def all_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, parts in self.assignments.items() for p in sorted(parts)]

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def replicas_for_partitions(self, partitions: Iterable[TopicPartition]) -> list[PartitionReplica]:
        return [PartitionReplica(tp, r) for tp in partitions for r in self.replicas(tp)]

    def replicas_for_topic(self, topic: str) -> list[PartitionReplica]:
        return self.replicas_for_partitions(self.partitions_for_topic(topic))

    def replicas_on_brokers(self, broker_ids: set[int]) -> list[PartitionReplica]:
        return [
            PartitionReplica(tp, r)
            for tp in self.all_partitions()
            for r in self.replicas(tp)
            if r in broker_ids
        ]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.replicas(tp)]

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, state in self.leadership.items() if state.leader == broker_id]

    def partitions_with_offline_leader(self) -> list[TopicPartition]:
        """Partitions (of topics not being deleted) whose leader is gone or absent."""
        return [
            tp
            for tp, state in self.leadership.items()
            if not self.is_replica_online(state.leader, partition=tp)
            and not self.is_topic_queued_for_deletion(tp.topic)
        ]

    def online_and_offline_replicas(self) -> tuple[list[PartitionReplica], list[PartitionReplica]]:
        online: list[PartitionReplica] = []
        offline: list[PartitionReplica] = []
        for tp in self.all_partitions():
            for r in self.replicas(tp):
                (online if self.is_replica_online(r, True, tp) else offline).append(PartitionReplica(tp, r))
        return online, offline

    # -- state machine states -------------------------------------------------------------------

    def partition_state(self, partition: TopicPartition) -> PartitionStatus:
        return self.partition_states.get(partition, PartitionStatus.NON_EXISTENT)

    def replica_state(self, replica: PartitionReplica) -> ReplicaStatus:
        return self.replica_states.get(replica, ReplicaStatus.NON_EXISTENT)

    def replicas_in_state(self, topic: str, state: ReplicaStatus) -> list[PartitionReplica]:
        return [r for r in self.replicas_for_topic(topic) if self.replica_state(r) is state]

    # -- deletion -------------------------------------------------------------------------------

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted
