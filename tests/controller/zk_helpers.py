"""ZooKeeper helpers of the controller tests: what a broker's admin requests would write, and reads of
what the controller wrote."""

from __future__ import annotations

import json

from zk import znodes
from zk.client import ZkClient


async def create_topic(
    zk: ZkClient, topic: str, assignment: dict[int, list[int]], config: dict[str, str] | None = None
) -> znodes.TopicAssignment:
    """As a broker's CreateTopics does: the configs first, then the assignment the controller watches."""
    await zk.create(znodes.topic_config_path(topic), znodes.encode_config(config or {}), makepath=True)
    record = znodes.TopicAssignment(assignment)
    await zk.create(znodes.topic_path(topic), record.encode(), makepath=True)
    return record


async def add_partitions(zk: ZkClient, topic: str, extra: dict[int, list[int]]) -> None:
    found = await zk.get(znodes.topic_path(topic))
    assert found is not None
    record = znodes.TopicAssignment.decode(found[0])
    record.partitions.update(extra)
    await zk.set(znodes.topic_path(topic), record.encode(), version=found[1].version)


async def partition_state(zk: ZkClient, topic: str, partition: int) -> znodes.PartitionState | None:
    found = await zk.get(znodes.partition_state_path(topic, partition))
    return znodes.PartitionState.decode(found[0], found[1].version) if found else None


async def active_controller(zk: ZkClient) -> tuple[int, list[str]] | None:
    """(controller id, endpoints) from /controller, or None."""
    found = await zk.get(znodes.CONTROLLER)
    if found is None:
        return None
    body = json.loads(found[0])
    return body["brokerid"], body.get("endpoints", [])


async def controller_epoch(zk: ZkClient) -> int:
    found = await zk.get(znodes.CONTROLLER_EPOCH)
    return int(found[0]) if found else 0


async def snapshot(zk: ZkClient, path: str = "/") -> dict[str, tuple[bytes, int, int]]:
    """Every node under ``path``: (data, mzxid, pzxid), which change with any write to it or its children."""
    found = await zk.get(path)
    if found is None:
        return {}
    data, stat = found
    nodes = {path: (data, stat.mzxid, stat.pzxid)}
    for child in await zk.get_children(path) or []:
        nodes.update(await snapshot(zk, f"{path.rstrip('/')}/{child}"))
    return nodes


async def leader_epoch_isr(zk: ZkClient, topic: str, partition: int) -> tuple[int, int, list[int]] | None:
    """(leader, leader epoch, ISR) of a partition's state znode, or None."""
    state = await partition_state(zk, topic, partition)
    return (state.leader, state.leader_epoch, list(state.isr)) if state else None


async def state_is(zk: ZkClient, topic: str, partition: int, expected: tuple[int, int, list[int]]) -> bool:
    return await leader_epoch_isr(zk, topic, partition) == expected
