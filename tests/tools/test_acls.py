"""``samsa acls`` without a cluster: kafka-acls.sh's command-line checks and messages, the ACLs its
options and the --producer / --consumer conveniences build, and its output lines."""

from __future__ import annotations

import pytest

from server_common.acl_authorizer import AccessControlEntry, ResourcePattern, ResourcePatternFilter
from server_common.acls import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType
from tools import acls

Op, RT, PT = AclOperation, ResourceType, PatternType
BOOT = ["--bootstrap-server", "127.0.0.1:1"]


def built(*argv: str) -> dict[tuple[RT, str, PT], set[tuple[str, str, Op, AclPermissionType]]]:
    args = acls._parser().parse_args([*BOOT, *argv])
    acls.check_args(args)
    return {
        (f.resource_type, f.name or "", f.pattern_type): {
            (e.principal, e.host, e.operation, e.permission_type) for e in entries
        }
        for f, entries in acls.filter_to_acls(args).items()
    }


def allow(principal: str, *ops: Op, host: str = "*") -> set[tuple[str, str, Op, AclPermissionType]]:
    return {(principal, host, op, AclPermissionType.ALLOW) for op in ops}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--list", "--add", "--topic", "t"],
            "Command must include exactly one action: --list, --add, --remove. ",
        ),
        (["--topic", "t"], "Command must include exactly one action: --list, --add, --remove. "),
        (["--list", "--producer", "--topic", "t"], 'Option "[list]" can\'t be used with option "[producer]"'),
        (
            ["--list", "--allow-principal", "User:a"],
            'Option "[list]" can\'t be used with option "[allow-principal]"',
        ),
        (
            ["--add", "--producer", "--topic", "t", "--operation", "Read"],
            'Option "[producer]" can\'t be used with option "[operation]"',
        ),
        (
            ["--add", "--consumer", "--topic", "t", "--group", "g", "--deny-principal", "User:a"],
            'Option "[consumer]" can\'t be used with option "[deny-principal]"',
        ),
        (
            ["--add", "--principal", "User:a", "--topic", "t"],
            "The --principal option is only available if --list is set",
        ),
        (
            ["--add", "--producer", "--allow-principal", "User:a"],
            "With --producer you must specify a --topic",
        ),
        (
            ["--add", "--idempotent", "--topic", "t", "--allow-principal", "User:a"],
            "The --idempotent option is only available if --producer is set",
        ),
        (
            ["--add", "--consumer", "--topic", "t", "--allow-principal", "User:a"],
            "With --consumer you must specify a --topic and a --group and no --cluster or --transactional-id "
            "option should be specified.",
        ),
        (
            ["--list", "--authorizer-properties", "zookeeper.connect=x:1"],
            "The --authorizer-properties option can only be used with --authorizer option",
        ),
    ],
)
def test_command_lines_kafka_refuses_are_refused_with_its_messages(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert acls.main([*BOOT, *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith(message + "\n")
    assert "usage: samsa acls" in err


def test_without_bootstrap_server_the_authorizer_properties_are_required(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert acls.main(["--list"]) == 1
    assert capsys.readouterr().err.startswith('Missing required argument "[authorizer-properties]"\n')
    assert (
        acls.main(["--list", "--command-config", "x", "--authorizer-properties", "zookeeper.connect=h:1"])
        == 1
    )
    err = capsys.readouterr().err
    assert "support for ACL configuration directly through the authorizer is deprecated" in err
    assert "The --command-config option can only be used with --bootstrap-server option" in err


def test_add_needs_principals_resources_and_a_specific_pattern_type(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert acls.main([*BOOT, "--add", "--topic", "t"]) == 1
    assert "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs." in (
        capsys.readouterr().err
    )
    assert acls.main([*BOOT, "--add", "--allow-principal", "User:a"]) == 1
    assert "You must provide at least one resource: --topic <topic> or --cluster" in capsys.readouterr().err
    assert (
        acls.main(
            [
                *BOOT,
                "--add",
                "--allow-principal",
                "User:a",
                "--topic",
                "t",
                "--resource-pattern-type",
                "match",
            ]
        )
        == 1
    )
    assert (
        "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."
        in capsys.readouterr().err
    )
    assert acls.main([*BOOT, "--list", "--resource-pattern-type", "bogus"]) == 1
    assert "Unknown resource-pattern-type: bogus" in capsys.readouterr().err


def test_operations_a_resource_type_does_not_support_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        acls.main([*BOOT, "--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"])
        == 1
    )
    assert capsys.readouterr().err.startswith(
        "ResourceType GROUP only supports operations Read, Delete, Describe, All\n"
    )


def test_allow_and_deny_options_build_every_combination() -> None:
    found = built(
        "--add",
        "--allow-principal",
        "User:alice",
        "--allow-principal",
        "User:bob",
        "--allow-host",
        "10.0.0.1",
        "--deny-principal",
        "User:mallory",
        "--operation",
        "Read",
        "--operation",
        "describe",
        "--topic",
        "t",
        "--group",
        "g",
    )
    topic = found[(RT.TOPIC, "t", PT.LITERAL)]
    assert found[(RT.GROUP, "g", PT.LITERAL)] == topic
    expected = allow("User:alice", Op.READ, Op.DESCRIBE, host="10.0.0.1") | allow(
        "User:bob", Op.READ, Op.DESCRIBE, host="10.0.0.1"
    )
    expected |= {("User:mallory", "*", op, AclPermissionType.DENY) for op in (Op.READ, Op.DESCRIBE)}
    assert topic == expected
    # default operation: All
    assert built("--add", "--allow-principal", "User:a", "--group", "g") == {
        (RT.GROUP, "g", PT.LITERAL): allow("User:a", Op.ALL)
    }


def test_producer_and_consumer_conveniences_build_kafkas_sets() -> None:
    assert built(
        "--add",
        "--allow-principal",
        "User:p",
        "--producer",
        "--idempotent",
        "--topic",
        "t",
        "--transactional-id",
        "tx",
        "--resource-pattern-type",
        "LITERAL",
    ) == {
        (RT.TOPIC, "t", PT.LITERAL): allow("User:p", Op.WRITE, Op.DESCRIBE, Op.CREATE),
        (RT.TRANSACTIONAL_ID, "tx", PT.LITERAL): allow("User:p", Op.WRITE, Op.DESCRIBE),
        (RT.CLUSTER, CLUSTER_NAME, PT.LITERAL): allow("User:p", Op.IDEMPOTENT_WRITE),
    }
    assert built("--add", "--allow-principal", "User:c", "--consumer", "--topic", "t", "--group", "g") == {
        (RT.TOPIC, "t", PT.LITERAL): allow("User:c", Op.READ, Op.DESCRIBE),
        (RT.GROUP, "g", PT.LITERAL): allow("User:c", Op.READ),
    }
    # both at once: the topic gets the union
    both = built(
        "--add", "--allow-principal", "User:x", "--producer", "--consumer", "--topic", "t", "--group", "g"
    )
    assert both[(RT.TOPIC, "t", PT.LITERAL)] == allow("User:x", Op.WRITE, Op.DESCRIBE, Op.CREATE, Op.READ)


def test_remove_without_principals_asks_to_delete_everything_of_the_filter(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = acls._parser().parse_args([*BOOT, "--remove", "--topic", "t", "--resource-pattern-type", "any"])
    acls.check_args(args)
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("n\n"))
    assert acls.removal_filters(args) == []
    assert capsys.readouterr().out == (
        "Are you sure you want to delete all ACLs for resource filter "
        "`ResourcePattern(resourceType=TOPIC, name=t, patternType=ANY)`? (y/n)\n"
    )
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("y\n"))
    [(f, entries, filters)] = acls.removal_filters(args)
    assert f == ResourcePatternFilter(RT.TOPIC, "t", PT.ANY) and entries == []
    assert filters[0].entry_filter == acls.ANY_ENTRY


def test_output_lines_are_kafkas() -> None:
    resource = ResourcePattern(RT.TOPIC, "t", PT.LITERAL)
    entries = [
        AccessControlEntry("User:b", "*", Op.WRITE, AclPermissionType.ALLOW),
        AccessControlEntry("User:a", "*", Op.READ, AclPermissionType.DENY),
    ]
    assert acls.adding_message(resource, entries) == (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: \n"
        " \t(principal=User:a, host=*, operation=READ, permissionType=DENY)\n"
        "\t(principal=User:b, host=*, operation=WRITE, permissionType=ALLOW) \n"
    )
    assert acls.current_message(resource, entries[:1]).startswith("Current ACLs for resource `")


def test_samsa_acls_is_a_samsa_command() -> None:
    from tools import COMMANDS

    assert COMMANDS["acls"][0] == "tools.acls:main"
