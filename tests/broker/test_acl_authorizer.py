"""The ACL authorizer's decisions (Kafka's AclAuthorizer.authorizeAction / authorizeByResourceType),
its changes through the store (createAcls/deleteAcls), its listing filters, its log lines and how
authorizer.class.name selects it. No ZooKeeper: the in-memory store."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from broker.authorization import Authorization
from protocol.errors import ErrorCode
from server_common.acl_authorizer import (
    ANY_BINDING,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    InMemoryAclStore,
    ResourcePattern,
    ResourcePatternFilter,
    authorizer_from_config,
    parse_operation,
    parse_resource_type,
    resource_type_name,
)
from server_common.acls import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    Action,
    PatternType,
    ResourceType,
)
from server_common.principal import ANONYMOUS, KafkaPrincipal

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
ALLOW, DENY = Perm.ALLOW, Perm.DENY
ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
ADMIN = KafkaPrincipal("User", "admin")
HOST = "192.168.0.1"


def literal(name: str, rt: RT = RT.TOPIC) -> ResourcePattern:
    return ResourcePattern(rt, name, PT.LITERAL)


def prefixed(name: str, rt: RT = RT.TOPIC) -> ResourcePattern:
    return ResourcePattern(rt, name, PT.PREFIXED)


def ace(op: Op, perm: Perm = ALLOW, principal: str = "User:alice", host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


def allowed(
    authorizer: AclAuthorizer,
    op: Op,
    name: str,
    rt: RT = RT.TOPIC,
    who: KafkaPrincipal = ALICE,
    host: str = HOST,
) -> bool:
    return authorizer.authorize(who, host, [Action(op, rt, name)])[0]


# -- the matching table ------------------------------------------------------------------------------
#
# Each row: the ACLs present, then (principal, host, operation, topic) checked and the answer.

ROWS: list[
    tuple[str, list[tuple[ResourcePattern, AccessControlEntry]], KafkaPrincipal, str, Op, str, bool]
] = [
    ("no acl at all: denied", [], ALICE, HOST, Op.READ, "t", False),
    ("literal allow read", [(literal("t"), ace(Op.READ))], ALICE, HOST, Op.READ, "t", True),
    ("literal allow read, other topic", [(literal("t"), ace(Op.READ))], ALICE, HOST, Op.READ, "u", False),
    ("allow read, write asked", [(literal("t"), ace(Op.READ))], ALICE, HOST, Op.WRITE, "t", False),
    ("allow read, other principal", [(literal("t"), ace(Op.READ))], BOB, HOST, Op.READ, "t", False),
    ("read implies describe", [(literal("t"), ace(Op.READ))], ALICE, HOST, Op.DESCRIBE, "t", True),
    ("write implies describe", [(literal("t"), ace(Op.WRITE))], ALICE, HOST, Op.DESCRIBE, "t", True),
    ("delete implies describe", [(literal("t"), ace(Op.DELETE))], ALICE, HOST, Op.DESCRIBE, "t", True),
    ("alter implies describe", [(literal("t"), ace(Op.ALTER))], ALICE, HOST, Op.DESCRIBE, "t", True),
    (
        "create does not imply describe",
        [(literal("t"), ace(Op.CREATE))],
        ALICE,
        HOST,
        Op.DESCRIBE,
        "t",
        False,
    ),
    (
        "alter_configs implies describe_configs",
        [(literal("t"), ace(Op.ALTER_CONFIGS))],
        ALICE,
        HOST,
        Op.DESCRIBE_CONFIGS,
        "t",
        True,
    ),
    ("describe implies nothing", [(literal("t"), ace(Op.DESCRIBE))], ALICE, HOST, Op.READ, "t", False),
    (
        "alter does not imply alter_configs",
        [(literal("t"), ace(Op.ALTER))],
        ALICE,
        HOST,
        Op.ALTER_CONFIGS,
        "t",
        False,
    ),
    ("ALL allows every operation", [(literal("t"), ace(Op.ALL))], ALICE, HOST, Op.DELETE, "t", True),
    (
        "deny beats allow",
        [(literal("t"), ace(Op.READ)), (literal("t"), ace(Op.READ, DENY))],
        ALICE,
        HOST,
        Op.READ,
        "t",
        False,
    ),
    (
        "deny ALL beats allow",
        [(literal("t"), ace(Op.READ)), (literal("t"), ace(Op.ALL, DENY))],
        ALICE,
        HOST,
        Op.READ,
        "t",
        False,
    ),
    (
        "deny describe does not deny read",
        [(literal("t"), ace(Op.READ)), (literal("t"), ace(Op.DESCRIBE, DENY))],
        ALICE,
        HOST,
        Op.READ,
        "t",
        True,
    ),
    (
        "deny read does not deny describe implied by write",
        [(literal("t"), ace(Op.WRITE)), (literal("t"), ace(Op.READ, DENY))],
        ALICE,
        HOST,
        Op.DESCRIBE,
        "t",
        True,
    ),
    (
        "deny for another principal leaves the allow",
        [(literal("t"), ace(Op.READ)), (literal("t"), ace(Op.READ, DENY, "User:bob"))],
        ALICE,
        HOST,
        Op.READ,
        "t",
        True,
    ),
    ("wildcard principal", [(literal("t"), ace(Op.READ, principal="User:*"))], BOB, HOST, Op.READ, "t", True),
    (
        "wildcard principal deny",
        [(literal("t"), ace(Op.READ)), (literal("t"), ace(Op.READ, DENY, "User:*"))],
        ALICE,
        HOST,
        Op.READ,
        "t",
        False,
    ),
    ("host matches", [(literal("t"), ace(Op.READ, host=HOST))], ALICE, HOST, Op.READ, "t", True),
    ("host differs", [(literal("t"), ace(Op.READ, host="10.0.0.1"))], ALICE, HOST, Op.READ, "t", False),
    (
        "deny from one host only",
        [(literal("t"), ace(Op.READ)), (literal("t"), ace(Op.READ, DENY, host="10.0.0.1"))],
        ALICE,
        HOST,
        Op.READ,
        "t",
        True,
    ),
    ("literal * resource", [(literal("*"), ace(Op.READ))], ALICE, HOST, Op.READ, "anything", True),
    (
        "literal * deny beats literal allow",
        [(literal("t"), ace(Op.READ)), (literal("*"), ace(Op.READ, DENY))],
        ALICE,
        HOST,
        Op.READ,
        "t",
        False,
    ),
    ("prefixed allow", [(prefixed("pay"), ace(Op.WRITE))], ALICE, HOST, Op.WRITE, "payments", True),
    ("prefixed equal to the name", [(prefixed("pay"), ace(Op.WRITE))], ALICE, HOST, Op.WRITE, "pay", True),
    ("prefixed not a prefix", [(prefixed("pay"), ace(Op.WRITE))], ALICE, HOST, Op.WRITE, "pa", False),
    ("prefixed is not literal *", [(prefixed("*"), ace(Op.WRITE))], ALICE, HOST, Op.WRITE, "payments", False),
    (
        "prefixed deny beats literal allow",
        [(literal("payments"), ace(Op.WRITE)), (prefixed("pay"), ace(Op.WRITE, DENY))],
        ALICE,
        HOST,
        Op.WRITE,
        "payments",
        False,
    ),
    (
        "longer prefixed deny beats shorter prefixed allow",
        [(prefixed("p"), ace(Op.WRITE)), (prefixed("payments-"), ace(Op.WRITE, DENY))],
        ALICE,
        HOST,
        Op.WRITE,
        "payments-eu",
        False,
    ),
    (
        "a deny prefix not matching leaves the allow",
        [(prefixed("p"), ace(Op.WRITE)), (prefixed("payments-"), ace(Op.WRITE, DENY))],
        ALICE,
        HOST,
        Op.WRITE,
        "pings",
        True,
    ),
    (
        "an ACL on another resource does not apply",
        [(literal("other"), ace(Op.READ, principal="User:*"))],
        ALICE,
        HOST,
        Op.READ,
        "t",
        False,
    ),
    ("ANONYMOUS needs ACLs too", [(literal("t"), ace(Op.READ))], ANONYMOUS, HOST, Op.READ, "t", False),
    (
        "User:ANONYMOUS can be granted",
        [(literal("t"), ace(Op.READ, principal="User:ANONYMOUS"))],
        ANONYMOUS,
        HOST,
        Op.READ,
        "t",
        True,
    ),
]


@pytest.mark.parametrize(
    ("acls", "who", "host", "op", "topic", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_acl_matching_follows_kafkas_rules(
    acls: list[tuple[ResourcePattern, AccessControlEntry]],
    who: KafkaPrincipal,
    host: str,
    op: Op,
    topic: str,
    expected: bool,
) -> None:
    authorizer = AclAuthorizer()
    for pattern, entry in acls:
        authorizer.add_acls(pattern, entry)
    assert allowed(authorizer, op, topic, who=who, host=host) is expected


def test_super_users_are_allowed_everything_even_when_denied() -> None:
    authorizer = AclAuthorizer(super_users="User:admin; User:CN=broker,O=samsa")
    authorizer.add_acls(literal("t"), ace(Op.ALL, DENY, "User:*"))
    assert allowed(authorizer, Op.DELETE, "t", who=ADMIN)
    assert allowed(
        authorizer,
        Op.CLUSTER_ACTION,
        CLUSTER_NAME,
        RT.CLUSTER,
        who=KafkaPrincipal("User", "CN=broker,O=samsa"),
    )
    assert not allowed(authorizer, Op.READ, "t", who=ALICE)


def test_allow_everyone_if_no_acl_found_applies_only_to_resources_without_acls() -> None:
    authorizer = AclAuthorizer(allow_everyone_if_no_acl_found=True)
    authorizer.add_acls(literal("guarded"), ace(Op.READ, principal="User:bob"))
    assert allowed(authorizer, Op.WRITE, "open")  # no ACL on it: everyone
    assert not allowed(authorizer, Op.READ, "guarded")  # it has ACLs, none for alice
    assert allowed(authorizer, Op.READ, "guarded", who=BOB)
    # A prefixed or wildcard ACL counts as an ACL found for the resource.
    authorizer.add_acls(prefixed("op"), ace(Op.READ, principal="User:bob"))
    assert not allowed(authorizer, Op.WRITE, "open")


def test_each_resource_type_is_matched_separately() -> None:
    authorizer = AclAuthorizer()
    authorizer.add_acls(literal("app", RT.GROUP), ace(Op.READ))
    authorizer.add_acls(literal("tx-1", RT.TRANSACTIONAL_ID), ace(Op.WRITE))
    authorizer.add_acls(literal(CLUSTER_NAME, RT.CLUSTER), ace(Op.IDEMPOTENT_WRITE))
    assert allowed(authorizer, Op.READ, "app", RT.GROUP)
    assert not allowed(authorizer, Op.READ, "app", RT.TOPIC)
    assert allowed(authorizer, Op.DESCRIBE, "tx-1", RT.TRANSACTIONAL_ID)
    assert allowed(authorizer, Op.IDEMPOTENT_WRITE, CLUSTER_NAME, RT.CLUSTER)
    assert not allowed(authorizer, Op.CLUSTER_ACTION, CLUSTER_NAME, RT.CLUSTER)


def test_removing_acls_takes_effect_at_once() -> None:
    authorizer = AclAuthorizer()
    authorizer.add_acls(prefixed("pay"), ace(Op.READ), ace(Op.WRITE))
    assert allowed(authorizer, Op.WRITE, "payments")
    authorizer.remove_acls(prefixed("pay"), ace(Op.WRITE))
    assert not allowed(authorizer, Op.WRITE, "payments")
    assert allowed(authorizer, Op.READ, "payments")
    authorizer.remove_acls(prefixed("pay"))
    assert not allowed(authorizer, Op.READ, "payments")
    assert authorizer.acls() == []


# -- authorizeByResourceType -------------------------------------------------------------------------


def by_type(
    authorizer: AclAuthorizer, op: Op = Op.WRITE, rt: RT = RT.TOPIC, who: KafkaPrincipal = ALICE
) -> bool:
    return authorizer.authorize_by_resource_type(who, HOST, op, rt)


def test_authorize_by_resource_type_needs_an_allow_not_wholly_denied() -> None:
    authorizer = AclAuthorizer()
    assert not by_type(authorizer)
    authorizer.add_acls(literal("t1"), ace(Op.WRITE))
    assert by_type(authorizer)
    assert not by_type(authorizer, Op.READ)
    assert not by_type(authorizer, rt=RT.GROUP)
    # the only allowed literal denied: no topic left
    authorizer.add_acls(literal("t1"), ace(Op.WRITE, DENY))
    assert not by_type(authorizer)
    # an allowed prefix not covered by a deny prefix
    authorizer.add_acls(prefixed("abc"), ace(Op.WRITE))
    assert by_type(authorizer)
    authorizer.add_acls(prefixed("ab"), ace(Op.WRITE, DENY))
    assert not by_type(authorizer)
    # a literal * deny denies all
    authorizer.add_acls(literal("zzz"), ace(Op.WRITE))
    assert by_type(authorizer)
    authorizer.add_acls(literal("*"), ace(Op.WRITE, DENY, "User:*"))
    assert not by_type(authorizer)


def test_authorize_by_resource_type_wildcards_all_and_overrides() -> None:
    authorizer = AclAuthorizer(super_users="User:admin")
    authorizer.add_acls(literal("t"), ace(Op.ALL, principal="User:*", host=HOST))
    assert by_type(authorizer, Op.IDEMPOTENT_WRITE, RT.TOPIC, BOB)
    assert by_type(authorizer, Op.READ, RT.GROUP, ADMIN)  # super user
    everyone = AclAuthorizer(allow_everyone_if_no_acl_found=True)
    assert by_type(everyone)
    everyone.add_acls(literal("*"), ace(Op.WRITE, DENY))
    assert not by_type(everyone)
    with pytest.raises(ValueError):
        authorizer.authorize_by_resource_type(ALICE, HOST, Op.ANY, RT.TOPIC)
    with pytest.raises(ValueError):
        authorizer.authorize_by_resource_type(ALICE, HOST, Op.READ, RT.ANY)


# -- create, delete, list ----------------------------------------------------------------------------


async def test_create_acls_writes_the_store_notifies_and_reports_per_binding() -> None:
    store = InMemoryAclStore()
    authorizer = AclAuthorizer(store=store)
    bindings = [
        AclBinding(literal("t"), ace(Op.READ)),
        AclBinding(literal("t"), ace(Op.WRITE)),
        AclBinding(prefixed("p"), ace(Op.READ)),
        AclBinding(literal("a/b"), ace(Op.READ)),
        AclBinding(literal("t"), ace(Op.UNKNOWN)),
        AclBinding(literal("t"), AccessControlEntry("alice", "*", Op.READ, ALLOW)),
    ]
    results = await authorizer.create_acls(bindings)
    assert [r is None for r in results] == [True, True, True, False, False, False]
    assert results[3] is not None and results[3].code == ErrorCode.INVALID_REQUEST
    assert results[3].message == "Failed to create ACL"
    assert results[4] is not None and results[4].code == ErrorCode.INVALID_REQUEST
    assert results[5] is not None and results[5].code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert store.nodes[literal("t")].acls == {ace(Op.READ), ace(Op.WRITE)}
    assert set(store.notifications) == {literal("t"), prefixed("p")}
    assert allowed(authorizer, Op.WRITE, "t") and allowed(authorizer, Op.READ, "pq")
    # Creating what exists changes nothing and notifies no one.
    store.notifications.clear()
    assert await authorizer.create_acls([AclBinding(literal("t"), ace(Op.READ))]) == [None]
    assert store.notifications == []


async def test_a_conflicting_write_is_read_again_and_retried() -> None:
    store = InMemoryAclStore()
    authorizer = AclAuthorizer(store=store)
    await authorizer.create_acls([AclBinding(literal("t"), ace(Op.READ))])
    # Another broker adds an ACL behind this one's cache.
    store.put(literal("t"), frozenset({ace(Op.READ), ace(Op.WRITE, principal="User:bob")}))
    await authorizer.create_acls([AclBinding(literal("t"), ace(Op.DELETE))])
    assert store.nodes[literal("t")].acls == {
        ace(Op.READ),
        ace(Op.WRITE, principal="User:bob"),
        ace(Op.DELETE),
    }
    assert authorizer.cached(literal("t")) == store.nodes[literal("t")].acls


async def test_delete_acls_reports_each_filters_bindings_once() -> None:
    store = InMemoryAclStore()
    authorizer = AclAuthorizer(store=store)
    authorizer.add_acls(literal("t"), ace(Op.READ), ace(Op.WRITE), ace(Op.READ, principal="User:bob"))
    authorizer.add_acls(prefixed("t"), ace(Op.READ))
    authorizer.add_acls(literal("*"), ace(Op.DESCRIBE))
    alice_on_t = AclBindingFilter(
        ResourcePatternFilter(RT.TOPIC, "t", PT.LITERAL),
        AccessControlEntryFilter("User:alice", None, Op.ANY, Perm.ANY),
    )
    every_read = AclBindingFilter(
        ResourcePatternFilter(RT.ANY, None, PT.ANY), AccessControlEntryFilter(None, None, Op.READ, Perm.ANY)
    )
    nothing = AclBindingFilter(ResourcePatternFilter(RT.GROUP, "g", PT.LITERAL))
    results = await authorizer.delete_acls([alice_on_t, every_read, nothing])
    first = {str(b.entry) for b, e in results[0]}
    assert first == {str(ace(Op.READ)), str(ace(Op.WRITE))}
    second = {(b.pattern, b.entry) for b, e in results[1]}
    # alice's literal READ went to the first filter; bob's and the prefixed one to this one.
    assert second == {(literal("t"), ace(Op.READ, principal="User:bob")), (prefixed("t"), ace(Op.READ))}
    assert results[2] == []
    assert all(e is None for r in results for _, e in r)
    assert authorizer.acls() == [AclBinding(literal("*"), ace(Op.DESCRIBE))]
    assert literal("t") not in store.nodes and prefixed("t") not in store.nodes


async def test_delete_with_a_match_filter_removes_every_pattern_applying_to_the_name() -> None:
    authorizer = AclAuthorizer()
    authorizer.add_acls(literal("payments"), ace(Op.READ))
    authorizer.add_acls(literal("*"), ace(Op.READ))
    authorizer.add_acls(prefixed("pay"), ace(Op.READ))
    authorizer.add_acls(prefixed("x"), ace(Op.READ))
    authorizer.add_acls(literal("pay"), ace(Op.READ))
    match = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "payments", PT.MATCH))
    [removed] = await authorizer.delete_acls([match])
    assert {b.pattern for b, _ in removed} == {literal("payments"), literal("*"), prefixed("pay")}
    assert {b.pattern for b in authorizer.acls()} == {prefixed("x"), literal("pay")}


def test_listing_filters_and_orders_as_kafka() -> None:
    authorizer = AclAuthorizer()
    authorizer.add_acls(literal("a"), ace(Op.READ))
    authorizer.add_acls(literal("b"), ace(Op.READ))
    authorizer.add_acls(prefixed("a"), ace(Op.WRITE))
    authorizer.add_acls(literal("g", RT.GROUP), ace(Op.READ))
    names = [
        (b.pattern.resource_type, b.pattern.pattern_type, b.pattern.name)
        for b in authorizer.acls(ANY_BINDING)
    ]
    # resource type, then pattern type, then name descending (Kafka's ResourceOrdering)
    assert names == [
        (RT.TOPIC, PT.LITERAL, "b"),
        (RT.TOPIC, PT.LITERAL, "a"),
        (RT.TOPIC, PT.PREFIXED, "a"),
        (RT.GROUP, PT.LITERAL, "g"),
    ]
    only_prefixed = AclBindingFilter(ResourcePatternFilter(RT.ANY, None, PT.PREFIXED))
    assert [b.pattern for b in authorizer.acls(only_prefixed)] == [prefixed("a")]
    match_ab = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "ab", PT.MATCH))
    assert {b.pattern for b in authorizer.acls(match_ab)} == {prefixed("a")}
    any_a = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "a", PT.ANY))
    assert {b.pattern for b in authorizer.acls(any_a)} == {literal("a"), prefixed("a")}


async def test_load_fills_the_cache_from_the_store() -> None:
    store = InMemoryAclStore()
    store.put(literal("t"), frozenset({ace(Op.READ)}))
    authorizer = AclAuthorizer(store=store)
    assert not allowed(authorizer, Op.READ, "t")
    await authorizer.load()
    assert allowed(authorizer, Op.READ, "t")
    store.put(literal("t"), frozenset())
    await authorizer.process_acl_change(literal("t"))
    assert not allowed(authorizer, Op.READ, "t")


# -- logging, names, selection -----------------------------------------------------------------------


def test_denials_are_logged_as_kafkas_authorizer_logger(caplog: pytest.LogCaptureFixture) -> None:
    authorizer = AclAuthorizer()
    with caplog.at_level(logging.INFO, logger="kafka.authorizer.logger"):
        authorizer.authorize(ALICE, HOST, [Action(Op.WRITE, RT.TOPIC, "orders")])
        authorizer.authorize(ALICE, HOST, [Action(Op.DESCRIBE, RT.TOPIC, "hidden", log_if_denied=False)])
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka.authorizer.logger"]
    assert lines == [
        "Principal = User:alice is Denied Operation = Write from host = 192.168.0.1 on resource = "
        "Topic:LITERAL:orders"
    ]


def test_names_are_kafkas() -> None:
    assert resource_type_name(RT.TRANSACTIONAL_ID) == "TransactionalId"
    assert parse_resource_type("TransactionalId") == RT.TRANSACTIONAL_ID
    assert parse_resource_type("TRANSACTIONAL_ID") == RT.TRANSACTIONAL_ID
    assert parse_operation("IdempotentWrite") == Op.IDEMPOTENT_WRITE
    assert parse_operation("idempotent_write") == Op.IDEMPOTENT_WRITE
    assert parse_operation("nonsense") == Op.UNKNOWN


@pytest.mark.parametrize(
    "name",
    [
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
        "server_common.acl_authorizer.AclAuthorizer",
    ],
)
def test_authorizer_class_names_select_the_acl_authorizer(name: str) -> None:
    config = {
        "authorizer.class.name": name,
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": True,
    }
    authorizer = authorizer_from_config(config)
    assert isinstance(authorizer, AclAuthorizer)
    assert authorizer.super_users == {ADMIN} and authorizer.allow_everyone_if_no_acl_found


def test_no_class_name_means_no_authorizer_and_an_unknown_one_is_refused() -> None:
    base = {"super.users": None, "allow.everyone.if.no.acl.found": False}
    assert authorizer_from_config({**base, "authorizer.class.name": ""}) is None
    with pytest.raises(ValueError, match=r"org\.apache\.kafka\.metadata\.authorizer\.StandardAuthorizer"):
        authorizer_from_config(
            {**base, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
        )


def test_authorization_asks_the_authorizer_about_the_requests_principal_and_address() -> None:
    authorizer = AclAuthorizer()
    authorizer.add_acls(literal("t"), ace(Op.READ, host="10.1.1.1"))
    authorizer.add_acls(literal("u"), ace(Op.WRITE, host="10.1.1.1"))
    authorization = Authorization(authorizer)
    request: Any = SimpleNamespace(principal=ALICE, client_ip="10.1.1.1")
    elsewhere: Any = SimpleNamespace(principal=ALICE, client_ip="10.1.1.2")
    assert authorization.authorize(request, Op.READ, RT.TOPIC, "t")
    assert not authorization.authorize(elsewhere, Op.READ, RT.TOPIC, "t")
    assert authorization.filter_authorized(request, Op.DESCRIBE, RT.TOPIC, ["t", "u", "v"]) == {"t", "u"}
    # READ (bit 3) and DESCRIBE (bit 8, implied) on t
    assert authorization.authorized_operations(request, RT.TOPIC, "t") == (1 << 3) | (1 << 8)


def test_hosts_are_compared_as_kafka_writes_client_addresses() -> None:
    """Java's InetAddress.getHostAddress: IPv6 uncompressed, IPv4-mapped addresses as IPv4."""
    authorizer = AclAuthorizer()
    authorizer.add_acls(literal("t"), ace(Op.READ, host="0:0:0:0:0:0:0:1"), ace(Op.WRITE, host="10.1.2.3"))
    assert allowed(authorizer, Op.READ, "t", host="::1")
    assert allowed(authorizer, Op.WRITE, "t", host="::ffff:10.1.2.3")
    assert not allowed(authorizer, Op.READ, "t", host="::2")
    assert authorizer.authorize_by_resource_type(ALICE, "::1", Op.READ, RT.TOPIC)
