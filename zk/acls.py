"""ACLs in ZooKeeper, in Kafka's layout (ZkData.scala's ZkAclStore, ResourceZNode, ZkAclChangeStore).

- LITERAL patterns: ``/kafka-acl/<ResourceType>/<name>``; PREFIXED: ``/kafka-acl-extended/prefixed/
  <ResourceType>/<name>`` (``Topic``, ``Group``, ``Cluster``, ``TransactionalId``, ``DelegationToken``,
  ``User``). Each node holds ``{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*",
  "operation":"Read"}],"version":1}`` (Kafka's bytes) and is written with its version (a conflicting
  write is retried by the authorizer).
- Change notifications: persistent sequential ``acl_changes_<seq>`` under ``/kafka-acl-changes`` (a
  LITERAL pattern: ``TOPIC:name``) or ``/kafka-acl-extended-changes`` (others: JSON ``{"version":1,
  "resourceType":"TOPIC","name":"...","patternType":"PREFIXED"}``). Every broker's ``AclChangeListener``
  follows both and has its authorizer read the named resource again; notifications older than 15
  minutes are deleted (Kafka's ZkNodeChangeNotificationListener: zk/change_notifications.py).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from server_common.acl_authorizer import (
    NO_ACLS,
    RESOURCE_SEPARATOR,
    AccessControlEntry,
    AclAuthorizer,
    ResourcePattern,
    VersionedAcls,
    operation_name,
    parse_operation,
    parse_pattern_type,
    parse_permission_type,
    parse_resource_type,
    permission_type_name,
    resource_type_name,
)
from server_common.acls import PatternType, ResourceType
from server_common.principal import KafkaPrincipal
from zk.change_notifications import CHANGE_EXPIRATION_MS, ChangeNotifications, WatchTasks
from zk.client import ZkClient

log = logging.getLogger(__name__)

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
ACL_JSON_VERSION = 1
CHANGE_EVENT_VERSION = 1
_LOAD_BATCH = 256  # resource nodes read concurrently while loading

# The concrete resource types (Kafka's AclEntry.RESOURCE_TYPES), each with a node under each store.
RESOURCE_TYPES = tuple(t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY))
PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)  # PatternType.isSpecific


def store_path(pattern_type: PatternType) -> str:
    """``/kafka-acl`` for LITERAL, ``/kafka-acl-extended/<pattern type, lower case>`` for the others."""
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ACL_PATH
    if pattern_type == PatternType.PREFIXED:
        return f"{EXTENDED_ACL_PATH}/{pattern_type.name.lower()}"
    raise ValueError(f"Invalid pattern type: {pattern_type.name}")


def resource_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{store_path(pattern_type)}/{resource_type_name(resource_type)}"


def resource_path(resource: ResourcePattern) -> str:
    return f"{resource_type_path(resource.pattern_type, resource.resource_type)}/{resource.name}"


def change_path(pattern_type: PatternType) -> str:
    return LITERAL_ACL_CHANGES if pattern_type == PatternType.LITERAL else EXTENDED_ACL_CHANGES


ACL_PATHS = (
    *(store_path(p) for p in PATTERN_TYPES),
    *(resource_type_path(p, t) for p in PATTERN_TYPES for t in RESOURCE_TYPES),
    LITERAL_ACL_CHANGES,
    EXTENDED_ACL_CHANGES,
)


# -- node data ---------------------------------------------------------------------------------------


def encode_acls(acls: frozenset[AccessControlEntry]) -> bytes:
    """A resource node's JSON (Kafka's ResourceZNode.encode / AclEntry.toJsonCompatibleMap)."""
    # Keys in the order Kafka's Jackson writes its java.util.HashMaps (by String hash bucket), so that
    # the bytes are those Kafka writes; the entries (a Java HashSet in Kafka) sorted.
    entries = [
        {
            "principal": a.principal,
            "permissionType": permission_type_name(a.permission_type),
            "host": a.host,
            "operation": operation_name(a.operation),
        }
        for a in sorted(acls, key=lambda a: (a.principal, a.host, a.operation, a.permission_type))
    ]
    return json.dumps({"acls": entries, "version": ACL_JSON_VERSION}, separators=(",", ":")).encode()


def decode_acls(data: bytes | None) -> frozenset[AccessControlEntry]:
    """Kafka's AclEntry.fromBytes: empty for no data; the version must be 1."""
    if not data:
        return frozenset()
    body = json.loads(data.decode())
    if body is None:
        return frozenset()
    if body.get("version") != ACL_JSON_VERSION:
        raise ValueError(f"unsupported ACL JSON version {body.get('version')!r}")
    entries = set()
    for item in body["acls"]:
        principal = KafkaPrincipal.parse(item["principal"])
        entries.add(
            AccessControlEntry(
                str(principal),
                item["host"],
                parse_operation(item["operation"]),
                parse_permission_type(item["permissionType"]),
            )
        )
    return frozenset(entries)


def encode_change(resource: ResourcePattern) -> bytes:
    """A change notification's data: ``TOPIC:name`` for a literal pattern (Kafka writes the enum name),
    Kafka's ExtendedAclChangeEvent JSON for the others."""
    if resource.pattern_type == PatternType.LITERAL:
        return f"{resource.resource_type.name}{RESOURCE_SEPARATOR}{resource.name}".encode()
    return json.dumps(
        {
            "version": CHANGE_EVENT_VERSION,
            "resourceType": resource.resource_type.name,
            "name": resource.name,
            "patternType": resource.pattern_type.name,
        },
        separators=(",", ":"),
    ).encode()


def decode_change(root: str, data: bytes) -> ResourcePattern:
    """The resource a notification under ``root`` names; ValueError if it cannot be read."""
    text = data.decode()
    if root == LITERAL_ACL_CHANGES:
        resource_type, sep, name = text.partition(RESOURCE_SEPARATOR)
        if not sep:
            raise ValueError(f"expected a string in format ResourceType:ResourceName but got {text}")
        return ResourcePattern(parse_resource_type(resource_type), name, PatternType.LITERAL)
    event = json.loads(text)
    if event.get("version", 0) > CHANGE_EVENT_VERSION:
        raise ValueError(f"Acl change event received for unsupported version: {event.get('version')}")
    pattern_type = parse_pattern_type(event["patternType"])
    if pattern_type in (PatternType.ANY, PatternType.MATCH):
        raise ValueError(f"patternType must not be {pattern_type.name}")
    return ResourcePattern(parse_resource_type(event["resourceType"]), event["name"], pattern_type)


# -- the store ---------------------------------------------------------------------------------------


class ZkAclStore:
    """The authorizer's ``AclStore`` in ZooKeeper (Kafka's KafkaZkClient ACL methods)."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    async def create_paths(self) -> None:
        """Kafka's createAclPaths: each store's root and resource type nodes and both change roots."""
        for path in ACL_PATHS:
            await self.zk.ensure_path(path)

    async def load_all(self) -> dict[ResourcePattern, VersionedAcls]:
        """Every resource with ACLs (Kafka's loadAllAcls), its nodes read a batch at a time."""
        resources: list[ResourcePattern] = []
        for pattern_type in PATTERN_TYPES:
            for type_name in await self.zk.get_children(store_path(pattern_type)) or []:
                resource_type = parse_resource_type(type_name)
                if resource_type == ResourceType.UNKNOWN:
                    log.warning("Ignoring unknown ResourceType: %s", type_name)
                    continue
                names = await self.zk.get_children(resource_type_path(pattern_type, resource_type)) or []
                resources += [ResourcePattern(resource_type, name, pattern_type) for name in names]
        found: dict[ResourcePattern, VersionedAcls] = {}
        for start in range(0, len(resources), _LOAD_BATCH):
            batch = resources[start : start + _LOAD_BATCH]
            results = await asyncio.gather(*(self.read(r) for r in batch), return_exceptions=True)
            for resource, result in zip(batch, results, strict=True):
                if isinstance(result, (ValueError, KeyError, TypeError, AttributeError)):
                    log.error("Ignoring the unreadable ACLs of %s: %s", resource_path(resource), result)
                elif isinstance(result, BaseException):
                    raise result
                elif result.acls:
                    found[resource] = result
        return found

    async def read(self, resource: ResourcePattern) -> VersionedAcls:
        found = await self.zk.get(resource_path(resource))
        if found is None:
            return NO_ACLS
        data, stat = found
        return VersionedAcls(decode_acls(data), stat.version)

    async def create(
        self, resource: ResourcePattern, acls: frozenset[AccessControlEntry]
    ) -> tuple[bool, int]:
        try:
            await self.zk.create(resource_path(resource), encode_acls(acls), makepath=True)
        except NodeExistsError:
            return False, -2
        return True, 0

    async def conditional_set(
        self, resource: ResourcePattern, acls: frozenset[AccessControlEntry], version: int
    ) -> tuple[bool, int]:
        if version < 0:
            raise ValueError(f"Invalid version {version} provided for conditional update")
        try:
            stat = await self.zk.set(resource_path(resource), encode_acls(acls), version)
        except (NoNodeError, BadVersionError):
            return False, -2
        return True, stat.version

    async def conditional_delete(self, resource: ResourcePattern, version: int) -> bool:
        try:
            await self.zk.delete(resource_path(resource), version)
        except BadVersionError:
            return False
        return True

    async def notify_change(self, resource: ResourcePattern) -> None:
        await self.zk.create(
            f"{change_path(resource.pattern_type)}/{ACL_CHANGE_PREFIX}",
            encode_change(resource),
            sequence=True,
        )


# -- the change listener -----------------------------------------------------------------------------


class AclChangeListener:
    """Follows ``/kafka-acl-changes`` and ``/kafka-acl-extended-changes``: each new notification makes
    the authorizer read the resource it names again (Kafka's AclChangeSubscription)."""

    def __init__(self, zk: ZkClient, authorizer: AclAuthorizer) -> None:
        self.zk = zk
        self.authorizer = authorizer
        self._notifications = {
            root: ChangeNotifications(zk, root, ACL_CHANGE_PREFIX, functools.partial(self._apply, root))
            for root in (LITERAL_ACL_CHANGES, EXTENDED_ACL_CHANGES)
        }
        self._tasks = WatchTasks("processing ACL change notifications", log)

    async def start(self) -> None:
        """Notes the notifications already there (their changes are in what ``load`` reads), loads the
        authorizer's cache, then follows the later ones."""
        for notifications in self._notifications.values():
            await notifications.note_existing()
        await self.authorizer.load()
        for root, notifications in self._notifications.items():
            notifications.follow(self._tasks, functools.partial(self.process_notifications, root))

    async def shutdown(self) -> None:
        await self._tasks.shutdown()

    async def process_notifications(self, root: str) -> None:
        """Applies the notifications under ``root`` not yet seen, in order, and deletes expired ones."""
        await self._notifications[root].process(CHANGE_EXPIRATION_MS)

    async def _apply(self, root: str, path: str, data: bytes) -> None:
        try:
            resource = decode_change(root, data)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.error("error processing change notification %r from %s: %s", data, path, e)
            return
        try:
            await self.authorizer.process_acl_change(resource)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.error("error processing change notification for %s from %s: %s", resource, path, e)
