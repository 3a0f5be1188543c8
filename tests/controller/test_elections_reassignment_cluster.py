"""Preferred and unclean elections and partition reassignment by a real ``samsa controller``, with
in-process fake brokers. The fakes do not replicate, so the test plays the partition leader where a
replica catches up: it sends the AlterPartition that the leader would send to grow the ISR."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import pytest

from network.client import NetworkClient
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)
from tests.controller.fake_broker import FakeBroker, eventually
from tests.controller.zk_helpers import active_controller, create_topic, leader_epoch_isr, partition_state
from tools.local_cluster import ControllerNode
from zk import reassignment_json, znodes
from zk.client import ZkClient

pytestmark = pytest.mark.integration

PREFERRED, UNCLEAN = 0, 1


async def _send(controller: ControllerNode, key: ApiKey, version: int, body: Any) -> Any:
    client = NetworkClient("127.0.0.1", controller.port, "test", request_timeout=10)
    try:
        return await client.send(api(key), version, body)
    finally:
        await client.close()


async def _active(zk: ZkClient, controller: ControllerNode) -> None:
    async def is_active() -> bool:
        found = await active_controller(zk)
        return found is not None and found[0] == controller.controller_id and "ready:" in controller.log()

    await eventually(is_active)


async def _grow_isr(
    zk: ZkClient,
    controller: ControllerNode,
    leader: FakeBroker,
    topic: str,
    partition: int,
    isr: list[int],
) -> None:
    """What a leader sends when followers have caught up: AlterPartition with the larger ISR."""
    state = await partition_state(zk, topic, partition)
    assert state is not None and state.leader == leader.id
    data = AlterPartitionRequest.PartitionData(
        partition_index=partition,
        leader_epoch=state.leader_epoch,
        partition_epoch=state.zk_version,
        new_isr=isr,
    )
    request = AlterPartitionRequest(
        broker_id=leader.id,
        broker_epoch=leader.epoch,
        topics=[AlterPartitionRequest.TopicData(topic_name=topic, partitions=[data])],
    )
    answer = await _send(controller, ApiKey.ALTER_PARTITION, 1, request)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.NONE


async def _elect(
    controller: ControllerNode, election_type: int, partitions: dict[str, list[int]] | None
) -> Any:
    request = ElectLeadersRequest(
        election_type=election_type,
        topic_partitions=None
        if partitions is None
        else [ElectLeadersRequest.TopicPartitions(topic=t, partitions=p) for t, p in partitions.items()],
        timeout_ms=10_000,
    )
    answer = await _send(controller, ApiKey.ELECT_LEADERS, 2, request)
    return answer.error_code, {
        (t.topic, p.partition_id): ErrorCode(p.error_code)
        for t in answer.replica_election_results
        for p in t.partition_result
    }


async def _bounce_preferred_leader(zk: ZkClient, one: FakeBroker, two: FakeBroker) -> None:
    """Broker 1, preferred leader of t-0 (replicas [1, 2, 3]), dies and comes back; broker 2 leads."""
    await create_topic(zk, "t", {0: [1, 2, 3], 1: [2, 3, 1]})
    await eventually(lambda: leader_epoch_isr(zk, "t", 0))
    await one.deregister()
    await eventually(lambda: _leader_is(zk, "t", 0, 2))
    await one.register()
    # Back once the controller has told it that 2 leads: a state it can only have received after
    # coming back (a state from before its bounce, leader 1, says nothing of whether the controller has
    # seen it return, and an ISR naming it would then be INELIGIBLE_REPLICA, as a loaded run showed).
    await eventually(lambda: getattr(one.leader_and_isr_states().get(("t", 0)), "leader", None) == 2)


async def _with_preferred_leader_away(
    zk: ZkClient,
    controllers: Callable[..., ControllerNode],
    brokers: Callable[..., FakeBroker],
    overrides: dict[str, str],
) -> tuple[ControllerNode, FakeBroker, FakeBroker]:
    """Brokers 1-3 and an active controller with ``overrides``; then broker 1, preferred leader of t-0,
    bounces, so that broker 2 leads it. Returns the controller and brokers 1 and 2."""
    one, two, _ = await brokers(1), await brokers(2), await brokers(3)
    controller = controllers(overrides=overrides)
    await _active(zk, controller)
    await _bounce_preferred_leader(zk, one, two)
    return controller, one, two


async def _leader_is(zk: ZkClient, topic: str, partition: int, leader: int) -> bool:
    state = await partition_state(zk, topic, partition)
    return state is not None and state.leader == leader


async def test_elect_leaders_restores_the_preferred_leader_once_it_is_back_in_sync(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    controller, one, two = await _with_preferred_leader_away(
        zk, controllers, brokers, {"auto.leader.rebalance.enable": "false"}
    )
    error, results = await _elect(controller, PREFERRED, {"t": [0, 1, 7], "nope": [0]})
    assert error == ErrorCode.NONE
    assert results == {
        ("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,  # 1 is not in the ISR yet
        ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
        ("t", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    await _grow_isr(zk, controller, two, "t", 0, [2, 3, 1])
    assert (await _elect(controller, PREFERRED, {"t": [0]}))[1] == {("t", 0): ErrorCode.NONE}
    leader, epoch, isr = await leader_epoch_isr(zk, "t", 0)  # type: ignore[misc]
    assert (leader, sorted(isr)) == (1, [1, 2, 3])
    await eventually(lambda: one.leader_and_isr_states()[("t", 0)].leader == 1)
    assert one.leader_and_isr_states()[("t", 0)].leader_epoch == epoch
    # Every partition: only those elected or failed are reported.
    assert await _elect(controller, PREFERRED, None) == (ErrorCode.NONE, {})


async def test_the_preferred_replica_election_znode_is_carried_out_and_deleted(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    controller, _, two = await _with_preferred_leader_away(
        zk, controllers, brokers, {"auto.leader.rebalance.enable": "false"}
    )
    await _grow_isr(zk, controller, two, "t", 0, [2, 3, 1])
    await zk.create(znodes.PREFERRED_REPLICA_ELECTION, znodes.encode_partitions([("t", 0), ("t", 1)]))
    await eventually(lambda: _leader_is(zk, "t", 0, 1))
    await eventually(lambda: _absent(zk, znodes.PREFERRED_REPLICA_ELECTION))
    assert "t-0 completed preferred replica election: leader 1" in controller.log()


async def _absent(zk: ZkClient, path: str) -> bool:
    return await zk.exists(path) is None


async def test_the_auto_rebalance_check_restores_preferred_leaders_by_itself(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    controller, _, two = await _with_preferred_leader_away(
        zk, controllers, brokers, {"leader.imbalance.check.interval.seconds": "1"}
    )
    await _grow_isr(zk, controller, two, "t", 0, [2, 3, 1])
    # Broker 1 is the preferred replica of one partition and leads none: 100% > 10%.
    await eventually(lambda: _leader_is(zk, "t", 0, 1), timeout=5)
    assert "auto-rebalance check" in controller.log()


async def test_an_unclean_election_by_api_brings_an_out_of_sync_replica_in(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    one, two = await brokers(1), await brokers(2)
    controller = controllers()
    await _active(zk, controller)
    await create_topic(zk, "u", {0: [1, 2]})
    await eventually(lambda: leader_epoch_isr(zk, "u", 0))
    await two.deregister()
    await eventually(lambda: _isr_is(zk, "u", 0, [1]))
    await one.deregister()
    await eventually(lambda: _leader_is(zk, "u", 0, -1))
    await two.register()  # not in the ISR: with unclean election disabled the partition stays offline
    assert (await _elect(controller, PREFERRED, {"u": [0]}))[1] == {
        ("u", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    }
    assert await leader_epoch_isr(zk, "u", 0) == (-1, 2, [1])
    assert (await _elect(controller, UNCLEAN, {"u": [0]}))[1] == {("u", 0): ErrorCode.NONE}
    assert await leader_epoch_isr(zk, "u", 0) == (2, 3, [2])
    assert (await _elect(controller, UNCLEAN, {"u": [0]}))[1] == {("u", 0): ErrorCode.ELECTION_NOT_NEEDED}
    await eventually(lambda: two.leader_and_isr_states()[("u", 0)].leader == 2)


async def _isr_is(zk: ZkClient, topic: str, partition: int, isr: list[int]) -> bool:
    state = await partition_state(zk, topic, partition)
    return state is not None and list(state.isr) == isr


async def _topic_assignment(zk: ZkClient, topic: str) -> znodes.TopicAssignment:
    found = await zk.get(znodes.topic_path(topic))
    assert found is not None
    return znodes.TopicAssignment.decode(found[0])


async def _reassignment_done(zk: ZkClient, topic: str) -> bool:
    record = await _topic_assignment(zk, topic)
    return not record.adding_replicas and not record.removing_replicas


async def _reassign(controller: ControllerNode, targets: dict[tuple[str, int], list[int] | None]) -> dict:
    topics: dict[str, list[Any]] = {}
    for (topic, partition), replicas in targets.items():
        topics.setdefault(topic, []).append(
            AlterPartitionReassignmentsRequest.ReassignablePartition(
                partition_index=partition, replicas=replicas
            )
        )
    request = AlterPartitionReassignmentsRequest(
        timeout_ms=10_000,
        topics=[
            AlterPartitionReassignmentsRequest.ReassignableTopic(name=t, partitions=p)
            for t, p in topics.items()
        ],
    )
    answer = await _send(controller, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, request)
    assert answer.error_code == ErrorCode.NONE
    return {
        (t.name, p.partition_index): ErrorCode(p.error_code) for t in answer.responses for p in t.partitions
    }


async def _ongoing(
    controller: ControllerNode,
) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    answer = await _send(
        controller, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, ListPartitionReassignmentsRequest()
    )
    return {
        (t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
        for t in answer.topics
        for p in t.partitions
    }


async def test_a_reassignment_adds_and_removes_replicas_through_the_api(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    one, _, three = await brokers(1), await brokers(2), await brokers(3)
    controller = controllers()
    await _active(zk, controller)
    await create_topic(zk, "r", {0: [1, 2]})
    await eventually(lambda: leader_epoch_isr(zk, "r", 0))
    assert await _reassign(controller, {("r", 0): [2, 3], ("r", 5): [1]}) == {
        ("r", 0): ErrorCode.NONE,
        ("r", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert await _ongoing(controller) == {("r", 0): ([2, 3, 1], [3], [1])}
    record = await _topic_assignment(zk, "r")
    assert (record.partitions, record.adding_replicas, record.removing_replicas) == (
        {0: [2, 3, 1]},
        {0: [3]},
        {0: [1]},
    )
    await eventually(lambda: ("r", 0) in three.leader_and_isr_states())
    started = three.leader_and_isr_states()[("r", 0)]
    assert (started.replicas, started.adding_replicas, started.removing_replicas) == ([2, 3, 1], [3], [1])
    # Broker 3 catches up; leader 1 says so.
    await _grow_isr(zk, controller, one, "r", 0, [1, 2, 3])
    await eventually(lambda: _leader_is(zk, "r", 0, 2))
    await eventually(lambda: _isr_is(zk, "r", 0, [2, 3]))
    await eventually(lambda: _reassignment_done(zk, "r"))
    record = await _topic_assignment(zk, "r")
    assert (record.partitions, record.adding_replicas, record.removing_replicas) == ({0: [2, 3]}, {}, {})
    assert await _ongoing(controller) == {}
    await eventually(lambda: ("r", 0, True) in [(t, p, d) for t, p, _, d in one.stop_replicas()])
    assert one.leader_and_isr_states()[("r", 0)].leader == 1  # it heard nothing after being removed


async def test_a_reassignment_survives_the_sigkill_of_the_controller_midway(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    one, two, _ = await brokers(1), await brokers(2), await brokers(3)
    first = controllers(9001)
    await _active(zk, first)
    second = controllers(9002)
    await create_topic(zk, "k", {0: [1, 2], 1: [2, 1]})
    await eventually(lambda: leader_epoch_isr(zk, "k", 1))
    assert await _reassign(first, {("k", 0): [3, 2], ("k", 1): [3, 1]}) == {
        ("k", 0): ErrorCode.NONE,
        ("k", 1): ErrorCode.NONE,
    }
    first.signal(signal.SIGKILL)  # in phase A: RS, AR and RR are only in /brokers/topics/k
    await _active(zk, second)
    assert await _ongoing(second) == {("k", 0): ([3, 2, 1], [3], [1]), ("k", 1): ([3, 1, 2], [3], [2])}
    await _grow_isr(zk, second, one, "k", 0, [1, 2, 3])
    await _grow_isr(zk, second, two, "k", 1, [2, 1, 3])
    await eventually(lambda: _leader_is(zk, "k", 0, 3))
    await eventually(lambda: _leader_is(zk, "k", 1, 3))
    await eventually(lambda: _reassignment_done(zk, "k"))
    record = await _topic_assignment(zk, "k")
    assert (record.partitions, record.adding_replicas, record.removing_replicas) == (
        {0: [3, 2], 1: [3, 1]},
        {},
        {},
    )
    assert await leader_epoch_isr(zk, "k", 0) is not None
    assert sorted((await partition_state(zk, "k", 0)).isr) == [2, 3]  # type: ignore[union-attr]
    assert sorted((await partition_state(zk, "k", 1)).isr) == [1, 3]  # type: ignore[union-attr]
    await eventually(lambda: ("k", 0, True) in [(t, p, d) for t, p, _, d in one.stop_replicas()])
    await eventually(lambda: ("k", 1, True) in [(t, p, d) for t, p, _, d in two.stop_replicas()])


async def test_a_reassignment_through_the_znode_completes_and_the_znode_goes(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    one, _, _ = await brokers(1), await brokers(2), await brokers(3)
    controller = controllers()
    await _active(zk, controller)
    await create_topic(zk, "z", {0: [1, 2, 3], 1: [1, 2]})
    await eventually(lambda: leader_epoch_isr(zk, "z", 1))
    data = reassignment_json.encode_znode({("z", 0): [2, 3], ("z", 1): [1, 3]})
    await zk.create(znodes.REASSIGN_PARTITIONS, data)
    # z-0 needs nothing new: done at once; z-1 waits for broker 3 to join the ISR.
    await eventually(lambda: _leader_is(zk, "z", 0, 2))
    await eventually(lambda: _znode_is(zk, {("z", 1): [1, 3]}))
    await _grow_isr(zk, controller, one, "z", 1, [1, 2, 3])
    await eventually(lambda: _absent(zk, znodes.REASSIGN_PARTITIONS))
    record = await _topic_assignment(zk, "z")
    assert record.partitions == {0: [2, 3], 1: [1, 3]} and not record.adding_replicas


async def _znode_is(zk: ZkClient, expected: dict[tuple[str, int], list[int]]) -> bool:
    found = await zk.get(znodes.REASSIGN_PARTITIONS)
    moves = reassignment_json.parse_reassignment(found[0]) if found else []
    return {(m.topic, m.partition): m.replicas for m in moves} == expected
