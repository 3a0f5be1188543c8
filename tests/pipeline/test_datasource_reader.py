"""The ``samsa`` source's readers driven directly, as Spark's driver and executors would call them, against
a real Samsa cluster and without a JVM: partition plans, offsets, rate limits, AvailableNow, new partitions,
data loss after DeleteRecords, gaps left by transactions, and timeouts."""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="PySpark is not installed (pip install -e '.[pipeline]')")
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from pipeline.kafka import DataLossError
from pipeline.source import KafkaRange, SamsaDataSource, SamsaStreamReader
from tests.pipeline.util import produce
from tests.support.cluster import Cluster, free_port

BASE_MS = 1_700_000_000_000


def options(samsa: Cluster, **extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": samsa.bootstrap, "kafka.client.id": "reader-test", **extra}


def batch_read(opts: dict[str, str]) -> tuple[list[Any], list[dict[str, Any]]]:
    """The plan and the rows of a batch read, each range read separately as an executor would."""
    source = SamsaDataSource(opts)
    reader = source.reader(source.schema())
    plan = reader.partitions()
    rows = [row for partition in plan for batch in reader.read(partition) for row in batch.to_pylist()]
    return plan, rows


def stream_reader(opts: dict[str, str]) -> SamsaStreamReader:
    source = SamsaDataSource(opts)
    reader = source.streamReader(source.schema())
    assert isinstance(reader, SamsaStreamReader)
    return reader


def read_planned(reader: Any, start: dict, end: dict) -> list[tuple[int, int]]:
    """(partition, offset) of every row a micro-batch from ``start`` to ``end`` reads."""
    return [
        (row["partition"], row["offset"])
        for partition in reader.partitions(start, end)
        for batch in reader.read(partition)
        for row in batch.to_pylist()
    ]


@pytest.mark.integration
def test_batch_read_gives_every_record_with_the_built_in_columns(
    samsa: Cluster, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(3)
    records = []
    for i in range(30):
        record: dict[str, Any] = {"value": f"v{i}".encode(), "partition": i % 3, "timestamp": BASE_MS + i}
        if i % 5:
            record["key"] = f"k{i}".encode()
        if i % 4 == 0:
            record["headers"] = [("h", str(i).encode()), ("empty", None)]
        records.append(record)
    produce(samsa.bootstrap, topic, records)

    plan, rows = batch_read(options(samsa, subscribe=topic, includeHeaders="true"))

    assert plan == [KafkaRange(topic, p, 0, 10) for p in range(3)]
    expected = [
        {
            "key": r.get("key"),
            "value": r["value"],
            "topic": topic,
            "partition": r["partition"],
            "offset": i // 3,
            "timestamp": datetime.fromtimestamp(r["timestamp"] / 1000, UTC),
            "timestampType": 0,
            "headers": [{"key": k, "value": v} for k, v in r["headers"]] if "headers" in r else None,
        }
        for i, r in enumerate(records)
    ]
    order = lambda row: (row["partition"], row["offset"])  # noqa: E731
    assert sorted(rows, key=order) == sorted(expected, key=order)
    assert "headers" not in batch_read(options(samsa, subscribe=topic))[1][0]


@pytest.mark.integration
def test_batch_offsets_json_timestamps_assign_pattern_and_min_partitions(
    samsa: Cluster, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(2, prefix="bounds")
    produce(
        samsa.bootstrap,
        topic,
        ({"value": b"x", "partition": i % 2, "timestamp": BASE_MS + i // 2} for i in range(40)),
    )

    plan, rows = batch_read(
        options(
            samsa,
            subscribe=topic,
            startingOffsets=f'{{"{topic}":{{"0":5,"1":-2}}}}',
            endingOffsets=f'{{"{topic}":{{"0":-1,"1":12}}}}',
            minPartitions="4",
        )
    )
    # 15 and 12 offsets: ceil(15/27*4) = 3 pieces and ceil(12/27*4) = 2
    assert plan == [
        KafkaRange(topic, 0, 5, 10),
        KafkaRange(topic, 0, 10, 15),
        KafkaRange(topic, 0, 15, 20),
        KafkaRange(topic, 1, 0, 6),
        KafkaRange(topic, 1, 6, 12),
    ]
    assert sorted((r["partition"], r["offset"]) for r in rows) == [(0, o) for o in range(5, 20)] + [
        (1, o) for o in range(12)
    ]

    # every partition from the first record at or after the timestamp (offset 15 in each)
    _, rows = batch_read(options(samsa, subscribe=topic, startingTimestamp=str(BASE_MS + 15)))
    assert sorted((r["partition"], r["offset"]) for r in rows) == [
        (p, o) for p in (0, 1) for o in range(15, 20)
    ]
    with pytest.raises(ValueError, match="no offset at or after timestamp"):
        batch_read(options(samsa, subscribe=topic, startingTimestamp=str(BASE_MS + 10**6)))
    plan, rows = batch_read(
        options(
            samsa,
            subscribe=topic,
            startingTimestamp=str(BASE_MS + 10**6),
            startingOffsetsByTimestampStrategy="latest",
        )
    )
    assert plan == [] and rows == []

    plan, _ = batch_read(options(samsa, assign=f'{{"{topic}":[1]}}'))
    assert plan == [KafkaRange(topic, 1, 0, 20)]
    plan, _ = batch_read(options(samsa, subscribePattern="bounds-.*"))
    assert KafkaRange(topic, 0, 0, 20) in plan and KafkaRange(topic, 1, 0, 20) in plan
    with pytest.raises(ValueError, match="must name every subscribed partition"):
        batch_read(options(samsa, subscribe=topic, startingOffsets=f'{{"{topic}":{{"0":0}}}}'))
    with pytest.raises(ValueError, match="before the start"):
        batch_read(
            options(
                samsa,
                subscribe=topic,
                startingOffsets=f'{{"{topic}":{{"0":9,"1":0}}}}',
                endingOffsets=f'{{"{topic}":{{"0":3,"1":0}}}}',
            )
        )


@pytest.mark.integration
def test_stream_reader_rate_limits_stops_at_the_available_now_target_and_finds_new_partitions(
    samsa: Cluster, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(2)
    produce(samsa.bootstrap, topic, ({"value": b"x", "partition": 0 if i < 30 else 1} for i in range(40)))
    reader = stream_reader(
        options(samsa, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="20")
    )
    initial = reader.initialOffset()
    assert initial == {topic: {"0": 0, "1": 0}}
    assert reader.getDefaultReadLimit() == ReadMaxRows(20)

    reader.prepareForTriggerAvailableNow()
    produce(samsa.bootstrap, topic, ({"value": b"y", "partition": 1} for _ in range(10)))  # after the target

    first = reader.latestOffset(initial, ReadMaxRows(20))
    assert first == {topic: {"0": 15, "1": 5}}  # backlogs 30 and 10 share the 20 rows
    assert reader.partitions(initial, first) == [KafkaRange(topic, 0, 0, 15), KafkaRange(topic, 1, 0, 5)]
    # the executors get a pickled copy of the reader, without the driver's admin client
    executor_copy = pickle.loads(pickle.dumps(reader))
    assert len(read_planned(executor_copy, initial, first)) == 20
    second = reader.latestOffset(first, ReadMaxRows(20))
    assert second == {topic: {"0": 30, "1": 10}}
    assert reader.latestOffset(second, ReadMaxRows(20)) == second  # AvailableNow is done
    assert reader.reportLatestOffset() == {topic: {"0": 30, "1": 10}}

    # without AvailableNow, the 10 later records are there; a partition added now is read from 0
    live = stream_reader(options(samsa, subscribe=topic))
    assert live.initialOffset() == {topic: {"0": 30, "1": 20}}  # startingOffsets defaults to latest
    admin = AdminClient({"bootstrap.servers": samsa.bootstrap})
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(20)
    samsa.wait_for_leaders(topic, 3)
    produce(samsa.bootstrap, topic, ({"value": b"z", "partition": 2} for _ in range(3)))
    latest = live.latestOffset(second, ReadAllAvailable())
    assert latest == {topic: {"0": 30, "1": 20, "2": 3}}
    assert sorted(read_planned(live, second, latest)) == [(1, o) for o in range(10, 20)] + [
        (2, 0),
        (2, 1),
        (2, 2),
    ]
    live.stop()
    reader.stop()


@pytest.mark.integration
def test_streaming_start_by_timestamp_and_offsets_json(samsa: Cluster, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    produce(samsa.bootstrap, topic, ({"value": b"x", "timestamp": BASE_MS + i * 10} for i in range(10)))
    by_time = stream_reader(options(samsa, subscribe=topic, startingTimestamp=str(BASE_MS + 35)))
    assert by_time.initialOffset() == {topic: {"0": 4}}
    by_json = stream_reader(options(samsa, subscribe=topic, startingOffsets=f'{{"{topic}":{{"0":-1}}}}'))
    assert by_json.initialOffset() == {topic: {"0": 10}}


@pytest.mark.integration
def test_records_deleted_before_the_range_are_data_loss(
    samsa: Cluster, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    produce(samsa.bootstrap, topic, ({"value": str(i).encode()} for i in range(50)))
    admin = AdminClient({"bootstrap.servers": samsa.bootstrap})
    deleted = admin.delete_records([TopicPartition(topic, 0, 20)])
    assert next(iter(deleted.values())).result(20).low_watermark == 20
    everything = {"startingOffsets": f'{{"{topic}":{{"0":0}}}}', "kafkaConsumer.pollTimeoutMs": "10000"}

    with pytest.raises(DataLossError, match=f"offsets 0 to 19 of {topic}-0 are gone"):
        batch_read(options(samsa, subscribe=topic, **everything))
    _, rows = batch_read(options(samsa, subscribe=topic, failOnDataLoss="false", **everything))
    assert [r["offset"] for r in rows] == list(range(20, 50))
    assert [r["value"] for r in rows] == [str(i).encode() for i in range(20, 50)]

    # a range entirely deleted reads as nothing without failOnDataLoss
    reader = stream_reader(options(samsa, subscribe=topic, failOnDataLoss="false"))
    assert read_planned(reader, {topic: {"0": 0}}, {topic: {"0": 10}}) == []
    # offsets that went back, and partitions that vanished
    strict = stream_reader(options(samsa, subscribe=topic))
    with pytest.raises(DataLossError, match="went back from offset 99 to 50"):
        strict.latestOffset({topic: {"0": 99}}, ReadAllAvailable())
    with pytest.raises(DataLossError, match="no longer exist"):
        strict.latestOffset({topic: {"0": 50}, "gone": {"0": 3}}, ReadAllAvailable())
    assert reader.latestOffset({topic: {"0": 50}, "gone": {"0": 3}}, ReadAllAvailable()) == {topic: {"0": 50}}


@pytest.mark.integration
def test_offsets_compacted_away_are_gaps_not_timeouts(samsa: Cluster) -> None:
    topic = "compacted"
    admin = AdminClient({"bootstrap.servers": samsa.bootstrap})
    config = {"cleanup.policy": "compact", "segment.bytes": "300", "min.cleanable.dirty.ratio": "0.01"}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(20)
    samsa.wait_for_leaders(topic, 1)
    producer = Producer({"bootstrap.servers": samsa.bootstrap})
    for i in range(40):  # one batch each, so that segments roll and the cleaner has work
        producer.produce(topic, key=f"k{i % 4}".encode(), value=f"v{i}".encode())
        producer.flush()
    opts = options(samsa, subscribe=topic, **{"kafkaConsumer.pollTimeoutMs": "5000"})
    deadline = time.monotonic() + 30
    while len(rows := batch_read(opts)[1]) == 40:
        assert time.monotonic() < deadline, "the log was not compacted within 30 s"
        time.sleep(0.2)

    offsets = [r["offset"] for r in rows]
    assert offsets == sorted(offsets) and offsets[-1] == 39
    latest = {r["key"]: r["value"] for r in rows}
    assert latest == {f"k{k}".encode(): f"v{36 + k}".encode() for k in range(4)}
    # a range that ends inside a gap ends there, without waiting for the poll timeout
    missing = next(o for o in range(40) if o not in offsets)
    started = time.monotonic()
    _, cut = batch_read(
        {
            **opts,
            "startingOffsets": f'{{"{topic}":{{"0":0}}}}',
            "endingOffsets": f'{{"{topic}":{{"0":{missing + 1}}}}}',
        }
    )
    assert [r["offset"] for r in cut] == [o for o in offsets if o <= missing]
    assert time.monotonic() - started < 4


@pytest.mark.integration
def test_a_range_past_the_end_of_the_partition_times_out(
    samsa: Cluster, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    produce(samsa.bootstrap, topic, ({"value": b"x"} for _ in range(10)))
    opts = options(samsa, subscribe=topic, **{"kafkaConsumer.pollTimeoutMs": "1000"})
    opts["endingOffsets"] = f'{{"{topic}":{{"0":15}}}}'
    started = time.monotonic()
    with pytest.raises(
        TimeoutError, match=f"no record of {topic}-0 at offset 10 .* the partition ends at 10"
    ):
        batch_read(opts)
    assert time.monotonic() - started < 10


def test_an_unreachable_broker_fails_the_plan_within_the_timeout() -> None:
    opts = {
        "kafka.bootstrap.servers": f"127.0.0.1:{free_port()}",
        "subscribe": "t",
        "kafkaConsumer.pollTimeoutMs": "1500",
    }
    started = time.monotonic()
    with pytest.raises(Exception, match=r"(?i)timed out|transport|connect"):
        batch_read(opts)
    assert time.monotonic() - started < 10
