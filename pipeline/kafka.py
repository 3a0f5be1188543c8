"""The data source's Kafka-protocol work, through confluent-kafka (librdkafka), with no Spark in it.

- ``OffsetReader`` runs on the driver: which partitions a subscription covers and their earliest,
  latest or by-timestamp offsets (ListOffsets through the AdminClient).
- ``read_range`` runs on an executor: one partition's ``[start, end)`` read by a consumer that is
  assigned and positioned (no group membership, nothing committed), returned as Arrow record batches.
- ``write_batches`` runs on an executor: Arrow batches of rows produced by an idempotent producer
  (at least once; ``records_of`` turns the rows into records, also for pipeline.topic_sink).

Offsets here are ``{(topic, partition): offset}``; Spark checkpoints them as the built-in connector's
JSON layout ``{"topic": {"0": offset}}`` (``to_json_offsets``/``from_json_offsets``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from pipeline.options import EARLIEST, LATEST, OffsetBound, ReadOptions, WriteOptions

log = logging.getLogger(__name__)

TP = tuple[str, int]

# librdkafka's timestamp types (Message.timestamp()[0]) -> Kafka's TimestampType ids, which the
# built-in connector's timestampType column holds.
_TIMESTAMP_TYPE = {1: 0, 2: 1}
_BATCH_ROWS = 8192
# consume() waits for all the rows it asks for or its timeout, so it is asked often: a range that ends
# in a gap, or a batch that is all there is, returns within this.
_POLL_S = 0.1


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, DeleteRecords, a deleted topic) and
    ``failOnDataLoss`` is true."""


class KafkaWriteError(RuntimeError):
    """A record could not be delivered; the task fails and Spark retries it."""


def to_json_offsets(offsets: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json_offsets(offsets: Mapping[str, Mapping[str, int]]) -> dict[TP, int]:
    return {(t, int(p)): int(o) for t, ps in offsets.items() for p, o in ps.items()}


def _isolation(config: Mapping[str, str]) -> str:
    # Java's default, and the built-in connector's; librdkafka's own default is read_committed.
    return config.get("isolation.level", "read_uncommitted")


class OffsetReader:
    """The driver's view of the subscribed partitions and their offsets; the admin client is created
    on first use and never pickled."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._admin: AdminClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "_admin": None}

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(dict(self.options.client))
        return self._admin

    @property
    def timeout_s(self) -> float:
        return self.options.poll_timeout_ms / 1000

    def close(self) -> None:
        self._admin = None

    def partitions(self) -> list[TP]:
        """The subscription's partitions that exist now."""
        metadata = self.admin.list_topics(timeout=self.timeout_s)
        subscription = self.options.subscription
        found: list[TP] = []
        for topic in subscription.select_topics(metadata.topics):
            described = metadata.topics[topic]
            if described.error is not None:
                raise KafkaException(described.error)
            found += [(topic, p) for p in subscription.select_partitions(topic, described.partitions)]
        return found

    def _list(self, tps: Iterable[TP], spec: OffsetSpec) -> dict[TP, int]:
        tps = list(tps)
        if not tps:
            return {}
        level = (
            IsolationLevel.READ_COMMITTED
            if _isolation(self.options.client) == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )
        wanted = {TopicPartition(t, p): spec for t, p in tps}
        futures = self.admin.list_offsets(wanted, isolation_level=level, request_timeout=self.timeout_s)
        return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}

    def earliest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self._list(tps, OffsetSpec.earliest())

    def latest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self._list(tps, OffsetSpec.latest())

    def for_timestamp(self, tps: Iterable[TP], timestamp_ms: int) -> dict[TP, int]:
        """The first offset whose timestamp is at or after ``timestamp_ms``, per partition; where
        there is none, what ``startingOffsetsByTimestampStrategy`` says (error, or latest)."""
        found = self._list(tps, OffsetSpec.for_timestamp(timestamp_ms))
        missing = [tp for tp, offset in found.items() if offset < 0]
        if missing and self.options.timestamp_strategy == "error":
            raise ValueError(
                f"no offset at or after timestamp {timestamp_ms} in {sorted(missing)} "
                "(set startingOffsetsByTimestampStrategy=latest to start those at the latest offset)"
            )
        return found | self.latest(missing)

    def resolve(self, bound: OffsetBound, tps: list[TP]) -> dict[TP, int]:
        """Concrete offsets for ``bound`` on ``tps`` (a JSON bound must name every one of them)."""
        if bound.kind == "earliest":
            return self.earliest(tps)
        if bound.kind == "latest":
            return self.latest(tps)
        if bound.kind == "timestamp":
            assert bound.timestamp_ms is not None
            return self.for_timestamp(tps, bound.timestamp_ms)
        given = {(t, p): o for t, ps in bound.offsets.items() for p, o in ps.items()}
        missing = sorted(set(tps) - set(given))
        if missing:
            raise ValueError(f"the offsets JSON must name every subscribed partition; missing {missing}")
        unknown = sorted(set(given) - set(tps))
        if unknown:
            raise ValueError(f"the offsets JSON names partitions not subscribed or not existing: {unknown}")
        earliest = self.earliest(tp for tp, o in given.items() if o == EARLIEST)
        latest = self.latest(tp for tp, o in given.items() if o == LATEST)
        return {tp: earliest.get(tp, latest.get(tp, o)) for tp, o in given.items()}


def _consumer_config(options: ReadOptions) -> dict[str, Any]:
    return {
        # The Python binding insists on a group id; with assign() and no commits it is never joined.
        "group.id": f"spark-samsa-{uuid.uuid4().hex}",
        "isolation.level": _isolation(options.client),
        **options.client,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # A position outside the log is data loss, not a reason to jump: the reader decides.
        "auto.offset.reset": "error",
        # The end of the partition tells a range whose last offsets are transaction markers or
        # compacted away from one whose records have not arrived yet.
        "enable.partition.eof": True,
    }


class _Columns:
    """Rows of one partition collected column by column, turned into an Arrow batch."""

    def __init__(self, schema: pa.Schema, topic: str, partition: int, headers: bool) -> None:
        self.schema, self.topic, self.partition, self.headers = schema, topic, partition, headers
        self.clear()

    def clear(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[int] = []
        self.header_lists: list[list[dict[str, Any]] | None] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, message: Any) -> None:
        self.keys.append(message.key())
        self.values.append(message.value())
        self.offsets.append(message.offset())
        kind, ms = message.timestamp()
        self.timestamps.append(ms * 1000)
        self.timestamp_types.append(_TIMESTAMP_TYPE.get(kind, -1))
        if self.headers:
            found = message.headers()
            self.header_lists.append([{"key": k, "value": v} for k, v in found] if found else None)

    def batch(self) -> pa.RecordBatch:
        n = len(self.offsets)
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array([self.topic] * n, pa.string()),
            pa.array([self.partition] * n, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps, self.schema.field("timestamp").type),
            pa.array(self.timestamp_types, pa.int32()),
        ]
        if self.headers:
            arrays.append(pa.array(self.header_lists, self.schema.field("headers").type))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self.clear()
        return batch


def read_range(
    options: ReadOptions, schema: pa.Schema, topic: str, partition: int, start: int, end: int
) -> Iterator[pa.RecordBatch]:
    """The records of ``topic``-``partition`` at offsets ``[start, end)``, as batches of ``schema``.

    Offsets missing inside the range (compaction, transaction markers) are skipped. A range that
    starts before the log start offset is data loss: an error with ``failOnDataLoss``, otherwise the
    read goes on from the log start. No progress for ``kafkaConsumer.pollTimeoutMs`` is a TimeoutError.
    """
    if start >= end:
        return
    timeout = options.poll_timeout_ms / 1000
    columns = _Columns(schema, topic, partition, options.include_headers)
    consumer = Consumer(_consumer_config(options))
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        position, high_watermark = start, None
        deadline = time.monotonic() + timeout
        while position < end:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                seen = "" if high_watermark is None else f"; the partition ends at {high_watermark}"
                raise TimeoutError(
                    f"no record of {topic}-{partition} at offset {position} (reading up to {end}) within "
                    f"{options.poll_timeout_ms} ms{seen}"
                )
            before = position
            for message in consumer.consume(min(_BATCH_ROWS, end - position), min(remaining, _POLL_S)):
                error = message.error()
                offset = message.offset()  # None only for errors that name no partition
                if error is None:
                    assert offset is not None  # a record has an offset
                    if offset >= end:  # past a gap at the end of the range
                        position = end
                    elif offset >= position:
                        columns.add(message)
                        position = offset + 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    assert offset is not None  # the end of a partition carries its offset
                    high_watermark = offset
                    if high_watermark >= end:  # the rest are markers or compacted away
                        position = end
                elif error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    position = _skip_lost(options, consumer, topic, partition, position, end, error)
                    break
                else:
                    raise KafkaException(error)
                if position >= end:
                    break
            if position > before:
                deadline = time.monotonic() + timeout
            if len(columns) >= _BATCH_ROWS:
                yield columns.batch()
        if columns:
            yield columns.batch()
    finally:
        consumer.close()


def _skip_lost(
    options: ReadOptions, consumer: Consumer, topic: str, partition: int, position: int, end: int, error: Any
) -> int:
    """Where to go on after ``position`` fell out of the log: raises DataLossError (failOnDataLoss)
    or moves the consumer to the log start offset and returns it."""
    low, _ = consumer.get_watermark_offsets(TopicPartition(topic, partition), options.poll_timeout_ms / 1000)
    if low <= position:  # out of range above the log end (a truncation): nothing sane to skip to
        raise KafkaException(error)
    lost = f"offsets {position} to {min(low, end) - 1} of {topic}-{partition} are gone (log start {low})"
    if options.fail_on_data_loss:
        raise DataLossError(f"{lost}; set failOnDataLoss=false to skip them")
    log.warning("%s; skipping them", lost)
    if low < end:
        consumer.assign([TopicPartition(topic, partition, low)])
    return low


def _producer_config(options: WriteOptions) -> dict[str, Any]:
    return {"enable.idempotence": True, "acks": "all", "linger.ms": 5, **options.client}


def _as_bytes(value: Any) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def records_of(options: WriteOptions, batch: pa.RecordBatch) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each row of ``batch`` as ``(topic, keyword arguments of Producer.produce)``.

    Columns as in the built-in connector: ``value`` (string or binary, required), optional ``key``,
    ``topic`` (unless the ``topic`` option is set, which wins), ``partition`` and ``headers``.
    """
    columns = {name: batch.column(name).to_pylist() for name in batch.schema.names}
    n = batch.num_rows
    values = columns["value"]
    keys = columns.get("key", [None] * n)
    topics = [options.topic] * n if options.topic else columns["topic"]
    partitions = columns.get("partition", [None] * n)
    headers = columns.get("headers", [None] * n)
    for value, key, topic, partition, header in zip(values, keys, topics, partitions, headers, strict=True):
        if topic is None:
            raise ValueError("a row has a null topic and no 'topic' option is set")
        record: dict[str, Any] = {"value": _as_bytes(value), "key": _as_bytes(key)}
        if partition is not None:
            record["partition"] = partition
        if header:
            record["headers"] = [(h["key"], _as_bytes(h["value"])) for h in header]
        yield topic, record


def produce_waiting(producer: Producer, topic: str, record: dict[str, Any]) -> None:
    """``producer.produce`` that waits for room when the local queue is full."""
    while True:
        try:
            producer.produce(topic, **record)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.1)


def write_batches(options: WriteOptions, batches: Iterable[pa.RecordBatch]) -> int:
    """Produces every row of ``batches`` (columns as ``records_of`` reads them) and waits for all of
    them; returns how many were written. At least once: pipeline.topic_sink is the transactional path.
    """
    producer = Producer(_producer_config(options))
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    written = 0
    for batch in batches:
        for topic, record in records_of(options, batch):
            produce_waiting(producer, topic, {**record, "on_delivery": delivered})
            if failures:
                raise KafkaWriteError(f"writing to {topic} failed: {failures[0]}")
        written += batch.num_rows
        producer.poll(0)
    producer.flush()
    if failures:
        raise KafkaWriteError(f"{len(failures)} records were not written: {failures[0]}")
    return written


def ensure_topic(
    config: Mapping[str, str], topic: str, partitions: int, replication_factor: int, timeout_s: float = 30.0
) -> bool:
    """Creates ``topic`` unless it exists and waits until every partition has a leader; returns
    whether it was created."""
    admin = AdminClient(dict(config))
    created = False
    if topic not in admin.list_topics(timeout=timeout_s).topics:
        future = admin.create_topics([NewTopic(topic, partitions, replication_factor)])[topic]
        try:
            future.result(timeout_s)
            created = True
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    deadline = time.monotonic() + timeout_s
    while True:
        found = admin.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if (
            found is not None
            and found.error is None
            and all(p.leader >= 0 for p in found.partitions.values())
        ):
            return created
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic} has partitions without a leader after {timeout_s} s")
        time.sleep(0.1)
