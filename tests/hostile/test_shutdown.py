"""Stopping a broker or a controller while ZooKeeper is down (issue 14, item 6).

Each test runs a ZooKeeper of its own (the session one is shared by the whole run and must stay up),
stops it, and then sends SIGTERM: the process must exit within a bound computed from the timeouts the
test configures, say in its log what it waited for, and, for a broker, leave its logs clean (the clean
shutdown marker written) with every acknowledged record there after ZooKeeper and the broker are back.
A second SIGTERM while the first shutdown still waits must end the process at once, with exit code 1.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from network.socket_server import FORCED_EXIT_CODE
from storage.log_manager import CLEAN_SHUTDOWN_FILE
from tests.support.cluster import Cluster, running_zookeeper
from tools.local_cluster import Node
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

TOPIC = "kept"
RECORDS = 200
ZK_TIMEOUT_MS = 2000  # zookeeper.connection.timeout.ms: the bound on each ZooKeeper call at shutdown
TRIES = 2  # controlled.shutdown.max.retries
BACKOFF_MS = 500  # controlled.shutdown.retry.backoff.ms
# The local part of a shutdown (cancelling tasks, flushing and closing the logs, kazoo giving up on
# its reconnection) on a busy two-core machine; it waits on nothing remote.
LOCAL_SLACK = 5.0
# Every try of the broker's controlled shutdown ends at its ZooKeeper read when ZooKeeper is down (and
# the first such timeout skips the rest): the bound allows all of them and the backoffs between.
BROKER_BOUND = TRIES * ZK_TIMEOUT_MS / 1000 + (TRIES - 1) * BACKOFF_MS / 1000 + LOCAL_SLACK
# The controller's shutdown waits for its event in progress and its resignation for one connection
# timeout in all.
CONTROLLER_BOUND = ZK_TIMEOUT_MS / 1000 + LOCAL_SLACK
FORCED_BOUND = 2.0  # seconds from the second SIGTERM to the exit
WAITING_FOREVER_MS = 120_000  # a ZooKeeper timeout no test waits out: the first shutdown still waits


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper of this test's own, which it stops and starts again."""
    with running_zookeeper(tmp_path / "zookeeper") as server:
        yield server


def _cluster(tmp_path: Path, zookeeper: ZooKeeperServer, zk_timeout_ms: int) -> Cluster:
    """One controller and one broker (the controller tests start only the controller)."""
    overrides = {
        "offsets.topic.replication.factor": "1",
        "zookeeper.connection.timeout.ms": str(zk_timeout_ms),
        "controlled.shutdown.max.retries": str(TRIES),
        "controlled.shutdown.retry.backoff.ms": str(BACKOFF_MS),
        "controller.socket.timeout.ms": "2000",
    }
    cluster = Cluster(
        tmp_path / "cluster", f"{zookeeper.connect_string}/samsa", brokers=1, broker_overrides=overrides
    )
    for controller in cluster.controllers.values():
        controller.overrides["zookeeper.connection.timeout.ms"] = str(zk_timeout_ms)
    return cluster


def _terminate(process: Node, bound: float) -> tuple[int, float]:
    """SIGTERM; the exit code and the seconds it took (fails if the process outlives ``bound``)."""
    assert process.process is not None
    started = time.monotonic()
    process.signal(signal.SIGTERM)
    code = process.process.wait(bound)
    return code, time.monotonic() - started


def _wait_for_log(process: Node, text: str, count: int = 1, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while process.log().count(text) < count:
        assert time.monotonic() < deadline, f"{text!r} not logged {count} times:\n{process.log()[-3000:]}"
        time.sleep(0.02)


def _produce(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    acked: list[int] = []
    for n in range(RECORDS):
        producer.produce(
            TOPIC, str(n).encode(), on_delivery=lambda err, msg: err is None and acked.append(msg.offset())
        )
    assert producer.flush(20) == 0
    assert len(acked) == RECORDS


def _consume(bootstrap: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    values: list[int] = []
    deadline = time.monotonic() + 30
    try:
        while len(values) < RECORDS and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(int(msg.value()))
    finally:
        consumer.close()
    return values


def test_a_broker_stops_with_zookeeper_down_and_comes_back_clean(
    tmp_path: Path, own_zookeeper: ZooKeeperServer
) -> None:
    cluster = _cluster(tmp_path, own_zookeeper, zk_timeout_ms=ZK_TIMEOUT_MS)
    try:
        cluster.start()
        broker = cluster.broker(1)
        cluster.create_topic(TOPIC, 1)
        _produce(broker.bootstrap)
        own_zookeeper.stop()

        code, took = _terminate(broker, BROKER_BOUND)

        assert code == 0
        assert took <= BROKER_BOUND
        log = broker.log()
        assert f"looking up the active controller in ZooKeeper (try 1 of {TRIES}, up to 2 s)" in log
        assert "ZooKeeper unreachable (no answer within 2 s), skipping" in log
        assert f"try 2 of {TRIES}" not in log  # nothing to gain from more tries without ZooKeeper
        assert "flushing and closing the logs" in log
        assert "shut down completed" in log
        assert (broker.log_dir / CLEAN_SHUTDOWN_FILE).exists()

        own_zookeeper.start()
        broker.start()
        _wait_for_log(broker, "started (cluster", count=2)
        cluster.wait_for_leaders(TOPIC, 1)
        assert sorted(_consume(broker.bootstrap)) == list(range(RECORDS))
        print(f"broker exited {took:.1f} s after SIGTERM with ZooKeeper down (bound {BROKER_BOUND} s)")
    finally:
        cluster.stop()


def test_a_second_sigterm_ends_a_waiting_broker_at_once(
    tmp_path: Path, own_zookeeper: ZooKeeperServer
) -> None:
    cluster = _cluster(tmp_path, own_zookeeper, zk_timeout_ms=WAITING_FOREVER_MS)
    try:
        cluster.start()
        broker = cluster.broker(1)
        own_zookeeper.stop()
        broker.signal(signal.SIGTERM)
        _wait_for_log(broker, "looking up the active controller in ZooKeeper")

        code, took = _terminate(broker, FORCED_BOUND)

        assert code == FORCED_EXIT_CODE
        assert "SIGTERM received again: exiting at once (code 1) without finishing" in broker.log()
        print(f"broker exited {took:.2f} s after the second SIGTERM")
    finally:
        cluster.stop(graceful=False)  # ZooKeeper stays down: the controller could only wait for it


def test_a_controller_stops_with_zookeeper_down(tmp_path: Path, own_zookeeper: ZooKeeperServer) -> None:
    cluster = _cluster(tmp_path, own_zookeeper, zk_timeout_ms=ZK_TIMEOUT_MS)
    try:
        cluster.claim_data_dir()
        cluster.controller(9001).start()
        controller = cluster.active_controller()
        own_zookeeper.stop()

        code, took = _terminate(controller, CONTROLLER_BOUND)

        assert code == 0
        assert took <= CONTROLLER_BOUND
        log = controller.log()
        assert "finishing the event in progress and resigning (up to 2 s)" in log
        assert "did not finish and resign within 2 s (ZooKeeper unreachable?), skipping" in log
        assert "shut down completed" in log
        print(f"controller exited {took:.1f} s after SIGTERM with ZooKeeper down")
    finally:
        cluster.stop()


def test_a_second_sigterm_ends_a_waiting_controller_at_once(
    tmp_path: Path, own_zookeeper: ZooKeeperServer
) -> None:
    cluster = _cluster(tmp_path, own_zookeeper, zk_timeout_ms=WAITING_FOREVER_MS)
    try:
        cluster.claim_data_dir()
        cluster.controller(9001).start()
        controller = cluster.active_controller()
        own_zookeeper.stop()
        controller.signal(signal.SIGTERM)
        _wait_for_log(controller, "finishing the event in progress and resigning")

        code, _ = _terminate(controller, FORCED_BOUND)

        assert code == FORCED_EXIT_CODE
        assert "SIGTERM received again" in controller.log()
    finally:
        cluster.stop()
