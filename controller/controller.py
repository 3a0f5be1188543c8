"""KafkaController: election, failover and the reactions to cluster changes (Kafka's KafkaController).

Every candidate watches ``/controller``; when nobody holds it, each tries the election transaction and
one wins a new epoch. The winner loads a fresh context from ZooKeeper, connects to every live broker,
sends them all UpdateMetadata and a full LeaderAndIsr, and elects leaders where there is no live one.
Then it reacts, one event at a time, to brokers coming and going, topics created, extended and
deleted, and brokers asking to shut down.

A controller resigns the moment it learns it is no longer active: ``/controller`` now names another
holder, a fenced write found a newer epoch, or its ZooKeeper session was lost. Resigning stops every
sender at once and drops the context. After a lost session the controller stands for election again
with its new session. Watches are registered once per process and ignored while standing by.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from controller.alter_partition import IsrChange, alter_partition
from controller.channel_manager import ClientFactory, ControllerChannelManager, network_client
from controller.config import ControllerConfig
from controller.context import (
    ControllerContext,
    PartitionReplica,
    PartitionStatus,
    ReplicaAssignment,
    ReplicaStatus,
    TopicPartition,
)
from controller.controller_zk import ControllerMovedError, ControllerZkClient
from controller.election import Election, ElectionStrategy
from controller.event_manager import ControllerEventManager
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
from controller.log_dir_events import (
    LeaderAndIsrResponseReceived,
    LogDirEventNotification,
    ResponseTap,
    on_broker_log_dir_failure,
    on_leader_and_isr_response,
    partition_errors,
    read_notifications,
)
from controller.partition_state_machine import PartitionStateMachine
from controller.reassignment import ApiResult, PartitionReassignmentManager
from controller.replica_election import ElectionResult, ElectionTrigger, ElectionType, ReplicaElectionManager
from controller.replica_state_machine import ReplicaStateMachine
from controller.request_batch import ControllerBrokerRequestBatch
from controller.topic_deletion import TopicDeletionManager
from network.client_security import ClientSecurity
from protocol.errors import ErrorCode, KafkaError
from zk import znodes
from zk.client import ZkClient
from zk.znodes import PartitionState

log = logging.getLogger(__name__)

FIRST_REBALANCE_CHECK_DELAY = 5.0  # seconds after becoming active (Kafka's)


@dataclass(eq=False)
class _Reign:
    """What exists only while this controller is active; dropped whole on resignation."""

    context: ControllerContext
    channel: ControllerChannelManager
    batch: ControllerBrokerRequestBatch
    partitions: PartitionStateMachine
    replicas: ReplicaStateMachine
    deletion: TopicDeletionManager
    elections: ReplicaElectionManager
    reassignments: PartitionReassignmentManager
    rebalance_task: asyncio.Task | None = None  # queues the auto-rebalance check periodically
    fenced: bool = False  # deposed: the event in progress must not write or send anything more


class KafkaController:
    def __init__(
        self,
        config: ControllerConfig,
        zk: ZkClient,
        client_factory: ClientFactory | None = None,
    ) -> None:
        self.config = config
        self.id = config.controller_id
        self.endpoints: list[str] = []
        if client_factory is None:
            # The brokers' inter-broker listener, reached as they reach each other (TLS, SASL); a
            # setting that cannot work (no JAAS credentials for SASL, say) fails the startup here.
            client_factory = functools.partial(
                network_client, security=ClientSecurity.for_inter_broker(config)
            )
        self._client_factory = client_factory
        self._zk_client = zk
        self.zk = ControllerZkClient(zk, lambda: not self.is_active)
        self._events = ControllerEventManager(self._process, f"controller-event-thread-{self.id}")
        self._reign: _Reign | None = None
        # Told of every leader elected for an existing partition (set before startup; controller_metrics).
        self.on_elected: Callable[[ElectionStrategy, Election], None] | None = None
        self.active_controller_id = -1
        self._watched_topics: set[str] = set()
        self._watched_brokers: set[int] = set()
        self._watching = False
        self._handlers: dict[type, Callable[[ControllerEvent], Awaitable[None]]] = {
            Startup: self._on_startup,
            ControllerChange: self._on_controller_change,
            SessionExpired: self._on_session_expired,
            BrokerChange: self._active_only(self._on_broker_change),
            TopicChange: self._active_only(self._on_topic_change),
            PartitionModifications: self._active_only(self._on_partition_modifications),
            TopicDeletion: self._active_only(self._on_topic_deletion),
            ControlledShutdown: self._on_controlled_shutdown,
            StopReplicaResponseReceived: self._active_only(self._on_stop_replica_response),
            AlterPartitionReceived: self._on_alter_partition,
            ReplicaLeaderElection: self._on_replica_leader_election,
            PreferredReplicaElectionRequested: self._active_only(self._on_preferred_replica_election_znode),
            AutoPreferredReplicaLeaderElection: self._active_only(self._on_auto_rebalance_check),
            ZkPartitionReassignment: self._active_only(self._on_reassignment_znode),
            ApiPartitionReassignment: self._on_api_partition_reassignment,
            ListPartitionReassignments: self._on_list_partition_reassignments,
            LogDirEventNotification: self._active_only(self._on_log_dir_event_notification),
            LeaderAndIsrResponseReceived: self._active_only(self._on_leader_and_isr_response),
        }

    # -- public ---------------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self._reign is not None and not self._reign.fenced

    @property
    def event_manager(self) -> ControllerEventManager:
        return self._events

    @property
    def context(self) -> ControllerContext | None:
        """The active controller's context (None while standing by)."""
        return self._reign.context if self.is_active and self._reign is not None else None

    @property
    def prefix(self) -> str:
        if self._reign is not None:
            return f"[Controller id={self.id} epoch={self._reign.context.epoch}]"
        return f"[Controller id={self.id}]"

    async def startup(self, endpoints: Sequence[str]) -> None:
        """Starts the event task and runs for election; ``endpoints`` (``LISTENER://host:port``) are
        published in ``/controller`` for brokers to reach this controller."""
        self.endpoints = list(endpoints)
        self._zk_client.add_session_listener(self._on_session_state)
        self._events.start()
        self._events.put(Startup())

    async def shutdown(self) -> None:
        """Finishes the event in progress, then resigns (deleting ``/controller`` if it is ours)."""
        await self._events.close()
        await self._resign(delete_znode=True)

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        """Moves leadership off a broker that is shutting down; returns the partitions it still leads."""
        if not self.is_active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER)
        event = ControlledShutdown(broker_id, broker_epoch)
        self._events.put(event)
        try:
            return await event.result
        except ControllerMovedError:
            raise KafkaError(ErrorCode.NOT_CONTROLLER) from None

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: dict[tuple[str | uuid.UUID, int], IsrChange]
    ) -> dict[tuple[str | uuid.UUID, int], PartitionState | ErrorCode]:
        """Applies ISR changes asked for by a partition leader (AlterPartition). Partitions are named by
        (topic name or topic id, partition), as the request version names them."""
        if not self.is_active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER)
        event = AlterPartitionReceived(broker_id, broker_epoch, changes)
        self._events.put(event)
        try:
            return await event.result
        except ControllerMovedError:
            raise KafkaError(ErrorCode.NOT_CONTROLLER) from None

    async def elect_leaders(
        self, partitions: set[TopicPartition] | None, election_type: ElectionType
    ) -> dict[TopicPartition, ElectionResult]:
        """ElectLeaders: per partition (None: every partition), the new leader or the error."""
        return await self._request(ReplicaLeaderElection(partitions, election_type))

    async def alter_partition_reassignments(
        self, reassignments: dict[TopicPartition, list[int] | None]
    ) -> dict[TopicPartition, ApiResult]:
        """AlterPartitionReassignments: per partition, (error code, message)."""
        return await self._request(ApiPartitionReassignment(reassignments))

    async def list_partition_reassignments(
        self, partitions: set[TopicPartition] | None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        """ListPartitionReassignments: the partitions (None: all) being reassigned."""
        return await self._request(ListPartitionReassignments(partitions))

    async def _request(
        self, event: ReplicaLeaderElection | ApiPartitionReassignment | ListPartitionReassignments
    ) -> Any:
        if not self.is_active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER)
        self._events.put(event)
        try:
            return await event.result
        except ControllerMovedError:
            raise KafkaError(ErrorCode.NOT_CONTROLLER) from None

    # -- event plumbing -------------------------------------------------------------------------

    async def _process(self, event: ControllerEvent) -> None:
        try:
            await self._handlers[type(event)](event)
        except ControllerMovedError as e:
            log.info("%s %s; resigning", self.prefix, e)
            event.abandon()
            # As Kafka's triggerControllerMove: /controller is deleted only if this epoch is still the
            # current one (the fenced delete fails harmlessly when another controller was elected).
            await self._resign(delete_znode=True)

    def _active_only(
        self, handler: Callable[[ControllerEvent], Awaitable[None]]
    ) -> Callable[[ControllerEvent], Awaitable[None]]:
        async def run(event: ControllerEvent) -> None:
            if self.is_active:
                await handler(event)

        return run

    def _on_session_state(self, state: str) -> None:
        if state != "LOST":
            return
        if self._reign is not None:
            # Fence at once, before the event queue gets to it: nothing more goes out or gets written.
            log.warning("%s ZooKeeper session lost: this controller is deposed", self.prefix)
            self._reign.fenced = True
            self._reign.channel.stop()
        self._events.clear_and_put(SessionExpired())

    def _put_if_active(self, event: ControllerEvent) -> None:
        if self.is_active:
            self._events.put(event)

    # -- election -------------------------------------------------------------------------------

    async def _on_startup(self, _: ControllerEvent) -> None:
        await self.zk.ensure_persistent_paths()
        zk = self._zk_client
        self._watching = True
        zk.watch_data(znodes.CONTROLLER, lambda data, stat: self._events.put(ControllerChange()))
        zk.watch_children(znodes.BROKER_IDS, lambda children: self._put_if_active(BrokerChange()))
        zk.watch_children(znodes.TOPICS, lambda children: self._put_if_active(TopicChange()))
        zk.watch_children(znodes.DELETE_TOPICS, lambda children: self._put_if_active(TopicDeletion()))
        zk.watch_data(znodes.REASSIGN_PARTITIONS, self._on_creation(ZkPartitionReassignment))
        zk.watch_data(znodes.PREFERRED_REPLICA_ELECTION, self._on_creation(PreferredReplicaElectionRequested))
        zk.watch_children(
            znodes.LOG_DIR_EVENT_NOTIFICATION,
            lambda children: self._put_if_active(LogDirEventNotification()) if children else None,
        )
        await self._elect()

    def _on_creation(self, event_type: type[ControllerEvent]) -> Callable[[bytes | None, Any], None]:
        """A data watch callback that queues ``event_type`` when the node is created, as Kafka's handlers
        of /admin/reassign_partitions and /admin/preferred_replica_election react to creation only (the
        controller rewrites and deletes them itself). A failover reads whatever is there."""
        seen: list[int | None] = [None]  # the czxid of the node last seen

        def on_change(data: bytes | None, stat: Any) -> None:
            czxid = stat.czxid if stat is not None else None
            if czxid is not None and czxid != seen[0]:
                self._put_if_active(event_type())
            seen[0] = czxid

        return on_change

    async def _on_controller_change(self, _: ControllerEvent) -> None:
        holder = await self.zk.active_controller()
        if self._reign is not None and (holder is None or holder[1] != self._zk_client.session_id):
            log.info(
                "%s /controller is now %s: resigning",
                self.prefix,
                "empty" if holder is None else f"held by controller {holder[0]}",
            )
            await self._resign(delete_znode=False)
        if holder is None:
            await self._elect()
        elif holder[0] != self.active_controller_id:
            self.active_controller_id = holder[0]
            if holder[0] != self.id:
                log.info("%s standing by: controller %d is active", self.prefix, holder[0])

    async def _on_session_expired(self, event: ControllerEvent) -> None:
        if not self._watching:
            await self._on_startup(event)  # the session was lost before Startup ran: it was dropped
            return
        await self._resign(delete_znode=False)
        log.info("%s standing for election again with a new ZooKeeper session", self.prefix)
        await self._elect()

    async def _elect(self) -> None:
        holder = await self.zk.active_controller()
        if holder is None:
            try:
                epoch, epoch_zk_version = await self.zk.register_controller(self.id, self.endpoints)
            except ControllerMovedError:
                holder = await self.zk.active_controller()
            else:
                await self._on_controller_failover(epoch, epoch_zk_version)
                return
        if holder is None:
            return  # the winner is already gone: its removal queues another election
        self.active_controller_id = holder[0]
        log.info("%s standing by: controller %d is active", self.prefix, holder[0])

    async def _on_controller_failover(self, epoch: int, epoch_zk_version: int) -> None:
        context = ControllerContext(epoch=epoch, epoch_zk_version=epoch_zk_version)
        prefix = f"[Controller id={self.id} epoch={epoch}]"
        channel = ControllerChannelManager(
            self.id,
            epoch,
            self.config["controller.socket.timeout.ms"] / 1000,
            self.config.inter_broker_listener,
            self.config.inter_broker_protocol,
            self._client_factory,
        )
        # JBOD: LeaderAndIsr responses tell which replicas are in failed log dirs (log_dir_events).
        tap = ResponseTap(
            channel,
            lambda broker_id, response: self._put_if_active(
                LeaderAndIsrResponseReceived(
                    broker_id, response.error_code, partition_errors(context, response)
                )
            ),
        )
        batch = ControllerBrokerRequestBatch(self.id, context, tap, self._on_stop_replica_deletion)
        partitions = PartitionStateMachine(
            context, self.zk, batch, self.config["unclean.leader.election.enable"], prefix
        )
        partitions.on_elected = self.on_elected
        replicas = ReplicaStateMachine(context, self.zk, batch, prefix)
        deletion = TopicDeletionManager(context, self.zk, partitions, replicas, batch, prefix)
        elections = ReplicaElectionManager(
            context, self.zk, partitions, self.config["leader.imbalance.per.broker.percentage"], prefix
        )
        reassignments = PartitionReassignmentManager(
            context, self.zk, partitions, replicas, batch, deletion, prefix
        )
        self._reign = _Reign(
            context, channel, batch, partitions, replicas, deletion, elections, reassignments
        )
        self.active_controller_id = self.id
        log.info("[Controller id=%d] elected as active controller, epoch %d", self.id, epoch)
        try:
            await self._initialize_context()
            await self._initialize_deletion()
            batch.new_batch()
            batch.add_update_metadata(context.live_or_shutting_down_broker_ids, None)
            batch.send()
            await replicas.startup()
            await partitions.startup()
            log.info(
                "%s ready: %d live brokers %s, %d topics, %d partitions",
                self.prefix,
                len(context.live_brokers),
                sorted(context.live_brokers),
                len(context.assignments),
                len(context.leadership),
            )
            # Reassignments asked for through ZooKeeper while there was no controller, then those that
            # were in progress (read back from /brokers/topics).
            started = await reassignments.on_request_znode()
            await reassignments.resume(lambda tp, _: tp not in started)
            await deletion.resume_deletions()
            await elections.on_request_znode()
            self._events.put(LogDirEventNotification())  # notifications written while there was none
            if self.config["auto.leader.rebalance.enable"]:
                self._reign.rebalance_task = asyncio.get_running_loop().create_task(
                    self._schedule_auto_rebalance(), name=f"auto-leader-rebalance-{self.id}"
                )
        except ControllerMovedError:
            raise
        except Exception:
            log.exception("%s failed to take over as controller; resigning", prefix)
            await self._resign(delete_znode=True)

    async def _initialize_context(self) -> None:
        reign = self._active()
        context = reign.context
        context.live_brokers = await self.zk.live_brokers()
        for broker_id in context.live_brokers:
            self._watch_broker(broker_id)
        await self._add_topics(await self.zk.topics())
        states = await self.zk.partition_states(context.all_partitions())
        context.leadership = {tp: s for tp, s in states.items() if s is not None}
        for broker in context.live_brokers.values():
            reign.channel.add_broker(broker)

    async def _add_topics(self, topics: Sequence[str]) -> list[TopicPartition]:
        """Reads the topics' assignments into the context (giving old ones a topic id); returns their
        partitions."""
        context = self._active().context
        records = await self.zk.topic_records(topics)
        added: list[TopicPartition] = []
        for topic, record in sorted(records.items()):
            if not record.has_topic_id:
                await self.zk.set_topic_id(topic, record, context.epoch_zk_version)
            context.add_topic(topic, record.assignment.topic_id, record.assignment.partitions)
            for partition, replicas in record.assignment.partitions.items():
                assignment = ReplicaAssignment(
                    tuple(replicas),
                    tuple(record.assignment.adding_replicas.get(partition, ())),
                    tuple(record.assignment.removing_replicas.get(partition, ())),
                )
                if assignment.is_being_reassigned:
                    tp = TopicPartition(topic, partition)
                    context.set_full_assignment(tp, assignment)
                    context.partitions_being_reassigned.add(tp)
            added += context.partitions_for_topic(topic)
            self._watch_topic(topic)
        return added

    async def _initialize_deletion(self) -> None:
        context = self._active().context
        queued = await self._deletion_requests()
        with_offline_replicas = {
            r.partition.topic for r in context.online_and_offline_replicas()[1] if r.partition.topic in queued
        }
        self._active().deletion.init(queued, with_offline_replicas)

    async def _deletion_requests(self) -> set[str]:
        """The topics under /admin/delete_topics that will be deleted. Requests are removed when
        deletion is disabled (the topics are kept) and for topics that do not exist."""
        context = self._active().context
        queued = set(await self.zk.topic_deletions())
        if queued and not self.config["delete.topic.enable"]:
            log.info(
                "%s removing %s from /admin/delete_topics: delete.topic.enable is false",
                self.prefix,
                sorted(queued),
            )
            await self.zk.delete_topic_deletions(queued, context.epoch_zk_version)
            return set()
        unknown = queued - context.all_topics
        if unknown:
            log.info("%s removing deletion requests for unknown topics %s", self.prefix, sorted(unknown))
            await self.zk.delete_topic_deletions(unknown, context.epoch_zk_version)
        return queued - unknown

    def _watch_broker(self, broker_id: int) -> None:
        # A rewritten registration (same session) changes no child of /brokers/ids: a data watch per
        # broker (Kafka's BrokerModificationsHandler), one for the life of the process like the topics'.
        if broker_id in self._watched_brokers:
            return
        self._watched_brokers.add(broker_id)
        self._zk_client.watch_data(
            znodes.broker_path(broker_id), lambda data, stat: self._put_if_active(BrokerChange())
        )

    def _watch_topic(self, topic: str) -> None:
        # kazoo's data watches cannot be removed; one per topic for the life of the process, ignored
        # while standing by.
        if topic in self._watched_topics:
            return
        self._watched_topics.add(topic)
        self._zk_client.watch_data(
            znodes.topic_path(topic), lambda data, stat: self._put_if_active(PartitionModifications(topic))
        )

    def _active(self) -> _Reign:
        reign = self._reign
        if reign is None or reign.fenced:
            raise ControllerMovedError("this controller is not active")
        return reign

    async def _resign(self, delete_znode: bool) -> None:
        reign, self._reign = self._reign, None
        if reign is None:
            return
        reign.fenced = True
        if reign.rebalance_task is not None:
            reign.rebalance_task.cancel()
        await reign.channel.shutdown()
        if delete_znode:
            try:
                await self.zk.resign(reign.context.epoch_zk_version)
            except ControllerMovedError:
                pass  # another controller was elected meanwhile: /controller is not ours to delete
        self.active_controller_id = -1
        log.info(
            "[Controller id=%d] resigned as the active controller (epoch %d)", self.id, reign.context.epoch
        )

    # -- brokers --------------------------------------------------------------------------------

    async def _on_broker_change(self, _: ControllerEvent) -> None:
        reign = self._active()
        context = reign.context
        current = await self.zk.live_brokers()
        known = dict(context.live_brokers)
        new = sorted(current.keys() - known.keys())
        dead = sorted(known.keys() - current.keys())
        bounced = sorted(b for b in current.keys() & known.keys() if current[b].epoch > known[b].epoch)
        # Kafka's BrokerModifications: the same registration rewritten (dynamic advertised.listeners).
        modified = sorted(
            b
            for b in current.keys() & known.keys()
            if current[b].epoch == known[b].epoch and current[b].registration != known[b].registration
        )
        for broker_id in current:
            self._watch_broker(broker_id)
        if modified:
            log.info("%s broker modifications: %s", self.prefix, [current[b].registration for b in modified])
            context.live_brokers.update({b: current[b] for b in modified})
            reign.batch.new_batch()  # every broker learns the new endpoints (Kafka's onBrokerUpdate)
            reign.batch.add_update_metadata(context.live_or_shutting_down_broker_ids, [])
            reign.batch.send()
        if not (new or dead or bounced):
            return
        log.info(
            "%s broker change: new %s, dead %s, bounced %s; live brokers now %s",
            self.prefix,
            new,
            dead,
            bounced,
            sorted(current),
        )
        for broker_id in new:
            reign.channel.add_broker(current[broker_id])
        for broker_id in bounced:
            reign.channel.remove_broker(broker_id)
            reign.channel.add_broker(current[broker_id])
        for broker_id in dead:
            reign.channel.remove_broker(broker_id)
        if new:
            context.live_brokers.update({b: current[b] for b in new})
            await self._on_broker_startup(new)
        if bounced:
            for broker_id in bounced:
                del context.live_brokers[broker_id]
            await self._on_broker_failure(bounced)
            context.live_brokers.update({b: current[b] for b in bounced})
            await self._on_broker_startup(bounced)
        if dead:
            for broker_id in dead:
                del context.live_brokers[broker_id]
            await self._on_broker_failure(dead)

    async def _on_broker_startup(self, new_brokers: list[int]) -> None:
        reign = self._active()
        context = reign.context
        for broker_id in new_brokers:  # its log dirs are checked afresh (its LeaderAndIsr responses)
            context.replicas_on_offline_dirs.pop(broker_id, None)
        existing = context.live_or_shutting_down_broker_ids - set(new_brokers)
        # The brokers already there learn of the new ones; the new ones get every partition's state.
        reign.batch.new_batch()
        reign.batch.add_update_metadata(existing, [])
        reign.batch.send()
        reign.batch.new_batch()
        reign.batch.add_update_metadata(new_brokers, None)
        reign.batch.send()
        replicas = context.replicas_on_brokers(set(new_brokers))
        await reign.replicas.handle_state_changes(replicas, ReplicaStatus.ONLINE, full_brokers=new_brokers)
        await reign.partitions.trigger_online_partition_state_change()
        await reign.reassignments.resume(lambda _, a: any(b in new_brokers for b in a.target))
        deleting = {
            r.partition.topic for r in replicas if context.is_topic_queued_for_deletion(r.partition.topic)
        }
        if deleting:
            await reign.deletion.resume_deletion_for_topics(deleting)

    async def _on_broker_failure(self, dead_brokers: list[int]) -> None:
        context = self._active().context
        context.shutting_down_broker_ids -= set(dead_brokers)
        for broker_id in dead_brokers:
            context.replicas_on_offline_dirs.pop(broker_id, None)
        await self._on_replicas_become_offline(context.replicas_on_brokers(set(dead_brokers)))

    async def _on_replicas_become_offline(self, replicas: list[PartitionReplica]) -> None:
        reign = self._active()
        context = reign.context
        for_deletion = [r for r in replicas if context.is_topic_queued_for_deletion(r.partition.topic)]
        others = [r for r in replicas if not context.is_topic_queued_for_deletion(r.partition.topic)]
        await reign.partitions.handle_state_changes(
            context.partitions_with_offline_leader(), PartitionStatus.OFFLINE
        )
        elections = await reign.partitions.trigger_online_partition_state_change()
        await reign.replicas.handle_state_changes(others, ReplicaStatus.OFFLINE)
        if for_deletion:
            await reign.deletion.fail_replica_deletion(for_deletion)
        if not others and all(result is not None for result in elections.values()):
            # Nothing changed a partition, so no UpdateMetadata went out: tell brokers who is gone.
            reign.batch.new_batch()
            reign.batch.add_update_metadata(context.live_or_shutting_down_broker_ids, [])
            reign.batch.send()

    async def _on_controlled_shutdown(self, event: ControllerEvent) -> None:
        assert isinstance(event, ControlledShutdown)
        try:
            remaining = await self._do_controlled_shutdown(event.broker_id, event.broker_epoch)
        except KafkaError as e:
            if not event.result.done():
                event.result.set_exception(e)
        else:
            if not event.result.done():
                event.result.set_result(remaining)

    async def _do_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        if not self.is_active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER)
        reign = self._active()
        context = reign.context
        if broker_epoch != -1 and broker_epoch < context.broker_epoch(broker_id):
            raise KafkaError(
                ErrorCode.STALE_BROKER_EPOCH,
                f"broker {broker_id}'s epoch {broker_epoch} is older than {context.broker_epoch(broker_id)}",
            )
        if broker_id not in context.live_brokers:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not registered")
        context.shutting_down_broker_ids.add(broker_id)
        log.info("%s controlled shutdown of broker %d", self.prefix, broker_id)

        def replicated(tp: TopicPartition) -> bool:
            return len(context.replicas(tp)) > 1 and not context.is_topic_queued_for_deletion(tp.topic)

        partitions = [
            tp
            for tp in context.partitions_on_broker(broker_id)
            if replicated(tp) and tp in context.leadership
        ]
        led = [tp for tp in partitions if context.leadership[tp].leader == broker_id]
        followed = [tp for tp in partitions if context.leadership[tp].leader != broker_id]
        await reign.partitions.handle_state_changes(
            led, PartitionStatus.ONLINE, ElectionStrategy.CONTROLLED_SHUTDOWN
        )
        await reign.replicas.handle_state_changes(
            [PartitionReplica(tp, broker_id) for tp in followed], ReplicaStatus.OFFLINE
        )
        remaining = sorted(tp for tp in context.partitions_led_by(broker_id) if replicated(tp))
        log.info(
            "%s broker %d may shut down once it leads no replicated partition; it still leads %d: %s",
            self.prefix,
            broker_id,
            len(remaining),
            ", ".join(map(str, remaining[:20])),
        )
        return remaining

    async def _on_alter_partition(self, event: ControllerEvent) -> None:
        assert isinstance(event, AlterPartitionReceived)
        if event.result.done():
            return
        if not self.is_active:
            event.result.set_exception(KafkaError(ErrorCode.NOT_CONTROLLER))
            return
        reign = self._active()
        known_epoch = reign.context.broker_epoch(event.broker_id)
        if known_epoch == -1 or event.broker_epoch != known_epoch:
            event.result.set_exception(
                KafkaError(
                    ErrorCode.STALE_BROKER_EPOCH,
                    f"broker {event.broker_id} sent epoch {event.broker_epoch}; it has {known_epoch}",
                )
            )
            return
        names = {topic_id: name for name, topic_id in reign.context.topic_ids.items()}
        results: dict[tuple[str | uuid.UUID, int], PartitionState | ErrorCode] = {}
        keys: dict[TopicPartition, tuple[str | uuid.UUID, int]] = {}
        for key in event.changes:
            topic, partition = key
            name = names.get(topic) if isinstance(topic, uuid.UUID) else topic
            if name is None:
                results[key] = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                keys[TopicPartition(name, partition)] = key
        outcome = await alter_partition(
            reign.context,
            self.zk,
            reign.batch,
            event.broker_id,
            {tp: event.changes[key] for tp, key in keys.items()},
            self.prefix,
        )
        results.update({keys[tp]: result for tp, result in outcome.items()})
        if not event.result.done():
            event.result.set_result(results)
        await reign.reassignments.on_isr_change(
            tp for tp, result in outcome.items() if isinstance(result, PartitionState)
        )

    # -- elections and reassignments ------------------------------------------------------------

    async def _answer(
        self,
        event: ReplicaLeaderElection | ApiPartitionReassignment | ListPartitionReassignments,
        work: Callable[[_Reign], Awaitable[Any]],
    ) -> None:
        """Runs a request's work and completes its future (NOT_CONTROLLER on a standby)."""
        if event.result.done():
            return
        if not self.is_active:
            event.result.set_exception(KafkaError(ErrorCode.NOT_CONTROLLER))
            return
        result = await work(self._active())
        if not event.result.done():
            event.result.set_result(result)

    async def _on_replica_leader_election(self, event: ControllerEvent) -> None:
        assert isinstance(event, ReplicaLeaderElection)

        async def elect(reign: _Reign) -> dict[TopicPartition, ElectionResult]:
            partitions = reign.context.all_partitions() if event.partitions is None else event.partitions
            return await reign.elections.elect(partitions, event.election_type, ElectionTrigger.ADMIN_CLIENT)

        await self._answer(event, elect)

    async def _on_preferred_replica_election_znode(self, _: ControllerEvent) -> None:
        await self._active().elections.on_request_znode()

    async def _on_auto_rebalance_check(self, _: ControllerEvent) -> None:
        await self._active().elections.check_auto_rebalance()

    async def _schedule_auto_rebalance(self) -> None:
        # As Kafka: a first check shortly after becoming active (5 s, or the interval if shorter), then
        # one every leader.imbalance.check.interval.seconds.
        interval = self.config["leader.imbalance.check.interval.seconds"]
        await asyncio.sleep(min(FIRST_REBALANCE_CHECK_DELAY, interval))
        while True:
            self._put_if_active(AutoPreferredReplicaLeaderElection())
            await asyncio.sleep(interval)

    async def _on_reassignment_znode(self, _: ControllerEvent) -> None:
        await self._active().reassignments.on_request_znode()

    async def _on_api_partition_reassignment(self, event: ControllerEvent) -> None:
        assert isinstance(event, ApiPartitionReassignment)

        async def alter(reign: _Reign) -> dict[TopicPartition, ApiResult]:
            return await reign.reassignments.alter(event.reassignments)

        await self._answer(event, alter)

    async def _on_list_partition_reassignments(self, event: ControllerEvent) -> None:
        assert isinstance(event, ListPartitionReassignments)

        async def list_them(reign: _Reign) -> dict[TopicPartition, ReplicaAssignment]:
            return reign.reassignments.list(event.partitions)

        await self._answer(event, list_them)

    # -- topics ---------------------------------------------------------------------------------

    async def _on_topic_change(self, _: ControllerEvent) -> None:
        context = self._active().context
        topics = set(await self.zk.topics())
        new = sorted(topics - context.all_topics)
        gone = sorted(context.all_topics - topics)
        for topic in gone:
            log.info("%s topic %s was removed from ZooKeeper", self.prefix, topic)
            context.remove_topic(topic)
        if not new:
            return
        partitions = await self._add_topics(new)
        log.info(
            "%s new topics %s: %s",
            self.prefix,
            new,
            ", ".join(f"{tp}={context.replicas(tp)}" for tp in partitions),
        )
        await self._on_new_partition_creation(partitions)

    async def _on_partition_modifications(self, event: ControllerEvent) -> None:
        assert isinstance(event, PartitionModifications)
        context = self._active().context
        topic = event.topic
        known = context.assignments.get(topic)
        if known is None:
            return  # not created yet (TopicChange will add it) or already deleted
        record = (await self.zk.topic_records([topic])).get(topic)
        if record is None or record.assignment.topic_id != context.topic_ids[topic]:
            return
        assignment = record.assignment.partitions
        added = {p: r for p, r in assignment.items() if p not in known}
        # The controller's own reassignment writes match its context; anything else is ignored, as
        # Kafka does: replicas change only through a reassignment.
        changed = sorted(p for p, r in assignment.items() if p in known and r != known[p])
        if changed:
            log.warning(
                "%s ignoring new replicas for existing partitions %s of %s: use a partition reassignment",
                self.prefix,
                changed,
                topic,
            )
        if not added:
            return
        if context.is_topic_queued_for_deletion(topic):
            log.info(
                "%s not adding partitions %s to %s: it is being deleted", self.prefix, sorted(added), topic
            )
            return
        context.add_topic(topic, context.topic_ids[topic], added)
        partitions = [TopicPartition(topic, p) for p in sorted(added)]
        log.info(
            "%s new partitions of %s: %s",
            self.prefix,
            topic,
            ", ".join(f"{tp}={context.replicas(tp)}" for tp in partitions),
        )
        await self._on_new_partition_creation(partitions)

    async def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        reign = self._active()
        replicas = reign.context.replicas_for_partitions(partitions)
        await reign.partitions.handle_state_changes(partitions, PartitionStatus.NEW)
        await reign.replicas.handle_state_changes(replicas, ReplicaStatus.NEW)
        await reign.partitions.handle_state_changes(
            partitions, PartitionStatus.ONLINE, ElectionStrategy.OFFLINE
        )
        await reign.replicas.handle_state_changes(replicas, ReplicaStatus.ONLINE)

    async def _on_topic_deletion(self, _: ControllerEvent) -> None:
        reign = self._active()
        new = await self._deletion_requests() - reign.context.topics_to_be_deleted
        if new:
            log.info("%s topics to delete: %s", self.prefix, sorted(new))
            await reign.deletion.enqueue_topics_for_deletion(new)

    # -- log dir failures (JBOD) ----------------------------------------------------------------

    async def _on_log_dir_event_notification(self, _: ControllerEvent) -> None:
        reign = self._active()
        brokers = await read_notifications(self._zk_client)
        live = sorted(brokers & reign.context.live_brokers.keys())
        if live:
            await on_broker_log_dir_failure(reign.context, reign.replicas, live, self.prefix)

    async def _on_leader_and_isr_response(self, event: ControllerEvent) -> None:
        assert isinstance(event, LeaderAndIsrResponseReceived)
        reign = self._active()
        context = reign.context
        offline = await on_leader_and_isr_response(
            context, event, self._on_replicas_become_offline, self.prefix
        )
        if offline:
            # Every broker's metadata lists them in offline_replicas, also where no ISR changed (Kafka's
            # OfflineReplica transition sends that state to all brokers).
            reign.batch.new_batch()
            reign.batch.add_update_metadata(context.live_or_shutting_down_broker_ids, offline)
            reign.batch.send()

    def _on_stop_replica_deletion(self, broker_id: int, error_code: int, partition_errors: dict) -> None:
        self._events.put(StopReplicaResponseReceived(broker_id, error_code, partition_errors))

    async def _on_stop_replica_response(self, event: ControllerEvent) -> None:
        assert isinstance(event, StopReplicaResponseReceived)
        deletion = self._active().deletion
        failed = [
            PartitionReplica(tp, event.broker_id)
            for tp, code in event.partition_errors.items()
            if event.error_code != ErrorCode.NONE or code != ErrorCode.NONE
        ]
        succeeded = [
            PartitionReplica(tp, event.broker_id)
            for tp, code in event.partition_errors.items()
            if event.error_code == ErrorCode.NONE and code == ErrorCode.NONE
        ]
        if failed:
            codes = {r.partition: event.error_code or event.partition_errors[r.partition] for r in failed}
            log.warning(
                "%s broker %d failed to delete %s",
                self.prefix,
                event.broker_id,
                ", ".join(f"{tp} ({ErrorCode(code).name})" for tp, code in codes.items()),
            )
            await deletion.fail_replica_deletion(failed)
        if succeeded:
            await deletion.complete_replica_deletion(succeeded)
