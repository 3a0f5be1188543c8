"""ACLs managed on a real broker with Kafka's AclAuthorizer: ``samsa acls`` (kafka-acls.sh's flags and
output, over the admin APIs and over ZooKeeper) and confluent-kafka's create_acls / describe_acls /
delete_acls, the ACLs stored in ZooKeeper in Kafka's layout, and the broker enforcing what was set at
once (a SASL PLAIN user without Cluster DESCRIBE gets CLUSTER_AUTHORIZATION_FAILED from DescribeAcls
until an ACL grants it)."""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cluster import chroot
from tests.support.secure import SecuredBroker as Secured
from tests.support.secure import sasl_cluster
from tools import acls as acls_tool
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
admin = pytest.importorskip("confluent_kafka.admin")

ORDERS = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=PREFIXED)"


@pytest.fixture(scope="module")
def secured(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """One broker (no controller: the ACL APIs need none) with the authorizer on, a PLAINTEXT listener
    whose anonymous users are super users (the tests' administrator) and a SASL_PLAINTEXT one (PLAIN
    users alice and bob)."""
    secured = sasl_cluster(tmp_path_factory.mktemp("acls") / "cluster", chroot(zookeeper_server))
    secured.cluster.claim_data_dir()
    try:
        secured.broker.start()
        yield secured
    finally:
        secured.cluster.stop()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = acls_tool.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def may_list_acls(secured: Secured, user: str) -> bool:
    """Whether ``samsa acls --list`` as ``user`` (SASL PLAIN) gets DescribeAcls answered, rather than
    CLUSTER_AUTHORIZATION_FAILED."""
    argv = [
        "--bootstrap-server",
        secured.sasl_bootstrap,
        "--command-config",
        secured.command_config(user),
        "--list",
    ]
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = acls_tool.main(argv)
    if code != 0:
        assert "ClusterAuthorizationException: Cluster authorization failed." in out.getvalue()
    return code == 0


def eventually(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.1)


def test_samsa_acls_adds_lists_and_removes_as_kafka_acls(
    secured: Secured, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "--bootstrap-server",
        secured.bootstrap,
        "--add",
        "--allow-principal",
        "User:alice",
        "--producer",
        "--topic",
        "orders",
        "--transactional-id",
        "tx-",
        "--resource-pattern-type",
        "prefixed",
    )
    assert code == 0, out
    assert (
        f"Adding ACLs for resource `{ORDERS}`: \n"
        " \t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=CREATE, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) \n"
    ) in out
    assert "resourceType=TRANSACTIONAL_ID, name=tx-, patternType=PREFIXED" in out

    code, out, _ = run(capsys, "--bootstrap-server", secured.bootstrap, "--list", "--topic", "orders-eu",
                       "--resource-pattern-type", "match")  # fmt: skip
    assert code == 0
    assert out.startswith(f"Current ACLs for resource `{ORDERS}`: \n")
    assert out.count("\t(principal=User:alice") == 3

    code, out, _ = run(
        capsys, "--bootstrap-server", secured.bootstrap, "--remove", "--force", "--topic", "orders",
        "--resource-pattern-type", "prefixed", "--allow-principal", "User:alice", "--operation", "Create",
    )  # fmt: skip
    assert code == 0
    code, out, _ = run(capsys, "--bootstrap-server", secured.bootstrap, "--list", "--principal", "User:alice")
    assert out.startswith("ACLs for principal `User:alice`\n")
    assert "operation=CREATE" not in out and "operation=WRITE" in out

    # everything of the two prefixed resources removed, confirmed on stdin
    code, out, _ = run(
        capsys, "--bootstrap-server", secured.bootstrap, "--remove", "--force", "--topic", "orders",
        "--transactional-id", "tx-", "--resource-pattern-type", "prefixed",
    )  # fmt: skip
    assert code == 0
    code, out, _ = run(capsys, "--bootstrap-server", secured.bootstrap, "--list", "--topic", "orders",
                       "--resource-pattern-type", "any")  # fmt: skip
    assert out == ""


def test_acls_are_enforced_as_soon_as_they_are_added(
    secured: Secured, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not may_list_acls(secured, "bob")
    # nor change ACLs
    bob = secured.command_config("bob")
    code, out, _ = run(
        capsys, "--bootstrap-server", secured.sasl_bootstrap, "--command-config", bob,
        "--add", "--allow-principal", "User:bob", "--cluster", "--operation", "Describe",
    )  # fmt: skip
    assert code == 1
    assert (
        "Error while executing ACL command: org.apache.kafka.common.errors.ClusterAuthorizationException: "
        in out
    )
    code, _, _ = run(
        capsys, "--bootstrap-server", secured.bootstrap, "--add", "--allow-principal", "User:bob",
        "--cluster", "--operation", "Describe",
    )  # fmt: skip
    assert code == 0
    assert may_list_acls(secured, "bob")
    run(capsys, "--bootstrap-server", secured.bootstrap, "--remove", "--force", "--cluster")
    assert not may_list_acls(secured, "bob")


def test_confluent_kafka_admin_manages_acls_stored_in_kafkas_layout(secured: Secured) -> None:
    client = secured.admin()
    # The ACL, and the filter matching exactly it.
    fields = (
        admin.ResourceType.GROUP,
        "app",
        admin.ResourcePatternType.LITERAL,
        "User:alice",
        "10.0.0.1",
        admin.AclOperation.READ,
        admin.AclPermissionType.DENY,
    )
    binding = admin.AclBinding(*fields)
    for future in client.create_acls([binding], request_timeout=10).values():
        assert future.result() is None
    found = client.describe_acls(
        admin.AclBindingFilter(
            admin.ResourceType.GROUP,
            "app",
            admin.ResourcePatternType.MATCH,
            None,
            None,
            admin.AclOperation.ANY,
            admin.AclPermissionType.ANY,
        ),
        request_timeout=10,
    ).result()
    assert found == [binding]
    zk = secured.broker.cluster.zk()
    data, _ = zk.get("/kafka-acl/Group/app")
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Deny", "operation": "Read", "host": "10.0.0.1"}
        ],
    }
    exactly = admin.AclBindingFilter(*fields)
    deleted = client.delete_acls([exactly], request_timeout=10)
    assert [b for f in deleted.values() for b in f.result()] == [binding]
    assert zk.exists("/kafka-acl/Group/app") is None


def test_samsa_acls_over_zookeeper_reaches_the_running_broker(
    secured: Secured, capsys: pytest.CaptureFixture[str]
) -> None:
    """The deprecated --authorizer-properties mode writes ZooKeeper as Kafka's AclAuthorizer does; the
    broker follows the change notification."""
    assert not may_list_acls(secured, "alice")
    props = f"zookeeper.connect={secured.zookeeper}"
    code, out, err = run(
        capsys, "--authorizer-properties", props, "--add", "--allow-principal", "User:alice", "--cluster",
        "--operation", "Alter",
    )  # fmt: skip
    assert code == 0, out + err
    assert "Warning: support for ACL configuration directly through the authorizer is deprecated" in err
    eventually(lambda: may_list_acls(secured, "alice"))  # ALTER implies DESCRIBE
    code, out, _ = run(capsys, "--authorizer-properties", props, "--list", "--cluster")
    assert "operation=ALTER" in out
    code, _, _ = run(capsys, "--authorizer-properties", props, "--remove", "--force", "--cluster")
    assert code == 0
    eventually(lambda: not may_list_acls(secured, "alice"))


def test_kafka_python_admin_sees_kafkas_errors_and_results(secured: Secured) -> None:
    """kafka-python reads DescribeAcls' top-level error (librdkafka drops it): a user without Cluster
    DESCRIBE gets ClusterAuthorizationFailedError; the administrator manages a PREFIXED ACL."""
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )
    from kafka.errors import ClusterAuthorizationFailedError

    everything = ACLFilter(
        principal=None,
        host=None,
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
    )
    bob = KafkaAdminClient(
        bootstrap_servers=secured.sasl_bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="bob",
        sasl_plain_password="bob-secret",
    )
    administrator = KafkaAdminClient(bootstrap_servers=secured.bootstrap)
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.describe_acls(everything)
        acl = ACL(
            principal="User:bob",
            host="*",
            operation=ACLOperation.WRITE,
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=ResourcePattern(ResourceType.TOPIC, "logs-", ACLResourcePatternType.PREFIXED),
        )
        created = administrator.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        found, _ = administrator.describe_acls(everything)
        assert [
            (a.principal, a.resource_pattern.resource_name, a.resource_pattern.pattern_type) for a in found
        ] == [("User:bob", "logs-", ACLResourcePatternType.PREFIXED)]
        [(_, matched, _error)] = administrator.delete_acls([everything])
        assert [m.resource_pattern.resource_name for m in matched] == ["logs-"]
        assert administrator.describe_acls(everything)[0] == []
    finally:
        bob.close()
        administrator.close()


def test_acls_survive_a_broker_restart(secured: Secured, capsys: pytest.CaptureFixture[str]) -> None:
    """The ACLs are in ZooKeeper: a restarted broker loads them before it serves."""
    code, _, _ = run(
        capsys, "--bootstrap-server", secured.bootstrap, "--add", "--allow-principal", "User:alice",
        "--cluster", "--operation", "Describe",
    )  # fmt: skip
    assert code == 0
    secured.broker.restart()
    assert may_list_acls(secured, "alice")
    assert not may_list_acls(secured, "bob")


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_version_of_the_acl_apis_on_the_wire(secured: Secured, version: int) -> None:
    """Create, Describe and Delete at each version (v2+ flexible), and a request Kafka cannot parse
    (an UNKNOWN resource type) closing its connection."""
    from protocol.api import ApiKey
    from protocol.errors import ErrorCode
    from protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
    from tests.support.raw_client import RawClient

    name = f"wire-v{version}"
    client = RawClient(secured.bootstrap)
    try:
        created: Any = client.request(
            ApiKey.CREATE_ACLS,
            version,
            CreateAclsRequest(
                creations=[
                    CreateAclsRequest.AclCreation(
                        resource_type=2, resource_name=name, resource_pattern_type=3, principal="User:w",
                        host="*", operation=3, permission_type=3,
                    )
                ]
            ),
        )  # fmt: skip
        assert [r.error_code for r in created.results] == [ErrorCode.NONE]
        described: Any = client.request(
            ApiKey.DESCRIBE_ACLS,
            version,
            DescribeAclsRequest(
                resource_type_filter=2, resource_name_filter=name, pattern_type_filter=3,
                principal_filter=None, host_filter=None, operation=1, permission_type=1,
            ),
        )  # fmt: skip
        assert described.error_code == ErrorCode.NONE
        assert [(r.resource_name, [a.principal for a in r.acls]) for r in described.resources] == [
            (name, ["User:w"])
        ]
        deleted: Any = client.request(
            ApiKey.DELETE_ACLS,
            version,
            DeleteAclsRequest(
                filters=[
                    DeleteAclsRequest.DeleteAclsFilter(
                        resource_type_filter=2, resource_name_filter=name, pattern_type_filter=1,
                        principal_filter=None, host_filter=None, operation=1, permission_type=1,
                    )
                ]
            ),
        )  # fmt: skip
        assert [m.resource_name for m in deleted.filter_results[0].matching_acls] == [name]
    finally:
        client.close()
    if version == 0:
        bad = RawClient(secured.bootstrap)
        try:
            bad.send(
                ApiKey.DESCRIBE_ACLS,
                0,
                DescribeAclsRequest(
                    resource_type_filter=0, resource_name_filter=None, pattern_type_filter=3,
                    principal_filter=None, host_filter=None, operation=1, permission_type=1,
                ),
            )  # fmt: skip
            assert bad.is_closed_by_peer()
        finally:
            bad.close()
