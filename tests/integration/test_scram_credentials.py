"""SCRAM credentials on a real broker: managed with confluent-kafka's AdminClient
(alter/describe_user_scram_credentials) and with ``samsa configs`` (over the admin APIs and over
ZooKeeper), stored in ZooKeeper in Kafka's format, and usable at once by a SCRAM client on the broker's
SASL_PLAINTEXT listener (the broker's credential cache follows the change notifications); a credential
written to ZooKeeper before the broker starts is loaded at startup; a changed or deleted credential
stops the old password."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from server_common.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential
from tests.support.clients.runners import ClientNotInstalled, java_argv
from tests.support.cluster import chroot
from tests.support.secure import SecuredBroker, sasl_cluster
from tools import configs
from zk.client import ZkClient
from zk.server import ZooKeeperServer
from zk.user_configs import UserConfigs

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_module = pytest.importorskip("confluent_kafka.admin")


class Broker(SecuredBroker):
    def logs_in(self, mechanism: str, user: str, password: str) -> bool:
        """Whether a SCRAM client gets Metadata over the SASL listener."""
        client = admin_module.AdminClient(self.as_user(user, mechanism, password))
        try:
            client.list_topics(timeout=1.5)
        except confluent_kafka.KafkaException:
            return False
        return True

    def can_log_in(self, mechanism: str, user: str, password: str, expected: bool = True) -> bool:
        """Whether logging in comes to succeed (or, ``expected=False``, to fail) within 10 s: the
        broker applies a change when its ZooKeeper watch fires."""
        deadline = time.monotonic() + 10
        while self.logs_in(mechanism, user, password) != expected:
            if time.monotonic() > deadline:
                return not expected
            time.sleep(0.1)
        return expected

    def zk_node(self, path: str) -> bytes | None:
        zk = self.cluster.zk()
        return zk.get(path)[0] if zk.exists(path) else None


async def _write_credential(zookeeper: str, user: str, password: str, mechanism: str) -> None:
    zk = ZkClient(zookeeper, 6000, operation_timeout=10)
    await zk.start(timeout=10)
    try:
        await UserConfigs(zk).set_scram_password(user, password, mechanism)
    finally:
        await zk.close()


@pytest.fixture(scope="module")
def broker(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    zookeeper = chroot(zookeeper_server)
    secured = sasl_cluster(
        tmp_path_factory.mktemp("scram") / "cluster",
        zookeeper,
        "SCRAM-SHA-256,SCRAM-SHA-512",
        authorizer=False,
    )
    # Before the broker starts, as an operator bootstraps the first user (kafka-configs.sh --zookeeper).
    asyncio.run(_write_credential(zookeeper, "early", "early-secret", SCRAM_SHA_512))
    with secured.cluster:
        secured.cluster.create_topic("configured")
        yield Broker(secured.cluster, zookeeper, secured.sasl_port)


def test_credential_written_before_the_broker_started_is_loaded(broker: Broker) -> None:
    assert broker.can_log_in(SCRAM_SHA_512, "early", "early-secret")
    assert not broker.logs_in(SCRAM_SHA_512, "early", "wrong")


def test_admin_client_alters_and_describes_and_the_credential_works_at_once(broker: Broker) -> None:
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    admin = broker.admin()
    upsertions = [
        UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"alice-secret"
        ),
        UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-256"
        ),
    ]
    for future in admin.alter_user_scram_credentials(upsertions).values():
        future.result(timeout=10)
    description = admin.describe_user_scram_credentials(["alice"])["alice"].result(timeout=10)
    infos = {(i.mechanism, i.iterations) for i in description.scram_credential_infos}
    assert infos == {(ScramMechanism.SCRAM_SHA_512, 8192), (ScramMechanism.SCRAM_SHA_256, 4096)}
    everyone = admin.describe_user_scram_credentials().result(timeout=10)
    assert {"alice", "early"} <= set(everyone)

    # Kafka's format in ZooKeeper: the config node and its change notification.
    body = json.loads(broker.zk_node("/config/users/alice") or b"{}")
    assert body["version"] == 1 and set(body["config"]) == {SCRAM_SHA_256, SCRAM_SHA_512}
    credential = ScramCredential.from_string(body["config"][SCRAM_SHA_512])
    assert credential.iterations == 8192 and credential.verify_password(SCRAM_SHA_512, "alice-secret")
    zk = broker.cluster.zk()
    changes = [
        json.loads(zk.get(f"/config/changes/{c}")[0]) for c in sorted(zk.get_children("/config/changes"))
    ]
    assert {"version": 2, "entity_path": "users/alice"} in changes

    assert broker.can_log_in(SCRAM_SHA_512, "alice", "alice-secret")
    assert broker.can_log_in(SCRAM_SHA_256, "alice", "alice-256")
    assert not broker.logs_in(SCRAM_SHA_512, "alice", "alice-256")


def test_admin_client_sees_kafkas_errors(broker: Broker) -> None:
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = broker.admin()
    too_few = UserScramCredentialUpsertion(
        "weak", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"x"
    )
    with pytest.raises(confluent_kafka.KafkaException, match="Too few iterations"):
        admin.alter_user_scram_credentials([too_few])["weak"].result(timeout=10)
    missing = UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_512)
    with pytest.raises(confluent_kafka.KafkaException, match="does not exist"):
        admin.alter_user_scram_credentials([missing])["nobody"].result(timeout=10)
    with pytest.raises(confluent_kafka.KafkaException) as info:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(timeout=10)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.RESOURCE_NOT_FOUND


def test_samsa_configs_round_trip(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--bootstrap-server", broker.bootstrap, "--entity-type", "users", "--entity-name", "bob"]
    assert (
        configs.main(
            [*base, "--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=bob-secret]"]
        )
        == 0
    )
    assert capsys.readouterr().out == "Completed updating config for user bob.\n"
    assert broker.can_log_in(SCRAM_SHA_512, "bob", "bob-secret")

    assert configs.main([*base, "--describe"]) == 0
    assert (
        capsys.readouterr().out
        == "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=8192\n"
    )

    # A new password replaces the old one at once.
    assert configs.main([*base, "--alter", "--add-config", "SCRAM-SHA-512=[password=bob-new]"]) == 0
    assert broker.can_log_in(SCRAM_SHA_512, "bob", "bob-new")
    assert not broker.can_log_in(SCRAM_SHA_512, "bob", "bob-secret", expected=False)

    assert configs.main([*base, "--alter", "--delete-config", "SCRAM-SHA-512"]) == 0
    capsys.readouterr()
    assert broker.zk_node("/config/users/bob") is None  # the last credential gone: no node, as Kafka
    assert not broker.can_log_in(SCRAM_SHA_512, "bob", "bob-new", expected=False)

    assert configs.main([*base, "--alter", "--delete-config", "SCRAM-SHA-512"]) == 1
    err = capsys.readouterr().err
    assert "ResourceNotFoundException: Attempt to delete a user credential that does not exist" in err


def test_samsa_configs_over_zookeeper(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    """kafka-configs.sh --zookeeper: the credential written straight to ZooKeeper reaches the running
    broker through the change notification."""
    base = ["--zookeeper", broker.zookeeper, "--entity-type", "users", "--entity-name", "carol"]
    assert configs.main([*base, "--alter", "--add-config", "SCRAM-SHA-256=[password=carol-secret]"]) == 0
    assert "Completed updating config for entity: user-principal 'carol'." in capsys.readouterr().out
    assert broker.can_log_in(SCRAM_SHA_256, "carol", "carol-secret")
    assert configs.main([*base, "--describe"]) == 0
    assert "Configs for user-principal 'carol' are SCRAM-SHA-256=salt=" in capsys.readouterr().out


def test_samsa_configs_topics_and_brokers(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    """Topic configs through IncrementalAlterConfigs, broker configs through AlterConfigs, described
    with kafka-configs.sh's lines."""
    topic = ["--bootstrap-server", broker.bootstrap, "--entity-type", "topics", "--entity-name", "configured"]
    assert (
        configs.main(
            [*topic, "--alter", "--add-config", "retention.ms=3600000,cleanup.policy=[compact,delete]"]
        )
        == 0
    )
    assert capsys.readouterr().out == "Completed updating config for topic configured.\n"
    assert configs.main([*topic, "--describe"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Dynamic configs for topic configured are:"
    assert lines[1].startswith(
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
    )
    assert lines[2].startswith(
        "  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms="
    )
    assert configs.main([*topic, "--alter", "--delete-config", "retention.ms"]) == 0
    assert configs.main([*topic, "--alter", "--delete-config", "retention.ms"]) == 1
    assert capsys.readouterr().err.strip().endswith("Invalid config(s): retention.ms")

    brokers = ["--bootstrap-server", broker.bootstrap, "--entity-type", "brokers"]
    assert (
        configs.main([*brokers, "--entity-default", "--alter", "--add-config", "log.cleaner.threads=2"]) == 0
    )
    assert capsys.readouterr().out == "Completed updating default config for brokers in the cluster.\n"
    assert configs.main([*brokers, "--entity-default", "--describe"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.cleaner.threads=2 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2}",
    ]
    assert configs.main([*brokers, "--entity-name", "1", "--describe", "--all"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("All configs for broker 1 are:\n") and "  broker.id=1 sensitive=false" in out


def test_java_admin_client_manages_credentials(broker: Broker) -> None:
    """Kafka's own Admin client: the upsertion works (and logs in), describe shows it, too few iterations
    is UnacceptableCredentialException, an unknown user is left out of users()."""
    try:
        argv = java_argv("ScramAdmin.java")
    except ClientNotInstalled as e:
        pytest.skip(str(e))
    done = subprocess.run(
        [*argv, broker.bootstrap, "20000", "jane", "jane-secret"], capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {
        "mechanism": "SCRAM-SHA-256",
        "iterations": 8192,
        "too_few": "UnacceptableCredentialException: Too few iterations",
        "missing_listed": 0,
    }
    assert broker.can_log_in(SCRAM_SHA_256, "jane", "jane-secret")


def test_samsa_configs_over_the_sasl_listener_with_command_config(
    broker: Broker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--command-config in librdkafka's names: the tool itself authenticates with SCRAM-SHA-512."""
    properties = tmp_path / "client.properties"
    properties.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.username=early\nsasl.password=early-secret\n"
    )
    base = ["--bootstrap-server", broker.sasl_bootstrap, "--command-config", str(properties)]
    assert configs.main([*base, "--describe", "--entity-type", "users", "--entity-name", "early"]) == 0
    assert capsys.readouterr().out == (
        "SCRAM credential configs for user-principal 'early' are SCRAM-SHA-512=iterations=4096\n"
    )
    properties.write_text(properties.read_text().replace("early-secret", "wrong"))
    assert configs.main([*base, "--describe", "--entity-type", "users"]) == 1
    assert "Error while executing config command" in capsys.readouterr().err
