"""Authorization of the admin and group APIs, as Kafka 3.9's KafkaApis checks them, in process: each
handler over fakes (ZooKeeper, the group coordinator, the controller channel) and a real metadata cache,
asked by a principal under H4's AclAuthorizer.

The table runs every API through the same ACL patterns — nothing (denied), the ACLs it needs as LITERAL
names, as PREFIXED patterns, as the ``*`` wildcard, the same with a DENY on the first (denied), a super
user, ``allow.everyone.if.no.acl.found`` — and no authorizer at all (``ALLOW_ALL``, which must answer as
before security existed). The tests after it pin what the table cannot: which error each check gives,
what is filtered rather than refused, the order of the checks, and which denials are logged."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from broker.admin_apis import AdminApis
from broker.authorization import ALLOW_ALL, Authorization
from broker.config import KafkaConfig
from broker.config_admin import ConfigAdmin
from broker.config_entries import ConfigDescriber
from broker.dynamic_config import DynamicBrokerConfig
from broker.features import FinalizedFeatures
from broker.group_apis import GroupApis, zk_consumer_offset_path
from broker.log_dirs import LogDirsApis
from broker.metadata_cache import MetadataCache
from broker.replica_admin import ReplicaAdmin
from broker.replica_manager import DeleteRecordsPartitionResult
from broker.topic_admin import TopicAdmin
from coordinator.group_metadata import (
    GroupSummary,
    JoinGroupResult,
    MemberSummary,
    OffsetAndMetadata,
    SyncGroupResult,
)
from coordinator.leave_group import LeaveGroupResult
from network.request_channel import Request
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeLogDirsRequest,
    ElectLeadersRequest,
    ElectLeadersResponse,
    HeartbeatRequest,
    IncrementalAlterConfigsRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    Message,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
    UpdateFeaturesRequest,
)
from server_common.acl_authorizer import AccessControlEntry, AclAuthorizer, ResourcePattern
from server_common.acls import (
    CLUSTER_NAME,
    WILDCARD,
    AclOperation,
    AclPermissionType,
    Action,
    PatternType,
    ResourceType,
)
from server_common.futures import completed
from server_common.principal import KafkaPrincipal
from server_common.purgatory import DelayedOperationPurgatory
from server_common.replica_assignment import BrokerMetadata
from tests.broker.controller_requests import topic_id_of, update_metadata
from tests.support.handler_requests import FakeConnection, answer, handler_request
from zk import znodes

Op, RT = AclOperation, ResourceType
ALICE = KafkaPrincipal("User", "alice")
ADMIN = KafkaPrincipal("User", "admin")
HOST = "10.1.2.3"

TOPIC = "orders.eu"  # known, 2 partitions
OTHER = "payments"  # known, 1 partition
NEW_TOPIC = "orders.us"  # to be created
GROUP = "billing-app"
TXN = "billing-tx"
PREFIX = {TOPIC: "orders.", NEW_TOPIC: "orders.", GROUP: "billing-", TXN: "billing-", CLUSTER_NAME: "kafka-"}
BROKERS = {1: ("h1", 9092)}
BROKER_ID = 1

GAF, TAF, CAF = (
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
)
TIAF = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
NONE = ErrorCode.NONE


# -- the world: fakes around the handlers ---------------------------------------------------------


def _publish(cache: MetadataCache, topic: str, partitions: dict[int, list[int]], leader: int = 1) -> None:
    cache.update(update_metadata(BROKERS, topic, partitions, leader=leader), 6)


class FakeAdminZk:
    """The ZooKeeper side of TopicAdmin and ConfigAdmin; the controller's part (UpdateMetadata) happens at
    once, so that writes are seen applied."""

    def __init__(self, cache: MetadataCache) -> None:
        self.cache = cache
        self.assignments: dict[str, dict[int, list[int]]] = {TOPIC: {0: [1], 1: [1]}, OTHER: {0: [1]}}
        self.configs: dict[tuple[str, str], dict[str, str]] = {}
        self.deleted: list[str] = []
        for topic, partitions in self.assignments.items():
            _publish(cache, topic, partitions)

    async def registered_brokers(self) -> list[BrokerMetadata]:
        return [BrokerMetadata(BROKER_ID)]

    async def all_topics(self) -> list[str]:
        return list(self.assignments)

    async def topic_exists(self, topic: str) -> bool:
        return topic in self.assignments

    async def create_topic(
        self, name: str, configs: dict[str, str], assignment: dict[int, list[int]]
    ) -> uuid.UUID:
        self.assignments[name] = assignment
        _publish(self.cache, name, assignment)
        return topic_id_of(name)

    async def topic_assignment(self, topic: str) -> tuple[znodes.TopicAssignment, int] | None:
        found = self.assignments.get(topic)
        return None if found is None else (znodes.TopicAssignment(dict(found)), 0)

    async def is_queued_for_deletion(self, topic: str) -> bool:
        return False

    async def set_topic_assignment(
        self, topic: str, assignment: znodes.TopicAssignment, version: int
    ) -> None:
        self.assignments[topic] = assignment.partitions
        _publish(self.cache, topic, assignment.partitions)

    async def mark_for_deletion(self, topic: str) -> None:
        self.deleted.append(topic)
        _publish(self.cache, topic, self.assignments.pop(topic), leader=-2)  # LeaderDuringDelete

    async def entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        return dict(self.configs.get((entity_type, name), {}))

    async def change_entity_config(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        self.configs[(entity_type, name)] = dict(configs)


class FakeListener:
    def apply_topic(self, topic: str, overrides: Any, defaults: Any = None) -> None:
        pass

    def apply_broker_overrides(self) -> None:
        pass


class FakeCoordinator:
    """The group coordinator: every group exists, is stable, has offsets for every partition."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.status = SimpleNamespace(validate=lambda group_id: None)
        self.groups = [(GROUP, "consumer", "Stable"), ("other-app", "consumer", "Empty")]
        self.offsets = {(TOPIC, 0): OffsetAndMetadata(5), (OTHER, 0): OffsetAndMetadata(7)}

    def handle_join_group(self, join: Any) -> asyncio.Future[JoinGroupResult]:
        self.calls.append("join")
        return completed(JoinGroupResult("m-1", NONE, 1, "consumer", "range", "m-1"))

    def handle_sync_group(self, *args: Any) -> asyncio.Future[SyncGroupResult]:
        self.calls.append("sync")
        return completed(SyncGroupResult(NONE, "consumer", "range", b"a"))

    def handle_heartbeat(self, *args: Any) -> int:
        self.calls.append("heartbeat")
        return NONE

    def handle_leave_group(self, group_id: str, leaving: list[Any]) -> LeaveGroupResult:
        self.calls.append("leave")
        return LeaveGroupResult(NONE, [(m, NONE) for m in leaving])

    def handle_commit_offsets(
        self, group: str, member: str, instance: str | None, generation: int, offsets: dict[Any, Any]
    ) -> asyncio.Future[dict[tuple[str, int], int]]:
        self.calls.append(f"commit {sorted(offsets)}")
        return completed(dict.fromkeys(offsets, NONE))

    def handle_txn_commit_offsets(self, *args: Any) -> asyncio.Future[dict[tuple[str, int], int]]:
        offsets = args[-1]
        self.calls.append(f"txn commit {sorted(offsets)}")
        return completed(dict.fromkeys(offsets, NONE))

    def handle_fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[int, dict[tuple[str, int], OffsetAndMetadata | None]]:
        self.calls.append(f"fetch {partitions}")
        if partitions is None:
            return NONE, dict(self.offsets)
        return NONE, {tp: self.offsets.get(tp) for tp in partitions}

    def unstable_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> set[tuple[str, int]]:
        return set()

    def handle_delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> asyncio.Future[tuple[int, dict[tuple[str, int], int]]]:
        self.calls.append(f"delete offsets {partitions}")
        return completed((NONE, dict.fromkeys(partitions, NONE)))

    def handle_describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        self.calls.append(f"describe {group_id}")
        member = MemberSummary("m-1", None, "c", "/h", b"m", b"a")
        return NONE, GroupSummary("Stable", "consumer", "range", [member])

    def handle_list_groups(self, states: set[str]) -> tuple[int, list[tuple[str, str, str]]]:
        return NONE, list(self.groups)

    def handle_delete_groups(self, names: list[str]) -> asyncio.Future[dict[str, int]]:
        self.calls.append(f"delete groups {names}")
        return completed(dict.fromkeys(names, NONE))


class FakeZk:
    """OffsetCommit v0 / OffsetFetch v0's ZooKeeper."""

    def __init__(self) -> None:
        self.nodes = {zk_consumer_offset_path(GROUP, TOPIC, 0): b"11"}

    async def get(self, path: str) -> tuple[bytes, Any] | None:
        return (self.nodes[path], None) if path in self.nodes else None


class FakeControllerChannel:
    """The active controller: answers every forwarded request (ElectLeaders: elected)."""

    def __init__(self) -> None:
        self.sent: list[ApiKey] = []

    async def send(self, key: ApiKey, version: int, body: Any) -> Message:
        self.sent.append(key)
        if key == ApiKey.ELECT_LEADERS:
            return ElectLeadersResponse(
                error_code=NONE,
                replica_election_results=[
                    ElectLeadersResponse.ReplicaElectionResult(
                        topic=t.topic,
                        partition_result=[
                            ElectLeadersResponse.PartitionResult(
                                partition_id=p, error_code=ErrorCode.ELECTION_NOT_NEEDED
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in body.topic_partitions
                ],
            )
        if key == ApiKey.ALTER_PARTITION_REASSIGNMENTS:
            return AlterPartitionReassignmentsResponse(error_code=NONE, error_message=None, responses=[])
        return ListPartitionReassignmentsResponse(error_code=NONE, error_message=None, topics=[])

    async def close(self) -> None:
        pass


class FeatureZk:
    """The ``/feature`` znode, enabled and empty."""

    async def get(self, path: str) -> tuple[bytes, Any]:
        return znodes.encode_feature_znode({}), SimpleNamespace(version=1)


@dataclass
class World:
    groups: GroupApis
    topics: TopicAdmin
    configs: ConfigAdmin
    admin: AdminApis
    replicas: ReplicaAdmin
    log_dirs: LogDirsApis
    features: FinalizedFeatures
    admin_zk: FakeAdminZk
    coordinator: FakeCoordinator
    channel: FakeControllerChannel
    deleted_records: list[dict[tuple[str, int], int]]
    moved: list[dict[tuple[str, int], str]]


def build_world(authorization: Authorization) -> World:
    config = KafkaConfig({"broker.id": str(BROKER_ID), "zookeeper.connect": "zk:2181"})
    cache = MetadataCache("cluster")
    admin_zk = FakeAdminZk(cache)
    dynamic = DynamicBrokerConfig(config)
    listener = FakeListener()

    groups = GroupApis.__new__(GroupApis)
    groups.authorization = authorization
    groups.metadata_cache = cache
    coordinator = FakeCoordinator()
    groups.coordinator = coordinator  # type: ignore[assignment]
    groups.zk = FakeZk()  # type: ignore[assignment]
    groups.replica_manager = SimpleNamespace(add_partitions_to_txn=None)  # type: ignore[assignment]

    topics = TopicAdmin(
        config,
        admin_zk,
        cache,
        dynamic,
        listener,
        authorization=authorization,  # type: ignore[arg-type]
    )
    configs = ConfigAdmin(
        BROKER_ID,
        config.__getitem__,
        admin_zk,  # type: ignore[arg-type]
        cache,
        dynamic,
        listener,  # type: ignore[arg-type]
        authorization=authorization,
    )
    configs.describer = ConfigDescriber(dynamic)

    deleted_records: list[dict[tuple[str, int], int]] = []

    def delete_records(offsets: dict[tuple[str, int], int], timeout_ms: int) -> Any:
        deleted_records.append(offsets)
        return completed({tp: DeleteRecordsPartitionResult(low_watermark=o) for tp, o in offsets.items()})

    admin = AdminApis.__new__(AdminApis)
    admin.authorization = authorization
    admin.metadata_cache = cache
    admin.replica_manager = SimpleNamespace(delete_records=delete_records)  # type: ignore[assignment]

    channel = FakeControllerChannel()
    replica_manager = SimpleNamespace(elect_leader_purgatory=DelayedOperationPurgatory("ElectLeader"))
    replicas = ReplicaAdmin(cache, channel, replica_manager, authorization=authorization)  # type: ignore[arg-type]

    moved: list[dict[tuple[str, int], str]] = []
    log_dirs = LogDirsApis.__new__(LogDirsApis)
    log_dirs.authorization = authorization
    log_dirs.describe_log_dirs = lambda wanted: []  # type: ignore[method-assign]
    log_dirs.alter_replica_log_dirs = lambda wanted: (  # type: ignore[method-assign]
        moved.append(wanted) or dict.fromkeys(wanted, NONE)
    )

    features = FinalizedFeatures(FeatureZk(), authorization=authorization)  # type: ignore[arg-type]
    return World(
        groups, topics, configs, admin, replicas, log_dirs, features, admin_zk, coordinator, channel,
        deleted_records, moved,
    )  # fmt: skip


def request(key: ApiKey, version: int, body: Message, principal: KafkaPrincipal = ALICE) -> Request:
    connection = FakeConnection(principal, HOST, listener="SASL", port=50000)
    return handler_request(key, version, body, connection, client_id="test-client")


async def call(handler: Callable[[Request], Awaitable[Any]], req: Request) -> Any:
    return await answer(await handler(req))


# -- ACL set-up -----------------------------------------------------------------------------------


Need = tuple[ResourceType, str, AclOperation]


def grant(
    authorizer: AclAuthorizer,
    needs: list[Need],
    pattern: str,
    *,
    deny_first: bool = False,
    principal: str = "User:alice",
) -> None:
    """ALLOW each need for ``principal``, as a LITERAL name, a PREFIXED pattern or the ``*`` wildcard;
    with ``deny_first`` a LITERAL DENY of the first need too."""
    for resource_type, name, operation in needs:
        if pattern == "literal":
            resource = ResourcePattern(resource_type, name, PatternType.LITERAL)
        elif pattern == "prefixed":
            resource = ResourcePattern(resource_type, PREFIX[name], PatternType.PREFIXED)
        else:
            resource = ResourcePattern(resource_type, WILDCARD, PatternType.LITERAL)
        authorizer.add_acls(resource, AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW))
    if deny_first:
        resource_type, name, operation = needs[0]
        authorizer.add_acls(
            ResourcePattern(resource_type, name, PatternType.LITERAL),
            AccessControlEntry(principal, HOST, operation, AclPermissionType.DENY),
        )


# -- the cases: one call of each API and what it shows ------------------------------------------


def _p(topic: str, *indexes: int) -> dict[tuple[str, int], int]:
    return {(topic, i): 0 for i in indexes}


def partition_errors(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def join_group(w: World) -> Any:
    protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")
    body = JoinGroupRequest(
        group_id=GROUP, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
        protocol_type="consumer", protocols=[protocol],
    )  # fmt: skip
    return (await call(w.groups.handle_join_group, request(ApiKey.JOIN_GROUP, 7, body))).error_code


async def sync_group(w: World) -> Any:
    body = SyncGroupRequest(group_id=GROUP, generation_id=1, member_id="m-1", assignments=[])
    return (await call(w.groups.handle_sync_group, request(ApiKey.SYNC_GROUP, 3, body))).error_code


async def heartbeat(w: World) -> Any:
    body = HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="m-1")
    return (await call(w.groups.handle_heartbeat, request(ApiKey.HEARTBEAT, 3, body))).error_code


async def leave_group(w: World) -> Any:
    body = LeaveGroupRequest(group_id=GROUP, members=[LeaveGroupRequest.MemberIdentity(member_id="m-1")])
    return (await call(w.groups.handle_leave_group, request(ApiKey.LEAVE_GROUP, 3, body))).error_code


def commit_body(*topics: tuple[str, list[int]]) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=GROUP,
        generation_id_or_member_epoch=1,
        member_id="m-1",
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name=name,
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=p, committed_offset=3)
                    for p in partitions
                ],
            )
            for name, partitions in topics
        ],
    )


async def offset_commit(w: World) -> Any:
    body = commit_body((TOPIC, [0]))
    return partition_errors(await call(w.groups.handle_offset_commit, request(ApiKey.OFFSET_COMMIT, 8, body)))


def txn_commit_body(*topics: tuple[str, list[int]]) -> TxnOffsetCommitRequest:
    return TxnOffsetCommitRequest(
        transactional_id=TXN,
        group_id=GROUP,
        producer_id=1,
        producer_epoch=0,
        topics=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                name=name,
                partitions=[
                    TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                        partition_index=p, committed_offset=3
                    )
                    for p in partitions
                ],
            )
            for name, partitions in topics
        ],
    )


async def txn_offset_commit(w: World) -> Any:
    body = txn_commit_body((TOPIC, [0]))
    response = await call(w.groups.handle_txn_offset_commit, request(ApiKey.TXN_OFFSET_COMMIT, 3, body))
    return partition_errors(response)


def fetch_body_v8(topics: list[tuple[str, list[int]]] | None) -> OffsetFetchRequest:
    return OffsetFetchRequest(
        groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=GROUP,
                topics=None
                if topics is None
                else [
                    OffsetFetchRequest.OffsetFetchRequestTopics(name=n, partition_indexes=ps)
                    for n, ps in topics
                ],
            )
        ]
    )


async def offset_fetch(w: World) -> Any:
    body = fetch_body_v8([(TOPIC, [0])])
    [group] = (await call(w.groups.handle_offset_fetch, request(ApiKey.OFFSET_FETCH, 8, body))).groups
    return group.error_code, partition_errors(group)


async def offset_delete(w: World) -> Any:
    body = OffsetDeleteRequest(
        group_id=GROUP,
        topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(
                name=TOPIC, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)]
            )
        ],
    )
    response = await call(w.groups.handle_offset_delete, request(ApiKey.OFFSET_DELETE, 0, body))
    return response.error_code, partition_errors(response)


async def describe_groups(w: World) -> Any:
    body = DescribeGroupsRequest(groups=[GROUP])
    [group] = (await call(w.groups.handle_describe_groups, request(ApiKey.DESCRIBE_GROUPS, 5, body))).groups
    return group.error_code


async def list_groups(w: World) -> Any:
    body = ListGroupsRequest(states_filter=[])
    response = await call(w.groups.handle_list_groups, request(ApiKey.LIST_GROUPS, 4, body))
    return [g.group_id for g in response.groups if g.group_id == GROUP]


async def delete_groups(w: World) -> Any:
    body = DeleteGroupsRequest(groups_names=[GROUP])
    [result] = (await call(w.groups.handle_delete_groups, request(ApiKey.DELETE_GROUPS, 2, body))).results
    return result.error_code


def create_body(*names: str, validate_only: bool = False) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[]
            )
            for n in names
        ],
        timeout_ms=5_000,
        validate_only=validate_only,
    )


async def create_topics(w: World) -> Any:
    [result] = (
        await call(w.topics.handle_create_topics, request(ApiKey.CREATE_TOPICS, 7, create_body(NEW_TOPIC)))
    ).topics
    return result.error_code


async def delete_topics(w: World) -> Any:
    body = DeleteTopicsRequest(topic_names=[TOPIC], timeout_ms=5_000)
    [result] = (await call(w.topics.handle_delete_topics, request(ApiKey.DELETE_TOPICS, 5, body))).responses
    return result.error_code


async def create_partitions(w: World) -> Any:
    body = CreatePartitionsRequest(
        topics=[CreatePartitionsRequest.CreatePartitionsTopic(name=TOPIC, count=3, assignments=None)],
        timeout_ms=5_000,
        validate_only=False,
    )
    [result] = (
        await call(w.topics.handle_create_partitions, request(ApiKey.CREATE_PARTITIONS, 3, body))
    ).results
    return result.error_code


async def delete_records(w: World) -> Any:
    body = DeleteRecordsRequest(
        topics=[
            DeleteRecordsRequest.DeleteRecordsTopic(
                name=TOPIC,
                partitions=[DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=1)],
            )
        ],
        timeout_ms=1000,
    )
    response = await call(w.admin.handle_delete_records, request(ApiKey.DELETE_RECORDS, 2, body))
    [p] = response.topics[0].partitions
    return p.error_code, p.low_watermark


def describe_configs_body(resource_type: int, name: str) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=None
            )
        ]
    )


async def describe_topic_configs(w: World) -> Any:
    body = describe_configs_body(2, TOPIC)
    [result] = (
        await call(w.configs.handle_describe_configs, request(ApiKey.DESCRIBE_CONFIGS, 4, body))
    ).results
    return result.error_code, bool(result.configs)


async def describe_broker_configs(w: World) -> Any:
    body = describe_configs_body(4, str(BROKER_ID))
    [result] = (
        await call(w.configs.handle_describe_configs, request(ApiKey.DESCRIBE_CONFIGS, 4, body))
    ).results
    return result.error_code, bool(result.configs)


def alter_body(resource_type: int, name: str, **configs: str | None) -> AlterConfigsRequest:
    return AlterConfigsRequest(
        resources=[
            AlterConfigsRequest.AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=[
                    AlterConfigsRequest.AlterableConfig(name=k.replace("_", "."), value=v)
                    for k, v in configs.items()
                ],
            )
        ],
        validate_only=False,
    )


async def alter_topic_configs(w: World) -> Any:
    body = alter_body(2, TOPIC, retention_ms="1000")
    [result] = (await call(w.configs.handle_alter_configs, request(ApiKey.ALTER_CONFIGS, 2, body))).responses
    return result.error_code, result.error_message


def incremental_body(
    resource_type: int, name: str, *ops: tuple[str, int, str | None]
) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(
        resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=[
                    IncrementalAlterConfigsRequest.AlterableConfig(name=n, config_operation=op, value=v)
                    for n, op, v in ops
                ],
            )
        ],
        validate_only=False,
    )


async def incremental_broker_configs(w: World) -> Any:
    body = incremental_body(4, "", ("log.retention.ms", 0, "1000"))
    response = await call(
        w.configs.handle_incremental_alter_configs, request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
    )
    [result] = response.responses
    return result.error_code, result.error_message


def elect_body() -> ElectLeadersRequest:
    return ElectLeadersRequest(
        election_type=0,
        topic_partitions=[ElectLeadersRequest.TopicPartitions(topic=TOPIC, partitions=[0])],
        timeout_ms=1000,
    )


async def elect_leaders(w: World) -> Any:
    response = await call(w.replicas.handle_elect_leaders, request(ApiKey.ELECT_LEADERS, 2, elect_body()))
    [p] = response.replica_election_results[0].partition_result
    return response.error_code, p.error_code, w.channel.sent


def reassign_body() -> AlterPartitionReassignmentsRequest:
    return AlterPartitionReassignmentsRequest(
        timeout_ms=1000,
        topics=[
            AlterPartitionReassignmentsRequest.ReassignableTopic(
                name=TOPIC,
                partitions=[
                    AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0, replicas=[1])
                ],
            )
        ],
    )


async def alter_reassignments(w: World) -> Any:
    req = request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, reassign_body())
    return (await call(w.replicas.handle_alter_partition_reassignments, req)).error_code, w.channel.sent


async def list_reassignments(w: World) -> Any:
    body = ListPartitionReassignmentsRequest(timeout_ms=1000, topics=None)
    req = request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, body)
    return (await call(w.replicas.handle_list_partition_reassignments, req)).error_code, w.channel.sent


async def describe_log_dirs(w: World) -> Any:
    body = DescribeLogDirsRequest(topics=None)
    return (
        await call(w.log_dirs.handle_describe_log_dirs, request(ApiKey.DESCRIBE_LOG_DIRS, 4, body))
    ).error_code


def alter_dirs_body() -> AlterReplicaLogDirsRequest:
    return AlterReplicaLogDirsRequest(
        dirs=[
            AlterReplicaLogDirsRequest.AlterReplicaLogDir(
                path="/data/b",
                topics=[AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(name=TOPIC, partitions=[0, 1])],
            )
        ]
    )


async def alter_replica_log_dirs(w: World) -> Any:
    req = request(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, alter_dirs_body())
    return partition_errors_of_dirs(await call(w.log_dirs.handle_alter_replica_log_dirs, req))


def partition_errors_of_dirs(response: Any) -> dict[tuple[str, int], int]:
    return {(t.topic_name, p.partition_index): p.error_code for t in response.results for p in t.partitions}


async def update_features(w: World) -> Any:
    body = UpdateFeaturesRequest(timeout_ms=1000, feature_updates=[])
    response = await call(w.features.handle_update_features, request(ApiKey.UPDATE_FEATURES, 1, body))
    return response.error_code


@dataclass(frozen=True)
class Case:
    run: Callable[[World], Awaitable[Any]]
    needs: list[Need]
    denied: Any
    allowed: Any


CLUSTER = (RT.CLUSTER, CLUSTER_NAME)
CASES: dict[str, Case] = {
    "JoinGroup": Case(join_group, [(RT.GROUP, GROUP, Op.READ)], GAF, NONE),
    "SyncGroup": Case(sync_group, [(RT.GROUP, GROUP, Op.READ)], GAF, NONE),
    "Heartbeat": Case(heartbeat, [(RT.GROUP, GROUP, Op.READ)], GAF, NONE),
    "LeaveGroup": Case(leave_group, [(RT.GROUP, GROUP, Op.READ)], GAF, NONE),
    "OffsetCommit": Case(
        offset_commit,
        [(RT.GROUP, GROUP, Op.READ), (RT.TOPIC, TOPIC, Op.READ)],
        {(TOPIC, 0): GAF},
        {(TOPIC, 0): NONE},
    ),
    "TxnOffsetCommit": Case(
        txn_offset_commit,
        [(RT.TRANSACTIONAL_ID, TXN, Op.WRITE), (RT.GROUP, GROUP, Op.READ), (RT.TOPIC, TOPIC, Op.READ)],
        {(TOPIC, 0): TIAF},
        {(TOPIC, 0): NONE},
    ),
    "OffsetFetch": Case(
        offset_fetch,
        [(RT.GROUP, GROUP, Op.DESCRIBE), (RT.TOPIC, TOPIC, Op.DESCRIBE)],
        (GAF, {}),
        (NONE, {(TOPIC, 0): NONE}),
    ),
    "OffsetDelete": Case(
        offset_delete,
        [(RT.GROUP, GROUP, Op.DELETE), (RT.TOPIC, TOPIC, Op.READ)],
        (GAF, {}),
        (NONE, {(TOPIC, 0): NONE}),
    ),
    "DescribeGroups": Case(describe_groups, [(RT.GROUP, GROUP, Op.DESCRIBE)], GAF, NONE),
    "ListGroups": Case(list_groups, [(RT.GROUP, GROUP, Op.DESCRIBE)], [], [GROUP]),
    "DeleteGroups": Case(delete_groups, [(RT.GROUP, GROUP, Op.DELETE)], GAF, NONE),
    "CreateTopics": Case(create_topics, [(RT.TOPIC, NEW_TOPIC, Op.CREATE)], TAF, NONE),
    "DeleteTopics": Case(delete_topics, [(RT.TOPIC, TOPIC, Op.DELETE)], TAF, NONE),
    "CreatePartitions": Case(create_partitions, [(RT.TOPIC, TOPIC, Op.ALTER)], TAF, NONE),
    "DeleteRecords": Case(delete_records, [(RT.TOPIC, TOPIC, Op.DELETE)], (TAF, -1), (NONE, 1)),
    "DescribeConfigs(topic)": Case(
        describe_topic_configs, [(RT.TOPIC, TOPIC, Op.DESCRIBE_CONFIGS)], (TAF, False), (NONE, True)
    ),
    "DescribeConfigs(broker)": Case(
        describe_broker_configs, [(*CLUSTER, Op.DESCRIBE_CONFIGS)], (CAF, False), (NONE, True)
    ),
    "AlterConfigs(topic)": Case(
        alter_topic_configs, [(RT.TOPIC, TOPIC, Op.ALTER_CONFIGS)], (TAF, None), (NONE, None)
    ),
    "IncrementalAlterConfigs(broker)": Case(
        incremental_broker_configs, [(*CLUSTER, Op.ALTER_CONFIGS)], (CAF, None), (NONE, None)
    ),
    "ElectLeaders": Case(
        elect_leaders,
        [(*CLUSTER, Op.ALTER)],
        (CAF, CAF, []),
        (NONE, ErrorCode.ELECTION_NOT_NEEDED, [ApiKey.ELECT_LEADERS]),
    ),
    "AlterPartitionReassignments": Case(
        alter_reassignments, [(*CLUSTER, Op.ALTER)], (CAF, []), (NONE, [ApiKey.ALTER_PARTITION_REASSIGNMENTS])
    ),
    "ListPartitionReassignments": Case(
        list_reassignments,
        [(*CLUSTER, Op.DESCRIBE)],
        (CAF, []),
        (NONE, [ApiKey.LIST_PARTITION_REASSIGNMENTS]),
    ),
    "DescribeLogDirs": Case(describe_log_dirs, [(*CLUSTER, Op.DESCRIBE)], CAF, NONE),
    "AlterReplicaLogDirs": Case(
        alter_replica_log_dirs,
        [(*CLUSTER, Op.ALTER)],
        {(TOPIC, 0): CAF, (TOPIC, 1): CAF},
        {(TOPIC, 0): NONE, (TOPIC, 1): NONE},
    ),
    "UpdateFeatures": Case(update_features, [(*CLUSTER, Op.ALTER)], CAF, NONE),
}

# ACL pattern -> (how the authorizer is set up, whether the API is then allowed).
PATTERNS: dict[str, tuple[Callable[[AclAuthorizer, list[Need]], None], bool]] = {
    "no ACL": (lambda a, needs: None, False),
    "literal ALLOW": (lambda a, needs: grant(a, needs, "literal"), True),
    "prefixed ALLOW": (lambda a, needs: grant(a, needs, "prefixed"), True),
    "wildcard ALLOW": (lambda a, needs: grant(a, needs, "wildcard"), True),
    "ALLOW but DENY from this host": (lambda a, needs: grant(a, needs, "wildcard", deny_first=True), False),
    "ALLOW for another user": (lambda a, needs: grant(a, needs, "literal", principal="User:bob"), False),
}


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("api_name", CASES)
async def test_each_api_checks_what_kafka_checks(api_name: str, pattern: str) -> None:
    case = CASES[api_name]
    set_up, allowed = PATTERNS[pattern]
    authorizer = AclAuthorizer()
    set_up(authorizer, case.needs)
    outcome = await case.run(build_world(Authorization(authorizer)))
    assert outcome == (case.allowed if allowed else case.denied)


@pytest.mark.parametrize("api_name", CASES)
async def test_a_super_user_and_everyone_if_no_acl_found_are_allowed(api_name: str) -> None:
    case = CASES[api_name]
    admin = AclAuthorizer(super_users="User:admin")
    world = build_world(Authorization(admin))
    # The cases send as alice; a super user is whoever super.users names.
    assert await case.run(world) == case.denied
    world = build_world(Authorization(AclAuthorizer(super_users="User:alice")))
    assert await case.run(world) == case.allowed
    world = build_world(Authorization(AclAuthorizer(allow_everyone_if_no_acl_found=True)))
    assert await case.run(world) == case.allowed


@pytest.mark.parametrize("api_name", CASES)
async def test_without_an_authorizer_every_api_answers_as_before(api_name: str) -> None:
    assert await CASES[api_name].run(build_world(ALLOW_ALL)) == CASES[api_name].allowed


# -- what each check gives, beyond allowed / denied -----------------------------------------------


class Recording:
    """An authorizer that remembers every action it was asked about (and whether a denial is logged)."""

    def __init__(self, inner: AclAuthorizer) -> None:
        self.inner = inner
        self.asked: list[Action] = []

    def authorize(self, principal: KafkaPrincipal, host: str, actions: list[Action]) -> list[bool]:
        self.asked.extend(actions)
        return self.inner.authorize(principal, host, actions)

    def authorize_by_resource_type(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        return self.inner.authorize_by_resource_type(principal, host, operation, resource_type)

    def silent(self) -> set[tuple[AclOperation, ResourceType, str]]:
        """The checks that log no denial."""
        return {(a.operation, a.resource_type, a.name) for a in self.asked if not a.log_if_denied}


def authorizer_with(*needs: Need) -> AclAuthorizer:
    authorizer = AclAuthorizer()
    grant(authorizer, list(needs), "literal")
    return authorizer


async def test_create_topics_with_cluster_create_needs_no_topic_acl_and_checks_quietly() -> None:
    recording = Recording(authorizer_with((*CLUSTER, Op.CREATE)))
    world = build_world(Authorization(recording))
    [result] = (
        await call(
            world.topics.handle_create_topics, request(ApiKey.CREATE_TOPICS, 7, create_body(NEW_TOPIC))
        )
    ).topics
    assert result.error_code == NONE and NEW_TOPIC in world.admin_zk.assignments
    # Without DESCRIBE_CONFIGS on the topic: created, but nothing about it is told.
    assert result.topic_config_error_code == TAF
    assert (result.num_partitions, result.replication_factor, result.configs) == (-1, -1, [])
    assert result.topic_id == uuid.UUID(int=0)
    # Kafka's handleCreateTopicsRequest logs neither a missing cluster CREATE nor DESCRIBE_CONFIGS.
    assert recording.silent() == {
        (Op.CREATE, RT.CLUSTER, CLUSTER_NAME),
        (Op.DESCRIBE_CONFIGS, RT.TOPIC, NEW_TOPIC),
    }


async def test_create_topics_tells_configs_and_id_only_with_describe_configs() -> None:
    authorizer = authorizer_with((RT.TOPIC, NEW_TOPIC, Op.CREATE), (RT.TOPIC, NEW_TOPIC, Op.DESCRIBE_CONFIGS))
    world = build_world(Authorization(authorizer))
    [result] = (
        await call(
            world.topics.handle_create_topics, request(ApiKey.CREATE_TOPICS, 7, create_body(NEW_TOPIC))
        )
    ).topics
    assert (result.error_code, result.topic_config_error_code) == (NONE, NONE)
    assert (result.num_partitions, result.replication_factor) == (1, 1)
    assert result.topic_id == topic_id_of(NEW_TOPIC) and result.configs


async def test_create_topics_refuses_each_topic_alone_in_kafkas_order() -> None:
    world = build_world(Authorization(authorizer_with((RT.TOPIC, NEW_TOPIC, Op.CREATE))))
    body = create_body(NEW_TOPIC, "secret", "secret", "__cluster_metadata")
    results = (await call(world.topics.handle_create_topics, request(ApiKey.CREATE_TOPICS, 7, body))).topics
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        (NEW_TOPIC, NONE, None),
        # A duplicate is refused as such before authorization; its config error stays.
        ("secret", ErrorCode.INVALID_REQUEST, "Found multiple entries for this topic."),
        ("secret", ErrorCode.INVALID_REQUEST, "Found multiple entries for this topic."),
        (
            "__cluster_metadata",
            ErrorCode.INVALID_REQUEST,
            "Creation of internal topic __cluster_metadata is prohibited.",
        ),
    ]
    assert [r.topic_config_error_code for r in results] == [TAF, TAF, TAF, NONE]
    body = create_body("secret")
    [result] = (await call(world.topics.handle_create_topics, request(ApiKey.CREATE_TOPICS, 7, body))).topics
    assert (result.error_code, result.error_message) == (TAF, "Authorization failed.")
    assert "secret" not in world.admin_zk.assignments


async def test_delete_topics_by_id_hides_the_name_of_a_topic_not_describable() -> None:
    world = build_world(Authorization(authorizer_with((RT.TOPIC, OTHER, Op.DESCRIBE))))
    body = DeleteTopicsRequest(
        topics=[
            DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=topic_id_of(TOPIC)),
            DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=topic_id_of(OTHER)),
            DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=uuid.uuid4()),
        ],
        timeout_ms=1000,
    )
    results = (
        await call(world.topics.handle_delete_topics, request(ApiKey.DELETE_TOPICS, 6, body))
    ).responses
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        (None, TAF, None),  # not even DESCRIBE: the id's name is not told
        (OTHER, TAF, None),  # DESCRIBE but not DELETE
        (None, ErrorCode.UNKNOWN_TOPIC_ID, results[2].error_message),
    ]
    assert world.admin_zk.deleted == []


async def test_create_partitions_checks_duplicates_before_alter() -> None:
    world = build_world(Authorization(AclAuthorizer()))
    topics = [
        CreatePartitionsRequest.CreatePartitionsTopic(name=n, count=3, assignments=None)
        for n in (TOPIC, TOPIC, OTHER)
    ]
    body = CreatePartitionsRequest(topics=topics, timeout_ms=1000, validate_only=False)
    results = (
        await call(world.topics.handle_create_partitions, request(ApiKey.CREATE_PARTITIONS, 3, body))
    ).results
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        (TOPIC, ErrorCode.INVALID_REQUEST, "Duplicate topic in request."),
        (TOPIC, ErrorCode.INVALID_REQUEST, "Duplicate topic in request."),
        (OTHER, TAF, "The topic authorization is failed."),
    ]


async def test_offset_commit_refuses_unreadable_topics_and_commits_the_rest() -> None:
    authorizer = authorizer_with(
        (RT.GROUP, GROUP, Op.READ), (RT.TOPIC, TOPIC, Op.READ), (RT.TOPIC, "gone", Op.READ)
    )
    world = build_world(Authorization(authorizer))
    body = commit_body((TOPIC, [0, 7]), (OTHER, [0]), ("gone", [0]))
    errors = partition_errors(
        await call(world.groups.handle_offset_commit, request(ApiKey.OFFSET_COMMIT, 8, body))
    )
    assert errors == {
        (TOPIC, 0): NONE,
        (TOPIC, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (OTHER, 0): TAF,  # not readable: TOPIC_AUTHORIZATION_FAILED even though it exists
        ("gone", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # readable but unknown
    }
    assert world.coordinator.calls == [f"commit {[(TOPIC, 0)]}"]


async def test_txn_offset_commit_checks_transactional_id_then_group_then_topics() -> None:
    body = txn_commit_body((TOPIC, [0]), (OTHER, [0]))
    steps = [
        ([], {(TOPIC, 0): TIAF, (OTHER, 0): TIAF}),
        ([(RT.TRANSACTIONAL_ID, TXN, Op.WRITE)], {(TOPIC, 0): GAF, (OTHER, 0): GAF}),
        (
            [(RT.TRANSACTIONAL_ID, TXN, Op.WRITE), (RT.GROUP, GROUP, Op.READ)],
            {(TOPIC, 0): TAF, (OTHER, 0): TAF},
        ),
        (
            [(RT.TRANSACTIONAL_ID, TXN, Op.WRITE), (RT.GROUP, GROUP, Op.READ), (RT.TOPIC, TOPIC, Op.READ)],
            {(TOPIC, 0): NONE, (OTHER, 0): TAF},
        ),
    ]
    for needs, expected in steps:
        world = build_world(Authorization(authorizer_with(*needs)))
        response = await call(
            world.groups.handle_txn_offset_commit, request(ApiKey.TXN_OFFSET_COMMIT, 3, body)
        )
        assert partition_errors(response) == expected, needs


async def test_offset_fetch_hides_undescribable_topics_of_the_whole_group_and_refuses_named_ones() -> None:
    authorizer = authorizer_with((RT.GROUP, GROUP, Op.DESCRIBE), (RT.TOPIC, TOPIC, Op.DESCRIBE))
    world = build_world(Authorization(authorizer))
    # All the group's offsets: only those of topics the principal may describe, the others not mentioned.
    [group] = (
        await call(world.groups.handle_offset_fetch, request(ApiKey.OFFSET_FETCH, 8, fetch_body_v8(None)))
    ).groups
    assert partition_errors(group) == {(TOPIC, 0): NONE}
    # Named topics: the others TOPIC_AUTHORIZATION_FAILED with no offset, after the fetched ones, and
    # never asked of the coordinator.
    world.coordinator.calls.clear()
    body = fetch_body_v8([(OTHER, [0]), (TOPIC, [0])])
    [group] = (await call(world.groups.handle_offset_fetch, request(ApiKey.OFFSET_FETCH, 8, body))).groups
    assert [(t.name, [(p.error_code, p.committed_offset) for p in t.partitions]) for t in group.topics] == [
        (TOPIC, [(NONE, 5)]),
        (OTHER, [(TAF, -1)]),
    ]
    assert world.coordinator.calls == [f"fetch {[(TOPIC, 0)]}"]
    # The same before v8 (one group, top-level error from v2), and v1 carries a group error per partition.
    body = OffsetFetchRequest(
        group_id=GROUP, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=OTHER, partition_indexes=[0])]
    )
    response = await call(world.groups.handle_offset_fetch, request(ApiKey.OFFSET_FETCH, 5, body))
    assert (response.error_code, partition_errors(response)) == (NONE, {(OTHER, 0): TAF})
    world = build_world(Authorization(AclAuthorizer()))
    response = await call(world.groups.handle_offset_fetch, request(ApiKey.OFFSET_FETCH, 5, body))
    assert (response.error_code, response.topics) == (GAF, [])
    response = await call(world.groups.handle_offset_fetch, request(ApiKey.OFFSET_FETCH, 1, body))
    assert partition_errors(response) == {(OTHER, 0): GAF}


async def test_offset_fetch_v0_from_zookeeper_is_authorized_like_the_others() -> None:
    body = OffsetFetchRequest(
        group_id=GROUP,
        topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=n, partition_indexes=[0]) for n in (TOPIC, OTHER)
        ],
    )
    world = build_world(Authorization(AclAuthorizer()))
    response = await call(world.groups.handle_offset_fetch, request(ApiKey.OFFSET_FETCH, 0, body))
    assert partition_errors(response) == {(TOPIC, 0): GAF, (OTHER, 0): GAF}
    authorizer = authorizer_with((RT.GROUP, GROUP, Op.DESCRIBE), (RT.TOPIC, TOPIC, Op.DESCRIBE))
    world = build_world(Authorization(authorizer))
    response = await call(world.groups.handle_offset_fetch, request(ApiKey.OFFSET_FETCH, 0, body))
    assert partition_errors(response) == {(TOPIC, 0): NONE, (OTHER, 0): TAF}
    assert response.topics[0].partitions[0].committed_offset == 11


async def test_describe_groups_answers_denied_groups_first_and_reports_authorized_operations() -> None:
    # READ implies DESCRIBE (H4's authorizer); DELETE is not granted.
    world = build_world(Authorization(authorizer_with((RT.GROUP, GROUP, Op.READ))))
    body = DescribeGroupsRequest(groups=["secret", GROUP], include_authorized_operations=True)
    groups = (
        await call(world.groups.handle_describe_groups, request(ApiKey.DESCRIBE_GROUPS, 5, body))
    ).groups
    assert [(g.group_id, g.error_code) for g in groups] == [("secret", GAF), (GROUP, NONE)]
    denied, described = groups
    assert (denied.group_state, denied.protocol_type, denied.protocol_data, denied.members) == (
        "",
        "",
        "",
        [],
    )
    assert denied.authorized_operations == -(2**31)
    assert described.authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert world.coordinator.calls == [f"describe {GROUP}"]
    # Not asked for: left out.
    body = DescribeGroupsRequest(groups=[GROUP], include_authorized_operations=False)
    [described] = (
        await call(world.groups.handle_describe_groups, request(ApiKey.DESCRIBE_GROUPS, 5, body))
    ).groups
    assert described.authorized_operations == -(2**31)


async def test_list_groups_lists_everything_with_cluster_describe_else_filters_quietly() -> None:
    recording = Recording(authorizer_with((RT.GROUP, GROUP, Op.DESCRIBE)))
    world = build_world(Authorization(recording))
    response = await call(
        world.groups.handle_list_groups, request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest(states_filter=[]))
    )
    assert [g.group_id for g in response.groups] == [GROUP]
    # A listing is no refusal: neither the cluster check nor the per-group checks log a denial.
    assert recording.silent() == {
        (Op.DESCRIBE, RT.CLUSTER, CLUSTER_NAME),
        (Op.DESCRIBE, RT.GROUP, GROUP),
        (Op.DESCRIBE, RT.GROUP, "other-app"),
    }
    world = build_world(Authorization(authorizer_with((*CLUSTER, Op.DESCRIBE))))
    response = await call(
        world.groups.handle_list_groups, request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest(states_filter=[]))
    )
    assert [g.group_id for g in response.groups] == [GROUP, "other-app"]


async def test_delete_groups_deletes_the_allowed_and_answers_the_others_after_them() -> None:
    world = build_world(Authorization(authorizer_with((RT.GROUP, GROUP, Op.DELETE))))
    body = DeleteGroupsRequest(groups_names=["secret", GROUP, "secret"])
    results = (await call(world.groups.handle_delete_groups, request(ApiKey.DELETE_GROUPS, 2, body))).results
    assert [(r.group_id, r.error_code) for r in results] == [(GROUP, NONE), ("secret", GAF)]
    assert world.coordinator.calls == [f"delete groups {[GROUP]}"]


async def test_offset_delete_needs_group_delete_and_topic_read() -> None:
    world = build_world(Authorization(authorizer_with((RT.GROUP, GROUP, Op.DELETE))))
    body = OffsetDeleteRequest(
        group_id=GROUP,
        topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(
                name=n, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)]
            )
            for n in (TOPIC, "gone")
        ],
    )
    response = await call(world.groups.handle_offset_delete, request(ApiKey.OFFSET_DELETE, 0, body))
    # Kafka checks READ before existence: an unknown topic without READ is TOPIC_AUTHORIZATION_FAILED.
    assert (response.error_code, partition_errors(response)) == (NONE, {(TOPIC, 0): TAF, ("gone", 0): TAF})
    assert world.coordinator.calls == ["delete offsets []"]


async def test_configs_validate_a_broker_change_before_authorizing_it() -> None:
    world = build_world(Authorization(AclAuthorizer()))
    # A setting that cannot change dynamically: INVALID_REQUEST even to a principal without ALTER_CONFIGS
    # (Kafka's ConfigAdminManager.preprocess runs first); a valid one: CLUSTER_AUTHORIZATION_FAILED.
    bad = incremental_body(4, "", ("num.partitions", 0, "4"))
    [result] = (
        await call(
            world.configs.handle_incremental_alter_configs, request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, bad)
        )
    ).responses
    assert result.error_code == ErrorCode.INVALID_REQUEST
    assert await incremental_broker_configs(world) == (CAF, None)
    # A topic change: its form first (a null value), then authorization, then the rest.
    null = alter_body(2, TOPIC, retention_ms=None)
    [result] = (
        await call(world.configs.handle_alter_configs, request(ApiKey.ALTER_CONFIGS, 2, null))
    ).responses
    assert result.error_code == ErrorCode.INVALID_REQUEST
    unknown = alter_body(2, "no-such-topic", retention_ms="5")
    [result] = (
        await call(world.configs.handle_alter_configs, request(ApiKey.ALTER_CONFIGS, 2, unknown))
    ).responses
    assert (result.error_code, result.error_message) == (TAF, None)
    assert world.admin_zk.configs == {}


async def test_broker_logger_changes_need_cluster_alter_configs_first() -> None:
    world = build_world(Authorization(AclAuthorizer()))
    body = incremental_body(8, "99", ("kafka", 0, "DEBUG"))  # another broker: refused only once authorized
    req = request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
    [result] = (await call(world.configs.handle_incremental_alter_configs, req)).responses
    assert (result.error_code, result.error_message) == (CAF, "Cluster authorization failed.")
    world = build_world(Authorization(authorizer_with((*CLUSTER, Op.ALTER_CONFIGS))))
    [result] = (await call(world.configs.handle_incremental_alter_configs, req)).responses
    assert result.error_code == ErrorCode.INVALID_REQUEST


async def test_describe_configs_answers_each_resource_alone_with_the_errors_message() -> None:
    world = build_world(Authorization(authorizer_with((RT.TOPIC, TOPIC, Op.DESCRIBE_CONFIGS))))
    body = DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=t, resource_name=n, configuration_keys=None
            )
            for t, n in ((2, TOPIC), (2, OTHER), (4, ""), (8, str(BROKER_ID)))
        ]
    )
    results = (
        await call(world.configs.handle_describe_configs, request(ApiKey.DESCRIBE_CONFIGS, 4, body))
    ).results
    assert [(r.resource_name, r.error_code, r.error_message, bool(r.configs)) for r in results] == [
        (TOPIC, NONE, None, True),
        (OTHER, TAF, "Topic authorization failed.", False),
        ("", CAF, "Cluster authorization failed.", False),
        (str(BROKER_ID), CAF, "Cluster authorization failed.", False),
    ]


async def test_cluster_operations_refused_are_not_forwarded_to_the_controller() -> None:
    world = build_world(Authorization(AclAuthorizer()))
    req = request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, reassign_body())
    response = await call(world.replicas.handle_alter_partition_reassignments, req)
    assert response.error_code == CAF and response.error_message
    [[p]] = [t.partitions for t in response.responses]
    assert (p.partition_index, p.error_code, p.error_message) == (0, CAF, response.error_message)
    body = ListPartitionReassignmentsRequest(
        timeout_ms=1000,
        topics=[
            ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(
                name=TOPIC, partition_indexes=[1]
            )
        ],
    )
    response = await call(
        world.replicas.handle_list_partition_reassignments,
        request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, body),
    )
    assert response.error_code == CAF
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics] == [(TOPIC, [1])]
    # ElectLeaders for every partition (null): refused with no partition listed.
    body = ElectLeadersRequest(election_type=0, topic_partitions=None, timeout_ms=1000)
    response = await call(world.replicas.handle_elect_leaders, request(ApiKey.ELECT_LEADERS, 2, body))
    assert (response.error_code, response.replica_election_results) == (CAF, [])
    assert world.channel.sent == []


async def test_log_dirs_and_features_refused_do_nothing() -> None:
    world = build_world(Authorization(AclAuthorizer()))
    response = await call(
        world.log_dirs.handle_describe_log_dirs,
        request(ApiKey.DESCRIBE_LOG_DIRS, 4, DescribeLogDirsRequest(topics=None)),
    )
    assert (response.error_code, response.results) == (CAF, [])
    await alter_replica_log_dirs(world)
    assert world.moved == []
    body = UpdateFeaturesRequest(timeout_ms=1000, feature_updates=[])
    response = await call(world.features.handle_update_features, request(ApiKey.UPDATE_FEATURES, 1, body))
    assert (response.error_code, response.error_message, response.results) == (
        CAF,
        "Cluster authorization failed.",
        [],
    )


async def test_delete_records_checks_delete_before_existence() -> None:
    world = build_world(Authorization(authorizer_with((RT.TOPIC, TOPIC, Op.DELETE))))
    body = DeleteRecordsRequest(
        topics=[
            DeleteRecordsRequest.DeleteRecordsTopic(
                name=n, partitions=[DeleteRecordsRequest.DeleteRecordsPartition(partition_index=p, offset=1)]
            )
            for n, p in ((TOPIC, 0), (TOPIC, 9), ("gone", 0))
        ],
        timeout_ms=1000,
    )
    response = await call(world.admin.handle_delete_records, request(ApiKey.DELETE_RECORDS, 2, body))
    found = {
        (t.name, p.partition_index): (p.error_code, p.low_watermark)
        for t in response.topics
        for p in t.partitions
    }
    assert found == {
        (TOPIC, 0): (NONE, 1),
        (TOPIC, 9): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("gone", 0): (TAF, -1),
    }
    assert world.deleted_records == [{(TOPIC, 0): 1}]
