"""GroupCoordinator: Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and
offset management (OffsetCommit, OffsetFetch, OffsetDelete), plus DescribeGroups, ListGroups and
DeleteGroups, for the groups whose ``__consumer_offsets`` partition this broker leads.

It follows Kafka's GroupCoordinator (3.x) decision for decision; what Kafka runs in purgatories runs
here on event-loop timers:

- the rebalance deadline (DelayedJoin): a rebalance completes once every known member has rejoined
  (and no member told MEMBER_ID_REQUIRED is still to come back), or after the largest rebalance
  timeout; members that did not rejoin are then dropped (static ones stay). A new group first waits
  ``group.initial.rebalance.delay.ms``, again while members keep arriving, up to the rebalance
  timeout (InitialDelayedJoin);
- the session deadline of each member (DelayedHeartbeat), reset by every heartbeat, commit, join and
  sync; a member waiting in a rebalance does not expire, and a member still joining for the first time
  expires after 5 minutes; members told MEMBER_ID_REQUIRED expire after their session timeout;
- the SyncGroup deadline (DelayedSync): members that do not send SyncGroup within the rebalance timeout
  after the join completed are dropped and the group rebalances again.

JoinGroup and SyncGroup answers are ``asyncio.Future``s that the group completes when the rebalance
does; offset commits and group records are answered once their records are replicated.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from coordinator.group_metadata import (
    CONSUMER_PROTOCOL_TYPE,
    UNKNOWN_MEMBER_ID,
    GroupMetadata,
    GroupState,
    GroupSummary,
    JoinGroupResult,
    MemberMetadata,
    OffsetAndMetadata,
    SyncGroupResult,
    TopicPartition,
    chain_waiter,
)
from coordinator.group_metadata_manager import GroupMetadataManager
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
# A new member's JoinGroup may wait this long for its rebalance before the member is dropped (it
# cannot heartbeat yet, and its socket cannot be watched: Kafka's NewMemberJoinTimeoutMs).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

EMPTY_GROUP = GroupSummary("", "", "", [])
DEAD_GROUP = GroupSummary(str(GroupState.DEAD), "", "", [])


@dataclass(frozen=True)
class GroupConfig:
    """Kafka's group.* broker settings, with its defaults."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = INT32_MAX
    initial_rebalance_delay_ms: int = 3000


@dataclass(frozen=True, slots=True)
class MemberJoin:
    """One JoinGroup: the joining member (``member_id`` UNKNOWN_MEMBER_ID when it has none yet), its
    client, timeouts and protocols (in its order of preference), and what the request's version allows."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    # JoinGroup v4+ (KIP-394): a dynamic member without id is given one and must rejoin with it.
    require_known_member_id: bool = False
    # JoinGroup v9+: a static leader rejoining a stable group may be told to skip the assignment.
    support_skipping_assignment: bool = False
    reason: str | None = None

    @property
    def client_reason(self) -> str:
        """The client's reason for joining, as the rebalance reasons quote it."""
        return self.reason or "not provided"


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


@dataclass(eq=False)
class _DelayedJoin:
    group: GroupMetadata
    delay_ms: int
    initial: bool = False
    remaining_ms: int = 0  # initial joins: how much longer the delay may still grow
    timer: asyncio.TimerHandle | None = None


@dataclass(eq=False)
class _DelayedSync:
    group: GroupMetadata
    generation_id: int
    timer: asyncio.TimerHandle | None = None


def _done(value: object) -> asyncio.Future:
    future = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future


class GroupCoordinator:
    def __init__(self, broker_id: int, config: GroupConfig, manager: GroupMetadataManager) -> None:
        self.broker_id = broker_id
        self.config = config
        self.manager = manager
        self._active = False
        self._joins: dict[str, _DelayedJoin] = {}
        self._syncs: dict[str, _DelayedSync] = {}
        # group id -> member id (or pending member id) -> its session deadline.
        self._heartbeats: dict[str, dict[str, asyncio.TimerHandle]] = {}
        self._expiration: asyncio.Task[None] | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    def startup(self) -> None:
        log.info("group coordinator %d starting", self.broker_id)
        self._active = True
        self._expiration = asyncio.get_running_loop().create_task(
            self._expire_offsets_periodically(), name="group-metadata-expiration"
        )

    async def shutdown(self) -> None:
        self._active = False
        if self._expiration is not None:
            self._expiration.cancel()
            await asyncio.gather(self._expiration, return_exceptions=True)
        self.manager.shutdown()
        for partition in sorted(self.manager.owned_partitions | self.manager.loading_partitions):
            self.manager.remove_groups_for_partition(partition, None, self._on_group_unloaded)
        log.info("group coordinator %d shut down", self.broker_id)

    async def _expire_offsets_periodically(self) -> None:
        interval = self.manager.config.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.manager.expire_offsets()
            except Exception:
                log.exception("offset expiration failed")

    def partition_for(self, group_id: str) -> int:
        return self.manager.partition_for(group_id)

    def on_election(self, partition: int, epoch: int) -> None:
        """This broker now leads ``__consumer_offsets-<partition>``: load its groups."""
        log.debug("elected as the group coordinator of partition %d in epoch %d", partition, epoch)
        self.manager.schedule_load(partition, epoch, self._on_group_loaded)

    def on_resignation(self, partition: int, epoch: int | None) -> None:
        """This broker no longer leads ``__consumer_offsets-<partition>``: drop its groups."""
        log.debug("resigned as the group coordinator of partition %d in epoch %s", partition, epoch)
        self.manager.remove_groups_for_partition(partition, epoch, self._on_group_unloaded)

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        log.info("loaded group %s with generation %d", group.group_id, group.generation_id)
        if len(group) > self.config.max_size:
            self._prepare_rebalance(
                group,
                f"freshly-loaded group is over capacity ({self.config.max_size}); rebalancing so that "
                "its consumers can commit offsets",
            )
        for member in group.members.values():
            self._complete_and_schedule_next_heartbeat(group, member)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        log.info("unloading group %s with generation %d", group.group_id, group.generation_id)
        previous = group.state
        group.transition_to(GroupState.DEAD)
        if previous is GroupState.PREPARING_REBALANCE:
            for member in group.members.values():
                group.maybe_invoke_join(member, JoinGroupResult(member.member_id, ErrorCode.NOT_COORDINATOR))
        elif previous in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            for member in group.members.values():
                group.maybe_invoke_sync(member, SyncGroupResult(ErrorCode.NOT_COORDINATOR))
        self._cancel_timers(group)

    def _cancel_timers(self, group: GroupMetadata) -> None:
        join = self._joins.get(group.group_id)
        if join is not None and join.group is group:
            self._unwatch_join(join)
        sync = self._syncs.get(group.group_id)
        if sync is not None and sync.group is group:
            self._unwatch_sync(sync)
        for timer in self._heartbeats.pop(group.group_id, {}).values():
            timer.cancel()

    # -- checks -----------------------------------------------------------------------------------

    def _validate_group_status(self, group_id: str, allow_empty_id: bool = False) -> int | None:
        """Whether this broker may serve the group now: Kafka's validateGroupStatus. OffsetCommit,
        OffsetFetch, DescribeGroups and DeleteGroups accept the empty group id (old clients used it)."""
        if not group_id and not allow_empty_id:
            return ErrorCode.INVALID_GROUP_ID
        if not self._active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.manager.is_group_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self.manager.is_group_local(group_id):
            return ErrorCode.NOT_COORDINATOR
        return None

    def _validate_current_member(
        self, group: GroupMetadata, member_id: str, group_instance_id: str | None, operation: str
    ) -> int | None:
        """A static member's instance id must map to ``member_id`` (FENCED_INSTANCE_ID if it maps to
        another: a newer instance took over); the member must exist (UNKNOWN_MEMBER_ID)."""
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info(
                    "%s of member %s of group %s is fenced: instance %s is now member %s",
                    operation,
                    member_id,
                    group.group_id,
                    group_instance_id,
                    current,
                )
                return ErrorCode.FENCED_INSTANCE_ID
            return None
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """group.max.size: existing members are accepted; new ones while there is room."""
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or (
                group.num_awaiting_join < self.config.max_size
            )
        return group.has(member_id) or len(group) < self.config.max_size

    # -- JoinGroup --------------------------------------------------------------------------------

    def handle_join_group(self, join: MemberJoin) -> asyncio.Future[JoinGroupResult]:
        error = self._validate_group_status(join.group_id)
        if error is not None:
            return _done(JoinGroupResult(join.member_id, error))
        if not (
            self.config.min_session_timeout_ms
            <= join.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return _done(JoinGroupResult(join.member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
        is_unknown = join.member_id == UNKNOWN_MEMBER_ID
        # A group comes into being when a member without id joins it; a member id for a group that
        # does not exist is unknown.
        group = self.manager.get_or_maybe_create_group(join.group_id, is_unknown)
        if group is None:
            return _done(JoinGroupResult(join.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        future: asyncio.Future[JoinGroupResult] = asyncio.get_running_loop().create_future()
        if not self._accept_joining_member(group, join.member_id):
            group.remove(join.member_id)
            future.set_result(JoinGroupResult(UNKNOWN_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif (error := self._join_error(group, join)) is not None:
            # Kafka answers a new member with UNKNOWN_MEMBER_ID and a current one with its own id: both are
            # the id the member came with.
            future.set_result(JoinGroupResult(join.member_id, error))
        elif is_unknown:
            self._do_new_member_join(group, future, join)
        else:
            self._do_current_member_join(group, future, join)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)
        return future

    @staticmethod
    def _join_error(group: GroupMetadata, join: MemberJoin) -> int | None:
        """Why neither a new nor a current member may join ``group`` now, if it may not."""
        if group.is_(GroupState.DEAD):
            # The group was just removed, or moved to another coordinator: find it again and rejoin.
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not group.supports_protocols(join.protocol_type, {name for name, _ in join.protocols}):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _do_new_member_join(
        self, group: GroupMetadata, future: asyncio.Future[JoinGroupResult], join: MemberJoin
    ) -> None:
        group_instance_id = join.group_instance_id
        new_member_id = group.generate_member_id(join.client_id, group_instance_id)
        if group_instance_id is not None:
            old_member_id = group.current_static_member_id(group_instance_id)
            if old_member_id is not None:
                log.info(
                    "static member %s of group %s rejoins in state %s; replacing member %s by %s",
                    group_instance_id,
                    group.group_id,
                    group.state,
                    old_member_id,
                    new_member_id,
                )
                self._update_static_member_and_rebalance(
                    group, future, join, group_instance_id, old_member_id, new_member_id
                )
                return
            log.info(
                "static member %s joins group %s in state %s as %s",
                group_instance_id,
                group.group_id,
                group.state,
                new_member_id,
            )
        elif join.require_known_member_id:
            # JoinGroup v4+: the member gets its id first and comes back with it (KIP-394), so that a
            # client whose first JoinGroup timed out does not leave a ghost member behind.
            log.info(
                "dynamic member joins group %s in state %s: member id %s, to rejoin with",
                group.group_id,
                group.state,
                new_member_id,
            )
            group.pending_members.add(new_member_id)
            self._schedule_heartbeat(group, new_member_id, join.session_timeout_ms, pending=True)
            future.set_result(JoinGroupResult(new_member_id, ErrorCode.MEMBER_ID_REQUIRED))
            return
        self._add_member_and_rebalance(group, future, join, new_member_id)

    def _do_current_member_join(
        self, group: GroupMetadata, future: asyncio.Future[JoinGroupResult], join: MemberJoin
    ) -> None:
        member_id = join.member_id
        if group.is_pending_member(member_id):
            if join.group_instance_id is not None:
                raise AssertionError(
                    f"JoinGroup with group instance id {join.group_instance_id} "
                    f"for pending member {member_id}"
                )
            self._add_member_and_rebalance(group, future, join, member_id)
            return
        error = self._validate_current_member(group, member_id, join.group_instance_id, "join-group")
        if error is not None:
            future.set_result(JoinGroupResult(member_id, error))
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            why = f"member {member_id} joining group during {state}"
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(join.protocols):
                # The member did not get the answer to its JoinGroup: give it again.
                future.set_result(self._join_result(group, member))
                return
            why = f"updating metadata for member {member_id} during {state}"
        elif state is GroupState.STABLE:
            if group.is_leader(member_id):
                # The leader's JoinGroup asks for a rebalance (its consumer saw the topics change).
                why = f"leader {member_id} re-joining group during {state}"
            elif not member.matches(join.protocols):
                why = f"updating metadata for member {member_id} during {state}"
            else:
                # A follower without changes gets the current generation and syncs.
                future.set_result(self._join_result(group, member, with_members=False))
                return
        else:
            log.warning(
                "rejoining member %s of group %s in unexpected state %s", member_id, group.group_id, state
            )
            future.set_result(JoinGroupResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            return
        self._update_member_and_rebalance(
            group, member, future, join, f"{why}; client reason: {join.client_reason}"
        )

    def _join_result(
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

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        future: asyncio.Future[JoinGroupResult],
        join: MemberJoin,
        member_id: str,
    ) -> None:
        """``member_id``: the id the coordinator gave the member (a new member joins without one)."""
        member = MemberMetadata(
            member_id,
            join.group_instance_id,
            join.client_id,
            join.client_host,
            join.rebalance_timeout_ms,
            join.session_timeout_ms,
            join.protocol_type,
            join.protocols,
        )
        member.is_new = True
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, future)
        self._schedule_heartbeat(group, member_id, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(
            group,
            f"adding new member {member_id} with group instance id {join.group_instance_id}; "
            f"client reason: {join.client_reason}",
        )

    def _update_static_member_and_rebalance(
        self,
        group: GroupMetadata,
        future: asyncio.Future[JoinGroupResult],
        join: MemberJoin,
        group_instance_id: str,
        old_member_id: str,
        new_member_id: str,
    ) -> None:
        """``group_instance_id`` is ``join.group_instance_id``, given apart because a static member's
        is never None."""
        current_leader = group.leader_id or ""
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        self._cancel_heartbeat(group, old_member_id)
        self._complete_and_schedule_next_heartbeat(group, member)
        old_protocols = member.supported_protocols
        old_rebalance_timeout_ms = member.rebalance_timeout_ms
        old_session_timeout_ms = member.session_timeout_ms
        group.update_member(
            member, join.protocols, join.rebalance_timeout_ms, join.session_timeout_ms, future
        )
        state = group.state
        if state is GroupState.STABLE:
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance(
                    group,
                    f"group's selected protocol will change because static member {new_member_id} "
                    f"with instance id {group_instance_id} joined with change of protocol; "
                    f"client reason: {join.client_reason}",
                )
                return
            # Same protocol: no rebalance; the new member id is persisted and the member keeps its
            # assignment (KIP-345).
            log.info(
                "static member %s of stable group %s rejoins without rebalance",
                group_instance_id,
                group.group_id,
            )
            assignment = {m.member_id: m.assignment for m in group.members.values()}

            def stored(done: asyncio.Future[int]) -> None:
                error = done.result() if not done.cancelled() else ErrorCode.UNKNOWN_SERVER_ERROR
                if group.is_(GroupState.DEAD):
                    return
                if error != ErrorCode.NONE:
                    log.warning(
                        "failed to persist metadata for group %s: %s", group.group_id, ErrorCode(error).name
                    )
                    # Undo the replacement: the old member id stays valid, the new one is refused.
                    group.update_member(
                        member, old_protocols, old_rebalance_timeout_ms, old_session_timeout_ms, None
                    )
                    restored = group.replace_static_member(group_instance_id, new_member_id, old_member_id)
                    self._cancel_heartbeat(group, new_member_id)
                    self._complete_and_schedule_next_heartbeat(group, restored)
                    if not future.done():
                        future.set_result(
                            JoinGroupResult(
                                UNKNOWN_MEMBER_ID,
                                error,
                                group.generation_id,
                                group.protocol_type,
                                group.protocol_name,
                                current_leader,
                            )
                        )
                elif group.is_(GroupState.STABLE):
                    if join.support_skipping_assignment:
                        # JoinGroup v9+: a static leader learns it leads, but skips the assignment
                        # (the group is stable; a new assignment would not be sent to anyone).
                        is_leader = group.is_leader(new_member_id)
                        group.maybe_invoke_join(
                            member, self._join_result(group, member, skip_assignment=is_leader)
                        )
                    else:
                        # Earlier versions: answer with the old leader id, so that a returning leader
                        # does not think it leads and compute an assignment nobody would receive.
                        result = self._join_result(group, member, with_members=False)
                        result.leader_id = current_leader
                        group.maybe_invoke_join(member, result)

            self.manager.store_group(group, assignment).add_done_callback(stored)
        elif state is GroupState.COMPLETING_REBALANCE:
            # The leader may already be assigning with the old member id: start over.
            self._prepare_rebalance(
                group,
                f"updating metadata for static member {new_member_id} with instance id {group_instance_id}; "
                f"client reason: {join.client_reason}",
            )
        elif state in (GroupState.EMPTY, GroupState.DEAD):
            raise AssertionError(
                f"group {group.group_id} in state {state} when static member {group_instance_id} rejoins"
            )

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        future: asyncio.Future[JoinGroupResult],
        join: MemberJoin,
        reason: str,
    ) -> None:
        group.update_member(
            member, join.protocols, join.rebalance_timeout_ms, join.session_timeout_ms, future
        )
        self._maybe_prepare_rebalance(group, reason)

    # -- rebalancing ------------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # Members waiting for their assignment must rejoin instead.
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial_delay = self.config.initial_rebalance_delay_ms
        if group.is_(GroupState.EMPTY):
            join = _DelayedJoin(
                group,
                initial_delay,
                initial=True,
                remaining_ms=max(group.rebalance_timeout_ms - initial_delay, 0),
            )
        else:
            join = _DelayedJoin(group, group.rebalance_timeout_ms)
        group.transition_to(GroupState.PREPARING_REBALANCE)
        log.info(
            "preparing to rebalance group %s in state %s with old generation %d (__consumer_offsets-%d) "
            "(reason: %s)",
            group.group_id,
            group.state,
            group.generation_id,
            self.partition_for(group.group_id),
            reason,
        )
        self._watch_join(join)

    def _watch_join(self, join: _DelayedJoin) -> None:
        """Kafka's tryCompleteElseWatch for a DelayedJoin (an initial one never completes early)."""
        group = join.group
        if not join.initial and group.has_all_members_joined:
            self._on_complete_join(group)
            return
        previous = self._joins.get(group.group_id)
        if previous is not None:
            self._unwatch_join(previous)
        self._joins[group.group_id] = join
        join.timer = asyncio.get_running_loop().call_later(join.delay_ms / 1000, self._join_expired, join)

    def _unwatch_join(self, join: _DelayedJoin) -> None:
        if join.timer is not None:
            join.timer.cancel()
        if self._joins.get(join.group.group_id) is join:
            del self._joins[join.group.group_id]

    def _try_complete_join(self, group: GroupMetadata) -> None:
        join = self._joins.get(group.group_id)
        if join is not None and join.group is group and not join.initial and group.has_all_members_joined:
            self._unwatch_join(join)
            self._on_complete_join(group)

    def _join_expired(self, join: _DelayedJoin) -> None:
        self._unwatch_join(join)
        group = join.group
        if join.initial and group.new_member_added and join.remaining_ms != 0:
            # Members are still arriving: wait another delay, within the rebalance timeout.
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, join.remaining_ms)
            remaining = max(join.remaining_ms - join.delay_ms, 0)
            self._watch_join(_DelayedJoin(group, delay, initial=True, remaining_ms=remaining))
            return
        self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                log.info(
                    "group %s removes dynamic member %s, which did not rejoin",
                    group.group_id,
                    member.member_id,
                )
                group.remove(member.member_id)
                self._cancel_heartbeat(group, member.member_id)
        if group.is_(GroupState.DEAD):
            log.info("group %s is dead, skipping rebalance stage", group.group_id)
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout for sessions to expire the members.
            log.error("group %s could not complete rebalance because no members rejoined", group.group_id)
            self._watch_join(_DelayedJoin(group, group.rebalance_timeout_ms))
            return
        group.init_next_generation()
        partition = self.partition_for(group.group_id)
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
            group.maybe_invoke_join(member, self._join_result(group, member))
            self._complete_and_schedule_next_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)

    # -- the SyncGroup deadline -------------------------------------------------------------------

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        previous = self._syncs.get(group.group_id)
        if previous is not None:
            self._unwatch_sync(previous)
        sync = _DelayedSync(group, group.generation_id)
        self._syncs[group.group_id] = sync
        sync.timer = asyncio.get_running_loop().call_later(
            group.rebalance_timeout_ms / 1000, self._sync_expired, sync
        )

    def _unwatch_sync(self, sync: _DelayedSync) -> None:
        if sync.timer is not None:
            sync.timer.cancel()
        if self._syncs.get(sync.group.group_id) is sync:
            del self._syncs[sync.group.group_id]

    def _try_complete_sync(self, group: GroupMetadata) -> None:
        sync = self._syncs.get(group.group_id)
        if sync is None or sync.group is not group:
            return
        if (
            sync.generation_id != group.generation_id
            or group.state in (GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE)
            or group.has_received_sync_from_all_members()
        ):
            self._unwatch_sync(sync)

    def _sync_expired(self, sync: _DelayedSync) -> None:
        self._unwatch_sync(sync)
        group = sync.group
        if sync.generation_id != group.generation_id or group.state not in (
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
            self._cancel_heartbeat(group, member_id)
        log.info("group %s removed members that sent no SyncGroup: %s", group.group_id, missing)
        self._prepare_rebalance(group, f"removing {missing} on pending sync request expiration")

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self._try_complete_sync(group)

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        self._try_complete_sync(group)

    # -- sessions ---------------------------------------------------------------------------------

    def _schedule_heartbeat(
        self, group: GroupMetadata, member_id: str, timeout_ms: int, pending: bool = False
    ) -> None:
        timers = self._heartbeats.setdefault(group.group_id, {})
        previous = timers.pop(member_id, None)
        if previous is not None:
            previous.cancel()
        timers[member_id] = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._heartbeat_expired, group, member_id, pending
        )

    def _cancel_heartbeat(self, group: GroupMetadata, member_id: str) -> None:
        timers = self._heartbeats.get(group.group_id)
        if timers is None:
            return
        timer = timers.pop(member_id, None)
        if timer is not None:
            timer.cancel()
        if not timers:
            del self._heartbeats[group.group_id]

    def _complete_and_schedule_next_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)

    def _heartbeat_expired(self, group: GroupMetadata, member_id: str, pending: bool) -> None:
        timers = self._heartbeats.get(group.group_id)
        if timers is not None:
            timers.pop(member_id, None)
            if not timers:
                del self._heartbeats[group.group_id]
        if group.is_(GroupState.DEAD):
            return
        if pending:
            if group.is_pending_member(member_id):
                log.info("pending member %s of group %s expired", member_id, group.group_id)
                self._remove_pending_member_and_update_group(group, member_id)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        # Members waiting in a rebalance do not expire (new ones excepted): their sessions restart
        # when the rebalance answers them.
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return
        log.info("member %s in group %s has failed, removing it from the group", member_id, group.group_id)
        self._remove_member_and_update_group(
            group, member, f"removing member {member_id} on heartbeat expiration"
        )

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        # A new member may still wait for its JoinGroup: it is told to join again.
        group.maybe_invoke_join(member, JoinGroupResult(UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
        group.maybe_invoke_sync(member, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # -- SyncGroup --------------------------------------------------------------------------------

    def handle_sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
    ) -> asyncio.Future[SyncGroupResult]:
        error = self._validate_group_status(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance's state was lost with the old coordinator: rejoin (older clients do not
            # expect COORDINATOR_LOAD_IN_PROGRESS here).
            return _done(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        if error is not None:
            return _done(SyncGroupResult(error))
        group = self.manager.get_group(group_id)
        if group is None:
            return _done(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.is_(GroupState.DEAD):
            return _done(SyncGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        error = self._validate_current_member(group, member_id, group_instance_id, "sync-group")
        if error is None:
            if generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            elif (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name
            ):
                error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            return _done(SyncGroupResult(error))
        state = group.state
        if state is GroupState.EMPTY:
            return _done(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if state is GroupState.PREPARING_REBALANCE:
            return _done(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member = group.get(member_id)
        if state is GroupState.STABLE:
            self._remove_pending_sync_member(group, member_id)
            result = _done(
                SyncGroupResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
            )
            self._complete_and_schedule_next_heartbeat(group, member)
            return result
        # CompletingRebalance: followers wait for the leader's assignment.
        future: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()
        member.awaiting_sync = chain_waiter(member.awaiting_sync, future)
        self._remove_pending_sync_member(group, member_id)
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
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(
                group,
                f"error {ErrorCode(error).name} when storing group assignment during SyncGroup "
                f"(member: {member_id})",
            )
            return
        for member in group.members.values():
            member.assignment = assignment[member.member_id]
        self._propagate_assignment(group, ErrorCode.NONE)
        group.transition_to(GroupState.STABLE)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: int) -> None:
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
                self._complete_and_schedule_next_heartbeat(group, member)

    # -- LeaveGroup -------------------------------------------------------------------------------

    def handle_leave_group(self, group_id: str, leaving: list[MemberIdentity]) -> LeaveGroupResult:
        error = self._validate_group_status(group_id)
        if error is not None:
            return LeaveGroupResult(error, [])
        group = self.manager.get_group(group_id)
        if group is None:
            return LeaveGroupResult(ErrorCode.NONE, [(m, ErrorCode.UNKNOWN_MEMBER_ID) for m in leaving])
        if group.is_(GroupState.DEAD):
            return LeaveGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, [])
        results = []
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
                self._remove_pending_member_and_update_group(group, identity.member_id)
                self._cancel_heartbeat(group, identity.member_id)
                log.info("pending member %s has left group %s", identity.member_id, group.group_id)
                results.append((identity, ErrorCode.NONE))
            else:
                member_error = self._validate_current_member(
                    group, identity.member_id, identity.group_instance_id, "leave-group"
                )
                if member_error is None:
                    self._remove_current_member(group, identity.member_id, reason)
                    member_error = ErrorCode.NONE
                results.append((identity, member_error))
        return LeaveGroupResult(ErrorCode.NONE, results)

    def _remove_current_member(self, group: GroupMetadata, member_id: str, reason: str) -> None:
        member = group.get(member_id)
        self._remove_member_and_update_group(
            group, member, f"removing member {member_id} on LeaveGroup; client reason: {reason}"
        )
        self._cancel_heartbeat(group, member_id)
        log.info(
            "member %s has left group %s through LeaveGroup; client reason: %s",
            member,
            group.group_id,
            reason,
        )

    # -- Heartbeat --------------------------------------------------------------------------------

    def handle_heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        error = self._validate_group_status(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # the group is still loading: answer blindly
        if error is not None:
            return error
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, group_instance_id, "heartbeat")
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._complete_and_schedule_next_heartbeat(group, group.get(member_id))
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # -- offsets ----------------------------------------------------------------------------------

    def handle_commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> asyncio.Future[dict[TopicPartition, int]]:
        """Each partition's error, once the commit is replicated (or refused)."""
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return _done(dict.fromkeys(offsets, error))
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # A member of a group that is gone (or never was here): its generation is stale.
                return _done(dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION))
            # A consumer that manages its partitions itself, using Kafka only to store offsets.
            group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.manager.time_ms))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return _done(dict.fromkeys(offsets, error))
        state = group.state
        if state is GroupState.EMPTY:
            return self.manager.store_offsets(group, offsets)
        if state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            # Commits are allowed while preparing a rebalance: the heartbeat tells the member to rejoin.
            self._complete_and_schedule_next_heartbeat(group, group.get(member_id))
            return self.manager.store_offsets(group, offsets)
        if state is GroupState.COMPLETING_REBALANCE:
            # A valid member and generation, but assignments are not out yet: let it rejoin gracefully.
            return _done(dict.fromkeys(offsets, ErrorCode.REBALANCE_IN_PROGRESS))
        raise AssertionError(f"unexpected state {state} of group {group_id}")

    def _validate_offset_commit(
        self, group: GroupMetadata, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> int | None:
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return None  # an admin client or a consumer without group management, with the group empty
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = self._validate_current_member(group, member_id, group_instance_id, "offset-commit")
            if error is not None:
                return error
            return ErrorCode.ILLEGAL_GENERATION if generation_id != group.generation_id else None
        if not group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit while the group has members
        return None

    def handle_fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> tuple[int, dict[TopicPartition, OffsetAndMetadata | None]]:
        """(error, committed offsets): every partition with an offset when ``partitions`` is None.
        Offsets are returned whatever the group's state: a group may use Kafka to store offsets only."""
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, {}
        return ErrorCode.NONE, self.manager.get_offsets(group_id, partitions)

    async def handle_delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete: an empty group's offsets go; a consumer group with members keeps those of
        topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC)."""
        error = self._validate_group_status(group_id)
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            missing = self.manager.group_not_exists(group_id)
            return (ErrorCode.GROUP_ID_NOT_FOUND if missing else ErrorCode.NOT_COORDINATOR), {}
        errors: dict[TopicPartition, int] = {}
        if group.is_(GroupState.EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
            errors.update(
                {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if tp not in eligible}
            )
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        if eligible:
            removed = await self.manager.cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible))
            errors.update(dict.fromkeys(eligible, ErrorCode.NONE))
            log.info("deleted %d offsets of group %s: %s", removed, group_id, eligible)
        return ErrorCode.NONE, errors

    # -- admin ------------------------------------------------------------------------------------

    def handle_list_groups(self, states: set[str]) -> tuple[int, list[tuple[str, str, str]]]:
        """(error, [(group id, protocol type, state)]) of the groups this broker coordinates, those in
        ``states`` (case-insensitive) when given. COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
        if not self._active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.is_loading else ErrorCode.NONE
        wanted = {s.lower() for s in states}
        return error, [
            (g.group_id, g.protocol_type or "", str(g.state))
            for g in self.manager.current_groups()
            if not wanted or str(g.state).lower() in wanted
        ]

    def handle_describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, EMPTY_GROUP
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.NONE, DEAD_GROUP
        return ErrorCode.NONE, group.summary()

    async def handle_delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        """DeleteGroups: only empty groups may go (NON_EMPTY_GROUP otherwise); their offsets go too."""
        errors: dict[str, int] = {}
        eligible: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self._validate_group_status(group_id, allow_empty_id=True)
            if error is not None:
                errors[group_id] = error
                continue
            group = self.manager.get_group(group_id)
            if group is None or group.is_(GroupState.DEAD):
                missing = self.manager.group_not_exists(group_id)
                errors[group_id] = ErrorCode.GROUP_ID_NOT_FOUND if missing else ErrorCode.NOT_COORDINATOR
            elif group.is_(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD)
                eligible.append(group)
            else:
                errors[group_id] = ErrorCode.NON_EMPTY_GROUP
        if eligible:
            removed = await self.manager.cleanup_group_metadata(eligible, lambda g: g.remove_all_offsets())
            errors.update(dict.fromkeys((g.group_id for g in eligible), ErrorCode.NONE))
            log.info(
                "deleted groups %s; %d offsets removed", ", ".join(g.group_id for g in eligible), removed
            )
        return errors
