"""The broker's side of split-brain fencing: requests from a deposed controller, for an earlier
incarnation of the broker, or with a leader epoch that is not newer, change nothing and get Kafka's
error codes."""

from __future__ import annotations

import uuid

import pytest

from broker.network.client import NetworkClient
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode
from tests.broker.controller_requests import leader_and_isr, stop_replica, update_metadata
from tests.harness import BrokerProcess

pytestmark = pytest.mark.integration

TOPIC_ID = uuid.uuid4()


async def _send(broker: BrokerProcess, key: int, version: int, body: object) -> object:
    client = NetworkClient("127.0.0.1", broker.port, "test-controller")
    try:
        return await client.send(api(key), version, body)
    finally:
        await client.close()


def _partition_errors(response: object) -> dict[int, int]:
    return {e.partition_index: e.error_code for t in response.topics for e in t.partition_errors}


async def test_an_older_controller_epoch_is_refused_and_changes_nothing(broker: BrokerProcess) -> None:
    me = {1: ("127.0.0.1", broker.port)}
    ok = await _send(
        broker, ApiKey.LEADER_AND_ISR, 6, leader_and_isr("t", {0: [1]}, controller_epoch=5, topic_id=TOPIC_ID)
    )
    assert ok.error_code == ErrorCode.NONE
    stale = await _send(
        broker, ApiKey.LEADER_AND_ISR, 6, leader_and_isr("t", {0: [1]}, leader_epoch=9, controller_epoch=4)
    )
    assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    stale_metadata = await _send(
        broker, ApiKey.UPDATE_METADATA, 7, update_metadata(me, "t", {0: [1]}, controller_epoch=4)
    )
    assert stale_metadata.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    stale_stop = await _send(
        broker, ApiKey.STOP_REPLICA, 3, stop_replica("t", [0], delete=True, controller_epoch=4)
    )
    assert stale_stop.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert "ignoring LeaderAndIsr from controller 9001 with epoch 4" in broker.log()
    # The partition is still led here, at the epoch the current controller gave.
    current = await _send(
        broker, ApiKey.UPDATE_METADATA, 7, update_metadata(me, "t", {0: [1]}, controller_epoch=5)
    )
    assert current.error_code == ErrorCode.NONE
    assert (broker.workdir / "logs" / "t-0").is_dir()


async def test_a_leader_epoch_that_is_not_newer_is_refused_per_partition(broker: BrokerProcess) -> None:
    first = leader_and_isr("t", {0: [1], 1: [1]}, leader_epoch=3, topic_id=TOPIC_ID)
    assert _partition_errors(await _send(broker, ApiKey.LEADER_AND_ISR, 6, first)) == {0: 0, 1: 0}
    again = leader_and_isr("t", {0: [1], 1: [1]}, leader_epoch=3, topic_id=TOPIC_ID)
    assert _partition_errors(await _send(broker, ApiKey.LEADER_AND_ISR, 6, again)) == {
        0: ErrorCode.STALE_CONTROLLER_EPOCH,
        1: ErrorCode.STALE_CONTROLLER_EPOCH,
    }
    newer = leader_and_isr("t", {0: [1]}, leader_epoch=4, topic_id=TOPIC_ID)
    assert _partition_errors(await _send(broker, ApiKey.LEADER_AND_ISR, 6, newer)) == {0: 0}
    # StopReplica naming an older leader epoch is fenced; the replica stays.
    fenced = await _send(broker, ApiKey.STOP_REPLICA, 3, stop_replica("t", [0], delete=True, leader_epoch=2))
    assert {e.partition_index: e.error_code for e in fenced.partition_errors} == {
        0: ErrorCode.FENCED_LEADER_EPOCH
    }
    assert (broker.workdir / "logs" / "t-0").is_dir()


async def test_a_request_for_an_earlier_incarnation_of_the_broker_is_refused(broker: BrokerProcess) -> None:
    # The broker epoch is the czxid of the broker's registration; a request naming an older one was
    # meant for the broker as it was before a restart or a lost session.
    request = leader_and_isr("t", {0: [1]}, topic_id=TOPIC_ID, broker_epoch=1)
    response = await _send(broker, ApiKey.LEADER_AND_ISR, 6, request)
    assert response.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert not (broker.workdir / "logs" / "t-0").exists()
