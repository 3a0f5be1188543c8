"""The controller's requests to a broker, built for tests of the broker's side of the contract (what a
broker does with LeaderAndIsr, UpdateMetadata and StopReplica, and how it fences stale ones), and the
ZooKeeper state that makes a test the active controller: a broker accepts these requests only from the
controller ``/controller`` and ``/controller_epoch`` name, for the epoch of its own registration."""

from __future__ import annotations

import uuid

from kazoo.client import KazooClient

from protocol.messages import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from zk import znodes

FAKE_CONTROLLER_ID = 9001


def topic_id_of(topic: str) -> uuid.UUID:
    """The topic id these requests carry unless told otherwise: the same for every request naming the
    topic, as the controller's are (a broker refuses another id for a log it has: KIP-516)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"samsa-test-topic:{topic}")


def _kazoo(zookeeper: str) -> KazooClient:
    zk = KazooClient(zookeeper)
    zk.start(timeout=10)
    return zk


def become_controller(zookeeper: str, controller_id: int = FAKE_CONTROLLER_ID, epoch: int = 1) -> None:
    """Writes ``/controller`` and ``/controller_epoch`` (in ``zookeeper``, a connect string with the
    cluster's chroot) as a controller's election would: the test is then the active controller."""
    zk = _kazoo(zookeeper)
    try:
        transaction = zk.transaction()
        if zk.exists(znodes.CONTROLLER):
            transaction.delete(znodes.CONTROLLER)
        transaction.create(znodes.CONTROLLER, znodes.encode_controller(controller_id))
        if zk.exists(znodes.CONTROLLER_EPOCH):
            transaction.set_data(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(epoch))
        else:
            transaction.create(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(epoch))
        assert not any(isinstance(r, Exception) for r in transaction.commit())
    finally:
        zk.stop()
        zk.close()


def read_broker_epoch(zookeeper: str, broker_id: int) -> int:
    """The broker's epoch: the czxid of its registration, which the controller reads and sends."""
    zk = _kazoo(zookeeper)
    try:
        _, stat = zk.get(znodes.broker_path(broker_id))
        return stat.czxid
    finally:
        zk.stop()
        zk.close()


def leader_and_isr(
    topic: str,
    partitions: dict[int, list[int]],
    *,
    leader_epoch: int = 0,
    controller_epoch: int = 1,
    controller_id: int = FAKE_CONTROLLER_ID,
    topic_id: uuid.UUID | None = None,
    broker_epoch: int = -1,
) -> LeaderAndIsrRequest:
    """Every partition led by its first replica, all replicas in the ISR."""
    states = [
        LeaderAndIsrRequest.LeaderAndIsrPartitionState(
            partition_index=p,
            controller_epoch=controller_epoch,
            leader=replicas[0],
            leader_epoch=leader_epoch,
            isr=list(replicas),
            partition_epoch=leader_epoch,
            replicas=list(replicas),
        )
        for p, replicas in partitions.items()
    ]
    return LeaderAndIsrRequest(
        controller_id=controller_id,
        controller_epoch=controller_epoch,
        broker_epoch=broker_epoch,
        type=1,
        topic_states=[
            LeaderAndIsrRequest.LeaderAndIsrTopicState(
                topic_name=topic, topic_id=topic_id or topic_id_of(topic), partition_states=states
            )
        ],
        live_leaders=[],
    )


def update_metadata(
    brokers: dict[int, tuple[str, int]],
    topic: str,
    partitions: dict[int, list[int]],
    *,
    leader_epoch: int = 0,
    controller_epoch: int = 1,
    controller_id: int = FAKE_CONTROLLER_ID,
    topic_id: uuid.UUID | None = None,
    leader: int | None = None,
    broker_epoch: int = -1,
) -> UpdateMetadataRequest:
    states = [
        UpdateMetadataRequest.UpdateMetadataPartitionState(
            partition_index=p,
            controller_epoch=controller_epoch,
            leader=replicas[0] if leader is None else leader,
            leader_epoch=leader_epoch,
            isr=list(replicas),
            zk_version=leader_epoch,
            replicas=list(replicas),
        )
        for p, replicas in partitions.items()
    ]
    return UpdateMetadataRequest(
        controller_id=controller_id,
        controller_epoch=controller_epoch,
        broker_epoch=broker_epoch,
        topic_states=[
            UpdateMetadataRequest.UpdateMetadataTopicState(
                topic_name=topic, topic_id=topic_id or topic_id_of(topic), partition_states=states
            )
        ],
        live_brokers=[
            UpdateMetadataRequest.UpdateMetadataBroker(
                id=broker_id,
                endpoints=[
                    UpdateMetadataRequest.UpdateMetadataEndpoint(
                        port=port, host=host, listener="PLAINTEXT", security_protocol=0
                    )
                ],
            )
            for broker_id, (host, port) in brokers.items()
        ],
    )


def stop_replica(
    topic: str,
    partitions: list[int],
    *,
    delete: bool,
    leader_epoch: int = -2,
    controller_epoch: int = 1,
    controller_id: int = FAKE_CONTROLLER_ID,
    broker_epoch: int = -1,
) -> StopReplicaRequest:
    return StopReplicaRequest(
        controller_id=controller_id,
        controller_epoch=controller_epoch,
        broker_epoch=broker_epoch,
        topic_states=[
            StopReplicaRequest.StopReplicaTopicState(
                topic_name=topic,
                partition_states=[
                    StopReplicaRequest.StopReplicaPartitionState(
                        partition_index=p, leader_epoch=leader_epoch, delete_partition=delete
                    )
                    for p in partitions
                ],
            )
        ],
    )
