"""The rebalance of a classic group: PreparingRebalance until its members have rejoined,
CompletingRebalance until the leader's assignment is handed out, and the members a group loses on
the way (they leave, fail their session, or do not rejoin or sync in time).

Its deadlines are delayed operations in the rebalance purgatory, as Kafka's:

- DelayedJoin (``GroupJoinKey``): the rebalance completes once every known member has rejoined (and no
  member told MEMBER_ID_REQUIRED is still to come back), or after the largest rebalance timeout;
  members that did not rejoin are then dropped (static ones stay);
- InitialDelayedJoin: a new group first waits ``group.initial.rebalance.delay.ms``, again while
  members keep arriving, up to the rebalance timeout;
- DelayedSync (``GroupSyncKey``): members that send no SyncGroup within the rebalance timeout after
  the join completed are dropped, and the group rebalances again.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from coordinator.group_config import GroupConfig
from coordinator.group_metadata import (
    UNKNOWN_MEMBER_ID,
    GroupMetadata,
    GroupState,
    JoinGroupResult,
    MemberMetadata,
    SyncGroupResult,
)
from coordinator.group_metadata_manager import GroupMetadataManager
from coordinator.heartbeats import Heartbeats
from protocol.errors import ErrorCode
from server_common.purgatory import DelayedOperation, DelayedOperationPurgatory

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GroupJoinKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class GroupSyncKey:
    group_id: str


class DelayedJoin(DelayedOperation[None]):
    def __init__(self, rebalancer: Rebalancer, group: GroupMetadata, rebalance_timeout_ms: int) -> None:
        super().__init__(rebalance_timeout_ms)
        self.rebalancer = rebalancer
        self.group = group

    def try_complete(self) -> bool:
        return self.group.has_all_members_joined and self.complete()

    def on_complete(self) -> None:
        self.rebalancer.on_complete_join(self.group)


class InitialDelayedJoin(DelayedJoin):
    """A new group's first rebalance: it never completes early, and waits once more (within
    ``remaining_ms``) each time members joined during the last delay."""

    def __init__(
        self,
        rebalancer: Rebalancer,
        group: GroupMetadata,
        configured_delay_ms: int,
        delay_ms: int,
        remaining_ms: int,
    ) -> None:
        super().__init__(rebalancer, group, delay_ms)
        self.configured_delay_ms = configured_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        group = self.group
        if group.new_member_added and self.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.configured_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - self.timeout_ms, 0)
            self.rebalancer.watch_join(
                InitialDelayedJoin(self.rebalancer, group, self.configured_delay_ms, delay, remaining)
            )
            return
        super().on_complete()


class DelayedSync(DelayedOperation[None]):
    """The SyncGroup deadline of one generation; it completes early once every member has synced or
    the generation is over."""

    def __init__(
        self, rebalancer: Rebalancer, group: GroupMetadata, generation_id: int, rebalance_timeout_ms: int
    ) -> None:
        super().__init__(rebalance_timeout_ms)
        self.rebalancer = rebalancer
        self.group = group
        self.generation_id = generation_id

    def try_complete(self) -> bool:
        group = self.group
        over = (
            self.generation_id != group.generation_id
            or group.state in (GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE)
            or group.has_received_sync_from_all_members()
        )
        return over and self.complete()

    def on_complete(self) -> None:
        return None

    def on_expiration(self) -> None:
        self.rebalancer.on_expire_pending_sync(self.group, self.generation_id)


class Rebalancer:
    """Drives groups through their rebalances, with the rebalance purgatory for its deadlines."""

    def __init__(self, config: GroupConfig, manager: GroupMetadataManager, heartbeats: Heartbeats) -> None:
        self.config = config
        self.manager = manager
        self.heartbeats = heartbeats
        self.purgatory = DelayedOperationPurgatory[None]("Rebalance")

    def cancel(self, group: GroupMetadata) -> None:
        """The group is unloaded: its rebalance deadlines go with it."""
        for key in (GroupJoinKey(group.group_id), GroupSyncKey(group.group_id)):
            for operation in self.purgatory.watched(key):
                if isinstance(operation, DelayedJoin | DelayedSync) and operation.group is group:
                    operation.cancel()

    # -- PreparingRebalance -----------------------------------------------------------------------

    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # Members waiting for their assignment must rejoin instead.
            self.reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial_delay = self.config.initial_rebalance_delay_ms
        join: DelayedJoin
        if group.is_(GroupState.EMPTY):
            remaining = max(group.rebalance_timeout_ms - initial_delay, 0)
            join = InitialDelayedJoin(self, group, initial_delay, initial_delay, remaining)
        else:
            join = DelayedJoin(self, group, group.rebalance_timeout_ms)
        group.transition_to(GroupState.PREPARING_REBALANCE)
        log.info(
            "preparing to rebalance group %s in state %s with old generation %d (__consumer_offsets-%d) "
            "(reason: %s)",
            group.group_id,
            group.state,
            group.generation_id,
            self.manager.partition_for(group.group_id),
            reason,
        )
        self.watch_join(join)

    def watch_join(self, join: DelayedJoin) -> None:
        self.purgatory.try_complete_else_watch(join, [GroupJoinKey(join.group.group_id)])

    def try_complete_join(self, group: GroupMetadata) -> None:
        self.purgatory.check(GroupJoinKey(group.group_id))

    def on_complete_join(self, group: GroupMetadata) -> None:
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                log.info(
                    "group %s removes dynamic member %s, which did not rejoin",
                    group.group_id,
                    member.member_id,
                )
                group.remove(member.member_id)
                self.heartbeats.remove_for_leaving_member(group, member.member_id)
        if group.is_(GroupState.DEAD):
            log.info("group %s is dead, skipping rebalance stage", group.group_id)
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout for sessions to expire the members.
            log.error("group %s could not complete rebalance because no members rejoined", group.group_id)
            self.watch_join(DelayedJoin(self, group, group.rebalance_timeout_ms))
            return
        group.init_next_generation()
        partition = self.manager.partition_for(group.group_id)
        if group.is_(GroupState.EMPTY):
            log.info(
                "group %s with generation %d is now empty (__consumer_offsets-%d)",
                group.group_id,
                group.generation_id,
                partition,
            )

            def stored(done: asyncio.Future[int]) -> None:
                # A lost empty generation only means the previous one is loaded after a failover, and its
                # members then expire: a warning is enough.
                if not done.cancelled() and done.result() != ErrorCode.NONE:
                    log.warning(
                        "failed to write empty metadata for group %s: %s",
                        group.group_id,
                        ErrorCode(done.result()).name,
                    )

            self.manager.store_group(group, {}).add_done_callback(stored)
            return
        log.info(
            "stabilized group %s generation %d (__consumer_offsets-%d) with %d members",
            group.group_id,
            group.generation_id,
            partition,
            len(group),
        )
        for member in group.members.values():
            group.maybe_invoke_join(member, self.join_result(group, member))
            self.heartbeats.complete_and_schedule_next(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)

    def join_result(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        with_members: bool = True,
        skip_assignment: bool = False,
    ) -> JoinGroupResult:
        """The answer for ``member`` in the current generation; the leader's lists every member."""
        leader = group.is_leader(member.member_id)
        return JoinGroupResult(
            member.member_id,
            ErrorCode.NONE,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            skip_assignment,
            group.current_member_metadata() if leader and with_members else [],
        )

    # -- CompletingRebalance ----------------------------------------------------------------------

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        sync = DelayedSync(self, group, group.generation_id, group.rebalance_timeout_ms)
        self.purgatory.try_complete_else_watch(sync, [GroupSyncKey(group.group_id)])

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None:
        if generation_id != group.generation_id or group.state not in (
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
        ):
            log.error("unexpected sync expiration of group %s in state %s", group.group_id, group.state)
            return
        if group.has_received_sync_from_all_members():
            return
        missing = sorted(group.pending_sync_members)
        for member_id in missing:
            group.remove(member_id)
            self.heartbeats.remove_for_leaving_member(group, member_id)
        log.info("group %s removed members that sent no SyncGroup: %s", group.group_id, missing)
        self.prepare_rebalance(group, f"removing {missing} on pending sync request expiration")

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self.purgatory.check(GroupSyncKey(group.group_id))

    def remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        self.purgatory.check(GroupSyncKey(group.group_id))

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: GroupMetadata, error: int) -> None:
        protocol_type, protocol_name = (
            (group.protocol_type, group.protocol_name) if error == ErrorCode.NONE else (None, None)
        )
        for member in group.members.values():
            if not member.assignment and error == ErrorCode.NONE:
                log.debug(
                    "sending empty assignment to member %s of %s for generation %d",
                    member.member_id,
                    group.group_id,
                    group.generation_id,
                )
            if group.maybe_invoke_sync(
                member, SyncGroupResult(error, protocol_type, protocol_name, member.assignment)
            ):
                # Sessions restart once the assignment is out: one may have run out while waiting.
                self.heartbeats.complete_and_schedule_next(group, member)

    # -- members leaving --------------------------------------------------------------------------

    def remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        # A new member may still wait for its JoinGroup: it is told to join again.
        group.maybe_invoke_join(member, JoinGroupResult(UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
        group.maybe_invoke_sync(member, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, reason)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self.try_complete_join(group)

    def remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.try_complete_join(group)

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None:
        """A session ended without a heartbeat (Kafka's onExpireHeartbeat)."""
        if group.is_(GroupState.DEAD):
            return
        if is_pending:
            if group.is_pending_member(member_id):
                log.info("pending member %s of group %s expired", member_id, group.group_id)
                self.remove_pending_member_and_update_group(group, member_id)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat:
            return
        log.info("member %s in group %s has failed, removing it from the group", member_id, group.group_id)
        self.remove_member_and_update_group(
            group, member, f"removing member {member_id} on heartbeat expiration"
        )
