"""``samsa producer-perf-test`` and ``samsa consumer-perf-test`` against a real one-broker cluster (one for
the module): the records arrive, and the lines are Kafka 3.9's (ProducerPerformance's window and total
lines, ConsumerPerformance's header, values and detailed-stats lines, its timeout warning); in the full
tier, both over SASL_SSL with ``samsa up --secure``'s client.properties and with the Java client's
names."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import ROOT, Cluster
from tools.local_cluster import LocalCluster
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")

TOTAL_LINE = re.compile(
    r"^(?P<count>\d+) records sent, (?P<rate>\d+\.\d{6}) records/sec \(\d+\.\d\d MB/sec\), "
    r"\d+\.\d\d ms avg latency, \d+\.\d\d ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, "
    r"\d+ ms 99\.9th\.$"
)
HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
NUMBER = r"(?:-?\d+\.\d{4}|NaN|-?Infinity)"
VALUES_LINE = re.compile(
    rf"^(?P<start>{DATE}), (?P<end>{DATE}), (?P<mb>{NUMBER}), {NUMBER}, (?P<messages>\d+), {NUMBER}, "
    rf"(?P<rebalance>\d+), -?\d+, {NUMBER}, {NUMBER}$"
)
DETAILED_LINE = re.compile(rf"^{DATE}, 0, {NUMBER}, {NUMBER}, \d+, {NUMBER}, \d+, -?\d+, {NUMBER}, {NUMBER}$")
RECORDS = 20_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer) -> Iterator[Cluster]:
    chroot = f"{zookeeper_server.connect_string}/samsa-perf-tests"
    running = Cluster(
        tmp_path_factory.mktemp("perf-tests"),
        chroot,
        brokers=1,
        broker_overrides={"group.initial.rebalance.delay.ms": 0},
    ).start()
    try:
        yield running
    finally:
        running.stop()


def samsa(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def end_offset(cluster: Cluster, topic: str) -> int:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "perf-tests-check"}
    )
    try:
        return int(consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def produced(cluster: Cluster) -> tuple[str, subprocess.CompletedProcess[str]]:
    """20,000 records of 100 bytes sent by the producer perf test to a topic of one partition."""
    cluster.create_topic("perf-sized")
    result = samsa(
        "producer-perf-test", "--topic", "perf-sized", "--num-records", str(RECORDS), "--record-size", "100",
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={cluster.bootstrap}", "acks=all",
    )  # fmt: skip
    return "perf-sized", result


def test_producer_perf_test_sends_every_record_and_prints_kafkas_total_line(
    cluster: Cluster, produced: tuple[str, subprocess.CompletedProcess[str]]
) -> None:
    topic, result = produced
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    total = TOTAL_LINE.match(lines[-1])
    assert total, lines
    assert int(total["count"]) == RECORDS
    assert end_offset(cluster, topic) == RECORDS


def test_consumer_perf_test_reads_every_record_and_prints_kafkas_header_and_values(
    cluster: Cluster, produced: tuple[str, subprocess.CompletedProcess[str]]
) -> None:
    topic, _ = produced
    result = samsa(
        "consumer-perf-test", "--bootstrap-server", cluster.bootstrap, "--topic", topic,
        "--messages", str(RECORDS), "--group", "perf-reader",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    header, values = result.stdout.splitlines()
    assert header == HEADER
    m = VALUES_LINE.match(values)
    assert m, values
    assert int(m["messages"]) == RECORDS
    assert m["mb"] == f"{RECORDS * 100 / (1024 * 1024):.4f}"  # keys are null: the values' bytes


def test_consumer_perf_test_detailed_stats_and_kafkas_timeout_warning(
    cluster: Cluster, produced: tuple[str, subprocess.CompletedProcess[str]]
) -> None:
    topic, _ = produced
    result = samsa(
        "consumer-perf-test", "--bootstrap-server", cluster.bootstrap, "--topic", topic,
        "--messages", str(RECORDS + 1), "--timeout", "1000", "--show-detailed-stats",
        "--reporting-interval", "1", "--fetch-size", "65536",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    header, *progress, warning = result.stdout.splitlines()
    assert header == (
        "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    assert progress and all(DETAILED_LINE.match(line) for line in progress), progress
    counts = [int(line.split(", ")[4]) for line in progress]  # data.consumed.in.nMsg so far
    # A line when a poll returns records at least an interval after the last line: the last batches may
    # come within the same millisecond, so the last line need not count every record.
    assert counts == sorted(counts) and 0 < counts[-1] <= RECORDS
    assert warning == (
        "WARNING: Exiting before consuming the expected number of messages: timeout (1000 ms) exceeded. "
        "You can use the --timeout option to increase the timeout."
    )


@pytest.mark.slow  # seconds of its own: the full tier keeps the quick one under 20 minutes
def test_producer_perf_test_throttles_to_the_throughput_asked_and_prints_metrics(
    cluster: Cluster, tmp_path: Path
) -> None:
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha\nbeta\ngamma\n")
    result = samsa(
        "producer-perf-test", "--topic", "perf-throttled", "--num-records", "3000", "--payload-file",
        str(payloads), "--throughput", "2000", "--producer-props", f"bootstrap.servers={cluster.bootstrap}",
        "--print-metrics",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == [f"Reading payloads from: {payloads}", "Number of messages read: 3"]
    total = TOTAL_LINE.match(lines[2])
    assert total, lines[:3]
    assert int(total["count"]) == 3000
    assert 1200 <= float(total["rate"]) <= 2100  # ~1.5 s at 2000/s, as Kafka's throttler paces it
    assert lines[3] == "" and re.match(r"^Metric Name +Value$", lines[4])
    metrics = dict(line.split(" : ", 1) for line in lines[5:])
    assert int(metrics[_name(metrics, "librdkafka:txmsgs:{client-id=perf-producer-client}")]) == 3000
    assert any(name.startswith("librdkafka-broker:rtt-avg:") for name in metrics)


def _name(metrics: dict[str, str], name: str) -> str:
    return next(key for key in metrics if key.rstrip() == name)


@pytest.mark.slow  # seconds of its own: the full tier keeps the quick one under 20 minutes
def test_transactional_producer_perf_test_commits_every_record(cluster: Cluster, tmp_path: Path) -> None:
    result = samsa(
        "producer-perf-test", "--topic", "perf-transactions", "--num-records", "5000", "--payload-monotonic",
        "--throughput", "5000", "--transaction-duration-ms", "200", "--transactional-id", "perf-tx",
        "--producer-props", f"bootstrap.servers={cluster.bootstrap}",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    total = TOTAL_LINE.match(result.stdout.splitlines()[-1])
    assert total and int(total["count"]) == 5000
    config = tmp_path / "consumer.properties"
    config.write_text("isolation.level=read_committed\n")
    result = samsa(
        "consumer-perf-test", "--bootstrap-server", cluster.bootstrap, "--topic", "perf-transactions",
        "--messages", "5000", "--consumer.config", str(config), "--hide-header",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (values,) = result.stdout.splitlines()
    m = VALUES_LINE.match(values)
    assert m and int(m["messages"]) == 5000
    assert m["mb"] == f"{sum(len(str(i)) for i in range(5000)) / (1024 * 1024):.4f}"  # "0".."4999"


@pytest.mark.slow
def test_both_tools_reach_a_sasl_ssl_cluster_with_its_client_properties_or_java_names(
    tmp_path: Path, zookeeper: str
) -> None:
    with LocalCluster(tmp_path / "secure", brokers=1, zookeeper=zookeeper, secure=True) as secure:
        props = secure.client_properties()
        assert secure.client_properties_path is not None
        librdkafka_names = str(secure.client_properties_path)  # samsa up --secure's file, as it is
        java_names = tmp_path / "java.properties"
        java_names.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{props["sasl.username"]}" password="{props["sasl.password"]}";\n'
            f"ssl.truststore.type=PEM\nssl.truststore.location={props['ssl.ca.location']}\n"
        )
        for config in (librdkafka_names, str(java_names)):
            result = samsa(
                "producer-perf-test", "--topic", "secure-perf", "--num-records", "1000",
                "--record-size", "10", "--throughput", "-1", "--producer.config", config,
                "--producer-props", f"bootstrap.servers={secure.bootstrap}",
            )  # fmt: skip
            assert result.returncode == 0, result.stderr
            total = TOTAL_LINE.match(result.stdout.splitlines()[-1])
            assert total and int(total["count"]) == 1000
            result = samsa(
                "consumer-perf-test", "--bootstrap-server", secure.bootstrap, "--topic", "secure-perf",
                "--messages", "1000", "--consumer.config", config, "--hide-header",
            )  # fmt: skip
            assert result.returncode == 0, result.stderr
            m = VALUES_LINE.match(result.stdout.splitlines()[-1])
            assert m and int(m["messages"]) == 1000
