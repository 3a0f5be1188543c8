"""ClientQuotaCache: Kafka's eight-level precedence of client quotas (ClientQuotaManager's
DefaultQuotaCallback), per quota type, with the metric tags that decide which clients share a quota,
and the change notifications' entity paths."""

from __future__ import annotations

from typing import Any

import pytest

from broker.client_quota_cache import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaCache,
    QuotaEntity,
    Resolved,
    parse_quota_value,
)
from zk.client_quotas import entity_from_change

P = PRODUCER_BYTE_RATE

# The eight levels, most specific first, as (user, client id) of QuotaEntity.of ("" = <default>).
LEVELS = [
    ("alice", "app"),  # /config/users/alice/clients/app
    ("alice", ""),  # /config/users/alice/clients/<default>
    ("alice", None),  # /config/users/alice
    ("", "app"),  # /config/users/<default>/clients/app
    ("", ""),  # /config/users/<default>/clients/<default>
    ("", None),  # /config/users/<default>
    (None, "app"),  # /config/clients/app
    (None, ""),  # /config/clients/<default>
]


def cache_with(levels: list[tuple[str | None, str | None]]) -> ClientQuotaCache:
    cache = ClientQuotaCache()
    for user, client in levels:
        cache.update(QuotaEntity.of(user, client), {P: str(1000 + LEVELS.index((user, client)))})
    return cache


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_level_set_applies(level: int) -> None:
    cache = cache_with(LEVELS[level:])  # this level and every less specific one
    assert cache.quota("alice", "app", P) == 1000 + level


def test_each_level_alone_applies_to_alice_app_and_not_to_others() -> None:
    for level, (user, client) in enumerate(LEVELS):
        cache = cache_with([(user, client)])
        assert cache.quota("alice", "app", P) == 1000 + level, (user, client)
        # bob/other matches only the levels made of defaults
        expected = 1000 + level if user in ("", None) and client in ("", None) else None
        assert cache.quota("bob", "other", P) == expected, (user, client)


def test_metric_tags_say_who_shares_the_quota() -> None:
    cache = cache_with([("alice", None), (None, "")])
    # a user-level quota: every client id of alice shares one sensor
    assert cache.resolve("alice", "app", P) == Resolved("alice", "", 1002.0)
    assert cache.resolve("alice", "other", P) == Resolved("alice", "", 1002.0)
    # bob falls through to the client-id default: per client id
    assert cache.resolve("bob", "app", P) == Resolved("", "app", 1007.0)


def test_one_kind_of_entity_alone_gives_kafkas_fast_path_tags() -> None:
    users = cache_with([("alice", None)])
    assert users.resolve("bob", "app", P) == Resolved("bob", "", None)  # UserQuotaEnabled: (user, "")
    pairs = cache_with([("alice", "app")])
    assert pairs.resolve("bob", "x", P) == Resolved("bob", "x", None)
    assert ClientQuotaCache().resolve("bob", "x", P) == Resolved("", "x", None)  # NoQuotas


def test_quota_types_are_looked_up_independently() -> None:
    cache = ClientQuotaCache()
    cache.update(QuotaEntity.of("alice", "app"), {P: "100"})
    cache.update(QuotaEntity.of(None, ""), {CONSUMER_BYTE_RATE: "200", REQUEST_PERCENTAGE: "50.5"})
    assert cache.quota("alice", "app", P) == 100.0
    assert cache.quota("alice", "app", CONSUMER_BYTE_RATE) == 200.0  # the pair sets no consumer quota
    assert cache.quota("alice", "app", REQUEST_PERCENTAGE) == 50.5


def test_an_empty_client_id_escapes_user_client_quotas_as_in_kafka() -> None:
    cache = cache_with([("", "")])
    assert cache.quota("alice", "", P) is None  # quotaLimit with an empty client id: users only


def test_a_change_replaces_the_entitys_quotas_and_notifies() -> None:
    cache = ClientQuotaCache()
    seen: list[Any] = []
    cache.on_change.append(seen.append)
    entity = QuotaEntity.of("alice")
    cache.update(entity, {P: "100", CONSUMER_BYTE_RATE: "200", "SCRAM-SHA-256": "salt=..."})
    assert cache.quota("alice", "x", P) == 100.0
    version = cache.version
    cache.update(entity, {CONSUMER_BYTE_RATE: "300"})  # producer_byte_rate removed
    assert cache.quota("alice", "x", P) is None
    assert cache.quota("alice", "x", CONSUMER_BYTE_RATE) == 300.0
    assert cache.version > version
    assert seen == [entity, entity]
    assert cache.entity_quotas(entity) == {CONSUMER_BYTE_RATE: 300.0}


def test_quotas_enabled_only_once_a_quota_was_set_and_stays_so() -> None:
    cache = ClientQuotaCache()
    cache.update(QuotaEntity.of("alice"), {"SCRAM-SHA-256": "salt=..."})  # credentials only
    assert not cache.quotas_enabled(P)
    cache.update(QuotaEntity.of(None, "c"), {CONSUMER_BYTE_RATE: "1"})
    assert cache.quotas_enabled(P) and cache.quotas_enabled(CONSUMER_BYTE_RATE)  # every type, as Kafka
    cache.update(QuotaEntity.of(None, "c"), {})
    assert cache.quotas_enabled(P)  # sticky, as Kafka's quotaTypesEnabled


def test_replace_all_drops_entities_no_longer_there() -> None:
    cache = cache_with([("alice", None), (None, "")])
    seen: list[Any] = []
    cache.on_change.append(seen.append)
    cache.replace_all({QuotaEntity.of(None, ""): {P: "5"}})
    assert cache.entities() == {QuotaEntity.of(None, ""): {P: 5.0}}
    assert seen == [None]


def test_unreadable_values_are_left_out() -> None:
    cache = ClientQuotaCache()
    cache.update(QuotaEntity.of(None, "c"), {P: "1.5", CONSUMER_BYTE_RATE: "x", REQUEST_PERCENTAGE: "12"})
    assert cache.entity_quotas(QuotaEntity.of(None, "c")) == {REQUEST_PERCENTAGE: 12.0}


def test_values_parse_as_kafka() -> None:
    assert parse_quota_value(P, "1048576") == 1048576.0
    assert parse_quota_value(REQUEST_PERCENTAGE, "200.0") == 200.0
    with pytest.raises(ValueError):
        parse_quota_value(P, "1.0")  # toLong


def test_names_are_sanitized_so_a_user_named_default_is_not_the_default() -> None:
    assert QuotaEntity.of("<default>").user == "%3Cdefault%3E"
    assert QuotaEntity.of("").user == "<default>"
    assert QuotaEntity.of("a b*").path == "/config/users/a%20b%2A"
    cache = ClientQuotaCache()
    cache.update(QuotaEntity.of("<default>"), {P: "1"})
    assert cache.quota("<default>", "x", P) == 1.0
    assert cache.quota("bob", "x", P) is None


@pytest.mark.parametrize(
    ("entity_type", "name", "expected"),
    [
        ("clients", "app", QuotaEntity(None, "app")),
        ("clients", "<default>", QuotaEntity(None, "<default>")),
        ("users", "alice", QuotaEntity("alice", None)),
        ("users", "alice/clients/app", QuotaEntity("alice", "app")),
        ("users", "<default>/clients/<default>", QuotaEntity("<default>", "<default>")),
    ],
)
def test_change_notification_paths_name_entities(entity_type: str, name: str, expected: QuotaEntity) -> None:
    assert entity_from_change(entity_type, name) == expected
    assert (expected.entity_type, expected.entity_name) == (entity_type, name)


@pytest.mark.parametrize(
    ("entity_type", "name"), [("users", "a/b"), ("users", "a/topics/b"), ("clients", "a/b"), ("topics", "t")]
)
def test_other_paths_are_not_quota_entities(entity_type: str, name: str) -> None:
    with pytest.raises(ValueError, match="Invalid quota entity path"):
        entity_from_change(entity_type, name)


def test_entities_print_as_kafka() -> None:
    assert str(QuotaEntity.of("alice", "app")) == "user alice client-id app"
    assert str(QuotaEntity.of("", "")) == "default user default client-id"
