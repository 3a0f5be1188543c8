"""Groups as an admin sees them: ListGroups, DescribeGroups, and DeleteGroups (empty groups only,
with their offsets)."""

from __future__ import annotations

import asyncio
import logging

from coordinator.group_metadata import GroupMetadata, GroupState, GroupSummary
from coordinator.group_metadata_manager import GroupMetadataManager
from coordinator.group_status import GroupStatus
from protocol.errors import ErrorCode
from server_common.futures import completed, then

log = logging.getLogger(__name__)

EMPTY_GROUP = GroupSummary("", "", "", [])
DEAD_GROUP = GroupSummary(str(GroupState.DEAD), "", "", [])


class GroupAdmin:
    def __init__(self, status: GroupStatus) -> None:
        self.status = status
        self.manager: GroupMetadataManager = status.manager

    def handle_list_groups(self, states: set[str]) -> tuple[int, list[tuple[str, str, str]]]:
        """(error, [(group id, protocol type, state)]) of the groups this broker coordinates, those in
        ``states`` (case-insensitive) when given. COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
        if not self.status.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.is_loading else ErrorCode.NONE
        wanted = {s.lower() for s in states}
        return error, [
            (g.group_id, g.protocol_type or "", str(g.state))
            for g in self.manager.current_groups()
            if not wanted or str(g.state).lower() in wanted
        ]

    def handle_describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        error = self.status.validate(group_id, allow_empty_id=True)
        if error is not None:
            return error, EMPTY_GROUP
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.NONE, DEAD_GROUP
        return ErrorCode.NONE, group.summary()

    def handle_delete_groups(self, group_ids: list[str]) -> asyncio.Future[dict[str, int]]:
        """DeleteGroups: only empty groups may go (NON_EMPTY_GROUP otherwise); their offsets go too.
        The answer comes once the tombstones are written."""
        errors: dict[str, int] = {}
        eligible: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self.status.validate(group_id, allow_empty_id=True)
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
        if not eligible:
            return completed(errors)

        def deleted(removed: int) -> dict[str, int]:
            log.info(
                "deleted groups %s; %d offsets removed", ", ".join(g.group_id for g in eligible), removed
            )
            return {**errors, **dict.fromkeys((g.group_id for g in eligible), ErrorCode.NONE)}

        return then(self.manager.cleanup_group_metadata(eligible, lambda g: g.remove_all_offsets()), deleted)
