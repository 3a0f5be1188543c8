"""ReplicaStateMachine: the life of each replica (Kafka's ZkReplicaStateMachine).

States and the transitions allowed into each::

    NewReplica                 <- NonExistentReplica
    OnlineReplica              <- New, Online, Offline, ReplicaDeletionIneligible
    OfflineReplica             <- New, Online, Offline, ReplicaDeletionIneligible
    ReplicaDeletionStarted     <- Offline
    ReplicaDeletionSuccessful  <- ReplicaDeletionStarted
    ReplicaDeletionIneligible  <- Offline, ReplicaDeletionStarted
    NonExistentReplica         <- ReplicaDeletionSuccessful

Going online sends the replica its partition's leader and ISR. Going offline sends it a StopReplica
(without deleting) and takes it out of the ISR, and out of the leadership if it led: the new state is
written with the zkVersion and epoch checks, with a new leader epoch, and sent to the other replicas.
ReplicaDeletionStarted sends StopReplica with delete.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence

from controller.context import ControllerContext, PartitionReplica, ReplicaStatus, TopicPartition
from controller.controller_zk import ControllerMovedError, ControllerZkClient
from controller.election import remove_from_isr
from controller.partition_state_machine import MAX_WRITE_ATTEMPTS
from controller.request_batch import ControllerBrokerRequestBatch
from zk.znodes import PartitionState

log = logging.getLogger(__name__)

_R = ReplicaStatus
_VALID_PREVIOUS = {
    _R.NEW: {_R.NON_EXISTENT},
    _R.ONLINE: {_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE},
    _R.OFFLINE: {_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE},
    _R.DELETION_STARTED: {_R.OFFLINE},
    _R.DELETION_SUCCESSFUL: {_R.DELETION_STARTED},
    _R.DELETION_INELIGIBLE: {_R.OFFLINE, _R.DELETION_STARTED},
    _R.NON_EXISTENT: {_R.DELETION_SUCCESSFUL},
}


class ReplicaStateMachine:
    def __init__(
        self,
        context: ControllerContext,
        zk: ControllerZkClient,
        batch: ControllerBrokerRequestBatch,
        prefix: str,
    ) -> None:
        self._context = context
        self._zk = zk
        self._batch = batch
        self._prefix = prefix

    async def startup(self) -> None:
        """Replicas on live brokers go online (each live broker gets a full LeaderAndIsr); the others
        go offline."""
        context = self._context
        online, offline = context.online_and_offline_replicas()
        for replica in online:
            context.replica_states[replica] = ReplicaStatus.ONLINE
        for replica in offline:
            # Kafka marks them ineligible so that a deletion in progress waits for their broker.
            context.replica_states[replica] = ReplicaStatus.DELETION_INELIGIBLE
        await self.handle_state_changes(
            online, ReplicaStatus.ONLINE, full_brokers=context.live_or_shutting_down_broker_ids
        )
        await self.handle_state_changes(offline, ReplicaStatus.OFFLINE)

    async def handle_state_changes(
        self, replicas: Sequence[PartitionReplica], target: ReplicaStatus, full_brokers: Iterable[int] = ()
    ) -> None:
        """Moves ``replicas`` to ``target``, then sends the requests that calls for. ``full_brokers``
        get their LeaderAndIsr as a full one (they are being sent every partition they host)."""
        full = set(full_brokers)
        if not replicas and not full:
            return
        self._batch.new_batch()
        self._batch.mark_full(full)
        by_broker: dict[int, list[TopicPartition]] = defaultdict(list)
        for replica in replicas:
            by_broker[replica.replica].append(replica.partition)
        try:
            for broker_id, partitions in sorted(by_broker.items()):
                await self._do_handle_state_changes(broker_id, partitions, target)
        except ControllerMovedError:
            self._batch.new_batch()
            raise
        except Exception:
            log.exception("%s error moving replicas to %s", self._prefix, target.value)
        self._batch.send()

    async def _do_handle_state_changes(
        self, broker_id: int, partitions: list[TopicPartition], target: ReplicaStatus
    ) -> None:
        context = self._context
        valid: list[TopicPartition] = []
        for tp in partitions:
            current = context.replica_state(PartitionReplica(tp, broker_id))
            if current in _VALID_PREVIOUS[target]:
                valid.append(tp)
            else:
                log.error(
                    "%s invalid state transition of replica %d of %s from %s to %s",
                    self._prefix,
                    broker_id,
                    tp,
                    current.value,
                    target.value,
                )
        if target is ReplicaStatus.NEW:
            for tp in valid:
                state = context.leadership.get(tp)
                if state is not None:
                    if state.leader == broker_id:
                        log.error("%s replica %d leads %s: it cannot be new", self._prefix, broker_id, tp)
                        continue
                    self._batch.add_leader_and_isr([broker_id], tp, state, is_new=True)
                context.replica_states[PartitionReplica(tp, broker_id)] = ReplicaStatus.NEW
        elif target is ReplicaStatus.ONLINE:
            for tp in valid:
                replica = PartitionReplica(tp, broker_id)
                state = context.leadership.get(tp)
                if context.replica_state(replica) is not ReplicaStatus.NEW and state is not None:
                    self._batch.add_leader_and_isr([broker_id], tp, state, is_new=False)
                context.replica_states[replica] = ReplicaStatus.ONLINE
        elif target is ReplicaStatus.OFFLINE:
            await self._go_offline(broker_id, valid)
        elif target is ReplicaStatus.DELETION_STARTED:
            for tp in valid:
                self._batch.add_stop_replica([broker_id], tp, delete=True)
                context.replica_states[PartitionReplica(tp, broker_id)] = target
        elif target is ReplicaStatus.NON_EXISTENT:
            for tp in valid:
                replica = PartitionReplica(tp, broker_id)
                context.replica_states.pop(replica, None)
                replicas = context.assignments.get(tp.topic, {}).get(tp.partition)
                if replicas is not None and broker_id in replicas:
                    replicas.remove(broker_id)
        else:
            for tp in valid:
                context.replica_states[PartitionReplica(tp, broker_id)] = target

    async def _go_offline(self, broker_id: int, partitions: list[TopicPartition]) -> None:
        context = self._context
        for tp in partitions:
            self._batch.add_stop_replica([broker_id], tp, delete=False)
        with_leadership = [tp for tp in partitions if tp in context.leadership]
        for tp in partitions:
            if tp not in context.leadership:
                self._batch.add_update_metadata(context.live_or_shutting_down_broker_ids, [tp])
                context.replica_states[PartitionReplica(tp, broker_id)] = ReplicaStatus.OFFLINE
        for tp, state, changed in await self.remove_replica_from_isr(broker_id, with_leadership):
            if changed and not context.is_topic_queued_for_deletion(tp.topic):
                recipients = [r for r in context.replicas(tp) if r != broker_id]
                self._batch.add_leader_and_isr(recipients, tp, state, is_new=False)
            elif not changed:
                # Out of the ISR already (a controlled shutdown took it out): the brokers still learn that
                # this one is gone, as Kafka's controller tells them with every partition it takes offline.
                self._batch.add_update_metadata(context.live_or_shutting_down_broker_ids, [tp])
            context.replica_states[PartitionReplica(tp, broker_id)] = ReplicaStatus.OFFLINE

    async def remove_replica_from_isr(
        self, broker_id: int, partitions: Sequence[TopicPartition]
    ) -> list[tuple[TopicPartition, PartitionState, bool]]:
        """Takes ``broker_id`` out of each partition's ISR (and leadership) in ZooKeeper; returns, per
        partition that could be handled, its state and whether it changed."""
        context = self._context
        done: list[tuple[TopicPartition, PartitionState, bool]] = []
        remaining = list(partitions)
        for _ in range(MAX_WRITE_ATTEMPTS):
            if not remaining:
                break
            stored = await self._zk.partition_states(remaining)
            updates: dict[TopicPartition, PartitionState] = {}
            for tp, state in stored.items():
                if state is None:
                    log.error(
                        "%s cannot remove replica %d from the ISR of %s: no state znode",
                        self._prefix,
                        broker_id,
                        tp,
                    )
                    continue
                if state.controller_epoch > context.epoch:
                    log.error(
                        "%s the state of %s was written by controller epoch %d: another controller is active",
                        self._prefix,
                        tp,
                        state.controller_epoch,
                    )
                    continue
                leader, isr = remove_from_isr(state.leader, state.isr, broker_id)
                if (leader, isr) == (state.leader, state.isr):
                    context.leadership[tp] = state
                    done.append((tp, state, False))
                    continue
                updates[tp] = PartitionState(
                    leader, state.leader_epoch + 1, isr, context.epoch, state.zk_version
                )
            outcome = await self._zk.update_partition_states(updates, context.epoch_zk_version)
            for tp, written in outcome.written.items():
                previous = stored[tp]
                assert previous is not None
                context.leadership[tp] = written
                done.append((tp, written, True))
                log.info(
                    "%s partition %s: replica %d removed; leader %d -> %d (leader epoch %d), ISR %s -> %s",
                    self._prefix,
                    tp,
                    broker_id,
                    previous.leader,
                    written.leader,
                    written.leader_epoch,
                    list(previous.isr),
                    list(written.isr),
                )
            for tp, error in outcome.failed.items():
                log.error(
                    "%s could not remove replica %d from the ISR of %s: %r",
                    self._prefix,
                    broker_id,
                    tp,
                    error,
                )
            remaining = outcome.retry
        for tp in remaining:
            log.error("%s gave up removing replica %d from the ISR of %s", self._prefix, broker_id, tp)
        return done
