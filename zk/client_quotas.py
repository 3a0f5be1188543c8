"""Client quota configs in ZooKeeper, in Kafka's layout (ZkData.ConfigEntityZNode, AdminZkClient).

A quota entity is a user, a client id, or a user with a client id, each named or the default
(``<default>``, ZooKeeperInternals.DEFAULT_STRING). Its configs live at

- ``/config/clients/<client-id>`` and ``/config/clients/<default>``;
- ``/config/users/<user>`` and ``/config/users/<default>`` (the same node as a user's SCRAM
  credentials, zk/user_configs.py: a change of one keeps the other);
- ``/config/users/<user>/clients/<client-id>``, with ``<default>`` for either part;

as ``{"version":1,"config":{"producer_byte_rate":"1048576","request_percentage":"200.0"}}``, every
name sanitized by Kafka's ``Sanitizer`` (URL-encoded; ``*`` as ``%2A``). A change is announced by a
sequential ``/config/changes/config_change_<n>`` with ``{"version":2,"entity_path":"clients/<c>"}``,
``"users/<u>"`` or ``"users/<u>/clients/<c>"``, which every broker follows (its ConfigChangeListener
refreshes its ClientQuotaCache). An entity left with no config and no child is deleted, and with it
the ``clients`` node and the user node a user/client entity leaves empty (Kafka's
``tryCleanQuotaNodes``). Writes are conditional on the version read and retried, as UserConfigs'.

The values are strings as Kafka's ConfigCommand/ZkAdminManager write them: the byte rates
(``producer_byte_rate``, ``consumer_byte_rate``, Kafka type LONG) as integers, ``request_percentage``
and ``controller_mutation_rate`` (DOUBLE) as Java prints a double (``200.0``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from zk import znodes
from zk.client import ZkClient
from zk.user_configs import USER_ENTITY, desanitize, sanitize

log = logging.getLogger(__name__)

CLIENT_ENTITY = "clients"
CONFIG_CLIENTS = f"{znodes.CONFIG}/{CLIENT_ENTITY}"
DEFAULT = "<default>"  # ZooKeeperInternals.DEFAULT_STRING: the node of the default user / client id
MAX_ATTEMPTS = 20

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# QuotaConfig.USER_AND_CLIENT_QUOTA_NAMES, with their ConfigDef types (LONG or DOUBLE).
QUOTA_TYPES = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE)
QUOTA_CONFIGS = frozenset(QUOTA_TYPES)
LONG_QUOTAS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE})


@dataclass(frozen=True)
class QuotaEntity:
    """A quota entity in ZooKeeper's form: the *sanitized* user and client id (``Sanitizer.sanitize``;
    ``DEFAULT`` for the default), None for a part the entity does not have. Because the names are
    sanitized, ``DEFAULT`` never collides with a user or client literally named ``<default>``
    (sanitized ``%3Cdefault%3E``)."""

    user: str | None = None
    client_id: str | None = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("a quota entity has a user, a client id or both")

    @classmethod
    def of(cls, user: str | None = None, client_id: str | None = None) -> QuotaEntity:
        """From plain names ("" is the default, as on kafka-configs.sh's command line; None: absent)."""
        return cls(
            None if user is None else (DEFAULT if user == "" else sanitize(user)),
            None if client_id is None else (DEFAULT if client_id == "" else sanitize(client_id)),
        )

    @property
    def user_name(self) -> str | None:
        """The user's name, None for the default user or none (see ``user``)."""
        return None if self.user in (None, DEFAULT) else desanitize(self.user)

    @property
    def client_name(self) -> str | None:
        return None if self.client_id in (None, DEFAULT) else desanitize(self.client_id)

    @property
    def has_default(self) -> bool:
        return DEFAULT in (self.user, self.client_id)

    @property
    def entity_type(self) -> str:
        """The root entity type: ``users`` when there is a user part, else ``clients``."""
        return USER_ENTITY if self.user is not None else CLIENT_ENTITY

    @property
    def entity_name(self) -> str:
        """The name under the root type, as change notifications carry it (``alice/clients/c1``)."""
        if self.user is None:
            assert self.client_id is not None
            return self.client_id
        if self.client_id is None:
            return self.user
        return f"{self.user}/{CLIENT_ENTITY}/{self.client_id}"

    @property
    def path(self) -> str:
        return f"{znodes.CONFIG}/{self.entity_type}/{self.entity_name}"

    def __str__(self) -> str:
        """As Kafka's KafkaQuotaEntity prints itself ("user alice client-id c1", "default user")."""
        parts = []
        if self.user is not None:
            parts.append("default user" if self.user == DEFAULT else f"user {self.user}")
        if self.client_id is not None:
            parts.append("default client-id" if self.client_id == DEFAULT else f"client-id {self.client_id}")
        return " ".join(parts)


def entity_from_change(entity_type: str, name: str) -> QuotaEntity:
    """The entity a change notification names (``clients/<c>``, ``users/<u>``, ``users/<u>/clients/<c>``);
    ValueError for any other path (Kafka's "Invalid quota entity path")."""
    parts = name.split("/")
    if entity_type == CLIENT_ENTITY and len(parts) == 1 and parts[0]:
        return QuotaEntity(None, parts[0])
    if entity_type == USER_ENTITY and parts[0]:
        if len(parts) == 1:
            return QuotaEntity(parts[0], None)
        if len(parts) == 3 and parts[1] == CLIENT_ENTITY and parts[2]:
            return QuotaEntity(parts[0], parts[2])
    raise ValueError(f"Invalid quota entity path: {entity_type}/{name}")


def quota_configs(config: dict[str, str]) -> dict[str, str]:
    """The quota entries of an entity's configs (a user's node also holds SCRAM credentials)."""
    return {k: v for k, v in config.items() if k in QUOTA_CONFIGS}


class ClientQuotaConfigs:
    """Reads and writes the quota entities' nodes over a :class:`ZkClient`."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    async def read(self, entity: QuotaEntity) -> tuple[dict[str, str], int | None]:
        """The entity's configs (all of them: a user's include SCRAM credentials) and the node's version
        (None: no node)."""
        found = await self.zk.get(entity.path)
        if found is None:
            return {}, None
        return znodes.decode_config(found[0]), found[1].version

    async def entity_config(self, entity: QuotaEntity) -> dict[str, str]:
        return (await self.read(entity))[0]

    async def _children(self, path: str) -> list[str]:
        return sorted(await self.zk.get_children(path) or [])

    async def all_entity_configs(self) -> dict[QuotaEntity, dict[str, str]]:
        """Every client, user and user/client entity with a node, and its configs (all of them; the
        user nodes that exist only as parents of user/client entities have none). Kafka's
        fetchAllEntityConfigs and fetchAllChildEntityConfigs."""
        found: dict[QuotaEntity, dict[str, str]] = {}
        for client in await self._children(CONFIG_CLIENTS):
            found[QuotaEntity(None, client)] = await self.entity_config(QuotaEntity(None, client))
        for user in await self._children(znodes.CONFIG_USERS):
            found[QuotaEntity(user, None)] = await self.entity_config(QuotaEntity(user, None))
            for client in await self._children(f"{znodes.CONFIG_USERS}/{user}/{CLIENT_ENTITY}"):
                found[QuotaEntity(user, client)] = await self.entity_config(QuotaEntity(user, client))
        return found

    async def all_quotas(self) -> dict[QuotaEntity, dict[str, str]]:
        """The entities with at least one quota, and their quota configs."""
        return {
            entity: quotas
            for entity, config in (await self.all_entity_configs()).items()
            if (quotas := quota_configs(config))
        }

    async def alter(
        self, entity: QuotaEntity, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        """Reads the entity's configs, writes ``change(configs)`` if it differs (conditionally on the
        version read, retried when another writer got there first), then announces the change under
        ``/config/changes``. An exception from ``change`` aborts with nothing written. Returns the
        configs written."""
        for _ in range(MAX_ATTEMPTS):
            current, version = await self.read(entity)
            new = change(dict(current))
            if new == current and version is not None:
                return new
            try:
                if version is None:
                    if not new:
                        return new
                    await self.zk.create(entity.path, znodes.encode_config(new), makepath=True)
                elif not new and not await self.zk.get_children(entity.path):
                    await self.zk.delete(entity.path, version)
                    await self._clean_parents(entity)
                else:
                    await self.zk.set(entity.path, znodes.encode_config(new), version)
            except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
                continue  # changed meanwhile: read again
            await self.notify(entity)
            log.info("changed the configs of %s/%s (now: %s)", entity.entity_type, entity.entity_name, new)
            return new
        raise RuntimeError(f"The configs of {entity} kept changing; gave up after {MAX_ATTEMPTS} attempts")

    async def _clean_parents(self, entity: QuotaEntity) -> None:
        """After a user/client entity's node went: its ``clients`` node if now empty, and then the user's
        node if it has no configs and no other child (Kafka's tryCleanQuotaNodes)."""
        if entity.user is None or entity.client_id is None:
            return
        user = QuotaEntity(entity.user, None)
        try:
            await self.zk.delete(f"{user.path}/{CLIENT_ENTITY}")
            config, version = await self.read(user)
            if not config and version is not None:
                await self.zk.delete(user.path, version)
        except (BadVersionError, NoNodeError, NotEmptyError):
            pass  # another entity of the user, or a config set meanwhile: the node stays

    async def notify(self, entity: QuotaEntity) -> None:
        """Creates ``/config/changes/config_change_<n>`` naming the entity."""
        await self.zk.create(
            f"{znodes.CONFIG_CHANGES}/{znodes.CONFIG_CHANGE_PREFIX}",
            znodes.encode_config_change(entity.entity_type, entity.entity_name),
            sequence=True,
            makepath=True,
        )


def java_double(value: float) -> str:
    """Java's ``Double.toString``, as Kafka writes a DOUBLE quota into ZooKeeper and ConfigCommand prints
    a quota: ``200.0``, ``0.5``, ``1.0E7`` (scientific from 10^7 and below 10^-3), ``NaN``."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    magnitude = abs(value)
    if magnitude == 0.0 or 1e-3 <= magnitude < 1e7:
        return sign + repr(magnitude)  # Python's repr is plain and shortest in this range, as Java's
    digits_tuple, exponent = Decimal(repr(magnitude)).as_tuple()[1:]
    assert isinstance(exponent, int)
    digits = "".join(map(str, digits_tuple))
    power = len(digits) + exponent - 1
    digits = digits.rstrip("0") or "0"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{power}"
