"""ClientQuotaCache: this broker's copy of the client quotas in ZooKeeper, and the quota that applies
to a (user, client id) — Kafka's ClientQuotaManager with its DefaultQuotaCallback.

Quotas are set on entities (zk/client_quotas.py): a user, a client id, or both, each named or the
default. For a request of principal ``user`` and client id ``client_id`` the most specific entity with
a quota *of the type asked* applies, in Kafka's order:

1. ``/config/users/<user>/clients/<client-id>``
2. ``/config/users/<user>/clients/<default>``
3. ``/config/users/<user>``
4. ``/config/users/<default>/clients/<client-id>``
5. ``/config/users/<default>/clients/<default>``
6. ``/config/users/<default>``
7. ``/config/clients/<client-id>``
8. ``/config/clients/<default>``

Every quota type (``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate``) is looked up on its own, as Kafka's one quota manager per type does.

Like Kafka, the lookup goes through the *metric tags* (``quotaMetricTags`` then ``quotaLimit``): the
level found decides which clients share one quota — the tags ``(user, "")`` of a user-level quota make
all of a user's client ids one sensor, ``("", client_id)`` all users of a client id — and
``resolve`` returns both. While only one kind of entity has ever had quotas on this broker
(client ids only, users only, or user/client pairs only; Kafka's ``quotaTypesEnabled`` bits, which
never go back), the tags come from that kind alone, as Kafka's fast path.

Hot path: ``quota``/``resolve`` are one dict lookup once a (user, client id) has been resolved; the
memo is dropped on every change (and when it outgrows ``MEMO_LIMIT`` entries).

Departure: Kafka turns a quota kind on for any change of a users/clients entity, even one that only
stores SCRAM credentials; here only entities that have (or had) a quota config do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import NamedTuple

from zk.client_quotas import (
    CLIENT_ENTITY,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    DEFAULT,
    LONG_QUOTAS,
    PRODUCER_BYTE_RATE,
    QUOTA_CONFIGS,
    QUOTA_TYPES,
    REQUEST_PERCENTAGE,
    ClientQuotaConfigs,
    QuotaEntity,
    entity_from_change,
)
from zk.user_configs import USER_ENTITY, sanitize

log = logging.getLogger(__name__)

__all__ = [
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "PRODUCER_BYTE_RATE",
    "QUOTA_TYPES",
    "REQUEST_PERCENTAGE",
    "ClientQuotaCache",
    "QuotaEntity",
    "Resolved",
    "parse_quota_value",
]

# Kafka's QuotaTypes bits.
NO_QUOTAS, CLIENT_ID_QUOTAS, USER_QUOTAS, USER_CLIENT_ID_QUOTAS = 0, 1, 2, 4
MEMO_LIMIT = 100_000

QuotaListener = Callable[[QuotaEntity | None], None]


class Resolved(NamedTuple):
    """What applies to a (user, client id) for one quota type: the metric tags (plain names; "" where
    the quota is shared across that part — Kafka's ``user`` and ``client-id`` tags, which Kafka's JMX
    names carry sanitized) and the limit (None: unlimited)."""

    user_tag: str
    client_id_tag: str
    limit: float | None


def parse_quota_value(key: str, value: str) -> float:
    """A quota config's string as Kafka's QuotaConfigHandler reads it: ``toLong`` for the byte rates,
    ``toDouble`` for the others. ValueError if it is not one."""
    if key in LONG_QUOTAS:
        return float(int(value.strip()))
    return float(value)


def _kind(entity: QuotaEntity) -> int:
    if entity.user is not None:
        return USER_CLIENT_ID_QUOTAS if entity.client_id is not None else USER_QUOTAS
    return CLIENT_ID_QUOTAS


class ClientQuotaCache:
    def __init__(self) -> None:
        # Per quota type, as Kafka's one DefaultQuotaCallback per quota manager: entity -> bound.
        self._quotas: dict[str, dict[QuotaEntity, float]] = {t: {} for t in QUOTA_TYPES}
        self._enabled: dict[str, int] = dict.fromkeys(QUOTA_TYPES, NO_QUOTAS)
        self._memo: dict[tuple[str, str, str], Resolved] = {}
        # Bumped by every change: who caches resolutions of its own can compare.
        self.version = 0
        # Called after each change with the entity changed, or None when every entity may have changed
        # (load). Kafka's updateQuotaMetricConfigs: a change of an entity with a default part can
        # change the quota of many clients.
        self.on_change: list[QuotaListener] = []

    # -- lookups --------------------------------------------------------------------------------

    def quota(self, user: str, client_id: str, quota_type: str) -> float | None:
        """The bound of ``quota_type`` for principal ``user`` (its name: ``ANONYMOUS`` without
        authentication) and ``client_id``; None when no entity sets one (unlimited)."""
        return self.resolve(user, client_id, quota_type).limit

    def resolve(self, user: str, client_id: str, quota_type: str) -> Resolved:
        key = (quota_type, user, client_id)
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) >= MEMO_LIMIT:
                self._memo.clear()
            found = self._memo[key] = self._resolve(user, client_id, quota_type)
        return found

    def quotas_enabled(self, quota_type: str) -> bool:
        """Kafka's ``quotasEnabled``: whether any entity has had a quota on this broker (of any type —
        Kafka's handler updates every type on each change). False: no client can be throttled."""
        return self._enabled[quota_type] != NO_QUOTAS

    def entity_quotas(self, entity: QuotaEntity) -> dict[str, float]:
        """The quotas set on exactly this entity."""
        return {t: q[entity] for t, q in self._quotas.items() if entity in q}

    def entities(self) -> dict[QuotaEntity, dict[str, float]]:
        """Every entity with a quota, and its quotas."""
        found: dict[QuotaEntity, dict[str, float]] = {}
        for quota_type, quotas in self._quotas.items():
            for entity, bound in quotas.items():
                found.setdefault(entity, {})[quota_type] = bound
        return found

    def _resolve(self, user: str, client_id: str, quota_type: str) -> Resolved:
        user_tag, client_tag = self._metric_tags(user, client_id, quota_type)
        return Resolved(user_tag, client_tag, self._limit(user_tag, client_tag, quota_type))

    def _metric_tags(self, user: str, client_id: str, quota_type: str) -> tuple[str, str]:
        """DefaultQuotaCallback.quotaMetricTags (with plain names)."""
        enabled = self._enabled[quota_type]
        if enabled in (NO_QUOTAS, CLIENT_ID_QUOTAS):
            return "", client_id
        if enabled == USER_QUOTAS:
            return user, ""
        if enabled == USER_CLIENT_ID_QUOTAS:
            return user, client_id
        quotas = self._quotas[quota_type]
        u, c = sanitize(user), sanitize(client_id)
        for entity, tags in (
            (QuotaEntity(u, c), (user, client_id)),
            (QuotaEntity(u, DEFAULT), (user, client_id)),
            (QuotaEntity(u, None), (user, "")),
            (QuotaEntity(DEFAULT, c), (user, client_id)),
            (QuotaEntity(DEFAULT, DEFAULT), (user, client_id)),
            (QuotaEntity(DEFAULT, None), (user, "")),
        ):
            if entity in quotas:
                return tags
        return "", client_id  # /config/clients/<client-id>, /config/clients/<default>

    def _limit(self, user_tag: str, client_tag: str, quota_type: str) -> float | None:
        """DefaultQuotaCallback.quotaLimit: the most specific quota for the tags' level."""
        quotas = self._quotas[quota_type]
        if user_tag and client_tag:
            u, c = sanitize(user_tag), sanitize(client_tag)
            candidates: tuple[QuotaEntity, ...] = (
                QuotaEntity(u, c),
                QuotaEntity(u, DEFAULT),
                QuotaEntity(DEFAULT, c),
                QuotaEntity(DEFAULT, DEFAULT),
            )
        elif user_tag:
            u = sanitize(user_tag)
            candidates = (QuotaEntity(u, None), QuotaEntity(DEFAULT, None))
        elif client_tag:
            candidates = (QuotaEntity(None, sanitize(client_tag)), QuotaEntity(None, DEFAULT))
        else:
            return None
        for entity in candidates:
            bound = quotas.get(entity)
            if bound is not None:
                return bound
        return None

    # -- changes --------------------------------------------------------------------------------

    def update(self, entity: QuotaEntity, config: Mapping[str, str]) -> None:
        """Makes ``config``'s quota entries the entity's quotas (a type absent is removed), as Kafka's
        QuotaConfigHandler.updateQuotaConfig; other keys (SCRAM credentials) are ignored, a value that
        does not parse is logged and left out."""
        self._apply(entity, config)
        self._changed(entity)

    def _apply(self, entity: QuotaEntity, config: Mapping[str, str]) -> bool:
        touched = False
        for quota_type in QUOTA_TYPES:
            quotas = self._quotas[quota_type]
            old = quotas.get(entity)
            new: float | None = None
            if quota_type in config:
                try:
                    new = parse_quota_value(quota_type, config[quota_type])
                except ValueError:
                    log.warning(
                        "ignoring the unreadable %s of %s in ZooKeeper: %r",
                        quota_type,
                        entity,
                        config[quota_type],
                    )
            touched = touched or old is not None or new is not None
            if new == old:
                continue
            if new is None:
                del quotas[entity]
                log.info("Removing %s quota for %s", quota_type, entity)
            else:
                quotas[entity] = new
                log.info("Changing %s quota for %s to %s", quota_type, entity, new)
        if touched:  # Kafka's quotaTypesEnabled |= ..., on every quota manager
            for quota_type in QUOTA_TYPES:
                self._enabled[quota_type] |= _kind(entity)
        return touched

    def _changed(self, entity: QuotaEntity | None) -> None:
        self._memo.clear()
        self.version += 1
        for listener in list(self.on_change):
            try:
                listener(entity)
            except Exception:
                log.exception("a client quota listener failed on the change of %s", entity or "every entity")

    def replace_all(self, configs: Mapping[QuotaEntity, Mapping[str, str]]) -> None:
        """Makes ``configs`` the whole set of quotas (the entities absent have none)."""
        for entity in {e for quotas in self._quotas.values() for e in quotas} - set(configs):
            self._apply(entity, {})
        for entity, config in configs.items():
            self._apply(entity, config)
        self._changed(None)

    async def load(self, configs: ClientQuotaConfigs) -> None:
        """Every quota in ZooKeeper (at startup, before the change notifications are followed)."""
        self.replace_all(await configs.all_quotas())
        count = sum(len(q) for q in self._quotas.values())
        log.info("loaded %d client quota(s) from ZooKeeper", count)

    async def reload(self, configs: ClientQuotaConfigs, entity_type: str, name: str) -> None:
        """Applies a change notification's entity (``clients/<c>``, ``users/<u>``,
        ``users/<u>/clients/<c>``): its node read again. A path that names no quota entity is logged."""
        try:
            entity = entity_from_change(entity_type, name)
        except ValueError as e:
            log.warning("ignoring a config change: %s", e)
            return
        config = await configs.entity_config(entity)
        if not any(k in QUOTA_CONFIGS for k in config) and not self.entity_quotas(entity):
            return  # a SCRAM credential change, or nothing: no quota moved
        log.info("client quota config change for %s", entity)
        self.update(entity, config)


def is_quota_entity_type(entity_type: str) -> bool:
    """The change notifications' entity types that can carry client quotas."""
    return entity_type in (CLIENT_ENTITY, USER_ENTITY)
