"""Who may be served: whether this broker coordinates a group now (Kafka's validateGroupStatus), and
whether a request comes from the group's current member (validateCurrentMember)."""

from __future__ import annotations

import logging

from coordinator.group_metadata import GroupMetadata
from coordinator.group_metadata_manager import GroupMetadataManager
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class GroupStatus:
    """Whether the coordinator is running (``active``, set by its startup and shutdown) and which
    groups it serves (those of the ``__consumer_offsets`` partitions it has loaded)."""

    def __init__(self, manager: GroupMetadataManager) -> None:
        self.manager = manager
        self.active = False

    def validate(self, group_id: str, allow_empty_id: bool = False) -> int | None:
        """The error a request for the group gets now, None if this broker may serve it. OffsetCommit,
        OffsetFetch, DescribeGroups and DeleteGroups accept the empty group id (old clients used it)."""
        if not group_id and not allow_empty_id:
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.manager.is_group_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self.manager.is_group_local(group_id):
            return ErrorCode.NOT_COORDINATOR
        return None


def validate_current_member(
    group: GroupMetadata, member_id: str, group_instance_id: str | None, operation: str
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
