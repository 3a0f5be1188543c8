"""Offsets: OffsetCommit (a member's commit is fenced by its generation, and answered once its record
is replicated), TxnOffsetCommit (a transaction's commit, pending until the transaction's marker; from
v3 fenced by the consumer's generation, KIP-447), OffsetFetch (committed offsets, whatever the group's
state; with require_stable, UNSTABLE_OFFSET_COMMIT while a commit is pending) and OffsetDelete."""

from __future__ import annotations

import asyncio
import logging

from coordinator.group_metadata import (
    CONSUMER_PROTOCOL_TYPE,
    UNKNOWN_MEMBER_ID,
    GroupMetadata,
    GroupState,
    OffsetAndMetadata,
    TopicPartition,
)
from coordinator.group_metadata_manager import GroupMetadataManager
from coordinator.group_status import GroupStatus, validate_current_member
from coordinator.heartbeats import Heartbeats
from protocol.errors import ErrorCode
from server_common.futures import completed, then

log = logging.getLogger(__name__)


class GroupOffsets:
    def __init__(self, status: GroupStatus, heartbeats: Heartbeats) -> None:
        self.status = status
        self.manager: GroupMetadataManager = status.manager
        self.heartbeats = heartbeats

    def handle_commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> asyncio.Future[dict[TopicPartition, int]]:
        """Each partition's error, once the commit is replicated (or refused)."""
        error = self.status.validate(group_id, allow_empty_id=True)
        if error is not None:
            return completed(dict.fromkeys(offsets, error))
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # A member of a group that is gone (or never was here): its generation is stale.
                return completed(dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION))
            # A consumer that manages its partitions itself, using Kafka only to store offsets.
            group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.manager.time_ms))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id, False)
        if error is not None:
            return completed(dict.fromkeys(offsets, error))
        state = group.state
        if state is GroupState.EMPTY:
            return self.manager.store_offsets(group, offsets)
        if state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            # Commits are allowed while preparing a rebalance: the heartbeat tells the member to rejoin.
            self.heartbeats.complete_and_schedule_next(group, group.get(member_id))
            return self.manager.store_offsets(group, offsets)
        if state is GroupState.COMPLETING_REBALANCE:
            # A valid member and generation, but assignments are not out yet: let it rejoin gracefully.
            return completed(dict.fromkeys(offsets, ErrorCode.REBALANCE_IN_PROGRESS))
        raise AssertionError(f"unexpected state {state} of group {group_id}")

    def handle_txn_commit_offsets(
        self,
        group_id: str,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> asyncio.Future[dict[TopicPartition, int]]:
        """TxnOffsetCommit: each partition's error once the transactional records are replicated (or
        refused). The offsets stay pending until the transaction's marker (``handle_txn_completion``).
        A group this broker does not know yet is created empty, whatever the generation: before v3
        the request carries none."""
        error = self.status.validate(group_id)
        if error is not None:
            return completed(dict.fromkeys(offsets, error))
        group = self.manager.get_group(group_id)
        if group is None:
            group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.manager.time_ms))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id, True)
        if error is not None:
            return completed(dict.fromkeys(offsets, error))
        log.debug(
            "transactional offset commit of group %s by %s (producer %d, epoch %d): %s",
            group_id,
            transactional_id,
            producer_id,
            producer_epoch,
            offsets,
        )
        return self.manager.store_offsets(group, offsets, producer_id, producer_epoch)

    def _validate_offset_commit(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        is_transactional: bool,
    ) -> int | None:
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return None  # an admin client or a consumer without group management, with the group empty
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            operation = "txn-offset-commit" if is_transactional else "offset-commit"
            error = validate_current_member(group, member_id, group_instance_id, operation)
            if error is not None:
                return error
            return ErrorCode.ILLEGAL_GENERATION if generation_id != group.generation_id else None
        if not is_transactional and not group.is_(GroupState.EMPTY):
            # Only members commit while the group has members. Not so for transactional commits:
            # TxnOffsetCommit before v3 carries no member id or generation.
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def handle_fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> tuple[int, dict[TopicPartition, OffsetAndMetadata | None]]:
        """(error, committed offsets): every partition with an offset when ``partitions`` is None.
        Offsets are returned whatever the group's state: a group may use Kafka to store offsets only."""
        error = self.status.validate(group_id, allow_empty_id=True)
        if error is not None:
            return error, {}
        return ErrorCode.NONE, self.manager.get_offsets(group_id, partitions)

    def unstable_offsets(self, group_id: str, partitions: list[TopicPartition]) -> set[TopicPartition]:
        """Those of ``partitions`` whose commit is still pending (OffsetFetch v7+ with require_stable
        answers UNSTABLE_OFFSET_COMMIT for them, so that a consumer does not start from an offset an
        open transaction is about to move)."""
        if self.status.validate(group_id, allow_empty_id=True) is not None:
            return set()
        return self.manager.unstable_partitions(group_id, partitions)

    def handle_delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> asyncio.Future[tuple[int, dict[TopicPartition, int]]]:
        """OffsetDelete: an empty group's offsets go; a consumer group with members keeps those of
        topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC). The answer comes once the tombstones are
        written."""
        error = self.status.validate(group_id)
        if error is not None:
            return completed((error, {}))
        group = self.manager.get_group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            missing = self.manager.group_not_exists(group_id)
            return completed(((ErrorCode.GROUP_ID_NOT_FOUND if missing else ErrorCode.NOT_COORDINATOR), {}))
        errors: dict[TopicPartition, int] = {}
        if group.is_(GroupState.EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
            errors.update(
                {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if tp not in eligible}
            )
        else:
            return completed((ErrorCode.NON_EMPTY_GROUP, {}))
        if not eligible:
            return completed((ErrorCode.NONE, errors))

        def deleted(removed: int) -> tuple[int, dict[TopicPartition, int]]:
            log.info("deleted %d offsets of group %s: %s", removed, group_id, eligible)
            return ErrorCode.NONE, {**errors, **dict.fromkeys(eligible, ErrorCode.NONE)}

        return then(
            self.manager.cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible)), deleted
        )
