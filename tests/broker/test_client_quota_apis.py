"""DescribeClientQuotas and AlterClientQuotas against the handlers over an in-memory ZooKeeper: Kafka's
ZooKeeper layout and values, the filter semantics (exact / default / any name, strict), each bad input's
error and message, validate_only, the Cluster DESCRIBE_CONFIGS / ALTER_CONFIGS checks, and the node
clean-up (Kafka's tryCleanQuotaNodes). The real-broker round trips are in
tests/integration/test_client_quotas.py."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

import pytest

from broker.authorization import Authorization
from broker.client_quota_apis import ClientQuotaApis
from broker.client_quota_cache import ClientQuotaCache
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from server_common.acls import CLUSTER_NAME, AclOperation, Action, ResourceType
from server_common.principal import KafkaPrincipal
from tests.broker.fake_user_zk import FakeZk
from zk.client_quotas import ClientQuotaConfigs, QuotaEntity, java_double
from zk.user_configs import UserConfigs

Entity = AlterClientQuotasRequest.EntityData
Op = AlterClientQuotasRequest.OpData
Component = DescribeClientQuotasRequest.ComponentData
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def request(body: object) -> Any:
    return SimpleNamespace(
        body=body, peer="10.0.0.9:5000", principal=KafkaPrincipal("User", "bob"), client_ip="10.0.0.9"
    )


def entity(user: str | bool | None = False, client: str | bool | None = False) -> list[Entity]:
    """The wire entity: a name, None for the default, False for no such part."""
    parts = []
    if user is not False:
        parts.append(Entity(entity_type="user", entity_name=cast(Any, user)))
    if client is not False:
        parts.append(Entity(entity_type="client-id", entity_name=cast(Any, client)))
    return parts


def set_(key: str, value: float) -> Op:
    return Op(key=key, value=value, remove=False)


def remove(key: str) -> Op:
    return Op(key=key, value=0.0, remove=True)


@pytest.fixture
def zk() -> FakeZk:
    return FakeZk()


@pytest.fixture
def cache() -> ClientQuotaCache:
    return ClientQuotaCache()


@pytest.fixture
def apis(zk: FakeZk, cache: ClientQuotaCache) -> ClientQuotaApis:
    return ClientQuotaApis(ClientQuotaConfigs(cast(Any, zk)), cache)


async def alter(
    apis: ClientQuotaApis, *entries: tuple[list[Entity], list[Op]], validate_only: bool = False
) -> list[tuple[int, str | None]]:
    body = AlterClientQuotasRequest(
        entries=[AlterClientQuotasRequest.EntryData(entity=e, ops=o) for e, o in entries],
        validate_only=validate_only,
    )
    response: AlterClientQuotasResponse = await apis.handle_alter(request(body))
    return [(e.error_code, e.error_message) for e in response.entries]


async def describe(
    apis: ClientQuotaApis, *components: tuple[str, int, str | None], strict: bool = False
) -> DescribeClientQuotasResponse:
    body = DescribeClientQuotasRequest(
        components=[Component(entity_type=t, match_type=m, match=n) for t, m, n in components], strict=strict
    )
    return await apis.handle_describe(request(body))


def found(response: DescribeClientQuotasResponse) -> list[tuple[dict[str, str | None], dict[str, float]]]:
    assert response.error_code == ErrorCode.NONE, response.error_message
    return [
        ({e.entity_type: e.entity_name for e in entry.entity}, {v.key: v.value for v in entry.values})
        for entry in response.entries or []
    ]


def node(zk: FakeZk, path: str) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(zk.nodes[path][0]))


async def test_alter_writes_kafkas_znodes_and_notifications(zk: FakeZk, apis: ClientQuotaApis) -> None:
    ok = (ErrorCode.NONE, None)
    assert await alter(apis, (entity(client="app"), [set_("producer_byte_rate", 1048576.0)])) == [ok]
    assert await alter(apis, (entity(user="al ice"), [set_("request_percentage", 200)])) == [ok]
    assert await alter(
        apis,
        (entity(user=None, client=None), [set_("consumer_byte_rate", 2048), set_("request_percentage", 1e7)]),
    ) == [ok]
    assert node(zk, "/config/clients/app") == {"version": 1, "config": {"producer_byte_rate": "1048576"}}
    assert node(zk, "/config/users/al%20ice") == {"version": 1, "config": {"request_percentage": "200.0"}}
    assert node(zk, "/config/users/<default>/clients/<default>")["config"] == {
        "consumer_byte_rate": "2048",
        "request_percentage": "1.0E7",
    }
    assert [json.loads(c)["entity_path"] for c in zk.changes()] == [
        "clients/app",
        "users/al%20ice",
        "users/<default>/clients/<default>",
    ]


async def test_alter_updates_this_brokers_cache_at_once(
    apis: ClientQuotaApis, cache: ClientQuotaCache
) -> None:
    await alter(apis, (entity(user="alice"), [set_("producer_byte_rate", 500)]))
    assert cache.quota("alice", "any", "producer_byte_rate") == 500.0
    await alter(apis, (entity(user="alice"), [remove("producer_byte_rate")]))
    assert cache.quota("alice", "any", "producer_byte_rate") is None


async def test_quotas_and_scram_credentials_share_the_user_node(zk: FakeZk, apis: ClientQuotaApis) -> None:
    users = UserConfigs(cast(Any, zk))
    await users.set_scram_password("alice", "secret")
    await alter(apis, (entity(user="alice"), [set_("consumer_byte_rate", 100)]))
    config = node(zk, "/config/users/alice")["config"]
    assert set(config) == {"SCRAM-SHA-512", "consumer_byte_rate"}
    await alter(apis, (entity(user="alice"), [remove("consumer_byte_rate")]))
    assert set(node(zk, "/config/users/alice")["config"]) == {"SCRAM-SHA-512"}  # the credential kept
    # and a credential removed keeps the quota
    await alter(apis, (entity(user="alice"), [set_("consumer_byte_rate", 100)]))
    await users.delete_scram_credential("alice", "SCRAM-SHA-512")
    assert node(zk, "/config/users/alice")["config"] == {"consumer_byte_rate": "100"}


async def test_removing_the_last_quota_deletes_the_nodes_it_leaves_empty(
    zk: FakeZk, apis: ClientQuotaApis
) -> None:
    await alter(apis, (entity(user="alice", client="app"), [set_("producer_byte_rate", 1)]))
    assert "/config/users/alice/clients/app" in zk.nodes
    await alter(apis, (entity(user="alice", client="app"), [remove("producer_byte_rate")]))
    assert not [p for p in zk.nodes if p.startswith("/config/users/alice")]
    # a user with its own quota keeps its node when its last client entity goes
    await alter(apis, (entity(user="bob"), [set_("producer_byte_rate", 1)]))
    await alter(apis, (entity(user="bob", client="x"), [set_("producer_byte_rate", 2)]))
    await alter(apis, (entity(user="bob", client="x"), [remove("producer_byte_rate")]))
    assert "/config/users/bob" in zk.nodes and "/config/users/bob/clients" not in zk.nodes
    await alter(apis, (entity(client="c"), [set_("producer_byte_rate", 1)]))
    await alter(apis, (entity(client="c"), [remove("producer_byte_rate")]))
    assert "/config/clients/c" not in zk.nodes


@pytest.mark.parametrize(
    ("parts", "ops", "message"),
    [
        ([], [set_("producer_byte_rate", 1)], "Invalid empty client quota entity"),
        ([Entity(entity_type="group", entity_name="g")], [], "Unhandled client quota entity type: group"),
        (entity(user=""), [set_("producer_byte_rate", 1)], "Empty user not supported"),
        (entity(client=""), [set_("producer_byte_rate", 1)], "Empty client-id not supported"),
        (
            entity(user="a") + entity(user="b"),
            [set_("producer_byte_rate", 1)],
            "Invalid client quota entity, duplicate entity entry user",
        ),
        (
            [*entity(user="a"), Entity(entity_type="ip", entity_name="1.2.3.4")],
            [],
            "Invalid quota entity combination, IP entity should not be used with user/client ID entity.",
        ),
        ([Entity(entity_type="ip", entity_name="1.2.3.4")], [], "Samsa has no connection rate quotas"),
        (entity(user="a"), [set_("retention.ms", 1)], "Invalid configuration key retention.ms"),
        (entity(user="a"), [set_("SCRAM-SHA-256", 1)], "Invalid configuration key SCRAM-SHA-256"),
        (entity(user="a"), [remove("SCRAM-SHA-256")], "Invalid configuration key SCRAM-SHA-256"),
        (
            entity(user="a"),
            [set_("producer_byte_rate", 1.5)],
            "Configuration producer_byte_rate must be a LONG value",
        ),
        (
            entity(user="a"),
            [set_("producer_byte_rate", 0)],
            "Quota producer_byte_rate must be greater than 0",
        ),
        (
            entity(user="a"),
            [set_("request_percentage", -1)],
            "Quota request_percentage must be greater than 0",
        ),
        (entity(user="a"), [set_("request_percentage", float("nan"))], "must be greater than 0"),
        (entity(user="a"), [set_("consumer_byte_rate", 1e30)], "is too large for a LONG"),
    ],
)
async def test_bad_entries_are_invalid_request_with_kafkas_messages(
    zk: FakeZk, apis: ClientQuotaApis, parts: list[Entity], ops: list[Op], message: str
) -> None:
    [(code, text)] = await alter(apis, (parts, ops))
    assert code == ErrorCode.INVALID_REQUEST
    assert text is not None and message in text
    assert zk.changes() == []


async def test_one_bad_entry_does_not_stop_the_others(zk: FakeZk, apis: ClientQuotaApis) -> None:
    results = await alter(
        apis,
        (entity(client="a"), [set_("producer_byte_rate", 1.5)]),
        (entity(client="b"), [set_("producer_byte_rate", 2)]),
    )
    assert [code for code, _ in results] == [ErrorCode.INVALID_REQUEST, ErrorCode.NONE]
    assert "/config/clients/b" in zk.nodes and "/config/clients/a" not in zk.nodes


async def test_a_long_sent_as_a_near_integral_double_is_stored_as_an_integer(
    zk: FakeZk, apis: ClientQuotaApis
) -> None:
    await alter(apis, (entity(client="a"), [set_("producer_byte_rate", 1023.9999999)]))
    assert node(zk, "/config/clients/a")["config"] == {"producer_byte_rate": "1024"}


async def test_validate_only_writes_nothing(
    zk: FakeZk, apis: ClientQuotaApis, cache: ClientQuotaCache
) -> None:
    assert await alter(apis, (entity(client="a"), [set_("producer_byte_rate", 2)]), validate_only=True) == [
        (ErrorCode.NONE, None)
    ]
    [(code, _)] = await alter(
        apis, (entity(client="a"), [set_("producer_byte_rate", 2.5)]), validate_only=True
    )
    assert code == ErrorCode.INVALID_REQUEST
    assert "/config/clients/a" not in zk.nodes and zk.changes() == []
    assert cache.entities() == {}


async def test_entries_naming_one_entity_are_answered_once(apis: ClientQuotaApis) -> None:
    results = await alter(
        apis,
        (entity(client="a"), [set_("producer_byte_rate", 2)]),
        (entity(client="a"), [set_("consumer_byte_rate", 3)]),
    )
    assert results == [(ErrorCode.NONE, None)]
    assert found(await describe(apis, ("client-id", EXACT, "a"))) == [
        ({"client-id": "a"}, {"consumer_byte_rate": 3.0, "producer_byte_rate": 2.0})
    ]


@pytest.fixture
async def populated(apis: ClientQuotaApis, zk: FakeZk) -> ClientQuotaApis:
    await UserConfigs(cast(Any, zk)).set_scram_password("scram-only", "pw")  # no quota: never listed
    for parts in (
        entity(user="alice"),
        entity(user=None),
        entity(client="app"),
        entity(client=None),
        entity(user="alice", client="app"),
        entity(user="alice", client=None),
        entity(user=None, client=None),
        entity(user="bob", client="app"),
    ):
        assert await alter(apis, (parts, [set_("producer_byte_rate", 1000)])) == [(ErrorCode.NONE, None)]
    return apis


def keys(response: DescribeClientQuotasResponse) -> list[tuple[str | None, ...]]:
    """(user, client id) of each entity found, "-" for no such part, None for the default."""
    return sorted(((e.get("user", "-"), e.get("client-id", "-")) for e, _ in found(response)), key=str)


@pytest.mark.parametrize(
    ("components", "strict", "expected"),
    [
        # everything
        (
            (),
            False,
            [
                ("-", "app"),
                ("-", None),
                ("alice", "-"),
                ("alice", "app"),
                ("alice", None),
                ("bob", "app"),
                (None, "-"),
                (None, None),
            ],
        ),
        # kafka-configs.sh --describe --entity-type users --entity-name alice (strict): the user alone
        ((("user", EXACT, "alice"),), True, [("alice", "-")]),
        # not strict: every entity of alice
        ((("user", EXACT, "alice"),), False, [("alice", "-"), ("alice", "app"), ("alice", None)]),
        # --entity-type users (strict): every user, the default included
        ((("user", SPECIFIED, None),), True, [("alice", "-"), (None, "-")]),
        ((("user", DEFAULT, None),), True, [(None, "-")]),
        ((("client-id", DEFAULT, None),), True, [("-", None)]),
        # --entity-type users --entity-name alice --entity-type clients (strict): alice's client entities
        (
            (("user", EXACT, "alice"), ("client-id", SPECIFIED, None)),
            True,
            [("alice", "app"), ("alice", None)],
        ),
        ((("user", SPECIFIED, None), ("client-id", EXACT, "app")), True, [("alice", "app"), ("bob", "app")]),
        ((("user", DEFAULT, None), ("client-id", DEFAULT, None)), True, [(None, None)]),
        ((("client-id", EXACT, "app"),), False, [("-", "app"), ("alice", "app"), ("bob", "app")]),
        ((("user", EXACT, "nobody"),), True, []),
        ((("ip", SPECIFIED, None),), True, []),  # Samsa keeps no ip quotas
    ],
)
async def test_describe_filters_as_kafka(
    populated: ClientQuotaApis,
    components: tuple[tuple[str, int, str | None], ...],
    strict: bool,
    expected: list[tuple[str | None, ...]],
) -> None:
    assert keys(await describe(populated, *components, strict=strict)) == sorted(expected, key=str)


async def test_describe_answers_names_and_values_as_doubles(populated: ClientQuotaApis) -> None:
    [(names, values)] = found(
        await describe(populated, ("user", EXACT, "alice"), ("client-id", DEFAULT, None), strict=True)
    )
    assert names == {"user": "alice", "client-id": None}
    assert values == {"producer_byte_rate": 1000.0}


@pytest.mark.parametrize(
    ("components", "code", "message"),
    [
        (
            (("user", SPECIFIED, None), ("user", DEFAULT, None)),
            ErrorCode.INVALID_REQUEST,
            "Duplicate user filter component entity type",
        ),
        (
            (("", SPECIFIED, None),),
            ErrorCode.INVALID_REQUEST,
            "Unexpected empty filter component entity type",
        ),
        (
            (("group", SPECIFIED, None),),
            ErrorCode.UNSUPPORTED_VERSION,
            "Custom entity type 'group' not supported",
        ),
        (
            (("ip", SPECIFIED, None), ("user", SPECIFIED, None)),
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination",
        ),
        ((("user", 7, None),), ErrorCode.INVALID_REQUEST, "Unexpected match type: 7"),
        ((("user", EXACT, None),), ErrorCode.INVALID_REQUEST, "An exact match of user needs a name"),
    ],
)
async def test_bad_filters_are_refused_with_kafkas_errors(
    apis: ClientQuotaApis, components: tuple[tuple[str, int, str | None], ...], code: int, message: str
) -> None:
    response = await describe(apis, *components)
    assert response.error_code == code
    assert response.error_message is not None and response.error_message.startswith(message)
    assert response.entries is None


class DenyAll:
    def __init__(self) -> None:
        self.asked: list[Action] = []

    def authorize(self, principal: KafkaPrincipal, host: str, actions: list[Action]) -> list[bool]:
        self.asked += actions
        return [False] * len(actions)

    def authorize_by_resource_type(self, *args: object) -> bool:
        return False


async def test_without_cluster_describe_configs_describe_is_cluster_authorization_failed(zk: FakeZk) -> None:
    authorizer = DenyAll()
    apis = ClientQuotaApis(ClientQuotaConfigs(cast(Any, zk)), None, Authorization(authorizer))
    response = await describe(apis)
    assert (response.error_code, response.error_message, response.entries) == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        "Cluster authorization failed.",
        None,
    )
    assert [(a.operation, a.resource_type, a.name) for a in authorizer.asked] == [
        (AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME)
    ]


async def test_without_cluster_alter_configs_every_entry_is_refused(zk: FakeZk) -> None:
    authorizer = DenyAll()
    apis = ClientQuotaApis(ClientQuotaConfigs(cast(Any, zk)), None, Authorization(authorizer))
    results = await alter(
        apis,
        (entity(client="a"), [set_("producer_byte_rate", 1)]),
        (entity(user="b"), [set_("producer_byte_rate", 1)]),
    )
    assert results == [(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")] * 2
    assert [(a.operation, a.resource_type) for a in authorizer.asked] == [
        (AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)
    ]
    assert zk.changes() == []


async def test_the_cache_loads_every_quota_from_zookeeper(populated: ClientQuotaApis, zk: FakeZk) -> None:
    cache = ClientQuotaCache()
    await cache.load(ClientQuotaConfigs(cast(Any, zk)))
    assert len(cache.entities()) == 8
    assert cache.quota("bob", "app", "producer_byte_rate") == 1000.0
    assert QuotaEntity.of("scram-only") not in cache.entities()


async def test_the_cache_reloads_the_entity_a_notification_names(zk: FakeZk) -> None:
    configs = ClientQuotaConfigs(cast(Any, zk))
    cache = ClientQuotaCache()
    await configs.alter(QuotaEntity.of("alice", "app"), lambda c: {**c, "producer_byte_rate": "7"})
    await cache.reload(configs, "users", "alice/clients/app")
    assert cache.quota("alice", "app", "producer_byte_rate") == 7.0
    await cache.reload(configs, "users", "bad/path")  # logged, ignored
    await configs.alter(QuotaEntity.of("alice", "app"), lambda c: {})
    await cache.reload(configs, "users", "alice/clients/app")
    assert cache.entities() == {}


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (200.0, "200.0"),
        (0.5, "0.5"),
        (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (1e-4, "1.0E-4"),
        (0.001, "0.001"),
    ],
)
def test_doubles_are_written_as_java_prints_them(value: float, text: str) -> None:
    assert java_double(value) == text  # checked against Java 17's Double.toString
