"""SyncGroup: the leader's assignment, stored in ``__consumer_offsets`` and handed to every member.

In a stable group a member gets its assignment at once; while the group completes its rebalance the
followers wait for the leader's SyncGroup, whose assignment is answered to all once its group record
is replicated (a failure to store it sends the members back to rejoin).
"""

from __future__ import annotations

import asyncio
import logging

from coordinator.group_metadata import GroupMetadata, GroupState, SyncGroupResult
from coordinator.group_metadata_manager import GroupMetadataManager
from coordinator.group_status import GroupStatus, validate_current_member
from coordinator.heartbeats import Heartbeats
from coordinator.rebalance import Rebalancer
from protocol.errors import ErrorCode
from server_common.futures import completed
from server_common.metrics import CounterChild

log = logging.getLogger(__name__)


class SyncGroup:
    def __init__(self, status: GroupStatus, rebalancer: Rebalancer, heartbeats: Heartbeats) -> None:
        self.status = status
        self.manager: GroupMetadataManager = status.manager
        self.rebalancer = rebalancer
        self.heartbeats = heartbeats
        # Kafka's group-completed-rebalance-count (coordinator/coordinator_metrics.py exports it).
        self.completed_rebalances = CounterChild()

    def handle(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
    ) -> asyncio.Future[SyncGroupResult]:
        error = self.status.validate(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance's state was lost with the old coordinator: rejoin (older clients do not
            # expect COORDINATOR_LOAD_IN_PROGRESS here).
            return completed(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        if error is not None:
            return completed(SyncGroupResult(error))
        group = self.manager.get_group(group_id)
        if group is None:
            return completed(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.is_(GroupState.DEAD):
            return completed(SyncGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        error = validate_current_member(group, member_id, group_instance_id, "sync-group")
        if error is None:
            if generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            elif (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name
            ):
                error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            return completed(SyncGroupResult(error))
        state = group.state
        if state is GroupState.EMPTY:
            return completed(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if state is GroupState.PREPARING_REBALANCE:
            return completed(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member = group.get(member_id)
        if state is GroupState.STABLE:
            self.rebalancer.remove_pending_sync_member(group, member_id)
            result = completed(
                SyncGroupResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
            )
            self.heartbeats.complete_and_schedule_next(group, member)
            return result
        # CompletingRebalance: followers wait for the leader's assignment.
        future: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()
        member.await_sync(future)
        self.rebalancer.remove_pending_sync_member(group, member_id)
        if group.is_leader(member_id):
            log.info(
                "assignment received from leader %s of group %s for generation %d; %d members, %d static",
                member_id,
                group.group_id,
                group.generation_id,
                len(group),
                len(group.static_members),
            )
            missing = [m for m in group.members if m not in assignments]
            if missing:
                log.warning(
                    "setting empty assignments for members %s of %s for generation %d",
                    missing,
                    group.group_id,
                    group.generation_id,
                )
            assignment = {**assignments, **{m: b"" for m in missing}}
            self.manager.store_group(group, assignment).add_done_callback(
                lambda done: self._on_assignment_stored(group, generation_id, member_id, assignment, done)
            )
            self.completed_rebalances.inc()  # where Kafka records it: the leader's assignment received
        return future

    def _on_assignment_stored(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        assignment: dict[str, bytes],
        done: asyncio.Future[int],
    ) -> None:
        error = done.result() if not done.cancelled() else ErrorCode.UNKNOWN_SERVER_ERROR
        # A member may have joined meanwhile: only the generation the assignment is for becomes stable.
        if not group.is_(GroupState.COMPLETING_REBALANCE) or group.generation_id != generation_id:
            return
        if error != ErrorCode.NONE:
            self.rebalancer.reset_and_propagate_assignment_error(group, error)
            self.rebalancer.maybe_prepare_rebalance(
                group,
                f"error {ErrorCode(error).name} when storing group assignment during SyncGroup "
                f"(member: {member_id})",
            )
            return
        for member in group.members.values():
            member.assignment = assignment[member.member_id]
        self.rebalancer.propagate_assignment(group, ErrorCode.NONE)
        group.transition_to(GroupState.STABLE)
