"""WriteTxnMarkers and DescribeProducers in process over real logs: markers end transactions (the last
stable offset moves once they are replicated), are refused as Kafka refuses them (no replica, not the
leader, a zombie coordinator), wait for the followers before answering, and tell the group coordinator
about its __consumer_offsets partitions."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from broker.describe_producers import DescribeProducers
from broker.metadata_cache import BrokerInfo, MetadataCache
from broker.replica_manager import ReplicaManager
from broker.write_txn_markers import WriteTxnMarkers
from network.handler_pool import Parked
from protocol.errors import ErrorCode
from protocol.messages import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from protocol.record_batch import Record, encode_batch
from protocol.topic import GROUP_METADATA_TOPIC
from storage.log import Log
from storage.log_manager import LogManager
from storage.producer_state import AppendOrigin
from tests.broker.controller_requests import leader_and_isr, update_metadata

TOPIC = "orders"
PID = 4000


async def broker_leading(
    logs: LogManager, topic: str = TOPIC, partitions: dict[int, list[int]] | None = None
) -> ReplicaManager:
    """Broker 1 with the partitions given (default: leads partition 0 alone)."""
    cache = MetadataCache("cluster")
    cache.add_broker(BrokerInfo(1, None))
    cache.add_broker(BrokerInfo(2, None))
    manager = ReplicaManager(1, logs, cache)
    partitions = partitions or {0: [1]}
    await manager.become_leader_or_follower(leader_and_isr(topic, partitions), 6)
    cache.update(update_metadata({1: ("h1", 9092), 2: ("h2", 9092)}, topic, partitions), 6)
    return manager


def leader_log(manager: ReplicaManager, topic: str = TOPIC, partition: int = 0) -> Log:
    found = manager.get_partition(topic, partition)
    assert found is not None and found.log is not None
    return found.log


def open_transaction(log: Log, pid: int = PID, epoch: int = 0) -> None:
    """A transactional batch of ``pid`` at the log end, appended as a follower would (no verification)."""
    batch = encode_batch(
        [Record(0, int(time.time() * 1000), None, b"in-txn")],
        base_offset=0,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        is_transactional=True,
    )
    log.append_as_leader(bytearray(batch), leader_epoch=0, origin=AppendOrigin.COORDINATOR)


def marker(
    commit: bool,
    partitions: dict[str, list[int]],
    *,
    pid: int = PID,
    epoch: int = 0,
    coordinator_epoch: int = 3,
) -> WriteTxnMarkersRequest.WritableTxnMarker:
    return WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=pid,
        producer_epoch=epoch,
        transaction_result=commit,
        coordinator_epoch=coordinator_epoch,
        topics=[
            WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=topic, partition_indexes=indexes)
            for topic, indexes in partitions.items()
        ],
    )


def request(*markers: WriteTxnMarkersRequest.WritableTxnMarker) -> Any:
    return SimpleNamespace(body=WriteTxnMarkersRequest(markers=list(markers)), version=1)


async def answer(handler: WriteTxnMarkers, *markers: WriteTxnMarkersRequest.WritableTxnMarker) -> dict:
    """{(producer id, topic, partition): error} of the handler's response, waited for if parked."""
    response = await handler.handle_write_txn_markers(request(*markers))
    if isinstance(response, Parked):
        response = await response.response
    assert isinstance(response, WriteTxnMarkersResponse)
    return {
        (m.producer_id, t.name, p.partition_index): p.error_code
        for m in response.markers
        for t in m.topics
        for p in t.partitions
    }


async def test_a_commit_marker_ends_the_transaction_and_moves_the_lso(logs: LogManager) -> None:
    manager = await broker_leading(logs)
    log = leader_log(manager)
    open_transaction(log)
    assert log.last_stable_offset == 0
    handler = WriteTxnMarkers(manager, None, 5000)
    assert await answer(handler, marker(True, {TOPIC: [0]})) == {(PID, TOPIC, 0): ErrorCode.NONE}
    assert log.log_end_offset == 2 and log.high_watermark == 2
    assert log.last_stable_offset == 2 and log.first_unstable_offset is None
    assert log.producer_state.last_entry(PID).coordinator_epoch == 3


async def test_an_abort_marker_is_indexed_for_read_committed_fetches(logs: LogManager) -> None:
    manager = await broker_leading(logs)
    log = leader_log(manager)
    open_transaction(log)
    handler = WriteTxnMarkers(manager, None, 5000)
    assert await answer(handler, marker(False, {TOPIC: [0]})) == {(PID, TOPIC, 0): ErrorCode.NONE}
    [aborted] = log.collect_aborted_transactions(0, log.last_stable_offset)
    assert (aborted.producer_id, aborted.first_offset, aborted.last_offset) == (PID, 0, 1)


async def test_partitions_without_a_replica_or_led_elsewhere_are_refused(logs: LogManager) -> None:
    manager = await broker_leading(logs, partitions={0: [1], 1: [2, 1]})
    handler = WriteTxnMarkers(manager, None, 5000)
    errors = await answer(handler, marker(True, {TOPIC: [0, 1, 7], "gone": [0]}))
    assert errors == {
        (PID, TOPIC, 0): ErrorCode.NONE,
        (PID, TOPIC, 1): ErrorCode.NOT_LEADER_OR_FOLLOWER,  # a follower here
        (PID, TOPIC, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (PID, "gone", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }


async def test_a_zombie_coordinator_is_fenced(logs: LogManager) -> None:
    manager = await broker_leading(logs)
    log = leader_log(manager)
    handler = WriteTxnMarkers(manager, None, 5000)
    open_transaction(log)
    assert await answer(handler, marker(True, {TOPIC: [0]}, coordinator_epoch=5)) == {
        (PID, TOPIC, 0): ErrorCode.NONE
    }
    open_transaction(log)
    end = log.log_end_offset
    errors = await answer(handler, marker(False, {TOPIC: [0]}, coordinator_epoch=4))
    assert errors == {(PID, TOPIC, 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
    assert log.log_end_offset == end and log.first_unstable_offset is not None
    errors = await answer(handler, marker(False, {TOPIC: [0]}, epoch=0, pid=PID, coordinator_epoch=5))
    assert errors == {(PID, TOPIC, 0): ErrorCode.NONE}


async def test_the_answer_waits_for_the_followers(logs: LogManager) -> None:
    manager = await broker_leading(logs, partitions={0: [1, 2]})
    log = leader_log(manager)
    partition = manager.get_partition(TOPIC, 0)
    assert partition is not None
    handler = WriteTxnMarkers(manager, None, 5000)
    response = await handler.handle_write_txn_markers(request(marker(True, {TOPIC: [0]})))
    assert isinstance(response, Parked) and not response.response.done()
    assert log.log_end_offset == 1 and log.last_stable_offset == 0
    manager.update_follower_fetch_state(partition, 2, 1)
    written = await response.response
    assert isinstance(written, WriteTxnMarkersResponse)
    assert written.markers[0].topics[0].partitions[0].error_code == ErrorCode.NONE


async def test_markers_of_several_producers_in_one_request(logs: LogManager) -> None:
    manager = await broker_leading(logs)
    log = leader_log(manager)
    open_transaction(log, pid=1)
    open_transaction(log, pid=2)
    handler = WriteTxnMarkers(manager, None, 5000)
    errors = await answer(handler, marker(True, {TOPIC: [0]}, pid=1), marker(False, {TOPIC: [0]}, pid=2))
    assert errors == {(1, TOPIC, 0): ErrorCode.NONE, (2, TOPIC, 0): ErrorCode.NONE}
    assert log.first_unstable_offset is None
    assert [t.producer_id for t in log.collect_aborted_transactions(0, log.log_end_offset)] == [2]


async def test_offsets_partitions_tell_the_group_coordinator(logs: LogManager) -> None:
    manager = await broker_leading(logs, topic=GROUP_METADATA_TOPIC, partitions={3: [1], 4: [1]})
    told: list[tuple[int, int, bool]] = []
    handler = WriteTxnMarkers(manager, lambda *args: told.append(args), 5000)
    errors = await answer(handler, marker(True, {GROUP_METADATA_TOPIC: [3, 4, 9]}))
    assert errors[(PID, GROUP_METADATA_TOPIC, 9)] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert sorted(told) == [(3, PID, True), (4, PID, True)]

    def failing(*_: object) -> None:
        raise RuntimeError("offsets cache unavailable")

    handler = WriteTxnMarkers(manager, failing, 5000)
    errors = await answer(handler, marker(False, {GROUP_METADATA_TOPIC: [3]}, epoch=0))
    assert errors == {(PID, GROUP_METADATA_TOPIC, 3): ErrorCode.UNKNOWN_SERVER_ERROR}


async def test_an_empty_request_gets_an_empty_answer(logs: LogManager) -> None:
    manager = await broker_leading(logs)
    assert await answer(WriteTxnMarkers(manager, None, 5000)) == {}


async def test_describe_producers_shows_the_open_transaction(logs: LogManager) -> None:
    manager = await broker_leading(logs, partitions={0: [1], 1: [2, 1]})
    log = leader_log(manager)
    log.append_as_leader(
        bytearray(
            encode_batch(
                [Record(0, 1_700_000_000_123, None, b"x")],
                base_offset=0,
                producer_id=7,
                producer_epoch=2,
                base_sequence=0,
            )
        ),
        leader_epoch=0,
    )
    open_transaction(log, pid=PID, epoch=1)
    describe = DescribeProducers(manager.metadata_cache, manager)
    body = DescribeProducersRequest(
        topics=[
            DescribeProducersRequest.TopicRequest(name=TOPIC, partition_indexes=[0, 1, 5]),
            DescribeProducersRequest.TopicRequest(name="nope", partition_indexes=[0]),
        ]
    )
    response = await describe.handle_describe_producers(SimpleNamespace(body=body))  # type: ignore[arg-type]
    assert isinstance(response, DescribeProducersResponse)
    ours, missing = response.topics
    p0, p1, p5 = ours.partitions
    assert p0.error_code == ErrorCode.NONE
    producers = {p.producer_id: p for p in p0.active_producers}
    assert (producers[7].producer_epoch, producers[7].last_sequence, producers[7].last_timestamp) == (
        2,
        0,
        1_700_000_000_123,
    )
    assert producers[7].current_txn_start_offset == -1
    assert (producers[PID].producer_epoch, producers[PID].current_txn_start_offset) == (1, 1)
    assert p1.error_code == ErrorCode.NONE  # a follower's replica answers too, as in Kafka
    assert p5.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert missing.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
