"""GroupApis: the broker's handlers for the group coordinator's APIs, merged into KafkaApis.

JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups,
ListGroups and DeleteGroups (FindCoordinator is ``broker.find_coordinator``'s): each converts its
request for ``coordinator.group_coordinator`` and the outcome back into the response of the request's
version. TxnOffsetCommit (a transaction's offsets, pending until its marker, which the WriteTxnMarkers
handler reports through ``on_txn_marker_written``) is here too. JoinGroup and SyncGroup wait for their
rebalance, and OffsetCommit, TxnOffsetCommit, OffsetDelete and DeleteGroups for their records to be
written, without holding a request handler: the coordinator answers with a future, on which the
response is parked (``network.handler_pool.park``).

Authorization is Kafka 3.9's KafkaApis, check for check (``broker.authorization``): the group protocol
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and OffsetCommit need READ on the group, OffsetCommit and
TxnOffsetCommit READ on each topic too (a topic without it: TOPIC_AUTHORIZATION_FAILED for its
partitions), TxnOffsetCommit first WRITE on the transactional id; OffsetFetch needs DESCRIBE on the
group and hides (all topics asked) or refuses (topics named) the topics without DESCRIBE; DescribeGroups
needs DESCRIBE on each group and reports ``authorized_operations``; ListGroups lists every group to a
principal with DESCRIBE on the cluster, else only the groups it may DESCRIBE; DeleteGroups needs DELETE
on each group, OffsetDelete DELETE on the group and READ on each topic.

This module also gives the coordinator what it needs of the broker (``coordinator`` does not import
``broker``): ``CoordinatorTopicReplicas`` appends to and reads this broker's replicas of
``__consumer_offsets``, and ``on_role_change`` (a ReplicaManager role listener) loads or unloads an
offsets partition's groups when this broker starts or stops leading it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Protocol, TypeVar

from kazoo.exceptions import NodeExistsError, NoNodeError

from broker.authorization import ALLOW_ALL, Authorization
from broker.config import KafkaConfig
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ProduceResults, ReplicaManager
from coordinator.group_config import GroupConfig
from coordinator.group_coordinator import GroupCoordinator
from coordinator.group_metadata import GroupSummary, JoinGroupResult, OffsetAndMetadata, SyncGroupResult
from coordinator.group_metadata_manager import (
    AppendResult,
    GroupMetadataManager,
    OffsetConfig,
    PartitionLog,
    append_error_to_coordinator_error,
)
from coordinator.join_group import MemberJoin
from coordinator.leave_group import MemberIdentity
from network.handler_pool import Parked, park
from network.request_channel import Request
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    Message,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from protocol.topic import GROUP_METADATA_TOPIC
from server_common.acls import CLUSTER_NAME, AclOperation, ResourceType
from server_common.futures import completed, then
from storage.producer_state import AppendOrigin
from zk.client import ZkClient

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Message | Parked | None]]

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# DescribeGroups' authorized operations without an authorizer: every group operation (READ = 3,
# DELETE = 6, DESCRIBE = 8), as a bit field.
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
# DescribeGroupsResponse.groupError's fields for a group the principal may not describe.
UNKNOWN_STATE = UNKNOWN_PROTOCOL_TYPE = UNKNOWN_PROTOCOL = ""
CLASSIC_GROUP_TYPE = "classic"
NO_OFFSET = -1
# OffsetFetch's stand-in for the offset of a partition whose commit is pending (require_stable).
_UNSTABLE = OffsetAndMetadata(NO_OFFSET)
# ... and of a partition of a topic named in the request that the principal may not describe.
_UNAUTHORIZED = OffsetAndMetadata(NO_OFFSET)
_CommitPartition = OffsetCommitRequest.OffsetCommitRequestPartition
_TxnCommitPartition = TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition


def zk_consumer_offset_path(group_id: str, topic: str, partition: int) -> str:
    """Where OffsetCommit v0 keeps a group's offset and OffsetFetch v0 reads it, as Kafka 3.9 in
    ZooKeeper mode does (ZkData's ConsumerOffset): the offset in decimal, no metadata."""
    return f"/consumers/{group_id}/offsets/{topic}/{partition}"


class _RequestPartition(Protocol):
    """A partition of an OffsetCommit or OffsetDelete request."""

    @property
    def partition_index(self) -> int: ...


_P = TypeVar("_P", bound=_RequestPartition)
_P_co = TypeVar("_P_co", bound=_RequestPartition, covariant=True)
_T = TypeVar("_T")


class _RequestTopic(Protocol[_P_co]):
    """A topic of an OffsetCommit or OffsetDelete request."""

    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[_P_co]: ...


class _OffsetFetchTopic(Protocol):
    """A topic of an OffsetFetch request (before v8, or of one of its groups)."""

    @property
    def name(self) -> str: ...
    @property
    def partition_indexes(self) -> Sequence[int]: ...


def _now_ms() -> int:
    return int(time.time() * 1000)


class CoordinatorTopicReplicas:
    """A coordinator's topic (``__consumer_offsets``; ``__transaction_state`` next) over this broker's
    ReplicaManager: ``coordinator.group_metadata_manager.OffsetsTopic``."""

    def __init__(self, replica_manager: ReplicaManager, topic: str) -> None:
        self.replica_manager = replica_manager
        self.topic = topic

    def leader_log(self, partition: int) -> PartitionLog | None:
        found = self.replica_manager.get_partition(self.topic, partition)
        if found is None or not found.is_leader or found.log is None:
            return None
        return found.log

    def append(
        self, partition: int, records: bytes, required_acks: int, timeout_ms: int
    ) -> asyncio.Future[AppendResult]:
        manager = self.replica_manager
        tp = (self.topic, partition)
        results = manager.append_records(
            [(self.topic, partition, memoryview(bytearray(records)))], required_acks, AppendOrigin.COORDINATOR
        )
        if required_acks != -1:
            return completed(_append_result(tp, results))
        return then(manager.wait_for_acks(results, timeout_ms), partial(_append_result, tp))


def _append_result(tp: tuple[str, int], results: ProduceResults) -> AppendResult:
    return AppendResult(results[tp].error, results[tp].base_offset)


def _txn_offset_commit_error(error: int, version: int) -> int:
    """A TxnOffsetCommit error as the request's version knows it (Kafka's KafkaApis and
    AddPartitionsToTxnManager): a fenced producer is INVALID_PRODUCER_EPOCH to producers; before v4
    TRANSACTION_ABORTABLE (KIP-890) is INVALID_TXN_STATE; before v2 COORDINATOR_LOAD_IN_PROGRESS is
    COORDINATOR_NOT_AVAILABLE (0.11-2.0 clients did not expect it)."""
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.TRANSACTION_ABORTABLE and version < 4:
        return ErrorCode.INVALID_TXN_STATE
    if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and version < 2:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return error


def _verification_error(error: int) -> int:
    """A failed verification as TxnOffsetCommit answers it (Kafka's maybeConvertOffsetCommitError): a
    coordinator that could not be asked is a retriable COORDINATOR_LOAD_IN_PROGRESS, which old clients
    retry without looking for the coordinator again."""
    if error == ErrorCode.NETWORK_EXCEPTION:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return append_error_to_coordinator_error(error, for_commit=True)


def group_config(config: KafkaConfig) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=config["group.min.session.timeout.ms"],
        max_session_timeout_ms=config["group.max.session.timeout.ms"],
        max_size=config["group.max.size"],
        initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
    )


def offset_config(config: KafkaConfig) -> OffsetConfig:
    return OffsetConfig(
        num_partitions=config["offsets.topic.num.partitions"],
        max_metadata_size=config["offset.metadata.max.bytes"],
        load_buffer_size=config["offsets.load.buffer.size"],
        retention_ms=config["offsets.retention.minutes"] * 60 * 1000,
        retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
        commit_timeout_ms=config["offsets.commit.timeout.ms"],
        commit_required_acks=int(config["offsets.commit.required.acks"]),
        compression=config["offsets.topic.compression.codec"],
    )


class GroupApis:
    # A class default too: tests build the handlers without the constructor.
    authorization: Authorization = ALLOW_ALL

    def __init__(
        self,
        config: KafkaConfig,
        metadata_cache: MetadataCache,
        replica_manager: ReplicaManager,
        zk: ZkClient | None = None,
        *,
        authorization: Authorization = ALLOW_ALL,
    ) -> None:
        """``zk``: where OffsetCommit v0 and OffsetFetch v0 keep offsets (None: those versions answer
        UNSUPPORTED_VERSION, as Kafka without ZooKeeper). ``authorization``: what each request may do
        (``ALLOW_ALL``: no authorizer)."""
        self.config = config
        self.authorization = authorization
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.zk = zk
        manager = GroupMetadataManager(
            config.broker_id,
            offset_config(config),
            CoordinatorTopicReplicas(replica_manager, GROUP_METADATA_TOPIC),
            _now_ms,
        )
        self.coordinator = GroupCoordinator(config.broker_id, group_config(config), manager)
        replica_manager.role_listeners.append(self.on_role_change)
        metadata_cache.partitions_deleted_listeners.append(self.coordinator.on_partitions_deleted)

    def handlers(self) -> dict[int, Handler]:
        """api key -> handler, merged into KafkaApis."""
        return {
            ApiKey.JOIN_GROUP: self.handle_join_group,
            ApiKey.SYNC_GROUP: self.handle_sync_group,
            ApiKey.HEARTBEAT: self.handle_heartbeat,
            ApiKey.LEAVE_GROUP: self.handle_leave_group,
            ApiKey.OFFSET_COMMIT: self.handle_offset_commit,
            ApiKey.OFFSET_FETCH: self.handle_offset_fetch,
            ApiKey.OFFSET_DELETE: self.handle_offset_delete,
            ApiKey.DESCRIBE_GROUPS: self.handle_describe_groups,
            ApiKey.LIST_GROUPS: self.handle_list_groups,
            ApiKey.DELETE_GROUPS: self.handle_delete_groups,
            ApiKey.TXN_OFFSET_COMMIT: self.handle_txn_offset_commit,
        }

    def startup(self) -> None:
        self.coordinator.startup()

    async def shutdown(self) -> None:
        await self.coordinator.shutdown()

    def on_role_change(self, topic: str, partition: int, leader: bool, leader_epoch: int) -> None:
        """The ReplicaManager's role listener: the coordinator follows the leadership of the offsets
        partitions (Kafka's onLeadershipChange and StopReplica handling)."""
        if topic != GROUP_METADATA_TOPIC:
            return
        if leader:
            self.coordinator.on_election(partition, leader_epoch)
        else:
            self.coordinator.on_resignation(partition, leader_epoch if leader_epoch >= 0 else None)

    def on_txn_marker_written(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """The WriteTxnMarkers handler appended (and replicated) the producer's COMMIT or ABORT marker to
        ``__consumer_offsets-<offsets_partition>``: the transactional offsets of that producer in the
        partition's groups become committed offsets, or are dropped (Kafka's onTransactionCompleted)."""
        self.coordinator.on_transaction_completed(producer_id, [offsets_partition], commit)

    # -- authorization ----------------------------------------------------------------------------

    def _may(self, request: Request, operation: AclOperation, group_id: str) -> bool:
        """Whether the request's principal may do ``operation`` on the group (denials are logged by the
        authorizer)."""
        return self.authorization.authorize(request, operation, ResourceType.GROUP, group_id)

    def _readable_topics(self, request: Request, topics: Sequence[_RequestTopic[_P]]) -> set[str]:
        """The request's topics the principal may READ (OffsetCommit, TxnOffsetCommit, OffsetDelete)."""
        return self.authorization.filter_authorized(
            request, AclOperation.READ, ResourceType.TOPIC, (t.name for t in topics)
        )

    # -- the group protocol -----------------------------------------------------------------------

    async def handle_join_group(self, request: Request) -> Message | Parked | None:
        body: JoinGroupRequest = request.body
        version = request.version
        if not self._may(request, AclOperation.READ, body.group_id):
            # JoinGroupRequest.getErrorResponse: no generation, leader or member; before v7 the protocol
            # name is "" (not nullable), from v7 null.
            return JoinGroupResponse(
                throttle_time_ms=0,
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                generation_id=-1,
                protocol_name="" if version < 7 else None,
                leader="",
                member_id="",
                members=[],
            )
        # v0 had one timeout for the session and the rebalance.
        rebalance_timeout_ms = body.session_timeout_ms if version == 0 else body.rebalance_timeout_ms
        joined = self.coordinator.handle_join_group(
            MemberJoin(
                group_id=body.group_id,
                member_id=body.member_id,
                group_instance_id=body.group_instance_id,
                client_id=request.client_id or "",
                client_host="/" + request.peer.rsplit(":", 1)[0],
                rebalance_timeout_ms=rebalance_timeout_ms,
                session_timeout_ms=body.session_timeout_ms,
                protocol_type=body.protocol_type,
                protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
                # v4+: a member without id gets one first and rejoins with it (static members need not).
                require_known_member_id=version >= 4 and body.group_instance_id is None,
                support_skipping_assignment=version >= 9,
                reason=body.reason,
            )
        )

        def response(result: JoinGroupResult) -> Message:
            protocol_name = result.protocol_name
            if version < 7 and protocol_name is None:
                protocol_name = ""  # not nullable before v7
            elif version >= 7 and not protocol_name:
                protocol_name = None
            return JoinGroupResponse(
                throttle_time_ms=0,
                error_code=result.error,
                generation_id=result.generation_id,
                protocol_type=result.protocol_type,
                protocol_name=protocol_name,
                leader=result.leader_id,
                skip_assignment=result.skip_assignment,
                member_id=result.member_id,
                members=[
                    JoinGroupResponse.JoinGroupResponseMember(
                        member_id=member_id, group_instance_id=instance_id, metadata=metadata
                    )
                    for member_id, instance_id, metadata in result.members
                ],
            )

        return park(joined, response)

    async def handle_sync_group(self, request: Request) -> Message | Parked | None:
        body: SyncGroupRequest = request.body
        version = request.version

        def response(result: SyncGroupResult) -> Message:
            return SyncGroupResponse(
                throttle_time_ms=0,
                error_code=result.error,
                protocol_type=result.protocol_type,
                protocol_name=result.protocol_name,
                assignment=result.assignment,
            )

        if version >= 5 and (body.protocol_type is None or body.protocol_name is None):
            # From v5 both are mandatory.
            return response(SyncGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        if not self._may(request, AclOperation.READ, body.group_id):
            return SyncGroupResponse(
                throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, assignment=b""
            )
        synced = self.coordinator.handle_sync_group(
            body.group_id,
            body.generation_id,
            body.member_id,
            body.protocol_type,
            body.protocol_name,
            body.group_instance_id,
            {a.member_id: bytes(a.assignment) for a in body.assignments},
        )
        return park(synced, response)

    async def handle_heartbeat(self, request: Request) -> Message:
        body: HeartbeatRequest = request.body
        if not self._may(request, AclOperation.READ, body.group_id):
            return HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        error = self.coordinator.handle_heartbeat(
            body.group_id, body.member_id, body.group_instance_id, body.generation_id
        )
        return HeartbeatResponse(throttle_time_ms=0, error_code=error)

    async def handle_leave_group(self, request: Request) -> Message:
        body: LeaveGroupRequest = request.body
        version = request.version
        if not self._may(request, AclOperation.READ, body.group_id):
            return LeaveGroupResponse(
                throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, members=[]
            )
        if version < 3:
            leaving = [MemberIdentity(body.member_id)]
        else:
            leaving = [MemberIdentity(m.member_id, m.group_instance_id, m.reason) for m in body.members]
        result = self.coordinator.handle_leave_group(body.group_id, leaving)
        if version < 3:
            # One error only: the group's, else the member's.
            error = result.error or next((e for _, e in result.members if e), ErrorCode.NONE)
            return LeaveGroupResponse(throttle_time_ms=0, error_code=error)
        return LeaveGroupResponse(
            throttle_time_ms=0,
            error_code=result.error,
            members=[
                LeaveGroupResponse.MemberResponse(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=error
                )
                for m, error in result.members
            ],
        )

    # -- offsets ----------------------------------------------------------------------------------

    def _known_partitions(
        self, topics: Sequence[_RequestTopic[_P]], readable: set[str] | None = None
    ) -> tuple[list[tuple[tuple[str, int], _P]], dict[tuple[str, int], int]]:
        """The request's partitions this broker knows of in the ``readable`` topics (None: all), each
        with its entry in the request, and for the others TOPIC_AUTHORIZATION_FAILED (a topic not
        readable) or UNKNOWN_TOPIC_OR_PARTITION (OffsetCommit, TxnOffsetCommit and OffsetDelete skip
        those, as Kafka's)."""
        known: list[tuple[tuple[str, int], _P]] = []
        unknown: dict[tuple[str, int], int] = {}
        for topic in topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if readable is not None and topic.name not in readable:
                    unknown[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif self.metadata_cache.partition(*tp) is None:
                    unknown[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    known.append((tp, p))
        return known, unknown

    @staticmethod
    def _all_partitions(topics: Sequence[_RequestTopic[_P]], error: int) -> dict[tuple[str, int], int]:
        """``error`` for every partition of the request (Kafka's getErrorResponse of OffsetCommit and
        TxnOffsetCommit)."""
        return {(t.name, p.partition_index): error for t in topics for p in t.partitions}

    async def handle_offset_commit(self, request: Request) -> Message | Parked | None:
        """Kafka 3.9's handleOffsetCommitRequest: v0 to ZooKeeper, v1+ to the group coordinator. v9
        (KIP-848) carries the member epoch in ``generation_id_or_member_epoch``: for the classic groups
        Samsa (like Kafka 3.9 in ZooKeeper mode) has, it is the generation, as before."""
        body: OffsetCommitRequest = request.body
        version = request.version
        now = _now_ms()
        # OffsetCommit v2-v4 may say how long to keep the offsets (later versions: the broker decides).
        retention = body.retention_time_ms if 2 <= version <= 4 else -1
        known: list[tuple[tuple[str, int], _CommitPartition]] = []
        if not self._may(request, AclOperation.READ, body.group_id):
            unknown = self._all_partitions(body.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        else:
            known, unknown = self._known_partitions(body.topics, self._readable_topics(request, body.topics))
        offsets = {
            tp: OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
                metadata=p.committed_metadata or "",
                # v1 carries the commit's own timestamp (-1: the broker's time).
                commit_timestamp=p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now,
                expire_timestamp=now + retention if retention != -1 else -1,
            )
            for tp, p in known
        }

        def response(errors: dict[tuple[str, int], int]) -> Message:
            errors = {**errors, **unknown}
            return OffsetCommitResponse(
                throttle_time_ms=0,
                topics=[
                    OffsetCommitResponse.OffsetCommitResponseTopic(
                        name=topic.name,
                        partitions=[
                            OffsetCommitResponse.OffsetCommitResponsePartition(
                                partition_index=p.partition_index,
                                error_code=errors[(topic.name, p.partition_index)],
                            )
                            for p in topic.partitions
                        ],
                    )
                    for topic in body.topics
                ],
            )

        if not offsets:
            return response({})
        if version == 0:
            return response(await self._commit_offsets_to_zk(body.group_id, known))
        committed = self.coordinator.handle_commit_offsets(
            body.group_id,
            body.member_id,
            body.group_instance_id,
            body.generation_id_or_member_epoch,
            offsets,
        )
        return park(committed, response)

    async def _commit_offsets_to_zk(
        self,
        group_id: str,
        known: list[tuple[tuple[str, int], OffsetCommitRequest.OffsetCommitRequestPartition]],
    ) -> dict[tuple[str, int], int]:
        """OffsetCommit v0 (Kafka's commitOffsetsToZookeeper): each offset set (or created) at
        ``/consumers/<group>/offsets/<topic>/<partition>``; no group membership is checked. Metadata
        longer than offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE (and not stored)."""
        zk = self.zk
        if zk is None:
            return dict.fromkeys((tp for tp, _ in known), ErrorCode.UNSUPPORTED_VERSION)
        max_metadata = self.coordinator.manager.config.max_metadata_size
        errors: dict[tuple[str, int], int] = {}
        for tp, p in known:
            if p.committed_metadata is not None and len(p.committed_metadata) > max_metadata:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            path = zk_consumer_offset_path(group_id, *tp)
            data = str(p.committed_offset).encode()
            try:
                try:
                    await zk.set(path, data)
                except NoNodeError:
                    await zk.create(path, data, makepath=True)
                errors[tp] = ErrorCode.NONE
            except NodeExistsError:  # created meanwhile by another commit: set it
                await zk.set(path, data)
                errors[tp] = ErrorCode.NONE
            except Exception:
                log.exception("OffsetCommit v0 of %s to ZooKeeper failed for %s-%d", group_id, *tp)
                errors[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
        return errors

    async def handle_txn_offset_commit(self, request: Request) -> Message | Parked | None:
        """TxnOffsetCommit v0-4: a transactional producer's offsets for a group, pending in the group
        until the transaction's marker; answered once the transactional records are replicated."""
        body: TxnOffsetCommitRequest = request.body
        version = request.version
        now = _now_ms()
        # The transactional id (which implies the producer id) first, then the group, then the topics.
        known: list[tuple[tuple[str, int], _TxnCommitPartition]] = []
        if not self.authorization.authorize(
            request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id
        ):
            unknown = self._all_partitions(body.topics, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        elif not self._may(request, AclOperation.READ, body.group_id):
            unknown = self._all_partitions(body.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        else:
            known, unknown = self._known_partitions(body.topics, self._readable_topics(request, body.topics))
        offsets = {
            tp: OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if version >= 2 else -1,
                metadata=p.committed_metadata or "",
                commit_timestamp=now,
            )
            for tp, p in known
        }

        def response(errors: dict[tuple[str, int], int]) -> Message:
            errors = {**errors, **unknown}
            return TxnOffsetCommitResponse(
                throttle_time_ms=0,
                topics=[
                    TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(
                        name=topic.name,
                        partitions=[
                            TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                                partition_index=p.partition_index,
                                error_code=_txn_offset_commit_error(
                                    errors[(topic.name, p.partition_index)], version
                                ),
                            )
                            for p in topic.partitions
                        ],
                    )
                    for topic in body.topics
                ],
            )

        if not offsets:
            return response({})
        # Before v3 there is no member id, instance id or generation: the defaults (-1, "", null)
        # skip the member checks, as Kafka's.
        commit = partial(
            self.coordinator.handle_txn_commit_offsets,
            body.group_id,
            body.transactional_id,
            body.producer_id,
            body.producer_epoch,
            body.member_id if version >= 3 else "",
            body.group_instance_id if version >= 3 else None,
            body.generation_id if version >= 3 else -1,
            offsets,
        )
        verified = self._verify_txn_offset_commit(body, version)
        if verified is None:
            return park(commit(), response)

        async def commit_once_verified() -> dict[tuple[str, int], int]:
            error = await verified
            if error != ErrorCode.NONE:
                return dict.fromkeys(offsets, _verification_error(error))
            return await commit()

        return park(asyncio.get_running_loop().create_task(commit_once_verified()), response)

    def _verify_txn_offset_commit(
        self, body: TxnOffsetCommitRequest, version: int
    ) -> asyncio.Future[int] | None:
        """KIP-890 for TxnOffsetCommit, as Kafka: unless the producer's transaction is ongoing in the
        group's offsets partition already, the transaction coordinator must confirm that partition is
        part of it (AddOffsetsToTxn added it); else offsets that no marker would ever complete would
        stay pending, and OffsetFetch with require_stable answer UNSTABLE_OFFSET_COMMIT, for good. The
        error of the verification (NONE: verified); None when there is nothing to verify (verification
        off, the group not served here, or the transaction ongoing)."""
        verifier = self.replica_manager.add_partitions_to_txn
        if verifier is None or self.coordinator.status.validate(body.group_id) is not None:
            return None
        tp = (GROUP_METADATA_TOPIC, self.coordinator.partition_for(body.group_id))
        found = self.replica_manager.get_partition(*tp)
        if found is None or found.log is None or found.log.has_ongoing_transaction(body.producer_id):
            return None
        unverified = verifier.verify_transaction(
            body.transactional_id, body.producer_id, body.producer_epoch, [tp], version >= 4
        )
        return then(unverified, lambda errors: errors.get(tp, ErrorCode.NONE))

    def _fetched_topics(
        self,
        offsets: dict[tuple[str, int], OffsetAndMetadata | None],
        topic_class: Callable[..., _T],
        partition_class: Callable[..., object],
    ) -> list[_T]:
        by_topic: dict[str, list[object]] = {}
        for (topic, partition), found in offsets.items():
            by_topic.setdefault(topic, []).append(
                partition_class(
                    partition_index=partition,
                    committed_offset=NO_OFFSET if found is None else found.offset,
                    committed_leader_epoch=-1 if found is None else found.leader_epoch,
                    metadata="" if found is None else found.metadata,
                    # A pending commit (require_stable): no offset, and the client retries.
                    error_code=ErrorCode.UNSTABLE_OFFSET_COMMIT
                    if found is _UNSTABLE
                    else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    if found is _UNAUTHORIZED
                    else ErrorCode.NONE,
                )
            )
        return [topic_class(name=name, partitions=partitions) for name, partitions in by_topic.items()]

    def _fetch_offsets(
        self,
        request: Request,
        group_id: str,
        topics: Sequence[_OffsetFetchTopic] | None,
        require_stable: bool = False,
    ) -> tuple[int, dict[tuple[str, int], OffsetAndMetadata | None]]:
        """(error, offsets); with ``require_stable`` (OffsetFetch v7+) the partitions with a pending
        commit, transactional or not, map to ``_UNSTABLE`` (UNSTABLE_OFFSET_COMMIT, as Kafka).

        Authorization as Kafka's handleOffsetFetchRequestFromCoordinator: GROUP_AUTHORIZATION_FAILED
        without DESCRIBE on the group; of the topics named, those the principal may not DESCRIBE are
        not fetched and answered TOPIC_AUTHORIZATION_FAILED (after the others); of all the group's
        topics (``topics`` None), those are left out."""
        describe, topic_type = AclOperation.DESCRIBE, ResourceType.TOPIC
        if not self._may(request, describe, group_id):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, {}
        denied: list[tuple[str, int]] = []
        if topics is not None and self.authorization.enabled:
            describable = self.authorization.filter_authorized(
                request, describe, topic_type, (t.name for t in topics)
            )
            denied = [(t.name, p) for t in topics if t.name not in describable for p in t.partition_indexes]
            topics = [t for t in topics if t.name in describable]
        partitions = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
        error, offsets = self.coordinator.handle_fetch_offsets(group_id, partitions)
        if partitions is None:
            offsets = dict(sorted(offsets.items()))
            if not error and self.authorization.enabled:
                describable = self.authorization.filter_authorized(
                    request, describe, topic_type, (topic for topic, _ in offsets)
                )
                offsets = {tp: found for tp, found in offsets.items() if tp[0] in describable}
        if require_stable and not error:
            for tp in self.coordinator.unstable_offsets(group_id, list(offsets)):
                offsets[tp] = _UNSTABLE
        if not error:
            offsets.update(dict.fromkeys(denied, _UNAUTHORIZED))
        return error, offsets

    async def _fetch_offsets_from_zk(self, request: Request, body: OffsetFetchRequest) -> OffsetFetchResponse:
        """OffsetFetch v0 (Kafka's handleOffsetFetchRequestFromZookeeper): the offsets OffsetCommit v0
        stored in ZooKeeper; an unknown partition, or one with no offset there, is
        UNKNOWN_TOPIC_OR_PARTITION with offset -1 (Kafka's UNKNOWN_PARTITION). Without DESCRIBE on the
        group every partition is GROUP_AUTHORIZATION_FAILED, one of a topic the principal may not
        DESCRIBE TOPIC_AUTHORIZATION_FAILED (Kafka's UNAUTHORIZED_PARTITION)."""
        zk = self.zk
        group_error = ErrorCode.NONE
        describable: set[str] | None = None
        if not self._may(request, AclOperation.DESCRIBE, body.group_id):
            group_error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif self.authorization.enabled:
            describable = self.authorization.filter_authorized(
                request, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in body.topics or [])
            )
        topics = []
        for t in body.topics or []:
            partitions = []
            for index in t.partition_indexes:
                offset, error = NO_OFFSET, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if group_error:
                    error = group_error
                elif zk is None:
                    error = ErrorCode.UNSUPPORTED_VERSION
                elif describable is not None and t.name not in describable:
                    error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif self.metadata_cache.partition(t.name, index) is not None:
                    try:
                        found = await zk.get(zk_consumer_offset_path(body.group_id, t.name, index))
                        if found is not None:
                            offset, error = int(found[0].decode()), ErrorCode.NONE
                    except Exception:
                        log.exception("OffsetFetch v0 of %s from ZooKeeper failed", body.group_id)
                        offset, error = NO_OFFSET, ErrorCode.UNKNOWN_SERVER_ERROR
                partitions.append(
                    OffsetFetchResponse.OffsetFetchResponsePartition(
                        partition_index=index, committed_offset=offset, metadata="", error_code=error
                    )
                )
            topics.append(OffsetFetchResponse.OffsetFetchResponseTopic(name=t.name, partitions=partitions))
        return OffsetFetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=topics)

    async def handle_offset_fetch(self, request: Request) -> Message:
        """Kafka 3.9's handleOffsetFetchRequest: v0 from ZooKeeper, v1+ from the group coordinator. v9
        (KIP-848) adds each group's member id and epoch, which a classic group does not check (Kafka
        3.9's GroupCoordinatorAdapter ignores them)."""
        body: OffsetFetchRequest = request.body
        version = request.version
        if version == 0:
            return await self._fetch_offsets_from_zk(request, body)
        if version >= 8:
            groups = []
            for g in body.groups:
                error, offsets = self._fetch_offsets(request, g.group_id, g.topics, body.require_stable)
                groups.append(
                    OffsetFetchResponse.OffsetFetchResponseGroup(
                        group_id=g.group_id,
                        error_code=error,
                        topics=[]
                        if error
                        else self._fetched_topics(
                            offsets,
                            OffsetFetchResponse.OffsetFetchResponseTopics,
                            OffsetFetchResponse.OffsetFetchResponsePartitions,
                        ),
                    )
                )
            return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
        # Before v2 "all topics" did not exist; an empty list meant none.
        topics = body.topics if version >= 2 else body.topics or []
        error, offsets = self._fetch_offsets(
            request, body.group_id, topics, version >= 7 and body.require_stable
        )
        if error and version < 2 and topics is not None:  # (a list before v2: see above)
            # No top-level error before v2: each partition carries it.
            by_topic = [
                OffsetFetchResponse.OffsetFetchResponseTopic(
                    name=t.name,
                    partitions=[
                        OffsetFetchResponse.OffsetFetchResponsePartition(
                            partition_index=p, committed_offset=NO_OFFSET, metadata="", error_code=error
                        )
                        for p in t.partition_indexes
                    ],
                )
                for t in topics
            ]
            return OffsetFetchResponse(throttle_time_ms=0, topics=by_topic)
        return OffsetFetchResponse(
            throttle_time_ms=0,
            error_code=error,
            topics=[]
            if error
            else self._fetched_topics(
                offsets,
                OffsetFetchResponse.OffsetFetchResponseTopic,
                OffsetFetchResponse.OffsetFetchResponsePartition,
            ),
        )

    async def handle_offset_delete(self, request: Request) -> Message | Parked | None:
        body: OffsetDeleteRequest = request.body
        if not self._may(request, AclOperation.DELETE, body.group_id):
            return OffsetDeleteResponse(
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[]
            )
        known, unknown = self._known_partitions(body.topics, self._readable_topics(request, body.topics))
        deleted = self.coordinator.handle_delete_offsets(body.group_id, [tp for tp, _ in known])
        return park(deleted, partial(self._offset_delete_response, body, unknown))

    @staticmethod
    def _offset_delete_response(
        body: OffsetDeleteRequest,
        unknown: dict[tuple[str, int], int],
        deleted: tuple[int, dict[tuple[str, int], int]],
    ) -> Message:
        error, errors = deleted
        if error:
            return OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=[])
        errors = {**errors, **unknown}
        return OffsetDeleteResponse(
            error_code=ErrorCode.NONE,
            throttle_time_ms=0,
            topics=[
                OffsetDeleteResponse.OffsetDeleteResponseTopic(
                    name=topic.name,
                    partitions=[
                        OffsetDeleteResponse.OffsetDeleteResponsePartition(
                            partition_index=p.partition_index,
                            error_code=errors.get((topic.name, p.partition_index), ErrorCode.NONE),
                        )
                        for p in topic.partitions
                    ],
                )
                for topic in body.topics
            ],
        )

    # -- admin ------------------------------------------------------------------------------------

    async def handle_describe_groups(self, request: Request) -> Message:
        """Kafka's handleDescribeGroupsRequest: the groups the principal may not DESCRIBE first, with
        GROUP_AUTHORIZATION_FAILED, then the others as the coordinator describes them, with (v3+, when
        asked) the operations the principal may do on each group described without error."""
        body: DescribeGroupsRequest = request.body
        denied, groups = [], []
        for group_id in body.groups:
            if not self._may(request, AclOperation.DESCRIBE, group_id):
                denied.append(
                    DescribeGroupsResponse.DescribedGroup(
                        error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                        group_id=group_id,
                        group_state=UNKNOWN_STATE,
                        protocol_type=UNKNOWN_PROTOCOL_TYPE,
                        protocol_data=UNKNOWN_PROTOCOL,
                        members=[],
                        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
                    )
                )
                continue
            error, summary = self.coordinator.handle_describe_group(group_id)
            operations = AUTHORIZED_OPERATIONS_OMITTED
            if request.version >= 3 and body.include_authorized_operations and error == ErrorCode.NONE:
                operations = self.authorization.authorized_operations(request, ResourceType.GROUP, group_id)
            groups.append(self._described_group(group_id, error, summary, operations))
        return DescribeGroupsResponse(throttle_time_ms=0, groups=denied + groups)

    @staticmethod
    def _described_group(
        group_id: str, error: int, summary: GroupSummary, operations: int
    ) -> DescribeGroupsResponse.DescribedGroup:
        return DescribeGroupsResponse.DescribedGroup(
            error_code=error,
            group_id=group_id,
            group_state=summary.state,
            protocol_type=summary.protocol_type,
            protocol_data=summary.protocol,
            members=[
                DescribeGroupsResponse.DescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata,
                    member_assignment=m.assignment,
                )
                for m in summary.members
            ],
            authorized_operations=operations,
        )

    async def handle_list_groups(self, request: Request) -> Message:
        body: ListGroupsRequest = request.body
        version = request.version
        states = set(body.states_filter) if version >= 4 else set()
        types = {t.lower() for t in body.types_filter} if version >= 5 else set()
        # Kafka's handleListGroupsRequest: every group to a principal that may DESCRIBE the cluster, else
        # only the groups it may DESCRIBE; neither check logs a denial (a listing, not a refusal).
        every_group = self.authorization.authorize(
            request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False
        )
        error, groups = self.coordinator.handle_list_groups(states)
        if types and CLASSIC_GROUP_TYPE not in types:
            groups = []  # every group here is a classic one
        if not every_group:
            describable = self.authorization.filter_authorized(
                request,
                AclOperation.DESCRIBE,
                ResourceType.GROUP,
                (group_id for group_id, _, _ in groups),
                log_if_denied=False,
            )
            groups = [g for g in groups if g[0] in describable]
        return ListGroupsResponse(
            throttle_time_ms=0,
            error_code=error,
            groups=[
                ListGroupsResponse.ListedGroup(
                    group_id=group_id,
                    protocol_type=protocol_type,
                    group_state=state,
                    group_type=CLASSIC_GROUP_TYPE,
                )
                for group_id, protocol_type, state in groups
            ],
        )

    async def handle_delete_groups(self, request: Request) -> Message | Parked | None:
        body: DeleteGroupsRequest = request.body
        names = list(dict.fromkeys(body.groups_names))
        # Kafka: the groups the principal may DELETE are deleted and answered first, then the others
        # with GROUP_AUTHORIZATION_FAILED.
        deletable = self.authorization.filter_authorized(
            request, AclOperation.DELETE, ResourceType.GROUP, names
        )
        denied = [name for name in names if name not in deletable]
        names = [name for name in names if name in deletable]

        def response(errors: dict[str, int]) -> Message:
            errors = {**errors, **dict.fromkeys(denied, ErrorCode.GROUP_AUTHORIZATION_FAILED)}
            return DeleteGroupsResponse(
                throttle_time_ms=0,
                results=[
                    DeleteGroupsResponse.DeletableGroupResult(group_id=name, error_code=errors[name])
                    for name in names + denied
                ],
            )

        return park(self.coordinator.handle_delete_groups(names), response)
