"""``samsa configs`` without a cluster: kafka-configs.sh's parsing of --add-config (brackets, SCRAM
credential values), its argument checks and messages, and what AlterUserScramCredentials carries (the
salted password, never the password). The round trips through a broker are in
tests/integration/test_scram_credentials.py."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterUserScramCredentialsResponse,
    DescribeClientQuotasResponse,
    DescribeUserScramCredentialsResponse,
)
from server_common.scram import MECHANISMS, SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential
from tools import COMMANDS, configs
from tools.configs import (
    CommandLineError,
    ConfigService,
    check_args,
    java_exception,
    parse_configs_to_add,
    parse_configs_to_delete,
    scram_iterations_and_password,
)
from tools.usage import UsageError


def test_registered_as_samsa_configs() -> None:
    assert COMMANDS["configs"][0] == "tools.configs:main"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1", {"a": "1"}),
        ("a = 1 , b=2,", {"a": "1", "b": "2"}),
        ("k1=v1,k2=[v1,v2,v2],k3=v3", {"k1": "v1", "k2": "v1,v2,v2", "k3": "v3"}),
        (
            "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]",
            {
                "SCRAM-SHA-256": "iterations=8192,password=alice-secret",
                "SCRAM-SHA-512": "password=alice-secret",
            },
        ),
        ("ssl.endpoint.identification.algorithm=", {"ssl.endpoint.identification.algorithm": ""}),
    ],
)
def test_add_config_split_as_kafka(text: str, expected: dict[str, str]) -> None:
    assert parse_configs_to_add(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a", 'Invalid entity config: all configs to be added must be in the format "key=val".'),
        ("a=1=2", 'Invalid entity config: all configs to be added must be in the format "key=val".'),
        ("a b=1", "Invalid character found for config key: a b"),
    ],
)
def test_bad_add_config_refused_with_kafkas_message(text: str, message: str) -> None:
    with pytest.raises(CommandLineError) as info:
        parse_configs_to_add(text)
    assert str(info.value) == message


def test_add_config_file(tmp_path: Any) -> None:
    path = tmp_path / "add.properties"
    path.write_text("retention.ms=1000\n# comment\ncleanup.policy=compact\n")
    assert parse_configs_to_add(None, str(path)) == {"retention.ms": "1000", "cleanup.policy": "compact"}


def test_delete_config_is_comma_separated_and_repeatable() -> None:
    assert parse_configs_to_delete(["a, b", "c"]) == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("password=alice-secret", (4096, "alice-secret")),
        ("iterations=8192,password=alice-secret", (8192, "alice-secret")),
        ("iterations=-1,password=a,b=c", (4096, "a,b=c")),
        ("password=", (4096, "")),
    ],
)
def test_scram_credential_values(value: str, expected: tuple[int, str]) -> None:
    assert scram_iterations_and_password(SCRAM_SHA_512, value) == expected


def test_scram_value_errors_never_echo_the_password() -> None:
    with pytest.raises(CommandLineError) as info:
        scram_iterations_and_password(SCRAM_SHA_512, "pass=hunter2")
    assert "hunter2" not in str(info.value) and "Invalid credential property SCRAM_SHA_512=" in str(
        info.value
    )
    with pytest.raises(
        CommandLineError, match="Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-256"
    ):
        scram_iterations_and_password(SCRAM_SHA_256, "iterations=100,password=x")


def parse(argv: list[str]) -> Any:
    args = configs._parser().parse_args(argv)
    check_args(args)
    return args


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bootstrap-server", "h:1", "--entity-type", "users"], "Command must include exactly one action"),
        (["--bootstrap-server", "h:1", "--describe"], "At least one entity type must be specified"),
        (
            ["--bootstrap-server", "h:1", "--describe", "--entity-type", "widgets"],
            "Invalid entity type widgets, the entity type must be one of topics, clients, users, brokers, "
            "ips, broker-loggers, client-metrics, groups with a --bootstrap-server or --bootstrap-controller "
            "argument",
        ),
        (
            ["--zookeeper", "z:2181", "--describe", "--entity-type", "topics"],
            "Invalid entity type topics, the entity type must be one of users, brokers with a --zookeeper "
            "argument",
        ),
        (
            ["--describe", "--entity-type", "users"],
            "One of the required --bootstrap-server, --boostrap-controller, or --zookeeper arguments must be "
            "specified",
        ),
        (
            ["--bootstrap-server", "h:1", "--alter", "--entity-type", "users", "--add-config", "a=1"],
            "An entity-name or default entity must be specified with --alter of users, clients, brokers or "
            "ips",
        ),
        (
            ["--bootstrap-server", "h:1", "--alter", "--entity-type", "topics", "--entity-name", "t"],
            "At least one of --add-config, --add-config-file, or --delete-config must be specified with "
            "--alter",
        ),
        (
            ["--bootstrap-server", "h:1", "--describe", "--entity-type", "brokers", "--entity-name", "one"],
            "The entity name for brokers must be a valid integer broker id, but it is: one",
        ),
        (
            ["--bootstrap-server", "h:1", "--describe", "--entity-type", "topics", "--entity-default"],
            "--entity-default must not be specified with --describe of topics",
        ),
        (
            ["--bootstrap-server", "h:1", "--describe", "--entity-name", "x", "--user", "a"],
            "--entity-{type,name,default} should not be used in conjunction with specific entity flags",
        ),
        (
            ["--bootstrap-server", "h:1", "--describe", "--entity-type", "topics", "--entity-type", "users"],
            "Only 'users' and 'clients' entity types may be specified together",
        ),
        (
            ["--bootstrap-controller", "h:1", "--describe", "--entity-type", "users"],
            "--bootstrap-controller is for KRaft controllers",
        ),
        (
            ["--bootstrap-server", "h:1", "--describe", "--entity-type", "ips"],
            "Entity type ips is not supported by Samsa: it has no connection quotas",
        ),
    ],
)
def test_bad_command_lines_refused_with_kafkas_messages(argv: list[str], message: str) -> None:
    with pytest.raises((CommandLineError, UsageError)) as info:
        parse(argv)
    assert message in str(info.value)


def test_entity_flags_are_shorthands() -> None:
    args = parse(
        [
            "--bootstrap-server",
            "h:1",
            "--alter",
            "--user",
            "alice",
            "--add-config",
            "SCRAM-SHA-512=[password=x]",
        ]
    )
    assert (configs.entity_types(args), configs.entity_names(args)) == (["users"], ["alice"])
    args = parse(["--bootstrap-server", "h:1", "--describe", "--entity-type", "brokers", "--entity-default"])
    assert (configs.entity_types(args), configs.entity_names(args)) == (["brokers"], [""])


class FakeAdmin:
    """Records what the tool sends; answers as a broker would."""

    def __init__(self, responses: dict[int, Any]) -> None:
        self.sent: list[tuple[int, Any]] = []
        self.responses = responses
        self.brokers = {1: ("h", 1)}

    async def send_to_controller(self, key: ApiKey, body: Any, errors_of: Any) -> Any:
        self.sent.append((key, body))
        return self.responses[key]

    async def send(self, key: ApiKey, body: Any, node: int | None = None) -> Any:
        self.sent.append((key, body))
        return self.responses[key]


def service(admin: FakeAdmin, argv: list[str]) -> ConfigService:
    return ConfigService(admin, parse(["--bootstrap-server", "h:1", *argv]))  # type: ignore[arg-type]


async def test_alter_user_sends_salted_password_not_the_password(capsys: Any) -> None:
    ok = AlterUserScramCredentialsResponse(
        results=[
            AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult(user="alice", error_code=0)
        ]
    )
    admin = FakeAdmin({ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ok})
    await service(
        admin,
        [
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--add-config",
            "SCRAM-SHA-512=[iterations=8192,password=alice-secret]",
            "--delete-config",
            "SCRAM-SHA-256",
        ],
    ).alter()
    assert capsys.readouterr().out == "Completed updating config for user alice.\n"
    [(key, body)] = admin.sent
    assert key == ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    [upsertion] = body.upsertions
    assert (upsertion.name, upsertion.mechanism, upsertion.iterations) == ("alice", 2, 8192)
    assert b"alice-secret" not in upsertion.salted_password and len(upsertion.salt) >= 20
    stored = ScramCredential.from_salted_password(
        SCRAM_SHA_512, upsertion.salt, upsertion.salted_password, upsertion.iterations
    )
    assert stored.verify_password(SCRAM_SHA_512, "alice-secret")
    assert [(d.name, d.mechanism) for d in body.deletions] == [("alice", MECHANISMS[SCRAM_SHA_256].type)]


async def test_alter_user_error_is_reported_as_kafka() -> None:
    refused = AlterUserScramCredentialsResponse(
        results=[
            AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult(
                user="alice",
                error_code=ErrorCode.UNACCEPTABLE_CREDENTIAL,
                error_message="Too many iterations",
            )
        ]
    )
    admin = FakeAdmin({ApiKey.ALTER_USER_SCRAM_CREDENTIALS: refused})
    with pytest.raises(configs.CommandError) as info:
        await service(
            admin,
            ["--alter", "--user", "alice", "--add-config", "SCRAM-SHA-512=[iterations=20000,password=x]"],
        ).alter()
    assert info.value.java() == (
        "java.util.concurrent.ExecutionException: "
        "org.apache.kafka.common.errors.UnacceptableCredentialException: Too many iterations"
    )


async def test_user_configs_mixing_quotas_and_scram_or_unknown_keys_refused() -> None:
    admin = FakeAdmin({})
    with pytest.raises(CommandLineError, match="Cannot alter both quota and SCRAM credential configs"):
        await service(
            admin,
            ["--alter", "--user", "a", "--add-config", "producer_byte_rate=1,SCRAM-SHA-256=[password=x]"],
        ).alter()
    with pytest.raises(CommandLineError, match=r"Unexpected config names: Set\(retention.ms\)"):
        await service(admin, ["--alter", "--user", "a", "--add-config", "retention.ms=1"]).alter()
    assert admin.sent == []


async def test_describe_users_prints_kafkas_lines(capsys: Any) -> None:
    Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
    Info = DescribeUserScramCredentialsResponse.CredentialInfo
    response = DescribeUserScramCredentialsResponse(
        error_code=0,
        results=[
            Result(
                user="alice",
                error_code=0,
                credential_infos=[Info(mechanism=1, iterations=4096), Info(mechanism=2, iterations=8192)],
            ),
            Result(user="ghost", error_code=ErrorCode.RESOURCE_NOT_FOUND, error_message="nope"),
            Result(user="twice", error_code=ErrorCode.DUPLICATE_RESOURCE, error_message="dup"),
        ],
    )
    admin = FakeAdmin(
        {
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: response,
            ApiKey.DESCRIBE_CLIENT_QUOTAS: DescribeClientQuotasResponse(error_code=0, entries=[]),
        }
    )
    await service(admin, ["--describe", "--entity-type", "users"]).describe()
    assert capsys.readouterr().out == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096, "
        "SCRAM-SHA-512=iterations=8192\n"
        "Error retrieving SCRAM credential configs for user-principal 'twice': "
        "DuplicateResourceException: dup\n"
    )
    assert admin.sent[-1][1].users == []  # every user


def test_java_exception_names() -> None:
    assert java_exception(ErrorCode.CLUSTER_AUTHORIZATION_FAILED).endswith(".ClusterAuthorizationException")
    assert java_exception(ErrorCode.RESOURCE_NOT_FOUND).endswith(".ResourceNotFoundException")
    assert java_exception(ErrorCode.UNSUPPORTED_SASL_MECHANISM).endswith(".UnsupportedSaslMechanismException")


def test_main_redacts_passwords_in_the_echoed_command(capsys: Any) -> None:
    """A request failure repeats the command line (as Kafka does) but not the password."""
    code = configs.main(
        [
            "--bootstrap-server",
            "127.0.0.1:1",
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "a",
            "--add-config",
            "SCRAM-SHA-512=[password=hunter2]",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and "Error while executing config command with args" in err
    assert "hunter2" not in err and "password=<redacted>" in err


def test_main_usage_errors_exit_1(capsys: Any) -> None:
    assert configs.main(["--bootstrap-server", "h:1", "--describe"]) == 1
    assert capsys.readouterr().err.strip() == "At least one entity type must be specified"
