"""An ordinary client impersonating the controller (issue 14, item 4). Before the fence, a StopReplica
with ``delete_partitions`` from any connection deleted a partition holding acknowledged messages, and
one carrying controller epoch 2,147,483,647 made the broker adopt that epoch and ignore the real
controller until a restart. Now the broker answers every such request with STALE_BROKER_EPOCH or
STALE_CONTROLLER_EPOCH, logs it with the peer, and changes nothing: the partition keeps its messages,
the real controller still brings new topics online, and a bystander producer and consumer never
notice."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import StopReplicaRequest
from tests.broker.controller_requests import leader_and_isr, read_broker_epoch, stop_replica, update_metadata
from tests.support.bystander import Bystander
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient
from zk import znodes

pytestmark = pytest.mark.integration

TOPIC = "victim"
MESSAGES = 100
INT32_MAX = 2**31 - 1


def _produce(bootstrap: str, values: range) -> None:
    acked: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for n in values:
        producer.produce(
            TOPIC,
            str(n).encode(),
            on_delivery=lambda err, msg: err is None and acked.append(int(msg.value())),
        )
    assert producer.flush(20) == 0
    assert sorted(acked) == list(values)


def _consume_all(bootstrap: str, expected: int, timeout: float = 20.0) -> list[int]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "impostor-check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    values: list[int] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                values.append(int(msg.value()))
    finally:
        consumer.close()
    return values


def _controller(one_broker: Cluster) -> tuple[int, int]:
    """The real controller's id and epoch, which an attacker can guess (small, counting numbers)."""
    controller_id = one_broker.active_controller().controller_id
    epoch = one_broker.wait_for(
        lambda zk: znodes.decode_controller_epoch(zk.get(znodes.CONTROLLER_EPOCH)[0]), "the controller epoch"
    )
    return controller_id, epoch


def test_an_impostor_can_neither_delete_a_partition_nor_capture_the_controller_epoch(
    one_broker: Cluster, bystander: Bystander
) -> None:
    broker = one_broker.broker(1)
    one_broker.create_topic(TOPIC, 1)
    _produce(one_broker.bootstrap, range(MESSAGES))
    controller_id, epoch = _controller(one_broker)
    real_broker_epoch = read_broker_epoch(one_broker.zookeeper_connect, broker.broker_id)
    me = {broker.broker_id: ("127.0.0.1", broker.port)}

    def delete(controller_epoch: int, broker_epoch: int = -1) -> StopReplicaRequest:
        """StopReplica deleting the partition, whatever its leader epoch (-2), as a topic deletion."""
        return stop_replica(
            TOPIC,
            [0],
            delete=True,
            controller_id=controller_id,
            controller_epoch=controller_epoch,
            broker_epoch=broker_epoch,
        )

    client = RawClient(one_broker.bootstrap)
    peer = f"from 127.0.0.1:{client.sock.getsockname()[1]} (client raw-test)"
    attacks = [
        # The controller's id and epoch guessed, the broker epoch not known.
        (ApiKey.STOP_REPLICA, 3, delete(controller_epoch=epoch), ErrorCode.STALE_BROKER_EPOCH),
        (
            ApiKey.STOP_REPLICA,
            3,
            delete(controller_epoch=epoch, broker_epoch=1),
            ErrorCode.STALE_BROKER_EPOCH,
        ),
        (
            ApiKey.STOP_REPLICA,
            3,
            delete(controller_epoch=epoch, broker_epoch=real_broker_epoch + 1),
            ErrorCode.STALE_BROKER_EPOCH,
        ),
        # v0 has no broker epoch at all.
        (
            ApiKey.STOP_REPLICA,
            0,
            StopReplicaRequest(
                controller_id=controller_id,
                controller_epoch=epoch,
                delete_partitions=True,
                ungrouped_partitions=[
                    StopReplicaRequest.StopReplicaPartitionV0(topic_name=TOPIC, partition_index=0)
                ],
            ),
            ErrorCode.STALE_BROKER_EPOCH,
        ),
        # The highest controller epoch there is, with or without the broker epoch (as if it leaked).
        (ApiKey.STOP_REPLICA, 3, delete(controller_epoch=INT32_MAX), ErrorCode.STALE_BROKER_EPOCH),
        (
            ApiKey.STOP_REPLICA,
            3,
            delete(controller_epoch=INT32_MAX, broker_epoch=real_broker_epoch),
            ErrorCode.STALE_CONTROLLER_EPOCH,
        ),
        (
            ApiKey.UPDATE_METADATA,
            7,
            update_metadata(
                me,
                TOPIC,
                {0: [broker.broker_id]},
                leader=-1,
                controller_id=controller_id,
                controller_epoch=INT32_MAX,
                broker_epoch=real_broker_epoch,
            ),
            ErrorCode.STALE_CONTROLLER_EPOCH,
        ),
        (
            ApiKey.LEADER_AND_ISR,
            6,
            leader_and_isr(
                "captured",
                {0: [broker.broker_id]},
                controller_id=controller_id,
                controller_epoch=INT32_MAX,
                broker_epoch=real_broker_epoch,
            ),
            ErrorCode.STALE_CONTROLLER_EPOCH,
        ),
    ]
    try:
        for key, version, body, error in attacks:
            assert client.request(key, version, body).error_code == error, (key, version, body)
    finally:
        client.close()

    # The partition and its acknowledged messages are intact, and it still takes produces.
    _produce(one_broker.bootstrap, range(MESSAGES, MESSAGES + 10))
    assert _consume_all(one_broker.bootstrap, MESSAGES + 10) == list(range(MESSAGES + 10))
    assert (broker.log_dir / f"{TOPIC}-0").is_dir()
    assert not (broker.log_dir / "captured-0").exists()
    # The forged epoch was not adopted: the real controller still brings a new topic online.
    one_broker.create_topic("after-the-attack", 1)
    refused = [line for line in broker.log().splitlines() if "refused " in line and peer in line]
    assert len(refused) == len(attacks), refused
    assert any(f"not controller {controller_id} at epoch {INT32_MAX}" in line for line in refused)
    bystander.check(max_pause=2.0)
