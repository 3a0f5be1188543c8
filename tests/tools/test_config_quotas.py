"""``samsa configs`` for client quotas without a cluster: the DescribeClientQuotas filter and the
AlterClientQuotas entry kafka-configs.sh sends for each command line, its output lines and their order
(Java's HashMap iteration, checked against Java 17), and its messages for bad input. The round trips
through a broker are in tests/integration/test_client_quotas.py."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterClientQuotasResponse,
    DescribeClientQuotasResponse,
    DescribeUserScramCredentialsResponse,
)
from tools import configs
from tools.config_quotas import (
    described_entities,
    java_hash_map_order,
    java_map_hash,
    java_parse_double,
    java_string_hash,
    quota_line,
)
from tools.configs import CommandLineError, ConfigService, check_args

EntryData = DescribeClientQuotasResponse.EntryData
EntityData = DescribeClientQuotasResponse.EntityData
ValueData = DescribeClientQuotasResponse.ValueData


def parse(argv: list[str]) -> Any:
    args = configs._parser().parse_args(argv)
    check_args(args)
    return args


class FakeAdmin:
    def __init__(self, responses: dict[int, Any]) -> None:
        self.sent: list[tuple[int, Any]] = []
        self.responses = responses
        self.brokers = {1: ("h", 1)}

    async def send(self, key: ApiKey, body: Any, node: int | None = None) -> Any:
        self.sent.append((key, body))
        return self.responses[key]


def service(admin: FakeAdmin, argv: list[str]) -> ConfigService:
    return ConfigService(admin, parse(["--bootstrap-server", "h:1", *argv]))  # type: ignore[arg-type]


def quotas(*entries: tuple[dict[str, str | None], dict[str, float]]) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(
        error_code=0,
        entries=[
            EntryData(
                entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
                values=[ValueData(key=k, value=v) for k, v in values.items()],
            )
            for entity, values in entries
        ],
    )


OK_ALTER = AlterClientQuotasResponse(entries=[AlterClientQuotasResponse.EntryData(error_code=0, entity=[])])


# -- Java's orders (the expected lists are what Java 17's HashMap printed for the same puts) ---------


def test_string_hash_is_javas() -> None:
    assert java_string_hash("producer_byte_rate") == -832502454
    assert java_string_hash("user") == 3599307
    assert java_string_hash(None) == 0


@pytest.mark.parametrize(
    ("keys", "java_order"),
    [
        (
            ["producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"],
            ["producer_byte_rate", "consumer_byte_rate", "controller_mutation_rate", "request_percentage"],
        ),
        (["producer_byte_rate", "consumer_byte_rate"], ["consumer_byte_rate", "producer_byte_rate"]),
        (
            ["consumer_byte_rate", "producer_byte_rate", "request_percentage"],
            ["consumer_byte_rate", "producer_byte_rate", "request_percentage"],
        ),
        (["user", "client-id"], ["client-id", "user"]),
    ],
)
def test_value_maps_iterate_in_javas_order(keys: list[str], java_order: list[str]) -> None:
    assert java_hash_map_order(keys, java_string_hash, len(keys)) == java_order


def test_entity_maps_iterate_in_javas_order() -> None:
    entities: list[dict[str, str | None]] = [
        {"user": "alice"},
        {"client-id": "c1"},
        {"user": None, "client-id": None},
        {"user": "bob", "client-id": "c2"},
        {"user": None},
        {"client-id": None},
        {"user": "alice", "client-id": None},
    ]
    order = java_hash_map_order(entities, java_map_hash, len(entities))
    assert [entities.index(e) for e in order] == [2, 1, 0, 3, 6, 5, 4]


def test_doubles_parse_as_javas_parse_double() -> None:
    assert java_parse_double("1e6") == 1e6
    assert java_parse_double(" 2.5d ") == 2.5
    assert java_parse_double("-Infinity") == float("-inf")
    for bad in ("1_0", "inf", "nan", "abc", ""):
        assert java_parse_double(bad) is None


# -- describe -------------------------------------------------------------------------------------


def test_lines_as_kafka_configs_prints_them() -> None:
    assert (
        quota_line(
            {"user": "alice", "client-id": None}, {"producer_byte_rate": 1024.0, "request_percentage": 1e7}
        )
        == "Quota configs for user-principal 'alice', the default client-id are producer_byte_rate=1024.0, "
        "request_percentage=1.0E7"
    )
    assert (
        quota_line({"client-id": "app"}, {"consumer_byte_rate": 2048.0})
        == "Quota configs for client-id 'app' are consumer_byte_rate=2048.0"
    )
    assert quota_line({"user": None}, {"x": 1.0}) == "Quota configs for the default user-principal are x=1.0"


def test_described_entities_come_in_javas_order() -> None:
    response = quotas(
        ({"user": "alice"}, {"producer_byte_rate": 1.0, "consumer_byte_rate": 2.0}),
        ({"client-id": "c1"}, {"request_percentage": 3.0}),
        ({"user": None, "client-id": None}, {"producer_byte_rate": 4.0}),
    )
    assert described_entities(response) == [  # as Java 17 iterates the same HashMap
        ({"user": "alice"}, {"consumer_byte_rate": 2.0, "producer_byte_rate": 1.0}),
        ({"client-id": None, "user": None}, {"producer_byte_rate": 4.0}),
        ({"client-id": "c1"}, {"request_percentage": 3.0}),
    ]


@pytest.mark.parametrize(
    ("argv", "components", "scram"),
    [
        (["--entity-type", "users", "--entity-name", "alice"], [("user", 0, "alice")], True),
        (["--entity-type", "users"], [("user", 2, None)], True),
        (["--user-defaults"], [("user", 1, None)], False),
        (["--client", "app"], [("client-id", 0, "app")], False),
        (
            ["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients"],
            [("user", 0, "alice"), ("client-id", 2, None)],
            False,
        ),
        (
            ["--entity-type", "clients", "--entity-default", "--entity-type", "users", "--entity-default"],
            [("client-id", 1, None), ("user", 1, None)],
            False,
        ),
    ],
)
async def test_describe_sends_kafkas_strict_filter(
    argv: list[str], components: list[tuple[str, int, str | None]], scram: bool, capsys: Any
) -> None:
    admin = FakeAdmin(
        {
            ApiKey.DESCRIBE_CLIENT_QUOTAS: quotas(({"user": "alice"}, {"producer_byte_rate": 1048576.0})),
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: DescribeUserScramCredentialsResponse(
                error_code=0, results=[]
            ),
        }
    )
    await service(admin, ["--describe", *argv]).describe()
    key, body = admin.sent[0]
    assert key == ApiKey.DESCRIBE_CLIENT_QUOTAS
    assert body.strict is True
    assert [(c.entity_type, c.match_type, c.match) for c in body.components] == components
    assert capsys.readouterr().out.splitlines()[0] == (
        "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0"
    )
    # SCRAM credentials only for users without clients or defaults, as Kafka's tool
    # the SCRAM credentials too for users without clients or a default, as Kafka's tool
    assert (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS in [k for k, _ in admin.sent]) == scram


async def test_describe_error_is_reported_as_kafka() -> None:
    refused = DescribeClientQuotasResponse(
        error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Cluster authorization failed."
    )
    with pytest.raises(configs.CommandError) as info:
        await service(
            FakeAdmin({ApiKey.DESCRIBE_CLIENT_QUOTAS: refused}), ["--describe", "--client", "a"]
        ).describe()
    assert info.value.java().endswith(
        "org.apache.kafka.common.errors.ClusterAuthorizationException: Cluster authorization failed."
    )


# -- alter ----------------------------------------------------------------------------------------


async def test_alter_reads_then_sends_one_entry(capsys: Any) -> None:
    admin = FakeAdmin(
        {
            ApiKey.DESCRIBE_CLIENT_QUOTAS: quotas(
                ({"user": "alice", "client-id": "app"}, {"consumer_byte_rate": 9.0})
            ),
            ApiKey.ALTER_CLIENT_QUOTAS: OK_ALTER,
        }
    )
    await service(
        admin,
        [
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--entity-type",
            "clients",
            "--entity-name",
            "app",
            "--add-config",
            "producer_byte_rate=1048576,request_percentage=12.5",
            "--delete-config",
            "consumer_byte_rate",
        ],
    ).alter()
    assert [k for k, _ in admin.sent] == [ApiKey.DESCRIBE_CLIENT_QUOTAS, ApiKey.ALTER_CLIENT_QUOTAS]
    body = admin.sent[1][1]
    assert body.validate_only is False
    [entry] = body.entries
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [("user", "alice"), ("client-id", "app")]
    assert [(o.key, o.value, o.remove) for o in entry.ops] == [
        ("producer_byte_rate", 1048576.0, False),
        ("request_percentage", 12.5, False),
        ("consumer_byte_rate", 0.0, True),
    ]
    assert capsys.readouterr().out == "Completed updating config for user alice.\n"


async def test_alter_defaults_send_null_names(capsys: Any) -> None:
    admin = FakeAdmin({ApiKey.DESCRIBE_CLIENT_QUOTAS: quotas(), ApiKey.ALTER_CLIENT_QUOTAS: OK_ALTER})
    await service(admin, ["--alter", "--client-defaults", "--add-config", "consumer_byte_rate=100"]).alter()
    [entry] = admin.sent[1][1].entries
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [("client-id", None)]
    assert capsys.readouterr().out == "Completed updating default config for clients in the cluster.\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--client", "a", "--add-config", "producer_byte_rate=x"],
            "Cannot parse quota configuration value for producer_byte_rate: x",
        ),
        (["--client", "a", "--delete-config", "producer_byte_rate"], "Invalid config(s): producer_byte_rate"),
        (
            ["--client", "a", "--add-config", "retention.ms=1"],
            "Only quota configs can be added for 'clients' using --bootstrap-server. "
            "Unexpected config names: Set(retention.ms)",
        ),
        (
            ["--client", "a", "--delete-config", "SCRAM-SHA-256"],
            "Only quota configs can be deleted for 'clients' using --bootstrap-server. "
            "Unexpected config names: ArrayBuffer(SCRAM-SHA-256)",
        ),
        (
            ["--user-defaults", "--add-config", "SCRAM-SHA-256=[password=x]"],
            "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials",
        ),
    ],
)
async def test_bad_alters_refused_with_kafkas_messages(argv: list[str], message: str) -> None:
    admin = FakeAdmin({ApiKey.DESCRIBE_CLIENT_QUOTAS: quotas(), ApiKey.ALTER_CLIENT_QUOTAS: OK_ALTER})
    with pytest.raises(CommandLineError) as info:
        await service(admin, ["--alter", *argv]).alter()
    assert message in str(info.value)
    assert ApiKey.ALTER_CLIENT_QUOTAS not in [k for k, _ in admin.sent]


async def test_alter_error_is_reported_as_kafka() -> None:
    refused = AlterClientQuotasResponse(
        entries=[
            AlterClientQuotasResponse.EntryData(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message="Quota x must be greater than 0",
                entity=[],
            )
        ]
    )
    admin = FakeAdmin({ApiKey.DESCRIBE_CLIENT_QUOTAS: quotas(), ApiKey.ALTER_CLIENT_QUOTAS: refused})
    with pytest.raises(configs.CommandError) as info:
        await service(admin, ["--alter", "--user", "a", "--add-config", "producer_byte_rate=0"]).alter()
    assert info.value.java() == (
        "java.util.concurrent.ExecutionException: "
        "org.apache.kafka.common.errors.InvalidRequestException: Quota x must be greater than 0"
    )


def test_alter_needs_a_name_or_default_for_each_type() -> None:
    with pytest.raises(CommandLineError, match="An entity-name or default entity must be specified"):
        parse(["--bootstrap-server", "h:1", "--alter", "--entity-type", "clients", "--add-config", "a=1"])
