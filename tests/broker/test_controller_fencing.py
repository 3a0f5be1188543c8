"""The broker's side of controller fencing: a LeaderAndIsr, UpdateMetadata or StopReplica changes
nothing, and gets Kafka's error code, unless it comes from the controller ZooKeeper names as active, at
the epoch ZooKeeper has, for the broker epoch of the broker's own registration (KIP-380); a leader
epoch that is not newer is refused per partition. Every refusal is logged with its peer.

The test plays the controller: it writes ``/controller`` and ``/controller_epoch`` as an election would
and reads the broker epoch from the broker's registration, as the controller does."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from types import SimpleNamespace

import pytest
from kazoo.exceptions import ConnectionLoss

from broker.controller_fence import ControllerFence
from network.client import NetworkClient
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode
from protocol.messages import StopReplicaRequest
from tests.broker.controller_requests import (
    FAKE_CONTROLLER_ID,
    become_controller,
    leader_and_isr,
    read_broker_epoch,
    stop_replica,
    update_metadata,
)
from tools.local_cluster import BrokerNode

pytestmark = pytest.mark.integration

TOPIC_ID = uuid.uuid4()
INT32_MAX = 2**31 - 1


async def _send(broker: BrokerNode, key: int, version: int, body: object) -> object:
    client = NetworkClient("127.0.0.1", broker.port, "test-controller")
    try:
        return await client.send(api(key), version, body)
    finally:
        await client.close()


def _partition_errors(response: object) -> dict[int, int]:
    return {e.partition_index: e.error_code for t in response.topics for e in t.partition_errors}


def _refusals(broker: BrokerNode, api_name: str, error: str) -> list[str]:
    """The broker's log lines refusing ``api_name`` with ``error``, each naming the peer."""
    return [
        line
        for line in broker.log().splitlines()
        if f"refused {api_name} v" in line and " from 127.0.0.1:" in line and f": {error}" in line
    ]


@pytest.fixture
def epoch(broker: BrokerNode, zookeeper: str) -> int:
    """Makes the test the active controller (id 9001, epoch 1); returns the broker's epoch."""
    become_controller(zookeeper)
    return read_broker_epoch(zookeeper, broker.broker_id)


async def test_an_older_controller_epoch_is_refused_and_changes_nothing(
    broker: BrokerNode, zookeeper: str
) -> None:
    become_controller(zookeeper, epoch=5)
    be = read_broker_epoch(zookeeper, broker.broker_id)
    me = {1: ("127.0.0.1", broker.port)}
    ok = await _send(
        broker,
        ApiKey.LEADER_AND_ISR,
        6,
        leader_and_isr("t", {0: [1]}, controller_epoch=5, topic_id=TOPIC_ID, broker_epoch=be),
    )
    assert ok.error_code == ErrorCode.NONE
    stale = await _send(
        broker,
        ApiKey.LEADER_AND_ISR,
        6,
        leader_and_isr("t", {0: [1]}, leader_epoch=9, controller_epoch=4, broker_epoch=be),
    )
    assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    stale_metadata = await _send(
        broker,
        ApiKey.UPDATE_METADATA,
        7,
        update_metadata(me, "t", {0: [1]}, controller_epoch=4, broker_epoch=be),
    )
    assert stale_metadata.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    stale_stop = await _send(
        broker,
        ApiKey.STOP_REPLICA,
        3,
        stop_replica("t", [0], delete=True, controller_epoch=4, broker_epoch=be),
    )
    assert stale_stop.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    [line] = _refusals(broker, "LeaderAndIsr", "STALE_CONTROLLER_EPOCH")
    assert "controller 9001 at epoch 4 is older than controller 9001 at epoch 5" in line
    assert _refusals(broker, "StopReplica", "STALE_CONTROLLER_EPOCH")
    # The partition is still led here, at the epoch the current controller gave.
    current = await _send(
        broker,
        ApiKey.UPDATE_METADATA,
        7,
        update_metadata(me, "t", {0: [1]}, controller_epoch=5, broker_epoch=be),
    )
    assert current.error_code == ErrorCode.NONE
    assert (broker.log_dir / "t-0").is_dir()


async def test_a_leader_epoch_that_is_not_newer_is_refused_per_partition(
    broker: BrokerNode, epoch: int
) -> None:
    first = leader_and_isr("t", {0: [1], 1: [1]}, leader_epoch=3, topic_id=TOPIC_ID, broker_epoch=epoch)
    assert _partition_errors(await _send(broker, ApiKey.LEADER_AND_ISR, 6, first)) == {0: 0, 1: 0}
    again = leader_and_isr("t", {0: [1], 1: [1]}, leader_epoch=3, topic_id=TOPIC_ID, broker_epoch=epoch)
    assert _partition_errors(await _send(broker, ApiKey.LEADER_AND_ISR, 6, again)) == {
        0: ErrorCode.STALE_CONTROLLER_EPOCH,
        1: ErrorCode.STALE_CONTROLLER_EPOCH,
    }
    newer = leader_and_isr("t", {0: [1]}, leader_epoch=4, topic_id=TOPIC_ID, broker_epoch=epoch)
    assert _partition_errors(await _send(broker, ApiKey.LEADER_AND_ISR, 6, newer)) == {0: 0}
    # StopReplica naming an older leader epoch is fenced; the replica stays.
    fenced = await _send(
        broker,
        ApiKey.STOP_REPLICA,
        3,
        stop_replica("t", [0], delete=True, leader_epoch=2, broker_epoch=epoch),
    )
    assert {e.partition_index: e.error_code for e in fenced.partition_errors} == {
        0: ErrorCode.FENCED_LEADER_EPOCH
    }
    assert (broker.log_dir / "t-0").is_dir()


async def test_a_request_for_an_earlier_incarnation_of_the_broker_is_refused(
    broker: BrokerNode, epoch: int
) -> None:
    # The broker epoch is the czxid of the broker's registration; a request naming an older one was
    # meant for the broker as it was before a restart or a lost session.
    request = leader_and_isr("t", {0: [1]}, topic_id=TOPIC_ID, broker_epoch=1)
    response = await _send(broker, ApiKey.LEADER_AND_ISR, 6, request)
    assert response.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert not (broker.log_dir / "t-0").exists()


async def test_a_request_without_a_broker_epoch_is_refused(broker: BrokerNode, epoch: int) -> None:
    created = leader_and_isr("t", {0: [1]}, topic_id=TOPIC_ID, broker_epoch=epoch)
    assert (await _send(broker, ApiKey.LEADER_AND_ISR, 6, created)).error_code == ErrorCode.NONE
    # -1, or a version from before KIP-380 that has no field for it: Samsa's controller always sends it.
    unknown = await _send(broker, ApiKey.STOP_REPLICA, 3, stop_replica("t", [0], delete=True))
    assert unknown.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert {e.partition_index: e.error_code for e in unknown.partition_errors} == {
        0: ErrorCode.STALE_BROKER_EPOCH
    }
    v0 = StopReplicaRequest(
        controller_id=FAKE_CONTROLLER_ID,
        controller_epoch=1,
        delete_partitions=True,
        ungrouped_partitions=[StopReplicaRequest.StopReplicaPartitionV0(topic_name="t", partition_index=0)],
    )
    assert (await _send(broker, ApiKey.STOP_REPLICA, 0, v0)).error_code == ErrorCode.STALE_BROKER_EPOCH
    me = {1: ("127.0.0.1", broker.port)}
    metadata = await _send(broker, ApiKey.UPDATE_METADATA, 4, update_metadata(me, "t", {0: [1]}))
    assert metadata.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert len(_refusals(broker, "StopReplica", "STALE_BROKER_EPOCH")) == 2
    assert (broker.log_dir / "t-0").is_dir()


async def test_a_broker_epoch_zookeeper_does_not_confirm_is_refused(broker: BrokerNode, epoch: int) -> None:
    created = leader_and_isr("t", {0: [1]}, topic_id=TOPIC_ID, broker_epoch=epoch)
    assert (await _send(broker, ApiKey.LEADER_AND_ISR, 6, created)).error_code == ErrorCode.NONE
    # Newer than the broker's: possible for a moment after it registers again, so ZooKeeper is asked.
    forged = stop_replica("t", [0], delete=True, broker_epoch=epoch + 1000)
    assert (await _send(broker, ApiKey.STOP_REPLICA, 3, forged)).error_code == ErrorCode.STALE_BROKER_EPOCH
    [line] = _refusals(broker, "StopReplica", "STALE_BROKER_EPOCH")
    assert f"broker epoch {epoch + 1000}, which is neither ours ({epoch})" in line
    assert (broker.log_dir / "t-0").is_dir()


async def test_a_controller_zookeeper_does_not_name_is_refused(broker: BrokerNode, epoch: int) -> None:
    me = {1: ("127.0.0.1", broker.port)}
    impostor = FAKE_CONTROLLER_ID + 1
    responses = [
        await _send(
            broker,
            ApiKey.LEADER_AND_ISR,
            6,
            leader_and_isr("t", {0: [1]}, controller_id=impostor, topic_id=TOPIC_ID, broker_epoch=epoch),
        ),
        await _send(
            broker,
            ApiKey.UPDATE_METADATA,
            7,
            update_metadata(me, "t", {0: [1]}, controller_id=impostor, broker_epoch=epoch),
        ),
        await _send(
            broker,
            ApiKey.STOP_REPLICA,
            3,
            stop_replica("t", [0], delete=True, controller_id=impostor, broker_epoch=epoch),
        ),
    ]
    assert [r.error_code for r in responses] == [ErrorCode.STALE_CONTROLLER_EPOCH] * 3
    assert not (broker.log_dir / "t-0").exists()
    for name in ("LeaderAndIsr", "UpdateMetadata", "StopReplica"):
        [line] = _refusals(broker, name, "STALE_CONTROLLER_EPOCH")
        assert "ZooKeeper names controller 9001 at epoch 1, not controller 9002 at epoch 1" in line


async def test_a_higher_controller_epoch_than_zookeepers_is_refused_not_adopted(
    broker: BrokerNode, epoch: int
) -> None:
    forged = leader_and_isr("t", {0: [1]}, controller_epoch=INT32_MAX, topic_id=TOPIC_ID, broker_epoch=epoch)
    response = await _send(broker, ApiKey.LEADER_AND_ISR, 6, forged)
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert not (broker.log_dir / "t-0").exists()
    [line] = _refusals(broker, "LeaderAndIsr", "STALE_CONTROLLER_EPOCH")
    assert f"ZooKeeper names controller 9001 at epoch 1, not controller 9001 at epoch {INT32_MAX}" in line
    # The real controller's epoch still works: the forged one was not adopted.
    real = leader_and_isr("t", {0: [1]}, topic_id=TOPIC_ID, broker_epoch=epoch)
    assert (await _send(broker, ApiKey.LEADER_AND_ISR, 6, real)).error_code == ErrorCode.NONE
    assert (broker.log_dir / "t-0").is_dir()


async def test_a_new_controller_zookeeper_confirms_is_accepted_and_the_old_one_refused(
    broker: BrokerNode, zookeeper: str, epoch: int
) -> None:
    old = leader_and_isr("t", {0: [1]}, topic_id=TOPIC_ID, broker_epoch=epoch)
    assert (await _send(broker, ApiKey.LEADER_AND_ISR, 6, old)).error_code == ErrorCode.NONE
    new_id = FAKE_CONTROLLER_ID + 1
    become_controller(zookeeper, new_id, epoch=2)
    # The new controller's first request may come before the watch tells the broker: it is checked
    # against ZooKeeper, which confirms it.
    new = leader_and_isr(
        "t",
        {0: [1]},
        leader_epoch=1,
        controller_id=new_id,
        controller_epoch=2,
        topic_id=TOPIC_ID,
        broker_epoch=epoch,
    )
    assert (await _send(broker, ApiKey.LEADER_AND_ISR, 6, new)).error_code == ErrorCode.NONE
    deposed = stop_replica("t", [0], delete=True, broker_epoch=epoch)
    assert (
        await _send(broker, ApiKey.STOP_REPLICA, 3, deposed)
    ).error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert (broker.log_dir / "t-0").is_dir()


async def test_a_deposed_controller_is_refused_once_zookeeper_names_another(
    broker: BrokerNode, zookeeper: str, epoch: int
) -> None:
    me = {1: ("127.0.0.1", broker.port)}

    async def old_controller_refused() -> bool:
        response = await _send(
            broker, ApiKey.UPDATE_METADATA, 7, update_metadata(me, "t", {0: [1]}, broker_epoch=epoch)
        )
        return response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH

    assert not await old_controller_refused()
    # Another controller is elected but has sent nothing yet: the watch on /controller_epoch tells.
    become_controller(zookeeper, FAKE_CONTROLLER_ID + 1, epoch=2)
    await _eventually(old_controller_refused)


async def _eventually(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"not true within {timeout} s"
        await asyncio.sleep(0.1)


# -- the fence itself, in process: ZooKeeper out of reach, and shared reads -------------------------


class _StubZk:
    """A KafkaZkClient that counts its reads of /controller, and whose ZooKeeper may be out of reach."""

    def __init__(self, controller_id: int, epoch: int, registered_epoch: int) -> None:
        self.zk = SimpleNamespace(kazoo=SimpleNamespace(connected=True))
        self.controller_id, self.epoch, self.registered_epoch = controller_id, epoch, registered_epoch
        self.reads = 0
        self.fail = False

    async def get_controller_id(self) -> int:
        self.reads += 1
        await asyncio.sleep(0.01)
        if self.fail:
            raise ConnectionLoss()
        return self.controller_id

    async def get_controller_epoch(self) -> int:
        return self.epoch

    async def get_registered_broker_epoch(self, broker_id: int) -> int:
        return self.registered_epoch


async def test_without_zookeeper_a_request_that_needs_it_is_left_unanswered() -> None:
    zk = _StubZk(9001, 1, 100)
    fence = ControllerFence(zk, 1)  # type: ignore[arg-type]
    assert await fence.check(9001, 1, 100, 100) is None
    zk.zk.kazoo.connected = False
    # Known already: no read needed, ZooKeeper or not.
    assert await fence.check(9001, 1, 100, 100) is None
    for controller_id, controller_epoch, broker_epoch_ in ((9001, 2, 100), (9002, 1, 100), (9001, 1, 101)):
        refusal = await fence.check(controller_id, controller_epoch, broker_epoch_, 100)
        assert refusal is not None and refusal.unanswered, (controller_id, controller_epoch, broker_epoch_)
        assert "ZooKeeper cannot be read (not connected)" in refusal.detail
    zk.zk.kazoo.connected, zk.fail = True, True
    refusal = await fence.check(9001, 2, 100, 100)
    assert refusal is not None and refusal.unanswered and refusal.error == ErrorCode.STALE_CONTROLLER_EPOCH
    assert (fence.controller_id, fence.controller_epoch) == (9001, 1)  # nothing believed


async def test_concurrent_requests_share_zookeeper_reads() -> None:
    zk = _StubZk(9001, 1, 100)
    fence = ControllerFence(zk, 1)  # type: ignore[arg-type]
    refusals = await asyncio.gather(*(fence.check(9001, INT32_MAX - i, 100, 100) for i in range(50)))
    assert all(r is not None and r.error == ErrorCode.STALE_CONTROLLER_EPOCH for r in refusals)
    # The first read, then one for everyone who asked while it was in flight.
    assert zk.reads == 2
    assert await fence.check(9001, 1, 100, 100) is None
    assert zk.reads == 2
