"""The broker's view of the cluster, that Metadata, DescribeCluster and request routing answer from.

Filled by the controller's UpdateMetadata requests (as in Kafka): the live brokers with their
advertised endpoints per listener and racks, and every partition's leader, leader epoch, ISR,
replicas and offline replicas, with the topics' ids. Until the first UpdateMetadata arrives the broker
knows only itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.messages import UpdateMetadataRequest

# UpdateMetadata's security protocol ids (Kafka's SecurityProtocol.id).
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
LEADER_DURING_DELETE = -2  # the controller marks a partition being deleted this way


@dataclass(frozen=True)
class BrokerEndpoint:
    host: str
    port: int


@dataclass(frozen=True)
class BrokerInfo:
    id: int
    rack: str | None
    endpoints: dict[str, BrokerEndpoint] = field(default_factory=dict)  # by listener name


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    partition_epoch: int  # the state znode's version


class MetadataCache:
    def __init__(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id
        self.controller_id = -1  # the active controller process, as its UpdateMetadata says
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, dict[int, PartitionMetadata]] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._topic_names: dict[uuid.UUID, str] = {}  # the reverse of _topic_ids
        # Told the partitions an UpdateMetadata deletes (Kafka's KafkaApis hands them to the group
        # coordinator's onPartitionsDeleted, which drops their committed offsets).
        self.partitions_deleted_listeners: list[Callable[[list[tuple[str, int]]], object]] = []

    # -- brokers --------------------------------------------------------------------------------

    def add_broker(self, broker: BrokerInfo) -> None:
        self._brokers[broker.id] = broker

    def alive_brokers(self) -> list[BrokerInfo]:
        return sorted(self._brokers.values(), key=lambda b: b.id)

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self._brokers

    def alive_endpoints(self, listener: str) -> list[tuple[BrokerInfo, BrokerEndpoint]]:
        """The live brokers that have ``listener``, with their address on it (Kafka leaves out the rest)."""
        return [(b, b.endpoints[listener]) for b in self.alive_brokers() if listener in b.endpoints]

    def endpoint(self, broker_id: int, listener: str) -> BrokerEndpoint | None:
        broker = self._brokers.get(broker_id)
        return broker.endpoints.get(listener) if broker else None

    # -- topics ---------------------------------------------------------------------------------

    def topic_names(self) -> list[str]:
        return sorted(self._topics)

    def contains(self, topic: str) -> bool:
        return topic in self._topics

    def partitions(self, topic: str) -> dict[int, PartitionMetadata]:
        return self._topics.get(topic, {})

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        return self._topics.get(topic, {}).get(partition)

    def topic_id(self, topic: str) -> uuid.UUID:
        return self._topic_ids.get(topic, uuid.UUID(int=0))

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with this id; None for an id the cluster does not know (or the zero id)."""
        return self._topic_names.get(topic_id)

    # -- updates --------------------------------------------------------------------------------

    def update(self, request: UpdateMetadataRequest, version: int) -> list[tuple[str, int]]:
        """Applies an UpdateMetadata request; returns the partitions it deletes."""
        self.controller_id = request.controller_id
        brokers: dict[int, BrokerInfo] = {}
        for broker in request.live_brokers:
            if version == 0:
                endpoints = {"PLAINTEXT": BrokerEndpoint(broker.v0_host, broker.v0_port)}
            else:
                endpoints = {
                    (
                        e.listener
                        if version >= 3
                        else SECURITY_PROTOCOLS.get(e.security_protocol, "PLAINTEXT")
                    ): (BrokerEndpoint(e.host, e.port))
                    for e in broker.endpoints
                }
            brokers[broker.id] = BrokerInfo(broker.id, broker.rack, endpoints)
        self._brokers = brokers
        deleted: list[tuple[str, int]] = []
        for topic, topic_id, state in _partition_states(request, version):
            if state.leader == LEADER_DURING_DELETE:
                partitions = self._topics.get(topic)
                if partitions is not None and partitions.pop(state.partition_index, None) is not None:
                    deleted.append((topic, state.partition_index))
                    if not partitions:
                        del self._topics[topic]
                        self._topic_names.pop(self._topic_ids.pop(topic, uuid.UUID(int=0)), None)
                continue
            self._topics.setdefault(topic, {})[state.partition_index] = PartitionMetadata(
                state.partition_index,
                state.leader,
                state.leader_epoch,
                tuple(state.isr),
                tuple(state.replicas),
                tuple(state.offline_replicas),
                state.zk_version,
            )
            if topic_id is not None and topic_id.int and self._topic_ids.get(topic) != topic_id:
                self._topic_names.pop(self._topic_ids.get(topic, uuid.UUID(int=0)), None)
                self._topic_ids[topic] = topic_id
                self._topic_names[topic_id] = topic
        if deleted:
            for listener in self.partitions_deleted_listeners:
                listener(deleted)
        return deleted


def _partition_states(
    request: UpdateMetadataRequest, version: int
) -> list[tuple[str, uuid.UUID | None, UpdateMetadataRequest.UpdateMetadataPartitionState]]:
    """(topic, topic id, partition state) for both layouts: ungrouped before v5, per topic from v5."""
    if version < 5:
        return [(s.topic_name, None, s) for s in request.ungrouped_partition_states]
    return [(t.topic_name, t.topic_id, s) for t in request.topic_states for s in t.partition_states]
