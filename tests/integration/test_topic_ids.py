"""Topic ids end to end on a real cluster (KIP-516, Kafka 3.9 in ZooKeeper mode): every replica keeps
the id Metadata reports in its partition directory's partition.metadata; a topic deleted and re-created
under its name while a consumer and the replicas fetch it is never read as the old one; and a broker
down during the deletion comes back, has its old log deleted by the controller's deletion retry (the
topic cannot be re-created until then, as in Kafka), and ends up a replica of the new topic only."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import MetadataRequest
from storage.partition_metadata import PARTITION_METADATA_FILE, topic_id_string
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient
from tools.local_cluster import LocalClusterError

pytestmark = pytest.mark.integration

TOPIC = "reborn"


@pytest.fixture
def three(tmp_path: Path, zookeeper: str) -> Iterator[Cluster]:
    with Cluster(
        tmp_path / "c", zookeeper, brokers=3, broker_overrides={"group.initial.rebalance.delay.ms": "0"}
    ) as cluster:
        yield cluster


def _topic_id(cluster: Cluster, topic: str = TOPIC) -> uuid.UUID:
    client = RawClient(cluster.broker(1).bootstrap)
    try:
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
        )
        response: Any = client.request(ApiKey.METADATA, 12, request)
        [found] = response.topics
    finally:
        client.close()
    assert found.error_code == ErrorCode.NONE
    return found.topic_id


def _on_disk(cluster: Cluster, broker_id: int, partition: int = 0, topic: str = TOPIC) -> str | None:
    path = cluster.broker(broker_id).log_dir / f"{topic}-{partition}" / PARTITION_METADATA_FILE
    return path.read_text() if path.exists() else None


def _segments(cluster: Cluster, broker_id: int, topic: str = TOPIC) -> bytes:
    directory = cluster.broker(broker_id).log_dir / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def _produce(cluster: Cluster, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for value in values:
        producer.produce(TOPIC, value=value, partition=0)
    assert producer.flush(30) == 0


def _deleted(cluster: Cluster, topic: str = TOPIC) -> None:
    cluster.delete_topic(topic)
    cluster.wait_for(
        lambda zk: (
            zk.exists(f"/brokers/topics/{topic}") is None
            and zk.exists(f"/admin/delete_topics/{topic}") is None
        ),
        f"the deletion of {topic} to complete",
        timeout=30,
    )


def _expected(topic_id: uuid.UUID) -> str:
    return f"version: 0\ntopic_id: {topic_id_string(topic_id)}"


def test_every_replica_keeps_the_topic_id_metadata_reports(three: Cluster) -> None:
    three.create_topic(TOPIC, 2, replication_factor=3)
    topic_id = _topic_id(three)
    assert topic_id.int
    three.wait(
        lambda: all(_on_disk(three, b, p) == _expected(topic_id) for b in (1, 2, 3) for p in (0, 1)),
        "partition.metadata with the topic id in every replica's partition directory",
        timeout=15,
    )


def test_a_topic_deleted_and_recreated_is_never_read_as_the_old_one(three: Cluster) -> None:
    """A group consumer reads the old topic, the topic is deleted and re-created with more records than
    the old one had: the consumer ends up with exactly the new records (no old one after the deletion,
    none of the new skipped at the old committed position), and every replica holds only the new
    topic's data, with the new id on disk."""
    from confluent_kafka import Consumer

    three.create_topic(TOPIC, 1, replication_factor=3)
    old_id = _topic_id(three)
    old = [b"old-%03d" % i for i in range(20)]
    new = [b"new-%03d" % i for i in range(50)]
    _produce(three, old)
    consumer = Consumer(
        {
            "bootstrap.servers": three.bootstrap,
            "group.id": "reborn-readers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 100,
            "topic.metadata.refresh.interval.ms": 500,
            "allow.auto.create.topics": False,
        }
    )
    seen: list[bytes] = []

    def poll_until(done: object, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not done() and time.monotonic() < deadline:  # type: ignore[operator]
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.append(message.value() or b"")

    try:
        consumer.subscribe([TOPIC])
        poll_until(lambda: len(seen) >= len(old), 30)
        assert seen == old
        poll_until(lambda: False, 0.5)  # the commit of the old position goes out
        _deleted(three)
        poll_until(lambda: False, 1.0)  # the consumer and the replicas fetch on across the deletion
        three.create_topic(TOPIC, 1, replication_factor=3)
        new_id = _topic_id(three)
        assert new_id != old_id
        _produce(three, new)
        poll_until(lambda: set(new) <= set(seen), 30)
    finally:
        consumer.close()
    after = seen[len(old) :]
    assert not [v for v in after if v.startswith(b"old-")], "an old record was read after the deletion"
    assert sorted(set(after)) == new
    three.wait(
        lambda: all(_segments(three, b) == _segments(three, three.leader(TOPIC, 0)) for b in (1, 2, 3)),
        "every replica to hold the leader's bytes",
        timeout=15,
    )
    for broker_id in (1, 2, 3):
        assert _on_disk(three, broker_id) == _expected(new_id)
        data = _segments(three, broker_id)
        assert b"old-" not in data and all(v in data for v in new)


def test_a_broker_down_during_deletion_comes_back_to_the_new_topic_only(three: Cluster) -> None:
    three.create_topic(TOPIC, 1, replication_factor=3)
    old_id = _topic_id(three)
    _produce(three, [b"old-%03d" % i for i in range(20)])
    three.wait(lambda: b"old-019" in _segments(three, 3), "broker 3 to copy the old records", timeout=15)
    three.broker(3).stop()
    three.delete_topic(TOPIC)
    # As in Kafka: the deletion waits for broker 3's replica, and the name cannot be reused meanwhile.
    time.sleep(1.0)
    with pytest.raises(LocalClusterError, match="TOPIC_ALREADY_EXISTS"):
        three.create_topic(TOPIC, 1, replication_factor=2, timeout=5)
    assert (three.broker(3).log_dir / f"{TOPIC}-0").is_dir()
    three.broker(3).start()
    # The controller retries the deletion for the broker that came back: its old log goes.
    three.wait_for(
        lambda zk: zk.exists(f"/brokers/topics/{TOPIC}") is None,
        "the deletion to complete once broker 3 is back",
        timeout=30,
    )
    assert not (three.broker(3).log_dir / f"{TOPIC}-0").exists()
    three.create_topic(TOPIC, 1, replication_factor=3)
    new_id = _topic_id(three)
    assert new_id != old_id
    new = [b"new-%03d" % i for i in range(5)]
    _produce(three, new)
    three.wait(
        lambda: (
            _segments(three, 3) == _segments(three, three.leader(TOPIC, 0))
            and b"new-004" in _segments(three, 3)
        ),
        "broker 3 to replicate the new topic",
        timeout=15,
    )
    assert _on_disk(three, 3) == _expected(new_id)
    assert b"old-" not in _segments(three, 3)
