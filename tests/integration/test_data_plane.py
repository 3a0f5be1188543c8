"""Produce, ListOffsets and idempotent sequences on a real cluster, at the protocol level, against
Kafka's semantics: offsets by time and by position, duplicates acknowledged once, gaps refused."""

from __future__ import annotations

import time

import pytest

from protocol import record_batch
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import InitProducerIdRequest, ListOffsetsRequest, MetadataRequest
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient, produce_request

pytestmark = pytest.mark.integration


def _leader(cluster: Cluster, topic: str) -> RawClient:
    client = RawClient(cluster.bootstrap.split(",")[0])
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
    )
    leader = client.request(ApiKey.METADATA, 9, request).topics[0].partitions[0].leader_id
    client.close()
    return RawClient(cluster.broker(leader).bootstrap)


def _produce(client: RawClient, topic: str, batch: bytes, version: int = 9) -> object:
    request = produce_request(topic, batch)
    return client.request(ApiKey.PRODUCE, version, request).responses[0].partition_responses[0]


def _list_offset(client: RawClient, topic: str, timestamp: int, version: int = 7) -> tuple[int, int, int]:
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)],
            )
        ],
    )
    p = client.request(ApiKey.LIST_OFFSETS, version, request).topics[0].partitions[0]
    return p.error_code, p.offset, p.timestamp


def test_list_offsets_earliest_latest_by_time_and_max_timestamp(cluster: Cluster) -> None:
    cluster.create_topic("offsets", 1)
    leader = _leader(cluster, "offsets")
    base = int(time.time() * 1000) - 60_000
    # Three batches: timestamps base, base+10 (offsets 0-1), base+30 (2), base+20 (3).
    for offset, timestamps in ((0, [base, base + 10]), (2, [base + 30]), (3, [base + 20])):
        records = [record_batch.Record(i, ts, b"k", b"v") for i, ts in enumerate(timestamps)]
        assert (
            _produce(leader, "offsets", record_batch.encode_batch(records, base_offset=0)).base_offset
            == offset
        )
    assert _list_offset(leader, "offsets", -2)[:2] == (0, 0)  # earliest
    assert _list_offset(leader, "offsets", -1)[:2] == (0, 4)  # latest: the log end (= high watermark)
    assert _list_offset(leader, "offsets", base + 5) == (0, 1, base + 10)  # first record at or after
    assert _list_offset(leader, "offsets", base + 25) == (0, 2, base + 30)
    assert _list_offset(leader, "offsets", base + 31) == (0, -1, -1)  # nothing that recent
    assert _list_offset(leader, "offsets", -3) == (0, 2, base + 30)  # max timestamp (v7+)
    assert _list_offset(leader, "offsets", -2, version=1)[:2] == (0, 0)


def test_an_idempotent_retry_is_acknowledged_once_and_a_gap_is_refused(cluster: Cluster) -> None:
    cluster.create_topic("idempotent", 1)
    leader = _leader(cluster, "idempotent")
    init = leader.request(
        ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
    )
    assert init.error_code == ErrorCode.NONE
    pid, epoch = init.producer_id, init.producer_epoch

    def batch(sequence: int, count: int) -> bytes:
        records = [
            record_batch.Record(i, int(time.time() * 1000), b"k", b"v%d" % (sequence + i))
            for i in range(count)
        ]
        return record_batch.encode_batch(
            records, base_offset=0, producer_id=pid, producer_epoch=epoch, base_sequence=sequence
        )

    first = _produce(leader, "idempotent", batch(0, 3))
    assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)
    retry = _produce(leader, "idempotent", batch(0, 3))  # the producer did not see the ack and resends
    assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 0)
    gap = _produce(leader, "idempotent", batch(5, 1))  # sequences 3 and 4 never arrived
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    next_ = _produce(leader, "idempotent", batch(3, 2))
    assert (next_.error_code, next_.base_offset) == (ErrorCode.NONE, 3)
    assert _list_offset(leader, "idempotent", -1)[1] == 5  # the retry was not appended twice


def test_produce_errors_at_the_partition_level(cluster: Cluster) -> None:
    cluster.create_topic("errors", 1)
    leader = _leader(cluster, "errors")
    good = record_batch.encode_batch(
        [record_batch.Record(0, int(time.time() * 1000), b"k", b"v")], base_offset=0
    )
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # breaks the CRC
    assert _produce(leader, "errors", bytes(corrupt)).error_code == ErrorCode.CORRUPT_MESSAGE
    zstd = record_batch.encode_batch(
        [record_batch.Record(0, 0, b"k", b"v" * 100)], base_offset=0, compression=4
    )
    assert _produce(leader, "errors", zstd, version=6).error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert _produce(leader, "no-such-topic", good).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    other = next(
        b for b in cluster.brokers.values() if b.bootstrap != f"127.0.0.1:{leader.sock.getpeername()[1]}"
    )
    follower = RawClient(other.bootstrap)
    assert _produce(follower, "errors", good).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
