"""KIP-890 part 1 in the produce path, in process over real logs with a fake transaction coordinator: a
transactional batch reaches a log only once the coordinator confirms its partition is in the producer's
ongoing transaction; refusals are Kafka's; a marker ending the transaction during the verification voids
it; a connection's later produces wait behind one being verified; other produces are untouched."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from broker.add_partitions_to_txn_manager import VERIFY_VERSION, AddPartitionsToTxnManager
from broker.metadata_cache import BrokerInfo, MetadataCache
from broker.produce_apis import ProduceApis
from broker.replica_manager import ReplicaManager
from coordinator.group_metadata_manager import partition_for
from network.handler_pool import Parked
from network.request_channel import Request
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    Message,
    ProduceRequest,
    ProduceResponse,
)
from protocol.record_batch import Record, encode_batch, encode_control_batch
from protocol.topic import TRANSACTION_STATE_TOPIC
from storage.config import LogConfig
from storage.log import Log
from storage.log_manager import LogManager
from storage.producer_state import AppendOrigin
from tests.broker.controller_requests import leader_and_isr, update_metadata
from tests.support.handler_requests import FakeConnection, answer, handler_request

TOPIC = "payments"
TXN_ID = "checkout-1"
PID, EPOCH = 9000, 3
COORDINATOR = 2


class FakeCoordinator:
    """Broker 2's transaction coordinator as the verification sees it: records each request and answers
    every partition with ``codes`` (default NONE), after ``gate`` opens if one is set."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, AddPartitionsToTxnRequest]] = []
        self.codes: dict[tuple[str, int], int] = {}
        self.top_level = ErrorCode.NONE
        self.gate: asyncio.Event | None = None
        self.unreachable = False

    def client(self, host: str, port: int, client_id: str, timeout: float) -> FakeCoordinator:
        assert (host, port) == ("h2", 9092)
        return self

    async def send(self, definition: Any, version: int, body: AddPartitionsToTxnRequest) -> Any:
        self.requests.append((version, body))
        if self.gate is not None:
            await self.gate.wait()
        if self.unreachable:
            raise ConnectionError("connection refused")
        return AddPartitionsToTxnResponse(
            error_code=self.top_level,
            results_by_transaction=[
                AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                    transactional_id=txn.transactional_id,
                    topic_results=[
                        AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(
                            name=t.name,
                            results_by_partition=[
                                AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(
                                    partition_index=p,
                                    partition_error_code=self.codes.get((t.name, p), ErrorCode.NONE),
                                )
                                for p in t.partitions
                            ],
                        )
                        for t in txn.topics
                    ],
                )
                for txn in body.transactions
            ],
        )

    async def close(self) -> None:
        pass


async def setup(
    logs: LogManager, coordinator: FakeCoordinator | None, with_coordinator_partition: bool = True
) -> tuple[ProduceApis, ReplicaManager]:
    """Broker 1 leads TOPIC 0 and 1; broker 2 leads the transactional id's __transaction_state
    partition (unless told otherwise); ``coordinator`` None: verification disabled."""
    cache = MetadataCache("cluster")
    cache.add_broker(BrokerInfo(1, None))
    manager = ReplicaManager(1, logs, cache)
    await manager.become_leader_or_follower(leader_and_isr(TOPIC, {0: [1], 1: [1]}), 6)
    brokers = {1: ("h1", 9092), 2: ("h2", 9092)}
    cache.update(update_metadata(brokers, TOPIC, {0: [1], 1: [1]}), 6)
    if with_coordinator_partition:
        cache.update(
            update_metadata(brokers, TRANSACTION_STATE_TOPIC, {partition_for(TXN_ID, 50): [COORDINATOR]}), 6
        )
    if coordinator is not None:
        manager.add_partitions_to_txn = AddPartitionsToTxnManager(
            1, cache, "PLAINTEXT", lambda txn_id: partition_for(txn_id, 50), 5000, coordinator.client
        )
    return ProduceApis(cache, manager), manager


def txn_batch(seq: int = 0, pid: int = PID, epoch: int = EPOCH, transactional: bool = True) -> bytes:
    return encode_batch(
        [Record(0, int(time.time() * 1000), None, b"pay")],
        base_offset=0,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
    )


def produce(
    connection: FakeConnection,
    partitions: dict[int, bytes],
    transactional_id: str | None = TXN_ID,
    acks: int = 1,
    version: int = 9,
) -> Request:
    body = ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=TOPIC,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=i, records=memoryview(bytearray(r)))
                    for i, r in partitions.items()
                ],
            )
        ],
    )
    return handler_request(ApiKey.PRODUCE, version, body, connection)


async def answered(response: Message | Parked | None) -> dict[int, tuple[int, int]]:
    """{partition: (error, base offset)} of a Produce response, waited for if parked."""
    response = await answer(response)
    assert isinstance(response, ProduceResponse)
    return {p.index: (p.error_code, p.base_offset) for t in response.responses for p in t.partition_responses}


def log_of(manager: ReplicaManager, partition: int = 0) -> Log:
    found = manager.get_partition(TOPIC, partition)
    assert found is not None and found.log is not None
    return found.log


async def test_a_verified_transactional_batch_is_appended_and_the_next_needs_no_verification(
    logs: LogManager,
) -> None:
    coordinator = FakeCoordinator()
    apis, manager = await setup(logs, coordinator)
    connection = FakeConnection()
    assert await answered(await apis.handle_produce(produce(connection, {0: txn_batch(0)}))) == {
        0: (ErrorCode.NONE, 0)
    }
    [(version, request)] = coordinator.requests
    assert version == VERIFY_VERSION
    [txn] = request.transactions
    assert (txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.verify_only) == (
        TXN_ID,
        PID,
        EPOCH,
        True,
    )
    assert [(t.name, t.partitions) for t in txn.topics] == [(TOPIC, [0])]
    assert log_of(manager).first_unstable_offset == 0
    # The transaction is ongoing here now: the next batch is appended at once.
    response = await apis.handle_produce(produce(connection, {0: txn_batch(1)}))
    assert not isinstance(response, Parked)
    assert await answered(response) == {0: (ErrorCode.NONE, 1)}
    assert len(coordinator.requests) == 1


@pytest.mark.parametrize(
    ("coordinator_says", "producer_gets"),
    [
        (ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_TXN_STATE),
        (ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
        (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH),
        (ErrorCode.TRANSACTION_ABORTABLE, ErrorCode.INVALID_TXN_STATE),
        (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_ENOUGH_REPLICAS),
    ],
)
async def test_an_unverified_partition_is_refused_with_kafkas_error(
    logs: LogManager, coordinator_says: int, producer_gets: int
) -> None:
    coordinator = FakeCoordinator()
    coordinator.codes[(TOPIC, 0)] = coordinator_says
    apis, manager = await setup(logs, coordinator)
    result = await answered(
        await apis.handle_produce(produce(FakeConnection(), {0: txn_batch(), 1: txn_batch()}))
    )
    assert result == {0: (producer_gets, -1), 1: (ErrorCode.NONE, 0)}
    assert log_of(manager).log_end_offset == 0
    assert log_of(manager).last_stable_offset == 0 and log_of(manager).first_unstable_offset is None


async def test_no_coordinator_or_an_unreachable_one_refuses_with_a_retriable_error(logs: LogManager) -> None:
    coordinator = FakeCoordinator()
    apis, manager = await setup(logs, coordinator, with_coordinator_partition=False)
    response = await apis.handle_produce(produce(FakeConnection(), {0: txn_batch()}))
    assert await answered(response) == {0: (ErrorCode.NOT_ENOUGH_REPLICAS, -1)}
    assert response is not None and not isinstance(response, Parked)
    assert "COORDINATOR_NOT_AVAILABLE" in (response.responses[0].partition_responses[0].error_message or "")
    assert not coordinator.requests

    coordinator = FakeCoordinator()
    coordinator.unreachable = True
    apis, manager = await setup(logs, coordinator)
    assert await answered(await apis.handle_produce(produce(FakeConnection(), {0: txn_batch()}))) == {
        0: (ErrorCode.NOT_ENOUGH_REPLICAS, -1)
    }
    assert log_of(manager).log_end_offset == 0


async def test_transactional_batches_without_a_transactional_id_refuse_the_whole_request(
    logs: LogManager,
) -> None:
    coordinator = FakeCoordinator()
    apis, manager = await setup(logs, coordinator)
    request = produce(
        FakeConnection(), {0: txn_batch(), 1: txn_batch(transactional=False)}, transactional_id=None
    )
    refused = await answered(await apis.handle_produce(request))
    assert refused == {
        0: (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1),
        1: (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1),
    }
    assert log_of(manager, 0).log_end_offset == 0 and log_of(manager, 1).log_end_offset == 0
    assert not coordinator.requests
    connection = FakeConnection()
    assert (
        await apis.handle_produce(produce(connection, {0: txn_batch()}, transactional_id=None, acks=0))
        is None
    )
    assert connection.closed  # acks=0: closing the connection is the answer


async def test_transactional_batches_of_two_producers_are_refused(logs: LogManager) -> None:
    apis, _ = await setup(logs, FakeCoordinator())
    request = produce(FakeConnection(), {0: txn_batch(pid=PID), 1: txn_batch(pid=PID + 1)})
    assert await answered(await apis.handle_produce(request)) == {
        0: (ErrorCode.INVALID_PRODUCER_ID_MAPPING, -1),
        1: (ErrorCode.INVALID_PRODUCER_ID_MAPPING, -1),
    }


async def test_a_marker_written_during_verification_fails_the_append(logs: LogManager) -> None:
    coordinator = FakeCoordinator()
    coordinator.gate = asyncio.Event()
    apis, manager = await setup(logs, coordinator)
    response = await apis.handle_produce(produce(FakeConnection(), {0: txn_batch()}))
    assert isinstance(response, Parked)
    await asyncio.sleep(0)
    # The coordinator aborts the transaction (its timeout, say) and its marker reaches the partition.
    abort = encode_control_batch(
        base_offset=0, producer_id=PID, producer_epoch=EPOCH, commit=False, coordinator_epoch=0, timestamp=0
    )
    partition = manager.get_partition(TOPIC, 0)
    assert partition is not None
    partition.append_records_to_leader(memoryview(bytearray(abort)), -1, AppendOrigin.COORDINATOR)
    coordinator.gate.set()  # ... and then answers the stale verification: verified
    assert await answered(response) == {0: (ErrorCode.INVALID_TXN_STATE, -1)}
    assert log_of(manager).log_end_offset == 1 and log_of(manager).first_unstable_offset is None


async def test_a_connections_later_produce_waits_behind_one_being_verified(logs: LogManager) -> None:
    coordinator = FakeCoordinator()
    coordinator.gate = asyncio.Event()
    apis, manager = await setup(logs, coordinator)
    connection = FakeConnection()
    first = await apis.handle_produce(produce(connection, {0: txn_batch(0)}))
    second = await apis.handle_produce(produce(connection, {0: txn_batch(1)}))
    other = await apis.handle_produce(
        produce(FakeConnection(), {1: txn_batch(0, pid=77, transactional=False)})
    )
    assert isinstance(first, Parked) and isinstance(second, Parked)
    assert await answered(other) == {1: (ErrorCode.NONE, 0)}  # another connection is not held up
    assert log_of(manager).log_end_offset == 0
    coordinator.gate.set()
    assert await answered(first) == {0: (ErrorCode.NONE, 0)}
    assert await answered(second) == {0: (ErrorCode.NONE, 1)}
    assert len(coordinator.requests) == 1  # the second found the transaction ongoing
    assert not apis._deferred_appends


async def test_without_verification_transactional_batches_are_appended_at_once(tmp_path: Any) -> None:
    logs = LogManager([str(tmp_path / "logs")], LogConfig(), transaction_verification_enabled=False)
    try:
        apis, manager = await setup(logs, None)
        response = await apis.handle_produce(produce(FakeConnection(), {0: txn_batch()}))
        assert await answered(response) == {0: (ErrorCode.NONE, 0)}
        assert log_of(manager).first_unstable_offset == 0
    finally:
        logs.shutdown()


async def test_plain_produces_never_ask_the_coordinator(logs: LogManager) -> None:
    coordinator = FakeCoordinator()
    apis, _ = await setup(logs, coordinator)
    idempotent = txn_batch(0, transactional=False)
    response = await apis.handle_produce(produce(FakeConnection(), {0: idempotent}, transactional_id=None))
    assert not isinstance(response, Parked)
    assert await answered(response) == {0: (ErrorCode.NONE, 0)}
    assert not coordinator.requests and not apis._deferred_appends


async def test_verifications_for_one_coordinator_share_a_request(logs: LogManager) -> None:
    coordinator = FakeCoordinator()
    coordinator.gate = asyncio.Event()
    cache = MetadataCache("cluster")
    brokers = {1: ("h1", 9092), 2: ("h2", 9092)}
    cache.update(update_metadata(brokers, TRANSACTION_STATE_TOPIC, {p: [COORDINATOR] for p in range(50)}), 6)
    verifier = AddPartitionsToTxnManager(
        1, cache, "PLAINTEXT", lambda t: partition_for(t, 50), 5000, coordinator.client
    )
    first = verifier.verify_transaction("a", 1, 0, [(TOPIC, 0)])
    await asyncio.sleep(0)
    assert len(coordinator.requests) == 1  # in flight: the next ones wait for it
    second = verifier.verify_transaction("b", 2, 0, [(TOPIC, 1)])
    third = verifier.verify_transaction("c", 3, 5, [(TOPIC, 0)])
    replaced = verifier.verify_transaction("c", 3, 6, [(TOPIC, 0)])  # a newer epoch fences the waiting one
    stale = verifier.verify_transaction("c", 3, 4, [(TOPIC, 0)])
    assert third.result() == {(TOPIC, 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert stale.result() == {(TOPIC, 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    coordinator.gate.set()
    assert await first == {} and await second == {} and await replaced == {}
    assert [sorted(t.transactional_id for t in body.transactions) for _, body in coordinator.requests] == [
        ["a"],
        ["b", "c"],
    ]
    await verifier.shutdown()
    closed = verifier.verify_transaction("d", 4, 0, [(TOPIC, 0)])
    assert closed.result() == {(TOPIC, 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}


async def test_a_coordinators_top_level_error_fails_every_transaction(logs: LogManager) -> None:
    coordinator = FakeCoordinator()
    coordinator.top_level = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    apis, _ = await setup(logs, coordinator)
    assert await answered(await apis.handle_produce(produce(FakeConnection(), {0: txn_batch()}))) == {
        0: (ErrorCode.INVALID_TXN_STATE, -1)
    }
