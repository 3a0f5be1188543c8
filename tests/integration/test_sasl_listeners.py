"""A real broker with a SASL_PLAINTEXT listener (PLAIN users from its JAAS config, SCRAM-SHA-256/512
credentials written to ZooKeeper as Kafka keeps them) next to its PLAINTEXT one, and real clients on it:
confluent-kafka (librdkafka 2.16), aiokafka, kafka-python and Debian's kcat (librdkafka 2.0.2,
SaslAuthenticate v0) produce and consume; a wrong password and an unknown user fail cleanly, logged
with the peer, other clients undisturbed; a session past connections.max.reauth.ms is closed for a
client that does not re-authenticate, while confluent-kafka re-authenticates (KIP-368) and goes on."""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from network.sasl_mechanisms import ScramClient
from protocol.api import ApiKey, api
from protocol.frame import decode_response, encode_request
from protocol.messages import MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest
from tests.support.cluster import Cluster, chroot, free_port
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-secret"
REAUTH_MS = 3000  # SCRAM-SHA-256 sessions on the SASL listener


class SaslCluster:
    def __init__(self, cluster: Cluster, sasl_port: int) -> None:
        self.cluster = cluster
        self.broker = cluster.broker(1)
        self.sasl = f"127.0.0.1:{sasl_port}"
        self.plaintext = self.broker.bootstrap

    def log(self) -> str:
        return self.broker.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def sasl_cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer
) -> Iterator[SaslCluster]:
    cluster = Cluster(
        tmp_path_factory.mktemp("sasl") / "cluster",
        chroot(zookeeper_server),
        brokers=1,
        broker_overrides={"group.initial.rebalance.delay.ms": 0, "offsets.topic.replication.factor": 1},
    )
    broker = cluster.broker(1)
    sasl_port = free_port()
    jaas = " ".join(f'user_{user}="{password}"' for user, password in USERS.items())
    broker.overrides.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {jaas};"
            ),
            "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": str(REAUTH_MS),
        }
    )
    with cluster:
        asyncio.run(_write_scram_credentials(cluster.zookeeper_connect))
        yield SaslCluster(cluster, sasl_port)


async def _write_scram_credentials(zookeeper_connect: str) -> None:
    from zk.client import ZkClient
    from zk.user_configs import UserConfigs

    zk = ZkClient(zookeeper_connect, 10_000, operation_timeout=10)
    await zk.start(timeout=10)
    try:
        users = UserConfigs(zk)
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            await users.set_scram_password(SCRAM_USER, SCRAM_PASSWORD, mechanism, 8192)
    finally:
        await zk.close()


def _librdkafka(bootstrap: str, mechanism: str, user: str, password: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        **extra,
    }


def _topic(cluster: SaslCluster, label: str) -> str:
    name = f"sasl-{label}-{uuid.uuid4().hex[:6]}"
    cluster.cluster.create_topic(name)
    return name


def _confluent_round_trip(cluster: SaslCluster, topic: str, mechanism: str, user: str, password: str) -> None:
    from confluent_kafka import Consumer, Producer

    producer = Producer(_librdkafka(cluster.sasl, mechanism, user, password))
    for i in range(10):
        producer.produce(topic, key=b"k", value=f"{mechanism}-{i}".encode())
    assert producer.flush(20) == 0
    consumer = Consumer(
        _librdkafka(
            cluster.sasl,
            mechanism,
            user,
            password,
            **{"group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"},
        )
    )
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert values == [f"{mechanism}-{i}".encode() for i in range(10)]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_confluent_kafka_produces_and_consumes_in_a_group_over_plain_and_scram(
    sasl_cluster: SaslCluster,
) -> None:
    _confluent_round_trip(sasl_cluster, _topic(sasl_cluster, "ck-plain"), "PLAIN", "alice", "alice-secret")
    _confluent_round_trip(
        sasl_cluster, _topic(sasl_cluster, "ck-scram"), "SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD
    )


def test_aiokafka_produces_and_consumes_over_plain_and_scram(sasl_cluster: SaslCluster) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def round_trip(topic: str, mechanism: str, user: str, password: str) -> None:
        settings = {
            "bootstrap_servers": sasl_cluster.sasl,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism,
            "sasl_plain_username": user,
            "sasl_plain_password": password,
        }
        producer = AIOKafkaProducer(**settings)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, f"{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **settings)
        await consumer.start()
        try:
            values = []
            async with asyncio.timeout(20):
                while len(values) < 5:
                    batch = await consumer.getmany(timeout_ms=500)
                    values.extend(r.value for records in batch.values() for r in records)
            assert values == [f"{i}".encode() for i in range(5)]
        finally:
            await consumer.stop()

    asyncio.run(round_trip(_topic(sasl_cluster, "aio-plain"), "PLAIN", "bob", "bob-secret"))
    asyncio.run(round_trip(_topic(sasl_cluster, "aio-scram"), "SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD))


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("PLAIN", "bob", "bob-secret"), ("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD)],
)
def test_kafka_python_produces_and_consumes(
    sasl_cluster: SaslCluster, mechanism: str, user: str, password: str
) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = _topic(sasl_cluster, "kp")
    settings = {
        "bootstrap_servers": sasl_cluster.sasl,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }
    producer = KafkaProducer(**settings)
    try:
        for i in range(5):
            producer.send(topic, f"{i}".encode()).get(timeout=20)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10_000, **settings)
    try:
        values = [record.value for _, record in zip(range(5), consumer, strict=False)]
    finally:
        consumer.close()
    assert values == [f"{i}".encode() for i in range(5)]


def _kcat(cluster: SaslCluster, mechanism: str, user: str, password: str, *args: str, stdin: str = "") -> str:
    settings = _librdkafka(cluster.sasl, mechanism, user, password)
    argv = ["kcat", "-b", settings.pop("bootstrap.servers")]
    for key, value in settings.items():
        argv += ["-X", f"{key}={value}"]
    done = subprocess.run([*argv, *args], input=stdin, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD)],
)
def test_debians_kcat_produces_and_consumes(
    sasl_cluster: SaslCluster, mechanism: str, user: str, password: str
) -> None:
    topic = _topic(sasl_cluster, "kcat")
    _kcat(sasl_cluster, mechanism, user, password, "-P", "-t", topic, stdin="one\ntwo\nthree\n")
    out = _kcat(sasl_cluster, mechanism, user, password, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert out.split() == ["one", "two", "three"]


def test_a_wrong_password_and_an_unknown_user_fail_cleanly_logged_and_others_are_undisturbed(
    sasl_cluster: SaslCluster,
) -> None:
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError

    topic = _topic(sasl_cluster, "bad")
    good = Producer(_librdkafka(sasl_cluster.sasl, "SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD))
    good.produce(topic, b"before")
    assert good.flush(20) == 0
    for mechanism, user in (("PLAIN", "alice"), ("SCRAM-SHA-512", SCRAM_USER), ("PLAIN", "mallory")):
        errors: list[Any] = []
        bad = Producer(
            _librdkafka(sasl_cluster.sasl, mechanism, user, "not-the-password", error_cb=errors.append)
        )
        bad.produce(topic, b"never")
        deadline = time.monotonic() + 15
        while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
            bad.poll(0.2)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        assert any("SASL authentication error" in e.str() for e in errors)
        bad.purge()
        del bad
    with pytest.raises(KafkaPythonError):
        KafkaProducer(
            bootstrap_servers=sasl_cluster.sasl,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username="nobody",
            sasl_plain_password="x",
            bootstrap_timeout_ms=3000,
        )
    good.produce(topic, b"after")  # the authenticated client goes on
    assert good.flush(20) == 0
    log = sasl_cluster.log()
    assert "Failed authentication with 127.0.0.1:" in log
    assert "Authentication failed: Invalid username or password" in log
    assert "not-the-password" not in log and SCRAM_PASSWORD not in log


def _scram_login(address: str, user: str, password: str) -> socket.socket:
    """A raw connection authenticated with SCRAM-SHA-256 through SaslAuthenticate v1 (a client that
    never re-authenticates); returns the socket."""
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    cid = iter(range(1, 100))

    def request(key: int, version: int, body: Any) -> Any:
        sock.sendall(encode_request(api(key), version, next(cid), "raw", body))
        (size,) = struct.unpack(">i", _read(sock, 4))
        return decode_response(_read(sock, size), api(key), version)[1]

    assert request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code == 0
    client = ScramClient("SCRAM-SHA-256", user, password)
    first = request(
        ApiKey.SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(auth_bytes=client.initial_response())
    )
    final = client.evaluate_challenge(first.auth_bytes)
    done = request(ApiKey.SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(auth_bytes=final))
    assert done.error_code == 0 and client.evaluate_challenge(done.auth_bytes) is None
    assert done.session_lifetime_ms == REAUTH_MS
    metadata = request(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
    assert metadata.brokers
    return sock


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def test_an_expired_session_is_closed_unless_the_client_reauthenticates(sasl_cluster: SaslCluster) -> None:
    from confluent_kafka import Producer

    topic = _topic(sasl_cluster, "reauth")
    errors: list[Any] = []
    producer = Producer(
        _librdkafka(sasl_cluster.sasl, "SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD, error_cb=errors.append)
    )
    producer.produce(topic, b"first")
    assert producer.flush(20) == 0
    raw = _scram_login(sasl_cluster.sasl, SCRAM_USER, SCRAM_PASSWORD)
    try:
        deadline = time.monotonic() + REAUTH_MS / 1000 + 0.5
        while time.monotonic() < deadline:  # confluent-kafka keeps producing across its re-authentication
            producer.produce(topic, b"more")
            producer.poll(0.2)
        assert producer.flush(20) == 0
        assert errors == []
        raw.sendall(encode_request(api(ApiKey.METADATA), 9, 50, "raw", MetadataRequest(topics=[])))
        raw.settimeout(5)
        assert raw.recv(1) == b""  # closed: its session expired and it did not re-authenticate
    finally:
        raw.close()
    assert "SASL session expired (connections.max.reauth.ms)" in sasl_cluster.log()


def test_the_plaintext_listener_is_unaffected(sasl_cluster: SaslCluster) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": sasl_cluster.plaintext})
    producer.produce(_topic(sasl_cluster, "plain-listener"), b"x")
    assert producer.flush(20) == 0
