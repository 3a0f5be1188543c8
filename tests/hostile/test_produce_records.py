"""Hostile produce requests (issue 14, items 1 and 2): records that are not whole batches, and batches
whose compression no consumer could undo, are refused for their partition and nothing of them is
written; the partition stays readable by every client, and a normal producer and consumer beside the
attacker are not disturbed."""

from __future__ import annotations

import asyncio
import struct

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from crc32c import crc32c

from protocol import record_batch as rb
from protocol.api import ApiKey
from protocol.compression import ZSTD
from protocol.errors import ErrorCode
from protocol.messages import ListOffsetsRequest
from tests.support.bystander import Bystander
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient, produce_request

pytestmark = pytest.mark.integration

TOPIC = "target"
# The bystander acknowledges every 10 ms; an attack that stalled the broker would show as a longer gap.
MAX_PAUSE = 1.0


def _batch(values: list[bytes], codec: int = 0) -> bytearray:
    records = [rb.Record(i, 1_700_000_000_000, None, v, []) for i, v in enumerate(values)]
    return bytearray(rb.encode_batch(records, base_offset=0, compression=codec))


def _claiming(buf: bytearray, attributes: int) -> bytes:
    """The batch with other attributes (its payload untouched) and a CRC that matches them."""
    struct.pack_into(">h", buf, 21, attributes)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def _produce(client: RawClient, records: bytes) -> object:
    return (
        client.request(ApiKey.PRODUCE, 9, produce_request(TOPIC, records)).responses[0].partition_responses[0]
    )


def _log_end_offset(client: RawClient) -> int:
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=TOPIC,
                partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)],
            )
        ],
    )
    return client.request(ApiKey.LIST_OFFSETS, 7, request).topics[0].partitions[0].offset


async def _read_all_with_aiokafka(bootstrap: str, count: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        values: list[bytes] = []
        while len(values) < count:
            batches = await consumer.getmany(tp, timeout_ms=5000)
            assert batches, f"aiokafka read {len(values)} of {count} values"
            values += [m.value for m in batches[tp]]
        return values
    finally:
        await consumer.stop()


def _attack_and_check(one_broker: Cluster, bystander: Bystander, bad: list[bytes], error: int) -> None:
    one_broker.create_topic(TOPIC, 1)
    client = RawClient(one_broker.bootstrap)
    good = _produce(client, bytes(_batch([b"before"], codec=1)))
    assert good.error_code == ErrorCode.NONE
    for records in bad:
        response = _produce(client, records)
        assert (response.error_code, response.base_offset) == (error, -1), response
        assert response.error_message
    assert _log_end_offset(client) == 1  # nothing of the refused requests was written
    assert _produce(client, bytes(_batch([b"after"], codec=3))).base_offset == 1
    client.close()
    # The partition stays readable: aiokafka raised UnsupportedCodecError on a stored codec-7 batch.
    assert asyncio.run(_read_all_with_aiokafka(one_broker.bootstrap, 2)) == [b"before", b"after"]
    log = one_broker.broker(1).log()
    assert "refused Produce v9 from 127.0.0.1:" in log and "(client raw-test): " in log
    assert ErrorCode(error).name in log
    bystander.check(max_pause=MAX_PAUSE)


def test_a_produce_ending_in_a_partial_batch_is_refused_whole(
    one_broker: Cluster, bystander: Bystander
) -> None:
    whole = bytes(_batch([b"a", b"b"]))
    longer = bytearray(whole)
    struct.pack_into(">i", longer, 8, len(whole) - 12 + 50)  # declares 50 bytes more than follow
    attacks = [bytes(longer), whole + whole[:40], whole + whole[:11], whole[:-1]]
    _attack_and_check(one_broker, bystander, attacks, ErrorCode.CORRUPT_MESSAGE)


def test_a_batch_with_a_codec_kafka_does_not_define_is_refused(
    one_broker: Cluster, bystander: Bystander
) -> None:
    attacks = [_claiming(_batch([b"x"] * 5), codec) for codec in (5, 6, 7)]
    _attack_and_check(one_broker, bystander, attacks, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)


def test_a_compressed_batch_that_does_not_decode_into_its_records_is_refused(
    one_broker: Cluster, bystander: Bystander
) -> None:
    lying_count = _batch([b"v" * 100] * 3, codec=ZSTD)
    struct.pack_into(">i", lying_count, 23, 3)  # last offset delta and records count: 4 records,
    struct.pack_into(">i", lying_count, 57, 4)  # 3 in the payload
    attacks = [
        _claiming(_batch([b"plain"] * 5), 1),  # the gzip flag on an uncompressed payload
        _claiming(_batch([b"plain"] * 5, codec=2), 3),  # snappy bytes flagged lz4
        _claiming(lying_count, ZSTD),
    ]
    _attack_and_check(one_broker, bystander, attacks, ErrorCode.CORRUPT_MESSAGE)
