"""The broker's metrics in process (broker/broker_metrics.py): BrokerTopicMetrics counted by the produce
and fetch paths, ReplicaManager's gauges and ISR meters, the fetcher lag, the log gauges and the flush
time, read from a registry the way a scrape reads them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import storage.log
from broker.alter_partition_manager import AlterPartitionManager
from broker.broker_metrics import BrokerTopicStats, register_broker_metrics
from broker.metadata_cache import BrokerInfo, MetadataCache
from broker.partition import Partition
from broker.replica_fetcher import FetchSettings, ReplicaFetcher, _PartitionState
from broker.replica_manager import FetchParams, FetchPartitionRequest, ReplicaManager
from protocol.errors import ErrorCode
from protocol.messages import AlterPartitionResponse, FetchResponse
from protocol.record_batch import Record, encode_batch
from server_common.metrics import Metrics
from storage.config import LogConfig
from storage.log_manager import LogManager
from tests.broker.controller_requests import leader_and_isr, stop_replica

LEADER, FOLLOWER = 1, 2
CONSUMER, FOLLOWER_FETCH = -1, FOLLOWER


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    manager = LogManager([str(tmp_path / "logs")], LogConfig(max_message_bytes=2000))
    try:
        yield manager
    finally:
        manager.shutdown()


@pytest.fixture
def manager(logs: LogManager) -> Iterator[ReplicaManager]:
    cache = MetadataCache("cluster")
    cache.add_broker(BrokerInfo(LEADER, None))
    cache.add_broker(BrokerInfo(FOLLOWER, None))
    replicas = ReplicaManager(LEADER, logs, cache)
    try:
        yield replicas
    finally:
        replicas.shutdown()


@pytest.fixture
def metrics(manager: ReplicaManager, logs: LogManager, monkeypatch: pytest.MonkeyPatch) -> Metrics:
    monkeypatch.setattr(storage.log, "flush_timer", None)  # registering sets it: put back after the test
    registry = Metrics(process=False)
    server: Any = SimpleNamespace(replica_manager=manager, log_manager=logs, zk=None, groups=None)
    register_broker_metrics(registry, server)
    return registry


def batch(*values: bytes) -> memoryview:
    now = int(time.time() * 1000)
    return memoryview(
        bytearray(encode_batch([Record(i, now, None, v) for i, v in enumerate(values)], base_offset=0))
    )


def counter(metrics: Metrics, stem: str, **labels: str) -> float | None:
    return metrics.sample(f"kafka_server_brokertopicmetrics_{stem}_total", labels)


def fetch(manager: ReplicaManager, topic: str, replica_id: int, offset: int = 0) -> Any:
    params = FetchParams(
        replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0
    )
    future = manager.fetch_messages(params, [FetchPartitionRequest(topic, 0, offset, 1 << 20)])
    assert future.done()
    return future.result()[(topic, 0)]


async def lead(manager: ReplicaManager, topic: str, replicas: list[int], epoch: int = 0) -> Partition:
    request = leader_and_isr(topic, {0: replicas}, leader_epoch=epoch)
    error, errors, _ = await manager.become_leader_or_follower(request, 6)
    assert error == ErrorCode.NONE and set(errors.values()) == {ErrorCode.NONE}
    partition = manager.get_partition(topic, 0)
    assert partition is not None
    return partition


async def test_appends_and_consumer_fetches_count_messages_and_bytes_per_topic_and_in_total(
    manager: ReplicaManager, metrics: Metrics
) -> None:
    await lead(manager, "t", [LEADER])
    await lead(manager, "u", [LEADER])
    first, second, other = batch(b"a", b"b", b"c"), batch(b"d", b"e"), batch(b"x")
    sizes = len(first) + len(second)
    for records in (first, second):
        assert manager.append_records([("t", 0, records)], 1)[("t", 0)].error == ErrorCode.NONE
    assert manager.append_records([("u", 0, other)], 1)[("u", 0)].error == ErrorCode.NONE

    assert counter(metrics, "messagesin", topic="t") == 5
    assert counter(metrics, "messagesin") == 6  # no topic label: over all topics
    assert counter(metrics, "bytesin", topic="t") == sizes
    assert counter(metrics, "bytesin") == sizes + len(other)
    assert counter(metrics, "totalproducerequests", topic="t") == 2
    assert counter(metrics, "failedproducerequests") == 0

    read = fetch(manager, "t", CONSUMER)
    assert read.error == ErrorCode.NONE and read.info.length == sizes
    assert counter(metrics, "bytesout", topic="t") == sizes
    assert counter(metrics, "bytesout") == sizes
    assert counter(metrics, "totalfetchrequests", topic="t") == 1
    assert counter(metrics, "replicationbytesout") == 0


async def test_a_follower_fetch_counts_as_replication_bytes_out_not_bytes_out(
    manager: ReplicaManager, metrics: Metrics
) -> None:
    await lead(manager, "t", [LEADER, FOLLOWER])
    records = batch(b"a", b"b")
    manager.append_records([("t", 0, records)], 1)
    assert fetch(manager, "t", FOLLOWER_FETCH).info.length == len(records)
    assert counter(metrics, "replicationbytesout") == len(records)
    assert counter(metrics, "bytesout", topic="t") == 0
    assert counter(metrics, "totalfetchrequests", topic="t") == 1  # followers' reads count too


async def test_rejected_bytes_expected_errors_and_unknown_topics_are_counted_as_kafka_does(
    manager: ReplicaManager, metrics: Metrics
) -> None:
    await lead(manager, "t", [LEADER])
    large = batch(b"x" * 5000)
    assert manager.append_records([("t", 0, large)], 1)[("t", 0)].error == ErrorCode.MESSAGE_TOO_LARGE
    assert manager.append_records([("nowhere", 0, batch(b"a"))], 1)[("nowhere", 0)].error == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert counter(metrics, "bytesrejected", topic="t") == len(large)
    assert counter(metrics, "bytesrejected") == len(large)
    assert counter(metrics, "totalproducerequests") == 2
    assert counter(metrics, "totalproducerequests", topic="t") == 1
    assert counter(metrics, "totalproducerequests", topic="nowhere") is None  # no series for unknown topics
    assert counter(metrics, "failedproducerequests") == 0  # Kafka counts only unexpected failures
    assert counter(metrics, "messagesin") == 0


async def test_not_enough_replicas_counts_as_a_failed_produce(
    manager: ReplicaManager, logs: LogManager, metrics: Metrics
) -> None:
    partition = await lead(manager, "t", [LEADER, FOLLOWER])
    assert partition.log is not None
    partition.log.update_config(LogConfig(min_insync_replicas=3))
    result = manager.append_records([("t", 0, batch(b"a"))], -1)[("t", 0)]
    assert result.error == ErrorCode.NOT_ENOUGH_REPLICAS
    assert counter(metrics, "failedproducerequests", topic="t") == 1
    assert counter(metrics, "failedproducerequests") == 1


def test_topic_series_are_pruned_the_total_stays() -> None:
    stats = BrokerTopicStats()
    stats.topic("gone").bytes_in += 10
    stats.all_topics.bytes_in += 10
    stats.topic("kept").bytes_in += 1
    stats.all_topics.bytes_in += 1
    assert not stats.prune_due()
    stats.prune(lambda topic: topic == "kept")
    assert set(stats.topics) == {"kept"}
    assert stats.all_topics.bytes_in == 11


async def test_a_deleted_topic_loses_its_series_at_the_next_prune(
    manager: ReplicaManager, metrics: Metrics
) -> None:
    await lead(manager, "t", [LEADER])
    manager.append_records([("t", 0, batch(b"a"))], 1)
    await manager.stop_replicas(stop_replica("t", [0], delete=True), 3)
    assert counter(metrics, "messagesin", topic="t") == 1  # not pruned yet: at most every 30 s
    manager.topic_stats._pruned_at -= 60
    assert counter(metrics, "messagesin", topic="t") is None
    assert counter(metrics, "messagesin") == 1


def isr_committed(topic: str, isr: list[int], partition_epoch: int) -> AlterPartitionResponse:
    return AlterPartitionResponse(
        error_code=ErrorCode.NONE,
        topics=[
            AlterPartitionResponse.TopicData(
                topic_name=topic,
                partitions=[
                    AlterPartitionResponse.PartitionData(
                        partition_index=0,
                        error_code=ErrorCode.NONE,
                        leader_id=LEADER,
                        leader_epoch=0,
                        isr=isr,
                        partition_epoch=partition_epoch,
                    )
                ],
            )
        ],
    )


def replica_gauge(metrics: Metrics, name: str) -> float | None:
    return metrics.sample(f"kafka_server_replicamanager_{name}")


async def test_isr_shrinks_and_expands_move_the_replica_manager_gauges_and_meters(
    manager: ReplicaManager, metrics: Metrics
) -> None:
    partition = await lead(manager, "t", [LEADER, FOLLOWER])
    await lead(manager, "solo", [LEADER])
    assert replica_gauge(metrics, "partitioncount") == 2
    assert replica_gauge(metrics, "leadercount") == 2
    assert replica_gauge(metrics, "underreplicatedpartitions") == 0
    assert replica_gauge(metrics, "atminisrpartitioncount") == 1  # solo: ISR 1 = min.insync.replicas 1
    assert metrics.sample("kafka_cluster_partition_underreplicated", {"topic": "t", "partition": "0"}) == 0

    channel: Any = None  # the controller's answers are applied directly: nothing is sent
    alter = AlterPartitionManager(channel, LEADER, lambda: 0, 100, manager.on_high_watermark_may_move)
    partition.pending_isr = (LEADER,)
    alter._apply({("t", 0): partition}, isr_committed("t", [LEADER], 1))
    assert metrics.sample("kafka_server_replicamanager_isrshrinks_total") == 1
    assert replica_gauge(metrics, "underreplicatedpartitions") == 1
    assert replica_gauge(metrics, "atminisrpartitioncount") == 2
    assert replica_gauge(metrics, "underminisrpartitioncount") == 0
    assert metrics.sample("kafka_cluster_partition_underreplicated", {"topic": "t", "partition": "0"}) == 1

    partition.pending_isr = (LEADER, FOLLOWER)
    alter._apply({("t", 0): partition}, isr_committed("t", [LEADER, FOLLOWER], 2))
    assert metrics.sample("kafka_server_replicamanager_isrexpands_total") == 1
    assert metrics.sample("kafka_server_replicamanager_isrshrinks_total") == 1
    assert replica_gauge(metrics, "underreplicatedpartitions") == 0
    assert replica_gauge(metrics, "offlinereplicacount") == 0


async def test_under_min_isr_counts_leaders_below_min_insync_replicas(
    manager: ReplicaManager, metrics: Metrics
) -> None:
    partition = await lead(manager, "t", [LEADER, FOLLOWER])
    assert partition.log is not None
    partition.log.update_config(LogConfig(min_insync_replicas=2))
    partition.isr = (LEADER,)
    assert replica_gauge(metrics, "underminisrpartitioncount") == 1
    assert replica_gauge(metrics, "atminisrpartitioncount") == 0


async def test_log_gauges_and_flush_time_follow_the_log(
    manager: ReplicaManager, logs: LogManager, metrics: Metrics
) -> None:
    partition = await lead(manager, "t", [LEADER])
    records = batch(b"a", b"b", b"c")
    manager.append_records([("t", 0, records)], 1)
    labels = {"topic": "t", "partition": "0"}
    assert metrics.sample("kafka_log_log_size", labels) == len(records)
    assert metrics.sample("kafka_log_log_numlogsegments", labels) == 1
    assert metrics.sample("kafka_log_log_logstartoffset", labels) == 0
    assert metrics.sample("kafka_log_log_logendoffset", labels) == 3
    assert partition.log is not None
    partition.log.flush()
    assert metrics.sample("kafka_log_logflushstats_logflushrateandtimems_count") == 1
    partition.log.flush()  # nothing new: not a flush
    assert metrics.sample("kafka_log_logflushstats_logflushrateandtimems_count") == 1


async def test_a_follower_fetch_response_sets_its_lag_and_counts_replication_bytes_in(
    logs: LogManager,
) -> None:
    partition = Partition("t", 0, FOLLOWER)
    partition.log = logs.get_or_create_log("t", 0)
    settings = FetchSettings(FOLLOWER, 500, 1, 1 << 20, 1 << 20, 100, 30_000)
    fetcher = ReplicaFetcher(settings, LEADER, "127.0.0.1", 1, "test-fetcher")
    state = _PartitionState(partition, 0, truncating=False)
    records = bytes(encode_batch([Record(i, 0, None, b"v") for i in range(3)], base_offset=0))
    answer = FetchResponse.PartitionData(
        partition_index=0, error_code=0, high_watermark=10, log_start_offset=0, records=records
    )
    await fetcher._process(state, answer)
    assert state.lag == 7  # the leader's high watermark 10, this log ends at 3
    assert fetcher.stats.bytes_in == len(records)


async def test_records_rebuilt_for_the_topic_codec_count_as_produce_message_conversions(
    logs: LogManager,
) -> None:
    from protocol.compression import LZ4
    from tests.broker.test_produce_record_errors import TOPIC, partition_response, produce, respond, setup
    from tests.broker.test_produce_record_errors import batch as keyed_batch

    apis, manager = await setup(logs, {"compression.type": "gzip"})
    response = await respond(apis, produce({0: keyed_batch([b"a", b"b", b"c"], codec=LZ4)}))
    assert partition_response(response).error_code == ErrorCode.NONE
    assert manager.topic_stats.topic(TOPIC).produce_message_conversions == 3
    assert manager.topic_stats.all_topics.produce_message_conversions == 3
    response = await respond(apis, produce({0: keyed_batch([b"d"], codec=0)}))  # gzip asked: rebuilt too
    assert manager.topic_stats.all_topics.produce_message_conversions == 4


async def test_records_down_converted_for_an_old_fetch_count_as_fetch_message_conversions(
    logs: LogManager,
) -> None:
    from tests.broker.test_fetch_session_handler import call, fetch_request, leader
    from tests.broker.test_fetch_session_handler import produce as produce_to

    apis, manager = await leader(logs)
    produce_to(manager, 0, count=4)
    await call(apis, fetch_request({0: 0}, version=4), version=4)  # v4+: sent as stored
    assert manager.topic_stats.all_topics.fetch_message_conversions == 0
    await call(apis, fetch_request({0: 0}, version=2), version=2)
    assert manager.topic_stats.topic("t").fetch_message_conversions == 4
    assert manager.topic_stats.all_topics.bytes_out > 0
