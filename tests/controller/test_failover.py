"""Controller election, failover and split-brain fencing with real ``samsa controller`` processes against a
real ZooKeeper; fake brokers record what the controllers send."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable

import pytest

from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsRequest, ControlledShutdownRequest
from tests.controller.fake_broker import FakeBroker, eventually
from tests.controller.zk_helpers import (
    active_controller,
    controller_epoch,
    create_topic,
    partition_state,
    snapshot,
    state_is,
)
from tests.support.raw_client import RawClient
from tools.local_cluster import ControllerNode, LocalClusterError
from zk import znodes
from zk.client import ZkClient

pytestmark = pytest.mark.integration


async def _wait_active(zk: ZkClient, among: list[ControllerNode], timeout: float = 10.0) -> ControllerNode:
    holder: list[ControllerNode] = []

    async def someone_active() -> bool:
        found = await active_controller(zk)
        holder[:] = [c for c in among if found is not None and c.controller_id == found[0]]
        return bool(holder)

    await eventually(someone_active, timeout)
    return holder[0]


async def test_exactly_one_of_two_controllers_is_active(
    zk: ZkClient, controllers: Callable[..., ControllerNode]
) -> None:
    first, second = controllers(9001), controllers(9002)
    active = await _wait_active(zk, [first, second])
    standby = second if active is first else first
    assert await controller_epoch(zk) == 1
    _, endpoints = await active_controller(zk)  # type: ignore[misc]
    assert endpoints == [f"PLAINTEXT://127.0.0.1:{active.port}"]
    await eventually(lambda: f"standing by: controller {active.controller_id} is active" in standby.log())
    assert f"[Controller id={active.controller_id}] elected as active controller, epoch 1" in active.log()
    assert "elected as active controller" not in standby.log()
    # Both answer ApiVersions; only the active one serves ControlledShutdown (and the others).
    for process in (active, standby):
        client = RawClient(process.endpoint)
        versions = client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t"))
        served = {
            ApiKey.API_VERSIONS,
            ApiKey.CONTROLLED_SHUTDOWN,
            ApiKey.ALTER_PARTITION,
            ApiKey.ELECT_LEADERS,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            ApiKey.SASL_HANDSHAKE,  # advertised on every listener, as Kafka's are
            ApiKey.SASL_AUTHENTICATE,
        }
        assert {k.api_key for k in versions.api_keys} == served
        client.close()
    client = RawClient(standby.endpoint)
    answer = client.request(
        ApiKey.CONTROLLED_SHUTDOWN, 3, ControlledShutdownRequest(broker_id=1, broker_epoch=-1)
    )
    assert answer.error_code == ErrorCode.NOT_CONTROLLER
    client.close()


async def test_sigkill_of_the_active_controller_fails_over_within_10_s(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    broker = await brokers(1)
    first = controllers(9001)
    assert await _wait_active(zk, [first]) is first
    second = controllers(9002)
    await eventually(lambda: "standing by: controller 9001 is active" in second.log())
    await create_topic(zk, "t", {0: [1]})
    await eventually(lambda: ("t", 0) in broker.leader_and_isr_states())
    first.signal(signal.SIGKILL)
    killed = time.monotonic()
    assert await _wait_active(zk, [second], timeout=10) is second
    took = time.monotonic() - killed
    assert took < 10, took
    assert await controller_epoch(zk) == 2
    # The new controller resends everything with its epoch: a full LeaderAndIsr and UpdateMetadata.
    await eventually(
        lambda: any(r.controller_epoch == 2 and r.type == 2 for r in broker.requests(ApiKey.LEADER_AND_ISR))
    )
    full = next(r for r in broker.requests(ApiKey.LEADER_AND_ISR) if r.controller_epoch == 2)
    assert [(t.topic_name, [p.partition_index for p in t.partition_states]) for t in full.topic_states] == [
        ("t", [0])
    ]
    assert any(r.controller_epoch == 2 for r in broker.requests(ApiKey.UPDATE_METADATA))
    # and it serves: a new topic gets a leader.
    await create_topic(zk, "u", {0: [1]})
    await eventually(lambda: ("u", 0) in broker.leader_and_isr_states())
    assert (await partition_state(zk, "u", 0)).controller_epoch == 2  # type: ignore[union-attr]
    assert "elected as active controller, epoch 2" in second.log()


async def test_a_paused_controller_whose_session_expired_changes_nothing_and_resigns(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    """Split brain: SIGSTOP the active controller until ZooKeeper expires its session, let the standby
    take over, then SIGCONT the first. It must write nothing, send nothing with its old epoch, resign."""
    broker_1, broker_2 = await brokers(1), await brokers(2)
    first = controllers(9001)
    assert await _wait_active(zk, [first]) is first
    second = controllers(9002)
    await eventually(lambda: "standing by: controller 9001 is active" in second.log())
    await create_topic(zk, "t", {0: [1, 2], 1: [2, 1]})
    await eventually(lambda: len(broker_1.leader_and_isr_states()) == 2)

    first.signal(signal.SIGSTOP)
    assert await _wait_active(zk, [second], timeout=15) is second
    assert await controller_epoch(zk) == 2
    await eventually(lambda: "ready:" in second.log().split("epoch 2", 1)[-1])
    await eventually(lambda: any(r.controller_epoch == 2 for r in broker_2.requests(ApiKey.LEADER_AND_ISR)))
    await asyncio.sleep(0.5)  # let the new controller's last requests land
    before = await snapshot(zk)
    resumed = time.monotonic()

    first.signal(signal.SIGCONT)
    await eventually(lambda: "resigned as the active controller (epoch 1)" in first.log(), timeout=15)
    await eventually(lambda: "standing by: controller 9002 is active" in first.log().split("resigned", 1)[-1])
    await asyncio.sleep(1.0)
    assert await snapshot(zk) == before
    for broker in (broker_1, broker_2):
        stale = [r for r in broker.received if r.at > resumed and r.body.controller_epoch < 2]
        assert not stale, stale
    assert first.alive
    # The old controller is a good standby: it takes over when the new one goes.
    second.signal(signal.SIGKILL)
    assert await _wait_active(zk, [first], timeout=15) is first
    assert await controller_epoch(zk) == 3


async def test_sigterm_resigns_and_the_standby_takes_over_at_once(
    zk: ZkClient, controllers: Callable[..., ControllerNode]
) -> None:
    # Long sessions: a takeover within them proves that /controller was deleted, not expired.
    first = controllers(9001, {"zookeeper.session.timeout.ms": "30000"})
    assert await _wait_active(zk, [first]) is first
    second = controllers(9002, {"zookeeper.session.timeout.ms": "30000"})
    await eventually(lambda: "standing by" in second.log())
    third = controllers(9003, {"zookeeper.session.timeout.ms": "30000"})
    await eventually(lambda: "standing by" in third.log())
    assert third.stop() == 0  # a standby leaving does not touch /controller
    assert (await active_controller(zk))[0] == 9001  # type: ignore[index]
    stopped = time.monotonic()
    assert first.stop() == 0
    assert "resigned as the active controller (epoch 1)" in first.log()
    assert await _wait_active(zk, [second], timeout=5) is second
    assert time.monotonic() - stopped < 5
    assert await controller_epoch(zk) == 2


async def test_configuration_errors_name_the_setting(controllers: Callable[..., ControllerNode]) -> None:
    with pytest.raises(LocalClusterError, match=r"unclean\.leader\.election\.enable"):
        controllers(9001, {"unclean.leader.election.enable": "maybe"})


async def test_a_new_controller_catches_up_with_what_happened_while_none_was_active(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    one, two = await brokers(1), await brokers(2)
    first = controllers(9001)
    assert await _wait_active(zk, [first]) is first
    await create_topic(zk, "t", {0: [1, 2]})
    await create_topic(zk, "gone", {0: [2]})
    await eventually(lambda: len(two.leader_and_isr_states()) == 2)
    assert first.stop() == 0
    # With no controller: broker 1 dies, a topic is created, a deletion is asked for, and one for a
    # topic that does not exist.
    await one.deregister()
    await create_topic(zk, "new", {0: [2, 1]})
    await zk.create(znodes.delete_topic_path("gone"))
    await zk.create(znodes.delete_topic_path("never"))
    second = controllers(9002)
    assert await _wait_active(zk, [second]) is second
    await eventually(lambda: state_is(zk, "t", 0, (2, 2, [2])))  # replica 1 out, then leader 2
    assert await partition_state(zk, "new", 0) == znodes.PartitionState(2, 0, (2,), 2, 0)

    async def deleted() -> bool:
        paths = [
            znodes.topic_path("gone"),
            znodes.delete_topic_path("gone"),
            znodes.delete_topic_path("never"),
        ]
        return all([await zk.exists(p) is None for p in paths])

    await eventually(deleted)
    assert ("gone", 0, -2, True) in two.stop_replicas()
    await eventually(lambda: two.leader_and_isr_states()[("t", 0)].leader == 2)
