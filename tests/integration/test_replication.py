"""Replication on a real cluster: followers copy their leaders, the ISR shrinks and grows with them,
acks=all honours min.insync.replicas, and consumers see only what every ISR member has."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol import record_batch
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import MetadataRequest
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient, fetch_request, produce_request

pytestmark = pytest.mark.integration

FAST = {"replica.lag.time.max.ms": "1500", "min.insync.replicas": "2"}


@pytest.fixture
def fast_cluster(tmp_path: Path, zookeeper: str) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path / "c", zookeeper, brokers=3, broker_overrides=FAST).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _partition(cluster: Cluster, topic: str, ask: str | None = None) -> object:
    """Partition 0's metadata, from ``ask`` (a broker that is not paused) or the first broker."""
    client = RawClient(ask or cluster.broker(1).bootstrap)
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
    )
    found = client.request(ApiKey.METADATA, 9, request).topics[0].partitions[0]
    client.close()
    return found


def _produce(bootstrap: str, topic: str, values: list[bytes], acks: int = -1) -> object:
    now = int(time.time() * 1000)
    batch = record_batch.encode_batch(
        [record_batch.Record(i, now, None, v) for i, v in enumerate(values)], base_offset=0
    )
    request = produce_request(topic, batch, acks=acks, timeout_ms=3000)
    client = RawClient(bootstrap, timeout=10)
    response = client.request(ApiKey.PRODUCE, 9, request).responses[0].partition_responses[0]
    client.close()
    return response


def _fetch(bootstrap: str, topic: str, offset: int = 0, last_fetched_epoch: int = -1) -> object:
    request = fetch_request(topic, 0, offset, last_fetched_epoch=last_fetched_epoch)
    client = RawClient(bootstrap)
    response = client.request(ApiKey.FETCH, 12, request).responses[0].partitions[0]
    client.close()
    return response


def _segments(cluster: Cluster, broker_id: int, topic: str) -> bytes:
    directory = cluster.broker(broker_id).log_dir / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def test_followers_hold_the_same_batches_as_the_leader(fast_cluster: Cluster) -> None:
    fast_cluster.create_topic("copied", 1, replication_factor=3)
    leader = fast_cluster.broker(_partition(fast_cluster, "copied").leader_id)
    for i in range(20):
        assert _produce(leader.bootstrap, "copied", [b"v%d-%d" % (i, j) for j in range(50)]).error_code == 0
    expected = _segments(fast_cluster, leader.broker_id, "copied")
    fast_cluster.wait_for(
        lambda _zk: all(
            _segments(fast_cluster, b.broker_id, "copied") == expected for b in fast_cluster.brokers.values()
        ),
        "every replica to hold the leader's bytes",
    )
    assert len(record_batch.decode_records(expected)) == 50  # the first batch decodes; 20 batches in all


def test_a_paused_follower_leaves_the_isr_and_acks_all_honours_min_insync(fast_cluster: Cluster) -> None:
    fast_cluster.create_topic("isr", 1, replication_factor=3)
    state = _partition(fast_cluster, "isr")
    leader = fast_cluster.broker(state.leader_id)
    followers = [fast_cluster.broker(r) for r in state.replica_nodes if r != state.leader_id]
    assert _produce(leader.bootstrap, "isr", [b"before"]).error_code == 0

    followers[0].signal(signal.SIGSTOP)
    shrunk = fast_cluster.wait_for(
        lambda _zk: (p := _partition(fast_cluster, "isr", leader.bootstrap)) and len(p.isr_nodes) == 2 and p,
        "the ISR to shrink to two",
        timeout=20,
    )
    assert followers[0].broker_id not in shrunk.isr_nodes
    assert _produce(leader.bootstrap, "isr", [b"two of three"]).error_code == 0  # min.insync.replicas=2

    followers[1].signal(signal.SIGSTOP)
    fast_cluster.wait_for(
        lambda _zk: len(_partition(fast_cluster, "isr", leader.bootstrap).isr_nodes) == 1,
        "the ISR to be the leader alone",
        timeout=20,
    )
    refused = _produce(leader.bootstrap, "isr", [b"one of three"])
    assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS

    for follower in followers:
        follower.signal(signal.SIGCONT)
    fast_cluster.wait_for(
        lambda _zk: len(_partition(fast_cluster, "isr", leader.bootstrap).isr_nodes) == 3,
        "the ISR to grow back",
        timeout=30,
    )
    assert _produce(leader.bootstrap, "isr", [b"after"]).error_code == 0


def test_consumers_see_only_what_every_isr_member_has(fast_cluster: Cluster) -> None:
    fast_cluster.create_topic("hw", 1, replication_factor=3)
    state = _partition(fast_cluster, "hw")
    leader = fast_cluster.broker(state.leader_id)
    follower = fast_cluster.broker(next(r for r in state.replica_nodes if r != state.leader_id))
    follower.signal(signal.SIGSTOP)
    try:
        acked = _produce(leader.bootstrap, "hw", [b"not yet committed"], acks=1)
        assert acked.error_code == 0
        fetched = _fetch(leader.bootstrap, "hw")
        assert fetched.high_watermark == 0 and len(fetched.records) == 0  # a paused ISR member lacks it
        # Once the lagging follower leaves the ISR, the high watermark moves and consumers see the record.
        fast_cluster.wait_for(
            lambda _zk: _fetch(leader.bootstrap, "hw").high_watermark == 1, "the high watermark", timeout=20
        )
    finally:
        follower.signal(signal.SIGCONT)


def test_a_fetch_past_the_end_of_its_last_epoch_is_told_where_the_logs_diverge(fast_cluster: Cluster) -> None:
    """KIP-320 (Fetch v12's LastFetchedEpoch): a fetcher that read epoch E up to an offset the new
    leader's epoch E does not reach gets DivergingEpoch and no records, and truncates to it."""
    fast_cluster.create_topic("diverge", 1, replication_factor=3)
    first = _partition(fast_cluster, "diverge")
    old_leader = fast_cluster.broker(first.leader_id)
    assert _produce(old_leader.bootstrap, "diverge", [b"a", b"b", b"c"]).error_code == 0
    old_leader.stop()
    ask = next(b.bootstrap for b in fast_cluster.brokers.values() if b.broker_id != first.leader_id)
    second = fast_cluster.wait_for(
        lambda _zk: (
            (p := _partition(fast_cluster, "diverge", ask)) and p.leader_id not in (-1, first.leader_id) and p
        ),
        "a new leader",
    )
    leader = fast_cluster.broker(second.leader_id)
    assert _produce(leader.bootstrap, "diverge", [b"d", b"e"]).error_code == 0
    # Read 0-2 in the first epoch and, say, a record at 3 the old leader never committed.
    diverged = _fetch(leader.bootstrap, "diverge", offset=4, last_fetched_epoch=first.leader_epoch)
    assert diverged.error_code == 0 and len(diverged.records) == 0
    assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (first.leader_epoch, 3)
    agreed = _fetch(leader.bootstrap, "diverge", offset=3, last_fetched_epoch=first.leader_epoch)
    assert agreed.diverging_epoch is None and agreed.high_watermark == 5 and len(agreed.records) > 0
    current = _fetch(leader.bootstrap, "diverge", offset=5, last_fetched_epoch=second.leader_epoch)
    assert current.diverging_epoch is None and current.error_code == 0
