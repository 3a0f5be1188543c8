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
  minutes are deleted (Kafka's ZkNodeChangeNotificationListener).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Coroutine
from typing import Any

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
from server_common.tasks import cancel_and_wait
from zk.client import ZkClient

log = logging.getLogger(__name__)

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
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


def _is_change(child: str) -> bool:
    return child.startswith(ACL_CHANGE_PREFIX) and child[len(ACL_CHANGE_PREFIX) :].isdigit()


def _sequence(child: str) -> int:
    return int(child[len(ACL_CHANGE_PREFIX) :])


class AclChangeListener:
    """Follows ``/kafka-acl-changes`` and ``/kafka-acl-extended-changes``: each new notification makes
    the authorizer read the resource it names again (Kafka's AclChangeSubscription)."""

    def __init__(self, zk: ZkClient, authorizer: AclAuthorizer) -> None:
        self.zk = zk
        self.authorizer = authorizer
        self._last_change = {root: -1 for root in (LITERAL_ACL_CHANGES, EXTENDED_ACL_CHANGES)}
        self._locks = {root: asyncio.Lock() for root in self._last_change}
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> None:
        """Notes the notifications already there (their changes are in what ``load`` reads), loads the
        authorizer's cache, then follows the later ones."""
        for root in self._last_change:
            children = [c for c in await self.zk.get_children(root) or [] if _is_change(c)]
            self._last_change[root] = max(map(_sequence, children), default=-1)
        await self.authorizer.load()
        for root in self._last_change:
            self.zk.watch_children(root, functools.partial(self._on_changes, root))

    async def shutdown(self) -> None:
        await cancel_and_wait(self._tasks)

    def _on_changes(self, root: str, children: list[str]) -> None:
        if any(_is_change(c) and _sequence(c) > self._last_change[root] for c in children):
            self._spawn(self.process_notifications(root))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("processing ACL change notifications failed", exc_info=task.exception())

    async def process_notifications(self, root: str) -> None:
        """Applies the notifications under ``root`` not yet seen, in order, and deletes expired ones."""
        async with self._locks[root]:
            children = sorted(
                (c for c in await self.zk.get_children(root) or [] if _is_change(c)), key=_sequence
            )
            if not children:
                return
            now = time.time() * 1000
            for child in children:
                path = f"{root}/{child}"
                if _sequence(child) > self._last_change[root]:
                    found = await self.zk.get(path)
                    if found is None:
                        log.warning("read null data from %s", path)
                    else:
                        try:
                            resource = decode_change(root, found[0])
                        except (ValueError, KeyError, TypeError, AttributeError) as e:
                            log.error(
                                "error processing change notification %r from %s: %s", found[0], path, e
                            )
                        else:
                            try:
                                await self.authorizer.process_acl_change(resource)
                            except (ValueError, KeyError, TypeError, AttributeError) as e:
                                log.error(
                                    "error processing change notification for %s from %s: %s",
                                    resource,
                                    path,
                                    e,
                                )
                    self._last_change[root] = _sequence(child)
                    stat = found[1] if found else None
                else:
                    stat = await self.zk.exists(path)
                if stat is not None and now - stat.ctime > CHANGE_EXPIRATION_MS:
                    log.debug("Purging change notification %s", path)
                    await self.zk.delete(path)
