"""PartitionReassignmentManager: moving partitions between brokers (Kafka 2.4+'s KafkaController
reassignment, KIP-455), started by AlterPartitionReassignments or ``/admin/reassign_partitions``.

RS is a partition's full replica set, ORS the replicas it had, TRS the replicas it should have, AR = TRS
- ORS the replicas being added and RR = ORS - TRS those being removed. A reassignment moves through:

- U (update): RS = TRS + ORS, AR and RR are written to ``/brokers/topics/<t>`` first, then to the
  context; if an earlier reassignment of the partition is replaced, its adding replicas that are not
  wanted any more are stopped and deleted.
- A (TRS not yet in the ISR): the leader epoch is bumped and LeaderAndIsr with the new RS, AR and RR
  goes to every replica of RS; the replicas of AR are started (NewReplica). Leaders add them to the ISR
  once they catch up (AlterPartition), which brings the partition back here.
- B (TRS in the ISR): AR go online; RS = TRS in the context; leadership moves into TRS if the leader is
  being removed or is dead (else the leader epoch is bumped so replicas learn the new RS); the replicas
  of RR go offline (out of the ISR) and are deleted (StopReplica with delete); RS = TRS with no AR/RR is
  written to ZooKeeper; the partition leaves ``/admin/reassign_partitions``; every broker gets
  UpdateMetadata.

ZooKeeper keeps RS, AR and RR until the very end, so a controller that dies at any step leaves a
reassignment that the next one reads back (``/brokers/topics/<t>``) and resumes from the start of the
phase the ISR calls for.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from controller.context import (
    ControllerContext,
    PartitionReplica,
    PartitionStatus,
    ReplicaAssignment,
    ReplicaStatus,
    TopicPartition,
)
from controller.controller_zk import ControllerMovedError, ControllerZkClient
from controller.election import ElectionStrategy
from controller.partition_state_machine import MAX_WRITE_ATTEMPTS, PartitionStateMachine
from controller.replica_state_machine import ReplicaStateMachine
from controller.request_batch import ControllerBrokerRequestBatch
from controller.topic_deletion import TopicDeletionManager
from protocol.errors import ErrorCode
from zk.reassignment_json import ReassignmentJsonError
from zk.znodes import PartitionState

log = logging.getLogger(__name__)

ApiResult = tuple[ErrorCode, str | None]
NO_SUCH_PARTITION: ApiResult = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
NO_REASSIGNMENT: ApiResult = (
    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
    "No partition reassignment is in progress.",
)
DONE: ApiResult = (ErrorCode.NONE, None)


class PartitionReassignmentManager:
    def __init__(
        self,
        context: ControllerContext,
        zk: ControllerZkClient,
        partitions: PartitionStateMachine,
        replicas: ReplicaStateMachine,
        batch: ControllerBrokerRequestBatch,
        deletion: TopicDeletionManager,
        prefix: str,
    ) -> None:
        self._context = context
        self._zk = zk
        self._partitions = partitions
        self._replicas = replicas
        self._batch = batch
        self._deletion = deletion
        self._prefix = prefix

    # -- requests -------------------------------------------------------------------------------

    async def alter(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, ApiResult]:
        """AlterPartitionReassignments: per partition, start (target replicas) or cancel (None)."""
        results: dict[TopicPartition, ApiResult] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in reassignments.items():
            error = None if target is None else self._validate(tp, target)
            if error is not None:
                results[tp] = error
                continue
            built = self._build(tp, target)
            if built is None:
                results[tp] = NO_REASSIGNMENT
            else:
                to_reassign[tp] = built
        # The latest reassignment, by API or by znode, wins: the znode forgets these partitions.
        await self._remove_from_request_znode(lambda tp, _: tp in to_reassign)
        results.update(await self._trigger(to_reassign))
        return results

    async def on_request_znode(self) -> set[TopicPartition]:
        """``/admin/reassign_partitions`` was created (or found at failover): starts what it asks for,
        drops from it what cannot start; returns the partitions started."""
        try:
            requested = await self._zk.reassignment_request()
        except ReassignmentJsonError as e:
            log.error("%s /admin/reassign_partitions is not valid (%s); deleting it", self._prefix, e)
            await self._zk.set_reassignment_request({}, self._context.epoch_zk_version)
            return set()
        if requested is None:
            return set()
        log.info(
            "%s reassignment requested through ZooKeeper: %s",
            self._prefix,
            ", ".join(f"{tp}->{r}" for tp, r in sorted(requested.items())),
        )
        results: dict[TopicPartition, ApiResult] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in requested.items():
            error = self._validate(tp, target)
            built = None if error is not None else self._build(tp, target)
            if error is not None:
                results[tp] = error
            elif built is not None:
                to_reassign[tp] = built
        results.update(await self._trigger(to_reassign))
        failed = {tp: result for tp, result in results.items() if result[0] != ErrorCode.NONE}
        if failed:
            log.warning(
                "%s reassignments through ZooKeeper that could not start: %s",
                self._prefix,
                ", ".join(f"{tp} ({code.name}: {message})" for tp, (code, message) in sorted(failed.items())),
            )
            await self._remove_from_request_znode(lambda tp, _: tp in failed)
        return {tp for tp, result in results.items() if result[0] == ErrorCode.NONE}

    def list(self, partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, ReplicaAssignment]:
        """ListPartitionReassignments: the partitions (all by default) being reassigned, with RS/AR/RR."""
        context = self._context
        wanted = context.partitions_being_reassigned if partitions is None else partitions
        found = {tp: context.full_assignment(tp) for tp in wanted}
        return {tp: a for tp, a in found.items() if a.is_being_reassigned}

    # -- resuming -------------------------------------------------------------------------------

    async def resume(self, which: Callable[[TopicPartition, ReplicaAssignment], bool]) -> None:
        """Carries on with the reassignments in progress that ``which`` selects (after a failover, or
        when a broker they wait for starts)."""
        for tp in sorted(self._context.partitions_being_reassigned):
            assignment = self._context.full_assignment(tp)
            if which(tp, assignment):
                await self._reassign_logging_errors(tp, assignment)

    async def on_isr_change(self, partitions: Iterable[TopicPartition]) -> None:
        """A leader changed ISRs: a reassignment whose target replicas are all in sync completes."""
        for tp in sorted(set(partitions) & self._context.partitions_being_reassigned):
            assignment = self._context.full_assignment(tp)
            if await self._is_complete(tp, assignment):
                log.info(
                    "%s target replicas %s of %s are all in sync", self._prefix, list(assignment.target), tp
                )
                await self._reassign_logging_errors(tp, assignment)

    # -- the steps ------------------------------------------------------------------------------

    def _validate(self, tp: TopicPartition, replicas: Sequence[int]) -> ApiResult | None:
        if not replicas:
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Empty replica list specified in partition reassignment.",
            )
        if len(set(replicas)) != len(replicas):
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Duplicate replica ids in partition reassignment replica list: {list(replicas)}",
            )
        if any(r < 0 for r in replicas):
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Invalid broker id in replica list: {list(replicas)}",
            )
        adding = self._context.full_assignment(tp).reassign_to(replicas).adding
        live = self._context.live_broker_ids
        if not set(adding) <= live:
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
                f"live broker list: {sorted(live)}",
            )
        return None

    def _build(self, tp: TopicPartition, target: Sequence[int] | None) -> ReplicaAssignment | None:
        """The assignment that reaches ``target`` (None: back to the origin replicas, cancelling), or None
        when there is nothing to cancel."""
        current = self._context.full_assignment(tp)
        if current.is_being_reassigned:
            return current.reassign_to(current.origin if target is None else target)
        return None if target is None else current.reassign_to(target)

    async def _trigger(
        self, reassignments: Mapping[TopicPartition, ReplicaAssignment]
    ) -> dict[TopicPartition, ApiResult]:
        results: dict[TopicPartition, ApiResult] = {}
        for tp, assignment in reassignments.items():
            if self._context.is_topic_queued_for_deletion(tp.topic):
                log.info("%s not reassigning %s: its topic is being deleted", self._prefix, tp)
                results[tp] = NO_SUCH_PARTITION
            elif not self._context.replicas(tp):
                results[tp] = NO_SUCH_PARTITION
            else:
                results[tp] = await self._reassign_logging_errors(tp, assignment)
        return results

    async def _reassign_logging_errors(self, tp: TopicPartition, assignment: ReplicaAssignment) -> ApiResult:
        try:
            await self._on_partition_reassignment(tp, assignment)
        except ControllerMovedError:
            raise
        except Exception as e:
            log.exception("%s error reassigning %s", self._prefix, tp)
            return ErrorCode.UNKNOWN_SERVER_ERROR, str(e)
        return DONE

    async def _on_partition_reassignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        context = self._context
        await self._update_current_reassignment(tp, assignment)
        if not await self._is_complete(tp, assignment):
            log.info(
                "%s reassigning %s: replicas %s, adding %s, removing %s; waiting for %s to join the ISR",
                self._prefix,
                tp,
                list(assignment.replicas),
                list(assignment.adding),
                list(assignment.removing),
                list(assignment.target),
            )
            await self._bump_leader_epoch_and_send(tp, assignment.replicas)
            new = [
                PartitionReplica(tp, r)
                for r in assignment.adding
                if context.replica_state(PartitionReplica(tp, r)) is ReplicaStatus.NON_EXISTENT
            ]
            await self._replicas.handle_state_changes(new, ReplicaStatus.NEW)
            return
        adding = [PartitionReplica(tp, r) for r in assignment.adding]
        await self._replicas.handle_state_changes(adding, ReplicaStatus.ONLINE)
        completed = ReplicaAssignment(assignment.target)
        context.set_full_assignment(tp, completed)
        await self._move_leader_if_required(tp, completed)
        await self._stop_removed_replicas(tp, assignment.removing)
        await self._zk.set_replica_assignment(tp, completed, context.epoch_zk_version)
        await self._remove_from_request_znode(
            lambda p, replicas: p == tp and list(replicas) == list(completed.replicas)
        )
        context.partitions_being_reassigned.discard(tp)
        self._batch.new_batch()
        self._batch.add_update_metadata(context.live_or_shutting_down_broker_ids, [tp])
        self._batch.send()
        log.info("%s reassignment of %s completed: replicas %s", self._prefix, tp, list(completed.replicas))
        if context.is_topic_queued_for_deletion(tp.topic):
            await self._deletion.resume_deletions()

    async def _update_current_reassignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        context = self._context
        current = context.full_assignment(tp)
        if current != assignment:
            # ZooKeeper first: a controller that dies now leaves the reassignment for the next one.
            await self._zk.set_replica_assignment(tp, assignment, context.epoch_zk_version)
            context.set_full_assignment(tp, assignment)
            unneeded = [r for r in current.replicas if r not in assignment.replicas]
            if unneeded:
                log.info(
                    "%s %s: replicas %s of the replaced reassignment are not wanted any more",
                    self._prefix,
                    tp,
                    unneeded,
                )
                await self._stop_removed_replicas(tp, unneeded)
        context.partitions_being_reassigned.add(tp)

    async def _is_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        if not assignment.is_being_reassigned:
            return True
        state = (await self._zk.partition_states([tp]))[tp]
        return state is not None and set(assignment.target) <= set(state.isr)

    async def _move_leader_if_required(self, tp: TopicPartition, completed: ReplicaAssignment) -> None:
        leadership = self._context.leadership.get(tp)
        if leadership is None:
            return
        leader = leadership.leader
        if leader in completed.replicas and self._context.is_replica_online(leader):
            # The leader stays; a new leader epoch makes every replica take the new replica set.
            await self._bump_leader_epoch_and_send(tp, completed.replicas)
            return
        log.info(
            "%s leader %d of %s is %s; electing one of %s",
            self._prefix,
            leader,
            tp,
            "not alive" if leader in completed.replicas else "being removed",
            list(completed.replicas),
        )
        if self._context.partition_state(tp) in (PartitionStatus.ONLINE, PartitionStatus.OFFLINE):
            await self._partitions.handle_state_changes(
                [tp], PartitionStatus.ONLINE, ElectionStrategy.REASSIGN
            )

    async def _stop_removed_replicas(self, tp: TopicPartition, removed: Sequence[int]) -> None:
        """Out of the ISR (OfflineReplica), then StopReplica with delete, then forgotten."""
        replicas = [PartitionReplica(tp, r) for r in removed]
        for target in (
            ReplicaStatus.OFFLINE,
            ReplicaStatus.DELETION_STARTED,
            ReplicaStatus.DELETION_SUCCESSFUL,
            ReplicaStatus.NON_EXISTENT,
        ):
            await self._replicas.handle_state_changes(replicas, target)

    async def _bump_leader_epoch_and_send(self, tp: TopicPartition, recipients: Sequence[int]) -> None:
        """Writes the same leader and ISR with the next leader epoch and sends LeaderAndIsr (with the
        current RS, AR and RR) to ``recipients``: brokers apply a LeaderAndIsr only for a newer epoch."""
        context = self._context
        for _ in range(MAX_WRITE_ATTEMPTS):
            stored = (await self._zk.partition_states([tp]))[tp]
            if stored is None:
                log.error("%s cannot update the leader epoch of %s: it has no state znode", self._prefix, tp)
                return
            if stored.controller_epoch > context.epoch:
                log.error(
                    "%s the state of %s was written by controller epoch %d: not touching it",
                    self._prefix,
                    tp,
                    stored.controller_epoch,
                )
                return
            bumped = PartitionState(
                stored.leader, stored.leader_epoch + 1, stored.isr, context.epoch, stored.zk_version
            )
            outcome = await self._zk.update_partition_states({tp: bumped}, context.epoch_zk_version)
            if tp in outcome.failed:
                raise outcome.failed[tp]
            if tp in outcome.written:
                written = outcome.written[tp]
                context.leadership[tp] = written
                self._batch.new_batch()
                self._batch.add_leader_and_isr(recipients, tp, written, is_new=False)
                self._batch.send()
                log.info(
                    "%s %s: leader epoch %d for replicas %s",
                    self._prefix,
                    tp,
                    written.leader_epoch,
                    list(recipients),
                )
                return
        log.error("%s gave up updating the leader epoch of %s: its state keeps changing", self._prefix, tp)

    # builtins.list: in this class, "list" names the method.
    async def _remove_from_request_znode(
        self, remove: Callable[[TopicPartition, builtins.list[int]], bool]
    ) -> None:
        try:
            requested = await self._zk.reassignment_request()
        except ReassignmentJsonError:
            requested = {}  # unreadable: the whole node goes
        if requested is None:
            return
        kept = {tp: replicas for tp, replicas in requested.items() if not remove(tp, replicas)}
        if kept != requested or not kept:
            await self._zk.set_reassignment_request(kept, self._context.epoch_zk_version)
            if not kept:
                log.info(
                    "%s no more partitions to reassign: deleted /admin/reassign_partitions", self._prefix
                )
