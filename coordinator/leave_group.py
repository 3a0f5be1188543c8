"""LeaveGroup: members leaving a group (a batch of them from v3, static ones by instance id alone, as
an admin removes them); the group rebalances without them."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from coordinator.group_metadata import UNKNOWN_MEMBER_ID, GroupMetadata, GroupState
from coordinator.group_metadata_manager import GroupMetadataManager
from coordinator.group_status import GroupStatus, validate_current_member
from coordinator.heartbeats import Heartbeats
from coordinator.rebalance import Rebalancer
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


@dataclass(slots=True)
class MemberIdentity:
    """One member named in LeaveGroup (by member id, or by group instance id alone)."""

    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(slots=True)
class LeaveGroupResult:
    error: int
    members: list[tuple[MemberIdentity, int]]


class LeaveGroup:
    def __init__(self, status: GroupStatus, rebalancer: Rebalancer, heartbeats: Heartbeats) -> None:
        self.status = status
        self.manager: GroupMetadataManager = status.manager
        self.rebalancer = rebalancer
        self.heartbeats = heartbeats

    def handle(self, group_id: str, leaving: list[MemberIdentity]) -> LeaveGroupResult:
        error = self.status.validate(group_id)
        if error is not None:
            return LeaveGroupResult(error, [])
        group = self.manager.get_group(group_id)
        if group is None:
            return LeaveGroupResult(ErrorCode.NONE, [(m, ErrorCode.UNKNOWN_MEMBER_ID) for m in leaving])
        if group.is_(GroupState.DEAD):
            return LeaveGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, [])
        results: list[tuple[MemberIdentity, int]] = []
        for identity in leaving:
            reason = identity.reason or "not provided"
            if identity.member_id == UNKNOWN_MEMBER_ID:
                # An admin removing a static member by its instance id alone.
                current = (
                    group.current_static_member_id(identity.group_instance_id)
                    if identity.group_instance_id is not None
                    else None
                )
                if current is None:
                    results.append((identity, ErrorCode.UNKNOWN_MEMBER_ID))
                    continue
                self._remove_current_member(group, current, reason)
                results.append((identity, ErrorCode.NONE))
            elif group.is_pending_member(identity.member_id):
                self.rebalancer.remove_pending_member_and_update_group(group, identity.member_id)
                self.heartbeats.remove_for_leaving_member(group, identity.member_id)
                log.info("pending member %s has left group %s", identity.member_id, group.group_id)
                results.append((identity, ErrorCode.NONE))
            else:
                member_error = validate_current_member(
                    group, identity.member_id, identity.group_instance_id, "leave-group"
                )
                if member_error is None:
                    self._remove_current_member(group, identity.member_id, reason)
                    member_error = ErrorCode.NONE
                results.append((identity, member_error))
        return LeaveGroupResult(ErrorCode.NONE, results)

    def _remove_current_member(self, group: GroupMetadata, member_id: str, reason: str) -> None:
        member = group.get(member_id)
        self.rebalancer.remove_member_and_update_group(
            group, member, f"removing member {member_id} on LeaveGroup; client reason: {reason}"
        )
        self.heartbeats.remove_for_leaving_member(group, member_id)
        log.info(
            "member %s has left group %s through LeaveGroup; client reason: %s",
            member,
            group.group_id,
            reason,
        )
