"""The ``samsa`` source's writers driven directly, as Spark's executors and driver would call them, against
a real Samsa cluster and without a JVM: columns, the topic option, headers, failures and schema checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="PySpark is not installed (pip install -e '.[pipeline]')")
import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from pipeline.kafka import KafkaWriteError
from pipeline.source import HEADERS_TYPE, KafkaWriteCommit, SamsaDataSource, SamsaStreamWriter, kafka_schema
from tests.support.cluster import Cluster

HEADERS_ARROW = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def read_all(samsa: Cluster, topic: str) -> list[dict[str, Any]]:
    source = SamsaDataSource(
        {"kafka.bootstrap.servers": samsa.bootstrap, "subscribe": topic, "includeHeaders": "true"}
    )
    reader = source.reader(source.schema())
    return [row for p in reader.partitions() for batch in reader.read(p) for row in batch.to_pylist()]


def schema_of(batch: pa.RecordBatch) -> StructType:
    types = {
        pa.string(): StringType(),
        pa.binary(): BinaryType(),
        pa.int32(): IntegerType(),
        pa.int64(): LongType(),
        HEADERS_ARROW: HEADERS_TYPE,
    }
    return StructType([StructField(f.name, types[f.type]) for f in batch.schema])


@pytest.mark.integration
def test_batch_writer_produces_every_row_to_its_topic_and_partition(
    samsa: Cluster, new_topic: Callable[..., str]
) -> None:
    first, second = new_topic(2), new_topic(1)
    batch = pa.RecordBatch.from_pydict(
        {
            "key": ["a", None, "c", "d"],
            "value": [b"1", b"2", None, b"4"],
            "topic": [first, first, first, second],
            "partition": [1, 0, 1, None],
            "headers": [[{"key": "h", "value": b"x"}], None, [], [{"key": "n", "value": None}]],
        },
        schema=pa.schema(
            [
                ("key", pa.string()),
                ("value", pa.binary()),
                ("topic", pa.string()),
                ("partition", pa.int32()),
                ("headers", HEADERS_ARROW),
            ]
        ),
    )
    writer = SamsaDataSource({"kafka.bootstrap.servers": samsa.bootstrap}).writer(
        schema_of(batch), overwrite=False
    )
    assert writer.write(iter([batch, batch.slice(0, 1)])) == KafkaWriteCommit(5)

    got = sorted(
        (r["partition"], r["offset"], r["key"], r["value"], r["headers"]) for r in read_all(samsa, first)
    )
    assert got == [
        (0, 0, None, b"2", None),
        (1, 0, b"a", b"1", [{"key": "h", "value": b"x"}]),
        (1, 1, b"c", None, None),
        (1, 2, b"a", b"1", [{"key": "h", "value": b"x"}]),
    ]
    assert [(r["key"], r["value"], r["headers"]) for r in read_all(samsa, second)] == [
        (b"d", b"4", [{"key": "n", "value": None}])
    ]


@pytest.mark.integration
def test_the_topic_option_wins_over_the_topic_column(samsa: Cluster, new_topic: Callable[..., str]) -> None:
    target = new_topic(1)
    batch = pa.RecordBatch.from_pydict({"value": ["x", "y"], "topic": ["elsewhere", None]})
    source = SamsaDataSource({"kafka.bootstrap.servers": samsa.bootstrap, "topic": target})
    writer = source.streamWriter(schema_of(batch), overwrite=False)
    assert isinstance(writer, SamsaStreamWriter)
    messages = [writer.write(iter([batch])), writer.write(iter([batch.slice(1)]))]
    writer.commit(messages, batchId=0)  # the driver's side: nothing to undo or publish
    assert [r["value"] for r in read_all(samsa, target)] == [b"x", b"y", b"y"]


@pytest.mark.integration
def test_an_undeliverable_row_fails_the_task(samsa: Cluster, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    batch = pa.RecordBatch.from_pydict({"value": ["x"], "partition": pa.array([7], pa.int32())})
    writer = SamsaDataSource({"kafka.bootstrap.servers": samsa.bootstrap, "topic": topic}).writer(
        schema_of(batch), overwrite=False
    )
    with pytest.raises(KafkaWriteError, match=r"(?i)unknown partition"):
        writer.write(iter([batch]))


@pytest.mark.parametrize(
    ("fields", "options", "message"),
    [
        ([("key", StringType())], {"topic": "t"}, "required attribute 'value' not found"),
        (
            [("value", LongType())],
            {"topic": "t"},
            "value attribute type must be string or binary, not bigint",
        ),
        (
            [("value", StringType()), ("key", IntegerType())],
            {"topic": "t"},
            "key attribute type must be string",
        ),
        (
            [("value", StringType()), ("topic", BinaryType())],
            {},
            "topic attribute type must be string, not binary",
        ),
        (
            [("value", StringType()), ("partition", LongType())],
            {"topic": "t"},
            "partition attribute type must be int",
        ),
        (
            [("value", StringType()), ("headers", ArrayType(StringType()))],
            {"topic": "t"},
            "headers attribute type",
        ),
        ([("value", StringType())], {}, "topic option required"),
    ],
)
def test_the_written_columns_are_checked_before_any_task_runs(
    fields: list[tuple[str, Any]], options: dict[str, str], message: str
) -> None:
    source = SamsaDataSource({"kafka.bootstrap.servers": "127.0.0.1:1", **options})
    schema = StructType([StructField(name, kind) for name, kind in fields])
    for make in (source.writer, source.streamWriter):
        with pytest.raises(ValueError, match=message):
            make(schema, False)


def test_a_topic_cannot_be_overwritten() -> None:
    source = SamsaDataSource({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"})
    with pytest.raises(ValueError, match="cannot be overwritten"):
        source.writer(kafka_schema(), overwrite=True)
