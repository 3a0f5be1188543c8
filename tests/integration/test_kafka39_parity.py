"""Kafka 3.9's version ranges as clients see them: kafka-python infers Kafka 3.9 from ApiVersions, and the
old versions Kafka 4 dropped (KIP-896) but Kafka 3.9 serves are answered."""

from __future__ import annotations

import pytest

from protocol import record_batch
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import OffsetForLeaderEpochRequest, WriteTxnMarkersRequest
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient, produce_request
from tools.local_cluster import BrokerNode

pytestmark = pytest.mark.integration


def test_kafka_python_infers_kafka_3_9(broker: BrokerNode) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert admin._client.get_broker_version(timeout_ms=10000) == (3, 9)
    finally:
        admin.close()


def _leader_client(cluster: Cluster, topic: str) -> RawClient:
    return RawClient(cluster.broker(cluster.leader(topic, 0)).bootstrap)


@pytest.mark.parametrize("version", [0, 1])
def test_offset_for_leader_epoch_v0_and_v1_answer_the_end_of_an_epoch(
    one_broker: Cluster, version: int
) -> None:
    one_broker.create_topic("epochs", 1)
    client = _leader_client(one_broker, "epochs")
    assert (
        client.request(
            ApiKey.PRODUCE,
            9,
            produce_request(
                "epochs", record_batch.encode_batch([record_batch.Record(0, 0, b"k", b"v")], base_offset=0)
            ),
        )
        .responses[0]
        .partition_responses[0]
        .error_code
        == ErrorCode.NONE
    )
    request = OffsetForLeaderEpochRequest(
        topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                topic="epochs",
                partitions=[
                    OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, leader_epoch=0)
                ],
            )
        ]
    )
    answer = client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, request).topics[0].partitions[0]
    # v0 has no leader epoch in its answer (the codec reads it back as the default, -1).
    assert (answer.error_code, answer.end_offset) == (ErrorCode.NONE, 1)
    assert answer.leader_epoch == (-1 if version == 0 else 0)
    client.close()


def test_write_txn_markers_v0_answers_per_partition(one_broker: Cluster) -> None:
    client = RawClient(one_broker.bootstrap.split(",")[0])
    request = WriteTxnMarkersRequest(
        markers=[
            WriteTxnMarkersRequest.WritableTxnMarker(
                producer_id=7,
                producer_epoch=0,
                transaction_result=True,
                coordinator_epoch=0,
                topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name="absent", partition_indexes=[0])],
            )
        ]
    )
    marker = client.request(ApiKey.WRITE_TXN_MARKERS, 0, request).markers[0]
    assert marker.producer_id == 7
    assert marker.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    client.close()
