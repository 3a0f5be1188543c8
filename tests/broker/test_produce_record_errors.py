"""Produce refusals that name the records at fault (KIP-467, Produce v8+) and KIP-937's timestamp bounds,
in process over real logs: a compacted topic refuses a batch with keyless records listing each one's
index, timestamps out of message.timestamp.before/after.max.ms (or the deprecated difference.max.ms)
are refused per record, and Kafka's ProduceRequest.validateRecords (exactly one batch per partition)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest

from broker.metadata_cache import BrokerInfo, MetadataCache
from broker.produce_apis import ProduceApis
from broker.replica_manager import ReplicaManager
from network.request_channel import Request
from protocol import record_batch as rb
from protocol.api import ApiKey
from protocol.compression import LZ4, ZSTD
from protocol.errors import ErrorCode
from protocol.messages import ProduceRequest, ProduceResponse
from storage.config import LogConfig
from storage.log import Log
from storage.log_manager import LogManager
from tests.broker.controller_requests import leader_and_isr, update_metadata
from tests.support.handler_requests import FakeConnection, answer, handler_request

TOPIC = "events"
HOUR = 3_600_000


async def setup(
    logs: LogManager, config: dict[str, Any] | None = None, partitions: dict[int, list[int]] | None = None
) -> tuple[ProduceApis, ReplicaManager]:
    """Broker 1 leads TOPIC's partitions (default: 0 and 1, on broker 1 alone), with ``config``."""
    partitions = partitions or {0: [1], 1: [1]}
    cache = MetadataCache("cluster")
    cache.add_broker(BrokerInfo(1, None))
    manager = ReplicaManager(1, logs, cache)
    await manager.become_leader_or_follower(leader_and_isr(TOPIC, partitions), 6)
    cache.update(update_metadata({1: ("h1", 9092), 2: ("h2", 9093)}, TOPIC, partitions), 6)
    if config:
        logs.update_topic_config(TOPIC, LogConfig.from_props(config))
    return ProduceApis(cache, manager), manager


def now_ms() -> int:
    return int(time.time() * 1000)


def batch(
    keys: Sequence[bytes | None],
    timestamps: Sequence[int] | None = None,
    codec: int = 0,
    **fields: Any,
) -> bytes:
    stamps = timestamps or [now_ms()] * len(keys)
    records = [
        rb.Record(i, ts, key, b"value-%d" % i) for i, (key, ts) in enumerate(zip(keys, stamps, strict=True))
    ]
    return rb.encode_batch(records, base_offset=0, compression=codec, **fields)


def produce(
    partitions: dict[int, bytes | None],
    version: int = 11,
    acks: int = 1,
    connection: FakeConnection | None = None,
) -> Request:
    body = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=TOPIC,
                partition_data=[
                    ProduceRequest.PartitionProduceData(
                        index=i, records=None if r is None else memoryview(bytearray(r))
                    )
                    for i, r in partitions.items()
                ],
            )
        ],
    )
    return handler_request(ApiKey.PRODUCE, version, body, connection)


async def respond(apis: ProduceApis, request: Request) -> ProduceResponse:
    response = await answer(await apis.handle_produce(request))
    assert isinstance(response, ProduceResponse)
    return response


def partition_response(response: ProduceResponse, index: int = 0) -> ProduceResponse.PartitionProduceResponse:
    [topic] = response.responses
    return next(p for p in topic.partition_responses if p.index == index)


def log_of(manager: ReplicaManager, partition: int = 0) -> Log:
    found = manager.get_partition(TOPIC, partition)
    assert found is not None and found.log is not None
    return found.log


def record_errors(p: ProduceResponse.PartitionProduceResponse) -> list[tuple[int, str | None]]:
    return [(e.batch_index, e.batch_index_error_message) for e in p.record_errors]


@pytest.mark.parametrize("codec", [0, LZ4, ZSTD])
async def test_a_compacted_topic_refuses_keyless_records_by_index(logs: LogManager, codec: int) -> None:
    apis, manager = await setup(logs, {"cleanup.policy": "compact"})
    response = await respond(apis, produce({0: batch([b"a", None, b"c", None, b"e"], codec=codec)}))
    p = partition_response(response)
    assert (p.error_code, p.base_offset, p.log_start_offset) == (ErrorCode.INVALID_RECORD, -1, 0)
    message = f"Compacted topic cannot accept message without key in topic partition {TOPIC}-0"
    assert record_errors(p) == [(1, message), (3, message)]
    assert p.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{message}'), "
        f"RecordError(batchIndex=3, message='{message}')]"
    )
    assert log_of(manager).log_end_offset == 0
    # The records with keys, sent again alone (as a client retries them), are appended.
    response = await respond(apis, produce({0: batch([b"a", b"c", b"e"], codec=codec)}))
    assert (partition_response(response).error_code, log_of(manager).log_end_offset) == (ErrorCode.NONE, 3)


async def test_only_the_partition_with_keyless_records_is_refused(logs: LogManager) -> None:
    apis, manager = await setup(logs, {"cleanup.policy": "compact,delete"})
    response = await respond(apis, produce({0: batch([None]), 1: batch([b"k"])}))
    assert partition_response(response, 0).error_code == ErrorCode.INVALID_RECORD
    assert record_errors(partition_response(response, 0))[0][0] == 0
    assert (partition_response(response, 1).error_code, partition_response(response, 1).record_errors) == (
        ErrorCode.NONE,
        [],
    )
    assert log_of(manager, 1).log_end_offset == 1


async def test_keyless_records_are_fine_on_a_delete_topic(logs: LogManager) -> None:
    apis, _ = await setup(logs)
    assert (
        partition_response(await respond(apis, produce({0: batch([None, None])}))).error_code
        == ErrorCode.NONE
    )


@pytest.mark.parametrize("codec", [0, LZ4])
async def test_records_older_than_before_max_ms_are_refused_by_index(logs: LogManager, codec: int) -> None:
    apis, manager = await setup(logs, {"message.timestamp.before.max.ms": HOUR})
    now = now_ms()
    old = now - 2 * HOUR
    response = await respond(apis, produce({0: batch([b"k"] * 4, [old, now, old, now], codec=codec)}))
    p = partition_response(response)
    assert (p.error_code, p.base_offset) == (ErrorCode.INVALID_TIMESTAMP, -1)
    assert p.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [i for i, _ in record_errors(p)] == [0, 2]
    _, message = record_errors(p)[1]
    assert message is not None and message.startswith(
        f"Timestamp {old} of message with offset 2 is out of range."
    )
    assert log_of(manager).log_end_offset == 0


async def test_records_newer_than_after_max_ms_are_refused_and_old_ones_pass(logs: LogManager) -> None:
    apis, _ = await setup(logs, {"message.timestamp.after.max.ms": HOUR})
    now = now_ms()
    response = await respond(apis, produce({0: batch([b"k"] * 3, [now - 100 * HOUR, now, now + 2 * HOUR])}))
    p = partition_response(response)
    assert p.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in record_errors(p)] == [2]
    response = await respond(apis, produce({0: batch([b"k"], [now - 100 * HOUR])}))
    assert partition_response(response).error_code == ErrorCode.NONE


async def test_the_deprecated_difference_max_ms_bounds_both_sides_until_before_or_after_is_set(
    logs: LogManager,
) -> None:
    apis, _ = await setup(logs, {"message.timestamp.difference.max.ms": HOUR})
    now = now_ms()
    for ts in (now - 2 * HOUR, now + 2 * HOUR):
        assert partition_response(await respond(apis, produce({0: batch([b"k"], [ts])}))).error_code == (
            ErrorCode.INVALID_TIMESTAMP
        )
    # KIP-937's settings win where set; the deprecated one still bounds the other side.
    apis, _ = await setup(
        logs, {"message.timestamp.difference.max.ms": HOUR, "message.timestamp.before.max.ms": 3 * HOUR}
    )
    assert partition_response(
        await respond(apis, produce({0: batch([b"k"], [now - 2 * HOUR])}))
    ).error_code == (ErrorCode.NONE)
    assert partition_response(
        await respond(apis, produce({0: batch([b"k"], [now + 2 * HOUR])}))
    ).error_code == (ErrorCode.INVALID_TIMESTAMP)


async def test_log_append_time_topics_and_records_without_timestamps_are_not_bounded(
    logs: LogManager,
) -> None:
    apis, _ = await setup(
        logs, {"message.timestamp.before.max.ms": 0, "message.timestamp.type": "LogAppendTime"}
    )
    assert (
        partition_response(await respond(apis, produce({0: batch([b"k"], [1])}))).error_code == ErrorCode.NONE
    )
    apis, _ = await setup(
        logs, {"message.timestamp.before.max.ms": 0, "message.timestamp.type": "CreateTime"}
    )
    assert (
        partition_response(await respond(apis, produce({0: batch([b"k"], [-1])}))).error_code
        == ErrorCode.NONE
    )
    assert partition_response(await respond(apis, produce({0: batch([b"k"], [1])}))).error_code == (
        ErrorCode.INVALID_TIMESTAMP
    )


async def test_a_compacted_topic_names_keyless_and_old_records_together(logs: LogManager) -> None:
    """As Kafka's validateRecord: a record's missing key is its error; any timestamp error makes the
    partition's error INVALID_TIMESTAMP."""
    apis, _ = await setup(logs, {"cleanup.policy": "compact", "message.timestamp.before.max.ms": HOUR})
    now = now_ms()
    p = partition_response(
        await respond(apis, produce({0: batch([None, b"k", b"k"], [now, now - 2 * HOUR, now])}))
    )
    assert p.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [(i, (m or "").split(" ")[0]) for i, m in record_errors(p)] == [(0, "Compacted"), (1, "Timestamp")]


@pytest.mark.parametrize("records", [None, b""])
async def test_a_partition_without_a_batch_is_an_invalid_record(
    logs: LogManager, records: bytes | None
) -> None:
    apis, _ = await setup(logs)
    p = partition_response(await respond(apis, produce({0: records})))
    assert (p.error_code, p.base_offset) == (ErrorCode.INVALID_RECORD, -1)
    assert (
        p.error_message
        == "Produce requests with version 11 must have at least one record batch per partition"
    )


async def test_two_batches_for_one_partition_are_an_invalid_record(logs: LogManager) -> None:
    apis, manager = await setup(logs)
    p = partition_response(await respond(apis, produce({0: batch([b"a"]) + batch([b"b"])}, version=9)))
    assert (p.error_code, p.record_errors) == (ErrorCode.INVALID_RECORD, [])
    assert p.error_message == (
        "Produce requests with version 9 are only allowed to contain exactly one record batch per partition"
    )
    assert log_of(manager).log_end_offset == 0


async def test_record_errors_are_only_on_the_wire_from_v8(logs: LogManager) -> None:
    apis, _ = await setup(logs, {"cleanup.policy": "compact"})
    for version, expected in ((7, []), (8, [0])):
        response = await respond(apis, produce({0: batch([None])}, version=version))
        p = partition_response(ProduceResponse.decode(response.encode(version), version))
        assert p.error_code == ErrorCode.INVALID_RECORD
        assert [e.batch_index for e in p.record_errors] == expected


async def test_an_acks_0_producer_with_a_keyless_record_is_disconnected(logs: LogManager) -> None:
    apis, manager = await setup(logs, {"cleanup.policy": "compact"})
    connection = FakeConnection()
    assert await apis.handle_produce(produce({0: batch([None])}, acks=0, connection=connection)) is None
    assert connection.closed
    assert log_of(manager).log_end_offset == 0


async def test_an_unknown_partition_is_unknown_whatever_its_records(logs: LogManager) -> None:
    """Kafka checks that the partition exists before it looks at the records."""
    apis, _ = await setup(logs)
    response = await respond(apis, produce({7: batch([b"a"]) + batch([b"b"]), 8: None}))
    for index in (7, 8):
        p = partition_response(response, index)
        assert (p.error_code, p.error_message) == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"{TOPIC}-{index} does not exist",
        )
