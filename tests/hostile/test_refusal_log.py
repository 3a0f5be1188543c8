"""Refused requests in the broker's log (issue 14, item 7): each is logged once with its peer, client id,
API and error, and a client refused in a loop cannot fill the disk — lines are rate-limited and the
next line written says how many were left out."""

from __future__ import annotations

import re
import time

import pytest

from broker.refusals import BURST, PER_SECOND
from protocol import record_batch as rb
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import MetadataRequest
from tests.support.bystander import Bystander
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient, produce_request

pytestmark = pytest.mark.integration

TOPIC = "target"


def _bad_crc() -> bytes:
    buf = bytearray(rb.encode_batch([rb.Record(0, 0, None, b"value", [])], base_offset=0))
    buf[-1] ^= 0xFF
    return bytes(buf)


def _refusals(log: str) -> list[str]:
    return [line for line in log.splitlines() if "refused " in line]


def test_each_refused_request_is_logged_with_peer_client_api_and_error(one_broker: Cluster) -> None:
    one_broker.create_topic(TOPIC, 1)
    client = RawClient(one_broker.bootstrap)
    local_port = client.sock.getsockname()[1]
    too_large = rb.encode_batch([rb.Record(0, 0, None, b"v" * 1_100_000, [])], base_offset=0)
    for records, error in ((_bad_crc(), ErrorCode.CORRUPT_MESSAGE), (too_large, ErrorCode.MESSAGE_TOO_LARGE)):
        response = client.request(ApiKey.PRODUCE, 9, produce_request(TOPIC, records))
        assert response.responses[0].partition_responses[0].error_code == error
    metadata = client.request(
        ApiKey.METADATA, 9, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="no good!")])
    )
    assert metadata.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    client.close()
    lines = _refusals(one_broker.broker(1).log())
    peer = f"from 127.0.0.1:{local_port} (client raw-test)"
    assert [re.search(r"refused (\w+ v\d+) .*?: (\w+)", line).groups() for line in lines] == [
        ("Produce v9", "CORRUPT_MESSAGE"),
        ("Produce v9", "MESSAGE_TOO_LARGE"),
        ("Metadata v9", "INVALID_TOPIC_EXCEPTION"),
    ]
    assert all(peer in line for line in lines), lines
    assert "target-0" in lines[0] and "'no good!'" in lines[2]


def test_a_flood_of_refused_requests_is_rate_limited(one_broker: Cluster, bystander: Bystander) -> None:
    one_broker.create_topic(TOPIC, 1)
    client = RawClient(one_broker.bootstrap)
    request = produce_request(TOPIC, _bad_crc())
    started = time.monotonic()
    for _ in range(2000):
        response = client.request(ApiKey.PRODUCE, 9, request)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
    flood_seconds = time.monotonic() - started
    time.sleep(1.5 / PER_SECOND)  # the bucket refills: the next refusal is written, with the count
    client.request(ApiKey.PRODUCE, 9, request)
    client.close()
    lines = _refusals(one_broker.broker(1).log())
    assert len(lines) <= BURST + PER_SECOND * (flood_seconds + 1.5 / PER_SECOND) + 1, len(lines)
    assert "more refusals not logged" in lines[-1], lines[-1]
    left_out = [int(n) for line in lines for n in re.findall(r"\((\d+) more refusals not logged\)", line)]
    assert sum(left_out) + len(lines) == 2001
    bystander.check(max_pause=1.0)
