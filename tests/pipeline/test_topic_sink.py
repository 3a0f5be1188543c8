"""The exactly-once topic sink (pipeline.topic_sink), without a JVM. With fake clients: its identity from
the checkpoint, one transaction per batch holding the rows and the next batch id, replayed batches
skipped, and what each kind of Kafka error does. Against a real cluster: a replayed batch written once,
a zombie driver fenced, a crashed driver's open transaction aborted."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[pipeline]')")
pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from pipeline.options import WriteOptions
from pipeline.topic_sink import (
    CheckpointError,
    CommittedBatch,
    TransactionalTopicSink,
    commit_metadata,
    committed_batch,
    query_id_of,
    transactional_id_for,
)
from tests.support.cluster import Cluster

QUERY_ID = "8d0b5e1c-9a7e-4c1f-b2a4-0f3e6a1d2c3b"
OPTIONS = WriteOptions({"bootstrap.servers": "127.0.0.1:1"}, "stats")


class FakeKafka:
    """What a broker would keep for one transactional id: records of committed transactions, the group's
    committed offset, and every client call in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.visible: list[tuple[str, bytes | None, bytes | None]] = []
        self.group_offset: tuple[int, str | None] = (-1001, None)
        self.producer_config: dict[str, Any] = {}
        self.consumer_config: dict[str, Any] = {}
        # errors to raise, by method name, one per call, in order
        self.failures: dict[str, list[BaseException]] = {}

    def fail(self, method: str) -> None:
        queued = self.failures.get(method)
        if queued:
            raise queued.pop(0)


class FakeProducer:
    def __init__(self, kafka: FakeKafka, config: dict[str, Any]) -> None:
        self.kafka = kafka
        kafka.producer_config = config
        self.pending: list[tuple[str, bytes | None, bytes | None]] = []
        self.offsets: tuple[int, str | None] | None = None

    def init_transactions(self, timeout: float) -> None:
        self.kafka.calls.append("init_transactions")
        self.kafka.fail("init_transactions")

    def begin_transaction(self) -> None:
        self.kafka.calls.append("begin")
        self.pending, self.offsets = [], None

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None, **_: Any) -> None:
        self.kafka.calls.append(f"produce {key!r}")
        self.kafka.fail("produce")
        self.pending.append((topic, key, value))

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float = 0) -> int:
        return 0

    def send_offsets_to_transaction(
        self, positions: list[TopicPartition], group: Any, timeout: float
    ) -> None:
        [tp] = positions
        self.kafka.calls.append(f"send_offsets {tp.topic}-{tp.partition}@{tp.offset} to {group}")
        self.kafka.fail("send_offsets_to_transaction")
        self.offsets = (tp.offset, tp.metadata)

    def commit_transaction(self, timeout: float) -> None:
        self.kafka.calls.append("commit")
        self.kafka.fail("commit_transaction")
        self.kafka.visible += self.pending
        if self.offsets is not None:
            self.kafka.group_offset = self.offsets
        self.pending, self.offsets = [], None
        self.kafka.fail("commit_transaction after it took effect")

    def abort_transaction(self, timeout: float) -> None:
        self.kafka.calls.append("abort")
        self.pending, self.offsets = [], None


class FakeConsumer:
    def __init__(self, kafka: FakeKafka, config: dict[str, Any]) -> None:
        self.kafka = kafka
        kafka.consumer_config = config

    def consumer_group_metadata(self) -> str:
        return f"group {self.kafka.consumer_config['group.id']}"

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        [tp] = partitions
        self.kafka.calls.append(f"committed {tp.topic}-{tp.partition}")
        offset, metadata = self.kafka.group_offset
        if metadata is None:
            return [TopicPartition(tp.topic, tp.partition, offset)]
        return [TopicPartition(tp.topic, tp.partition, offset, metadata)]

    def close(self) -> None:
        self.kafka.calls.append("close")


def checkpoint_of(tmp_path: Path, query_id: str = QUERY_ID) -> Path:
    checkpoint = tmp_path / "topic"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    return checkpoint


def sink_of(kafka: FakeKafka, checkpoint: Path, **kwargs: Any) -> TransactionalTopicSink:
    return TransactionalTopicSink(
        OPTIONS,
        checkpoint,
        producer_factory=lambda config: FakeProducer(kafka, config),
        consumer_factory=lambda config: FakeConsumer(kafka, config),
        ensure=lambda _client, topic, _timeout: kafka.calls.append(f"ensure {topic}"),
        **kwargs,
    )


def rows(*keys: str) -> list[pa.RecordBatch]:
    return [pa.RecordBatch.from_pydict({"key": list(keys), "value": [f"v-{k}" for k in keys]})]


def kafka_error(code: int, **flags: bool) -> KafkaException:
    return KafkaException(KafkaError(code, "injected", **flags))


def test_the_transactional_id_and_group_are_the_spark_query_id_kept_in_the_checkpoint(tmp_path: Path) -> None:
    checkpoint = checkpoint_of(tmp_path)
    assert query_id_of(checkpoint) == QUERY_ID
    kafka = FakeKafka()
    sink = sink_of(kafka, checkpoint)
    assert sink.transactional_id == transactional_id_for(QUERY_ID) == f"samsa-pipeline-{QUERY_ID}"
    sink.start()
    assert kafka.producer_config["transactional.id"] == sink.transactional_id
    assert kafka.consumer_config["group.id"] == sink.transactional_id
    # the committed offset must not be read while a commit is in flight (OffsetFetch require_stable)
    assert kafka.consumer_config["isolation.level"] == "read_committed"
    assert kafka.consumer_config["enable.auto.commit"] is False


def test_a_checkpoint_without_a_query_id_is_an_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="metadata"):
        query_id_of(tmp_path)
    (tmp_path / "metadata").write_text("{}\n")
    with pytest.raises(CheckpointError, match="no Spark query id"):
        query_id_of(tmp_path)


def test_an_explicit_transactional_id_wins_over_the_checkpoint(tmp_path: Path) -> None:
    kafka = FakeKafka()
    sink = sink_of(kafka, tmp_path, transactional_id="my-query")
    sink.write_batch(0, lambda: rows("a"))
    assert kafka.producer_config["transactional.id"] == kafka.consumer_config["group.id"] == "my-query"
    assert json.loads(kafka.group_offset[1] or "") == {"queryId": None, "batchId": 0, "records": 1}


def test_the_sink_needs_the_topic_option(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'topic' option"):
        TransactionalTopicSink(WriteOptions({"bootstrap.servers": "x"}, None), tmp_path)


def test_a_batch_is_one_transaction_with_its_rows_and_the_next_batch_id_as_the_group_offset(
    tmp_path: Path,
) -> None:
    kafka = FakeKafka()
    sink = sink_of(kafka, checkpoint_of(tmp_path))
    assert sink.write_batch(0, lambda: rows("a", "b")) == 2
    group = f"group samsa-pipeline-{QUERY_ID}"
    assert kafka.calls == [
        "ensure stats",  # an empty first batch commits to partition 0 before any record is produced
        "init_transactions",  # fences an earlier driver and settles its open transaction
        "committed stats-0",
        "begin",
        "produce b'a'",
        "produce b'b'",
        f"send_offsets stats-0@1 to {group}",
        "commit",
    ]
    assert kafka.visible == [("stats", b"a", b"v-a"), ("stats", b"b", b"v-b")]
    assert kafka.group_offset == (1, commit_metadata(QUERY_ID, 0, 2))
    assert json.loads(commit_metadata(QUERY_ID, 0, 2)) == {"queryId": QUERY_ID, "batchId": 0, "records": 2}

    assert sink.write_batch(1, lambda: rows("c")) == 1
    assert kafka.calls.count("init_transactions") == 1  # once per run of the query
    assert kafka.group_offset[0] == 2
    assert sink.last_committed() == CommittedBatch(1, QUERY_ID, 1)


def test_an_empty_batch_still_commits_its_batch_id(tmp_path: Path) -> None:
    kafka = FakeKafka()
    sink = sink_of(kafka, checkpoint_of(tmp_path))
    assert sink.write_batch(0, lambda: []) == 0
    assert kafka.calls[-2:] == [f"send_offsets stats-0@1 to group samsa-pipeline-{QUERY_ID}", "commit"]
    assert kafka.group_offset[0] == 1


def test_a_replayed_batch_whose_id_is_committed_is_skipped_without_a_transaction(tmp_path: Path) -> None:
    kafka = FakeKafka()
    checkpoint = checkpoint_of(tmp_path)
    sink_of(kafka, checkpoint).write_batch(3, lambda: rows("a"))  # the crashed driver's last batch

    kafka.calls.clear()
    restarted = sink_of(kafka, checkpoint)

    def never() -> list[pa.RecordBatch]:
        raise AssertionError("the records of a skipped batch are not asked for")

    assert restarted.write_batch(3, never) is None
    assert kafka.calls == ["ensure stats", "init_transactions", "committed stats-0"]
    assert restarted.write_batch(2, never) is None
    assert restarted.write_batch(4, lambda: rows("b")) == 1
    assert [key for _, key, _ in kafka.visible] == [b"a", b"b"]


def test_an_abortable_error_aborts_the_transaction_and_redoes_the_same_records(tmp_path: Path) -> None:
    kafka = FakeKafka()
    kafka.failures["commit_transaction"] = [kafka_error(KafkaError._MSG_TIMED_OUT, txn_requires_abort=True)]
    sink = sink_of(kafka, checkpoint_of(tmp_path))
    produced = []

    def once() -> list[pa.RecordBatch]:
        produced.append(1)
        return rows("a", "b")

    assert sink.write_batch(0, once) == 2
    assert produced == [1]  # collected once, produced twice
    assert kafka.calls.count("begin") == 2 and kafka.calls.count("abort") == 1
    assert kafka.visible == [("stats", b"a", b"v-a"), ("stats", b"b", b"v-b")]
    assert kafka.group_offset[0] == 1


def test_abortable_errors_beyond_the_attempts_fail_the_batch(tmp_path: Path) -> None:
    kafka = FakeKafka()
    error = KafkaError._MSG_TIMED_OUT
    kafka.failures["send_offsets_to_transaction"] = [
        kafka_error(error, txn_requires_abort=True) for _ in range(2)
    ]
    sink = sink_of(kafka, checkpoint_of(tmp_path), attempts=2)
    with pytest.raises(KafkaException):
        sink.write_batch(0, lambda: rows("a"))
    assert kafka.calls.count("abort") == 2
    assert kafka.visible == [] and kafka.group_offset[0] < 0


def test_a_fenced_sink_fails_the_batch_at_once(tmp_path: Path) -> None:
    kafka = FakeKafka()
    kafka.failures["send_offsets_to_transaction"] = [kafka_error(KafkaError._FENCED, fatal=True)]
    sink = sink_of(kafka, checkpoint_of(tmp_path))
    with pytest.raises(KafkaException) as raised:
        sink.write_batch(0, lambda: rows("a"))
    assert raised.value.args[0].code() == KafkaError._FENCED
    assert kafka.calls.count("begin") == 1 and "commit" not in kafka.calls
    assert kafka.visible == []


def test_a_retriable_commit_error_commits_again(tmp_path: Path) -> None:
    kafka = FakeKafka()
    kafka.failures["commit_transaction"] = [kafka_error(KafkaError._TIMED_OUT, retriable=True)]
    sink = sink_of(kafka, checkpoint_of(tmp_path))
    assert sink.write_batch(0, lambda: rows("a")) == 1
    assert kafka.calls.count("begin") == 1 and kafka.calls.count("commit") == 2
    assert kafka.group_offset[0] == 1


def test_a_commit_that_timed_out_but_took_effect_is_not_redone(tmp_path: Path) -> None:
    kafka = FakeKafka()
    kafka.failures["commit_transaction after it took effect"] = [
        kafka_error(KafkaError._TIMED_OUT, retriable=True) for _ in range(100)
    ]
    sink = sink_of(kafka, checkpoint_of(tmp_path), timeout_s=0.3)
    assert sink.write_batch(0, lambda: rows("a")) is None  # the second attempt finds it committed
    assert kafka.calls.count("begin") == 1 and kafka.calls.count("committed stats-0") == 2
    assert kafka.visible == [("stats", b"a", b"v-a")]
    assert kafka.group_offset[0] == 1


def test_a_failure_outside_kafka_aborts_the_open_transaction(tmp_path: Path) -> None:
    kafka = FakeKafka()
    kafka.failures["produce"] = [ValueError("bad row")]
    sink = sink_of(kafka, checkpoint_of(tmp_path))
    with pytest.raises(ValueError, match="bad row"):
        sink.write_batch(0, lambda: rows("a"))
    assert kafka.calls[-1] == "abort"


def test_committed_batch_reads_the_offset_as_the_next_batch() -> None:
    assert committed_batch(-1001, None) is None
    assert committed_batch(1, commit_metadata("q", 0, 7)) == CommittedBatch(0, "q", 7)
    assert committed_batch(5, "") == CommittedBatch(4)
    assert committed_batch(5, "not json") == CommittedBatch(4)
    # the offset is the record; metadata that disagrees is reported, not believed
    assert committed_batch(5, commit_metadata("q", 9, 1)) == CommittedBatch(4, "q", 1)


def test_close_closes_the_group_client(tmp_path: Path) -> None:
    kafka = FakeKafka()
    sink = sink_of(kafka, checkpoint_of(tmp_path))
    sink.close()  # never started: nothing to close
    sink.write_batch(0, lambda: rows("a"))
    sink.close()
    assert kafka.calls[-1] == "close"


# Against a real cluster (tier 1: no JVM). The sinks are driven as foreachBatch drives them; "a driver
# restart" is a new sink on the same checkpoint, as a new driver process would build.


def real_sink(samsa: Cluster, topic: str, checkpoint: Path) -> TransactionalTopicSink:
    return TransactionalTopicSink(WriteOptions({"bootstrap.servers": samsa.bootstrap}, topic), checkpoint)


def read_keys(samsa: Cluster, topic: str, isolation: str) -> list[bytes | None]:
    """Every record key of ``topic``'s partition 0 up to its end (the LSO under read_committed)."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": samsa.bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    keys: list[bytes | None] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return keys
                raise KafkaException(message.error())
            keys.append(message.key())
        raise AssertionError(f"{topic} not read to its end in 30 s under {isolation}; got {keys}")
    finally:
        consumer.close()


@pytest.mark.integration
def test_a_batch_replayed_by_a_restarted_driver_is_skipped_and_written_once(
    samsa: Cluster, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(1, prefix="sink")
    query_id = str(uuid.uuid4())
    checkpoint = checkpoint_of(tmp_path, query_id)
    first = real_sink(samsa, topic, checkpoint)
    assert first.write_batch(0, lambda: rows("a", "b")) == 2
    assert first.write_batch(1, lambda: rows("c")) == 1
    first.close()  # the driver dies after the transaction, before Spark's commits/1

    restarted = real_sink(samsa, topic, checkpoint)
    assert restarted.last_committed() == CommittedBatch(1, query_id, 1)  # the metadata came back
    assert restarted.write_batch(1, lambda: rows("c")) is None
    assert restarted.write_batch(2, lambda: rows("d")) == 1
    assert read_keys(samsa, topic, "read_committed") == [b"a", b"b", b"c", b"d"]
    assert restarted.last_committed() == CommittedBatch(2, query_id, 1)
    restarted.close()


@pytest.mark.integration
def test_a_zombie_driver_is_fenced_by_its_successor_and_its_batch_never_seen(
    samsa: Cluster, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(1, prefix="sink")
    checkpoint = checkpoint_of(tmp_path, str(uuid.uuid4()))
    zombie = real_sink(samsa, topic, checkpoint)
    assert zombie.write_batch(0, lambda: rows("a")) == 1
    successor = real_sink(samsa, topic, checkpoint)
    successor.start()  # init_transactions: a new epoch for the query's transactional id

    with pytest.raises(KafkaException):
        zombie.write_batch(1, lambda: rows("zombie"))
    assert successor.write_batch(1, lambda: rows("b")) == 1
    assert read_keys(samsa, topic, "read_committed") == [b"a", b"b"]
    successor.close()


@pytest.mark.integration
def test_the_open_transaction_of_a_crashed_driver_is_aborted_when_the_query_restarts(
    samsa: Cluster, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(1, prefix="sink")
    checkpoint = checkpoint_of(tmp_path, str(uuid.uuid4()))
    crashed = real_sink(samsa, topic, checkpoint)
    crashed.start()
    producer = crashed._producer  # a driver killed mid-batch: produced, never committed nor aborted
    producer.begin_transaction()
    producer.produce(topic, key=b"lost", value=b"x")
    assert producer.flush(30) == 0

    restarted = real_sink(samsa, topic, checkpoint)
    assert restarted.write_batch(0, lambda: rows("a")) == 1
    # the aborted record stays in the log for read_uncommitted readers; read_committed never sees it
    assert read_keys(samsa, topic, "read_committed") == [b"a"]
    assert read_keys(samsa, topic, "read_uncommitted") == [b"lost", b"a"]
    restarted.close()


@pytest.mark.integration
def test_a_missing_output_topic_is_created_before_an_empty_first_batch_commits_to_it(
    samsa: Cluster, tmp_path: Path
) -> None:
    topic = f"sink-missing-{uuid.uuid4().hex[:8]}"
    query_id = str(uuid.uuid4())
    sink = real_sink(samsa, topic, checkpoint_of(tmp_path, query_id))
    assert sink.write_batch(0, lambda: []) == 0
    assert sink.write_batch(1, lambda: rows("a")) == 1
    assert sink.last_committed() == CommittedBatch(1, query_id, 1)
    assert read_keys(samsa, topic, "read_committed") == [b"a"]
    sink.close()
