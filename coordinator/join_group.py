"""JoinGroup: members joining a classic group (Kafka's doNewMemberJoinGroup, doCurrentMemberJoinGroup
and doStaticMemberJoinGroup): new members get an id (and, from JoinGroup v4, come back with it),
current ones rejoin or update their protocols, static ones replace their previous incarnation. A
JoinGroup that starts or joins a rebalance is answered when the rebalance completes (``rebalance``).
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
)
from coordinator.group_metadata_manager import GroupMetadataManager
from coordinator.group_status import GroupStatus, validate_current_member
from coordinator.heartbeats import NEW_MEMBER_JOIN_TIMEOUT_MS, Heartbeats
from coordinator.rebalance import Rebalancer
from protocol.errors import ErrorCode
from server_common.futures import completed

log = logging.getLogger(__name__)


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


class JoinGroup:
    def __init__(
        self,
        config: GroupConfig,
        status: GroupStatus,
        rebalancer: Rebalancer,
        heartbeats: Heartbeats,
    ) -> None:
        self.config = config
        self.status = status
        self.manager: GroupMetadataManager = status.manager
        self.rebalancer = rebalancer
        self.heartbeats = heartbeats

    def handle(self, join: MemberJoin) -> asyncio.Future[JoinGroupResult]:
        error = self.status.validate(join.group_id)
        if error is not None:
            return completed(JoinGroupResult(join.member_id, error))
        if not (
            self.config.min_session_timeout_ms
            <= join.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return completed(JoinGroupResult(join.member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
        is_unknown = join.member_id == UNKNOWN_MEMBER_ID
        # A group comes into being when a member without id joins it; a member id for a group that
        # does not exist is unknown.
        group = self.manager.get_or_maybe_create_group(join.group_id, is_unknown)
        if group is None:
            return completed(JoinGroupResult(join.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
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
            self.rebalancer.try_complete_join(group)
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

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """group.max.size: existing members are accepted; new ones while there is room."""
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or (
                group.num_awaiting_join < self.config.max_size
            )
        return group.has(member_id) or len(group) < self.config.max_size

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
            self.heartbeats.schedule_pending(group, new_member_id, join.session_timeout_ms)
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
        error = validate_current_member(group, member_id, join.group_instance_id, "join-group")
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
                future.set_result(self.rebalancer.join_result(group, member))
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
                future.set_result(self.rebalancer.join_result(group, member, with_members=False))
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
        self.heartbeats.complete_and_schedule_next(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.rebalancer.maybe_prepare_rebalance(
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
        self.heartbeats.remove_for_leaving_member(group, old_member_id)
        self.heartbeats.complete_and_schedule_next(group, member)
        old_protocols = member.supported_protocols
        old_rebalance_timeout_ms = member.rebalance_timeout_ms
        old_session_timeout_ms = member.session_timeout_ms
        group.update_member(
            member, join.protocols, join.rebalance_timeout_ms, join.session_timeout_ms, future
        )
        state = group.state
        if state is GroupState.STABLE:
            if group.protocol_name != group.select_protocol():
                self.rebalancer.maybe_prepare_rebalance(
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
                    self.heartbeats.remove_for_leaving_member(group, new_member_id)
                    self.heartbeats.complete_and_schedule_next(group, restored)
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
                            member, self.rebalancer.join_result(group, member, skip_assignment=is_leader)
                        )
                    else:
                        # Earlier versions: answer with the old leader id, so that a returning leader
                        # does not think it leads and compute an assignment nobody would receive.
                        result = self.rebalancer.join_result(group, member, with_members=False)
                        result.leader_id = current_leader
                        group.maybe_invoke_join(member, result)

            self.manager.store_group(group, assignment).add_done_callback(stored)
        elif state is GroupState.COMPLETING_REBALANCE:
            # The leader may already be assigning with the old member id: start over.
            self.rebalancer.prepare_rebalance(
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
        self.rebalancer.maybe_prepare_rebalance(group, reason)
