"""The controller's requests to a broker, built for tests of the broker's side of the contract (what a
broker does with LeaderAndIsr, UpdateMetadata and StopReplica, and how it fences stale ones)."""

from __future__ import annotations

import uuid

from protocol.messages import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest


def leader_and_isr(
    topic: str,
    partitions: dict[int, list[int]],
    *,
    leader_epoch: int = 0,
    controller_epoch: int = 1,
    controller_id: int = 9001,
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
                topic_name=topic, topic_id=topic_id or uuid.uuid4(), partition_states=states
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
    controller_id: int = 9001,
    topic_id: uuid.UUID | None = None,
    leader: int | None = None,
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
        topic_states=[
            UpdateMetadataRequest.UpdateMetadataTopicState(
                topic_name=topic, topic_id=topic_id or uuid.uuid4(), partition_states=states
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
    topic: str, partitions: list[int], *, delete: bool, leader_epoch: int = -2, controller_epoch: int = 1
) -> StopReplicaRequest:
    return StopReplicaRequest(
        controller_id=9001,
        controller_epoch=controller_epoch,
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
