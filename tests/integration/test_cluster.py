"""A real cluster (ZooKeeper, controllers, three brokers) as a user sees it: failover of the controller
and of brokers, and the long-poll latency of Fetch."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from protocol import record_batch
from protocol.api import ApiKey
from protocol.messages import MetadataRequest
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient, fetch_request, produce_request

pytestmark = pytest.mark.integration


def _metadata(cluster: Cluster, topic: str) -> object:
    client = RawClient(cluster.bootstrap.split(",")[0])
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
    )
    response = client.request(ApiKey.METADATA, 9, request)
    client.close()
    return response


def _produce(bootstrap: str, topic: str, partition: int, value: bytes) -> object:
    batch = record_batch.encode_batch(
        [record_batch.Record(0, int(time.time() * 1000), b"k", value)], base_offset=0
    )
    request = produce_request(topic, batch, partition, acks=1)
    client = RawClient(bootstrap)
    response = client.request(ApiKey.PRODUCE, 9, request)
    client.close()
    return response.responses[0].partition_responses[0]


def _leader_bootstrap(cluster: Cluster, topic: str, partition: int) -> str:
    leader = _metadata(cluster, topic).topics[0].partitions[partition].leader_id
    return cluster.broker(leader).bootstrap


def test_a_consumer_waiting_in_fetch_gets_a_new_record_within_50_ms(cluster: Cluster) -> None:
    cluster.create_topic("long-poll", 1)
    leader = _leader_bootstrap(cluster, "long-poll", 0)
    fetch = fetch_request("long-poll", max_wait_ms=10_000, min_bytes=1)
    consumer = RawClient(leader, timeout=15)
    answered: list[float] = []
    responses: list[object] = []

    def wait_in_fetch() -> None:
        responses.append(consumer.request(ApiKey.FETCH, 12, fetch))
        answered.append(time.monotonic())

    waiter = threading.Thread(target=wait_in_fetch)
    waiter.start()
    time.sleep(1.0)  # the fetch is parked in the purgatory by now
    assert waiter.is_alive(), "the fetch returned before any data existed"
    sent = time.monotonic()
    assert _produce(leader, "long-poll", 0, b"hello").error_code == 0
    waiter.join(5)
    assert answered, "the waiting fetch never returned"
    delay_ms = (answered[0] - sent) * 1000
    assert delay_ms < 50, f"the waiting fetch returned {delay_ms:.1f} ms after the produce was sent"
    records = responses[0].responses[0].partitions[0].records
    assert [r.value for r in record_batch.decode_records(records)] == [b"hello"]


def test_the_standby_controller_takes_over_when_the_active_one_is_killed(
    tmp_path: Path, zookeeper: str
) -> None:
    cluster = Cluster(tmp_path / "c", zookeeper, brokers=3, controllers=2).start()
    try:
        active = cluster.active_controller()
        epoch_before = int(
            cluster.wait_for(lambda zk: zk.get("/controller_epoch")[0], "the controller epoch")
        )
        active.signal(signal.SIGKILL)
        started = time.monotonic()
        standby = cluster.wait_for(
            lambda zk: (
                zk.exists("/controller")
                and int(zk.get("/controller_epoch")[0]) > epoch_before
                and zk.get("/controller")[0]
            ),
            "a new active controller",
            timeout=15,
        )
        assert time.monotonic() - started < 10
        assert standby and cluster.active_controller() is not active
        cluster.create_topic("after-failover", 3)
    finally:
        cluster.stop()


def test_a_dead_brokers_partitions_move_and_it_rejoins_after_a_restart(cluster: Cluster) -> None:
    cluster.create_topic("moving", 6, replication_factor=2)
    before = {p.partition_index: p.leader_id for p in _metadata(cluster, "moving").topics[0].partitions}
    victim = cluster.broker(before[0])
    victim.process.send_signal(signal.SIGKILL)
    victim.process.wait()

    def moved(_zk: object) -> dict[int, int] | None:
        partitions = _metadata(cluster, "moving").topics[0].partitions
        leaders = {p.partition_index: p.leader_id for p in partitions}
        return leaders if all(leader not in (-1, victim.broker_id) for leader in leaders.values()) else None

    after = cluster.wait_for(moved, "new leaders for the dead broker's partitions", timeout=30)
    assert all(after[p] == before[p] for p in before if before[p] != victim.broker_id)
    # Clients carry on: every partition takes writes at its new leader.
    for partition in range(6):
        response = _produce(_leader_bootstrap(cluster, "moving", partition), "moving", partition, b"after")
        assert response.error_code == 0
    victim.start()  # returns once it has registered; the controller then tells every broker
    cluster.wait_for(
        lambda _zk: victim.broker_id in {b.node_id for b in _metadata(cluster, "moving").brokers},
        "the restarted broker in the cluster's metadata",
    )


def test_a_paused_controller_that_lost_its_session_changes_nothing_when_it_resumes(
    tmp_path: Path, zookeeper: str
) -> None:
    """Split brain: the active controller is paused (SIGSTOP) until its ZooKeeper session expires, the
    standby takes over and changes leadership, then the first one resumes: it must write nothing and
    the brokers must keep the new controller's view."""
    cluster = Cluster(tmp_path / "c", zookeeper, brokers=3, controllers=2)
    for controller in cluster.controllers.values():
        controller.overrides["zookeeper.session.timeout.ms"] = "2000"
    cluster.start()
    try:
        cluster.create_topic("fenced", 3, replication_factor=2)
        old = cluster.active_controller()
        old_epoch = int(cluster.wait_for(lambda zk: zk.get("/controller_epoch")[0], "the epoch"))
        old.signal(signal.SIGSTOP)
        cluster.wait_for(
            lambda zk: zk.exists("/controller") and int(zk.get("/controller_epoch")[0]) > old_epoch,
            "the standby to take over",
            timeout=20,
        )
        new = cluster.active_controller()
        assert new is not old
        # The new controller changes leadership: kill the leader of partition 0.
        leader = _metadata(cluster, "fenced").topics[0].partitions[0].leader_id
        cluster.broker(leader).signal(signal.SIGKILL)
        moved = cluster.wait_for(
            lambda zk: (s := cluster.partition_state("fenced", 0)).leader not in (leader, -1) and s,
            "a new leader for fenced-0",
            timeout=20,
        )
        states = {p: cluster.partition_state("fenced", p) for p in range(3)}
        old.signal(signal.SIGCONT)
        cluster.wait_for(
            lambda _zk: "resign" in old.log().lower(), "the old controller to resign", timeout=20
        )
        time.sleep(2)  # give a zombie every chance to write
        assert {p: cluster.partition_state("fenced", p) for p in range(3)} == states
        assert moved.controller_epoch > old_epoch
        assert cluster.active_controller() is new
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="fenced")], allow_auto_topic_creation=False
        )
        for broker in cluster.brokers.values():
            if broker.alive:
                client = RawClient(broker.bootstrap)
                seen = client.request(ApiKey.METADATA, 9, request).topics[0].partitions
                client.close()
                p0 = next(p for p in seen if p.partition_index == 0)
                assert (p0.leader_id, p0.leader_epoch) == (moved.leader, moved.leader_epoch), broker.broker_id
    finally:
        cluster.stop()


def test_a_broker_whose_session_expired_registers_again(cluster: Cluster) -> None:
    broker = cluster.broker(2)
    path = "/brokers/ids/2"
    owner = cluster.wait_for(
        lambda zk: zk.exists(path) and zk.exists(path).ephemeralOwner, "the registration"
    )
    broker.signal(signal.SIGSTOP)  # longer than its 6 s session: ZooKeeper expires it
    cluster.wait_for(lambda zk: not zk.exists(path), "the registration to expire", timeout=20)
    broker.signal(signal.SIGCONT)
    renewed = cluster.wait_for(
        lambda zk: zk.exists(path) and zk.exists(path).ephemeralOwner != owner and zk.exists(path),
        "the broker to register under a new session",
        timeout=20,
    )
    assert renewed.ephemeralOwner != owner
    assert "registering again" in broker.log()


def test_sigterm_moves_leadership_away_before_the_broker_stops(cluster: Cluster) -> None:
    cluster.create_topic("handover", 6, replication_factor=2)
    leaders = {p.partition_index: p.leader_id for p in _metadata(cluster, "handover").topics[0].partitions}
    victim = cluster.broker(leaders[0])
    assert victim.stop() == 0
    assert "controlled shutdown succeeded" in victim.log()
    # The controller moved every leadership before the broker left: none went offline.
    after = {p.partition_index: p.leader_id for p in _metadata(cluster, "handover").topics[0].partitions}
    assert all(leader not in (victim.broker_id, -1) for leader in after.values()), after
    assert "ControlledShutdown" in cluster.active_controller().log() or "controlled shutdown" in (
        cluster.active_controller().log().lower()
    )
