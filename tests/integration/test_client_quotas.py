"""Client quota configs on a real broker: ``samsa configs`` and the Java AdminClient (kafka-clients 3.9:
alterClientQuotas / describeClientQuotas) alter and describe them through AlterClientQuotas and
DescribeClientQuotas, ZooKeeper holds them in Kafka's layout, and a quota written to ZooKeeper by
another writer reaches the running broker's quota cache through the change notification. One broker
(no controller: the quota APIs need none) for the module. (confluent-kafka, kafka-python and aiokafka
have no client quota admin calls.)"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from tests.support.clients.runners import ClientNotInstalled, java_argv
from tests.support.cluster import Cluster, chroot
from tools import configs
from tools.local_cluster import BrokerNode
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def quota_cluster(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    running = Cluster(tmp_path_factory.mktemp("quotas") / "cluster", chroot(zookeeper_server), brokers=1)
    running.claim_data_dir()
    try:
        running.broker(1).start()
        yield running
    finally:
        running.stop()


@pytest.fixture
def broker(quota_cluster: Cluster) -> BrokerNode:
    return quota_cluster.broker(1)


def run(broker: BrokerNode, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    code = configs.main(["--bootstrap-server", broker.bootstrap, *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def znode(cluster: Cluster, path: str) -> dict | None:
    zk = cluster.zk()
    return json.loads(zk.get(path)[0]) if zk.exists(path) else None


def test_samsa_configs_round_trip_of_user_client_and_default_quotas(
    quota_cluster: Cluster, broker: BrokerNode, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run(broker, capsys, "--alter", "--user", "alice", "--add-config", "producer_byte_rate=1048576")
    assert out == "Completed updating config for user alice.\n"
    out = run(broker, capsys, "--alter", "--client-defaults", "--add-config", "consumer_byte_rate=2048")
    assert out == "Completed updating default config for clients in the cluster.\n"
    argv = [
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-name",
        "app",
    ]
    run(broker, capsys, "--alter", *argv, "--add-config", "request_percentage=200,producer_byte_rate=1024")

    # Kafka's layout and values in ZooKeeper
    assert znode(quota_cluster, "/config/users/alice") == {
        "version": 1,
        "config": {"producer_byte_rate": "1048576"},
    }
    assert znode(quota_cluster, "/config/clients/<default>") == {
        "version": 1,
        "config": {"consumer_byte_rate": "2048"},
    }
    assert znode(quota_cluster, "/config/users/alice/clients/app") == {
        "version": 1,
        "config": {"producer_byte_rate": "1024", "request_percentage": "200.0"},
    }

    assert run(broker, capsys, "--describe", "--user", "alice") == (
        "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0\n"
    )
    assert run(broker, capsys, "--describe", "--entity-type", "clients", "--entity-default") == (
        "Quota configs for the default client-id are consumer_byte_rate=2048.0\n"
    )
    assert run(broker, capsys, "--describe", *argv) == (
        "Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1024.0, "
        "request_percentage=200.0\n"
    )
    # every <user, client> entity of alice
    assert run(
        broker,
        capsys,
        "--describe",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
    ) == (
        "Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1024.0, "
        "request_percentage=200.0\n"
    )

    run(broker, capsys, "--alter", *argv, "--delete-config", "request_percentage,producer_byte_rate")
    assert znode(quota_cluster, "/config/users/alice/clients") is None  # cleaned up, as Kafka does
    run(broker, capsys, "--alter", "--client-defaults", "--delete-config", "consumer_byte_rate")
    run(broker, capsys, "--alter", "--user", "alice", "--delete-config", "producer_byte_rate")
    assert run(broker, capsys, "--describe", "--entity-type", "users") == ""
    assert znode(quota_cluster, "/config/users/alice") is None


def test_samsa_configs_reports_the_brokers_refusal(
    broker: BrokerNode, capsys: pytest.CaptureFixture[str]
) -> None:
    code = configs.main(
        [
            "--bootstrap-server",
            broker.bootstrap,
            "--alter",
            "--client",
            "x",
            "--add-config",
            "producer_byte_rate=0",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert err.splitlines()[-1] == (
        "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.InvalidRequestException: "
        "Quota producer_byte_rate must be greater than 0"
    )


def test_the_java_admin_client_alters_and_describes_quotas(
    quota_cluster: Cluster, broker: BrokerNode
) -> None:
    try:
        argv = java_argv("ClientQuotasAdmin.java")
    except ClientNotInstalled as e:
        pytest.skip(str(e))
    done = subprocess.run(
        [*argv, broker.bootstrap, "20000", "jane", "jane-app"], capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["of_user"] == [
        {
            "entity": {"client-id": None, "user": "jane"},
            "values": {"producer_byte_rate": 1048576.0, "request_percentage": 150.5},
        }
    ]
    assert {"entity": {"client-id": "jane-app"}, "values": {"consumer_byte_rate": 2048.0}} in result[
        "clients_before"
    ]
    assert all(e["entity"] != {"client-id": "jane-app"} for e in result["clients_after"])
    assert (
        result["invalid"] == "InvalidRequestException: Configuration producer_byte_rate must be a LONG value"
    )
    assert znode(quota_cluster, "/config/users/jane/clients/<default>") == {
        "version": 1,
        "config": {"producer_byte_rate": "1048576", "request_percentage": "150.5"},
    }


def test_a_quota_written_to_zookeeper_reaches_the_running_brokers_cache(
    quota_cluster: Cluster, broker: BrokerNode
) -> None:
    """As Kafka's own kafka-configs.sh --zookeeper (or another broker) writes it: the node, then the
    notification; the broker's ConfigChangeListener reloads the entity into its ClientQuotaCache."""
    zk = quota_cluster.zk()
    zk.create(
        "/config/clients/zk-writer",
        json.dumps({"version": 1, "config": {"producer_byte_rate": "4096"}}).encode(),
        makepath=True,
    )
    zk.create(
        "/config/changes/config_change_",
        json.dumps({"version": 2, "entity_path": "clients/zk-writer"}).encode(),
        sequence=True,
        makepath=True,
    )
    broker.wait_for_log("Changing producer_byte_rate quota for client-id zk-writer to 4096.0", timeout=15)
    zk.set("/config/clients/zk-writer", json.dumps({"version": 1, "config": {}}).encode())
    zk.create(
        "/config/changes/config_change_",
        json.dumps({"version": 2, "entity_path": "clients/zk-writer"}).encode(),
        sequence=True,
    )
    broker.wait_for_log("Removing producer_byte_rate quota for client-id zk-writer", timeout=15)
