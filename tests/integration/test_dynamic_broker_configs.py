"""Dynamic broker configs applied while the brokers run, changed with confluent-kafka's AdminClient as a
Kafka operator changes them: a broker's advertised.listeners reaches Metadata on every broker (through its
rewritten registration and the controller's UpdateMetadata), a listener added accepts at once and a
removed one closes, a lowered max.connections.per.ip refuses the connection beyond it, and num.io.threads
changed leaves the broker serving."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from protocol.api import ApiKey
from protocol.messages import ApiVersionsRequest, MetadataRequest
from tests.support.cluster import Cluster, chroot, free_port
from tests.support.raw_client import RawClient
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def two_brokers(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer
) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("dynamic-broker-configs")
    with Cluster(workdir, chroot(zookeeper_server), brokers=2) as running:
        yield running


def admin(cluster: Cluster) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def alter_broker(cluster: Cluster, broker_id: int, **changes: str | None) -> None:
    """Sets (a value) or deletes (None) per-broker dynamic configs with IncrementalAlterConfigs."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    entries = [
        ConfigEntry(
            name.replace("_", "."),
            value,
            incremental_operation=AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET,
        )
        for name, value in changes.items()
    ]
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id), incremental_configs=entries)
    client = admin(cluster)  # referenced until the answer: a destroyed client fails its futures
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout=10)


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def metadata_brokers(bootstrap: str) -> dict[int, tuple[str, int]]:
    raw = RawClient(bootstrap)
    try:
        response = raw.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
    finally:
        raw.close()
    return {b.node_id: (b.host, b.port) for b in response.brokers}  # type: ignore[attr-defined]


def test_advertised_listeners_change_reaches_metadata_on_every_broker(two_brokers: Cluster) -> None:
    broker = two_brokers.broker(1)
    other = two_brokers.broker(2)
    try:
        alter_broker(two_brokers, 1, advertised_listeners=f"PLAINTEXT://localhost:{broker.port}")
        for bootstrap in (broker.bootstrap, other.bootstrap):
            wait_until(
                partial(lambda at: metadata_brokers(at).get(1) == ("localhost", broker.port), bootstrap),
                f"Metadata from {bootstrap} to give broker 1 at localhost",
            )
        # A client bootstrapped anywhere sees (and uses) the new address.
        client = admin(two_brokers)
        seen = client.list_topics(timeout=10).brokers[1]
        assert (seen.host, seen.port) == ("localhost", broker.port)
    finally:
        alter_broker(two_brokers, 1, advertised_listeners=None)
    wait_until(
        lambda: metadata_brokers(other.bootstrap).get(1) == (broker.host, broker.port),
        "broker 1 back at its listener's address",
    )
    assert "registration updated" in broker.log_path.read_text()


def test_a_listener_added_at_runtime_accepts_and_a_removed_one_closes(two_brokers: Cluster) -> None:
    broker = two_brokers.broker(1)
    port = free_port()
    plain = f"PLAINTEXT://{broker.host}:{broker.port}"
    alter_broker(
        two_brokers,
        1,
        listener_security_protocol_map="PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
        listeners=f"{plain},EXTRA://127.0.0.1:{port}",
        advertised_listeners=f"{plain},EXTRA://127.0.0.1:{port}",
    )

    def extra_answers() -> bool:
        try:
            raw = RawClient(f"127.0.0.1:{port}")
        except OSError:
            return False
        try:
            return raw.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest()).error_code == 0  # type: ignore[attr-defined]
        finally:
            raw.close()

    wait_until(extra_answers, "the EXTRA listener to answer")
    # Metadata asked on the EXTRA listener gives the brokers' EXTRA endpoints (broker 1's only).
    assert metadata_brokers(f"127.0.0.1:{port}") == {1: ("127.0.0.1", port)}
    alter_broker(
        two_brokers, 1, listeners=None, advertised_listeners=None, listener_security_protocol_map=None
    )

    def refused() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return True
        return False

    wait_until(refused, "the EXTRA listener to close")
    assert metadata_brokers(broker.bootstrap)[1] == (broker.host, broker.port)


def test_lowered_max_connections_per_ip_refuses_the_connection_beyond_it(two_brokers: Cluster) -> None:
    broker = two_brokers.broker(2)
    limit = 20
    # Connections from 127.0.0.3 (a loopback address of their own): none but this test's.
    alter_broker(two_brokers, 2, max_connections_per_ip=str(limit))
    opened: list[socket.socket] = []
    try:
        wait_until(
            lambda: f"max.connections.per.ip={limit} " in broker.log_path.read_text(),
            "the new limit to apply",
        )
        for _ in range(limit):
            opened.append(
                socket.create_connection((broker.host, broker.port), source_address=("127.0.0.3", 0))
            )
        beyond = socket.create_connection((broker.host, broker.port), source_address=("127.0.0.3", 0))
        beyond.settimeout(5)
        assert beyond.recv(1) == b""  # accepted by the kernel, closed by the broker
        beyond.close()
        # The ones within the limit are served.
        raw = RawClient(broker.bootstrap)
        raw.close()
    finally:
        for sock in opened:
            sock.close()
        alter_broker(two_brokers, 2, max_connections_per_ip=None)
    wait_until(
        lambda: (
            "max.connections.per.ip (/config/brokers/2) = (deleted): applied now"
            in broker.log_path.read_text()
        ),
        "the limit to be lifted",
    )
    extra = socket.create_connection((broker.host, broker.port), source_address=("127.0.0.3", 0))
    try:
        for _ in range(limit):
            opened.append(
                socket.create_connection((broker.host, broker.port), source_address=("127.0.0.3", 0))
            )
        extra.settimeout(0.5)
        with pytest.raises(TimeoutError):
            extra.recv(1)  # still open
    finally:
        extra.close()
        for sock in opened:
            sock.close()


def test_io_threads_cleaner_threads_and_replica_fetchers_change_while_serving(two_brokers: Cluster) -> None:
    from confluent_kafka import Consumer, Producer

    broker = two_brokers.broker(1)
    topic = f"io-threads-{uuid.uuid4().hex[:8]}"
    two_brokers.create_topic(topic, partitions=1, replication_factor=2)
    alter_broker(two_brokers, 1, num_io_threads="16", log_cleaner_threads="2")
    wait_until(
        lambda: "resized from 8 to 16 workers" in broker.log_path.read_text(), "the handler pool to grow"
    )
    wait_until(lambda: "log cleaner threads: 1 -> 2" in broker.log_path.read_text(), "the cleaner to grow")
    alter_broker(two_brokers, 1, num_io_threads="8")
    wait_until(
        lambda: "resized from 16 to 8 workers" in broker.log_path.read_text(), "the handler pool to shrink"
    )
    # Whichever broker follows the partition: its replica fetchers are resized while it replicates.
    for broker_id in (1, 2):
        alter_broker(two_brokers, broker_id, num_replica_fetchers="2")
        log_path = two_brokers.broker(broker_id).log_path
        wait_until(
            lambda path=log_path: "replica fetchers per leader: 1 -> 2" in path.read_text(),
            f"broker {broker_id}'s replica fetchers to grow",
        )
    producer = Producer({"bootstrap.servers": two_brokers.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce(topic, key=str(i).encode(), value=b"v%d" % i)
    assert producer.flush(15) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": two_brokers.bootstrap,
            "group.id": topic,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        got: list[bytes | None] = []
        deadline = time.monotonic() + 20
        while len(got) < 100 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        assert got == [b"v%d" % i for i in range(100)]
    finally:
        consumer.close()
        alter_broker(two_brokers, 1, num_io_threads=None, log_cleaner_threads=None, num_replica_fetchers=None)
        alter_broker(two_brokers, 2, num_replica_fetchers=None)


def alter_cluster_default(cluster: Cluster, **changes: str | None) -> None:
    """IncrementalAlterConfigs of the cluster default (the empty resource name, as the Java client sends
    it; librdkafka refuses to send it)."""
    from protocol.messages import IncrementalAlterConfigsRequest

    body = IncrementalAlterConfigsRequest(
        resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=4,  # BROKER
                resource_name="",
                configs=[
                    IncrementalAlterConfigsRequest.AlterableConfig(
                        name=name.replace("_", "."), config_operation=1 if value is None else 0, value=value
                    )
                    for name, value in changes.items()
                ],
            )
        ],
        validate_only=False,
    )
    raw = RawClient(cluster.broker(1).bootstrap)
    try:
        response = raw.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
    finally:
        raw.close()
    assert response.responses[0].error_code == 0, response  # type: ignore[attr-defined]


def test_message_max_bytes_at_the_cluster_default_applies_to_topics_without_their_own(
    two_brokers: Cluster,
) -> None:
    from confluent_kafka import KafkaError, Producer

    topic = f"max-bytes-{uuid.uuid4().hex[:8]}"
    two_brokers.create_topic(topic, partitions=1, replication_factor=2)

    def produce_error() -> int | None:
        """The error producing one 5000-byte record (-1: no answer yet), by a producer of its own."""
        producer = Producer(
            {"bootstrap.servers": two_brokers.bootstrap, "message.max.bytes": 100_000, "acks": "1"}
        )
        errors: list[Any] = []
        producer.produce(topic, value=b"x" * 5000, on_delivery=lambda err, msg: errors.append(err))
        if producer.flush(10) != 0:
            return -1
        return None if errors[0] is None else errors[0].code()

    assert produce_error() is None
    alter_cluster_default(two_brokers, message_max_bytes="2000")
    try:
        wait_until(lambda: produce_error() == KafkaError.MSG_SIZE_TOO_LARGE, "the 5000-byte record refused")
    finally:
        alter_cluster_default(two_brokers, message_max_bytes=None)
    wait_until(lambda: produce_error() is None, "the 5000-byte record accepted again")
