"""The broker's metrics on a real cluster (three brokers, a controller), scraped over HTTP: exact produces
and fetches move BrokerTopicMetrics and the log gauges by what was sent, followers count what they copy,
killing a follower raises the leader's under-replicated partitions and healing lowers them, and every
metric the Grafana dashboard (docs/grafana/samsa.json) queries is served once a real producer and a
consumer group have run (those that wait for a condition are listed with it, and the test meets it)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from protocol import record_batch
from protocol.api import ApiKey
from tests.support.cluster import ROOT, Cluster, chroot
from tests.support.metrics import Samples, scrape, value
from tests.support.raw_client import RawClient, fetch_request, produce_request
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

TOPIC = "broker-metrics"
BATCHES = 5
# A follower that stops fetching leaves the ISR after 1.5 s (Kafka: 30 s), so the kill test is quick; a
# group's first rebalance does not wait the 3 s Kafka's default adds.
SETTINGS = {
    "replica.lag.time.max.ms": "1500",
    "default.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "0",
}
DASHBOARD = ROOT / "docs" / "grafana" / "samsa.json"

# Metrics the dashboard queries that a healthy cluster with a producer and a consumer group does not serve
# until something else happens (their panels stay empty until then), with what that is; the test makes it
# happen.
QUOTA_SENSOR = "only for clients a quota applies to (Kafka keeps no quota sensor while no quota is set)"
CONDITIONAL = {
    "kafka_server_produce_byte_rate": QUOTA_SENSOR,
    "kafka_server_produce_throttle_time": QUOTA_SENSOR,
    "kafka_server_fetch_byte_rate": QUOTA_SENSOR,
    "kafka_server_fetch_throttle_time": QUOTA_SENSOR,
    "kafka_server_request_request_time": QUOTA_SENSOR,
    "kafka_server_request_throttle_time": QUOTA_SENSOR,
}
CLIENT_ID = "samsa-dashboard"
# Quotas too high to throttle anything: the clients of the dashboard test get quota sensors.
UNBOUNDED_QUOTAS = "producer_byte_rate=1000000000,consumer_byte_rate=1000000000,request_percentage=100000"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer) -> Iterator[Cluster]:
    """Three brokers and a controller, shared by the module's tests."""
    connect = chroot(zookeeper_server, "samsa-broker-metrics")
    running = Cluster(
        tmp_path_factory.mktemp("broker-metrics"), connect, brokers=3, broker_overrides=SETTINGS
    )
    running.start()
    try:
        running.create_topic(TOPIC, 1, replication_factor=3)
        yield running
    finally:
        running.stop()


def url(cluster: Cluster, broker_id: int) -> str:
    found = cluster.broker(broker_id).metrics_url
    assert found is not None
    return found


def delta(after: Samples, before: Samples, name: str, **labels: str) -> float:
    return (value(after, name, **labels) or 0.0) - (value(before, name, **labels) or 0.0)


def btm(stem: str) -> str:
    return f"kafka_server_brokertopicmetrics_{stem}_total"


def test_produce_and_fetch_move_topic_metrics_and_log_gauges_by_what_was_sent(cluster: Cluster) -> None:
    leader = cluster.leader(TOPIC, 0)
    followers = [b for b in cluster.brokers if b != leader]
    before = {b: scrape(url(cluster, b)) for b in cluster.brokers}
    client = RawClient(cluster.broker(leader).bootstrap, timeout=10)
    sizes, records = 0, 0
    try:
        for i in range(BATCHES):
            now = int(time.time() * 1000)
            batch = record_batch.encode_batch(
                [record_batch.Record(j, now, b"k", b"v" * (50 + i)) for j in range(i + 1)], base_offset=0
            )
            response = client.request(ApiKey.PRODUCE, 9, produce_request(TOPIC, batch, acks=-1))
            assert response.responses[0].partition_responses[0].error_code == 0
            sizes += len(batch)
            records += i + 1
        fetched = client.request(ApiKey.FETCH, 12, fetch_request(TOPIC, 0, 0, max_bytes=1 << 20))
        assert len(fetched.responses[0].partitions[0].records) == sizes
    finally:
        client.close()
    after = scrape(url(cluster, leader))
    was = before[leader]
    labels = {"topic": TOPIC}
    assert delta(after, was, btm("messagesin"), **labels) == records
    assert delta(after, was, btm("messagesin")) >= records  # over all topics: no topic label
    assert delta(after, was, btm("bytesin"), **labels) == sizes
    assert delta(after, was, btm("totalproducerequests"), **labels) == BATCHES
    assert delta(after, was, btm("failedproducerequests"), **labels) == 0
    assert delta(after, was, btm("bytesout"), **labels) == sizes  # the consumer's fetch, not the followers'
    partition = {"topic": TOPIC, "partition": "0"}
    assert value(after, "kafka_log_log_size", **partition) == sizes
    assert value(after, "kafka_log_log_logendoffset", **partition) == records
    assert value(after, "kafka_log_log_logstartoffset", **partition) == 0
    assert value(after, "kafka_log_log_numlogsegments", **partition) == 1
    # acks=all: both followers had the records before each answer; what they copied is counted on both
    # sides (a follower may have fetched a batch more than once if a response was lost: at least).
    assert delta(after, was, btm("replicationbytesout")) >= 2 * sizes
    for follower in followers:
        copied = scrape(url(cluster, follower))
        assert delta(copied, before[follower], btm("replicationbytesin")) >= sizes
        assert value(copied, "kafka_log_log_logendoffset", **partition) == records
        assert value(copied, "kafka_server_fetcherlagmetrics_consumerlag", **partition) == 0
        assert value(copied, "kafka_server_replicafetchermanager_maxlag", clientid="Replica") is not None


def _replica_gauges(cluster: Cluster, broker_id: int) -> tuple[float | None, float | None]:
    """(under-replicated partitions, partitions led) as the broker's metrics say."""
    samples = scrape(url(cluster, broker_id))
    return (
        value(samples, "kafka_server_replicamanager_underreplicatedpartitions"),
        value(samples, "kafka_server_replicamanager_leadercount"),
    )


@pytest.mark.slow  # seconds of its own: the full tier keeps the quick one under 20 minutes
def test_killing_a_follower_raises_under_replicated_partitions_on_the_leader_and_healing_lowers_them(
    cluster: Cluster,
) -> None:
    topic = "under-replicated"
    cluster.create_topic(topic, 3, replication_factor=3)
    leader = cluster.leader(topic, 0)
    follower = next(b for b in cluster.brokers if b != leader)
    live = [b for b in cluster.brokers if b != follower]
    cluster.wait(
        lambda: all(_replica_gauges(cluster, b)[0] == 0 for b in cluster.brokers),
        "no under-replicated partition",
    )
    cluster.broker(follower).kill()
    try:
        # Every partition of this cluster has three replicas on its three brokers: with one broker dead,
        # each live broker counts every partition it leads as under-replicated, once the dead one is out
        # of their ISRs (the leaders shrink them after replica.lag.time.max.ms; the partitions the dead
        # broker led get new leaders and ISRs without it once its ZooKeeper session expires).
        def every_led_partition_counted() -> bool:
            gauges = {b: _replica_gauges(cluster, b) for b in live}
            return (gauges[leader][1] or 0) > 0 and all(u == led for u, led in gauges.values())

        cluster.wait(every_led_partition_counted, "each leader to count its partitions as under-replicated")
        samples = scrape(url(cluster, leader))
        assert value(samples, "kafka_cluster_partition_underreplicated", topic=topic, partition="0") == 1
        assert (value(samples, "kafka_server_replicamanager_isrshrinks_total") or 0) >= 1
    finally:
        cluster.broker(follower).start()
    cluster.wait(
        lambda: all(_replica_gauges(cluster, b)[0] == 0 for b in cluster.brokers),
        "every ISR to be whole again",
    )
    assert (value(scrape(url(cluster, leader)), "kafka_server_replicamanager_isrexpands_total") or 0) >= 1


def dashboard_metrics() -> set[str]:
    """Every metric name the dashboard's queries and variables name."""
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in board["templating"]["list"] if "definition" in v]
    return {
        name
        for expr in exprs
        for name in re.findall(r"\b((?:kafka|samsa|process|python)_[a-z0-9_]+)\b", expr)
    }


def test_the_dashboard_is_valid_grafana_json() -> None:
    board = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    assert board["uid"] and board["title"] == "Samsa"
    variables = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "instance", "topic"} <= variables
    for panel in board["panels"]:
        position = panel["gridPos"]
        assert {"x", "y", "w", "h"} <= set(position) and position["x"] + position["w"] <= 24
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
    assert set(CONDITIONAL) <= dashboard_metrics()


def test_every_metric_the_dashboard_queries_is_served(cluster: Cluster) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic, group = "dashboard", f"dashboard-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 3, replication_factor=3)
    cluster.create_topic(f"{topic}-more", 1, replication_factor=3)
    quota = subprocess.run(
        [sys.executable, "-m", "tools", "configs", "--bootstrap-server", cluster.bootstrap, "--alter",
         "--add-config", UNBOUNDED_QUOTAS, "--entity-type", "clients", "--entity-name", CLIENT_ID],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert quota.returncode == 0, quota.stderr
    common = {"bootstrap.servers": cluster.bootstrap, "client.id": CLIENT_ID}
    producer = confluent_kafka.Producer({**common, "acks": "all"})
    for i in range(30):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer(
        {
            **common,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    urls = [url(cluster, b) for b in cluster.brokers] + [
        c.metrics_url for c in cluster.controllers.values() if c.metrics_url is not None
    ]

    def missing() -> list[str]:
        served = {name for address in urls for name, _ in scrape(address)}
        return sorted(dashboard_metrics() - served)

    try:
        consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 30 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen += 1
        assert seen == 30
        consumer.commit(asynchronous=False)
        # The quota reaches each broker through a ZooKeeper notification: until it has, the clients'
        # requests make no quota sensor there. Both clients go on (elsewhere: the group's lag stays 0).
        deadline = time.monotonic() + 20
        while (absent := missing()) and time.monotonic() < deadline:
            producer.produce(f"{topic}-more", value=b"v")
            producer.flush(10)
            consumer.poll(0.2)
        assert not absent, f"the dashboard queries metrics no node serves: {absent}"
    finally:
        consumer.close()
    # The group's coordinator serves its lag on each partition: nothing, as everything read was committed.
    lags = {
        dict(labels)["partition"]: lag
        for b in cluster.brokers
        for (name, labels), lag in scrape(url(cluster, b)).items()
        if name == "kafka_consumergroup_lag" and ("group", group) in labels
    }
    assert lags == {"0": 0, "1": 0, "2": 0}
