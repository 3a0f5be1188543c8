"""Members' sessions: the heartbeat purgatory, and the Heartbeat request that keeps a session alive.

Each member (and each member told MEMBER_ID_REQUIRED, still to come back) has one DelayedHeartbeat,
keyed by its ``MemberKey``, as in Kafka. Every heartbeat, commit, join and sync renews it: the
current one completes and the next deadline is watched. A member whose deadline passes has failed,
unless it waits in a rebalance (new members excepted: they cannot heartbeat yet, and a new member's
first deadline is NEW_MEMBER_JOIN_TIMEOUT_MS); what a failure does to the group is the rebalance's
business (``rebalance``), told through ``expired``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from coordinator.group_metadata import GroupMetadata, GroupState, MemberMetadata
from coordinator.group_status import GroupStatus, validate_current_member
from protocol.errors import ErrorCode
from server_common.purgatory import DelayedOperation, DelayedOperationPurgatory

log = logging.getLogger(__name__)

# A new member's JoinGroup may wait this long for its rebalance before the member is dropped (it
# cannot heartbeat yet, and its socket cannot be watched: Kafka's NewMemberJoinTimeoutMs).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

# (group, member id, pending?): a session ended without a heartbeat.
HeartbeatExpired = Callable[[GroupMetadata, str, bool], None]


@dataclass(frozen=True, slots=True)
class MemberKey:
    group_id: str
    member_id: str


class DelayedHeartbeat(DelayedOperation[None]):
    """One session deadline. It completes early once it no longer applies: the deadline was renewed,
    the member left (or, pending, joined), or the group is gone."""

    def __init__(
        self, heartbeats: Heartbeats, group: GroupMetadata, member_id: str, is_pending: bool, timeout_ms: int
    ) -> None:
        super().__init__(timeout_ms)
        self.heartbeats = heartbeats
        self.group = group
        self.member_id = member_id
        self.is_pending = is_pending

    def try_complete(self) -> bool:
        group = self.group
        if group.is_(GroupState.DEAD):
            return self.complete()
        if self.is_pending:
            return not group.is_pending_member(self.member_id) and self.complete()
        member = group.members.get(self.member_id)
        return (member is None or member.heartbeat_satisfied) and self.complete()

    def on_complete(self) -> None:
        return None

    def on_expiration(self) -> None:
        self.heartbeats.expired(self.group, self.member_id, self.is_pending)


class Heartbeats:
    """The heartbeat purgatory. ``expired`` is told of each session that ended without a heartbeat."""

    def __init__(self, status: GroupStatus, expired: HeartbeatExpired) -> None:
        self.status = status
        self.expired = expired
        self.purgatory = DelayedOperationPurgatory[None]("Heartbeat")

    def complete_and_schedule_next(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None
    ) -> None:
        """The member showed it is alive: its current deadline is met, the next one is its session
        timeout (or ``timeout_ms``) from now."""
        key = MemberKey(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.purgatory.check(key)
        member.heartbeat_satisfied = False
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        operation = DelayedHeartbeat(self, group, member.member_id, False, timeout)
        self.purgatory.try_complete_else_watch(operation, [key])

    def schedule_pending(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        """A member told MEMBER_ID_REQUIRED must come back within ``timeout_ms``."""
        operation = DelayedHeartbeat(self, group, member_id, True, timeout_ms)
        self.purgatory.try_complete_else_watch(operation, [MemberKey(group.group_id, member_id)])

    def remove_for_leaving_member(self, group: GroupMetadata, member_id: str) -> None:
        """The member (already out of the group) has no session any more."""
        self.purgatory.check(MemberKey(group.group_id, member_id))

    def cancel(self, group: GroupMetadata) -> None:
        """The group is unloaded: its members' deadlines go with it."""
        for member_id in [*group.members, *group.pending_members]:
            for operation in self.purgatory.watched(MemberKey(group.group_id, member_id)):
                if isinstance(operation, DelayedHeartbeat) and operation.group is group:
                    operation.cancel()

    def handle_heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        error = self.status.validate(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # the group is still loading: answer blindly
        if error is not None:
            return error
        group = self.status.manager.get_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = validate_current_member(group, member_id, group_instance_id, "heartbeat")
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.complete_and_schedule_next(group, group.get(member_id))
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE
