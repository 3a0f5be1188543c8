"""GroupCoordinator: Kafka's classic group protocol and offset management, for the groups whose
``__consumer_offsets`` partition this broker leads: what the broker calls, and the coordinator's life.

It follows Kafka's GroupCoordinator (3.x) decision for decision, in parts:

- ``join_group``, ``sync_group``, ``leave_group``: the members' requests of the rebalance protocol;
- ``rebalance``: the group's way through a rebalance, with its deadlines (DelayedJoin,
  InitialDelayedJoin, DelayedSync) in the rebalance purgatory;
- ``heartbeats``: the members' sessions (DelayedHeartbeat in the heartbeat purgatory) and Heartbeat;
- ``group_offsets``: OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete;
- ``group_admin``: ListGroups, DescribeGroups, DeleteGroups;
- ``group_status``: whether this broker serves a group now, and whether a member is current.

Here: loading a partition's groups when this broker becomes its leader and unloading them when it
stops, the periodic expiration of offsets, and the transaction markers' outcome for transactional
offsets (``on_transaction_completed``). JoinGroup, SyncGroup, OffsetCommit, TxnOffsetCommit,
OffsetDelete and DeleteGroups answer with a future of their result (``server_common.futures``), done once the
rebalance completes or the records are replicated.
"""

from __future__ import annotations

import asyncio
import logging

from coordinator.group_admin import GroupAdmin
from coordinator.group_config import GroupConfig
from coordinator.group_metadata import (
    GroupMetadata,
    GroupState,
    GroupSummary,
    JoinGroupResult,
    OffsetAndMetadata,
    SyncGroupResult,
    TopicPartition,
)
from coordinator.group_metadata_manager import GroupMetadataManager
from coordinator.group_offsets import GroupOffsets
from coordinator.group_status import GroupStatus
from coordinator.heartbeats import Heartbeats
from coordinator.join_group import JoinGroup, MemberJoin
from coordinator.leave_group import LeaveGroup, LeaveGroupResult, MemberIdentity
from coordinator.rebalance import Rebalancer
from coordinator.sync_group import SyncGroup
from protocol.errors import ErrorCode
from server_common.metrics import CounterChild

log = logging.getLogger(__name__)


class GroupCoordinator:
    def __init__(self, broker_id: int, config: GroupConfig, manager: GroupMetadataManager) -> None:
        self.broker_id = broker_id
        self.config = config
        self.manager = manager
        self.status = GroupStatus(manager)
        self.heartbeats = Heartbeats(self.status, self._on_expire_heartbeat)
        self.rebalancer = Rebalancer(config, manager, self.heartbeats)
        self.joins = JoinGroup(config, self.status, self.rebalancer, self.heartbeats)
        self.syncs = SyncGroup(self.status, self.rebalancer, self.heartbeats)
        self.leaves = LeaveGroup(self.status, self.rebalancer, self.heartbeats)
        self.offsets = GroupOffsets(self.status, self.heartbeats)
        self.admin = GroupAdmin(self.status)
        self._expiration: asyncio.Task[None] | None = None
        # Kafka's offset-expiration-count (coordinator/coordinator_metrics.py exports it).
        self.expired_offsets = CounterChild()

    # -- lifecycle --------------------------------------------------------------------------------

    def startup(self) -> None:
        log.info("group coordinator %d starting", self.broker_id)
        self.status.active = True
        self._expiration = asyncio.get_running_loop().create_task(
            self._expire_offsets_periodically(), name="group-metadata-expiration"
        )

    async def shutdown(self) -> None:
        self.status.active = False
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
                self.expired_offsets.inc(await self.manager.expire_offsets())
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

    def on_partitions_deleted(self, partitions: list[tuple[str, int]]) -> asyncio.Future[int]:
        """Kafka's onPartitionsDeleted: the partitions of a deleted topic lose their committed offsets
        in every group here (tombstones written), so a topic re-created under the name starts from
        the consumers' reset policy, not from the old topic's positions."""
        deleted = list(partitions)
        return self.manager.cleanup_group_metadata(
            self.manager.current_groups(), lambda group: group.remove_offsets(deleted)
        )

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        log.info("loaded group %s with generation %d", group.group_id, group.generation_id)
        if len(group) > self.config.max_size:
            self.rebalancer.prepare_rebalance(
                group,
                f"freshly-loaded group is over capacity ({self.config.max_size}); rebalancing so that "
                "its consumers can commit offsets",
            )
        for member in group.members.values():
            self.heartbeats.complete_and_schedule_next(group, member)

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
        self.rebalancer.cancel(group)
        self.heartbeats.cancel(group)

    def _on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None:
        self.rebalancer.on_expire_heartbeat(group, member_id, is_pending)

    # -- the requests -----------------------------------------------------------------------------

    def handle_join_group(self, join: MemberJoin) -> asyncio.Future[JoinGroupResult]:
        return self.joins.handle(join)

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
        return self.syncs.handle(
            group_id, generation_id, member_id, protocol_type, protocol_name, group_instance_id, assignments
        )

    def handle_heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        return self.heartbeats.handle_heartbeat(group_id, member_id, group_instance_id, generation_id)

    def handle_leave_group(self, group_id: str, leaving: list[MemberIdentity]) -> LeaveGroupResult:
        return self.leaves.handle(group_id, leaving)

    def handle_commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> asyncio.Future[dict[TopicPartition, int]]:
        return self.offsets.handle_commit_offsets(
            group_id, member_id, group_instance_id, generation_id, offsets
        )

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
        return self.offsets.handle_txn_commit_offsets(
            group_id,
            transactional_id,
            producer_id,
            producer_epoch,
            member_id,
            group_instance_id,
            generation_id,
            offsets,
        )

    def on_transaction_completed(self, producer_id: int, offsets_partitions: list[int], commit: bool) -> None:
        """The producer's transaction marker is written to these ``__consumer_offsets`` partitions
        (Kafka's onTransactionCompleted / scheduleHandleTxnCompletion)."""
        self.manager.handle_txn_completion(producer_id, offsets_partitions, commit)

    def handle_fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> tuple[int, dict[TopicPartition, OffsetAndMetadata | None]]:
        return self.offsets.handle_fetch_offsets(group_id, partitions)

    def unstable_offsets(self, group_id: str, partitions: list[TopicPartition]) -> set[TopicPartition]:
        return self.offsets.unstable_offsets(group_id, partitions)

    def handle_delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> asyncio.Future[tuple[int, dict[TopicPartition, int]]]:
        return self.offsets.handle_delete_offsets(group_id, partitions)

    def handle_list_groups(self, states: set[str]) -> tuple[int, list[tuple[str, str, str]]]:
        return self.admin.handle_list_groups(states)

    def handle_describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        return self.admin.handle_describe_group(group_id)

    def handle_delete_groups(self, group_ids: list[str]) -> asyncio.Future[dict[str, int]]:
        return self.admin.handle_delete_groups(group_ids)
