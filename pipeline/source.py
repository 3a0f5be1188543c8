"""The ``samsa`` Spark data source: Kafka-protocol topics as DataFrames, batch and streaming, both ways.

Register it with ``spark.dataSource.register(SamsaDataSource)`` (``pipeline.spark.session`` does), then
use ``format("samsa")`` wherever Spark's built-in connector would take ``format("kafka")``: the same
columns and option names (docs/pipeline.md lists them).

Where the code runs matters. The stream reader lives twice: once in the driver's long-lived Python
runner (``initialOffset``, ``latestOffset``, ``partitions``, ``commit``) and once pickled to the
executors, where only ``read`` is called. So constructors do no I/O, the driver's admin client is
created lazily and never pickled, and every ``read``/``write`` opens its own client.

Offsets are checkpointed by Spark, never committed to a consumer group: a micro-batch is planned as
``{"topic": {"partition": next offset}}`` ranges written to ``offsets/N`` before it runs, so a batch
replayed after a crash reads exactly the same records.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pipeline.kafka import (
    TP,
    DataLossError,
    OffsetReader,
    from_json_offsets,
    read_range,
    to_json_offsets,
    write_batches,
)
from pipeline.options import (
    ReadOptions,
    WriteOptions,
    include_headers,
    parse_read_options,
    parse_write_options,
)

log = logging.getLogger(__name__)

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def kafka_schema(include_headers: bool = False) -> StructType:
    """The built-in connector's read schema; ``headers`` only with ``includeHeaders``."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


@dataclass
class KafkaRange(InputPartition):
    """One Spark input partition: offsets ``[start, end)`` of one Kafka partition."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass
class KafkaWriteCommit(WriterCommitMessage):
    records: int


def split_ranges(ranges: Sequence[KafkaRange], min_partitions: int | None) -> list[KafkaRange]:
    """One input partition per range, or with ``minPartitions`` more than there are ranges, each
    range cut into pieces in proportion to its share of all the offsets."""
    if not min_partitions or len(ranges) >= min_partitions:
        return list(ranges)
    total = sum(r.end - r.start for r in ranges)
    pieces: list[KafkaRange] = []
    for r in ranges:
        size = r.end - r.start
        parts = min(size, max(1, math.ceil(size / total * min_partitions)))
        bounds = [r.start + size * i // parts for i in range(parts + 1)]
        pieces += [KafkaRange(r.topic, r.partition, a, b) for a, b in itertools.pairwise(bounds)]
    return pieces


def rate_limit(start: dict[TP, int], end: dict[TP, int], max_rows: int) -> dict[TP, int]:
    """``end`` moved back so that at most about ``max_rows`` offsets are read, shared among the
    partitions in proportion to their backlog; a partition with any backlog advances by at least one."""
    backlog = {tp: e - start.get(tp, 0) for tp, e in end.items() if e > start.get(tp, 0)}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(end)
    limited = dict(end)
    for tp, size in backlog.items():
        share = max_rows * size / total
        limited[tp] = min(end[tp], start.get(tp, 0) + (math.ceil(share) if share < 1 else math.floor(share)))
    return limited


def _read(options: ReadOptions, schema: StructType, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, KafkaRange):  # Spark's stand-in when a batch plan has no ranges
        return iter(())
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    return read_range(
        options, arrow_schema, partition.topic, partition.partition, partition.start, partition.end
    )


class SamsaBatchReader(DataSourceReader):
    """``spark.read.format("samsa")``: ``startingOffsets`` to ``endingOffsets``, resolved once."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options, self.schema = options, schema

    def partitions(self) -> Sequence[InputPartition]:
        offsets = OffsetReader(self.options)
        try:
            tps = offsets.partitions()
            starts = offsets.resolve(self.options.starting, tps)
            ends = offsets.resolve(self.options.ending, tps)
        finally:
            offsets.close()
        ranges = []
        for tp in tps:
            if ends[tp] < starts[tp]:
                raise ValueError(
                    f"{tp[0]}-{tp[1]}: ending offset {ends[tp]} is before the start {starts[tp]}"
                )
            if ends[tp] > starts[tp]:
                ranges.append(KafkaRange(tp[0], tp[1], starts[tp], ends[tp]))
        return split_ranges(ranges, self.options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, self.schema, partition)


class SamsaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("samsa")``: micro-batches of offset ranges, rate limited by
    ``maxOffsetsPerTrigger``; with ``trigger(availableNow=True)`` it stops at the offsets that were
    the latest when the query started."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options, self.schema = options, schema
        self.offsets = OffsetReader(options)
        self._target: dict[TP, int] | None = None
        self._latest: dict[TP, int] | None = None

    def initialOffset(self) -> dict:
        return to_json_offsets(self.offsets.resolve(self.options.starting, self.offsets.partitions()))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.offsets.latest(self.offsets.partitions())

    def _data_loss(self, message: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(f"{message}; set failOnDataLoss=false to go on without it")
        log.warning("%s; going on without it (failOnDataLoss=false)", message)

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        # Both parameters are optional so that Spark before 4.2 (which passes neither) still works.
        begin = from_json_offsets(start or {})
        if self._target is not None:
            latest = dict(self._target)
        else:
            latest = self.offsets.latest(self.offsets.partitions())
        self._latest = latest
        gone = sorted(set(begin) - set(latest))
        if gone:
            self._data_loss(f"partitions {gone} no longer exist")
        for tp, offset in sorted(latest.items()):
            if offset < begin.get(tp, 0):
                self._data_loss(f"{tp[0]}-{tp[1]} went back from offset {begin[tp]} to {offset}")
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        return to_json_offsets(latest)

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else to_json_offsets(self._latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, finish = from_json_offsets(start), from_json_offsets(end)
        # A partition new since the last batch is read from offset 0, as the built-in connector does:
        # if retention already removed some of it, the read reports that as data loss.
        ranges = [
            KafkaRange(tp[0], tp[1], begin.get(tp, 0), e)
            for tp, e in sorted(finish.items())
            if e > begin.get(tp, 0)
        ]
        return split_ranges(ranges, self.options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, self.schema, partition)

    def commit(self, end: dict) -> None:
        log.debug("batch up to %s done", end)

    def stop(self) -> None:
        self.offsets.close()


def check_write_schema(schema: StructType, options: WriteOptions) -> None:
    """The built-in connector's rules for the columns of a DataFrame written to Kafka."""
    types = {f.name: f.dataType for f in schema.fields}
    text_or_bytes = (StringType, BinaryType)
    if "value" not in types:
        raise ValueError("required attribute 'value' not found")
    for name, allowed, said in (
        ("value", text_or_bytes, "string or binary"),
        ("key", text_or_bytes, "string or binary"),
        ("topic", (StringType,), "string"),
    ):
        if name in types and not isinstance(types[name], allowed):
            raise ValueError(f"{name} attribute type must be {said}, not {types[name].simpleString()}")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise ValueError(f"partition attribute type must be int, not {types['partition'].simpleString()}")
    # simpleString leaves nullability out: a headers column built with named_struct is non-nullable.
    if "headers" in types and types["headers"].simpleString() != HEADERS_TYPE.simpleString():
        raise ValueError(f"headers attribute type must be {HEADERS_TYPE.simpleString()}")
    if options.topic is None and "topic" not in types:
        raise ValueError("topic option required when no 'topic' attribute is present")


class SamsaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("samsa").mode("append")``: every task produces its rows and waits for them."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaWriteCommit:
        return KafkaWriteCommit(write_batches(self.options, iterator))


class SamsaStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("samsa")``: at least once, like the built-in sink. A task retried, or a
    batch replayed after a crash, produces its rows again (the idempotent producer removes only
    its own retries); consumers that need exactly once deduplicate by key, or the query writes through
    ``foreachBatch(pipeline.topic_sink.TransactionalTopicSink(...))`` (one transaction per batch)."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaWriteCommit:
        return KafkaWriteCommit(write_batches(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        written = sum(m.records for m in messages if isinstance(m, KafkaWriteCommit))
        log.info("batch %d: %d records written", batchId, written)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("batch %d aborted; what its finished tasks wrote stays in the topic", batchId)


class SamsaDataSource(DataSource):
    """The ``samsa`` format: Spark's Kafka connector in Python, for any Kafka-protocol broker."""

    @classmethod
    def name(cls) -> str:
        return "samsa"

    def schema(self) -> StructType:
        return kafka_schema(include_headers(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        return SamsaBatchReader(parse_read_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SamsaStreamReader(parse_read_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> SamsaBatchWriter:
        if overwrite:
            raise ValueError("a Kafka topic cannot be overwritten: use mode('append')")
        options = parse_write_options(self.options)
        check_write_schema(schema, options)
        return SamsaBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> SamsaStreamWriter:
        options = parse_write_options(self.options)
        check_write_schema(schema, options)
        return SamsaStreamWriter(options)
