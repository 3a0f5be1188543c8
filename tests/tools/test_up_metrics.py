"""The metrics of the controller, the ZooKeeper sessions and the group coordinator on a real ``samsa up``
cluster (ZooKeeper, one controller, two brokers), scraped over HTTP at the URLs ``samsa up`` prints:

- ``samsa up`` prints ``metrics <role> <id> <url>`` for each controller and broker before its
  ``bootstrap.servers`` line, and each URL serves Prometheus' text format;
- the controller's KafkaController gauges and event timers, and both roles' ZooKeeper session metrics;
- a group's committed-offset lag (``kafka_consumergroup_lag``) equals the LAG column of
  ``samsa consumer-groups --describe``;
- the controller's offline-partitions count rises when the broker holding an RF=1 topic stops and falls
  when it is back.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_tools import Up, samsa
from tests.support.metrics import Samples, scrape, total, value

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")

METRICS_LINE = re.compile(r"^metrics (controller|broker) (\d+) (http://\S+/metrics)$")
K = "kafka_controller_kafkacontroller_"


class Running:
    def __init__(self, up: Up, bootstrap: str) -> None:
        self.up = up
        self.bootstrap = bootstrap
        self.urls = {
            (m.group(1), int(m.group(2))): m.group(3) for line in up.lines if (m := METRICS_LINE.match(line))
        }

    def scrape(self, role: str, node_id: int) -> Samples:
        return scrape(self.urls[(role, node_id)])

    def brokers(self) -> list[Samples]:
        return [self.scrape("broker", b) for b in (1, 2)]


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    up = Up(tmp_path_factory.mktemp("up-metrics") / "run", brokers=2, controllers=1)
    try:
        yield Running(up, up.start())
    finally:
        up.stop()


def eventually(check: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not so after {timeout} s (last: {found!r})")
        time.sleep(0.2)


def tool(*args: str) -> str:
    result = samsa(*args)
    assert result.returncode == 0, result
    return result.stdout


def test_up_prints_a_metrics_line_per_controller_and_broker(running: Running) -> None:
    lines = [line for line in running.up.lines if METRICS_LINE.match(line)]
    assert [line.split()[1:3] for line in lines] == [["controller", "9001"], ["broker", "1"], ["broker", "2"]]
    ready = running.up.lines.index(f"bootstrap.servers={running.bootstrap}")
    assert all(running.up.lines.index(line) < ready for line in lines)
    assert len(set(running.urls.values())) == 3
    for samples in (running.scrape("controller", 9001), *running.brokers()):
        assert any(name.startswith("process_") for name, _ in samples)  # every node's own process


def test_the_controller_reports_the_cluster_and_its_events(running: Running) -> None:
    tool(
        "topics",
        "--bootstrap-server",
        running.bootstrap,
        "--create",
        "--topic",
        "counted",
        "--partitions",
        "3",
    )
    samples = eventually(
        lambda: (s := running.scrape("controller", 9001)) and value(s, K + "globaltopiccount") and s,
        "the controller counts the topic",
    )
    assert value(samples, K + "activecontrollercount") == 1
    assert value(samples, K + "activebrokercount") == 2
    assert value(samples, K + "offlinepartitionscount") == 0
    assert (value(samples, K + "globaltopiccount") or 0) >= 1
    assert (value(samples, K + "globalpartitioncount") or 0) >= 3
    assert value(samples, K + "controllerstate") is not None
    assert value(samples, "kafka_controller_controllereventmanager_eventqueuesize") is not None
    # The brokers' registrations were BrokerChange events (Kafka's LeaderElectionRateAndTimeMs timer), the
    # topic a TopicChange one; every event was queued.
    assert (value(samples, "kafka_controller_controllerstats_leaderelectionrateandtimems_count") or 0) >= 1
    assert (value(samples, "kafka_controller_controllerstats_topicchangerateandtimems_count") or 0) >= 1
    assert (value(samples, "kafka_controller_controllereventmanager_eventqueuetimems_count") or 0) >= 2
    assert value(samples, "kafka_controller_controllerstats_uncleanleaderelections_total") == 0


def test_every_node_reports_its_zookeeper_session(running: Running) -> None:
    for samples in (running.scrape("controller", 9001), *running.brokers()):
        state = "kafka_server_sessionexpirelistener_sessionstate"
        assert value(samples, state, state="CONNECTED") == 1
        assert value(samples, state, state="CLOSED") == 0
        assert value(samples, "kafka_server_sessionexpirelistener_zookeeperexpires_total") == 0
        assert value(samples, "kafka_server_sessionexpirelistener_zookeepersyncconnects_total") == 1
        latency = "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms"
        assert (value(samples, latency + "_count") or 0) > 0


def test_group_lag_matches_consumer_groups_describe(running: Running) -> None:
    topic, group = "lagging", "lag-group"
    tool(
        "topics", "--bootstrap-server", running.bootstrap, "--create", "--topic", topic,
        "--partitions", "2", "--replication-factor", "2",
    )  # fmt: skip
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap, "acks": "all"})
    for partition, count in ((0, 10), (1, 7)):
        for i in range(count):
            producer.produce(topic, b"%d" % i, partition=partition)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": running.bootstrap, "group.id": group})
    try:
        committed = [confluent_kafka.TopicPartition(topic, 0, 4), confluent_kafka.TopicPartition(topic, 1, 7)]
        consumer.commit(offsets=committed, asynchronous=False)
    finally:
        consumer.close()

    def described() -> dict[str, int]:
        out = tool("consumer-groups", "--bootstrap-server", running.bootstrap, "--describe", "--group", group)
        rows = [line.split() for line in out.splitlines() if line.strip()]
        header = next(i for i, cells in enumerate(rows) if cells[0] == "GROUP")
        return {r[2]: int(r[5]) for r in (dict(enumerate(cells)) for cells in rows[header + 1 :])}

    assert described() == {"0": 6, "1": 0}

    def scraped() -> dict[str, float]:
        samples = running.brokers()
        lag = {
            p: total(s, "kafka_consumergroup_lag", group=group, topic=topic, partition=p)
            for s in samples
            for p in ("0", "1")
            if value(s, "kafka_consumergroup_lag", group=group, topic=topic, partition=p) is not None
        }
        return lag if len(lag) == 2 else {}

    assert eventually(scraped, "the coordinator reports the group's lag") == {"0": 6, "1": 0}
    groups = "kafka_coordinator_group_groupmetadatamanager_numgroups"
    assert sum(total(s, groups, state="Empty") for s in running.brokers()) >= 1
    assert (
        sum(total(s, "kafka_coordinator_group_groupmetadatamanager_numoffsets") for s in running.brokers())
        >= 2
    )


def test_offline_partitions_rise_while_the_broker_of_an_rf1_topic_is_down(running: Running) -> None:
    tool(
        "topics", "--bootstrap-server", running.bootstrap, "--create", "--topic", "alone",
        "--replica-assignment", "2,2",
    )  # fmt: skip

    def offline(expected: int) -> Callable[[], bool]:
        return lambda: value(running.scrape("controller", 9001), K + "offlinepartitionscount") == expected

    eventually(offline(0), "no partition offline")
    data_dir: Path = running.up.data_dir
    stopped = samsa("up", "stop", "broker", "2", "--data-dir", str(data_dir), timeout=120)
    assert stopped.returncode == 0, stopped
    eventually(offline(2), "both partitions of the topic on broker 2 offline")
    assert value(running.scrape("controller", 9001), K + "activebrokercount") == 1
    started = samsa("up", "start", "broker", "2", "--data-dir", str(data_dir), timeout=120)
    assert started.returncode == 0, started
    eventually(offline(0), "the partitions back online")
