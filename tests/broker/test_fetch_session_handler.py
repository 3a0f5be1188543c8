"""The Fetch handler in process over real logs: sessions (full, incremental, long polls completing
against the session), topic ids (v13+), KIP-951 leader hints (v16), replica state (v15), rack id."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from broker.fetch_apis import FetchApis
from broker.metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache
from broker.replica_manager import FetchParams, ReplicaManager
from network.handler_pool import Parked
from network.request_channel import Request
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode
from protocol.frame import decode_response, encode_response
from protocol.messages import FetchRequest, FetchResponse
from protocol.record_batch import Record, encode_batch
from storage.log_manager import LogManager
from tests.broker.controller_requests import leader_and_isr, update_metadata

TOPIC_ID = uuid.uuid4()
PARTITIONS = 3


class _Connection:
    peer = "10.0.0.9:4242"
    listener = "PLAINTEXT"


async def leader(logs: LogManager, log_topic_id: uuid.UUID = TOPIC_ID) -> tuple[FetchApis, ReplicaManager]:
    """Broker 1 leads t-0..2 alone; broker 2 leads u-0 (broker 1 follows it)."""
    cache = MetadataCache("cluster")
    manager = ReplicaManager(1, logs, cache)
    parts = {p: [1] for p in range(PARTITIONS)}
    await manager.become_leader_or_follower(leader_and_isr("t", parts, topic_id=log_topic_id), 6)
    await manager.become_leader_or_follower(leader_and_isr("u", {0: [2, 1]}, leader_epoch=4), 6)
    brokers = {1: ("h1", 9092), 2: ("h2", 9093)}
    cache.update(update_metadata(brokers, "t", parts, topic_id=TOPIC_ID), 7)
    cache.update(update_metadata(brokers, "u", {0: [2, 1]}, leader_epoch=4), 7)
    cache.add_broker(BrokerInfo(2, "rack-b", {"PLAINTEXT": BrokerEndpoint("h2", 9093)}))
    return FetchApis(cache, manager), manager


def produce(manager: ReplicaManager, partition: int, count: int = 3) -> None:
    batch = encode_batch(
        [Record(i, int(time.time() * 1000), None, b"v") for i in range(count)], base_offset=0
    )
    results = manager.append_records([("t", partition, memoryview(bytearray(batch)))], 1)
    assert all(r.error == ErrorCode.NONE for r in results.values())


def fetch_request(
    offsets: dict[int, int],
    *,
    version: int = 17,
    session_id: int = 0,
    epoch: int = 0,
    forget: list[int] | None = None,
    topic_id: uuid.UUID = TOPIC_ID,
    topic: str = "t",
    max_wait_ms: int = 0,
    rack_id: str = "",
) -> FetchRequest:
    return FetchRequest(
        replica_id=-1,
        replica_state=FetchRequest.ReplicaState(replica_id=-1, replica_epoch=-1),
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                topic_id=topic_id,
                partitions=[
                    FetchRequest.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 16)
                    for p, o in offsets.items()
                ],
            )
        ]
        if offsets
        else [],
        forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=topic, topic_id=topic_id, partitions=forget)]
        if forget
        else [],
        rack_id=rack_id,
    )


async def call(apis: FetchApis, body: FetchRequest, version: int = 17) -> FetchResponse:
    definition = api(ApiKey.FETCH)
    assert definition is not None
    request = Request(_Connection(), definition, version, 1, "test", body, 0, version)  # type: ignore[arg-type]
    answer = await apis.handle_fetch(request)
    if isinstance(answer, Parked):
        answer = await answer.response
    assert isinstance(answer, FetchResponse)
    return answer


def answered(response: FetchResponse) -> dict[int, tuple[int, int, int]]:
    """partition -> (error, high watermark, record bytes)."""
    return {
        p.partition_index: (p.error_code, p.high_watermark, len(p.records or b""))
        for t in response.responses
        for p in t.partitions
    }


async def test_a_session_answers_only_the_partitions_that_changed(logs: LogManager) -> None:
    apis, manager = await leader(logs)
    produce(manager, 0)
    full = await call(apis, fetch_request({0: 0, 1: 0, 2: 0}))
    assert full.error_code == ErrorCode.NONE and full.session_id != 0
    assert [t.topic_id for t in full.responses] == [TOPIC_ID]
    got = answered(full)
    assert got[0][:2] == (ErrorCode.NONE, 3) and got[0][2] > 0 and got[1] == (ErrorCode.NONE, 0, 0)
    session = full.session_id
    # The consumer moved partition 0 on; nothing else changed: an empty response.
    empty = await call(apis, fetch_request({0: 3}, session_id=session, epoch=1))
    assert (empty.error_code, empty.session_id, empty.responses) == (ErrorCode.NONE, session, [])
    produce(manager, 2, count=2)
    changed = await call(apis, fetch_request({}, session_id=session, epoch=2))
    assert list(answered(changed)) == [2] and answered(changed)[2][1] == 2
    assert apis.sessions.incremental_fetches == 2 and apis.sessions.full_fetches == 1


async def test_a_parked_incremental_fetch_answers_against_the_session_when_it_completes(
    logs: LogManager,
) -> None:
    apis, manager = await leader(logs)
    full = await call(apis, fetch_request({0: 0, 1: 0, 2: 0}))
    waiting = asyncio.create_task(
        call(apis, fetch_request({}, session_id=full.session_id, epoch=1, max_wait_ms=5000))
    )
    await asyncio.sleep(0.05)
    assert not waiting.done()
    produce(manager, 1)
    response = await asyncio.wait_for(waiting, 5)
    assert list(answered(response)) == [1] and response.session_id == full.session_id
    # The session cached the high watermark it answered: the next fetch has nothing to say.
    again = await call(apis, fetch_request({1: 3}, session_id=full.session_id, epoch=2))
    assert again.responses == []


async def test_a_parked_fetch_whose_session_moved_on_answers_an_epoch_error(logs: LogManager) -> None:
    apis, manager = await leader(logs)
    full = await call(apis, fetch_request({0: 0}))
    waiting = asyncio.create_task(
        call(apis, fetch_request({}, session_id=full.session_id, epoch=1, max_wait_ms=5000))
    )
    await asyncio.sleep(0.05)
    retried = await call(apis, fetch_request({}, session_id=full.session_id, epoch=2))
    assert retried.error_code == ErrorCode.NONE
    produce(manager, 0)
    response = await asyncio.wait_for(waiting, 5)
    assert (response.error_code, response.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, [])


async def test_session_errors_at_the_top_level(logs: LogManager) -> None:
    apis, _ = await leader(logs)
    missing = await call(apis, fetch_request({}, session_id=12345, epoch=1))
    assert (missing.error_code, missing.session_id) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    full = await call(apis, fetch_request({0: 0}))
    stale = await call(apis, fetch_request({}, session_id=full.session_id, epoch=7))
    assert stale.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    by_name = await call(apis, fetch_request({}, version=12, session_id=full.session_id, epoch=1), version=12)
    assert by_name.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


async def test_forgetting_every_partition_closes_the_session(logs: LogManager) -> None:
    apis, _ = await leader(logs)
    full = await call(apis, fetch_request({0: 0, 1: 0}))
    response = await call(apis, fetch_request({}, session_id=full.session_id, epoch=1, forget=[0, 1]))
    assert (response.error_code, response.session_id, response.responses) == (ErrorCode.NONE, 0, [])
    assert apis.sessions.get(full.session_id) is None


async def test_name_based_sessions_below_v13(logs: LogManager) -> None:
    apis, manager = await leader(logs)
    full = await call(apis, fetch_request({0: 0, 1: 0}, version=12), version=12)
    assert full.session_id != 0 and full.responses[0].topic == "t"
    produce(manager, 1)
    response = await call(
        apis, fetch_request({}, version=12, session_id=full.session_id, epoch=1), version=12
    )
    assert list(answered(response)) == [1]


async def test_an_unknown_topic_id_is_unknown_topic_id_per_partition(logs: LogManager) -> None:
    apis, _ = await leader(logs)
    other = uuid.uuid4()
    response = await call(apis, fetch_request({0: 0, 1: 0}, topic_id=other))
    assert response.error_code == ErrorCode.NONE
    assert [t.topic_id for t in response.responses] == [other]
    assert {p: e for p, (e, _, _) in answered(response).items()} == {
        0: ErrorCode.UNKNOWN_TOPIC_ID,
        1: ErrorCode.UNKNOWN_TOPIC_ID,
    }


async def test_a_topic_id_that_is_not_the_logs_is_inconsistent(logs: LogManager) -> None:
    apis, _ = await leader(logs, log_topic_id=uuid.uuid4())
    response = await call(apis, fetch_request({0: 0}))
    assert answered(response)[0][0] == ErrorCode.INCONSISTENT_TOPIC_ID


async def test_a_partition_the_metadata_does_not_know_is_unknown(logs: LogManager) -> None:
    apis, _ = await leader(logs)
    response = await call(apis, fetch_request({7: 0}))
    assert answered(response)[7][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("version", [15, 16, 17])
async def test_fenced_leader_epoch_carries_the_current_leader_from_v16(
    logs: LogManager, version: int
) -> None:
    apis, _ = await leader(logs)
    body = fetch_request({0: 0}, version=version, topic="u", topic_id=apis.metadata_cache.topic_id("u"))
    body.topics[0].partitions[0].current_leader_epoch = 3  # older than the leader's 4
    response = await call(apis, body, version=version)
    [partition] = response.responses[0].partitions
    assert partition.error_code == ErrorCode.FENCED_LEADER_EPOCH
    definition = api(ApiKey.FETCH)
    assert definition is not None
    frame = b"".join(bytes(b) for b in encode_response(definition, version, 7, response))
    _, decoded = decode_response(frame[4:], definition, version)
    [wire] = decoded.responses[0].partitions  # the tagged fields survive the wire
    assert (wire.error_code, wire.current_leader) == (partition.error_code, partition.current_leader)
    assert decoded.node_endpoints == response.node_endpoints
    if version >= 16:
        assert partition.current_leader is not None
        assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (2, 4)
        assert [(n.node_id, n.host, n.port, n.rack) for n in response.node_endpoints] == [
            (2, "h2", 9093, "rack-b")
        ]
    else:
        assert partition.current_leader is None or partition.current_leader.leader_id == -1
        assert not response.node_endpoints


async def test_replica_state_rack_and_preferred_read_replica(logs: LogManager) -> None:
    apis, manager = await leader(logs)
    seen: list[FetchParams] = []
    original = manager.fetch_messages

    def spy(params: FetchParams, requests: list[Any]) -> Any:
        seen.append(params)
        future = original(params, requests)
        for result in future.result().values():
            result.preferred_read_replica = 2
        return future

    manager.fetch_messages = spy  # type: ignore[method-assign]
    response = await call(apis, fetch_request({0: 0}, rack_id="rack-b"))
    assert seen[-1].client_rack == "rack-b" and seen[-1].replica_id == -1
    assert response.responses[0].partitions[0].preferred_read_replica == 2
    await call(apis, fetch_request({0: 0}, version=10), version=10)
    assert seen[-1].client_rack is None
    body = fetch_request({0: 0})
    body.replica_state = FetchRequest.ReplicaState(replica_id=3, replica_epoch=77)
    await call(apis, body)
    assert seen[-1].replica_id == 3 and seen[-1].from_follower


async def test_v17_replica_directory_id_is_accepted_and_ignored(logs: LogManager) -> None:
    apis, manager = await leader(logs)
    produce(manager, 0)
    body = fetch_request({0: 0})
    body.topics[0].partitions[0].replica_directory_id = uuid.uuid4()
    response = await call(apis, body)
    assert answered(response)[0][:2] == (ErrorCode.NONE, 3)


@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (2, 1), (3, 1)])
async def test_fetch_v0_to_v3_gets_down_converted_bytes(logs: LogManager, version: int, magic: int) -> None:
    from protocol.message_set import decode_message_set

    apis, manager = await leader(logs)
    produce(manager, 0, count=4)
    response = await call(apis, fetch_request({0: 1}, version=version), version=version)
    [partition] = response.responses[0].partitions
    assert partition.error_code == ErrorCode.NONE and partition.high_watermark == 4
    assert isinstance(partition.records, bytes)  # converted in memory, not a file region
    messages = decode_message_set(partition.records)
    assert [(m.offset, m.magic, m.value) for m in messages] == [(o, magic, b"v") for o in (1, 2, 3)]


async def test_v4_and_later_keep_the_file_region_for_sendfile(logs: LogManager) -> None:
    apis, manager = await leader(logs)
    produce(manager, 0)
    response = await call(apis, fetch_request({0: 0}, version=4), version=4)
    records = response.responses[0].partitions[0].records
    assert not isinstance(records, bytes) and hasattr(records, "fd")


async def test_zstd_below_v10_is_unsupported_compression_with_kafkas_empty_partition(
    logs: LogManager,
) -> None:
    from protocol.compression import ZSTD

    apis, manager = await leader(logs)
    batch = encode_batch(
        [Record(0, int(time.time() * 1000), None, b"z" * 50)], base_offset=0, compression=ZSTD
    )
    manager.append_records([("t", 0, memoryview(bytearray(batch)))], 1)
    for version in (3, 9):
        [partition] = (
            (await call(apis, fetch_request({0: 0}, version=version), version=version))
            .responses[0]
            .partitions
        )
        assert (partition.error_code, partition.high_watermark, len(partition.records)) == (
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            -1,
            0,
        )
    [partition] = (await call(apis, fetch_request({0: 0}, version=10), version=10)).responses[0].partitions
    assert partition.error_code == ErrorCode.NONE and len(partition.records) > 0


@pytest.mark.parametrize(("version", "expected"), [(5, ErrorCode.NOT_LEADER_OR_FOLLOWER), (6, 56)])
async def test_a_storage_error_reads_as_not_leader_up_to_v5(
    logs: LogManager, version: int, expected: int
) -> None:
    apis, manager = await leader(logs)
    original = manager.fetch_messages

    def failing(params: FetchParams, requests: list[Any]) -> Any:
        future = original(params, requests)
        for result in future.result().values():
            result.error = ErrorCode.KAFKA_STORAGE_ERROR
        return future

    manager.fetch_messages = failing  # type: ignore[method-assign]
    response = await call(apis, fetch_request({0: 0}, version=version), version=version)
    assert response.responses[0].partitions[0].error_code == expected
