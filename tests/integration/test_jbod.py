"""JBOD on a real cluster: three brokers with two log dirs each. Partitions spread over the dirs;
DescribeLogDirs and AlterReplicaLogDirs through kafka-python's admin client and the Java AdminClient
(replicas moved while records are produced, nothing lost); and a log dir failing under load (the dir
replaced by a file: the broker runs as root here, so permissions would not stop it): the broker stays
up, its partitions there go offline, their leadership and ISR move to the other brokers, producing with
acks=all goes on, every acknowledged record is read back, and after a restart with the dir still
broken the broker serves its other partitions while the failed replicas stay offline."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import MetadataRequest
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient

pytestmark = pytest.mark.integration

TOPIC = "jbod"
PARTITIONS = 6


def dirs_of(cluster: Cluster, broker_id: int) -> list[str]:
    base = cluster.broker(broker_id).directory
    return [str(base / "data-a"), str(base / "data-b")]


@pytest.fixture
def jbod(tmp_path: Path, zookeeper: str) -> Iterator[Cluster]:
    """Brokers 1-3, log dirs data-a and data-b each (checkpoints every second, so that a failed dir is
    noticed fast even without appends); topic ``jbod``: PARTITIONS partitions on all three brokers,
    min.insync.replicas 2, small segments."""
    cluster = Cluster(
        tmp_path / "cluster",
        zookeeper,
        broker_overrides={
            "replica.high.watermark.checkpoint.interval.ms": 1000,
            "default.replication.factor": 3,
        },
    )
    for broker_id in (1, 2, 3):
        cluster.broker(broker_id).overrides["log.dirs"] = ",".join(dirs_of(cluster, broker_id))
    with cluster:
        cluster.create_topic(
            TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": 2, "segment.bytes": 20_000}
        )
        cluster.wait_for_leaders(TOPIC)
        yield cluster


class Load:
    """Produces numbered records with acks=all on a thread until stopped; remembers the acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "enable.idempotence": True,
                "message.timeout.ms": 60_000,
            }
        )
        self.acked: set[bytes] = set()
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: object, msg: object) -> None:
        if err is None:
            self.acked.add(msg.value())  # type: ignore[attr-defined]
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(TOPIC, value=b"record-%07d" % i, on_delivery=self._on_delivery)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.001 if i % 50 else 0.01)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self.producer.flush(60) == 0


def consume_all(bootstrap: str, expected: set[bytes], timeout: float = 60.0) -> set[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "jbod-check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: set[bytes] = set()
    deadline = time.monotonic() + timeout
    try:
        while not expected <= seen and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is None:
                    seen.add(msg.value())
    finally:
        consumer.close()
    return seen


def admin(cluster: Cluster):  # type: ignore[no-untyped-def]
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)


def placement(client, broker_id: int) -> dict[str, dict[int, bool]]:  # type: ignore[no-untyped-def]
    """log dir -> {partition of TOPIC: is future} on ``broker_id``, from DescribeLogDirs."""
    [answer] = client.describe_log_dirs(brokers=[broker_id])
    found: dict[str, dict[int, bool]] = {}
    for result in answer["log_dirs"]:
        assert result["error_code"] == 0, result
        assert result["total_bytes"] >= result["usable_bytes"] > 0
        found[result["log_dir"]] = {
            p["partition_index"]: p["is_future_key"]
            for t in result["topics"]
            if t["name"] == TOPIC
            for p in t["partitions"]
        }
    return found


def test_partitions_spread_and_a_replica_moves_between_dirs_while_producing(
    jbod: Cluster, tmp_path: Path
) -> None:
    client = admin(jbod)
    try:
        for broker_id in (1, 2, 3):
            dirs = dirs_of(jbod, broker_id)
            placed = placement(client, broker_id)
            assert set(placed) == set(dirs)
            assert [len(placed[d]) for d in dirs] == [PARTITIONS // 2, PARTITIONS // 2]
        source, target = dirs_of(jbod, 2)
        moving = min(placement(client, 2)[source])
        with Load(jbod.bootstrap) as load:
            time.sleep(1.0)
            errors = client.alter_replica_log_dirs({(TOPIC, moving, 2): target})
            assert [e.__name__ for e in errors.values()] == ["NoError"]
            unknown = client.alter_replica_log_dirs({(TOPIC, moving, 2): "/no/such/dir"})
            assert [e.__name__ for e in unknown.values()] == ["LogDirNotFoundError"]
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                placed = placement(client, 2)
                if moving not in placed[source] and placed[target].get(moving) is False:
                    break
                time.sleep(0.2)
            else:
                raise AssertionError(f"partition {moving} did not move: {placement(client, 2)}")
            # The Java AdminClient moves broker 3's replica of the same partition.
            java_source, java_target = dirs_of(jbod, 3)
            if moving not in placement(client, 3)[java_source]:
                java_source, java_target = java_target, java_source
            seen = java_log_dirs(jbod, tmp_path, moving, 3, java_target)
            assert seen["current"] == java_target
            assert (
                seen["dirs"][java_source]["error"] == "" and moving in seen["dirs"][java_source]["partitions"]
            )
            assert seen["dirs"][java_source]["size"] > 0
            assert seen["dirs"][java_target]["total"] >= seen["dirs"][java_target]["usable"] > 0
            time.sleep(1.0)
        assert not load.failed, load.failed[:5]
        assert len(load.acked) > 100
        assert moving in placement(client, 3)[java_target]
    finally:
        client.close()
    assert load.acked <= consume_all(jbod.bootstrap, load.acked)
    # The moved replica is in sync again.
    jbod.wait(lambda: 2 in _isr(jbod, moving), "the moved replica in the ISR")


def _isr(cluster: Cluster, partition: int) -> tuple[int, ...]:
    state = cluster.partition_state(TOPIC, partition)
    return () if state is None else tuple(state.isr)


# The Java AdminClient (kafka-clients 3.9, negotiating DescribeLogDirs v4 and AlterReplicaLogDirs v2):
# args BOOTSTRAP TIMEOUT_MS TOPIC PARTITION BROKER TARGET_DIR. Describes the broker's dirs, moves the
# replica to TARGET_DIR, waits until describeReplicaLogDirs shows it there with no future replica.
JAVA_LOG_DIRS = r"""
import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;

public class LogDirs {
    public static void main(String[] args) throws Exception {
        int timeoutMs = Integer.parseInt(args[1]);
        String topic = args[2];
        int partition = Integer.parseInt(args[3]);
        int broker = Integer.parseInt(args[4]);
        String target = args[5];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, timeoutMs);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeoutMs);
        try (Admin admin = Admin.create(props)) {
            Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(broker)).allDescriptions()
                .get(timeoutMs, TimeUnit.MILLISECONDS).get(broker);
            StringBuilder out = new StringBuilder("{\"dirs\":{");
            boolean first = true;
            for (Map.Entry<String, LogDirDescription> e : dirs.entrySet()) {
                LogDirDescription d = e.getValue();
                List<Integer> parts = new ArrayList<>();
                long size = 0;
                for (Map.Entry<TopicPartition, ReplicaInfo> r : d.replicaInfos().entrySet()) {
                    if (r.getKey().topic().equals(topic)) {
                        parts.add(r.getKey().partition());
                        size += r.getValue().size();
                    }
                }
                Collections.sort(parts);
                out.append(first ? "" : ",").append("\"").append(e.getKey()).append("\":{\"partitions\":")
                    .append(parts).append(",\"size\":").append(size)
                    .append(",\"error\":\"")
                    .append(d.error() == null ? "" : d.error().getClass().getSimpleName())
                    .append("\",\"total\":").append(d.totalBytes().orElse(-1))
                    .append(",\"usable\":").append(d.usableBytes().orElse(-1)).append("}");
                first = false;
            }
            TopicPartitionReplica replica = new TopicPartitionReplica(topic, partition, broker);
            admin.alterReplicaLogDirs(Map.of(replica, target)).all().get(timeoutMs, TimeUnit.MILLISECONDS);
            String current = null;
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (System.currentTimeMillis() < deadline) {
                DescribeReplicaLogDirsResult.ReplicaLogDirInfo info = admin
                    .describeReplicaLogDirs(List.of(replica)).all()
                    .get(timeoutMs, TimeUnit.MILLISECONDS).get(replica);
                current = info.getCurrentReplicaLogDir();
                if (target.equals(current) && info.getFutureReplicaLogDir() == null) break;
                Thread.sleep(200);
            }
            out.append("},\"current\":\"").append(current).append("\"}");
            System.out.println(out);
        }
    }
}
"""


def java_log_dirs(cluster: Cluster, tmp: Path, partition: int, broker_id: int, target: str) -> dict:
    from tests.support.clients.runners import _run_java

    source = tmp / "LogDirs.java"
    source.write_text(JAVA_LOG_DIRS)
    return _run_java(str(source), cluster.bootstrap, 60.0, [TOPIC, str(partition), str(broker_id), target])


def offline_replicas(cluster: Cluster, broker_id: int) -> dict[int, list[int]]:
    client = RawClient(cluster.broker(broker_id).bootstrap)
    try:
        response = client.request(
            ApiKey.METADATA, 9, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)])
        )
    finally:
        client.close()
    [topic] = response.topics  # type: ignore[attr-defined]
    assert topic.error_code == ErrorCode.NONE
    return {p.partition_index: list(p.offline_replicas) for p in topic.partitions}


def test_a_failed_log_dir_moves_leadership_away_and_loses_nothing(jbod: Cluster) -> None:
    victim = 1
    client = admin(jbod)
    try:
        failing, _ = dirs_of(jbod, victim)
        on_failing = sorted(placement(client, victim)[failing])
    finally:
        client.close()
    assert on_failing
    with Load(jbod.bootstrap) as load:
        time.sleep(2.0)
        # The disk goes: the dir disappears and a file takes its place (every new file there fails).
        os.rename(failing, failing + ".gone")
        Path(failing).write_text("not a directory")

        def moved() -> bool:
            for p in on_failing:
                state = jbod.partition_state(TOPIC, p)
                if state is None or state.leader == victim or victim in state.isr:
                    return False
            return True

        jbod.wait(moved, "leadership and ISR of the failed dir's partitions moved off broker 1", 30)
        jbod.wait(
            lambda: all(victim in offline_replicas(jbod, 2).get(p, []) for p in on_failing),
            "the failed replicas listed as offline in Metadata",
            30,
        )
        time.sleep(2.0)  # producing goes on
    assert jbod.broker(victim).alive  # the broker serves on with its other dir
    assert "log dir" in jbod.broker(victim).log() and "offline" in jbod.broker(victim).log()
    assert not load.failed, load.failed[:5]
    assert len(load.acked) > 100
    seen = consume_all(jbod.bootstrap, load.acked)
    assert load.acked <= seen, f"{len(load.acked - seen)} acknowledged records lost"
    client = admin(jbod)
    try:
        [answer] = client.describe_log_dirs(brokers=[victim])
        errors = {r["log_dir"]: r["error_code"] for r in answer["log_dirs"]}
        assert errors[failing] == ErrorCode.KAFKA_STORAGE_ERROR
    finally:
        client.close()
    # Restarted with the dir still broken, the broker starts on the other one: the failed replicas stay
    # offline (never re-created empty elsewhere), the others rejoin their ISRs.
    jbod.broker(victim).restart()
    jbod.wait(
        lambda: all(victim in offline_replicas(jbod, 2).get(p, []) for p in on_failing),
        "the failed replicas offline again after the restart",
        30,
    )
    others = [p for p in range(PARTITIONS) if p not in on_failing]
    jbod.wait(lambda: all(victim in _isr(jbod, p) for p in others), "the healthy replicas back in sync", 30)
    assert all(victim not in _isr(jbod, p) for p in on_failing)
    assert not any(Path(d, f"{TOPIC}-{p}").exists() for d in dirs_of(jbod, victim) for p in on_failing)
