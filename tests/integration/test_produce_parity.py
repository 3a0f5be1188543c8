"""Produce at Kafka 3.9's newest versions with real clients, on one broker: librdkafka (confluent-kafka
2.16, Produce v10) and the Java client (kafka-clients 3.9, Produce v11) fail only the records a
compacted topic refuses for their missing key (KIP-467 record errors) and deliver the others when the
application sends them again; records out of message.timestamp.before/after.max.ms (KIP-937) are
refused one by one; a topic's compression.type is honoured (a gzip topic fed lz4 stores gzip, an
uncompressed topic fed zstd stores uncompressed batches), read back by a raw Fetch."""

from __future__ import annotations

import itertools
import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from protocol import record_batch as rb
from protocol.api import ApiKey
from protocol.compression import GZIP, NONE
from protocol.errors import ErrorCode
from tests.support.clients import runners
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient, fetch_request
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

HOUR = 3_600_000
_names = itertools.count()

# Sends one record per argument (KEY:TIMESTAMP, KEY "-" for none, TIMESTAMP "now" or ms) to partition 0,
# the records up to a "/" argument in one batch (flushed before the next ones), and prints per record
# "INDEX OK OFFSET" or "INDEX ERR EXCEPTION-CLASS MESSAGE", INDEX counting records across batches.
JAVA_PRODUCER = """
import java.util.*;
import java.util.concurrent.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class ProduceParity {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "samsa-produce-parity");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, 500);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 20000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10000);
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 2; i < args.length; i++) {
                if (args[i].equals("/")) {
                    producer.flush();
                    continue;
                }
                String[] f = args[i].split(":");
                byte[] key = f[0].equals("-") ? null : f[0].getBytes();
                long ts = f[1].equals("now") ? System.currentTimeMillis() : Long.parseLong(f[1]);
                sent.add(producer.send(new ProducerRecord<>(args[1], 0, ts, key, ("value-" + i).getBytes())));
            }
            producer.flush();
        }
        for (int i = 0; i < sent.size(); i++) {
            try {
                System.out.println(i + " OK " + sent.get(i).get().offset());
            } catch (ExecutionException e) {
                Throwable cause = e.getCause();
                System.out.println(i + " ERR " + cause.getClass().getSimpleName() + " " + cause.getMessage());
            }
        }
    }
}
"""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer) -> Iterator[Cluster]:
    """One controller and one broker for the module."""
    chroot = f"{zookeeper_server.connect_string}/samsa-produce-parity"
    running = Cluster(
        tmp_path_factory.mktemp("produce-parity"),
        chroot,
        brokers=1,
        broker_overrides={"group.initial.rebalance.delay.ms": 0},
    ).start()
    try:
        yield running
    finally:
        running.stop()


def _topic(cluster: Cluster, prefix: str, configs: dict[str, object]) -> str:
    name = f"{prefix}-{next(_names)}"
    cluster.create_topic(name, 1, 1, configs)
    return name


def _confluent_produce(
    bootstrap: str, topic: str, records: Sequence[tuple[bytes | None, int]], **conf: Any
) -> list[Any]:
    """Sends ``records`` (key, timestamp) in one batch to partition 0; per record its error code (None
    when delivered) and its error's text."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 300, "acks": "all", **conf})
    results: dict[int, tuple[int | None, str | None]] = {}
    for i, (key, timestamp) in enumerate(records):

        def report(err: KafkaError | None, _msg: Any, i: int = i) -> None:
            results[i] = (err.code() if err else None, err.str() if err else None)

        producer.produce(
            topic, key=key, value=b"value-%d" % i, partition=0, timestamp=timestamp, on_delivery=report
        )
    assert producer.flush(20) == 0
    return [results[i] for i in range(len(records))]


def _java_produce(bootstrap: str, topic: str, records: list[str], tmp_path: Path) -> list[list[str]]:
    java = runners._require_program("java", "java", "install a JDK 17")
    jars = runners.clients_dir() / "java"
    if not all((jars / jar).is_file() for jar in runners.JAVA_JARS):
        pytest.skip(f"java client jars not under {jars} (run `make clientdeps`)")
    source = tmp_path / "ProduceParity.java"
    source.write_text(JAVA_PRODUCER)
    classpath = os.pathsep.join(str(jars / jar) for jar in runners.JAVA_JARS)
    done = subprocess.run(
        [java, "-cp", classpath, str(source), bootstrap, topic, *records],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [line.split(" ", 3) for line in done.stdout.splitlines() if line[:1].isdigit()]


def _stored(bootstrap: str, topic: str) -> list[tuple[rb.BatchHeader, list[rb.Record]]]:
    """Every batch of partition 0 as a consumer's Fetch returns it."""
    client = RawClient(bootstrap)
    try:
        response: Any = client.request(ApiKey.FETCH, 12, fetch_request(topic))
    finally:
        client.close()
    [p] = response.responses[0].partitions
    assert p.error_code == ErrorCode.NONE
    records = bytes(p.records or b"")
    return [(header, rb.decode_records(records, pos)) for pos, header in rb.iter_headers(records)]


def _keys(bootstrap: str, topic: str) -> list[bytes | None]:
    return [r.key for _, records in _stored(bootstrap, topic) for r in records]


def test_librdkafka_at_produce_v10_fails_only_the_keyless_records_of_a_compacted_topic(
    broker: Cluster,
) -> None:
    topic = _topic(broker, "compacted-rdkafka", {"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    keys = [b"a", None, b"c", None, b"e"]
    results = _confluent_produce(broker.bootstrap, topic, [(k, now) for k in keys])
    # The records at fault get INVALID_RECORD; librdkafka fails the rest of the batch with
    # _INVALID_DIFFERENT_RECORD, for the application to send again.
    codes = [code for code, _ in results]
    assert codes == [
        KafkaError._INVALID_DIFFERENT_RECORD,
        KafkaError.INVALID_RECORD,
        KafkaError._INVALID_DIFFERENT_RECORD,
        KafkaError.INVALID_RECORD,
        KafkaError._INVALID_DIFFERENT_RECORD,
    ]
    retry = [
        (k, now) for k, code in zip(keys, codes, strict=True) if code == KafkaError._INVALID_DIFFERENT_RECORD
    ]
    assert _confluent_produce(broker.bootstrap, topic, retry) == [(None, None)] * 3
    assert _keys(broker.bootstrap, topic) == [b"a", b"c", b"e"]
    assert "refused Produce v10 from 127.0.0.1:" in broker.broker(1).log()


def test_librdkafka_records_out_of_the_timestamp_bounds_are_refused_one_by_one(broker: Cluster) -> None:
    topic = _topic(
        broker,
        "bounded-rdkafka",
        {"message.timestamp.before.max.ms": HOUR, "message.timestamp.after.max.ms": HOUR},
    )
    now = int(time.time() * 1000)
    results = _confluent_produce(
        broker.bootstrap, topic, [(b"k", now - 2 * HOUR), (b"k", now), (b"k", now + 2 * HOUR)]
    )
    # The partition's error is INVALID_TIMESTAMP; with two records at fault librdkafka (as the Java
    # client) reports each as INVALID_RECORD, and the record between them as failed by its batch.
    assert [code for code, _ in results] == [
        KafkaError.INVALID_RECORD,
        KafkaError._INVALID_DIFFERENT_RECORD,
        KafkaError.INVALID_RECORD,
    ]
    assert _confluent_produce(broker.bootstrap, topic, [(b"k", now - HOUR // 2)]) == [(None, None)]
    assert len(_keys(broker.bootstrap, topic)) == 1


def test_the_java_client_at_produce_v11_fails_only_the_records_at_fault(
    broker: Cluster, tmp_path: Path
) -> None:
    topic = _topic(
        broker, "compacted-java", {"cleanup.policy": "compact", "message.timestamp.before.max.ms": HOUR}
    )
    old = int(time.time() * 1000) - 2 * HOUR
    batches = [
        "a:now",
        "-:now",
        "c:now",
        f"d:{old}",
        "/",
        "e:now",
        f"f:{old}",
        "/",
        "a:now",
        "c:now",
        "e:now",
    ]
    lines = _java_produce(broker.bootstrap, topic, batches, tmp_path)
    assert [line[:3] for line in lines] == [
        # Two records at fault: the Java client makes each an InvalidRecordException.
        ["0", "ERR", "KafkaException"],
        ["1", "ERR", "InvalidRecordException"],
        ["2", "ERR", "KafkaException"],
        ["3", "ERR", "InvalidRecordException"],
        # One: the partition's error, INVALID_TIMESTAMP.
        ["4", "ERR", "KafkaException"],
        ["5", "ERR", "InvalidTimestampException"],
        # The records refused with their batch alone, sent again, are appended.
        ["6", "OK", "0"],
        ["7", "OK", "1"],
        ["8", "OK", "2"],
    ]
    assert lines[0][3] == (
        "Failed to append record because it was part of a batch which had one more more invalid records"
    )
    assert lines[1][3] == f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert lines[3][3].startswith(f"Timestamp {old} of message with offset 3 is out of range.")
    assert lines[5][3].startswith(f"Timestamp {old} of message with offset 1 is out of range.")
    assert "refused Produce v11 from 127.0.0.1:" in broker.broker(1).log()
    assert _keys(broker.bootstrap, topic) == [b"a", b"c", b"e"]


@pytest.mark.parametrize(
    ("compression", "sent", "stored"), [("gzip", "lz4", GZIP), ("uncompressed", "zstd", NONE)]
)
def test_the_topic_compression_type_is_what_the_log_holds(
    broker: Cluster, compression: str, sent: str, stored: int
) -> None:
    topic = _topic(broker, f"codec-{compression}", {"compression.type": compression})
    now = int(time.time() * 1000)
    records = [(b"key-%d" % i, now) for i in range(50)]
    assert (
        _confluent_produce(broker.bootstrap, topic, records, **{"compression.codec": sent})
        == [(None, None)] * 50
    )
    batches = _stored(broker.bootstrap, topic)
    assert {header.compression for header, _ in batches} == {stored}
    assert [r.key for _, records in batches for r in records] == [k for k, _ in records]
    assert [r.value for _, records in batches for r in records] == [b"value-%d" % i for i in range(50)]
