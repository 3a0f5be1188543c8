"""ACLs in a real ZooKeeper: Kafka's layout byte for byte (the nodes, their JSON, the change
notifications), ACLs written by another broker (or by Kafka's tools) reaching this broker's authorizer
through the change notifications, and expired notifications deleted."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable

import pytest

from server_common.acl_authorizer import (
    AccessControlEntry,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourcePatternFilter,
)
from server_common.acls import AclOperation, AclPermissionType, Action, PatternType, ResourceType
from server_common.principal import KafkaPrincipal
from zk import acls as zk_acls
from zk.acls import AclChangeListener, ZkAclStore
from zk.client import ZkClient

pytestmark = pytest.mark.integration

ALICE = KafkaPrincipal("User", "alice")
READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
WRITE = AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW)


@contextlib.asynccontextmanager
async def broker_authorizer(connect: str) -> AsyncIterator[tuple[ZkClient, AclAuthorizer]]:
    """What a broker with authorizer.class.name set runs: a session, the ACL paths, the authorizer
    loaded and following the change notifications."""
    zk = ZkClient(connect, 6000, operation_timeout=10)
    await zk.start()
    store = ZkAclStore(zk)
    authorizer = AclAuthorizer(store=store)
    listener = AclChangeListener(zk, authorizer)
    try:
        await store.create_paths()
        await listener.start()
        yield zk, authorizer
    finally:
        await listener.shutdown()
        await zk.close()


async def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


def can(
    authorizer: AclAuthorizer, op: AclOperation, name: str, rt: ResourceType = ResourceType.TOPIC
) -> bool:
    return authorizer.authorize(ALICE, "10.0.0.1", [Action(op, rt, name)])[0]


async def test_acls_are_stored_in_kafkas_znode_layout(zookeeper: str) -> None:
    async with broker_authorizer(zookeeper) as (zk, authorizer):
        for path in ("/kafka-acl/Topic", "/kafka-acl/TransactionalId", "/kafka-acl-extended/prefixed/Group"):
            assert await zk.exists(path) is not None, path
        results = await authorizer.create_acls(
            [
                AclBinding(ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL), READ),
                AclBinding(ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED), READ),
            ]
        )
        assert results == [None, None]
        found = await zk.get("/kafka-acl/Topic/orders")
        assert found is not None
        assert json.loads(found[0]) == {
            "version": 1,
            "acls": [
                {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
            ],
        }
        assert found[1].version == 0
        # the bytes Kafka writes: Jackson over java.util.HashMaps, whose iteration order is this
        assert found[0] == (
            b'{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*","operation":"Read"}],'
            b'"version":1}'
        )
        found = await zk.get("/kafka-acl-extended/prefixed/Group/app-")
        assert found is not None and json.loads(found[0])["acls"][0]["operation"] == "Read"
        # change notifications: literal as "TYPE:name", others as Kafka's ExtendedAclChangeEvent
        [literal_change] = await zk.get_children("/kafka-acl-changes") or []
        assert literal_change.startswith("acl_changes_") and len(literal_change) == len("acl_changes_") + 10
        assert (await zk.get(f"/kafka-acl-changes/{literal_change}"))[0] == b"TOPIC:orders"  # type: ignore[index]
        [extended_change] = await zk.get_children("/kafka-acl-extended-changes") or []
        data = (await zk.get(f"/kafka-acl-extended-changes/{extended_change}"))[0]  # type: ignore[index]
        assert json.loads(data) == {
            "version": 1,
            "resourceType": "GROUP",
            "name": "app-",
            "patternType": "PREFIXED",
        }
        # a second ACL on the resource: a versioned rewrite
        await authorizer.create_acls(
            [AclBinding(ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL), WRITE)]
        )
        found = await zk.get("/kafka-acl/Topic/orders")
        assert found is not None and found[1].version == 1 and len(json.loads(found[0])["acls"]) == 2
        # the last ACL removed: the node goes
        await authorizer.delete_acls(
            [AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL))]
        )
        assert await zk.exists("/kafka-acl/Topic/orders") is None


async def test_another_brokers_changes_reach_this_authorizer(zookeeper: str) -> None:
    async with broker_authorizer(zookeeper) as (_, one), broker_authorizer(zookeeper) as (_, other):
        topic = ResourcePattern(ResourceType.TOPIC, "pay", PatternType.PREFIXED)
        assert not can(other, AclOperation.WRITE, "payments")
        await one.create_acls([AclBinding(topic, WRITE)])
        await eventually(lambda: can(other, AclOperation.WRITE, "payments"))
        await one.delete_acls(
            [AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "pay", PatternType.PREFIXED))]
        )
        await eventually(lambda: not can(other, AclOperation.WRITE, "payments"))
        # and the other way, literal this time
        await other.create_acls(
            [AclBinding(ResourcePattern(ResourceType.GROUP, "g", PatternType.LITERAL), READ)]
        )
        await eventually(lambda: can(one, AclOperation.READ, "g", ResourceType.GROUP))


async def test_acls_written_by_kafkas_tools_are_loaded_and_followed(zookeeper: str) -> None:
    """Nodes as Kafka's AclAuthorizer writes them (PascalCase names, its change notification format)
    before and after this broker starts."""
    raw = ZkClient(zookeeper, 6000, operation_timeout=10)
    await raw.start()
    try:
        entry = {"principal": "User:alice", "permissionType": "Allow", "operation": "Write", "host": "*"}
        await raw.create(
            "/kafka-acl/TransactionalId/tx-1",
            json.dumps({"version": 1, "acls": [entry]}).encode(),
            makepath=True,
        )
        # unreadable nodes and resource types of a newer Kafka are skipped, the rest loads
        await raw.create("/kafka-acl/Topic/broken", b"{not json", makepath=True)
        await raw.create("/kafka-acl/Topic/listed", b"[1]", makepath=True)
        await raw.create(
            "/kafka-acl/FutureType/x", json.dumps({"version": 1, "acls": [entry]}).encode(), makepath=True
        )
        async with broker_authorizer(zookeeper) as (_, authorizer):
            assert can(authorizer, AclOperation.DESCRIBE, "tx-1", ResourceType.TRANSACTIONAL_ID)
            assert not can(authorizer, AclOperation.WRITE, "broken")
            await raw.create(
                "/kafka-acl/Cluster/kafka-cluster",
                json.dumps({"version": 1, "acls": [{**entry, "operation": "IdempotentWrite"}]}).encode(),
                makepath=True,
            )
            await raw.create("/kafka-acl-changes/acl_changes_", b"Cluster:kafka-cluster", sequence=True)
            await eventually(
                lambda: can(authorizer, AclOperation.IDEMPOTENT_WRITE, "kafka-cluster", ResourceType.CLUSTER)
            )
            # an unreadable notification is logged and skipped; later ones still apply
            await raw.create("/kafka-acl-extended-changes/acl_changes_", b"{not json", sequence=True)
            await raw.create(
                "/kafka-acl-extended/prefixed/Topic/logs-",
                json.dumps({"version": 1, "acls": [{**entry, "operation": "Read"}]}).encode(),
                makepath=True,
            )
            await raw.create(
                "/kafka-acl-extended-changes/acl_changes_",
                json.dumps(
                    {"version": 1, "resourceType": "TOPIC", "name": "logs-", "patternType": "PREFIXED"}
                ).encode(),
                sequence=True,
            )
            await eventually(lambda: can(authorizer, AclOperation.READ, "logs-eu"))
    finally:
        await raw.close()


async def test_expired_change_notifications_are_deleted(
    zookeeper: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with broker_authorizer(zookeeper) as (zk, one), broker_authorizer(zookeeper) as (_, other):
        await one.create_acls(
            [AclBinding(ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL), READ)]
        )
        await eventually(lambda: can(other, AclOperation.READ, "t"))
        # Only now is every notification already old: had it been so before ``other`` read the first,
        # ``one`` could have deleted it first (a race a loaded machine showed).
        monkeypatch.setattr(zk_acls, "CHANGE_EXPIRATION_MS", -1)
        await one.create_acls(
            [AclBinding(ResourcePattern(ResourceType.TOPIC, "u", PatternType.LITERAL), READ)]
        )

        async def gone() -> bool:
            return not await zk.get_children("/kafka-acl-changes")

        async with asyncio.timeout(10):
            while not await gone():
                await asyncio.sleep(0.05)
