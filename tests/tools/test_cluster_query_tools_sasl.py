"""``samsa log-dirs``, ``get-offsets``, ``delete-records`` and ``broker-api-versions`` over a SASL listener
with ``--command-config`` (tests/support/secure.py: a controller and one broker, Kafka's AclAuthorizer,
PLAIN user alice), and what each prints when the authorizer refuses: Kafka's exception names and
messages."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import chroot
from tests.support.secure import SecuredBroker, allow, create_acls, sasl_cluster
from tools import broker_api_versions, delete_records, get_offsets, log_dirs
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
admin = pytest.importorskip("confluent_kafka.admin")

TOPIC = "secret"


@pytest.fixture(scope="module")
def secured(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SecuredBroker]:
    secured = sasl_cluster(tmp_path_factory.mktemp("query-tools-sasl") / "cluster", chroot(zookeeper_server))
    try:
        secured.cluster.start()
        secured.cluster.create_topic(TOPIC, partitions=1)
        producer = confluent_kafka.Producer(secured.superuser())
        for _ in range(4):
            producer.produce(TOPIC, value=b"x")
        assert producer.flush(30) == 0
        yield secured
    finally:
        secured.cluster.stop()


def run(capsys: pytest.CaptureFixture[str], tool: Any, *argv: str) -> tuple[int, list[str], str]:
    capsys.readouterr()
    code = tool.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def eventually(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


def test_tools_refused_without_acls_print_kafkas_errors(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    as_bob = ["--bootstrap-server", secured.sasl_bootstrap, "--command-config", secured.command_config("bob")]
    code, out, err = run(capsys, log_dirs, "--describe", *as_bob)
    assert (code, out) == (1, ["Querying brokers for log directories information"])
    assert (
        err == "org.apache.kafka.common.errors.ClusterAuthorizationException: Cluster authorization failed.\n"
    )

    # bob may not describe the topic: Metadata does not list it.
    code, out, err = run(capsys, get_offsets, *as_bob, "--topic", TOPIC)
    assert (code, err) == (
        1,
        "Error occurred: Could not match any topic-partitions with the specified filters\n",
    )

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"partitions": [{"topic": TOPIC, "partition": 0, "offset": 1}]}))
    code, out, err = run(capsys, delete_records, *as_bob, "--offset-json-file", str(plan))
    assert (code, err) == (0, "")
    assert out[-1] == (
        f"partition: {TOPIC}-0\terror: org.apache.kafka.common.errors.TopicAuthorizationException: Failed to "
        f"fetch metadata for partition {TOPIC}-0 due to topic authorization failure"
    )


def test_tools_over_sasl_with_command_config(
    secured: SecuredBroker, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    create_acls(secured, [allow(admin.ResourceType.TOPIC, TOPIC, admin.AclOperation.DESCRIBE)])
    as_alice = [
        "--bootstrap-server",
        secured.sasl_bootstrap,
        "--command-config",
        secured.command_config("alice"),
    ]

    # ApiVersions needs no ACL; the broker is listed at its SASL address.
    code, out, err = run(capsys, broker_api_versions, *as_alice)
    assert (code, err) == (0, "")
    assert out[0] == f"{secured.sasl_bootstrap} (id: 1 rack: null) -> ("

    assert eventually(lambda: run(capsys, get_offsets, *as_alice, "--topic", TOPIC)[1] == [f"{TOPIC}:0:4"])

    # DESCRIBE, not DELETE: the leader refuses the deletion.
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"partitions": [{"topic": TOPIC, "partition": 0, "offset": 1}]}))
    code, out, err = run(capsys, delete_records, *as_alice, "--offset-json-file", str(plan))
    assert out[-1] == (
        f"partition: {TOPIC}-0\terror: org.apache.kafka.common.errors.TopicAuthorizationException: "
        "Topic authorization failed."
    )
    create_acls(secured, [allow(admin.ResourceType.TOPIC, TOPIC, admin.AclOperation.DELETE)])

    def deleted() -> bool:
        return run(capsys, delete_records, *as_alice, "--offset-json-file", str(plan))[1][-1] == (
            f"partition: {TOPIC}-0\tlow_watermark: 1"
        )

    assert eventually(deleted)
