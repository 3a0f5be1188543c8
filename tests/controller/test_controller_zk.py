"""ControllerZkClient against a real ZooKeeper: the election transaction and epoch-fenced writes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from controller.context import TopicPartition
from controller.controller_zk import ControllerMovedError, ControllerZkClient
from tests.controller.zk_helpers import create_topic, snapshot
from zk import znodes
from zk.client import ZkClient
from zk.znodes import PartitionState

pytestmark = pytest.mark.integration

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.fixture
async def candidates(zookeeper: str) -> AsyncIterator[tuple[ControllerZkClient, ControllerZkClient]]:
    """Two would-be controllers, each with its own session."""
    sessions = [ZkClient(zookeeper, 4000, operation_timeout=10) for _ in range(2)]
    for session in sessions:
        await session.start()
    first, second = (ControllerZkClient(s, lambda: False) for s in sessions)
    await first.ensure_persistent_paths()
    try:
        yield first, second
    finally:
        for session in sessions:
            await session.close()


async def test_the_election_is_one_transaction_and_has_one_winner(
    candidates: tuple[ControllerZkClient, ControllerZkClient],
) -> None:
    first, second = candidates
    assert await first.controller_epoch() is None
    assert await first.register_controller(9001, ["PLAINTEXT://h:1"]) == (1, 0)
    with pytest.raises(ControllerMovedError):
        await second.register_controller(9002, [])
    assert await first.controller_epoch() == (1, 0)  # the loser changed nothing
    found = await first.zk.get(znodes.CONTROLLER)
    assert found is not None and found[1].ephemeralOwner == first.zk.session_id
    body = json.loads(found[0])
    assert (body["version"], body["brokerid"], body["endpoints"]) == (1, 9001, ["PLAINTEXT://h:1"])
    assert znodes.decode_controller(found[0]) == 9001
    assert await first.active_controller() == (9001, first.zk.session_id)
    # Resigning deletes /controller; the next election bumps the epoch on its zkVersion.
    await first.resign(0)
    assert await second.register_controller(9002, []) == (2, 1)


async def test_a_deposed_controller_cannot_write(
    candidates: tuple[ControllerZkClient, ControllerZkClient], zookeeper: str
) -> None:
    first, second = candidates
    _, first_version = await first.register_controller(9001, [])
    await create_topic(first.zk, "t", {0: [1], 1: [1]})
    created = await first.create_partition_states(
        {T0: PartitionState(1, 0, (1,), 1), T1: PartitionState(1, 0, (1,), 1)}, first_version
    )
    assert created[T0] == PartitionState(1, 0, (1,), 1, 0)
    # Another controller is elected (the first one's /controller went with its session, say).
    await first.zk.delete(znodes.CONTROLLER)
    _, second_version = await second.register_controller(9002, [])
    before = await snapshot(first.zk)
    with pytest.raises(ControllerMovedError):
        await first.update_partition_states({T0: PartitionState(-1, 1, (1,), 1, 0)}, first_version)
    with pytest.raises(ControllerMovedError):
        await first.delete_topic("t", first_version)
    with pytest.raises(ControllerMovedError):
        await first.delete_topic_deletions(["t"], first_version)
    with pytest.raises(ControllerMovedError):
        await first.resign(first_version)  # /controller is not ours any more: left alone
    assert await snapshot(first.zk) == before
    # The new controller writes, conditionally on the partition state's zkVersion.
    outcome = await second.update_partition_states({T0: PartitionState(-1, 1, (1,), 2, 0)}, second_version)
    assert outcome.written == {T0: PartitionState(-1, 1, (1,), 2, 1)}
    stale = await second.update_partition_states({T0: PartitionState(1, 2, (1,), 2, 0)}, second_version)
    assert (stale.written, stale.retry) == ({}, [T0])
    # A write found already applied (a retry after a lost connection) counts as written.
    again = await second.update_partition_states({T0: PartitionState(-1, 1, (1,), 2, 0)}, second_version)
    assert again.written == {T0: PartitionState(-1, 1, (1,), 2, 1)}
    # And a fenced client refuses before asking ZooKeeper.
    fenced = ControllerZkClient(second.zk, lambda: True)
    with pytest.raises(ControllerMovedError):
        await fenced.update_partition_states({T1: PartitionState(-1, 1, (1,), 2, 0)}, second_version)


async def test_deleting_a_topic_removes_its_subtree_configs_and_request_at_once(
    candidates: tuple[ControllerZkClient, ControllerZkClient],
) -> None:
    first, _ = candidates
    _, version = await first.register_controller(9001, [])
    await create_topic(first.zk, "t", {0: [1], 1: [1]}, {"retention.ms": "1"})
    await first.create_partition_states(
        {T0: PartitionState(1, 0, (1,), 1), T1: PartitionState(1, 0, (1,), 1)}, version
    )
    await first.zk.create(znodes.delete_topic_path("t"))
    await first.delete_topic("t", version)
    for path in (znodes.topic_path("t"), znodes.topic_config_path("t"), znodes.delete_topic_path("t")):
        assert await first.zk.exists(path) is None
    assert await first.topics() == []
