"""TopicDeletionManager: deletes the topics named under ``/admin/delete_topics`` (Kafka's
TopicDeletionManager).

A topic queued for deletion is deleted once every replica has confirmed it:

1. its partitions go Offline then NonExistent, and every live broker gets UpdateMetadata with leader
   -2 for them, so that brokers stop serving them;
2. replicas on live brokers go Offline (StopReplica without delete) then ReplicaDeletionStarted
   (StopReplica with delete, leader epoch -2); replicas on dead brokers are ReplicaDeletionIneligible
   and the topic waits until their broker returns;
3. each StopReplica answer moves the replica to ReplicaDeletionSuccessful, or Ineligible on an error
   (retried when a broker starts);
4. a topic with partitions being reassigned waits until those reassignments complete;
5. when all replicas succeeded: ``/brokers/topics/<t>`` (with the partition states),
   ``/config/topics/<t>`` and ``/admin/delete_topics/<t>`` are removed in one fenced transaction, and
   the topic leaves the controller's context.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from controller.context import ControllerContext, PartitionReplica, PartitionStatus, ReplicaStatus
from controller.controller_zk import ControllerZkClient
from controller.partition_state_machine import PartitionStateMachine
from controller.replica_state_machine import ReplicaStateMachine
from controller.request_batch import ControllerBrokerRequestBatch

log = logging.getLogger(__name__)


class TopicDeletionManager:
    def __init__(
        self,
        context: ControllerContext,
        zk: ControllerZkClient,
        partition_state_machine: PartitionStateMachine,
        replica_state_machine: ReplicaStateMachine,
        batch: ControllerBrokerRequestBatch,
        prefix: str,
    ) -> None:
        self._context = context
        self._zk = zk
        self._partitions = partition_state_machine
        self._replicas = replica_state_machine
        self._batch = batch
        self._prefix = prefix

    def init(self, topics_to_be_deleted: set[str], ineligible: set[str]) -> None:
        self._context.topics_to_be_deleted |= topics_to_be_deleted
        self._context.topics_ineligible_for_deletion |= ineligible & topics_to_be_deleted

    async def enqueue_topics_for_deletion(self, topics: set[str]) -> None:
        self._context.topics_to_be_deleted |= topics
        await self.resume_deletions()

    async def resume_deletion_for_topics(self, topics: set[str]) -> None:
        """A broker came back: topics waiting on its replicas may proceed."""
        queued = topics & self._context.topics_to_be_deleted
        if queued:
            self._context.topics_ineligible_for_deletion -= queued
            await self.resume_deletions()

    async def fail_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        failed = [r for r in replicas if self._context.is_topic_queued_for_deletion(r.partition.topic)]
        if not failed:
            return
        topics = {r.partition.topic for r in failed}
        log.info(
            "%s deletion of %s failed on replicas %s; the topics wait for their brokers",
            self._prefix,
            sorted(topics),
            ", ".join(map(str, failed)),
        )
        await self._mark_ineligible(failed)
        self._context.topics_ineligible_for_deletion |= topics
        await self.resume_deletions()

    async def complete_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        deleted = [r for r in replicas if self._context.is_topic_queued_for_deletion(r.partition.topic)]
        if deleted:
            await self._replicas.handle_state_changes(deleted, ReplicaStatus.DELETION_SUCCESSFUL)
            await self.resume_deletions()

    async def resume_deletions(self) -> None:
        context = self._context
        eligible: set[str] = set()
        for topic in sorted(context.topics_to_be_deleted):
            if any(tp.topic == topic for tp in context.partitions_being_reassigned):
                continue  # resumed when the topic's reassignments complete
            replicas = context.replicas_for_topic(topic)
            states = {context.replica_state(r) for r in replicas}
            if states <= {ReplicaStatus.DELETION_SUCCESSFUL}:
                await self._complete_delete_topic(topic)
                continue
            if ReplicaStatus.DELETION_STARTED in states:
                continue  # waiting for StopReplica answers
            if ReplicaStatus.DELETION_INELIGIBLE in states:
                ineligible = context.replicas_in_state(topic, ReplicaStatus.DELETION_INELIGIBLE)
                await self._replicas.handle_state_changes(ineligible, ReplicaStatus.OFFLINE)
            if topic not in context.topics_ineligible_for_deletion:
                eligible.add(topic)
        if eligible:
            await self._on_topic_deletion(eligible)

    async def _on_topic_deletion(self, topics: set[str]) -> None:
        context = self._context
        log.info("%s deleting topics %s", self._prefix, sorted(topics))
        unseen = topics - context.topics_with_deletion_started
        if unseen:
            partitions = [tp for t in sorted(unseen) for tp in context.partitions_for_topic(t)]
            await self._partitions.handle_state_changes(partitions, PartitionStatus.OFFLINE)
            await self._partitions.handle_state_changes(partitions, PartitionStatus.NON_EXISTENT)
            context.topics_with_deletion_started |= unseen
        self._batch.new_batch()
        self._batch.add_update_metadata(
            context.live_or_shutting_down_broker_ids,
            [tp for t in sorted(topics) for tp in context.partitions_for_topic(t)],
        )
        self._batch.send()
        await self._on_partition_deletion(topics)

    async def _on_partition_deletion(self, topics: set[str]) -> None:
        context = self._context
        dead: list[PartitionReplica] = []
        retry: list[PartitionReplica] = []
        waiting: set[str] = set()
        for topic in sorted(topics):
            for replica in context.replicas_for_topic(topic):
                if not context.is_replica_online(replica.replica, include_shutting_down=True):
                    dead.append(replica)
                    waiting.add(topic)
                elif context.replica_state(replica) is not ReplicaStatus.DELETION_SUCCESSFUL:
                    retry.append(replica)
        await self._mark_ineligible(dead)
        await self._replicas.handle_state_changes(retry, ReplicaStatus.OFFLINE)
        await self._replicas.handle_state_changes(retry, ReplicaStatus.DELETION_STARTED)
        if waiting:
            log.info("%s deletion of %s waits for replicas on offline brokers", self._prefix, sorted(waiting))
            context.topics_ineligible_for_deletion |= waiting

    async def _mark_ineligible(self, replicas: list[PartitionReplica]) -> None:
        """Replicas that cannot be deleted for now; those still online or new go offline first."""
        state = self._context.replica_state
        await self._replicas.handle_state_changes(
            [r for r in replicas if state(r) in (ReplicaStatus.NEW, ReplicaStatus.ONLINE)],
            ReplicaStatus.OFFLINE,
        )
        await self._replicas.handle_state_changes(
            [r for r in replicas if state(r) is not ReplicaStatus.DELETION_INELIGIBLE],
            ReplicaStatus.DELETION_INELIGIBLE,
        )

    async def _complete_delete_topic(self, topic: str) -> None:
        context = self._context
        await self._replicas.handle_state_changes(
            context.replicas_in_state(topic, ReplicaStatus.DELETION_SUCCESSFUL), ReplicaStatus.NON_EXISTENT
        )
        await self._zk.delete_topic(topic, context.epoch_zk_version)
        context.remove_topic(topic)
        log.info("%s deletion of topic %s completed", self._prefix, topic)
