"""A topic's compression.type honoured in the produce path, in process over real logs: a gzip topic stores
a producer's lz4 batches as gzip, an uncompressed topic stores zstd batches uncompressed, a producer
topic stores the producer's bytes untouched; the rebuilt batch keeps the producer's fields, so an
idempotent retry is still recognised, and is held to max.message.bytes once rebuilt (as Kafka's)."""

from __future__ import annotations

from typing import Any

import pytest

from protocol import record_batch as rb
from protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from protocol.errors import ErrorCode
from tests.broker.test_produce_record_errors import (
    batch,
    log_of,
    partition_response,
    produce,
    respond,
    setup,
)

CODECS = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}


def stored(manager: Any, partition: int = 0) -> bytes:
    return bytes(log_of(manager, partition).read(0, 1 << 20).records)


@pytest.mark.parametrize(
    ("topic", "sent"), [("gzip", LZ4), ("uncompressed", ZSTD), ("zstd", NONE), ("snappy", GZIP)]
)
async def test_the_log_holds_the_topic_codec(logs: Any, topic: str, sent: int) -> None:
    apis, manager = await setup(logs, {"compression.type": topic})
    keys = [b"k%d" % i for i in range(10)]
    response = await respond(apis, produce({0: batch(keys, codec=sent)}))
    assert (partition_response(response).error_code, partition_response(response).base_offset) == (
        ErrorCode.NONE,
        0,
    )
    data = stored(manager)
    header = rb.read_header(data)
    assert header.compression == CODECS[topic]
    assert (header.base_offset, header.last_offset_delta, header.partition_leader_epoch) == (0, 9, 0)
    assert [r.key for r in rb.decode_records(data)] == keys


async def test_a_producer_topic_stores_the_producer_bytes(logs: Any) -> None:
    apis, manager = await setup(logs)
    sent = batch([b"a", b"b"], codec=LZ4)
    assert partition_response(await respond(apis, produce({0: sent}))).error_code == ErrorCode.NONE
    data = stored(manager)
    assert data[61:] == sent[61:]  # the payload as sent; only offsets and epoch were patched
    assert rb.read_header(data).compression == LZ4


async def test_a_rebuilt_idempotent_batch_is_recognised_when_retried(logs: Any) -> None:
    apis, manager = await setup(logs, {"compression.type": "gzip"})
    sent = batch([b"a", b"b", b"c"], codec=LZ4, producer_id=7, producer_epoch=0, base_sequence=0)
    for _ in range(2):
        p = partition_response(await respond(apis, produce({0: sent})))
        assert (p.error_code, p.base_offset) == (ErrorCode.NONE, 0)
    assert log_of(manager).log_end_offset == 3
    header = rb.read_header(stored(manager))
    assert (header.compression, header.producer_id, header.base_sequence) == (GZIP, 7, 0)


async def test_a_batch_larger_than_max_message_bytes_once_decompressed_is_refused(logs: Any) -> None:
    apis, manager = await setup(logs, {"compression.type": "uncompressed", "max.message.bytes": 4096})
    p = partition_response(await respond(apis, produce({0: batch([b"k"] * 400, codec=ZSTD)})))
    assert p.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert log_of(manager).log_end_offset == 0


async def test_only_the_partitions_that_need_it_are_rebuilt(logs: Any) -> None:
    apis, manager = await setup(logs, {"compression.type": "lz4"})
    response = await respond(apis, produce({0: batch([b"a"], codec=GZIP), 1: batch([b"b"], codec=LZ4)}))
    assert [partition_response(response, i).error_code for i in (0, 1)] == [ErrorCode.NONE, ErrorCode.NONE]
    assert rb.read_header(stored(manager, 0)).compression == LZ4
    assert rb.read_header(stored(manager, 1)).compression == LZ4
