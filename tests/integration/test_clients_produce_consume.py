"""Every real client produces 10,000 keyed records with headers and timestamps to a 6-partition topic of a
real cluster (ZooKeeper, a controller, three brokers), with each codec it supports, and reads them all back:
in order per partition, at the offsets acknowledged, contents intact (tests/support/clients/runners.py).

The default tier runs each client once (gzip, the codec every client has) plus every other client reading
aiokafka's records; the other codecs, acks=0/1 and idempotent producers are in the slow tier.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from protocol import compression, record_batch
from protocol.api import ApiKey
from protocol.messages import ApiVersionsRequest, MetadataRequest
from tests.support.clients import runners
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient, fetch_request
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

COUNT = 10_000
PARTITIONS = 6
QUICK_CODEC = "gzip"  # the one codec every client has
FETCH_BYTES = 1 << 20

LIBRDKAFKA_CLIENTS = ("confluent-kafka", "kcat")

T = TypeVar("T")


class CodecNotUsed(AssertionError):
    """The broker holds the records, but not compressed with the codec the producer was given."""


class ProduceConsumeCluster:
    """A real cluster shared by the module's tests, each of which creates topics of its own."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._topics = itertools.count()
        client = RawClient(cluster.broker(1).bootstrap)
        try:
            response = client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest())
        finally:
            client.close()
        # What the brokers advertise: {api key: (min, max)}.
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def new_topic(self, label: str) -> str:
        """A topic of PARTITIONS partitions, created through aiokafka's admin client."""
        topic = f"records-{label}-{next(self._topics)}"
        self.cluster.create_topic(topic, PARTITIONS)
        return topic

    def stored_codecs(self, topic: str, partition: int) -> set[str]:
        """The codecs of the batches the partition's leader returns from offset 0 (one Fetch)."""
        client = RawClient(self.cluster.broker(1).bootstrap)
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
        )
        (found,) = client.request(ApiKey.METADATA, 9, request).topics
        client.close()
        leader = next(p.leader_id for p in found.partitions if p.partition_index == partition)
        fetch = fetch_request(topic, partition, max_bytes=FETCH_BYTES)
        client = RawClient(self.cluster.broker(leader).bootstrap)
        (response,) = client.request(ApiKey.FETCH, 11, fetch).responses
        client.close()
        records = bytes(response.partitions[0].records or b"")
        return {
            compression.CODEC_NAMES[header.attributes & record_batch.ATTR_COMPRESSION_MASK]
            for _, header in record_batch.iter_headers(records)
        }

    def codec_not_used(self, client: str, codec: str) -> list[str]:
        """Why librdkafka would send `codec` uncompressed to these brokers: its feature checks."""
        reasons = []
        if client not in LIBRDKAFKA_CLIENTS:
            return reasons
        produce_min = self.versions[ApiKey.PRODUCE][0]
        if client == "kcat" and codec in ("gzip", "snappy", "lz4") and produce_min > 0:
            reasons.append(
                f"librdkafka before the fix of librdkafka#4956 (Debian kcat's 2.0.2) uses {codec} only if "
                "the broker advertises Produce v0; Kafka advertises Produce from v0 for that reason "
                f"(KAFKA-18659), Samsa from v{produce_min}"
            )
        return reasons

    def check_codec(self, topic: str, codec: str) -> None:
        stored = self.stored_codecs(topic, 0)
        if stored != {codec}:
            raise CodecNotUsed(f"{codec} requested, partition 0 holds batches of {sorted(stored)}")

    def check_alive(self) -> None:
        dead = [b.broker_id for b in self.cluster.brokers.values() if not b.alive]
        dead += [c.controller_id for c in self.cluster.controllers.values() if not c.alive]
        assert not dead, f"processes {dead} died"


@pytest.fixture(scope="module")
def shared_cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer
) -> Iterator[ProduceConsumeCluster]:
    """conftest's `cluster` (one controller, three brokers), started once for the module."""
    chroot = f"{zookeeper_server.connect_string}/samsa-produce-consume"
    running = Cluster(tmp_path_factory.mktemp("produce-consume"), chroot).start()
    try:
        yield ProduceConsumeCluster(running)
    finally:
        running.stop()


def run(scenario: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Calls a runner scenario; a client not installed here skips the test."""
    try:
        return scenario(*args, **kwargs)
    except runners.ClientNotInstalled as e:
        pytest.skip(str(e))


def round_trip(
    request: pytest.FixtureRequest,
    cluster: ProduceConsumeCluster,
    client: str,
    codec: str,
    *,
    acks: int = -1,
    idempotent: bool = False,
) -> None:
    """Produce, consume, compare; then check the codec the batches are stored with. A codec the client is
    known to leave unused against these brokers is a strict xfail on that check alone: it passes (and so
    fails the test) as soon as the cause is fixed."""
    reasons = cluster.codec_not_used(client, codec)
    if reasons:
        request.applymarker(pytest.mark.xfail(raises=CodecNotUsed, strict=True, reason="; ".join(reasons)))
    topic = cluster.new_topic(f"{client}-{codec}")
    produced = run(
        runners.PRODUCE[client],
        cluster.bootstrap,
        topic,
        COUNT,
        codec=codec,
        acks=acks,
        idempotent=idempotent,
    )
    consumed = run(runners.CONSUME[client], cluster.bootstrap, topic, PARTITIONS, COUNT)
    runners.check_round_trip(produced, consumed)
    cluster.check_codec(topic, codec)
    cluster.check_alive()


@pytest.mark.parametrize("client", runners.CLIENTS)
def test_round_trip(
    request: pytest.FixtureRequest, shared_cluster: ProduceConsumeCluster, client: str
) -> None:
    round_trip(request, shared_cluster, client, QUICK_CODEC)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("client", "codec"),
    [(c, codec) for c in runners.CLIENTS for codec in runners.CODECS[c] if codec != QUICK_CODEC],
)
def test_round_trip_every_codec(
    request: pytest.FixtureRequest, shared_cluster: ProduceConsumeCluster, client: str, codec: str
) -> None:
    round_trip(request, shared_cluster, client, codec)


@pytest.mark.slow
@pytest.mark.parametrize("acks", [0, 1])
@pytest.mark.parametrize("client", runners.CLIENTS)
def test_round_trip_fewer_acks(
    request: pytest.FixtureRequest, shared_cluster: ProduceConsumeCluster, client: str, acks: int
) -> None:
    round_trip(request, shared_cluster, client, "none", acks=acks)


@pytest.mark.slow
@pytest.mark.parametrize("client", runners.CLIENTS)
def test_round_trip_idempotent(
    request: pytest.FixtureRequest, shared_cluster: ProduceConsumeCluster, client: str
) -> None:
    if ApiKey.INIT_PRODUCER_ID not in shared_cluster.versions:
        pytest.skip("the brokers do not serve InitProducerId yet")
    round_trip(request, shared_cluster, client, QUICK_CODEC, idempotent=True)


@pytest.fixture(scope="module")
def aiokafka_records(shared_cluster: ProduceConsumeCluster) -> tuple[str, runners.ProduceResult]:
    topic = shared_cluster.new_topic("from-aiokafka")
    return topic, run(runners.produce_aiokafka, shared_cluster.bootstrap, topic, COUNT, codec=QUICK_CODEC)


@pytest.mark.parametrize("reader", [c for c in runners.CLIENTS if c != "aiokafka"])
def test_other_clients_read_aiokafka_records(
    shared_cluster: ProduceConsumeCluster, aiokafka_records: tuple[str, runners.ProduceResult], reader: str
) -> None:
    topic, produced = aiokafka_records
    consumed = run(runners.CONSUME[reader], shared_cluster.bootstrap, topic, PARTITIONS, COUNT)
    runners.check_round_trip(produced, consumed)
