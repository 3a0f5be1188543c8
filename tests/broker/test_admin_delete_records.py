"""DeleteRecords in the ReplicaManager, in process over real logs: the leader's log start offset moves at
once, and the answer waits (Kafka's DelayedDeleteRecords) until every live follower reports, in its
fetches, a log start offset that far; the handler parks that answer rather than wait for it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import SimpleNamespace

from broker.admin_apis import AdminApis
from broker.config import KafkaConfig
from broker.kafka_apis import KafkaApis
from broker.metadata_cache import BrokerInfo, MetadataCache
from broker.replica_manager import ReplicaManager
from network.handler_pool import KafkaRequestHandlerPool
from network.request_channel import Request, RequestChannel
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsRequest, DeleteRecordsRequest, DeleteRecordsResponse, Message
from protocol.record_batch import Record, encode_batch
from storage.log_manager import LogManager
from tests.broker.controller_requests import leader_and_isr, update_metadata

TP = ("trimmed", 0)


async def leader_with_follower(logs: LogManager, follower_alive: bool = True) -> ReplicaManager:
    """Broker 1 leads TP with broker 2 in the ISR; 10 records, all replicated (high watermark 10)."""
    cache = MetadataCache("cluster")
    cache.add_broker(BrokerInfo(1, None))
    if follower_alive:
        cache.add_broker(BrokerInfo(2, None))
    manager = ReplicaManager(1, logs, cache)
    await manager.become_leader_or_follower(leader_and_isr(TP[0], {0: [1, 2]}), 6)
    batch = encode_batch([Record(i, int(time.time() * 1000), None, b"v") for i in range(10)], base_offset=0)
    [result] = manager.append_records([(*TP, memoryview(bytearray(batch)))], 1).values()
    assert result.error == ErrorCode.NONE
    partition = manager.get_partition(*TP)
    assert partition is not None
    manager.update_follower_fetch_state(partition, 2, 10, log_start_offset=0)
    assert partition.log is not None and partition.log.high_watermark == 10
    return manager


async def test_waits_for_the_followers_log_start_offset(logs: LogManager) -> None:
    manager = await leader_with_follower(logs)
    pending = manager.delete_records({TP: 6}, 5000)
    assert not pending.done()
    partition = manager.get_partition(*TP)
    assert partition is not None and partition.log is not None
    assert partition.log.log_start_offset == 6  # the leader moved at once

    manager.update_follower_fetch_state(partition, 2, 10, log_start_offset=3)
    assert not pending.done()
    manager.update_follower_fetch_state(partition, 2, 10, log_start_offset=6)
    result = (await pending)[TP]
    assert (result.error, result.low_watermark) == (ErrorCode.NONE, 6)


async def test_times_out_when_a_live_follower_lags(logs: LogManager) -> None:
    manager = await leader_with_follower(logs)
    result = (await manager.delete_records({TP: 4}, 50))[TP]
    assert (result.error, result.low_watermark) == (ErrorCode.REQUEST_TIMED_OUT, 0)


async def test_dead_followers_do_not_hold_it_up(logs: LogManager) -> None:
    manager = await leader_with_follower(logs, follower_alive=False)
    done = manager.delete_records({TP: 4}, 5000)
    assert done.done()  # no live follower to wait for
    result = done.result()[TP]
    assert (result.error, result.low_watermark) == (ErrorCode.NONE, 4)


async def test_losing_leadership_ends_the_wait(logs: LogManager) -> None:
    manager = await leader_with_follower(logs)
    pending = manager.delete_records({TP: 5}, 5000)
    request = leader_and_isr(TP[0], {0: [2, 1]}, leader_epoch=1)
    await manager.become_leader_or_follower(request, 6)
    result = (await pending)[TP]
    assert (result.error, result.low_watermark) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)


async def test_errors_come_back_at_once(logs: LogManager) -> None:
    manager = await leader_with_follower(logs)
    done = manager.delete_records({TP: 11, ("trimmed", 1): 0}, 5000)
    assert done.done()
    results = done.result()
    assert (results[TP].error, results[TP].low_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
    assert results[("trimmed", 1)].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def until(condition: Callable[[], object], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met"
        await asyncio.sleep(0.01)


class _Connection:
    """The connection side of the handler pool: which responses were written, in order."""

    peer = "10.0.0.9:4242"
    listener = "PLAINTEXT"

    def __init__(self) -> None:
        self.responses: list[tuple[int, Message | None]] = []
        self.closed = False

    def complete(self, request: Request, body: Message | None) -> None:
        self.responses.append((request.correlation_id, body))

    def handled(self, request: Request) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _request(
    connection: _Connection, key: ApiKey, version: int, correlation_id: int, body: Message
) -> Request:
    definition = api(key)
    assert definition is not None
    return Request(connection, definition, version, correlation_id, "test", body, 0, version)  # type: ignore[arg-type]


async def test_the_answer_is_parked_not_waited_for_by_a_handler_worker(logs: LogManager) -> None:
    manager = await leader_with_follower(logs)
    cache = manager.metadata_cache
    cache.update(update_metadata({1: ("h1", 9092), 2: ("h2", 9092)}, TP[0], {0: [1, 2]}), 6)
    config = KafkaConfig({"broker.id": "1", "zookeeper.connect": "zk:2181", "num.io.threads": "1"})
    admin = AdminApis(config, SimpleNamespace(zk=None), cache, manager, logs)  # type: ignore[arg-type]
    apis = KafkaApis(1, cache, manager, extra_handlers=admin.handlers())
    channel = RequestChannel(10)
    pool = KafkaRequestHandlerPool(channel, apis, config["num.io.threads"])
    pool.start()
    try:
        connection = _Connection()
        delete = DeleteRecordsRequest(
            topics=[
                DeleteRecordsRequest.DeleteRecordsTopic(
                    name=TP[0],
                    partitions=[DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=6)],
                )
            ],
            timeout_ms=5000,
        )
        await channel.send_request(_request(connection, ApiKey.DELETE_RECORDS, 2, 1, delete))
        await channel.send_request(_request(connection, ApiKey.API_VERSIONS, 0, 2, ApiVersionsRequest()))
        # The one worker answered the second request while the first waits for the follower.
        await until(lambda: [c for c, _ in connection.responses] == [2])
        partition = manager.get_partition(*TP)
        assert partition is not None
        manager.update_follower_fetch_state(partition, 2, 10, log_start_offset=6)
        await until(lambda: len(connection.responses) == 2)
        correlation_id, response = connection.responses[1]
        assert correlation_id == 1 and isinstance(response, DeleteRecordsResponse)
        [result] = response.topics[0].partitions
        assert (result.error_code, result.low_watermark) == (ErrorCode.NONE, 6)
        assert not connection.closed
    finally:
        await pool.shutdown()
