"""AclAuthorizer: Kafka's ZooKeeper-mode ACL authorizer (kafka.security.authorizer.AclAuthorizer, 3.9).

The ACLs live in an in-memory cache, ``resource pattern -> set of entries``, which every check reads
(synchronously, on the event loop); it is fed by an ``AclStore`` — ``zk.acls.ZkAclStore`` in a server,
whose watcher calls ``process_acl_change`` when another broker announces a change, or the
``InMemoryAclStore`` unit tests use (``add_acls`` puts ACLs in directly).

A check ``authorize(principal, host, actions)`` answers as Kafka's ``authorizeAction``:

- a super user (``super.users``) is allowed everything;
- the ACLs that apply to the resource are those of its LITERAL pattern, of the LITERAL ``*`` of its
  type and of every PREFIXED pattern its name starts with;
- if there are none, the answer is ``allow.everyone.if.no.acl.found``;
- else it is denied if a DENY entry matches (principal or ``User:*``, host or ``*``, the operation or
  ALL), else allowed if an ALLOW entry matches the operation or one implying it (DESCRIBE is implied by
  READ, WRITE, DELETE and ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS; ALL implies all).

Each decision is logged on ``kafka.authorizer.logger`` as Kafka's ``logAuditMessage`` does: a denial
the caller asked for explicitly at INFO, other results at DEBUG or TRACE.

``create_acls``/``delete_acls`` change the store (Kafka's ``updateResourceAcls``: a versioned write,
retried after a conflict) and then the cache, and write a change notification the other brokers'
watchers follow.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from protocol.errors import ErrorCode
from server_common.acls import (
    CLUSTER_NAME,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclPermissionType,
    Action,
    PatternType,
    ResourceType,
)
from server_common.principal import KafkaPrincipal

log = logging.getLogger(__name__)
authorizer_log = logging.getLogger("kafka.authorizer.logger")
TRACE = 5  # below DEBUG: Kafka's TRACE (the checks made only to filter or to compute operations)

WILDCARD_HOST = "*"
RESOURCE_SEPARATOR = ":"
UNKNOWN_VERSION = -2  # Kafka's ZkVersion.UnknownVersion: the resource has no node (no ACLs)


@functools.lru_cache(maxsize=4096)
def java_host_address(ip: str) -> str:
    """The client address as Kafka's authorizer sees it (Java's InetAddress.getHostAddress): IPv4
    dotted; IPv6 as eight groups without leading zeros and without ``::`` compression
    (``0:0:0:0:0:0:0:1``); an IPv4-mapped IPv6 address as its IPv4 address. ACL hosts are compared
    with this text, as in Kafka."""
    address, sep, zone = ip.partition("%")
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return ip
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        text = ":".join(format(int(group, 16), "x") for group in parsed.exploded.split(":"))
        return f"{text}{sep}{zone}"
    return str(parsed)


# authorizer.class.name values that select this authorizer: Kafka's ZooKeeper-mode ones, and ours.
KAFKA_ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
LEGACY_SIMPLE_ACL_AUTHORIZER = "kafka.security.auth.SimpleAclAuthorizer"
SAMSA_ACL_AUTHORIZER = "server_common.acl_authorizer.AclAuthorizer"
ACL_AUTHORIZER_CLASS_NAMES = (KAFKA_ACL_AUTHORIZER, LEGACY_SIMPLE_ACL_AUTHORIZER, SAMSA_ACL_AUTHORIZER)


# -- names (Kafka's SecurityUtils: PascalCase in ZooKeeper and the logs, any case accepted) ------------


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def resource_type_name(resource_type: ResourceType) -> str:
    """``Topic``, ``Group``, ``Cluster``, ``TransactionalId``, ``DelegationToken``, ``User``."""
    return _pascal(resource_type.name)


def operation_name(operation: AclOperation) -> str:
    """``Read``, ``Write``, ``IdempotentWrite``, ... (Kafka's SecurityUtils.operationName)."""
    return _pascal(operation.name)


def permission_type_name(permission: AclPermissionType) -> str:
    return _pascal(permission.name)


def log_audit(
    principal: KafkaPrincipal,
    host: str,
    action: Action,
    authorized: bool,
    pattern_type: PatternType = PatternType.LITERAL,
    detail: str = "",
) -> None:
    """Kafka's logAuditMessage on ``kafka.authorizer.logger``: explicit denials at INFO, grants at
    DEBUG, the rest at TRACE; ``detail`` is appended to the line."""
    if authorized:
        level = logging.DEBUG if action.log_if_allowed else TRACE
    else:
        level = logging.INFO if action.log_if_denied else TRACE
    if not authorizer_log.isEnabledFor(level):
        return
    authorizer_log.log(
        level,
        "Principal = %s is %s Operation = %s from host = %s on resource = %s%s%s%s%s%s",
        principal,
        "Allowed" if authorized else "Denied",
        operation_name(action.operation),
        host,
        resource_type_name(action.resource_type),
        RESOURCE_SEPARATOR,
        pattern_type.name,
        RESOURCE_SEPARATOR,
        action.name,
        detail,
    )


def _from_name(enum: Any, name: str) -> Any:
    """Kafka's valueFromMap: PascalCase or upper case (``TransactionalId``, ``TRANSACTIONALID``,
    ``TRANSACTIONAL_ID``); UNKNOWN when neither."""
    key = name.upper()
    for member in enum:
        if key in (member.name, member.name.replace("_", "")):
            return member
    return enum.UNKNOWN


def parse_resource_type(name: str) -> ResourceType:
    return _from_name(ResourceType, name)


def parse_operation(name: str) -> AclOperation:
    return _from_name(AclOperation, name)


def parse_permission_type(name: str) -> AclPermissionType:
    return _from_name(AclPermissionType, name)


def parse_pattern_type(name: str) -> PatternType:
    """Kafka's PatternType.fromString: the enum name in any case, else UNKNOWN."""
    try:
        return PatternType[name.upper()]
    except KeyError:
        return PatternType.UNKNOWN


# -- resource patterns, entries, bindings and their filters (org.apache.kafka.common.acl/resource) ---


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """A resource pattern an ACL is attached to: LITERAL (the name, or ``*`` for all) or PREFIXED."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )

    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (``principal``, e.g. ``User:alice`` or ``User:*``) from where (``host``, or ``*``) may or
    may not (``permission_type``) do what (``operation``)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def wire_fields(self) -> dict[str, Any]:
        """The four fields as CreateAcls, DescribeAcls and DeleteAcls name them on the wire."""
        return {
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation,
            "permission_type": self.permission_type,
        }

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name})"
        )

    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def describe(self) -> str:
        """Kafka's AclEntry.toString, as its logs and kafka-acls.sh's ``--list`` print an entry."""
        return (
            f"{self.principal} has {self.permission_type.name} permission for operations: "
            f"{self.operation.name} from hosts: {self.host}"
        )


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"

    def is_unknown(self) -> bool:
        return self.pattern.is_unknown() or self.entry.is_unknown()


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Matches resource patterns (Kafka's ResourcePatternFilter): ANY type, a None name (any), and
    pattern type ANY (any pattern with exactly this name) or MATCH (every pattern that would apply to a
    resource of this name: the literal name, ``*``, and the prefixes it starts with)."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and (
            self.pattern_type != pattern.pattern_type
        ):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        raise ValueError(f"Unsupported PatternType: {pattern.pattern_type.name}")

    def find_indefinite_field(self) -> str | None:
        if self.resource_type == ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type == ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type == PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type == PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def __str__(self) -> str:
        name = "<any>" if self.name is None else self.name
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Matches entries: None principal or host = any, operation and permission type ANY = any."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type

    def find_indefinite_field(self) -> str | None:
        if self.principal is None:
            return "Principal is NULL"
        if self.host is None:
            return "Host is NULL"
        if self.operation == AclOperation.ANY:
            return "Operation is ANY"
        if self.operation == AclOperation.UNKNOWN:
            return "Operation is UNKNOWN"
        if self.permission_type == AclPermissionType.ANY:
            return "Permission type is ANY"
        if self.permission_type == AclPermissionType.UNKNOWN:
            return "Permission type is UNKNOWN"
        return None

    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def __str__(self) -> str:
        principal = "<any>" if self.principal is None else self.principal
        host = "<any>" if self.host is None else self.host
        return (
            f"(principal={principal}, host={host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name})"
        )


ANY_ENTRY = AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern_filter: ResourcePatternFilter
    entry_filter: AccessControlEntryFilter = ANY_ENTRY

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)

    def find_indefinite_field(self) -> str | None:
        return self.pattern_filter.find_indefinite_field() or self.entry_filter.find_indefinite_field()

    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown() or self.entry_filter.is_unknown()

    def __str__(self) -> str:
        return f"(patternFilter={self.pattern_filter}, entryFilter={self.entry_filter})"


ANY_BINDING = AclBindingFilter(
    ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
    ANY_ENTRY,
)


def binding_filter(binding: AclBinding) -> AclBindingFilter:
    """The filter matching exactly this binding (Kafka's AclBinding.toFilter)."""
    p, e = binding.pattern, binding.entry
    return AclBindingFilter(
        ResourcePatternFilter(p.resource_type, p.name, p.pattern_type),
        AccessControlEntryFilter(e.principal, e.host, e.operation, e.permission_type),
    )


# -- errors ------------------------------------------------------------------------------------------


class AclApiError(Exception):
    """A Kafka ApiException for one binding or filter: its error code and message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- storage -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VersionedAcls:
    """A resource's entries and the version of the node they were read from (UNKNOWN_VERSION: none)."""

    acls: frozenset[AccessControlEntry]
    version: int

    @property
    def exists(self) -> bool:
        return self.version != UNKNOWN_VERSION


NO_ACLS = VersionedAcls(frozenset(), UNKNOWN_VERSION)


class AclStore(Protocol):
    """Where ACLs persist (Kafka's KafkaZkClient ACL methods); ``zk.acls.ZkAclStore`` keeps them in
    ZooKeeper in Kafka's layout."""

    async def load_all(self) -> dict[ResourcePattern, VersionedAcls]:
        """Every resource pattern with ACLs."""
        ...

    async def read(self, resource: ResourcePattern) -> VersionedAcls: ...

    async def create(
        self, resource: ResourcePattern, acls: frozenset[AccessControlEntry]
    ) -> tuple[bool, int]:
        """Creates the resource's node if absent: (created, version)."""
        ...

    async def conditional_set(
        self, resource: ResourcePattern, acls: frozenset[AccessControlEntry], version: int
    ) -> tuple[bool, int]:
        """Replaces the resource's ACLs if its node is at ``version``: (written, new version)."""
        ...

    async def conditional_delete(self, resource: ResourcePattern, version: int) -> bool:
        """Deletes the resource's node if at ``version`` (or already gone)."""
        ...

    async def notify_change(self, resource: ResourcePattern) -> None:
        """Tells the other brokers the resource's ACLs changed."""
        ...


class InMemoryAclStore:
    """An ``AclStore`` in memory (unit tests; a server without ZooKeeper has nothing to share)."""

    def __init__(self) -> None:
        self.nodes: dict[ResourcePattern, VersionedAcls] = {}
        self.notifications: list[ResourcePattern] = []

    async def load_all(self) -> dict[ResourcePattern, VersionedAcls]:
        return dict(self.nodes)

    async def read(self, resource: ResourcePattern) -> VersionedAcls:
        return self.nodes.get(resource, NO_ACLS)

    async def create(
        self, resource: ResourcePattern, acls: frozenset[AccessControlEntry]
    ) -> tuple[bool, int]:
        if resource in self.nodes:
            return False, UNKNOWN_VERSION
        self.nodes[resource] = VersionedAcls(acls, 0)
        return True, 0

    async def conditional_set(
        self, resource: ResourcePattern, acls: frozenset[AccessControlEntry], version: int
    ) -> tuple[bool, int]:
        current = self.nodes.get(resource)
        if current is None or current.version != version:
            return False, UNKNOWN_VERSION
        self.nodes[resource] = VersionedAcls(acls, version + 1)
        return True, version + 1

    async def conditional_delete(self, resource: ResourcePattern, version: int) -> bool:
        current = self.nodes.get(resource)
        if current is None:
            return True
        if version not in (-1, current.version):
            return False
        del self.nodes[resource]
        return True

    async def notify_change(self, resource: ResourcePattern) -> None:
        self.notifications.append(resource)

    def put(self, resource: ResourcePattern, acls: frozenset[AccessControlEntry]) -> VersionedAcls:
        current = self.nodes.get(resource)
        if not acls:
            self.nodes.pop(resource, None)
            return NO_ACLS
        versioned = VersionedAcls(acls, 0 if current is None else current.version + 1)
        self.nodes[resource] = versioned
        return versioned


# -- the authorizer ----------------------------------------------------------------------------------

# Kafka's allowAclExists: the ALLOW entries that grant an operation besides its own and ALL.
_IMPLIED_BY: dict[AclOperation, tuple[AclOperation, ...]] = {
    AclOperation.DESCRIBE: (
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    ),
    AclOperation.DESCRIBE_CONFIGS: (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
}

_MAX_UPDATE_RETRIES = 10
_RETRY_BACKOFF_MS = 100
_RETRY_BACKOFF_JITTER_MS = 50

_ResourceTypeKey = tuple[AccessControlEntry, ResourceType, PatternType]


def parse_super_users(value: str | None) -> frozenset[KafkaPrincipal]:
    """``super.users``: principals separated by ``;`` (Kafka's AclAuthorizer.configure)."""
    if not value or not value.strip():
        return frozenset()
    return frozenset(KafkaPrincipal.parse(s.strip()) for s in value.split(";") if s.strip())


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() == "true"


@dataclass
class _PrefixIndex:
    """One resource type's PREFIXED patterns: name -> entries, and the lengths of those names."""

    by_name: dict[str, frozenset[AccessControlEntry]] = field(default_factory=dict)
    lengths: list[int] = field(default_factory=list)

    def rebuild_lengths(self) -> None:
        self.lengths = sorted({len(n) for n in self.by_name})


class AclAuthorizer:
    """Kafka's AclAuthorizer: checks against the cached ACLs; changes through the store."""

    def __init__(
        self,
        *,
        super_users: Iterable[KafkaPrincipal] | str | None = None,
        allow_everyone_if_no_acl_found: bool = False,
        store: AclStore | None = None,
    ) -> None:
        if isinstance(super_users, str) or super_users is None:
            self.super_users = parse_super_users(super_users)
        else:
            self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.store: AclStore = store if store is not None else InMemoryAclStore()
        self._acl_cache: dict[ResourcePattern, VersionedAcls] = {}
        # LITERAL lookups are by (type, name); PREFIXED by type then the prefixes of the name.
        self._literal: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
        self._prefixed: dict[ResourceType, _PrefixIndex] = {}
        # Kafka's resourceCache (authorizeByResourceType): (entry, type, pattern type) -> names.
        self._resource_cache: dict[_ResourceTypeKey, set[str]] = {}
        self._lock = asyncio.Lock()
        self.max_update_retries = _MAX_UPDATE_RETRIES

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | Any, store: AclStore | None = None) -> AclAuthorizer:
        """From a server config's ``super.users`` and ``allow.everyone.if.no.acl.found``."""
        return cls(
            super_users=config["super.users"],
            allow_everyone_if_no_acl_found=_parse_bool(config["allow.everyone.if.no.acl.found"]),
            store=store,
        )

    # -- loading and the cache ----------------------------------------------------------------------

    async def load(self) -> None:
        """Fills the cache from the store (Kafka's loadCache, after the change listeners started)."""
        async with self._lock:
            for resource, versioned in (await self.store.load_all()).items():
                self.update_cache(resource, versioned)
        log.info("ACL authorizer loaded %d resource patterns with ACLs", len(self._acl_cache))

    async def process_acl_change(self, resource: ResourcePattern) -> None:
        """A change notification for ``resource``: read it again from the store."""
        async with self._lock:
            versioned = await self.store.read(resource)
            log.info(
                "Processing Acl change notification for %s, versionedAcls : %s, zkVersion : %d",
                resource,
                sorted(str(a) for a in versioned.acls),
                versioned.version,
            )
            self.update_cache(resource, versioned)

    def update_cache(self, resource: ResourcePattern, versioned: VersionedAcls) -> None:
        """Makes ``versioned`` the cached ACLs of ``resource`` (Kafka's updateCache)."""
        current = self._acl_cache.get(resource, NO_ACLS).acls
        new = versioned.acls
        for entry in new - current:
            self._resource_cache.setdefault(
                (entry, resource.resource_type, resource.pattern_type), set()
            ).add(resource.name)
        for entry in current - new:
            key = (entry, resource.resource_type, resource.pattern_type)
            names = self._resource_cache.get(key)
            if names is not None:
                names.discard(resource.name)
                if not names:
                    del self._resource_cache[key]
        if new:
            self._acl_cache[resource] = versioned
        else:
            self._acl_cache.pop(resource, None)
        if resource.pattern_type == PatternType.LITERAL:
            if new:
                self._literal[(resource.resource_type, resource.name)] = new
            else:
                self._literal.pop((resource.resource_type, resource.name), None)
        elif resource.pattern_type == PatternType.PREFIXED:
            index = self._prefixed.setdefault(resource.resource_type, _PrefixIndex())
            if new:
                index.by_name[resource.name] = new
            else:
                index.by_name.pop(resource.name, None)
            index.rebuild_lengths()

    def add_acls(self, resource: ResourcePattern, *entries: AccessControlEntry) -> None:
        """Adds ACLs at once, without the store's round trip (tests; as if a notification arrived).
        An in-memory store gets them too, so that later create/delete calls see them."""
        current = self._acl_cache.get(resource, NO_ACLS)
        acls = current.acls | frozenset(entries)
        if isinstance(self.store, InMemoryAclStore):
            self.update_cache(resource, self.store.put(resource, acls))
        else:
            self.update_cache(resource, VersionedAcls(acls, current.version))

    def remove_acls(self, resource: ResourcePattern, *entries: AccessControlEntry) -> None:
        """Removes ACLs at once (tests); with no entries, all of the resource's."""
        current = self._acl_cache.get(resource, NO_ACLS)
        acls = current.acls - frozenset(entries) if entries else frozenset()
        if isinstance(self.store, InMemoryAclStore):
            self.update_cache(resource, self.store.put(resource, acls))
        else:
            self.update_cache(resource, VersionedAcls(acls, current.version))

    def cached(self, resource: ResourcePattern) -> frozenset[AccessControlEntry]:
        return self._acl_cache.get(resource, NO_ACLS).acls

    # -- checks -------------------------------------------------------------------------------------

    def authorize(self, principal: KafkaPrincipal, host: str, actions: list[Action]) -> list[bool]:
        host = java_host_address(host)
        return [self._authorize_action(principal, host, action) for action in actions]

    def _is_super_user(self, principal: KafkaPrincipal) -> bool:
        if principal in self.super_users:
            authorizer_log.debug(
                "principal = %s is a super user, allowing operation without checking acls.", principal
            )
            return True
        return False

    def _matching_acls(self, resource_type: ResourceType, name: str) -> list[frozenset[AccessControlEntry]]:
        """The entry sets that apply to the resource: prefixed, the type's wildcard, the literal."""
        found: list[frozenset[AccessControlEntry]] = []
        index = self._prefixed.get(resource_type)
        if index is not None:
            for length in index.lengths:
                if length > len(name):
                    break
                acls = index.by_name.get(name[:length])
                if acls:
                    found.append(acls)
        wildcard = self._literal.get((resource_type, WILDCARD))
        if wildcard:
            found.append(wildcard)
        literal = self._literal.get((resource_type, name))
        if literal and name != WILDCARD:
            found.append(literal)
        return found

    @staticmethod
    def _matching_acl_exists(
        operation: AclOperation,
        principal: str,
        host: str,
        permission: AclPermissionType,
        acl_sets: list[frozenset[AccessControlEntry]],
    ) -> AccessControlEntry | None:
        for acls in acl_sets:
            for acl in acls:
                if (
                    acl.permission_type == permission
                    and (acl.principal == principal or acl.principal == WILDCARD_PRINCIPAL)
                    and (acl.operation == operation or acl.operation == AclOperation.ALL)
                    and (acl.host == host or acl.host == WILDCARD_HOST)
                ):
                    return acl
        return None

    def _authorize_action(self, principal: KafkaPrincipal, host: str, action: Action) -> bool:
        authorized = self._is_super_user(principal) or self._acls_allow_access(principal, host, action)
        log_audit(principal, host, action, authorized)
        return authorized

    def _acls_allow_access(self, principal: KafkaPrincipal, host: str, action: Action) -> bool:
        acl_sets = self._matching_acls(action.resource_type, action.name)
        if not acl_sets:
            authorizer_log.debug(
                "No acl found for resource %s, authorized = %s",
                ResourcePattern(action.resource_type, action.name, PatternType.LITERAL),
                str(self.allow_everyone_if_no_acl_found).lower(),
            )
            return self.allow_everyone_if_no_acl_found
        who = str(principal)
        deny = self._matching_acl_exists(action.operation, who, host, AclPermissionType.DENY, acl_sets)
        if deny is not None:
            self._log_matched(action, host, AclPermissionType.DENY, deny)
            return False
        for operation in _IMPLIED_BY.get(action.operation, (action.operation,)):
            allow = self._matching_acl_exists(operation, who, host, AclPermissionType.ALLOW, acl_sets)
            if allow is not None:
                self._log_matched(action, host, AclPermissionType.ALLOW, allow)
                return True
        return False

    @staticmethod
    def _log_matched(
        action: Action, host: str, permission: AclPermissionType, acl: AccessControlEntry
    ) -> None:
        if authorizer_log.isEnabledFor(logging.DEBUG):
            authorizer_log.debug(
                "operation = %s on resource = %s from host = %s is %s based on acl = %s",
                action.operation.name,
                ResourcePattern(action.resource_type, action.name, PatternType.LITERAL),
                host,
                permission.name,
                acl.describe(),
            )

    def authorize_by_resource_type(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Kafka's authorizeByResourceType: allowed if some ALLOW (literal or prefixed) for the
        operation is not wholly overridden by a DENY (``*`` denied, or a deny prefix of it)."""
        if resource_type == ResourceType.ANY:
            raise ValueError("Must specify a non-filter resource type for authorizeByResourceType")
        if resource_type == ResourceType.UNKNOWN:
            raise ValueError("Unknown resource type")
        if operation == AclOperation.ANY:
            raise ValueError("Must specify a non-filter operation type for authorizeByResourceType")
        if operation == AclOperation.UNKNOWN:
            raise ValueError("Unknown operation type")
        if self._is_super_user(principal):
            return True
        host = java_host_address(host)
        action = Action(operation, resource_type, "NONE", log_if_allowed=True, log_if_denied=True)

        def result(authorized: bool) -> bool:
            log_audit(principal, host, action, authorized, PatternType.UNKNOWN)
            return authorized

        who = str(principal)
        deny_literals = self._matching_resources(
            who, host, operation, AclPermissionType.DENY, resource_type, PatternType.LITERAL
        )
        if any(WILDCARD in names for names in deny_literals):
            return result(False)
        if self.allow_everyone_if_no_acl_found:
            return result(True)
        deny_prefixes = self._matching_resources(
            who, host, operation, AclPermissionType.DENY, resource_type, PatternType.PREFIXED
        )
        allow_literals = self._matching_resources(
            who, host, operation, AclPermissionType.ALLOW, resource_type, PatternType.LITERAL
        )
        allow_prefixes = self._matching_resources(
            who, host, operation, AclPermissionType.ALLOW, resource_type, PatternType.PREFIXED
        )
        if not deny_literals and not deny_prefixes:
            return result(bool(allow_literals or allow_prefixes))

        def dominant_prefixed_deny(name: str) -> bool:
            return any(any(name[:i] in names for names in deny_prefixes) for i in range(1, len(name) + 1))

        def allow_literal(name: str) -> bool:
            if name == WILDCARD:
                return True
            return not any(name in names for names in deny_literals) and not dominant_prefixed_deny(name)

        allowed = any(not dominant_prefixed_deny(p) for names in allow_prefixes for p in names) or any(
            allow_literal(n) for names in allow_literals for n in names
        )
        return result(allowed)

    def _matching_resources(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        permission: AclPermissionType,
        resource_type: ResourceType,
        pattern_type: PatternType,
    ) -> list[set[str]]:
        matched: list[set[str]] = []
        for p in {principal, WILDCARD_PRINCIPAL}:
            for h in {host, WILDCARD_HOST}:
                for o in {operation, AclOperation.ALL}:
                    names = self._resource_cache.get(
                        (AccessControlEntry(p, h, o, permission), resource_type, pattern_type)
                    )
                    if names:
                        matched.append(names)
        return matched

    # -- listing and changing -----------------------------------------------------------------------

    def acls(self, binding_filter: AclBindingFilter = ANY_BINDING) -> list[AclBinding]:
        """The bindings matching the filter (Kafka's Authorizer.acls), in the cache's order (resource
        type, pattern type, then name descending, as Kafka's ResourceOrdering)."""
        bindings: list[AclBinding] = []
        for resource in sorted(
            self._acl_cache, key=lambda r: (r.resource_type, r.pattern_type, _Reverse(r.name))
        ):
            for entry in self._acl_cache[resource].acls:
                binding = AclBinding(resource, entry)
                if binding_filter.matches(binding):
                    bindings.append(binding)
        return bindings

    async def create_acls(self, bindings: list[AclBinding]) -> list[AclApiError | None]:
        """Adds the bindings: for each, None or the error (Kafka's createAcls)."""
        results: list[AclApiError | None] = [None] * len(bindings)
        to_create: dict[ResourcePattern, list[int]] = {}
        for i, binding in enumerate(bindings):
            problem = None
            if binding.is_unknown():
                problem = "ACL binding contains unknown elements"
            elif "/" in binding.pattern.name:
                problem = f"ACL binding contains invalid resource name: {binding.pattern.name}"
            elif binding.pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
                problem = f"patternType must not be {binding.pattern.pattern_type.name}"
            elif binding.pattern.resource_type == ResourceType.ANY:
                problem = "resourceType must not be ANY"
            elif (
                binding.entry.operation == AclOperation.ANY
                or binding.entry.permission_type == AclPermissionType.ANY
            ):
                problem = "ACL binding contains filter-only elements (ANY)"
            if problem is not None:
                log.info("Failed to create ACL %s: %s", binding, problem)
                results[i] = AclApiError(ErrorCode.INVALID_REQUEST, "Failed to create ACL")
                continue
            try:
                KafkaPrincipal.parse(binding.entry.principal)
            except ValueError:
                # Kafka fails this in AclEntry's constructor, outside any ApiException: an unknown error.
                log.info(
                    "Failed to create ACL %s: expected a string in format principalType:principalName",
                    binding,
                )
                results[i] = AclApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "")
                continue
            to_create.setdefault(binding.pattern, []).append(i)
        if not to_create:
            return results
        async with self._lock:
            for resource, indexes in to_create.items():
                new_entries = frozenset(bindings[i].entry for i in indexes)
                try:
                    await self._update_resource_acls(resource, lambda current, n=new_entries: current | n)
                except Exception as e:
                    error = _api_error(e)
                    for i in indexes:
                        results[i] = error
        return results

    async def delete_acls(
        self, filters: list[AclBindingFilter]
    ) -> list[list[tuple[AclBinding, AclApiError | None]]]:
        """Removes what each filter matches: per filter, the bindings deleted, each with None or the
        error that kept it (Kafka's deleteAcls; a binding several filters match counts for the first)."""
        deleted: dict[AclBinding, int] = {}
        errors: dict[AclBinding, AclApiError] = {}
        async with self._lock:
            resources: dict[ResourcePattern, None] = dict.fromkeys(self._acl_cache)
            for f in filters:
                if f.pattern_filter.matches_at_most_one():
                    for resource in _filter_to_resources(f.pattern_filter):
                        resources.setdefault(resource)
            for resource in resources:
                matching = [(f, i) for i, f in enumerate(filters) if f.pattern_filter.matches(resource)]
                if not matching:
                    continue
                being_deleted: dict[AclBinding, int] = {}

                def remove(
                    current: frozenset[AccessControlEntry],
                    resource: ResourcePattern = resource,
                    matching: list[tuple[AclBindingFilter, int]] = matching,
                    being_deleted: dict[AclBinding, int] = being_deleted,
                ) -> frozenset[AccessControlEntry]:
                    gone = set()
                    for entry in current:
                        for f, index in matching:
                            if f.entry_filter.matches(entry):
                                binding = AclBinding(resource, entry)
                                deleted.setdefault(binding, index)
                                being_deleted.setdefault(binding, index)
                                gone.add(entry)
                                break
                    return current - gone

                try:
                    await self._update_resource_acls(resource, remove)
                except Exception as e:
                    error = _api_error(e)
                    for binding in being_deleted:
                        errors.setdefault(binding, error)
        results: list[list[tuple[AclBinding, AclApiError | None]]] = [[] for _ in filters]
        for binding, index in deleted.items():
            results[index].append((binding, errors.get(binding)))
        return results

    async def _update_resource_acls(self, resource: ResourcePattern, new_acls: Any) -> bool:
        """Kafka's updateResourceAcls: a versioned write of ``new_acls(current)``, re-read and retried
        after a conflicting write; then the cache and a change notification. Under ``_lock``."""
        store = self.store
        current = self._acl_cache.get(resource) or await store.read(resource)
        retries = 0
        while True:
            acls = frozenset(new_acls(current.acls))
            if acls:
                if current.exists:
                    ok, version = await store.conditional_set(resource, acls, current.version)
                else:
                    ok, version = await store.create(resource, acls)
            else:
                log.log(TRACE, "Deleting path for %s because it had no ACLs remaining", resource)
                ok, version = await store.conditional_delete(resource, current.version), 0
            if ok:
                break
            retries += 1
            if retries > self.max_update_retries:
                raise RuntimeError(
                    f"Failed to update ACLs for {resource} after trying a maximum of "
                    f"{self.max_update_retries} times"
                )
            log.log(
                TRACE,
                "Failed to update ACLs for %s. Used version %d. Reading data and retrying update.",
                resource,
                current.version,
            )
            await asyncio.sleep((_RETRY_BACKOFF_MS + random.randrange(_RETRY_BACKOFF_JITTER_MS)) / 1000)
            current = await store.read(resource)
        updated = VersionedAcls(acls, version if acls else UNKNOWN_VERSION)
        changed = updated.acls != current.acls
        self.update_cache(resource, updated)
        if changed:
            log.info("Updated ACLs for %s with new version %d", resource, updated.version)
            await store.notify_change(resource)
        return changed


class _Reverse:
    """A sort key ordering strings in reverse (Kafka's ResourceOrdering: names descending)."""

    __slots__ = ("s",)

    def __init__(self, s: str) -> None:
        self.s = s

    def __lt__(self, other: _Reverse) -> bool:
        return self.s > other.s

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reverse) and self.s == other.s

    def __hash__(self) -> int:
        return hash(self.s)


def _filter_to_resources(f: ResourcePatternFilter) -> list[ResourcePattern]:
    assert f.name is not None
    if f.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
        return [ResourcePattern(f.resource_type, f.name, f.pattern_type)]
    if f.pattern_type == PatternType.ANY:
        return [
            ResourcePattern(f.resource_type, f.name, PatternType.LITERAL),
            ResourcePattern(f.resource_type, f.name, PatternType.PREFIXED),
        ]
    raise ValueError(f"Cannot determine matching resources for patternType {f}")


def _api_error(e: BaseException) -> AclApiError:
    if isinstance(e, AclApiError):
        return e
    log.warning("ACL update failed: %s", e, exc_info=e)
    return AclApiError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e) or type(e).__name__)


# -- selection by authorizer.class.name ---------------------------------------------------------------


def check_authorizer_class_name(value: Any) -> None:
    """The ``authorizer.class.name`` validator: empty, or a class name that selects AclAuthorizer."""
    name = (value or "").strip()
    if name and name not in ACL_AUTHORIZER_CLASS_NAMES:
        raise ValueError(
            f"Class {name} cannot be found (Samsa's authorizer is selected by {KAFKA_ACL_AUTHORIZER}, "
            f"{LEGACY_SIMPLE_ACL_AUTHORIZER} or {SAMSA_ACL_AUTHORIZER})"
        )


def authorizer_from_config(
    config: Mapping[str, Any] | Any, store: AclStore | None = None
) -> AclAuthorizer | None:
    """The authorizer ``authorizer.class.name`` selects: None when empty; an AclAuthorizer for Kafka's
    ZooKeeper-mode class names (and ours); ValueError naming any other class."""
    name = (config["authorizer.class.name"] or "").strip()
    if not name:
        return None
    if name not in ACL_AUTHORIZER_CLASS_NAMES:
        raise ValueError(
            f"Invalid value {name} for configuration authorizer.class.name: Class {name} cannot be found "
            f"(Samsa's authorizer is selected by {KAFKA_ACL_AUTHORIZER}, {LEGACY_SIMPLE_ACL_AUTHORIZER} "
            f"or {SAMSA_ACL_AUTHORIZER})"
        )
    return AclAuthorizer.from_config(config, store)


def cluster_resource() -> ResourcePattern:
    return ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
