"""A secured cluster as users start it: ``samsa up --secure`` (SASL_SSL with SCRAM-SHA-512 for clients,
between brokers and to the controller; the ACL authorizer on; an admin super user in
``client.properties``), the secured docker compose variant's setup tool, and three brokers replicating
over SASL_SSL through a bounce.

- ``samsa up --secure`` started as a user would (a child process on free ports, stopped by PID) prints
  ``client.properties=PATH``; confluent-kafka and ``samsa topics --command-config`` work with that file
  alone; its controller answers only brokers: a plaintext peer gets nothing, a TLS peer that has not
  authenticated is cut off, an authenticated user that is not a broker gets CLUSTER_AUTHORIZATION_FAILED,
  the brokers' own user is served.
- ``python -m tools.local_cluster_security`` (docker-compose.secure.yml's ``security-init``) writes
  certificates, each server's secured settings and the users' SCRAM credentials in Kafka's format.
- ``docker compose config`` accepts docker-compose.yml with docker-compose.secure.yml and refuses it
  without the passwords.
- Three brokers and a controller over SASL_SSL: replication keeps every ISR whole, a broker's
  bounce (a controlled shutdown through the controller) loses no acknowledged write, and it rejoins
  every ISR.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from broker.config import KafkaConfig
from controller.config import ControllerConfig
from network.client import NetworkClient
from network.client_security import ClientSecurity
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode
from protocol.messages import ControlledShutdownRequest, ListPartitionReassignmentsRequest
from server_common.config import read_properties
from tests.integration.test_docker_compose import compose_cli
from tests.integration.test_tools import Up, samsa
from tests.support.cluster import ROOT
from tools.local_cluster import LocalCluster, read_state
from tools.local_cluster_security import (
    ADMIN_USER,
    BROKER_USER,
    MECHANISM,
    write_scram_credentials,
)
from tools.local_cluster_security import (
    main as security_init,
)
from tools.probe import answers_api_versions
from zk.client import ZkClient
from zk.user_configs import UserConfigs

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")


def _call(host: str, port: int, security: ClientSecurity, key: ApiKey, version: int, body: Any) -> Any:
    async def call() -> Any:
        client = NetworkClient(
            host, port, "not-a-broker", request_timeout=10, connect_timeout=10, security=security
        )
        try:
            definition = api(key)
            assert definition is not None
            return await client.send(definition, version, body)
        finally:
            await client.close()

    return asyncio.run(call())


def _sasl(user: str, password: str, ca: Path) -> ClientSecurity:
    return ClientSecurity("SASL_SSL", ssl.create_default_context(cafile=str(ca)), MECHANISM, user, password)


def test_samsa_up_secure_serves_clients_with_its_client_properties_and_only_brokers_call_the_controller(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "run"
    up = Up(data_dir, brokers=1, controllers=1, extra=("--secure",))
    try:
        bootstrap = up.start(timeout=120)
        line = up.wait_for_line(lambda text: text.startswith("client.properties="), 10)
        path = Path(line.partition("=")[2])
        assert path == data_dir / "client.properties"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        props = read_properties(path.read_text())
        assert props["security.protocol"] == "SASL_SSL" and props["sasl.username"] == ADMIN_USER
        client = {**props, "bootstrap.servers": bootstrap}

        # confluent-kafka with nothing but client.properties: create, produce (acks=all), consume in a group
        admin = confluent_admin.AdminClient(client)
        admin.create_topics([confluent_admin.NewTopic("secured", 2, 1)])["secured"].result(30)
        producer = confluent_kafka.Producer({**client, "acks": "all"})
        for i in range(20):
            producer.produce("secured", f"v{i}".encode())
        assert producer.flush(30) == 0
        consumer = confluent_kafka.Consumer({**client, "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["secured"])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        consumer.close()
        assert sorted(got) == sorted(f"v{i}".encode() for i in range(20))

        # a samsa tool with --command-config
        listed = samsa("topics", "--bootstrap-server", bootstrap, "--command-config", str(path), "--list")
        assert listed.returncode == 0 and "secured" in listed.stdout.split(), listed

        # the controller: brokers only
        state = read_state(data_dir)
        assert state is not None and state["client_properties"] == str(path)
        (controller,) = [n for n in state["nodes"] if n["role"] == "controller"]
        host, port = controller["host"], controller["port"]
        ca = data_dir / "security" / "ca.pem"
        assert not answers_api_versions(host, port, timeout=3)  # plaintext on its TLS port: nothing
        tls_only = ClientSecurity("SSL", ssl.create_default_context(cafile=str(ca)))
        shutdown = ControlledShutdownRequest(broker_id=1, broker_epoch=-1)
        with pytest.raises(ConnectionError):  # TLS but not authenticated: cut off before anything else
            _call(host, port, tls_only, ApiKey.CONTROLLED_SHUTDOWN, 3, shutdown)
        asyncio.run(write_scram_credentials(state["zookeeper"], {"alice": "alice-secret"}))
        refused = _call(
            host, port, _sasl("alice", "alice-secret", ca), ApiKey.CONTROLLED_SHUTDOWN, 3, shutdown
        )
        assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        passwords = json.loads((data_dir / "security" / "credentials.json").read_text())
        listing = ListPartitionReassignmentsRequest(timeout_ms=5000, topics=None)
        served = _call(
            host,
            port,
            _sasl(BROKER_USER, passwords[BROKER_USER], ca),
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            0,
            listing,
        )
        assert served.error_code == ErrorCode.NONE
        controller_log = Path(controller["log"]).read_text()
        assert "Principal = User:alice is Denied Operation = ClusterAction" in controller_log
    finally:
        assert up.stop() == 0


def test_security_init_writes_certificates_settings_and_scram_users(
    tmp_path: Path, zookeeper: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What docker-compose.secure.yml's ``security-init`` does, against a real ZooKeeper."""
    directory = tmp_path / "security"
    base = tmp_path / "server.properties"
    base.write_text("num.partitions=3\nlog.dirs=/tmp/x\n")
    monkeypatch.setenv("SAMSA_ADMIN_PASSWORD", "admin-secret")
    monkeypatch.setenv("SAMSA_BROKER_PASSWORD", 'broker "quoted" secret')
    args = [
        f"--dir={directory}", f"--zookeeper={zookeeper}", "--controller=controller=controller,localhost",
        "--broker=broker-1=broker-1,localhost", "--listener-name=INTERNAL", "--listener-name=EXTERNAL",
        f"--base-config={base}", "--bootstrap=localhost:9092", "--ca-location=ca.pem",
    ]  # fmt: skip
    assert security_init(args) == 0
    assert security_init(args) == 0  # again: everything kept, nothing rewritten in ZooKeeper

    broker = read_properties((directory / "broker-1.properties").read_text())
    assert stat.S_IMODE((directory / "broker-1.properties").stat().st_mode) == 0o600
    overrides = {
        "broker.id": "1",
        "zookeeper.connect": zookeeper,
        "listeners": "INTERNAL://:29092,EXTERNAL://:9092",
        "listener.security.protocol.map": "INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
    }
    config = KafkaConfig({**broker, **overrides})
    assert config["num.partitions"] == 3  # the base file
    security = ClientSecurity.for_inter_broker(config)
    assert (security.username, security.password) == (BROKER_USER, 'broker "quoted" secret')
    controller = read_properties((directory / "controller.properties").read_text())
    controller_config = ControllerConfig(
        {**controller, "controller.id": "9001", **{k: v for k, v in overrides.items() if k != "broker.id"}}
    )
    assert ClientSecurity.for_inter_broker(controller_config).password == 'broker "quoted" secret'
    assert read_properties((directory / "client.properties").read_text())["ssl.ca.location"] == "ca.pem"

    async def stored() -> dict[str, bool]:
        zk = ZkClient(zookeeper, 10000)
        await zk.start(timeout=10)
        try:
            users = UserConfigs(zk)
            admin = await users.scram_credential(MECHANISM, ADMIN_USER)
            brokers = await users.scram_credential(MECHANISM, BROKER_USER)
            changes = await zk.get_children("/config/changes") or []
            return {
                "admin": admin is not None and admin.verify_password(MECHANISM, "admin-secret"),
                "broker": brokers is not None
                and brokers.verify_password(MECHANISM, 'broker "quoted" secret'),
                "one change each": len(changes) == 2,
            }
        finally:
            await zk.close()

    assert asyncio.run(stored()) == {"admin": True, "broker": True, "one change each": True}


def test_secure_compose_override_is_valid_and_needs_the_passwords() -> None:
    cli = compose_cli()
    if cli is None:
        pytest.skip("no compose CLI (docker compose or docker-compose) to validate the compose files with")
    files = ["-f", "docker-compose.yml", "-f", "docker-compose.secure.yml"]
    env = {**os.environ, "SAMSA_ADMIN_PASSWORD": "a", "SAMSA_BROKER_PASSWORD": "b"}

    def config(*args: str, environment: dict[str, str] = env) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*cli, *files, "config", *args], cwd=ROOT, capture_output=True, text=True, env=environment
        )

    assert config("-q").returncode == 0, config("-q").stderr
    assert sorted(config("--services").stdout.split()) == [
        "broker-1", "broker-2", "broker-3", "console", "controller", "security-init", "zookeeper",
    ]  # fmt: skip
    text = config().stdout
    assert text.count("listener.security.protocol.map=INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL") == 4
    # the controller, the brokers and the console (which logs in with the admin's client.properties)
    assert text.count("service_completed_successfully") == 5
    assert "--command-config=/var/lib/samsa/security/client.properties" in text
    assert text.count("/var/lib/samsa/security/ca.pem") >= 4  # the healthchecks speak TLS
    assert "PLAINTEXT" not in text
    missing = {k: v for k, v in env.items() if k != "SAMSA_ADMIN_PASSWORD"}
    refused = config("-q", environment=missing)
    assert refused.returncode != 0 and "SAMSA_ADMIN_PASSWORD" in refused.stderr


def test_three_brokers_replicate_over_sasl_ssl_and_a_bounce_loses_no_acknowledged_write(
    tmp_path: Path, zookeeper: str
) -> None:
    # No automatic rebalance: after the bounce only the preferred election below gives broker 2 its
    # leaderships back.
    overrides = {"auto.leader.rebalance.enable": "false"}
    with LocalCluster(
        tmp_path / "cluster", brokers=3, zookeeper=zookeeper, secure=True, overrides=overrides
    ) as cluster:
        cluster.create_topic("bounce", partitions=3, replication_factor=3, configs={"min.insync.replicas": 2})

        def whole_isrs(expected: set[int]) -> bool:
            states = [cluster.partition_state("bounce", p) for p in range(3)]
            return all(s is not None and set(s.isr) == expected for s in states)

        cluster.wait(
            lambda: whole_isrs({1, 2, 3}), "every ISR of bounce whole (replication over SASL_SSL)", 60
        )
        acked: list[bytes] = []
        failed: list[str] = []
        stop = threading.Event()

        def produce() -> None:
            producer = confluent_kafka.Producer(
                {**cluster.client_properties(), "acks": "all", "enable.idempotence": True, "linger.ms": 5}
            )

            def delivered(error: Any, message: Any) -> None:
                if error is None:
                    acked.append(message.value())
                else:
                    failed.append(str(error))

            i = 0
            while not stop.is_set():
                producer.produce("bounce", f"m{i}".encode(), on_delivery=delivered)
                producer.poll(0)
                i += 1
                time.sleep(0.002)
            producer.flush(60)

        producing = threading.Thread(target=produce)
        producing.start()
        try:
            time.sleep(2)
            cluster.broker(2).stop()  # SIGTERM: a controlled shutdown, asked of the controller over SASL_SSL
            assert "controlled shutdown succeeded" in cluster.broker(2).log(since_start=True)
            time.sleep(2)
            cluster.broker(2).start()
            cluster.wait(lambda: whole_isrs({1, 2, 3}), "broker 2 back in every ISR of bounce", 90)
            time.sleep(1)
        finally:
            stop.set()
            producing.join(90)
        assert len(acked) > 100, (len(acked), failed[:5])

        # A preferred election: the admin's ElectLeaders, forwarded by a broker to the controller (SASL_SSL).
        assignment = json.loads(cluster.zk().get("/brokers/topics/bounce")[0])["partitions"]
        preferred = {int(p): replicas[0] for p, replicas in assignment.items()}
        assert any(cluster.leader("bounce", p) != preferred[p] for p in range(3))  # broker 2 led none after
        admin = confluent_admin.AdminClient(cluster.client_properties())
        partitions = [confluent_kafka.TopicPartition("bounce", p) for p in range(3)]
        results = admin.elect_leaders(confluent_kafka.ElectionType.PREFERRED, partitions).result(30)
        assert all(
            e is None or e.code() == confluent_kafka.KafkaError.ELECTION_NOT_NEEDED for e in results.values()
        )
        cluster.wait(
            lambda: all(cluster.leader("bounce", p) == preferred[p] for p in range(3)),
            "the preferred leaders",
            30,
        )

        consumer = confluent_kafka.Consumer(
            {**cluster.client_properties(), "group.id": "check", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe(["bounce"])
        seen: set[bytes] = set()
        deadline = time.monotonic() + 60
        while not set(acked) <= seen and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.add(message.value())
        consumer.close()
        assert not set(acked) - seen, f"{len(set(acked) - seen)} acknowledged writes lost"
        for node in [*cluster.controllers.values(), *cluster.brokers.values()]:
            log = node.log()
            assert "CLUSTER_AUTHORIZATION_FAILED" not in log, node.name
            assert "SASL SCRAM-SHA-512 authentication" not in log, node.name  # no failed inter-broker login
