"""KIP-937's bounds on every record, on a real broker: a raw Produce of a batch whose first and largest
timestamps are within message.timestamp.before.max.ms but whose middle record (a negative timestamp
delta) is too old gets INVALID_TIMESTAMP naming that record's index (KIP-467), uncompressed or zstd
(checked on the broker's executor thread), and nothing is appended; the same batch within bounds is."""

from __future__ import annotations

import time
from typing import Any

import pytest

from protocol import record_batch as rb
from protocol.api import ApiKey
from protocol.compression import NONE, ZSTD
from protocol.errors import ErrorCode
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient, produce_request

pytestmark = pytest.mark.integration

HOUR = 3_600_000
PRODUCE_VERSION = 11


def _batch(timestamps: list[int], codec: int) -> bytes:
    records = [rb.Record(i, ts, b"k", b"value-%d" % i) for i, ts in enumerate(timestamps)]
    return rb.encode_batch(records, base_offset=0, compression=codec)


def _produce(client: RawClient, topic: str, records: bytes) -> Any:
    response: Any = client.request(ApiKey.PRODUCE, PRODUCE_VERSION, produce_request(topic, records))
    [p] = response.responses[0].partition_responses
    return p


def test_a_middle_record_older_than_before_max_ms_is_refused_by_index(one_broker: Cluster) -> None:
    topic = "bounded-middle"
    one_broker.create_topic(topic, 1, 1, {"message.timestamp.before.max.ms": HOUR})
    client = RawClient(one_broker.bootstrap)
    try:
        for codec in (NONE, ZSTD):
            now = int(time.time() * 1000)
            old = now - 2 * HOUR
            p = _produce(client, topic, _batch([now, old, now], codec))
            assert (p.error_code, p.base_offset) == (ErrorCode.INVALID_TIMESTAMP, -1)
            assert p.error_message == "One or more records have been rejected due to invalid timestamp"
            [error] = p.record_errors
            assert error.batch_index == 1
            assert error.batch_index_error_message.startswith(
                f"Timestamp {old} of message with offset 1 is out of range."
            )
        now = int(time.time() * 1000)
        p = _produce(client, topic, _batch([now, now - HOUR // 2, now], ZSTD))
        assert (p.error_code, p.base_offset) == (ErrorCode.NONE, 0)  # nothing was appended before
    finally:
        client.close()
