"""Fetch from followers (KIP-392) on a real cluster: three brokers in racks r1, r2, r3 with Kafka's
RackAwareReplicaSelector; a consumer whose ``client.rack`` is a follower's rack is sent there by the
leader and reads every record from that follower."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.replica_selector import RACK_AWARE_SELECTOR
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import FetchRequest, FetchResponse
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient

pytestmark = pytest.mark.integration

TOPIC = "racked"
RECORDS = 3000


@pytest.fixture
def racked(tmp_path: Path, zookeeper: str) -> Iterator[Cluster]:
    """Brokers 1, 2, 3 in racks r1, r2, r3, fetching from followers enabled; topic ``racked`` with one
    partition on all three, RECORDS records in it, every replica caught up."""
    cluster = Cluster(
        tmp_path / "cluster", zookeeper, broker_overrides={"replica.selector.class": RACK_AWARE_SELECTOR}
    )
    for broker_id in (1, 2, 3):
        cluster.broker(broker_id).overrides["broker.rack"] = f"r{broker_id}"
    with cluster:
        cluster.create_topic(TOPIC, 1, 3)
        cluster.wait_for_leaders(TOPIC)
        _produce(cluster.bootstrap, RECORDS)
        yield cluster


def _produce(bootstrap: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(TOPIC, value=b"record-%05d" % i, partition=0)
    assert producer.flush(30) == 0


def _follower(cluster: Cluster) -> tuple[int, int]:
    """(leader, a follower) of racked-0."""
    leader = cluster.leader(TOPIC, 0)
    return leader, min({1, 2, 3} - {leader})


def _fetch_v11(
    client: RawClient, rack: str, offset: int = 0, max_wait_ms: int = 0
) -> FetchResponse.PartitionData:
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic=TOPIC,
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id=rack,
    )
    response: Any = client.request(ApiKey.FETCH, 11, request)
    [topic] = response.responses
    [partition] = topic.partitions
    return partition


def test_leader_names_the_follower_in_the_consumers_rack_and_the_follower_serves_it(
    racked: Cluster,
) -> None:
    leader, follower = _follower(racked)
    to_leader = RawClient(racked.broker(leader).bootstrap)
    to_follower = RawClient(racked.broker(follower).bootstrap)
    try:
        sent_away = _fetch_v11(to_leader, f"r{follower}")
        assert sent_away.error_code == ErrorCode.NONE
        assert sent_away.preferred_read_replica == follower
        assert not sent_away.records
        kept = _fetch_v11(to_leader, f"r{leader}")
        assert kept.preferred_read_replica == -1 and kept.records
        # The follower answers a consumer at Fetch v11+ (any rack) up to its own high watermark.
        served = racked.wait(
            lambda: (p := _fetch_v11(to_follower, f"r{follower}")).high_watermark == RECORDS and p,
            "the follower's high watermark to reach the leader's",
        )
        assert served.error_code == ErrorCode.NONE and served.records
        beyond = _fetch_v11(to_follower, "", RECORDS + 1)
        assert beyond.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    finally:
        to_leader.sock.close()
        to_follower.sock.close()


def test_a_consumer_waiting_on_a_follower_is_answered_when_the_followers_high_watermark_moves(
    racked: Cluster,
) -> None:
    _, follower = _follower(racked)
    to_follower = RawClient(racked.broker(follower).bootstrap, timeout=15)
    try:
        racked.wait(
            lambda: _fetch_v11(to_follower, "").high_watermark == RECORDS,
            "the follower's high watermark to reach the leader's",
        )
        waiting: list[tuple[float, FetchResponse.PartitionData]] = []
        thread = threading.Thread(
            target=lambda: waiting.append(
                (time.monotonic(), _fetch_v11(to_follower, f"r{follower}", RECORDS, max_wait_ms=10_000))
            )
        )
        thread.start()
        time.sleep(0.5)  # the fetch waits in the follower's purgatory
        assert not waiting
        produced = time.monotonic()
        _produce(racked.bootstrap, 1)
        thread.join(15)
        [(answered, partition)] = waiting
        assert partition.error_code == ErrorCode.NONE and partition.records
        assert partition.high_watermark == RECORDS + 1
        # Answered when the follower learnt the new high watermark, not at the end of the max wait.
        assert answered - produced < 3.0
    finally:
        to_follower.sock.close()


def test_confluent_kafka_consumer_with_client_rack_reads_every_record_from_its_racks_follower(
    racked: Cluster,
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    leader, follower = _follower(racked)
    stats: list[dict[str, Any]] = []
    consumer = Consumer(
        {
            "bootstrap.servers": racked.bootstrap,
            "group.id": "follower-fetching",
            "client.rack": f"r{follower}",
            "enable.auto.commit": False,
            "statistics.interval.ms": 100,
            "stats_cb": lambda raw: stats.append(json.loads(raw)),
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
        assert values == [b"record-%05d" % i for i in range(RECORDS)]
        time.sleep(0.3)
        consumer.poll(0.1)  # serves the last statistics callback
    finally:
        consumer.close()
    partition = stats[-1]["topics"][TOPIC]["partitions"]["0"]
    assert (partition["leader"], partition["broker"]) == (leader, follower)
    received = {b["nodeid"]: b["rxbytes"] for b in stats[-1]["brokers"].values() if b["nodeid"] >= 0}
    # The records (some 60 KB) came from the follower; from the leader only metadata and the redirect.
    assert received[follower] > 40_000 and received[leader] < received[follower] / 4, received


JAVA_CONSUMER = """
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class RackConsumer {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("client.rack", args[1]);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        int expected = Integer.parseInt(args[3]);
        int count = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(args[2], 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 30000;
            while (count < expected && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) count++;
            }
            StringBuilder nodes = new StringBuilder();
            for (var e : consumer.metrics().entrySet()) {
                var name = e.getKey();
                if (name.group().equals("consumer-node-metrics")
                        && name.name().equals("incoming-byte-total")) {
                    if (nodes.length() > 0) nodes.append(",");
                    nodes.append("\\"").append(name.tags().get("node-id")).append("\\":")
                         .append(((Double) e.getValue().metricValue()).longValue());
                }
            }
            System.out.println("{\\"count\\":" + count + ",\\"received\\":{" + nodes + "}}");
        }
    }
}
"""


def test_java_consumer_with_client_rack_reads_every_record_from_its_racks_follower(
    racked: Cluster, tmp_path: Path
) -> None:
    from tests.support.clients import runners

    java = runners.shutil.which("java")
    jar_dir = runners.clients_dir() / "java"
    if java is None or not all((jar_dir / jar).is_file() for jar in runners.JAVA_JARS):
        pytest.skip("the Java client is not installed (make clientdeps)")
    leader, follower = _follower(racked)
    source = tmp_path / "RackConsumer.java"
    source.write_text(JAVA_CONSUMER)
    classpath = os.pathsep.join(str(jar_dir / jar) for jar in runners.JAVA_JARS)
    argv = [java, "-cp", classpath, str(source), racked.bootstrap, f"r{follower}", TOPIC, str(RECORDS)]
    out = runners._run("java", argv, 60)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["count"] == RECORDS
    received = {int(k.removeprefix("node-")): v for k, v in result["received"].items() if k != "node--1"}
    received = {k: v for k, v in received.items() if k >= 0}
    assert received[follower] > 40_000 and received.get(leader, 0) < received[follower] / 4, received


def test_an_unknown_replica_selector_class_stops_the_broker_at_startup(tmp_path: Path) -> None:
    settings = {
        "broker.id": "1",
        "zookeeper.connect": "127.0.0.1:1",
        "log.dirs": str(tmp_path / "logs"),
        "replica.selector.class": "com.example.MySelector",
    }
    overrides = [arg for k, v in settings.items() for arg in ("--override", f"{k}={v}")]
    result = subprocess.run(
        [sys.executable, "-m", "tools", "broker", *overrides],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "replica.selector.class='com.example.MySelector' is not supported" in result.stderr


def test_partial_racks_refuse_create_topics_and_create_partitions_but_not_auto_creation(
    tmp_path: Path, zookeeper: str
) -> None:
    from confluent_kafka import KafkaError as ClientError
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    cluster = Cluster(tmp_path / "cluster", zookeeper)
    for broker_id in (1, 2):  # broker 3 has no rack
        cluster.broker(broker_id).overrides["broker.rack"] = f"r{broker_id}"
    with cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        refused = admin.create_topics([NewTopic("placed", 3, 2)])["placed"]
        with pytest.raises(KafkaException) as raised:
            refused.result(30)
        error = raised.value.args[0]
        assert error.code() == ClientError.UNKNOWN
        assert "Not all brokers have rack information" in error.str()
        # An explicit assignment is taken as given, as Kafka's CreateTopics does.
        admin.create_topics([NewTopic("given", 1, replica_assignment=[[1, 3]])])["given"].result(30)
        more = admin.create_partitions([NewPartitions("given", 2, [[2, 3]])])["given"]
        with pytest.raises(KafkaException, match="Not all brokers have rack information"):
            more.result(30)
        # Metadata's auto-creation ignores partial racks (RackAwareMode.Safe).
        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        producer.produce("auto-created", b"v")
        assert producer.flush(30) == 0
