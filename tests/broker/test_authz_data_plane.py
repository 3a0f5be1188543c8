"""Authorization in the data plane, the cluster and the transaction APIs (broker/kafka_apis.py,
produce_apis.py, fetch_apis.py, list_offsets.py, txn_apis.py, write_txn_markers.py,
describe_producers.py, find_coordinator.py), in process over real logs and the real ACL authorizer
(server_common/acl_authorizer.py): Kafka 3.9's KafkaApis checks, with its error codes.

The table: every API, by the operation and resource it needs, by the ways an ACL can grant or refuse it
(none, LITERAL, the ``*`` wildcard, PREFIXED, ALL, DENY beating ALLOW, a DENY for ``User:*``, another
principal, another host, a super user, ``allow.everyone.if.no.acl.found`` with and without an ACL on
the resource). Then what the table cannot say: what Metadata hides and creates, the alternatives Kafka
accepts (CLUSTER_ACTION for OffsetForLeaderEpoch, ALTER for WriteTxnMarkers, WRITE on any topic for an
idempotent producer), filtered listings, the authorized-operations bitfields, and that without an
authorizer nothing is asked."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from broker.authorization import ALLOW_ALL, Authorization
from broker.describe_producers import DescribeProducers
from broker.find_coordinator import (
    GROUP_KEY_TYPE,
    TRANSACTION_KEY_TYPE,
    FindCoordinator,
    InternalTopic,
)
from broker.kafka_apis import KafkaApis
from broker.metadata_cache import BrokerInfo, MetadataCache
from broker.replica_manager import ReplicaManager
from broker.txn_apis import TxnApis
from broker.write_txn_markers import WriteTxnMarkers
from network.handler_pool import Parked
from network.request_channel import Request
from protocol import record_batch as rb
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode
from protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribeClusterRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FetchRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ListTransactionsRequest,
    Message,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
    WriteTxnMarkersRequest,
)
from protocol.topic import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
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
from server_common.principal import KafkaPrincipal
from storage.log_manager import LogManager
from tests.broker.controller_requests import leader_and_isr, stop_replica, update_metadata
from tests.support.handler_requests import FakeConnection, answer, handler_request

TOPIC = "orders"  # led by broker 1, replicas 1 and 2, in-sync: 1
OTHER = "audit"  # led by broker 1 alone
TXN_ID = "tx-orders"
GROUP = "billing"
ALICE = KafkaPrincipal("User", "alice")
HOST = "10.0.0.7"

Op = AclOperation
RT = ResourceType
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


# -- the broker under test --------------------------------------------------------------------------


@dataclass
class Description:
    error: int
    state: str = "Ongoing"
    producer_id: int = 7
    producer_epoch: int = 0
    transaction_timeout_ms: int = 60000
    transaction_start_time_ms: int = 1
    partitions: frozenset[tuple[str, int]] = frozenset({(TOPIC, 0), (OTHER, 0)})


@dataclass
class Listing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass
class Init:
    error: int
    producer_id: int
    producer_epoch: int


@dataclass
class Coordinator:
    """A transaction coordinator that answers at once, and says what it was asked."""

    calls: list[tuple[Any, ...]] = field(default_factory=list)

    @staticmethod
    def _done(value: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(value)
        return future

    def on_election(self, partition: int, coordinator_epoch: int) -> None:
        pass

    def on_resignation(self, partition: int, coordinator_epoch: int | None) -> None:
        pass

    def handle_init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int = -1, epoch: int = -1
    ) -> asyncio.Future[Any]:
        self.calls.append(("init", transactional_id))
        return self._done(Init(ErrorCode.NONE, 7, 0))

    def handle_add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: list[tuple[str, int]]
    ) -> asyncio.Future[Any]:
        self.calls.append(("add", transactional_id, sorted(partitions)))
        return self._done(dict.fromkeys(partitions, ErrorCode.NONE))

    def handle_verify_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        self.calls.append(("verify", transactional_id, sorted(partitions)))
        return dict.fromkeys(partitions, ErrorCode.NONE)

    def handle_end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> Any:
        self.calls.append(("end", transactional_id))
        return self._done(ErrorCode.NONE)

    def handle_describe(self, transactional_id: str) -> Description:
        return Description(ErrorCode.NONE)

    def handle_list(self, states: list[str], producer_ids: list[int], duration_ms: int = -1) -> Any:
        return ErrorCode.NONE, [Listing(TXN_ID, 7, "Ongoing"), Listing("tx-audit", 8, "Ongoing")]


class ProducerIds:
    async def generate_producer_id(self) -> int:
        return 4000


class AcceptingFence:
    """The controller fence of a broker whose controller is the active one."""

    async def check(self, *args: Any) -> None:
        return None


@dataclass
class Broker:
    logs: LogManager
    authorization: Authorization
    cache: MetadataCache = field(init=False)
    replicas: ReplicaManager = field(init=False)
    coordinator: Coordinator = field(default_factory=Coordinator)
    created: list[str] = field(default_factory=list)
    handlers: dict[int, Callable[[Request], Awaitable[Message | Parked | None]]] = field(init=False)

    async def start(self) -> Broker:
        cache = self.cache = MetadataCache("cluster")
        cache.add_broker(BrokerInfo(1, None))
        replicas = self.replicas = ReplicaManager(1, self.logs, cache)
        replicas.controller_fence = AcceptingFence()  # type: ignore[assignment]
        orders = leader_and_isr(TOPIC, {0: [1, 2]})
        for state in orders.topic_states[0].partition_states:
            state.isr = [1]
        await replicas.become_leader_or_follower(orders, 6)
        await replicas.become_leader_or_follower(leader_and_isr(OTHER, {0: [1]}), 6)
        brokers = {1: ("h1", 9092), 2: ("h2", 9093)}
        cache.update(update_metadata(brokers, TOPIC, {0: [1, 2]}), 6)
        cache.update(update_metadata(brokers, OTHER, {0: [1]}), 6)
        authorization = self.authorization

        async def auto_create(name: str) -> None:
            self.created.append(name)

        async def create_internal(name: str, *args: Any) -> None:
            self.created.append(name)

        finder = FindCoordinator(
            cache,
            create_internal,
            {
                GROUP_KEY_TYPE: InternalTopic(GROUP_METADATA_TOPIC, 1, 1, {}, lambda _: 0),
                TRANSACTION_KEY_TYPE: InternalTopic(TRANSACTION_STATE_TOPIC, 1, 1, {}, lambda _: 0),
            },
            authorization=authorization,
        )
        txn = TxnApis(
            self.coordinator,  # type: ignore[arg-type]
            ProducerIds(),  # type: ignore[arg-type]
            lambda t, p: cache.partition(t, p) is not None,
            50,
            authorization=authorization,
        )
        markers = WriteTxnMarkers(replicas, None, 1000, authorization=authorization)
        producers = DescribeProducers(cache, replicas, authorization=authorization)
        apis = KafkaApis(
            1,
            cache,
            replicas,
            extra_handlers={
                **finder.handlers(),
                **txn.handlers(),
                ApiKey.WRITE_TXN_MARKERS: markers.handle_write_txn_markers,
                ApiKey.DESCRIBE_PRODUCERS: producers.handle_describe_producers,
            },
            auto_create_topic=auto_create,
            authorization=authorization,
        )
        self.handlers = apis._handlers
        return self

    async def call(
        self, key: ApiKey, version: int, body: Message, connection: FakeConnection | None = None
    ) -> Any:
        """The response to ``body`` (waiting for a parked one), checked to encode and decode at
        ``version``; None when there is none (an acks=0 Produce)."""
        request = handler_request(key, version, body, connection or FakeConnection(ALICE, HOST))
        handled = await answer(await self.handlers[key](request), 5)
        if handled is None:
            return None
        if key == ApiKey.FETCH:
            return handled  # its records are file regions, sent by sendfile
        definition = api(key)
        assert definition is not None
        return definition.response.decode(handled.encode(version), version)


def authorizer(
    acls: list[tuple[ResourcePattern, AccessControlEntry]] = (),  # type: ignore[assignment]
    *,
    super_users: str | None = None,
    everyone: bool = False,
) -> AclAuthorizer:
    found = AclAuthorizer(super_users=super_users, allow_everyone_if_no_acl_found=everyone)
    for pattern, entry in acls:
        found.add_acls(pattern, entry)
    return found


def acl(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    *,
    pattern: PatternType = LITERAL,
    principal: str = str(ALICE),
    host: str = "*",
) -> tuple[ResourcePattern, AccessControlEntry]:
    return ResourcePattern(resource_type, name, pattern), AccessControlEntry(
        principal, host, operation, permission
    )


async def broker_with(logs: LogManager, found: AclAuthorizer | None) -> Broker:
    return await Broker(logs, ALLOW_ALL if found is None else Authorization(found)).start()


# -- requests ---------------------------------------------------------------------------------------


def records(*, transactional: bool = False) -> memoryview:
    batch = rb.encode_batch(
        [rb.Record(0, 1_700_000_000_000, b"k", b"v")],
        base_offset=0,
        producer_id=7 if transactional else -1,
        producer_epoch=0 if transactional else -1,
        base_sequence=0 if transactional else -1,
        is_transactional=transactional,
    )
    return memoryview(bytearray(batch))


def produce(
    topics: list[str], *, transactional_id: str | None = None, transactional: bool = False, acks: int = 1
) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=t,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=0, records=records(transactional=transactional))
                ],
            )
            for t in topics
        ],
    )


def fetch(topics: list[str], *, replica_id: int = -1) -> FetchRequest:
    return FetchRequest(
        replica_id=replica_id,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic=t,
                partitions=[
                    FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 16)
                ],
            )
            for t in topics
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def metadata(
    topics: list[str] | None, *, auto_create: bool = False, operations: bool = False
) -> MetadataRequest:
    return MetadataRequest(
        topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=auto_create,
        include_cluster_authorized_operations=operations,
        include_topic_authorized_operations=operations,
    )


def offset_for_leader_epoch(topics: list[str], *, replica_id: int = -1) -> OffsetForLeaderEpochRequest:
    return OffsetForLeaderEpochRequest(
        replica_id=replica_id,
        topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                topic=t,
                partitions=[
                    OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                        partition=0, current_leader_epoch=-1, leader_epoch=0
                    )
                ],
            )
            for t in topics
        ],
    )


def add_partitions_v3(topics: list[str]) -> AddPartitionsToTxnRequest:
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TXN_ID,
        v3_and_below_producer_id=7,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=[0]) for t in topics
        ],
    )


def add_partitions_v4() -> AddPartitionsToTxnRequest:
    return AddPartitionsToTxnRequest(
        transactions=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                transactional_id=TXN_ID,
                producer_id=7,
                producer_epoch=0,
                verify_only=True,
                topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])],
            )
        ]
    )


def write_txn_markers() -> WriteTxnMarkersRequest:
    return WriteTxnMarkersRequest(
        markers=[
            WriteTxnMarkersRequest.WritableTxnMarker(
                producer_id=7,
                producer_epoch=0,
                transaction_result=False,
                topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=OTHER, partition_indexes=[0])],
                coordinator_epoch=0,
            )
        ]
    )


def list_offsets(topics: list[str], version: int = 7) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=t,
                partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=-1, max_num_offsets=1
                    )
                ],
            )
            for t in topics
        ],
    )


def find_coordinator(key_type: int, key: str, version: int = 4) -> FindCoordinatorRequest:
    if version < 4:
        return FindCoordinatorRequest(key=key, key_type=key_type)
    return FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])


# -- the probes: one request, the error that answers the check --------------------------------------


def _only_partition(response: Any, topics: str = "responses", partitions: str = "partitions") -> Any:
    [topic] = getattr(response, topics)
    [partition] = getattr(topic, partitions)
    return partition


async def _produce(b: Broker) -> int:
    response = await b.call(ApiKey.PRODUCE, 9, produce([TOPIC]))
    return _only_partition(response, partitions="partition_responses").error_code


async def _produce_transactional(b: Broker) -> int:
    body = produce([TOPIC], transactional_id=TXN_ID, transactional=True)
    return _only_partition(await b.call(ApiKey.PRODUCE, 9, body), partitions="partition_responses").error_code


async def _fetch(b: Broker) -> int:
    return _only_partition(await b.call(ApiKey.FETCH, 12, fetch([TOPIC]))).error_code


async def _fetch_follower(b: Broker) -> int:
    return _only_partition(await b.call(ApiKey.FETCH, 12, fetch([TOPIC], replica_id=2))).error_code


async def _list_offsets(b: Broker) -> int:
    return _only_partition(await b.call(ApiKey.LIST_OFFSETS, 7, list_offsets([TOPIC])), "topics").error_code


async def _metadata(b: Broker) -> int:
    [topic] = (await b.call(ApiKey.METADATA, 12, metadata([TOPIC]))).topics
    return topic.error_code


async def _offset_for_leader_epoch(b: Broker) -> int:
    response = await b.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, offset_for_leader_epoch([TOPIC]))
    return _only_partition(response, "topics").error_code


async def _leader_and_isr(b: Broker) -> int:
    return (await b.call(ApiKey.LEADER_AND_ISR, 6, leader_and_isr(OTHER, {0: [1]}))).error_code


async def _update_metadata(b: Broker) -> int:
    body = update_metadata({1: ("h1", 9092)}, OTHER, {0: [1]})
    return (await b.call(ApiKey.UPDATE_METADATA, 7, body)).error_code


async def _stop_replica(b: Broker) -> int:
    return (await b.call(ApiKey.STOP_REPLICA, 3, stop_replica("gone", [0], delete=False))).error_code


async def _init_producer_id(b: Broker) -> int:
    body = InitProducerIdRequest(transactional_id=TXN_ID, transaction_timeout_ms=60000)
    return (await b.call(ApiKey.INIT_PRODUCER_ID, 4, body)).error_code


async def _add_partitions_txn_id(b: Broker) -> int:
    response = await b.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions_v3([TOPIC]))
    return _only_partition(
        response, "results_by_topic_v3_and_below", "results_by_partition"
    ).partition_error_code


_add_partitions_topic = _add_partitions_txn_id


async def _add_partitions_v4(b: Broker) -> int:
    return (await b.call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, add_partitions_v4())).error_code


async def _add_offsets(b: Broker) -> int:
    body = AddOffsetsToTxnRequest(transactional_id=TXN_ID, producer_id=7, producer_epoch=0, group_id=GROUP)
    return (await b.call(ApiKey.ADD_OFFSETS_TO_TXN, 3, body)).error_code


async def _end_txn(b: Broker) -> int:
    body = EndTxnRequest(transactional_id=TXN_ID, producer_id=7, producer_epoch=0, committed=True)
    return (await b.call(ApiKey.END_TXN, 3, body)).error_code


async def _describe_transactions(b: Broker) -> int:
    body = DescribeTransactionsRequest(transactional_ids=[TXN_ID])
    [state] = (await b.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, body)).transaction_states
    return state.error_code


async def _list_transactions(b: Broker) -> int:
    body = ListTransactionsRequest(state_filters=[], producer_id_filters=[])
    listed = {
        t.transactional_id for t in (await b.call(ApiKey.LIST_TRANSACTIONS, 0, body)).transaction_states
    }
    # Kafka leaves the ids out rather than answer an error: "refused" is its absence.
    return ErrorCode.NONE if TXN_ID in listed else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


async def _write_txn_markers(b: Broker) -> int:
    response = await b.call(ApiKey.WRITE_TXN_MARKERS, 1, write_txn_markers())
    [marker] = response.markers
    return _only_partition(marker, "topics").error_code


async def _describe_producers(b: Broker) -> int:
    body = DescribeProducersRequest(
        topics=[DescribeProducersRequest.TopicRequest(name=TOPIC, partition_indexes=[0])]
    )
    return _only_partition(await b.call(ApiKey.DESCRIBE_PRODUCERS, 0, body), "topics").error_code


async def _find_group_coordinator(b: Broker) -> int:
    [found] = (await b.call(ApiKey.FIND_COORDINATOR, 4, find_coordinator(GROUP_KEY_TYPE, GROUP))).coordinators
    return found.error_code


async def _find_txn_coordinator(b: Broker) -> int:
    return (
        await b.call(ApiKey.FIND_COORDINATOR, 3, find_coordinator(TRANSACTION_KEY_TYPE, TXN_ID, 3))
    ).error_code


@dataclass(frozen=True)
class Probe:
    """An API's check: it needs ``operation`` on (``resource_type``, ``name``); refused, the probe sees
    ``refused``, allowed ``allowed``. ``granted`` ACLs are there in every case (the API's other
    checks, passed)."""

    name: str
    run: Callable[[Broker], Awaitable[int]]
    resource_type: ResourceType
    resource: str
    operation: AclOperation
    refused: int
    allowed: int = ErrorCode.NONE
    granted: tuple[tuple[ResourcePattern, AccessControlEntry], ...] = ()


TAF, GAF, CAF, TIDAF = (
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
)
PROBES = [
    Probe("Produce", _produce, RT.TOPIC, TOPIC, Op.WRITE, TAF),
    Probe(
        "Produce(transactional)",
        _produce_transactional,
        RT.TRANSACTIONAL_ID,
        TXN_ID,
        Op.WRITE,
        TIDAF,
        # Past the checks, the log refuses a transaction its coordinator never verified.
        allowed=ErrorCode.INVALID_TXN_STATE,
        granted=(acl(RT.TOPIC, TOPIC, Op.WRITE),),
    ),
    Probe("Fetch", _fetch, RT.TOPIC, TOPIC, Op.READ, TAF),
    Probe("Fetch(follower)", _fetch_follower, RT.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION, TAF),
    Probe("ListOffsets", _list_offsets, RT.TOPIC, TOPIC, Op.DESCRIBE, TAF),
    Probe("Metadata", _metadata, RT.TOPIC, TOPIC, Op.DESCRIBE, TAF),
    Probe(
        "OffsetForLeaderEpoch",
        _offset_for_leader_epoch,
        RT.TOPIC,
        TOPIC,
        Op.DESCRIBE,
        TAF,
        # The replicas' alternative (CLUSTER_ACTION) is tested on its own.
        granted=(acl(RT.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION, DENY),),
    ),
    Probe("LeaderAndIsr", _leader_and_isr, RT.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION, CAF),
    Probe("UpdateMetadata", _update_metadata, RT.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION, CAF),
    Probe("StopReplica", _stop_replica, RT.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION, CAF),
    Probe("InitProducerId", _init_producer_id, RT.TRANSACTIONAL_ID, TXN_ID, Op.WRITE, TIDAF),
    Probe(
        "AddPartitionsToTxn(transactional id)",
        _add_partitions_txn_id,
        RT.TRANSACTIONAL_ID,
        TXN_ID,
        Op.WRITE,
        TIDAF,
        granted=(acl(RT.TOPIC, TOPIC, Op.WRITE),),
    ),
    Probe(
        "AddPartitionsToTxn(topic)",
        _add_partitions_topic,
        RT.TOPIC,
        TOPIC,
        Op.WRITE,
        TAF,
        granted=(acl(RT.TRANSACTIONAL_ID, TXN_ID, Op.WRITE),),
    ),
    Probe(
        "AddPartitionsToTxn(v4, broker)", _add_partitions_v4, RT.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION, CAF
    ),
    Probe(
        "AddOffsetsToTxn(transactional id)",
        _add_offsets,
        RT.TRANSACTIONAL_ID,
        TXN_ID,
        Op.WRITE,
        TIDAF,
        granted=(acl(RT.GROUP, GROUP, Op.READ),),
    ),
    Probe(
        "AddOffsetsToTxn(group)",
        _add_offsets,
        RT.GROUP,
        GROUP,
        Op.READ,
        GAF,
        granted=(acl(RT.TRANSACTIONAL_ID, TXN_ID, Op.WRITE),),
    ),
    Probe("EndTxn", _end_txn, RT.TRANSACTIONAL_ID, TXN_ID, Op.WRITE, TIDAF),
    Probe("DescribeTransactions", _describe_transactions, RT.TRANSACTIONAL_ID, TXN_ID, Op.DESCRIBE, TIDAF),
    Probe("ListTransactions", _list_transactions, RT.TRANSACTIONAL_ID, TXN_ID, Op.DESCRIBE, TIDAF),
    Probe("WriteTxnMarkers", _write_txn_markers, RT.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION, CAF),
    Probe("DescribeProducers", _describe_producers, RT.TOPIC, TOPIC, Op.READ, TAF),
    Probe(
        "FindCoordinator(group)",
        _find_group_coordinator,
        RT.GROUP,
        GROUP,
        Op.DESCRIBE,
        GAF,
        allowed=ErrorCode.COORDINATOR_NOT_AVAILABLE,  # __consumer_offsets does not exist yet
    ),
    Probe(
        "FindCoordinator(transaction)",
        _find_txn_coordinator,
        RT.TRANSACTIONAL_ID,
        TXN_ID,
        Op.DESCRIBE,
        TIDAF,
        allowed=ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ),
]


@dataclass(frozen=True)
class Grant:
    """A way the ACLs can answer a probe's check, and whether it allows it."""

    name: str
    allows: bool
    acls: Callable[[Probe], list[tuple[ResourcePattern, AccessControlEntry]]] = lambda p: []
    super_users: str | None = None
    everyone: bool = False


def _on(probe: Probe, **kw: Any) -> tuple[ResourcePattern, AccessControlEntry]:
    operation = kw.pop("operation", probe.operation)
    return acl(probe.resource_type, kw.pop("name", probe.resource), operation, **kw)


GRANTS = [
    Grant("no ACL", False),
    Grant("LITERAL allow", True, lambda p: [_on(p)]),
    Grant("wildcard allow", True, lambda p: [_on(p, name=WILDCARD)]),
    Grant("PREFIXED allow", True, lambda p: [_on(p, name=p.resource[:3], pattern=PREFIXED)]),
    Grant("ALL allow", True, lambda p: [_on(p, operation=Op.ALL)]),
    Grant(
        "DENY beats ALLOW",
        False,
        lambda p: [_on(p), _on(p, name=p.resource[:3], pattern=PREFIXED, permission=DENY)],
    ),
    Grant("DENY for User:*", False, lambda p: [_on(p), _on(p, principal="User:*", permission=DENY)]),
    Grant("ALLOW for another principal", False, lambda p: [_on(p, principal="User:bob")]),
    Grant("ALLOW from another host", False, lambda p: [_on(p, host="10.9.9.9")]),
    Grant("ALLOW from this host", True, lambda p: [_on(p, host=HOST)]),
    Grant("ALLOW for User:*", True, lambda p: [_on(p, principal="User:*")]),
    Grant("super user", True, super_users=f"User:bob;{ALICE}"),
    Grant("super user despite DENY", True, lambda p: [_on(p, permission=DENY)], super_users=str(ALICE)),
    Grant("everyone if no ACL", True, everyone=True),
    Grant("everyone if no ACL, but one", False, lambda p: [_on(p, principal="User:bob")], everyone=True),
]


@pytest.mark.parametrize("grant", GRANTS, ids=lambda g: g.name)
@pytest.mark.parametrize("probe", PROBES, ids=lambda p: p.name)
async def test_each_api_checks_kafkas_operation_on_its_resource(
    logs: LogManager, probe: Probe, grant: Grant
) -> None:
    found = authorizer(
        [*probe.granted, *grant.acls(probe)], super_users=grant.super_users, everyone=grant.everyone
    )
    b = await broker_with(logs, found)
    assert await probe.run(b) == (probe.allowed if grant.allows else probe.refused)


@pytest.mark.parametrize("probe", PROBES, ids=lambda p: p.name)
async def test_without_an_authorizer_every_api_is_allowed(logs: LogManager, probe: Probe) -> None:
    b = await broker_with(logs, None)
    assert await probe.run(b) == probe.allowed


@pytest.mark.parametrize("probe", [p for p in PROBES if p.operation == Op.DESCRIBE], ids=lambda p: p.name)
@pytest.mark.parametrize("implying", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
async def test_describe_is_implied_by_read_write_delete_and_alter(
    logs: LogManager, probe: Probe, implying: AclOperation
) -> None:
    b = await broker_with(logs, authorizer([*probe.granted, _on(probe, operation=implying)]))
    assert await probe.run(b) == probe.allowed


# -- Metadata ---------------------------------------------------------------------------------------


async def test_metadata_of_all_topics_leaves_out_those_not_describable(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.TOPIC, OTHER, Op.DESCRIBE)]))
    response = await b.call(ApiKey.METADATA, 12, metadata(None))
    assert [(t.name, t.error_code) for t in response.topics] == [(OTHER, ErrorCode.NONE)]


async def test_metadata_v0_empty_list_is_all_topics_and_filtered_too(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.TOPIC, TOPIC, Op.WRITE)]))
    response = await b.call(ApiKey.METADATA, 0, MetadataRequest(topics=[]))
    assert [(t.name, t.error_code) for t in response.topics] == [(TOPIC, ErrorCode.NONE)]


async def test_metadata_does_not_disclose_whether_an_undescribable_topic_exists(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.TOPIC, "visible", Op.DESCRIBE)]))
    response = await b.call(ApiKey.METADATA, 12, metadata([TOPIC, "no-such-topic", "visible"]))
    answers = {t.name: (t.error_code, t.topic_id.int, t.is_internal, t.partitions) for t in response.topics}
    assert answers == {
        TOPIC: (TAF, 0, False, []),
        "no-such-topic": (TAF, 0, False, []),
        "visible": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0, False, []),
    }


async def test_metadata_by_topic_id_answers_the_id_but_not_the_name(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer())
    topic_id = b.cache.topic_id(TOPIC)
    body = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=None, topic_id=topic_id)],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    [topic] = (await b.call(ApiKey.METADATA, 12, body)).topics
    assert (topic.error_code, topic.name, topic.topic_id, topic.partitions) == (TAF, None, topic_id, [])


async def test_metadata_auto_creates_with_create_on_the_cluster_or_the_topic(logs: LogManager) -> None:
    everyone_describes = acl(RT.TOPIC, WILDCARD, Op.DESCRIBE)
    b = await broker_with(
        logs,
        authorizer([everyone_describes, acl(RT.TOPIC, "new-", Op.CREATE, pattern=PREFIXED)]),
    )
    response = await b.call(ApiKey.METADATA, 12, metadata(["new-one", "other-one"], auto_create=True))
    assert {t.name: t.error_code for t in response.topics} == {
        "new-one": ErrorCode.LEADER_NOT_AVAILABLE,
        "other-one": TAF,
    }
    assert b.created == ["new-one"]
    b = await broker_with(logs, authorizer([everyone_describes, acl(RT.CLUSTER, CLUSTER_NAME, Op.CREATE)]))
    response = await b.call(ApiKey.METADATA, 12, metadata(["other-one"], auto_create=True))
    assert [t.error_code for t in response.topics] == [ErrorCode.LEADER_NOT_AVAILABLE]
    assert b.created == ["other-one"]


async def test_metadata_without_auto_creation_needs_no_create(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.TOPIC, WILDCARD, Op.DESCRIBE)]))
    response = await b.call(ApiKey.METADATA, 12, metadata(["new-one"], auto_create=False))
    assert [t.error_code for t in response.topics] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert b.created == []


async def test_metadata_and_describe_cluster_report_the_principals_operations(logs: LogManager) -> None:
    found = authorizer(
        [
            acl(RT.TOPIC, TOPIC, Op.READ),
            acl(RT.TOPIC, TOPIC, Op.ALTER_CONFIGS),
            acl(RT.CLUSTER, CLUSTER_NAME, Op.DESCRIBE),
            acl(RT.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE),
        ]
    )
    b = await broker_with(logs, found)
    response = await b.call(ApiKey.METADATA, 10, metadata([TOPIC], operations=True))
    bits = lambda *ops: sum(1 << op for op in ops)  # noqa: E731
    assert response.topics[0].topic_authorized_operations == bits(
        Op.READ, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS
    )
    assert response.cluster_authorized_operations == bits(Op.DESCRIBE, Op.IDEMPOTENT_WRITE)
    described = await b.call(
        ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(include_cluster_authorized_operations=True)
    )
    assert described.cluster_authorized_operations == bits(Op.DESCRIBE, Op.IDEMPOTENT_WRITE)


async def test_cluster_operations_are_zero_without_describe_on_the_cluster(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE)]))
    described = await b.call(
        ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(include_cluster_authorized_operations=True)
    )
    assert (described.error_code, described.cluster_authorized_operations) == (ErrorCode.NONE, 0)
    assert [x.broker_id for x in described.brokers] == [1, 2]  # DescribeCluster itself needs nothing


# -- Produce ----------------------------------------------------------------------------------------


async def test_produce_refuses_only_the_topics_without_write(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.TOPIC, OTHER, Op.WRITE)]))
    response = await b.call(ApiKey.PRODUCE, 9, produce([TOPIC, OTHER, "no-such-topic"]))
    errors = {t.name: t.partition_responses[0].error_code for t in response.responses}
    assert errors == {TOPIC: TAF, OTHER: ErrorCode.NONE, "no-such-topic": TAF}


async def test_produce_transactional_without_transactional_id_write_refuses_every_partition(
    logs: LogManager,
) -> None:
    b = await broker_with(logs, authorizer([acl(RT.TOPIC, WILDCARD, Op.WRITE)]))
    body = produce([TOPIC, OTHER], transactional_id=TXN_ID, transactional=True)
    response = await b.call(ApiKey.PRODUCE, 9, body)
    answers = {
        (t.name, p.error_code, p.error_message) for t in response.responses for p in t.partition_responses
    }
    assert answers == {
        (TOPIC, TIDAF, "Transactional Id authorization failed."),
        (OTHER, TIDAF, "Transactional Id authorization failed."),
    }
    assert b.replicas.get_partition(OTHER, 0).log.log_end_offset == 0  # type: ignore[union-attr]


async def test_produce_acks_0_refused_for_transactional_id_closes_the_connection(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.TOPIC, WILDCARD, Op.WRITE)]))
    connection = FakeConnection(ALICE, HOST)
    body = produce([TOPIC], transactional_id=TXN_ID, transactional=True, acks=0)
    assert await b.call(ApiKey.PRODUCE, 9, body, connection) is None
    assert connection.closed


async def test_produce_transactional_records_without_transactional_id_are_refused(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer(super_users=str(ALICE)))
    body = produce([TOPIC], transactional_id=None, transactional=True)
    response = await b.call(ApiKey.PRODUCE, 9, body)
    assert response.responses[0].partition_responses[0].error_code == TIDAF


async def test_idempotent_produce_needs_only_write_on_the_topic(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.TOPIC, TOPIC, Op.WRITE)]))
    body = produce([TOPIC])
    body.topic_data[0].partition_data[0].records = memoryview(
        bytearray(
            rb.encode_batch(
                [rb.Record(0, 1_700_000_000_000, b"k", b"v")],
                base_offset=0,
                producer_id=4000,
                producer_epoch=0,
                base_sequence=0,
            )
        )
    )
    response = await b.call(ApiKey.PRODUCE, 9, body)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE


# -- Fetch, OffsetForLeaderEpoch --------------------------------------------------------------------


async def test_fetch_refuses_only_the_topics_without_read(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.TOPIC, OTHER, Op.READ)]))
    response = await b.call(ApiKey.FETCH, 12, fetch([TOPIC, OTHER, "no-such-topic"]))
    errors = {t.topic: t.partitions[0].error_code for t in response.responses}
    assert errors == {TOPIC: TAF, OTHER: ErrorCode.NONE, "no-such-topic": TAF}


async def test_fetch_with_read_on_a_missing_topic_is_unknown(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.TOPIC, WILDCARD, Op.READ)]))
    response = await b.call(ApiKey.FETCH, 12, fetch(["no-such-topic"]))
    assert response.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_follower_fetch_needs_cluster_action_not_topic_read(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.TOPIC, WILDCARD, Op.READ)]))
    response = await b.call(ApiKey.FETCH, 12, fetch([TOPIC], replica_id=2))
    assert response.responses[0].partitions[0].error_code == TAF


async def test_offset_for_leader_epoch_from_a_replica_needs_cluster_action_only(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION)]))
    response = await b.call(
        ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, offset_for_leader_epoch([TOPIC, OTHER], replica_id=2)
    )
    assert [t.partitions[0].error_code for t in response.topics] == [ErrorCode.NONE, ErrorCode.NONE]


async def test_offset_for_leader_epoch_refuses_per_topic(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.TOPIC, OTHER, Op.DESCRIBE)]))
    response = await b.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, offset_for_leader_epoch([TOPIC, OTHER]))
    answers = [
        (t.topic, p.error_code, p.leader_epoch, p.end_offset) for t in response.topics for p in t.partitions
    ]
    assert answers == [(TOPIC, TAF, -1, -1), (OTHER, ErrorCode.NONE, 0, 0)]


# -- ListOffsets ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 7])
async def test_list_offsets_refuses_every_partition_of_an_undescribable_topic(
    logs: LogManager, version: int
) -> None:
    b = await broker_with(logs, authorizer([acl(RT.TOPIC, OTHER, Op.DESCRIBE)]))
    response = await b.call(ApiKey.LIST_OFFSETS, version, list_offsets([TOPIC, OTHER], version))
    assert {t.name: t.partitions[0].error_code for t in response.topics} == {
        TOPIC: TAF,
        OTHER: ErrorCode.NONE,
    }


# -- the controller's requests ----------------------------------------------------------------------


async def test_leader_and_isr_refused_changes_nothing_and_names_every_partition(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.CLUSTER, CLUSTER_NAME, Op.ALTER)]))
    response = await b.call(ApiKey.LEADER_AND_ISR, 6, leader_and_isr("fresh", {0: [1], 1: [1]}))
    assert response.error_code == CAF
    assert [(p.partition_index, p.error_code) for p in response.topics[0].partition_errors] == [
        (0, CAF),
        (1, CAF),
    ]
    assert b.replicas.get_partition("fresh", 0) is None


async def test_update_metadata_refused_leaves_the_cache_alone(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer())
    body = update_metadata({1: ("h1", 9092)}, "fresh", {0: [1]})
    assert (await b.call(ApiKey.UPDATE_METADATA, 7, body)).error_code == CAF
    assert not b.cache.contains("fresh")


# -- transactions -----------------------------------------------------------------------------------


async def test_init_producer_id_idempotent_needs_idempotent_write_or_write_on_some_topic(
    logs: LogManager,
) -> None:
    body = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
    for acls, expected in [
        ([], CAF),
        ([acl(RT.TOPIC, GROUP, Op.READ)], CAF),
        ([acl(RT.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE)], ErrorCode.NONE),
        ([acl(RT.TOPIC, "any-", Op.WRITE, pattern=PREFIXED)], ErrorCode.NONE),
        ([acl(RT.TOPIC, OTHER, Op.WRITE)], ErrorCode.NONE),
    ]:
        b = await broker_with(logs, authorizer(acls))
        response = await b.call(ApiKey.INIT_PRODUCER_ID, 4, body)
        expected_id = 4000 if expected == ErrorCode.NONE else -1
        assert (response.error_code, response.producer_id) == (expected, expected_id), acls


async def test_init_producer_id_is_authorized_before_it_is_validated(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer())
    body = InitProducerIdRequest(
        transactional_id=TXN_ID, transaction_timeout_ms=60000, producer_id=5, producer_epoch=-1
    )
    assert (await b.call(ApiKey.INIT_PRODUCER_ID, 4, body)).error_code == TIDAF
    assert b.coordinator.calls == []


async def test_add_partitions_refused_topics_fail_the_whole_transaction(logs: LogManager) -> None:
    b = await broker_with(
        logs, authorizer([acl(RT.TRANSACTIONAL_ID, TXN_ID, Op.WRITE), acl(RT.TOPIC, OTHER, Op.WRITE)])
    )
    response = await b.call(
        ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions_v3([TOPIC, OTHER, "no-such-topic"])
    )
    errors = {
        t.name: t.results_by_partition[0].partition_error_code for t in response.results_by_topic_v3_and_below
    }
    assert errors == {TOPIC: TAF, OTHER: ErrorCode.OPERATION_NOT_ATTEMPTED, "no-such-topic": TAF}
    assert b.coordinator.calls == []


@pytest.mark.parametrize("with_authorizer", [False, True])
async def test_add_partitions_never_adds_an_internal_topic(logs: LogManager, with_authorizer: bool) -> None:
    """Kafka leaves internal topics out of what a client may add (it uses AddOffsetsToTxn for
    ``__consumer_offsets``), authorizer or not."""
    b = await broker_with(logs, authorizer(super_users=str(ALICE)) if with_authorizer else None)
    response = await b.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions_v3([GROUP_METADATA_TOPIC, OTHER]))
    errors = {
        t.name: t.results_by_partition[0].partition_error_code for t in response.results_by_topic_v3_and_below
    }
    assert errors == {GROUP_METADATA_TOPIC: TAF, OTHER: ErrorCode.OPERATION_NOT_ATTEMPTED}


async def test_describe_transactions_lists_only_describable_topics(logs: LogManager) -> None:
    b = await broker_with(
        logs, authorizer([acl(RT.TRANSACTIONAL_ID, TXN_ID, Op.DESCRIBE), acl(RT.TOPIC, OTHER, Op.DESCRIBE)])
    )
    body = DescribeTransactionsRequest(transactional_ids=[TXN_ID, "tx-audit"])
    states = (await b.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, body)).transaction_states
    assert [(s.transactional_id, s.error_code, [t.topic for t in s.topics]) for s in states] == [
        (TXN_ID, ErrorCode.NONE, [OTHER]),
        ("tx-audit", TIDAF, []),
    ]


async def test_list_transactions_lists_only_describable_ids(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.TRANSACTIONAL_ID, "tx-a", Op.DESCRIBE, pattern=PREFIXED)]))
    body = ListTransactionsRequest(state_filters=[], producer_id_filters=[])
    listed = (await b.call(ApiKey.LIST_TRANSACTIONS, 0, body)).transaction_states
    assert [t.transactional_id for t in listed] == ["tx-audit"]


async def test_write_txn_markers_accepts_alter_on_the_cluster_instead(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.CLUSTER, CLUSTER_NAME, Op.ALTER)]))
    assert await _write_txn_markers(b) == ErrorCode.NONE


async def test_write_txn_markers_refused_writes_nothing(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.CLUSTER, CLUSTER_NAME, Op.DESCRIBE)]))
    assert await _write_txn_markers(b) == CAF
    assert b.replicas.get_partition(OTHER, 0).log.log_end_offset == 0  # type: ignore[union-attr]


async def test_find_coordinator_v0_to_3_refusal_carries_kafkas_message(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer())
    response = await b.call(ApiKey.FIND_COORDINATOR, 2, find_coordinator(GROUP_KEY_TYPE, GROUP, 2))
    assert (response.error_code, response.error_message, response.node_id, response.host, response.port) == (
        GAF,
        "Group authorization failed.",
        -1,
        "",
        -1,
    )


async def test_find_coordinator_batch_refuses_each_key_alone(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer([acl(RT.GROUP, "bil", Op.DESCRIBE, pattern=PREFIXED)]))
    body = FindCoordinatorRequest(key_type=GROUP_KEY_TYPE, coordinator_keys=[GROUP, "payroll"])
    coordinators = (await b.call(ApiKey.FIND_COORDINATOR, 4, body)).coordinators
    assert [(c.key, c.error_code) for c in coordinators] == [
        (GROUP, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        ("payroll", GAF),
    ]


async def test_find_coordinator_share_key_needs_cluster_action(logs: LogManager) -> None:
    b = await broker_with(logs, authorizer())
    body = FindCoordinatorRequest(key_type=2, coordinator_keys=["g1", "g2"])
    coordinators = (await b.call(ApiKey.FIND_COORDINATOR, 6, body)).coordinators
    assert [(c.key, c.error_code, c.error_message) for c in coordinators] == [
        ("g1", CAF, "Cluster authorization failed."),
        ("g2", CAF, "Cluster authorization failed."),
    ]


# -- the authorizer is asked nothing it need not be -------------------------------------------------


class Recording:
    """An authorizer allowing everything, recording what it is asked."""

    def __init__(self) -> None:
        self.actions: list[Action] = []

    def authorize(self, principal: KafkaPrincipal, host: str, actions: list[Action]) -> list[bool]:
        assert (principal, host) == (ALICE, HOST)
        self.actions.extend(actions)
        return [True] * len(actions)

    def authorize_by_resource_type(self, *args: Any) -> bool:
        return True


async def test_produce_and_fetch_ask_once_per_topic_not_per_partition(logs: LogManager) -> None:
    recording = Recording()
    b = await Broker(logs, Authorization(recording)).start()
    body = produce([TOPIC, OTHER])
    body.topic_data[0].partition_data.append(ProduceRequest.PartitionProduceData(index=1, records=records()))
    await b.call(ApiKey.PRODUCE, 9, body)
    assert [(a.operation, a.resource_type, a.name) for a in recording.actions] == [
        (Op.WRITE, RT.TOPIC, TOPIC),
        (Op.WRITE, RT.TOPIC, OTHER),
    ]
    recording.actions.clear()
    request = fetch([TOPIC])
    request.topics[0].partitions.append(
        FetchRequest.FetchPartition(partition=1, fetch_offset=0, partition_max_bytes=1)
    )
    await b.call(ApiKey.FETCH, 12, request)
    assert [(a.operation, a.name) for a in recording.actions] == [(Op.READ, TOPIC)]


async def test_metadata_of_all_topics_logs_no_denial(logs: LogManager) -> None:
    recording = Recording()
    b = await Broker(logs, Authorization(recording)).start()
    await b.call(ApiKey.METADATA, 12, metadata(None))
    assert {(a.operation, a.log_if_denied) for a in recording.actions} == {(Op.DESCRIBE, False)}
    recording.actions.clear()
    await b.call(ApiKey.METADATA, 12, metadata([TOPIC]))
    assert {(a.operation, a.log_if_denied) for a in recording.actions} == {(Op.DESCRIBE, True)}


def test_without_an_authorizer_the_request_is_never_read() -> None:
    """ALLOW_ALL never looks at the request: old tests' fake connections have no principal."""
    assert ALLOW_ALL.authorize(object(), Op.WRITE, RT.TOPIC, TOPIC)  # type: ignore[arg-type]
