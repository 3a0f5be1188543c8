"""The ZooKeeper layer against a real server: the asyncio bridge, watches, transactions, sessions,
and Kafka's znode formats."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest
from kazoo.client import KazooClient

from zk import znodes
from zk.client import JUTE_MAX_BUFFER, ZkClient, ZkOp, ZkRequestTooLargeError, ZkTransactionError
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def _client(connect: str, session_ms: int = 4000) -> AsyncIterator[ZkClient]:
    """A connected client, closed even when the test fails (a leaked kazoo client keeps pytest alive)."""
    client = ZkClient(connect.split("/")[0], session_ms, operation_timeout=10)
    await client.start()
    try:
        yield client
    finally:
        await client.close()


async def test_get_set_create_delete(zookeeper_server: ZooKeeperServer) -> None:
    async with _client(zookeeper_server.connect_string) as zk:
        root = f"/t-{uuid.uuid4().hex}"
        assert await zk.get(root) is None
        await zk.create(f"{root}/a/b", b"1", makepath=True)
        data, stat = await zk.get(f"{root}/a/b")
        assert (data, stat.version) == (b"1", 0)
        assert (await zk.set(f"{root}/a/b", b"2", version=0)).version == 1
        assert await zk.get_children(f"{root}/a") == ["b"]
        await zk.delete(root, recursive=True)
        assert await zk.exists(root) is None


async def test_a_failed_transaction_changes_nothing_and_names_its_cause(
    zookeeper_server: ZooKeeperServer,
) -> None:
    async with _client(zookeeper_server.connect_string) as zk:
        root = f"/t-{uuid.uuid4().hex}"
        await zk.create(f"{root}/epoch", b"1", makepath=True)
        await zk.create(f"{root}/state", b"old")
        with pytest.raises(ZkTransactionError) as failure:
            await zk.transaction(
                [ZkOp("check", f"{root}/epoch", version=7), ZkOp("set", f"{root}/state", b"new")]
            )
        assert type(failure.value.cause).__name__ == "BadVersionError"
        assert (await zk.get(f"{root}/state"))[0] == b"old"
        await zk.transaction(
            [ZkOp("check", f"{root}/epoch", version=0), ZkOp("set", f"{root}/state", b"new")]
        )
        assert (await zk.get(f"{root}/state"))[0] == b"new"


async def test_children_and_data_watches_reach_the_event_loop(zookeeper_server: ZooKeeperServer) -> None:
    async with _client(zookeeper_server.connect_string) as zk:
        root = f"/t-{uuid.uuid4().hex}"
        await zk.ensure_path(root)
        children: list[list[str]] = []
        data: list[bytes | None] = []
        loop = asyncio.get_running_loop()
        zk.watch_children(root, lambda c: children.append(sorted(c)) or _on_loop(loop))
        zk.watch_data(f"{root}/x", lambda d, s: data.append(d))
        for step in (zk.create(f"{root}/x", b"v1"), zk.set(f"{root}/x", b"v2"), zk.delete(f"{root}/x")):
            await step
            await asyncio.sleep(0.2)  # a watch fires once and is re-armed by a read: let it catch up
        assert children[0] == [] and ["x"] in children and children[-1] == []
        assert data == [None, b"v1", b"v2", None]


def _on_loop(loop: asyncio.AbstractEventLoop) -> None:
    assert asyncio.get_running_loop() is loop


async def test_a_lost_session_is_reported_and_its_ephemerals_vanish(
    zookeeper_server: ZooKeeperServer,
) -> None:
    async with _client(zookeeper_server.connect_string, session_ms=2000) as zk:
        path = f"/t-{uuid.uuid4().hex}"
        await zk.create(path, b"", ephemeral=True)
        states: list[str] = []
        zk.add_session_listener(states.append)
        # Expire the session on the server: open a second client on the same session id and close it.
        session_id, password = zk.kazoo.client_id
        twin = KazooClient(zookeeper_server.connect_string, client_id=(session_id, password))
        await asyncio.to_thread(twin.start)
        await asyncio.to_thread(twin.stop)
        for _ in range(200):
            if "LOST" in states and "CONNECTED" in states[states.index("LOST") :]:
                break
            await asyncio.sleep(0.02)
        assert "LOST" in states and states[-1] == "CONNECTED"
        assert await zk.exists(path) is None
        assert zk.session_id != session_id


async def test_a_write_over_jute_maxbuffer_is_refused_before_it_is_sent(
    zookeeper_server: ZooKeeperServer,
) -> None:
    # The server would close the connection of such a write; a retry would do the same, again and again.
    zk = ZkClient(f"{zookeeper_server.connect_string}/chroot-{uuid.uuid4().hex}", operation_timeout=10)
    await zk.start()
    try:
        states: list[str] = []
        zk.add_session_listener(states.append)
        path = f"/t-{uuid.uuid4().hex}"
        writes = {
            "create": lambda n: zk.create(path, b"x" * n),
            "transaction": lambda n: zk.transaction(
                [ZkOp("create", path, b"x" * (n // 2)), ZkOp("create", f"{path}/child", b"x" * (n - n // 2))]
            ),
        }
        for kind, write in writes.items():
            with pytest.raises(ZkRequestTooLargeError) as refused:
                await write(JUTE_MAX_BUFFER)
            assert (refused.value.limit, refused.value.size > JUTE_MAX_BUFFER) == (JUTE_MAX_BUFFER, True)
            # The largest write the check lets through (chroot and framing counted) is one ZooKeeper takes.
            size = JUTE_MAX_BUFFER
            while True:
                try:
                    await write(size)
                    break
                except ZkRequestTooLargeError:
                    size -= 1
            assert size > JUTE_MAX_BUFFER - 400, kind
            assert await zk.exists(path) is not None
            await zk.delete(path, recursive=True)
        assert states == []
    finally:
        await zk.close()


def test_broker_registration_is_kafkas_format() -> None:
    registration = znodes.BrokerRegistration(
        3,
        {"PLAINTEXT": ("h1", 9092), "INTERNAL": ("10.0.0.1", 9093)},
        {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "PLAINTEXT"},
        "r1",
    )
    import json

    body = json.loads(registration.encode())
    assert body["version"] == 5 and body["host"] == "h1" and body["port"] == 9092
    assert body["endpoints"] == ["PLAINTEXT://h1:9092", "INTERNAL://10.0.0.1:9093"]
    assert body["rack"] == "r1" and body["jmx_port"] == -1
    assert znodes.BrokerRegistration.decode(3, registration.encode()) == registration


def test_topic_and_partition_state_formats() -> None:
    import json

    assignment = znodes.TopicAssignment({0: [1, 2], 1: [2, 3]})
    body = json.loads(assignment.encode())
    assert body["version"] == 3 and body["partitions"] == {"0": [1, 2], "1": [2, 3]}
    assert len(body["topic_id"]) == 22
    assert znodes.TopicAssignment.decode(assignment.encode()) == assignment
    state = znodes.PartitionState(leader=2, leader_epoch=4, isr=(2, 3), controller_epoch=7, zk_version=9)
    assert json.loads(state.encode()) == {
        "controller_epoch": 7,
        "leader": 2,
        "version": 1,
        "leader_epoch": 4,
        "isr": [2, 3],
    }
    assert znodes.PartitionState.decode(state.encode(), 9) == state
