"""Every real client over every secured listener, and the clean failures of clients that may not connect.

One broker (with its controller) serves four listeners: PLAINTEXT (the cluster's own, for creating topics
and reading committed offsets), SASL_SSL with SCRAM-SHA-512 (and SCRAM-SHA-256), SASL_PLAINTEXT with PLAIN,
and SSL requiring a client certificate (mutual TLS). Certificates come from tools/certificates.py (a CA,
the broker's certificate for 127.0.0.1/localhost, a client certificate, and a second CA with a client
certificate of its own); the SCRAM credentials are written to ZooKeeper (/config/users/alice) before the
broker starts, the PLAIN users are the listener's JAAS ``user_<name>`` options, as in Kafka.

The matrix: each of the six clients (tests/support/clients/runners.py: aiokafka, kafka-python,
confluent-kafka, kafkajs, the Java client, kcat) produces keyed records and reads them back in a consumer
group, committing, on each secured listener (and with SCRAM-SHA-256); the records are compared
(check_round_trip) and the group's committed offsets read back. One client per listener runs in the quick
tier, the rest in the slow tier.

The failures: a wrong password, an unknown user, a client certificate from another CA, a plaintext client
on a TLS listener and a TLS client on a plaintext listener each fail the client (it reports an error, the
broker closes the connection and logs the peer), while a connection authenticated on the same listener
before it stays open and keeps being served.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

from network.client import NetworkClient
from network.client_security import ClientSecurity
from protocol.api import ApiKey, api
from protocol.messages import MetadataRequest
from tests.integration.test_transactions_clients import ABORTED, COMMITTED
from tests.support.clients import runners
from tests.support.cluster import ROOT as REPO
from tests.support.cluster import Cluster, free_port
from tools.certificates import create_ca, issue_certificate
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

T = TypeVar("T")

COUNT = 30
PARTITIONS = 3
TIMEOUT = 60.0  # a client's budget for one produce or group consume (a JVM start included)
FAILURE_TIMEOUT = 15.0  # a client's budget for connecting where it may not
HOST = "127.0.0.1"

# Users: alice authenticates with SCRAM-SHA-512 (credential in ZooKeeper), bob with PLAIN (JAAS option).
SCRAM_USER, SCRAM_PASSWORD = "alice", "alice-secret"
PLAIN_USER, PLAIN_PASSWORD = "bob", "bob-secret"
SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"

# The listeners, named after their protocols; a mode is a listener, or a listener and a SASL mechanism
# other than its first (SCRAM-SHA-256 on the SASL_SSL listener, slow tier only).
LISTENERS = ("SASL_SSL", "SASL_PLAINTEXT", "SSL")
SCRAM_SHA_256 = "SCRAM-SHA-256"
MODES = (*LISTENERS, f"SASL_SSL-{SCRAM_SHA_256}")
# One client per mode in the quick tier: the Python clients, which start in a fraction of a second.
QUICK = {("SASL_SSL", "confluent-kafka"), ("SASL_PLAINTEXT", "kafka-python"), ("SSL", "aiokafka")}


@dataclass
class SecureBroker:
    """The module's broker and what a client needs to reach each of its listeners."""

    cluster: Cluster
    ports: dict[str, int]  # listener -> port
    ca: str  # the CA's certificate (PEM), which signed the broker's and the client's certificates
    client_cert: str
    client_key: str
    foreign_cert: str  # a client certificate from another CA
    foreign_key: str

    def bootstrap(self, mode: str) -> str:
        return f"{HOST}:{self.ports[mode.split('-')[0]]}"

    def security(self, mode: str) -> runners.Security:
        """The settings a client connects to ``mode``'s listener with (good credentials)."""
        if mode.startswith("SASL_SSL"):
            return runners.Security(
                "SASL_SSL",
                ca=self.ca,
                mechanism=SCRAM_SHA_256 if mode.endswith(SCRAM_SHA_256) else SCRAM_MECHANISM,
                username=SCRAM_USER,
                password=SCRAM_PASSWORD,
            )
        if mode == "SASL_PLAINTEXT":
            return runners.Security(
                "SASL_PLAINTEXT", mechanism="PLAIN", username=PLAIN_USER, password=PLAIN_PASSWORD
            )
        assert mode == "SSL"
        return runners.Security("SSL", ca=self.ca, certificate=self.client_cert, key=self.client_key)

    def client_security(self, mode: str) -> ClientSecurity:
        """The same for Samsa's own NetworkClient (librdkafka's names, which ClientSecurity reads)."""
        return ClientSecurity.from_client_properties(self.security(mode).librdkafka())

    @property
    def log(self) -> str:
        return self.cluster.broker(1).log()

    def committed(self, group: str, topic: str) -> dict[int, int]:
        """The group's committed offsets of ``topic`` (partitions with one), read over PLAINTEXT."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.cluster.bootstrap, "group.id": group})
        try:
            found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
        finally:
            consumer.close()
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}

    def check_alive(self) -> None:
        assert all(node.alive for node in self.cluster.nodes if node.name != "zookeeper"), (
            self.cluster.describe()
        )


def broker_settings(
    ca_pem: Path, keystore_pem: Path, ports: dict[str, int], plaintext_port: int
) -> dict[str, str]:
    """The broker's listeners and their security, in Kafka's names."""
    listeners = [f"PLAINTEXT://{HOST}:{plaintext_port}"]
    listeners += [f"{name}://{HOST}:{port}" for name, port in ports.items()]
    return {
        "listeners": ",".join(listeners),
        "inter.broker.listener.name": "PLAINTEXT",
        # TLS (SSL and SASL_SSL): the broker's key and chain in one PEM file, the CA as trust store
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore_pem),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_pem),
        "listener.name.ssl.ssl.client.auth": "required",
        # SASL_SSL: SCRAM-SHA-512 (and -256), credentials in ZooKeeper
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": f"{SCRAM_MECHANISM},{SCRAM_SHA_256}",
        f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": f"{SCRAM_MODULE} required;",
        f"listener.name.sasl_ssl.{SCRAM_SHA_256.lower()}.sasl.jaas.config": f"{SCRAM_MODULE} required;",
        # SASL_PLAINTEXT: PLAIN, users as the login module's user_<name> options
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
            f'{PLAIN_MODULE} required username="{PLAIN_USER}" password="{PLAIN_PASSWORD}" '
            f'user_{PLAIN_USER}="{PLAIN_PASSWORD}";'
        ),
        "group.initial.rebalance.delay.ms": "0",
    }


async def write_scram_credential(zookeeper: str, user: str, password: str) -> None:
    """The user's SCRAM-SHA-512 and SCRAM-SHA-256 credentials, as kafka-configs.sh --zookeeper wrote them."""
    from zk.client import ZkClient
    from zk.user_configs import UserConfigs

    zk = ZkClient(zookeeper, 10_000, operation_timeout=10.0)
    await zk.start(timeout=10.0)
    try:
        for mechanism in (SCRAM_MECHANISM, SCRAM_SHA_256):
            await UserConfigs(zk).set_scram_password(user, password, mechanism, 4096)
    finally:
        await zk.close()


@pytest.fixture(scope="module")
def secure(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer
) -> Iterator[SecureBroker]:
    workdir = tmp_path_factory.mktemp("secure-clients")
    pki = workdir / "pki"
    ca = create_ca(pki / "ca", "Samsa Test CA")
    server = issue_certificate(ca, pki, "broker", hosts=["localhost"], ips=[HOST])
    client = issue_certificate(ca, pki, "client", client=True, subject="CN=client,OU=Test,O=Samsa")
    other_ca = create_ca(pki / "other-ca", "Another CA")
    foreign = issue_certificate(other_ca, pki / "other", "foreign", client=True)
    zookeeper = f"{zookeeper_server.connect_string}/samsa-secure-clients"
    asyncio.run(write_scram_credential(zookeeper, SCRAM_USER, SCRAM_PASSWORD))
    cluster = Cluster(workdir / "cluster", zookeeper, brokers=1)
    broker = cluster.broker(1)
    ports = {name: free_port() for name in LISTENERS}
    broker.overrides.update(broker_settings(ca.cert_path, server.keystore_pem_path, ports, broker.port))
    cluster.start()
    try:
        yield SecureBroker(
            cluster,
            ports,
            str(ca.cert_path),
            str(client.cert_path),
            str(client.key_path),
            str(foreign.cert_path),
            str(foreign.key_path),
        )
    finally:
        cluster.stop()


_names = itertools.count()


def run(scenario: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Calls a runner scenario; a client not installed here skips the test."""
    try:
        return scenario(*args, **kwargs)
    except runners.ClientNotInstalled as e:
        pytest.skip(str(e))


def matrix() -> list[Any]:
    return [
        pytest.param(
            mode, client, marks=() if (mode, client) in QUICK else pytest.mark.slow, id=f"{mode}-{client}"
        )
        for mode in MODES
        for client in runners.CLIENTS
    ]


@pytest.mark.parametrize(("mode", "client"), matrix())
def test_client_produces_and_consumes_in_a_group_over_a_secured_listener(
    secure: SecureBroker, mode: str, client: str
) -> None:
    label = f"{mode.lower()}-{client}-{next(_names)}"
    topic, group = f"secure-{label}", f"group-{label}"
    secure.cluster.create_topic(topic, PARTITIONS)
    bootstrap, security = secure.bootstrap(mode), secure.security(mode)
    produced = run(runners.PRODUCE[client], bootstrap, topic, COUNT, security=security, timeout=TIMEOUT)
    consumed = run(
        runners.CONSUME_GROUP[client], bootstrap, topic, group, COUNT, security=security, timeout=TIMEOUT
    )
    runners.check_round_trip(produced, consumed)
    ends: dict[int, int] = {}
    for record in consumed.records:
        ends[record.partition] = record.offset + 1
    assert secure.committed(group, topic) == ends
    secure.check_alive()


@pytest.mark.slow
@pytest.mark.parametrize("client", list(runners.TRANSACTIONS))
def test_client_runs_the_transactions_scenario_over_sasl_ssl(secure: SecureBroker, client: str) -> None:
    """tests/integration/test_transactions_clients.py's scenario (commits, aborts, offsets sent to
    transactions, fencing) over SASL_SSL: every transaction ends as it should and a read_committed
    consumer sees exactly the committed records."""
    label = f"txn-{client}-{next(_names)}"
    data, source = f"{label}-data", f"{label}-input"
    secure.cluster.create_topic(data, PARTITIONS)
    secure.cluster.create_topic(source, 1)
    result = run(
        runners.TRANSACTIONS[client],
        secure.bootstrap("SASL_SSL"),
        data,
        source,
        f"{label}-group",
        f"{label}-id",
        PARTITIONS,
        security=secure.security("SASL_SSL"),
    )
    outcomes = {t.name: t.outcome for t in result.txns}
    assert outcomes == {**dict.fromkeys(COMMITTED, "commit"), **dict.fromkeys(ABORTED, "abort")}
    committed = {r.value for t in result.txns if t.outcome == "commit" for r in t.records}
    assert {value for _, _, value in result.read_committed.records} == committed
    assert result.fenced_step is not None, "the second producer with the same transactional.id fenced nothing"
    secure.check_alive()


# ---------------------------------------------------------------------------------------------------
# failures


class HeldConnection:
    """A connection of Samsa's NetworkClient to one listener, authenticated before a failure case runs and
    asked again after it: it must be the same connection, still served (the others are undisturbed)."""

    def __init__(self, host: str, port: int, security: ClientSecurity) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="held-connection", daemon=True)
        self.thread.start()
        self.client = NetworkClient(host, port, "samsa-test-held", security=security)

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def metadata(self) -> Any:
        spec = api(ApiKey.METADATA)
        assert spec is not None
        return self._call(
            self.client.send(spec, 9, MetadataRequest(topics=None, allow_auto_topic_creation=False))
        )

    @property
    def transport(self) -> Any:
        return self.client._transport

    def close(self) -> None:
        self._call(self.client.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@dataclass(frozen=True)
class Failure:
    """A client that may not connect: to ``listener`` with ``security(secure)``; the broker's log must name
    the peer on a line matching ``logged``."""

    name: str
    listener: str
    security: Callable[[SecureBroker], runners.Security]
    logged: str


FAILURES = [
    Failure(
        "wrong-password",
        "SASL_SSL",
        lambda s: replace(s.security("SASL_SSL"), password="not-alice-secret"),
        r"(?i)authenticat|sasl",
    ),
    Failure(
        "unknown-user",
        "SASL_PLAINTEXT",
        lambda s: replace(s.security("SASL_PLAINTEXT"), username="mallory", password="mallory-secret"),
        r"(?i)authenticat|sasl",
    ),
    Failure(
        "unknown-scram-user",
        "SASL_SSL",
        lambda s: replace(s.security("SASL_SSL"), username="mallory"),
        r"(?i)authenticat|sasl",
    ),
    Failure(
        "certificate-from-another-ca",
        "SSL",
        lambda s: replace(s.security("SSL"), certificate=s.foreign_cert, key=s.foreign_key),
        r"TLS handshake failed",
    ),
    Failure(
        "no-client-certificate",
        "SSL",
        lambda s: runners.Security("SSL", ca=s.ca),
        r"TLS handshake failed",
    ),
    Failure("plaintext-client-on-tls-listener", "SSL", lambda s: runners.Security(), r"TLS handshake failed"),
    Failure(
        "tls-client-on-plaintext-listener",
        "SASL_PLAINTEXT",
        lambda s: replace(s.security("SASL_PLAINTEXT"), protocol="SASL_SSL", ca=s.ca),
        r"TLS client on this non-TLS listener",
    ),
]
# The quick tier: one of each kind with aiokafka (it gives up at once where the others retry).
QUICK_FAILURES = {"wrong-password", "certificate-from-another-ca", "tls-client-on-plaintext-listener"}


def failure_matrix() -> list[Any]:
    params = []
    for failure in FAILURES:
        for client in runners.CLIENTS:
            quick = client == "aiokafka" and failure.name in QUICK_FAILURES
            params.append(
                pytest.param(
                    failure, client, marks=() if quick else pytest.mark.slow, id=f"{failure.name}-{client}"
                )
            )
    return params


@pytest.mark.parametrize(("failure", "client"), failure_matrix())
def test_client_that_may_not_connect_fails_cleanly_and_others_are_undisturbed(
    secure: SecureBroker, failure: Failure, client: str
) -> None:
    held = HeldConnection(HOST, secure.ports[failure.listener], secure.client_security(failure.listener))
    try:
        held.metadata()
        connection = held.transport
        mark = len(secure.log)
        with pytest.raises(runners.ClientFailed) as failed:
            run(
                runners.BOOTSTRAP[client],
                secure.bootstrap(failure.listener),
                FAILURE_TIMEOUT,
                security=failure.security(secure),
            )
        logged = _wait_for_log_line(secure, mark, failure.logged)
        assert logged, (
            f"the broker logged no line naming a peer and matching {failure.logged!r}; it logged:\n"
            + secure.log[mark:][-3000:]
            + f"\n--- the client:\n{failed.value}"
        )
        metadata = held.metadata()
        assert held.transport is connection, "the connection authenticated before was closed"
        assert [b.node_id for b in metadata.brokers] == [1]
    finally:
        held.close()
    secure.check_alive()


PEER = re.compile(r"127\.0\.0\.1:\d+")


def _wait_for_log_line(secure: SecureBroker, mark: int, pattern: str, timeout: float = 5.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        lines = [
            line for line in secure.log[mark:].splitlines() if PEER.search(line) and re.search(pattern, line)
        ]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.1)


# ---------------------------------------------------------------------------------------------------
# the samsa tools: --command-config


def command_config_file(
    secure: SecureBroker, directory: Path, style: str, password: str = SCRAM_PASSWORD
) -> Path:
    """A --command-config file for the SASL_SSL listener: the Java client's names (JAAS login module,
    PEM trust store; the JAAS entry continued over lines as Kafka's docs write it) or librdkafka's (what
    `samsa up --secure` writes)."""
    if style == "java":
        text = (
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={SCRAM_MECHANISM}\n"
            f"sasl.jaas.config={SCRAM_MODULE} required \\\n"
            f'    username="{SCRAM_USER}" \\\n'
            f'    password="{password}";\n'
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={secure.ca}\n"
        )
    else:
        text = (
            "# librdkafka's names\n"
            "security.protocol=sasl_ssl\n"
            f"sasl.mechanisms={SCRAM_MECHANISM}\n"
            f"sasl.username={SCRAM_USER}\n"
            f"sasl.password={password}\n"
            f"ssl.ca.location={secure.ca}\n"
        )
    path = directory / f"{style}-{password}.properties"
    path.write_text(text)
    return path


def samsa(*args: str, stdin: str | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Runs `samsa ARGS` (python -m tools) as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "tools", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


@pytest.mark.parametrize("style", ["java", "librdkafka"])
def test_topics_tool_connects_with_the_command_config_file(
    secure: SecureBroker, tmp_path: Path, style: str
) -> None:
    config = command_config_file(secure, tmp_path, style)
    bootstrap = secure.bootstrap("SASL_SSL")
    topic = f"tool-topic-{style}"
    created = samsa(
        "topics",
        "--bootstrap-server",
        bootstrap,
        "--command-config",
        str(config),
        "--create",
        "--topic",
        topic,
        "--partitions",
        "2",
        "--replication-factor",
        "1",
    )
    assert created.returncode == 0, created.stdout + created.stderr
    assert f"Created topic {topic}." in created.stdout
    listed = samsa("topics", "--bootstrap-server", bootstrap, "--command-config", str(config), "--list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert topic in listed.stdout.split()


def test_tool_with_a_wrong_password_in_its_command_config_fails_with_the_reason(
    secure: SecureBroker, tmp_path: Path
) -> None:
    config = command_config_file(secure, tmp_path, "java", password="not-alice-secret")
    result = samsa(
        "topics",
        "--bootstrap-server",
        secure.bootstrap("SASL_SSL"),
        "--command-config",
        str(config),
        "--list",
    )
    assert result.returncode == 1
    assert "Error while executing topic command" in result.stdout
    assert "Authentication failed" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_every_tool_takes_the_command_config_file(secure: SecureBroker, tmp_path: Path) -> None:
    """Each `samsa` tool that connects, over SASL_SSL with SCRAM-SHA-512, given only --command-config."""
    config = str(command_config_file(secure, tmp_path, "java"))
    bootstrap = secure.bootstrap("SASL_SSL")
    topic, group = "tool-every", "tool-every-group"
    secure.cluster.create_topic(topic, 1)

    def ok(*args: str, stdin: str | None = None) -> str:
        result = samsa(*args, stdin=stdin)
        assert result.returncode == 0, f"samsa {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    ok(
        "console-producer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--command-config",
        config,
        stdin="one\ntwo\nthree\n",
    )
    # Kafka 3.9's name for the console consumer's file, with a group: it commits.
    consumed = ok(
        "console-consumer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--consumer.config",
        config,
        "--group",
        group,
        "--from-beginning",
        "--max-messages",
        "3",
        "--timeout-ms",
        "20000",
    )
    assert consumed.split() == ["one", "two", "three"]
    groups = ok(
        "consumer-groups",
        "--bootstrap-server",
        bootstrap,
        "--command-config",
        config,
        "--describe",
        "--group",
        group,
    )
    assert re.search(rf"{group}\s+{topic}\s+0\s+3\s+3\s+0", groups), groups
    ok("transactions", "--bootstrap-server", bootstrap, "--command-config", config, "list")
    ok("reassign-partitions", "--bootstrap-server", bootstrap, "--command-config", config, "--list")
    elected = samsa(
        "leader-election",
        "--bootstrap-server",
        bootstrap,
        "--admin.config",
        config,
        "--election-type",
        "preferred",
        "--topic",
        topic,
        "--partition",
        "0",
    )
    assert "Valid replica already elected for partitions tool-every-0" in elected.stdout, elected.stderr
    verified = ok(
        "replica-verification",
        "--bootstrap-server",
        bootstrap,
        "--command-config",
        config,
        "--topic-white-list",
        topic,
        "--once",
    )
    assert "max lag is 0" in verified, verified
