"""The transaction APIs' handlers (broker/txn_apis.py), FindCoordinator (broker/find_coordinator.py) and
the marker transport's request and response forms (broker/txn_marker_transport.py), in process over a
fake coordinator: what each request version turns into for the coordinator, and what the coordinator's
answer becomes on the wire of that version (every response here is encoded at its version)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from broker.config import KafkaConfig
from broker.find_coordinator import (
    GROUP_KEY_TYPE,
    TRANSACTION_KEY_TYPE,
    FindCoordinator,
    offsets_topic,
    transaction_topic,
)
from broker.metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache
from broker.txn_apis import TxnApis
from broker.txn_marker_transport import (
    BrokerTxnMarkerTransport,
    inter_broker_listener,
    marker_errors,
    write_txn_markers_request,
)
from coordinator.group_metadata_manager import partition_for
from coordinator.transaction_coordinator import TxnMarker as Marker
from network.handler_pool import Parked
from network.request_channel import Request
from protocol.api import ApiKey, api
from protocol.api_versions import ADVERTISED_VERSIONS
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
    Message,
    UpdateMetadataRequest,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from protocol.topic import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC

TopicPartition = tuple[str, int]


# -- fakes ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Init:
    error: int
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class Description:
    error: int
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    partitions: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True)
class Listing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass
class FakeCoordinator:
    """Records what it is asked and answers what the test says; futures stay open until the test
    completes them (``answer``), as the real one's wait for the transaction log."""

    calls: list[tuple[Any, ...]] = field(default_factory=list)
    pending: list[asyncio.Future[Any]] = field(default_factory=list)
    partition_errors: dict[TopicPartition, int] = field(default_factory=dict)
    verify_errors: dict[TopicPartition, int] = field(default_factory=dict)
    descriptions: dict[str, Description] = field(default_factory=dict)
    listings: list[Listing] = field(default_factory=list)

    def _future(self) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        return future

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, 50)

    def on_election(self, partition: int, coordinator_epoch: int) -> None:
        self.calls.append(("elected", partition, coordinator_epoch))

    def on_resignation(self, partition: int, coordinator_epoch: int | None) -> None:
        self.calls.append(("resigned", partition, coordinator_epoch))

    def handle_init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        expected_producer_id: int = -1,
        expected_epoch: int = -1,
    ) -> asyncio.Future[Any]:
        self.calls.append(
            ("init", transactional_id, transaction_timeout_ms, expected_producer_id, expected_epoch)
        )
        return self._future()

    def handle_add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> asyncio.Future[dict[TopicPartition, int]]:
        self.calls.append(("add", transactional_id, producer_id, producer_epoch, sorted(partitions)))
        return self._future()

    def handle_verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        self.calls.append(("verify", transactional_id, producer_id, producer_epoch, sorted(partitions)))
        return {tp: self.verify_errors.get(tp, ErrorCode.NONE) for tp in partitions}

    def handle_end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> asyncio.Future[int]:
        self.calls.append(("end", transactional_id, producer_id, producer_epoch, commit))
        return self._future()

    def handle_describe(self, transactional_id: str) -> Description:
        return self.descriptions.get(transactional_id, Description(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND))

    def handle_list(
        self, states: list[str], producer_ids: list[int], duration_ms: int = -1
    ) -> tuple[int, list[Listing]]:
        self.calls.append(("list", states, producer_ids, duration_ms))
        return ErrorCode.NONE, [
            t
            for t in self.listings
            if (not states or t.state in states) and (not producer_ids or t.producer_id in producer_ids)
        ]


class FakeProducerIds:
    def __init__(self) -> None:
        self.next = 4000
        self.failure: KafkaError | None = None

    async def generate_producer_id(self) -> int:
        if self.failure is not None:
            raise self.failure
        self.next += 1
        return self.next - 1


KNOWN = {("orders", 0), ("orders", 1), ("audit", 0)}


def txn_apis(coordinator: FakeCoordinator, ids: FakeProducerIds | None = None) -> TxnApis:
    return TxnApis(coordinator, ids or FakeProducerIds(), lambda t, p: (t, p) in KNOWN, 50)


def request(key: ApiKey, version: int, body: Message, listener: str = "PLAINTEXT") -> Request:
    connection = SimpleNamespace(listener=listener, peer="127.0.0.1:5555")
    definition = api(key)
    assert definition is not None
    return Request(connection, definition, version, 7, "test", body, 0, version)  # type: ignore[arg-type]


async def answer(handled: Message | Parked | None, key: ApiKey, version: int) -> Any:
    """The response a handler gave (waiting for a parked one), checked to encode and decode at
    ``version``."""
    if isinstance(handled, Parked):
        handled = await asyncio.wait_for(handled.response, 1)
    assert handled is not None
    definition = api(key)
    assert definition is not None
    encoded = handled.encode(version)
    return definition.response.decode(encoded, version)


def complete(coordinator: FakeCoordinator, value: Any) -> None:
    future = coordinator.pending.pop(0)
    future.set_result(value)


# -- version ranges ---------------------------------------------------------------------------------


def test_transaction_apis_are_advertised_at_kafka_3_9_ranges() -> None:
    expected = {
        ApiKey.INIT_PRODUCER_ID: (0, 5),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
        ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
        ApiKey.END_TXN: (0, 4),
        ApiKey.TXN_OFFSET_COMMIT: (0, 4),
        ApiKey.WRITE_TXN_MARKERS: (0, 1),
        ApiKey.DESCRIBE_PRODUCERS: (0, 0),
        ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
        ApiKey.LIST_TRANSACTIONS: (0, 1),
    }
    for key, (low, high) in expected.items():
        assert ADVERTISED_VERSIONS[key] == (low, high)
        definition = api(key)
        assert (
            definition is not None and low in definition.valid_versions and high in definition.valid_versions
        )


# -- InitProducerId -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(6))
async def test_init_producer_id_without_transactional_id_gets_a_fresh_id(version: int) -> None:
    coordinator = FakeCoordinator()
    apis = txn_apis(coordinator)
    body = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
    response = await answer(
        await apis.handle_init_producer_id(request(ApiKey.INIT_PRODUCER_ID, version, body)),
        ApiKey.INIT_PRODUCER_ID,
        version,
    )
    assert (response.error_code, response.producer_id, response.producer_epoch) == (ErrorCode.NONE, 4000, 0)
    assert coordinator.calls == []


async def test_init_producer_id_failure_of_the_id_manager_is_answered() -> None:
    ids = FakeProducerIds()
    ids.failure = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR)
    body = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
    response = await answer(
        await txn_apis(FakeCoordinator(), ids).handle_init_producer_id(
            request(ApiKey.INIT_PRODUCER_ID, 4, body)
        ),
        ApiKey.INIT_PRODUCER_ID,
        4,
    )
    assert (response.error_code, response.producer_id, response.producer_epoch) == (
        ErrorCode.UNKNOWN_SERVER_ERROR,
        -1,
        -1,
    )


async def test_init_producer_id_with_transactional_id_waits_for_the_coordinator() -> None:
    coordinator = FakeCoordinator()
    apis = txn_apis(coordinator)
    body = InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=60000, producer_id=17, producer_epoch=3
    )
    handled = await apis.handle_init_producer_id(request(ApiKey.INIT_PRODUCER_ID, 4, body))
    assert isinstance(handled, Parked) and not handled.response.done()
    assert coordinator.calls == [("init", "tx", 60000, 17, 3)]
    complete(coordinator, Init(ErrorCode.NONE, 17, 4))
    response = await answer(handled, ApiKey.INIT_PRODUCER_ID, 4)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (ErrorCode.NONE, 17, 4)


@pytest.mark.parametrize(
    ("version", "expected"), [(3, ErrorCode.INVALID_PRODUCER_EPOCH), (4, ErrorCode.PRODUCER_FENCED)]
)
async def test_init_producer_id_fenced_is_an_old_epoch_for_old_clients(version: int, expected: int) -> None:
    coordinator = FakeCoordinator()
    body = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000)
    handled = await txn_apis(coordinator).handle_init_producer_id(
        request(ApiKey.INIT_PRODUCER_ID, version, body)
    )
    complete(coordinator, Init(ErrorCode.PRODUCER_FENCED, 17, 4))
    response = await answer(handled, ApiKey.INIT_PRODUCER_ID, version)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (expected, -1, -1)


@pytest.mark.parametrize(
    ("transactional_id", "producer_id", "epoch"),
    [("", -1, -1), (None, 5, -1), (None, -1, 3), ("tx", 5, -1)],
)
async def test_init_producer_id_invalid_requests(
    transactional_id: str | None, producer_id: int, epoch: int
) -> None:
    coordinator = FakeCoordinator()
    body = InitProducerIdRequest(
        transactional_id=transactional_id,
        transaction_timeout_ms=60000,
        producer_id=producer_id,
        producer_epoch=epoch,
    )
    response = await answer(
        await txn_apis(coordinator).handle_init_producer_id(request(ApiKey.INIT_PRODUCER_ID, 4, body)),
        ApiKey.INIT_PRODUCER_ID,
        4,
    )
    assert (response.error_code, response.producer_id, response.producer_epoch) == (
        ErrorCode.INVALID_REQUEST,
        -1,
        -1,
    )
    assert coordinator.calls == []


# -- AddPartitionsToTxn ---------------------------------------------------------------------------


def client_add(partitions: dict[str, list[int]]) -> AddPartitionsToTxnRequest:
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=17,
        v3_and_below_producer_epoch=2,
        v3_and_below_topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
            for t, ps in partitions.items()
        ],
    )


def v3_errors(response: Any) -> dict[TopicPartition, int]:
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in response.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


@pytest.mark.parametrize("version", range(4))
async def test_add_partitions_of_a_client_go_to_the_coordinator(version: int) -> None:
    coordinator = FakeCoordinator()
    handled = await txn_apis(coordinator).handle_add_partitions_to_txn(
        request(ApiKey.ADD_PARTITIONS_TO_TXN, version, client_add({"orders": [0, 1], "audit": [0]}))
    )
    assert coordinator.calls == [("add", "tx", 17, 2, [("audit", 0), ("orders", 0), ("orders", 1)])]
    complete(coordinator, {("orders", 0): 0, ("orders", 1): 0, ("audit", 0): 0})
    response = await answer(handled, ApiKey.ADD_PARTITIONS_TO_TXN, version)
    assert v3_errors(response) == {("orders", 0): 0, ("orders", 1): 0, ("audit", 0): 0}


@pytest.mark.parametrize(
    ("version", "expected"), [(1, ErrorCode.INVALID_PRODUCER_EPOCH), (2, ErrorCode.PRODUCER_FENCED)]
)
async def test_add_partitions_fenced_is_an_old_epoch_for_old_clients(version: int, expected: int) -> None:
    coordinator = FakeCoordinator()
    handled = await txn_apis(coordinator).handle_add_partitions_to_txn(
        request(ApiKey.ADD_PARTITIONS_TO_TXN, version, client_add({"orders": [0]}))
    )
    complete(coordinator, {("orders", 0): ErrorCode.PRODUCER_FENCED})
    assert v3_errors(await answer(handled, ApiKey.ADD_PARTITIONS_TO_TXN, version)) == {
        ("orders", 0): expected
    }


async def test_add_partitions_with_an_unknown_partition_adds_none() -> None:
    coordinator = FakeCoordinator()
    handled = await txn_apis(coordinator).handle_add_partitions_to_txn(
        request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, client_add({"orders": [0, 7], "gone": [0]}))
    )
    assert coordinator.calls == []
    assert v3_errors(await answer(handled, ApiKey.ADD_PARTITIONS_TO_TXN, 3)) == {
        ("orders", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
        ("orders", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("gone", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }


def broker_transaction(
    transactional_id: str, partitions: dict[str, list[int]], verify_only: bool, producer_id: int = 17
) -> AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction:
    return AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=2,
        verify_only=verify_only,
        topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
            for t, ps in partitions.items()
        ],
    )


def by_transaction(response: Any) -> dict[str, dict[TopicPartition, int]]:
    return {
        r.transactional_id: {
            (t.name, p.partition_index): p.partition_error_code
            for t in r.topic_results
            for p in t.results_by_partition
        }
        for r in response.results_by_transaction
    }


@pytest.mark.parametrize("version", [4, 5])
async def test_batched_add_partitions_answers_each_transaction(version: int) -> None:
    coordinator = FakeCoordinator(verify_errors={("audit", 0): ErrorCode.INVALID_TXN_STATE})
    body = AddPartitionsToTxnRequest(
        transactions=[
            broker_transaction("verified", {"orders": [0]}, verify_only=True),
            broker_transaction("refused", {"audit": [0]}, verify_only=True, producer_id=18),
            broker_transaction("added", {"orders": [1]}, verify_only=False, producer_id=19),
            broker_transaction("unknown", {"orders": [0], "gone": [3]}, verify_only=True, producer_id=20),
        ]
    )
    handled = await txn_apis(coordinator).handle_add_partitions_to_txn(
        request(ApiKey.ADD_PARTITIONS_TO_TXN, version, body)
    )
    assert coordinator.calls == [
        ("verify", "verified", 17, 2, [("orders", 0)]),
        ("verify", "refused", 18, 2, [("audit", 0)]),
        ("add", "added", 19, 2, [("orders", 1)]),
    ]
    assert isinstance(handled, Parked) and not handled.response.done()  # waits for the one added
    complete(coordinator, {("orders", 1): ErrorCode.PRODUCER_FENCED})
    response = await answer(handled, ApiKey.ADD_PARTITIONS_TO_TXN, version)
    assert response.error_code == ErrorCode.NONE
    assert by_transaction(response) == {
        "verified": {("orders", 0): ErrorCode.NONE},
        "refused": {("audit", 0): ErrorCode.INVALID_TXN_STATE},
        "added": {("orders", 1): ErrorCode.PRODUCER_FENCED},
        "unknown": {
            ("orders", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
            ("gone", 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        },
    }


# -- AddOffsetsToTxn, EndTxn ------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(5))
async def test_add_offsets_adds_the_groups_offsets_partition(version: int) -> None:
    coordinator = FakeCoordinator()
    body = AddOffsetsToTxnRequest(transactional_id="tx", producer_id=17, producer_epoch=2, group_id="copier")
    handled = await txn_apis(coordinator).handle_add_offsets_to_txn(
        request(ApiKey.ADD_OFFSETS_TO_TXN, version, body)
    )
    offsets_partition = (GROUP_METADATA_TOPIC, partition_for("copier", 50))
    assert coordinator.calls == [("add", "tx", 17, 2, [offsets_partition])]
    complete(coordinator, {offsets_partition: ErrorCode.PRODUCER_FENCED})
    response = await answer(handled, ApiKey.ADD_OFFSETS_TO_TXN, version)
    assert response.error_code == (
        ErrorCode.INVALID_PRODUCER_EPOCH if version < 2 else ErrorCode.PRODUCER_FENCED
    )


@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("commit", [True, False])
async def test_end_txn_waits_for_the_coordinator(version: int, commit: bool) -> None:
    coordinator = FakeCoordinator()
    body = EndTxnRequest(transactional_id="tx", producer_id=17, producer_epoch=2, committed=commit)
    handled = await txn_apis(coordinator).handle_end_txn(request(ApiKey.END_TXN, version, body))
    assert coordinator.calls == [("end", "tx", 17, 2, commit)]
    assert isinstance(handled, Parked)
    complete(coordinator, ErrorCode.NONE)
    assert (await answer(handled, ApiKey.END_TXN, version)).error_code == ErrorCode.NONE


@pytest.mark.parametrize(
    ("version", "error", "expected"),
    [
        (1, ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH),
        (2, ErrorCode.PRODUCER_FENCED, ErrorCode.PRODUCER_FENCED),
        (0, ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.CONCURRENT_TRANSACTIONS),
        (4, ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_TXN_STATE),
    ],
)
async def test_end_txn_errors_per_version(version: int, error: int, expected: int) -> None:
    coordinator = FakeCoordinator()
    body = EndTxnRequest(transactional_id="tx", producer_id=17, producer_epoch=2, committed=True)
    handled = await txn_apis(coordinator).handle_end_txn(request(ApiKey.END_TXN, version, body))
    complete(coordinator, error)
    assert (await answer(handled, ApiKey.END_TXN, version)).error_code == expected


# -- DescribeTransactions, ListTransactions ---------------------------------------------------------


async def test_describe_transactions_groups_partitions_by_topic() -> None:
    coordinator = FakeCoordinator(
        descriptions={
            "tx": Description(
                ErrorCode.NONE,
                "Ongoing",
                17,
                2,
                60000,
                1_700_000_000_000,
                frozenset({("orders", 1), ("orders", 0), ("audit", 0)}),
            )
        }
    )
    body = DescribeTransactionsRequest(transactional_ids=["tx", "nobody"])
    response = await answer(
        await txn_apis(coordinator).handle_describe_transactions(
            request(ApiKey.DESCRIBE_TRANSACTIONS, 0, body)
        ),
        ApiKey.DESCRIBE_TRANSACTIONS,
        0,
    )
    found, missing = response.transaction_states
    assert (found.error_code, found.transactional_id, found.transaction_state) == (0, "tx", "Ongoing")
    assert (found.producer_id, found.producer_epoch, found.transaction_timeout_ms) == (17, 2, 60000)
    assert found.transaction_start_time_ms == 1_700_000_000_000
    assert [(t.topic, t.partitions) for t in found.topics] == [("audit", [0]), ("orders", [0, 1])]
    assert (missing.error_code, missing.transactional_id, missing.topics) == (
        ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
        "nobody",
        [],
    )


@pytest.mark.parametrize("version", [0, 1])
async def test_list_transactions_filters_and_names_unknown_states(version: int) -> None:
    coordinator = FakeCoordinator(
        listings=[Listing("a", 1, "Ongoing"), Listing("b", 2, "Empty"), Listing("c", 3, "Ongoing")]
    )
    body = ListTransactionsRequest(
        state_filters=["Ongoing", "Sleeping"], producer_id_filters=[3, 1], duration_filter=5000
    )
    response = await answer(
        await txn_apis(coordinator).handle_list_transactions(
            request(ApiKey.LIST_TRANSACTIONS, version, body)
        ),
        ApiKey.LIST_TRANSACTIONS,
        version,
    )
    assert coordinator.calls == [("list", ["Ongoing", "Sleeping"], [3, 1], 5000 if version >= 1 else -1)]
    assert response.error_code == ErrorCode.NONE
    assert response.unknown_state_filters == ["Sleeping"]
    assert [
        (t.transactional_id, t.producer_id, t.transaction_state) for t in response.transaction_states
    ] == [
        ("a", 1, "Ongoing"),
        ("c", 3, "Ongoing"),
    ]


# -- the role listener ------------------------------------------------------------------------------


def test_the_coordinator_follows_transaction_state_leadership_only() -> None:
    coordinator = FakeCoordinator()
    apis = txn_apis(coordinator)
    apis.on_role_change(TRANSACTION_STATE_TOPIC, 3, True, 5)
    apis.on_role_change(TRANSACTION_STATE_TOPIC, 3, False, 6)
    apis.on_role_change(TRANSACTION_STATE_TOPIC, 4, False, -1)  # stopped hosting it, epoch unknown
    apis.on_role_change(GROUP_METADATA_TOPIC, 3, True, 5)
    apis.on_role_change("orders", 0, True, 1)
    assert coordinator.calls == [("elected", 3, 5), ("resigned", 3, 6), ("resigned", 4, None)]


# -- FindCoordinator ----------------------------------------------------------------------------------


def broker_config(overrides: dict[str, object] | None = None) -> KafkaConfig:
    return KafkaConfig({"broker.id": 1, "zookeeper.connect": "zk:2181", **(overrides or {})})


def metadata(topics: dict[str, dict[int, int]], alive: tuple[int, ...] = (1, 2, 3)) -> MetadataCache:
    """Brokers ``alive`` on PLAINTEXT (host bN, port 9000+N); ``topics``: name -> {partition: leader}."""
    cache = MetadataCache("cluster")
    states = [
        UpdateMetadataRequest.UpdateMetadataPartitionState(
            partition_index=p, leader=leader, leader_epoch=1, isr=[leader], replicas=[leader], zk_version=1
        )
        for leaders in topics.values()
        for p, leader in leaders.items()
    ]
    names = [t for t, leaders in topics.items() for _ in leaders]
    for state, name in zip(states, names, strict=True):
        state.topic_name = name
    body = UpdateMetadataRequest(
        controller_id=9,
        controller_epoch=1,
        ungrouped_partition_states=states,
        live_brokers=[
            UpdateMetadataRequest.UpdateMetadataBroker(
                id=b,
                endpoints=[
                    UpdateMetadataRequest.UpdateMetadataEndpoint(
                        port=9000 + b, host=f"b{b}", listener="PLAINTEXT", security_protocol=0
                    )
                ],
                rack=None,
            )
            for b in alive
        ],
    )
    cache.update(body, 4)
    return cache


@dataclass
class CreatedTopics:
    created: list[tuple[str, int, int, dict[str, str]]] = field(default_factory=list)
    failure: Exception | None = None

    async def __call__(self, name: str, partitions: int, replication: int, configs: dict[str, str]) -> None:
        self.created.append((name, partitions, replication, configs))
        if self.failure is not None:
            raise self.failure


def finder(cache: MetadataCache, create: CreatedTopics, config: KafkaConfig | None = None) -> FindCoordinator:
    config = config or broker_config()
    return FindCoordinator(
        cache,
        create,
        {
            GROUP_KEY_TYPE: offsets_topic(config, lambda key: partition_for(key, 50)),
            TRANSACTION_KEY_TYPE: transaction_topic(config, lambda key: partition_for(key, 50)),
        },
    )


async def find(f: FindCoordinator, version: int, key_type: int, *keys: str) -> Any:
    if version < 4:
        body = FindCoordinatorRequest(key=keys[0], key_type=key_type)
    else:
        body = FindCoordinatorRequest(key_type=key_type, coordinator_keys=list(keys))
    return await answer(
        await f.handle_find_coordinator(request(ApiKey.FIND_COORDINATOR, version, body)),
        ApiKey.FIND_COORDINATOR,
        version,
    )


async def test_find_coordinator_creates_transaction_state_with_kafkas_settings() -> None:
    create = CreatedTopics()
    f = finder(metadata({}), create, broker_config({"transaction.state.log.replication.factor": "2"}))
    response = await find(f, 3, TRANSACTION_KEY_TYPE, "tx")
    assert (response.error_code, response.node_id, response.host, response.port) == (
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        -1,
        "",
        -1,
    )
    await asyncio.sleep(0)  # the creation task runs
    await f.shutdown()
    assert create.created == [
        (
            TRANSACTION_STATE_TOPIC,
            50,
            2,
            {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "unclean.leader.election.enable": "false",
                "min.insync.replicas": "2",
                "segment.bytes": "104857600",
            },
        )
    ]


async def test_find_coordinator_creates_each_internal_topic_once_at_a_time() -> None:
    create = CreatedTopics(failure=KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR))
    f = finder(metadata({}), create)
    for _ in range(3):
        await find(f, 4, GROUP_KEY_TYPE, "g1", "g2")
    await asyncio.sleep(0)
    await find(f, 1, TRANSACTION_KEY_TYPE, "tx")
    await asyncio.sleep(0)
    # A failed creation (too few brokers) is tried again by the next request.
    await find(f, 1, GROUP_KEY_TYPE, "g1")
    await asyncio.sleep(0)
    await f.shutdown()
    assert [c[:3] for c in create.created] == [
        (GROUP_METADATA_TOPIC, 50, 3),
        (TRANSACTION_STATE_TOPIC, 50, 3),
        (GROUP_METADATA_TOPIC, 50, 3),
    ]


@pytest.mark.parametrize("version", range(5))
async def test_find_coordinator_names_the_leader_of_the_keys_partition(version: int) -> None:
    tx_partition, group_partition = partition_for("tx", 50), partition_for("grp", 50)
    cache = metadata(
        {
            TRANSACTION_STATE_TOPIC: {p: 1 + p % 3 for p in range(50)},
            GROUP_METADATA_TOPIC: {p: 1 + (p + 1) % 3 for p in range(50)},
        }
    )
    create = CreatedTopics()
    f = finder(cache, create)
    leader = 1 + tx_partition % 3
    if version == 0:  # no key type before v1: a group
        response = await find(f, 0, GROUP_KEY_TYPE, "grp")
        group_leader = 1 + (group_partition + 1) % 3
        assert (response.error_code, response.node_id, response.host, response.port) == (
            0,
            group_leader,
            f"b{group_leader}",
            9000 + group_leader,
        )
        return
    response = await find(f, version, TRANSACTION_KEY_TYPE, "tx")
    if version >= 4:
        [response] = response.coordinators
        assert response.key == "tx"
    assert (response.error_code, response.node_id, response.host, response.port) == (
        0,
        leader,
        f"b{leader}",
        9000 + leader,
    )
    assert create.created == []


async def test_find_coordinator_without_a_live_leader_or_with_a_bad_key_type() -> None:
    tx_partition = partition_for("tx", 50)
    cache = metadata({TRANSACTION_STATE_TOPIC: {p: 2 for p in range(50)}}, alive=(1, 3))
    f = finder(cache, CreatedTopics())
    [dead] = (await find(f, 4, TRANSACTION_KEY_TYPE, "tx")).coordinators
    assert (dead.error_code, dead.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
    assert cache.partition(TRANSACTION_STATE_TOPIC, tx_partition) is not None
    bad = await find(f, 3, 7, "x")
    assert (bad.error_code, bad.node_id) == (ErrorCode.INVALID_REQUEST, -1)


# -- the marker transport ------------------------------------------------------------------------------


def test_markers_become_one_write_txn_markers_request_grouped_by_topic() -> None:
    body = write_txn_markers_request(
        [
            Marker(17, 2, 5, True, (("orders", 0), ("audit", 0), ("orders", 1))),
            Marker(18, 0, 5, False, (("audit", 1),)),
        ]
    )
    decoded = WriteTxnMarkersRequest.decode(body.encode(1), 1)
    assert [
        (
            m.producer_id,
            m.producer_epoch,
            m.coordinator_epoch,
            m.transaction_result,
            [(t.name, t.partition_indexes) for t in m.topics],
        )
        for m in decoded.markers
    ] == [
        (17, 2, 5, True, [("orders", [0, 1]), ("audit", [0])]),
        (18, 0, 5, False, [("audit", [1])]),
    ]


def test_write_txn_markers_response_becomes_errors_by_producer_and_partition() -> None:
    response = WriteTxnMarkersResponse(
        markers=[
            WriteTxnMarkersResponse.WritableTxnMarkerResult(
                producer_id=17,
                topics=[
                    WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(
                        name="orders",
                        partitions=[
                            WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                                partition_index=0, error_code=0
                            ),
                            WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                                partition_index=1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
                            ),
                        ],
                    )
                ],
            )
        ]
    )
    assert marker_errors(WriteTxnMarkersResponse.decode(response.encode(1), 1)) == {
        (17, "orders", 0): ErrorCode.NONE,
        (17, "orders", 1): ErrorCode.NOT_LEADER_OR_FOLLOWER,
    }


async def test_transport_knows_live_leaders_and_refuses_unreachable_brokers() -> None:
    cache = metadata({"orders": {0: 2, 1: 4}}, alive=(1, 2))
    transport = BrokerTxnMarkerTransport(1, cache, "PLAINTEXT", 30000)
    assert transport.leader_of("orders", 0) == 2
    assert transport.leader_of("orders", 1) is None  # broker 4 is not alive
    assert transport.leader_of("orders", 9) is None
    assert transport.topic_exists("orders") and not transport.topic_exists("gone")
    with pytest.raises(ConnectionError):
        await transport.write_markers(4, [Marker(17, 2, 5, True, (("orders", 1),))])
    await transport.shutdown()


async def test_transport_writes_markers_over_one_connection_per_broker() -> None:
    """A tiny Kafka-protocol server answering WriteTxnMarkers v1: the transport sends there, reuses the
    connection, and a dead server is reported as a connection error."""
    from protocol.frame import decode_request, encode_response

    seen: list[Any] = []
    connections = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        definition = api(ApiKey.WRITE_TXN_MARKERS)
        assert definition is not None
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                frame = await reader.readexactly(size)
                header, body = decode_request(frame, definition, 1)
                seen.append(body)
                response = WriteTxnMarkersResponse(
                    markers=[
                        WriteTxnMarkersResponse.WritableTxnMarkerResult(
                            producer_id=m.producer_id,
                            topics=[
                                WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(
                                    name=t.name,
                                    partitions=[
                                        WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                                            partition_index=p, error_code=0
                                        )
                                        for p in t.partition_indexes
                                    ],
                                )
                                for t in m.topics
                            ],
                        )
                        for m in body.markers
                    ]
                )
                writer.writelines(encode_response(definition, 1, header.correlation_id, response))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    cache = MetadataCache("cluster")
    cache.add_broker(BrokerInfo(2, None, {"PLAINTEXT": BrokerEndpoint("127.0.0.1", port)}))
    transport = BrokerTxnMarkerTransport(1, cache, "PLAINTEXT", 5000)
    try:
        first = await transport.write_markers(2, [Marker(17, 2, 5, True, (("orders", 0),))])
        second = await transport.write_markers(2, [Marker(18, 1, 5, False, (("orders", 1), ("audit", 0)))])
        assert first == {(17, "orders", 0): 0}
        assert second == {(18, "orders", 1): 0, (18, "audit", 0): 0}
        assert connections == 1 and [m.producer_id for b in seen for m in b.markers] == [17, 18]
    finally:
        server.close()
        await server.wait_closed()
        await transport.shutdown()


def test_inter_broker_listener_is_named_or_found_by_protocol() -> None:
    two = {
        "listeners": "BROKER://:9093,CLIENT://:9092",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,BROKER:PLAINTEXT",
    }
    assert inter_broker_listener(broker_config(two)) == "BROKER"  # the first speaking PLAINTEXT
    assert inter_broker_listener(broker_config({**two, "inter.broker.listener.name": "client"})) == "CLIENT"


def test_transaction_config_takes_kafkas_settings() -> None:
    from broker.server import transaction_config

    config = transaction_config(
        broker_config(
            {
                "transaction.state.log.num.partitions": 7,
                "transactional.id.expiration.ms": 1000,
                "transaction.max.timeout.ms": 2000,
                "transaction.abort.timed.out.transaction.cleanup.interval.ms": 300,
                "transaction.remove.expired.transaction.cleanup.interval.ms": 400,
                "transaction.state.log.load.buffer.size": 5000,
                "request.timeout.ms": 6000,
            }
        )
    )
    assert (
        config.num_partitions,
        config.transactional_id_expiration_ms,
        config.transaction_max_timeout_ms,
    ) == (
        7,
        1000,
        2000,
    )
    assert config.abort_timed_out_transaction_cleanup_interval_ms == 300
    assert config.remove_expired_transactional_id_cleanup_interval_ms == 400
    assert (config.load_buffer_size, config.required_acks, config.request_timeout_ms) == (5000, -1, 6000)
