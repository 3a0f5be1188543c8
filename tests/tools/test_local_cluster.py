"""LocalCluster against real processes: a 3-broker, 2-controller cluster and each node control on it
(kill, stop, pause/resume, restart, controller failover, a ZooKeeper restart, add a broker), network
partitions in the sandbox, no process outliving a killed parent, and the sweep of an earlier owner's
leftovers. Every process is stopped by PID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.local_cluster import LocalCluster, NetworkSandbox, ZooKeeperNotInstalled, read_state
from tools.local_cluster_nodes import pid_alive, wait_gone
from zk import znodes
from zk.server import four_letter_word

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SESSION_S = 6.0  # LocalCluster's default zookeeper.session.timeout.ms


def started(cluster: LocalCluster) -> LocalCluster:
    try:
        return cluster.start()
    except ZooKeeperNotInstalled as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def events() -> list[str]:
    return []


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, events: list[str]) -> Iterator[LocalCluster]:
    running = started(
        LocalCluster(
            tmp_path_factory.mktemp("local-cluster") / "run",
            brokers=3,
            controllers=2,
            report=lambda kind, text: events.append(text),
        )
    )
    try:
        yield running
    finally:
        pids = [node.pid for node in running.nodes if node.pid is not None]
        running.stop()
    assert not [pid for pid in pids if pid_alive(pid)]


def test_starts_every_node_and_records_it(cluster: LocalCluster, events: list[str]) -> None:
    assert all(node.alive for node in cluster.nodes)
    assert cluster.registered_brokers() == {1, 2, 3}
    assert cluster.active_controller().id in (9001, 9002)
    assert cluster.bootstrap == ",".join(f"127.0.0.1:{cluster.broker(i).port}" for i in (1, 2, 3))
    assert [e.rsplit(" ", 1)[0] for e in events if e.startswith("started")] == [
        "started zookeeper 1", "started controller 9001", "started controller 9002",
        "started broker 1", "started broker 2", "started broker 3",
    ]  # fmt: skip
    state = read_state(cluster.data_dir)
    assert state is not None and state["owner_pid"] == os.getpid()
    assert {n["name"]: n["pid"] for n in state["nodes"]} == cluster.pids()
    written = (cluster.data_dir / "broker-2" / "server.properties").read_text()
    assert "default.replication.factor=3" in written and "broker.id=2" in written
    cluster.create_topic("everywhere", partitions=3)  # replicated 3 times: the cluster's default
    for p in range(3):
        state_p = cluster.partition_state("everywhere", p)
        assert state_p is not None and sorted(state_p.isr) == [1, 2, 3]


def _leader_and_epoch(cluster: LocalCluster, topic: str) -> tuple[int, int]:
    cluster.create_topic(topic, partitions=1)
    state = cluster.partition_state(topic, 0)
    assert state is not None
    return state.leader, state.leader_epoch


def _back_in_isr(cluster: LocalCluster, topic: str, broker_id: int) -> None:
    cluster.wait(
        lambda: (s := cluster.partition_state(topic, 0)) is not None and broker_id in s.isr,
        f"broker {broker_id} back in the ISR of {topic}",
        60,
    )


def test_kill_moves_leadership_after_the_session_timeout_and_start_brings_it_back(
    cluster: LocalCluster,
) -> None:
    leader, _ = _leader_and_epoch(cluster, "killed")
    node = cluster.broker(leader)
    old_pid = node.pid
    since = time.monotonic()
    assert node.kill() == -signal.SIGKILL
    assert not node.alive and old_pid is not None and not pid_alive(old_pid)
    cluster.wait(lambda: cluster.leader("killed", 0) not in (-1, leader), "a new leader", 60)
    # Nothing told the controller: it learnt of the crash when ZooKeeper expired the session.
    assert time.monotonic() - since > SESSION_S / 2
    node.start()
    assert node.alive and node.pid != old_pid
    _back_in_isr(cluster, "killed", leader)
    assert cluster.registered_brokers() == {1, 2, 3}


def test_stop_is_a_controlled_shutdown_that_moves_leadership_first(cluster: LocalCluster) -> None:
    leader, epoch = _leader_and_epoch(cluster, "stopped")
    node = cluster.broker(leader)
    assert node.stop() == 0
    state = cluster.partition_state("stopped", 0)
    assert state is not None and state.leader not in (-1, leader) and state.leader_epoch > epoch
    assert "controlled shutdown succeeded" in node.log(since_start=True)
    node.restart()  # on a stopped node: a start
    _back_in_isr(cluster, "stopped", leader)


def test_pause_expires_the_session_and_resume_registers_again(cluster: LocalCluster) -> None:
    node = cluster.broker(3)
    node.pause()
    try:
        assert node.paused and node.alive
        cluster.wait(lambda: 3 not in cluster.registered_brokers(), "broker 3 deregistered", SESSION_S + 30)
    finally:
        node.resume()
    assert not node.paused
    cluster.wait(lambda: 3 in cluster.registered_brokers(), "broker 3 registered again", 60)
    node.wait_ready()


def test_killing_the_active_controller_elects_the_standby(cluster: LocalCluster) -> None:
    active = cluster.active_controller()
    standby = next(c for c in cluster.controllers.values() if c is not active)
    active.kill()
    cluster.wait(lambda: cluster.active_controller_id() == standby.id, "the standby to take over", 60)
    active.start()
    assert active.alive and active.ready()
    assert cluster.active_controller().id == standby.id  # the restarted one stands by


def brokers_connected_to_their_sessions(cluster: LocalCluster, brokers: set[int]) -> bool:
    """Every broker's registration belongs to a session a client is connected to (ZooKeeper's ``cons``).
    After a restart ZooKeeper restores the sessions and their ephemeral nodes, so a registration alone
    may belong to a session about to expire (a client that did not reconnect within its timeout)."""
    zookeeper = cluster.zookeeper_node
    assert zookeeper is not None
    connected = four_letter_word(zookeeper.host, zookeeper.port, b"cons", timeout=2).decode(errors="replace")
    for broker in brokers:
        stat = cluster.zk().exists(f"{znodes.BROKER_IDS}/{broker}")
        if stat is None or f"sid={stat.ephemeralOwner:#x}" not in connected:
            return False
    return True


def test_zookeeper_restart_keeps_the_sessions(cluster: LocalCluster) -> None:
    zookeeper = cluster.zookeeper_node
    assert zookeeper is not None
    zookeeper.restart()
    assert zookeeper.alive
    assert cluster.wait(
        lambda: brokers_connected_to_their_sessions(cluster, {1, 2, 3}),
        "every broker registered and connected",
        30,
    )
    cluster.create_topic("after-zookeeper", partitions=2)


def test_the_zookeeper_views_see_through_an_outage_longer_than_a_session(cluster: LocalCluster) -> None:
    """ZooKeeper down for longer than a session, then back: the views answer at once and the brokers
    are registered again (a reliability scenario's own kazoo client once failed such a look with
    SessionExpiredError, which is why ``zk()`` retries: test_local_cluster_unit)."""
    zookeeper = cluster.zookeeper_node
    assert zookeeper is not None
    cluster.create_topic("through-outage", partitions=1)
    before = cluster.partition_state("through-outage", 0)
    zookeeper.stop()
    time.sleep(2 * SESSION_S)
    zookeeper.start()
    assert cluster.partition_state("through-outage", 0) == before
    assert cluster.wait(lambda: cluster.registered_brokers() == {1, 2, 3}, "every broker registered", 30)


def _brokers_in_metadata(bootstrap: str) -> set[int]:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).brokers)


def test_add_broker_joins_the_cluster(cluster: LocalCluster) -> None:
    broker = cluster.add_broker(overrides={"log.retention.ms": "600000"})
    assert broker.id == 4 and broker.alive
    assert cluster.registered_brokers() == {1, 2, 3, 4}
    assert "log.retention.ms=600000" in broker.config_path.read_text()
    assert broker.bootstrap in cluster.bootstrap
    # A broker registered in ZooKeeper may not be known to the controller yet, and the controller assigns
    # the topic's replicas among the brokers it knows (after the ZooKeeper restart above, broker 1's new
    # registration is one more to process): its UpdateMetadata naming all four says it knows them.
    cluster.wait(lambda: _brokers_in_metadata(broker.bootstrap) == {1, 2, 3, 4}, "all four in metadata")
    cluster.create_topic("four", partitions=4, replication_factor=1)
    assert sorted(set(cluster.topic_partitions("four", 4).values())) == [1, 2, 3, 4]
    assert broker.kill() == -signal.SIGKILL  # it alone holds a partition: a clean stop would retry
    assert broker.bootstrap not in cluster.bootstrap


def test_partition_and_heal_in_the_network_sandbox(tmp_path: Path) -> None:
    with NetworkSandbox() as sandbox:
        if sandbox.partition_unavailable is not None:
            pytest.skip(f"network partitions unavailable: {sandbox.partition_unavailable}")
        cluster = started(LocalCluster(tmp_path / "run", brokers=2, sandbox=sandbox))
        try:
            assert cluster.broker(1).host != cluster.broker(2).host != "127.0.0.1"
            assert cluster.partition_unavailable is None
            rules = cluster.isolate("broker-2")  # from ZooKeeper, the controller and broker 1
            assert rules
            cluster.wait(lambda: cluster.registered_brokers() == {1}, "broker 2 deregistered", SESSION_S + 30)
            assert cluster.broker(2).alive
            cluster.heal()
            cluster.wait(lambda: cluster.registered_brokers() == {1, 2}, "broker 2 registered again", 60)
        finally:
            cluster.stop()
        assert not any(node.alive for node in cluster.nodes)


PARENT = """
import json, sys, time
from tools.local_cluster import LocalCluster
cluster = LocalCluster(sys.argv[1], brokers=1)
cluster.start()
print(json.dumps(cluster.pids()), flush=True)
time.sleep(600)
"""


def test_no_node_outlives_a_killed_parent(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path / "run")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids: dict[str, int] = {}
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        if not line:
            parent.wait(10)
            assert parent.stderr is not None
            err = parent.stderr.read()
            if "ZooKeeper is not installed" in err:
                pytest.skip(err.strip().splitlines()[-1])
            raise AssertionError(err)
        pids = json.loads(line)
        assert set(pids) == {"zookeeper", "controller-9001", "broker-1"}
        parent.kill()  # no handler, no atexit: only the kernel's parent-death signal stops the nodes
        parent.wait()
        # SIGTERM: each shuts down cleanly, within a broker's shutdown bound (BrokerNode.STOP_TIMEOUT).
        assert wait_gone(list(pids.values()), 60) == []
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in pids.values():
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


# It says so once running: Popen returns as soon as exec has begun, and until the kernel has laid out the
# new program's arguments /proc/PID/cmdline reads empty (seen on a loaded machine), while a real leftover
# has long been running.
SLEEPER = "import time; print('up', flush=True); time.sleep(120)"


def start_sleeper(*args: str) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", SLEEPER, *args], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "up\n"
    return process


def test_start_kills_the_leftovers_of_an_earlier_owner_by_pid(tmp_path: Path) -> None:
    data_dir = (tmp_path / "run").resolve()
    (data_dir / "broker-1").mkdir(parents=True)
    (data_dir / "broker-2").mkdir(parents=True)
    # One left by a killed owner (its command line names a file under the data dir), and an unrelated
    # process that got a recorded pid: only the first is killed.
    config = data_dir / "broker-1" / "server.properties"
    leftover = start_sleeper(str(config))
    stranger = start_sleeper("elsewhere")
    try:
        (data_dir / "broker-1" / "broker.pid").write_text(f"{leftover.pid}\n")
        (data_dir / "cluster.json").write_text(
            json.dumps({"owner_pid": 1, "nodes": [{"name": "broker-2", "pid": stranger.pid}]})
        )
        messages: list[str] = []
        cluster = LocalCluster(data_dir, brokers=2, report=lambda kind, text: messages.append(text))
        cluster.claim_data_dir()
        try:
            assert any(f"killing broker-1 (pid {leftover.pid})" in m for m in messages), messages
            assert leftover.wait(10) == -signal.SIGKILL
            assert stranger.poll() is None
        finally:
            cluster.stop()
    finally:
        for process in (leftover, stranger):
            if process.poll() is None:
                process.kill()
            process.wait()
