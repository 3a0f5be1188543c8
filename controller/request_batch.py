"""ControllerBrokerRequestBatch: gathers the requests one state change produces, then sends one request of
each kind per broker (Kafka's ControllerBrokerRequestBatch).

Per broker, LeaderAndIsr goes first, then UpdateMetadata, then StopReplica, as Kafka sends them. Every
request carries the controller's id and epoch and the receiving broker's epoch. A LeaderAndIsr is
``full`` (type 2) when it lists every partition the broker hosts (after a failover, or when the broker
has just started), else incremental (type 1). A partition of a topic being deleted is sent to
UpdateMetadata with leader -2, and to StopReplica with leader epoch -2, so that brokers drop it
whatever epoch they hold.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from controller.context import ControllerContext, TopicPartition
from protocol.api import Api, ApiKey, api
from protocol.errors import ErrorCode
from protocol.messages import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from zk.znodes import PartitionState

log = logging.getLogger(__name__)

LEADER_AND_ISR_VERSION = 6
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3

LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1
INCREMENTAL = 1
FULL = 2

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

# (broker id, StopReplica error code, {partition: error code} of the partitions it was asked to delete)
StopReplicaDeletionCallback = Callable[[int, int, dict[TopicPartition, int]], None]


class RequestSender(Protocol):
    def endpoint(self, broker_id: int) -> tuple[str, int] | None: ...

    def send(
        self, broker_id: int, api: Api, version: int, body: Any, callback: Callable[[Any], None] | None
    ) -> None: ...


class ControllerBrokerRequestBatch:
    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        sender: RequestSender,
        on_stop_replica_deletion: StopReplicaDeletionCallback,
    ) -> None:
        self._controller_id = controller_id
        self._context = context
        self._sender = sender
        self._on_deletion = on_stop_replica_deletion
        self._prefix = f"[Controller id={controller_id} epoch={context.epoch}]"
        self._leader_and_isr: dict[int, dict[TopicPartition, Any]] = defaultdict(dict)
        self._full: set[int] = set()
        self._update_metadata_brokers: set[int] = set()
        self._update_metadata_partitions: dict[TopicPartition, Any] = {}
        self._stop_replica: dict[int, dict[TopicPartition, Any]] = defaultdict(dict)

    def new_batch(self) -> None:
        """Starts a batch; anything left by a state change that failed half-way is dropped."""
        self._leader_and_isr.clear()
        self._full.clear()
        self._update_metadata_brokers.clear()
        self._update_metadata_partitions.clear()
        self._stop_replica.clear()

    @property
    def empty(self) -> bool:
        return not (self._leader_and_isr or self._full or self._update_metadata_brokers or self._stop_replica)

    # -- adding ---------------------------------------------------------------------------------

    def add_leader_and_isr(
        self, broker_ids: Iterable[int], partition: TopicPartition, state: PartitionState, is_new: bool
    ) -> None:
        assignment = self._context.full_assignment(partition)
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            earlier = self._leader_and_isr[broker_id].get(partition)
            self._leader_and_isr[broker_id][partition] = LeaderAndIsrRequest.LeaderAndIsrPartitionState(
                partition_index=partition.partition,
                controller_epoch=state.controller_epoch,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                isr=list(state.isr),
                partition_epoch=state.zk_version,
                replicas=list(assignment.replicas),
                adding_replicas=list(assignment.adding),
                removing_replicas=list(assignment.removing),
                is_new=is_new or (earlier is not None and earlier.is_new),
            )
        self.add_update_metadata(self._context.live_or_shutting_down_broker_ids, [partition])

    def mark_full(self, broker_ids: Iterable[int]) -> None:
        """These brokers' LeaderAndIsr will list all their partitions: send it as type full, even empty."""
        self._full.update(broker_ids)

    def add_update_metadata(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition] | None
    ) -> None:
        """UpdateMetadata to ``broker_ids`` with these partitions (None: every partition with a leader
        and ISR; an empty list: the live brokers only)."""
        self._update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        for partition in self._context.leadership if partitions is None else partitions:
            state = self._context.leadership.get(partition)
            if state is None:
                continue
            replicas = self._context.replicas(partition)
            deleting = self._context.is_topic_queued_for_deletion(partition.topic)
            self._update_metadata_partitions[partition] = UpdateMetadataRequest.UpdateMetadataPartitionState(
                partition_index=partition.partition,
                controller_epoch=state.controller_epoch,
                leader=LEADER_DURING_DELETE if deleting else state.leader,
                leader_epoch=state.leader_epoch,
                isr=list(state.isr),
                zk_version=state.zk_version,
                replicas=list(replicas),
                offline_replicas=[
                    r for r in replicas if not self._context.is_replica_online(r, partition=partition)
                ],
            )

    def add_stop_replica(self, broker_ids: Iterable[int], partition: TopicPartition, delete: bool) -> None:
        if self._context.is_topic_queued_for_deletion(partition.topic):
            leader_epoch = EPOCH_DURING_DELETE
        else:
            state = self._context.leadership.get(partition)
            leader_epoch = state.leader_epoch if state is not None else NO_EPOCH
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            earlier = self._stop_replica[broker_id].get(partition)
            self._stop_replica[broker_id][partition] = StopReplicaRequest.StopReplicaPartitionState(
                partition_index=partition.partition,
                leader_epoch=leader_epoch,
                delete_partition=delete or (earlier is not None and earlier.delete_partition),
            )

    # -- sending --------------------------------------------------------------------------------

    def send(self) -> None:
        """Sends everything gathered, per broker in Kafka's order, and starts a new batch."""
        live = self._context.live_brokers
        for broker_id in sorted(set(self._leader_and_isr) | self._full):
            if broker_id in live:
                self._send_leader_and_isr(broker_id, self._leader_and_isr.get(broker_id, {}))
        if self._update_metadata_brokers:
            topic_states, live_brokers = self._update_metadata_contents()
            for broker_id in sorted(self._update_metadata_brokers):
                if broker_id in live:
                    request = UpdateMetadataRequest(
                        controller_id=self._controller_id,
                        controller_epoch=self._context.epoch,
                        broker_epoch=self._context.broker_epoch(broker_id),
                        topic_states=topic_states,
                        live_brokers=live_brokers,
                    )
                    self._sender.send(
                        broker_id,
                        api(ApiKey.UPDATE_METADATA),
                        UPDATE_METADATA_VERSION,
                        request,
                        self._update_metadata_callback(broker_id),
                    )
        for broker_id, partitions in sorted(self._stop_replica.items()):
            if broker_id in live and partitions:
                self._send_stop_replica(broker_id, partitions)
        self.new_batch()

    def _send_leader_and_isr(self, broker_id: int, partitions: dict[TopicPartition, Any]) -> None:
        by_topic: dict[str, list[Any]] = defaultdict(list)
        for partition, state in sorted(partitions.items()):
            by_topic[partition.topic].append(state)
        leaders = sorted({s.leader for s in partitions.values() if s.leader in self._context.live_brokers})
        live_leaders = []
        for leader in leaders:
            endpoint = self._sender.endpoint(leader)
            if endpoint is not None:
                live_leaders.append(
                    LeaderAndIsrRequest.LeaderAndIsrLiveLeader(
                        broker_id=leader, host_name=endpoint[0], port=endpoint[1]
                    )
                )
        request = LeaderAndIsrRequest(
            controller_id=self._controller_id,
            controller_epoch=self._context.epoch,
            broker_epoch=self._context.broker_epoch(broker_id),
            type=FULL if broker_id in self._full else INCREMENTAL,
            topic_states=[
                LeaderAndIsrRequest.LeaderAndIsrTopicState(
                    topic_name=topic, topic_id=self._context.topic_ids[topic], partition_states=states
                )
                for topic, states in by_topic.items()
            ],
            live_leaders=live_leaders,
        )
        log.debug(
            "%s sending LeaderAndIsr (%d partitions) to broker %d", self._prefix, len(partitions), broker_id
        )
        self._sender.send(
            broker_id,
            api(ApiKey.LEADER_AND_ISR),
            LEADER_AND_ISR_VERSION,
            request,
            self._leader_and_isr_callback(broker_id),
        )

    def _update_metadata_contents(self) -> tuple[list[Any], list[Any]]:
        """(topic states, live brokers) of this batch's UpdateMetadata, the same for every recipient."""
        by_topic: dict[str, list[Any]] = defaultdict(list)
        for partition, state in sorted(self._update_metadata_partitions.items()):
            by_topic[partition.topic].append(state)
        topic_states = [
            UpdateMetadataRequest.UpdateMetadataTopicState(
                topic_name=topic, topic_id=self._context.topic_ids[topic], partition_states=states
            )
            for topic, states in by_topic.items()
        ]
        brokers = []
        for broker_id, broker in sorted(self._context.live_brokers.items()):
            registration = broker.registration
            brokers.append(
                UpdateMetadataRequest.UpdateMetadataBroker(
                    id=broker_id,
                    endpoints=[
                        UpdateMetadataRequest.UpdateMetadataEndpoint(
                            port=port,
                            host=host,
                            listener=name,
                            security_protocol=SECURITY_PROTOCOL_IDS.get(
                                registration.security_protocols.get(name, name), 0
                            ),
                        )
                        for name, (host, port) in registration.endpoints.items()
                    ],
                    rack=registration.rack,
                )
            )
        return topic_states, brokers

    def _send_stop_replica(self, broker_id: int, partitions: dict[TopicPartition, Any]) -> None:
        by_topic: dict[str, list[Any]] = defaultdict(list)
        for partition, state in sorted(partitions.items()):
            by_topic[partition.topic].append(state)
        request = StopReplicaRequest(
            controller_id=self._controller_id,
            controller_epoch=self._context.epoch,
            broker_epoch=self._context.broker_epoch(broker_id),
            topic_states=[
                StopReplicaRequest.StopReplicaTopicState(topic_name=topic, partition_states=states)
                for topic, states in by_topic.items()
            ],
        )
        deleted = {p for p, s in partitions.items() if s.delete_partition}
        self._sender.send(
            broker_id,
            api(ApiKey.STOP_REPLICA),
            STOP_REPLICA_VERSION,
            request,
            self._stop_replica_callback(broker_id, deleted),
        )

    # -- responses ------------------------------------------------------------------------------

    def _leader_and_isr_callback(self, broker_id: int) -> Callable[[Any], None]:
        def on_response(response: Any) -> None:
            if response.error_code != ErrorCode.NONE:
                log.warning(
                    "%s broker %d answered LeaderAndIsr with %s",
                    self._prefix,
                    broker_id,
                    ErrorCode(response.error_code).name,
                )
                return
            errors = Counter(
                ErrorCode(p.error_code).name
                for topic in response.topics
                for p in topic.partition_errors
                if p.error_code != ErrorCode.NONE
            )
            if errors:
                # A broker answers STALE_CONTROLLER_EPOCH for a partition whose leader epoch it already
                # has, as after a failover resends every state: expected, so not a warning.
                expected = set(errors) == {ErrorCode.STALE_CONTROLLER_EPOCH.name}
                log.log(
                    logging.INFO if expected else logging.WARNING,
                    "%s broker %d answered LeaderAndIsr with partition errors %s",
                    self._prefix,
                    broker_id,
                    dict(errors),
                )

        return on_response

    def _update_metadata_callback(self, broker_id: int) -> Callable[[Any], None]:
        def on_response(response: Any) -> None:
            if response.error_code != ErrorCode.NONE:
                log.warning(
                    "%s broker %d answered UpdateMetadata with %s",
                    self._prefix,
                    broker_id,
                    ErrorCode(response.error_code).name,
                )

        return on_response

    def _stop_replica_callback(self, broker_id: int, deleted: set[TopicPartition]) -> Callable[[Any], None]:
        def on_response(response: Any) -> None:
            errors = {
                TopicPartition(p.topic_name, p.partition_index): p.error_code
                for p in response.partition_errors
            }
            if response.error_code != ErrorCode.NONE:
                log.warning(
                    "%s broker %d answered StopReplica with %s",
                    self._prefix,
                    broker_id,
                    ErrorCode(response.error_code).name,
                )
            if deleted:
                self._on_deletion(
                    broker_id, response.error_code, {p: errors.get(p, ErrorCode.NONE) for p in deleted}
                )

        return on_response
