"""TLS listeners of a real broker: an SSL listener with a PKCS#12 key store requiring client certificates
(mTLS, the principal from the certificate's DN), another with a PEM key store and no client
authentication, next to the PLAINTEXT listener the cluster uses; confluent-kafka (librdkafka) and kcat
produce and consume over them; bad peers (a certificate from another CA, a certificate no mapping rule
applies to, a plaintext client on a TLS port, a TLS client on the plaintext port) each get a clean close
the broker logs with the peer, and others are undisturbed. Fetch keeps sendfile on the plaintext
listener and writes through TLS on the others (strace)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol import record_batch
from protocol.api import ApiKey
from tests.support.cluster import Cluster, chroot, free_port
from tests.support.raw_client import RawClient, fetch_request, produce_request
from tools.certificates import create_ca, issue_certificate
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
AdminClient = pytest.importorskip("confluent_kafka.admin").AdminClient


class Secured:
    def __init__(self, cluster: Cluster, pki: dict[str, Any], ports: dict[str, int]) -> None:
        self.cluster, self.pki, self.ports = cluster, pki, ports
        self.broker = cluster.broker(1)

    def bootstrap(self, listener: str) -> str:
        return f"{self.broker.host}:{self.ports[listener]}"

    def client_config(self, listener: str, who: str | None = "alice", **extra: str) -> dict[str, str]:
        config = {"bootstrap.servers": self.bootstrap(listener), "security.protocol": "SSL"}
        config["ssl.ca.location"] = str(self.pki["ca"].cert_path)
        if who is not None:
            config["ssl.certificate.location"] = str(self.pki[who].cert_path)
            config["ssl.key.location"] = str(self.pki[who].key_path)
        return {**config, **extra}


@pytest.fixture(scope="module")
def secured(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    workdir = tmp_path_factory.mktemp("tls")
    pki_dir = workdir / "pki"
    ca = create_ca(pki_dir)
    other = create_ca(pki_dir / "other", "Other CA")
    pki = {
        "ca": ca,
        "broker": issue_certificate(
            ca,
            pki_dir,
            "broker",
            ["localhost"],
            ["127.0.0.1"],
            pkcs12_password="p12-secret",
            key_password="k",
        ),
        "alice": issue_certificate(ca, pki_dir, "alice", client=True, subject="CN=alice,OU=clients,O=Samsa"),
        "bob": issue_certificate(ca, pki_dir, "bob", client=True, subject="CN=bob,O=Elsewhere"),
        "mallory": issue_certificate(other, pki_dir / "other", "mallory", client=True),
    }
    cluster = Cluster(workdir / "cluster", chroot(zookeeper_server), brokers=1)
    broker = cluster.broker(1)
    ports = {"PLAINTEXT": broker.port, "MTLS": free_port(), "PEMTLS": free_port()}
    host = broker.host
    broker.overrides.update(
        {
            "listeners": ",".join(f"{name}://{host}:{port}" for name, port in ports.items()),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,MTLS:SSL,PEMTLS:SSL",
            # MTLS: PKCS#12 key store, client certificates required, principal from the DN
            "listener.name.mtls.ssl.keystore.type": "PKCS12",
            "listener.name.mtls.ssl.keystore.location": str(pki["broker"].pkcs12_path),
            "listener.name.mtls.ssl.keystore.password": "p12-secret",
            "listener.name.mtls.ssl.truststore.type": "PEM",
            "listener.name.mtls.ssl.truststore.location": str(ca.cert_path),
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=clients,.*$/$1/",
            # PEMTLS: Kafka's PEM key store file (key encrypted with ssl.key.password), no client auth
            "listener.name.pemtls.ssl.keystore.type": "PEM",
            "listener.name.pemtls.ssl.keystore.location": str(pki["broker"].keystore_pem_path),
            "listener.name.pemtls.ssl.key.password": "k",
            "group.initial.rebalance.delay.ms": "0",
        }
    )
    with cluster:
        cluster.create_topic("tls", partitions=1)
        yield Secured(cluster, pki, ports)


def _produce_and_consume(config: dict[str, str], topic: str, group: str, count: int = 50) -> list[bytes]:
    producer = confluent_kafka.Producer({**config, "acks": "all"})
    for i in range(count):
        producer.produce(topic, f"{group}-{i}".encode())
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer(
        {**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": "false"}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            value = message.value()
            if value.startswith(f"{group}-".encode()):
                values.append(value)
            if len(values) == count:
                consumer.commit(asynchronous=False)
                break
    finally:
        consumer.close()
    return values


def test_an_mtls_client_produces_and_consumes_in_a_group_over_a_pkcs12_listener(secured: Secured) -> None:
    values = _produce_and_consume(secured.client_config("MTLS"), "tls", "mtls-group")
    assert values == [f"mtls-group-{i}".encode() for i in range(50)]


def test_a_client_without_a_certificate_uses_the_pem_key_store_listener(secured: Secured) -> None:
    values = _produce_and_consume(secured.client_config("PEMTLS", who=None), "tls", "pem-group")
    assert values == [f"pem-group-{i}".encode() for i in range(50)]


def test_kcat_reads_over_mtls(secured: Secured) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed")
    config = secured.client_config("MTLS")
    options = [arg for k, v in config.items() if k != "bootstrap.servers" for arg in ("-X", f"{k}={v}")]
    listed = subprocess.run(
        [kcat, "-b", config["bootstrap.servers"], *options, "-L", "-t", "tls"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert listed.returncode == 0, listed.stderr
    assert 'topic "tls" with 1 partitions' in listed.stdout


def _wait_for_log(secured: Secured, pattern: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern, secured.broker.log(since_start=True))
        if found:
            return found.group(0)
        time.sleep(0.1)
    raise AssertionError(f"the broker did not log {pattern!r}:\n{secured.broker.log_tail(20)}")


def _metadata_fails(config: dict[str, str]) -> None:
    admin = AdminClient(config)
    with pytest.raises(confluent_kafka.KafkaException):
        admin.list_topics(timeout=1.5)


def test_bad_peers_get_a_clean_close_logged_with_the_peer_and_others_are_undisturbed(
    secured: Secured,
) -> None:
    host = secured.broker.host
    # a connection of a good client, open throughout
    steady = AdminClient(secured.client_config("MTLS"))
    assert "tls" in steady.list_topics(timeout=10).topics
    # a client certificate from another CA
    _metadata_fails(secured.client_config("MTLS", who="mallory"))
    peer = rf"closing connection from {re.escape(host)}:\d+"
    _wait_for_log(secured, peer + r" on listener MTLS: TLS handshake failed: \S*CERTIFICATE_VERIFY_FAILED")
    # a certificate the mapping rules give no principal
    _metadata_fails(secured.client_config("MTLS", who="bob"))
    _wait_for_log(secured, peer + r": no principal for its certificate: No rules apply to CN=bob,O=Elsewhere")
    # a plaintext client on a TLS port
    _metadata_fails({"bootstrap.servers": secured.bootstrap("PEMTLS")})
    _wait_for_log(
        secured,
        r"on listener PEMTLS: TLS handshake failed: \S+ \(a plaintext client on this TLS listener\?\)",
    )
    # a TLS client on the plaintext port
    _metadata_fails(secured.client_config("PLAINTEXT", who=None))
    _wait_for_log(
        secured, r"closing connection from \S+: request size \d+ is outside .*a TLS client on this non-TLS"
    )
    assert "tls" in steady.list_topics(timeout=10).topics
    assert secured.broker.alive


WRITES = ("write", "writev", "sendto", "sendmsg")
SYSCALL = re.compile(r"^(?:\d+\s+)?(\w+)\(.*\)\s+=\s+(-?\d+)")
VALUE = b"x" * 100_000
BATCHES = 20


def _traced(pid: int, out: Path, action: Any) -> dict[str, int]:
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed (Debian package strace)")
    tracer = subprocess.Popen(
        [strace, "-f", "-qq", "-e", "trace=sendfile," + ",".join(WRITES), "-e", "signal=none", "-o", str(out),
         "-p", str(pid)],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        time.sleep(1.0)
        if tracer.poll() is not None:
            pytest.skip(f"strace cannot attach here: {tracer.stderr.read().strip() if tracer.stderr else ''}")
        action()
        time.sleep(0.5)
    finally:
        if tracer.poll() is None:
            os.kill(tracer.pid, signal.SIGINT)
        tracer.wait(timeout=10)
    totals: dict[str, int] = {}
    for line in out.read_text().splitlines():
        found = SYSCALL.match(line)
        if found and int(found.group(2)) > 0:
            totals[found.group(1)] = totals.get(found.group(1), 0) + int(found.group(2))
    return totals


def _fetch_all(client: RawClient, topic: str) -> int:
    response: Any = client.request(ApiKey.FETCH, 12, fetch_request(topic, max_bytes=16 << 20))
    return len(response.responses[0].partitions[0].records)


def test_fetch_keeps_sendfile_on_plaintext_and_writes_through_tls(secured: Secured, tmp_path: Path) -> None:
    secured.cluster.create_topic("tls-fetch", partitions=1)
    plain = RawClient(secured.bootstrap("PLAINTEXT"), timeout=10)
    for _ in range(BATCHES):
        batch = record_batch.encode_batch(
            [record_batch.Record(0, int(time.time() * 1000), None, VALUE)], base_offset=0
        )
        answer: Any = plain.request(ApiKey.PRODUCE, 9, produce_request("tls-fetch", batch, acks=1))
        assert answer.responses[0].partition_responses[0].error_code == 0
    context = ssl.create_default_context(cafile=str(secured.pki["ca"].cert_path))
    tls = RawClient(secured.bootstrap("PEMTLS"), timeout=10)
    tls.sock = context.wrap_socket(tls.sock, server_hostname=secured.broker.host)
    total = BATCHES * len(VALUE)
    pid = secured.broker.pid
    assert pid is not None
    try:
        over_plaintext = _traced(
            pid, tmp_path / "plain.txt", lambda: _fetch_all(plain, "tls-fetch") >= total or 1 / 0
        )
        over_tls = _traced(pid, tmp_path / "tls.txt", lambda: _fetch_all(tls, "tls-fetch") >= total or 1 / 0)
    finally:
        plain.close()
        tls.close()
    print(f"bytes out by syscall: plaintext {over_plaintext}, TLS {over_tls}")
    assert over_plaintext.get("sendfile", 0) >= 0.95 * total, over_plaintext
    assert over_tls.get("sendfile", 0) == 0, over_tls
    assert sum(over_tls.get(name, 0) for name in WRITES) >= total, over_tls
