"""The network server against a real ``samsa broker`` process: framing, ordering, limits, bad input."""

from __future__ import annotations

import os
import signal
import socket
import struct
import time
from pathlib import Path

import pytest

from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsRequest, MetadataRequest
from tests.support.cluster import lone_broker
from tests.support.raw_client import RawClient
from tools.local_cluster import BrokerNode, LocalClusterError

pytestmark = pytest.mark.integration

API_VERSIONS, METADATA = ApiKey.API_VERSIONS, ApiKey.METADATA


def _still_serving(broker: BrokerNode) -> None:
    client = RawClient(broker.bootstrap)
    response = client.request(METADATA, 12, MetadataRequest(topics=None))
    assert [b.node_id for b in response.brokers] == [broker.broker_id]
    client.close()


@pytest.mark.parametrize("version", range(5))
def test_api_versions_every_version(broker: BrokerNode, version: int) -> None:
    client = RawClient(broker.bootstrap)
    response = client.request(
        API_VERSIONS, version, ApiVersionsRequest(client_software_name="t", client_software_version="1")
    )
    assert response.error_code == ErrorCode.NONE
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised[API_VERSIONS] == (0, 4)
    assert advertised[METADATA] == (0, 12)
    # Produce is advertised from v0 (old librdkafka compresses only then) though served from v3.
    assert advertised[ApiKey.PRODUCE] == (0, 11)
    # A Kafka 3.9 broker in ZooKeeper mode supports and has finalized no feature.
    assert not response.supported_features and not response.finalized_features


@pytest.mark.parametrize(
    ("software", "tagged"),
    [(("librdkafka", "2.0.2"), False), (("librdkafka", "2.16.0"), True), (("t", "1"), True)],
)
def test_api_versions_v3_reply_carries_feature_tags_except_to_librdkafka_before_2_2(
    broker: BrokerNode, software: tuple[str, str], tagged: bool
) -> None:
    client = RawClient(broker.bootstrap)
    name, version = software
    client.send(
        API_VERSIONS, 3, ApiVersionsRequest(client_software_name=name, client_software_version=version)
    )
    frame = client.read_frame()
    # header v0 (correlation id), error, compact array of N entries each ending with an empty tag buffer,
    # throttle time, then the body's tag buffer: empty (one zero byte, the frame's last) for old
    # librdkafka, which mis-skips tags; else the finalized-features epoch and the (empty) feature lists.
    count = frame[6] - 1
    untagged = 4 + 2 + 1 + count * 7 + 4 + 1
    if tagged:
        assert len(frame) > untagged and frame[untagged - 1] > 0
    else:
        assert len(frame) == untagged and frame[-1] == 0


def test_too_new_api_versions_gets_unsupported_version_in_v0(broker: BrokerNode) -> None:
    client = RawClient(broker.bootstrap)
    # ApiVersions v9 does not exist; its header is v2 and its body is anything.
    header = struct.pack(">hhih", API_VERSIONS, 9, 77, 4) + b"test" + b"\x00"
    client.send_frame(struct.pack(">i", len(header) + 3) + header + b"\x01\x01\x00")
    frame = client.read_frame()
    correlation_id, error, count = struct.unpack_from(">ihi", frame)
    assert (correlation_id, error, count) == (77, ErrorCode.UNSUPPORTED_VERSION, 1)
    assert struct.unpack_from(">hhh", frame, 10) == (API_VERSIONS, 0, 4)
    assert len(frame) == 16  # v0 schema: no throttle time
    # The client retries lower on the same connection.
    assert client.request(API_VERSIONS, 4, ApiVersionsRequest()).error_code == ErrorCode.NONE


def test_pipelined_requests_are_answered_in_order(broker: BrokerNode) -> None:
    from protocol.api import api
    from protocol.frame import encode_request

    client = RawClient(broker.bootstrap)
    frames, expected = [], []
    for i in range(200):
        key, version = (API_VERSIONS, i % 5) if i % 2 else (METADATA, i % 13)
        body = ApiVersionsRequest() if key == API_VERSIONS else MetadataRequest(topics=[])
        frames.append(encode_request(api(key), version, 1000 + i, "pipeline", body))
        expected.append((key, version, 1000 + i))
    client.send_frame(b"".join(frames))
    for key, version, correlation_id in expected:
        received, _ = client.receive(key, version)
        assert received == correlation_id


def test_a_request_sent_one_byte_at_a_time(broker: BrokerNode) -> None:
    from protocol.api import api
    from protocol.frame import encode_request

    client = RawClient(broker.bootstrap)
    client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for byte in encode_request(api(METADATA), 9, 5, "slow", MetadataRequest(topics=None)):
        client.sock.sendall(bytes([byte]))
    assert client.receive(METADATA, 9)[0] == 5


def test_a_large_request_spanning_many_reads(broker: BrokerNode) -> None:
    topics = [MetadataRequest.MetadataRequestTopic(name=f"topic-{i:06d}-" + "x" * 100) for i in range(3000)]
    request = MetadataRequest(topics=topics, allow_auto_topic_creation=False)
    response = RawClient(broker.bootstrap).request(METADATA, 4, request)
    assert len(response.topics) == 3000
    assert {t.error_code for t in response.topics} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_metadata_flags_invalid_topic_names(broker: BrokerNode) -> None:
    names = ["ok-topic", "bad/name", "", "x" * 250, ".."]
    topics = [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
    request = MetadataRequest(topics=topics, allow_auto_topic_creation=False)
    response = RawClient(broker.bootstrap).request(METADATA, 8, request)
    errors = {t.name: t.error_code for t in response.topics}
    assert errors["ok-topic"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    for bad in names[1:]:
        assert errors[bad] == ErrorCode.INVALID_TOPIC_EXCEPTION


BAD_INPUTS = {
    "2GB length prefix": struct.pack(">i", 2**31 - 1) + b"\x00\x03",
    "negative length": struct.pack(">i", -5),
    "zero length": struct.pack(">i", 0),
    "shorter than a header": struct.pack(">i", 3) + b"\x00\x03\x00",
    "unknown api key": struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1),
    "unsupported Metadata version": struct.pack(">i", 10) + struct.pack(">hhih", METADATA, 13, 1, -1),
    "unsupported Produce version": struct.pack(">i", 10) + struct.pack(">hhih", 0, 2, 1, -1),
    "unparseable body": struct.pack(">i", 14)
    + struct.pack(">hhih", METADATA, 1, 1, -1)
    + b"\x7f\xff\xff\xff",
    "garbage": struct.pack(">i", 64) + os.urandom(64),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_closes_the_connection_and_is_logged(broker: BrokerNode, name: str) -> None:
    client = RawClient(broker.bootstrap)
    local_port = client.sock.getsockname()[1]
    client.send_frame(BAD_INPUTS[name])
    if name == "garbage" and not client.is_closed_by_peer(0.5):
        pytest.skip("these random bytes happened to form a valid request")  # astronomically unlikely
    assert client.is_closed_by_peer()
    _still_serving(broker)
    deadline = time.monotonic() + 5
    while f"127.0.0.1:{local_port}" not in broker.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert f"closing connection from 127.0.0.1:{local_port}" in broker.log()


def test_truncated_frame_then_disconnect(broker: BrokerNode) -> None:
    client = RawClient(broker.bootstrap)
    client.send_frame(struct.pack(">i", 100) + b"\x00\x03\x00\x01")
    client.close()
    _still_serving(broker)


def test_huge_frames_are_not_buffered(broker: BrokerNode) -> None:
    # Many clients each announcing a 100 MB request and sending a little of it: the broker must not
    # allocate 100 MB per connection before the bytes arrive.
    clients = [RawClient(broker.bootstrap) for _ in range(30)]
    for c in clients:
        c.send_frame(struct.pack(">i", 104857600) + b"\x00\x03\x00\x01" + b"\x00" * 70000)
    time.sleep(0.5)
    rss_kb = int(Path(f"/proc/{broker.process.pid}/status").read_text().split("VmRSS:")[1].split()[0])
    assert rss_kb < 400_000, f"broker RSS {rss_kb} kB"
    _still_serving(broker)


def test_a_flood_of_connections(broker: BrokerNode) -> None:
    clients = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(400)]
    _still_serving(broker)
    for c in clients:
        c.close()
    _still_serving(broker)


@pytest.fixture
def limited_broker(tmp_path: Path, zookeeper: str, request: pytest.FixtureRequest):
    with lone_broker(tmp_path / "limited", zookeeper, request.param) as started:
        yield started


@pytest.mark.parametrize("limited_broker", [{"max.connections.per.ip": "3"}], indirect=True)
def test_max_connections_per_ip(limited_broker: BrokerNode) -> None:
    # One at a time, each answered before the next connects: the harness's readiness probe (connected
    # and closed at once) counts until the broker has read its end, and three connections accepted in
    # the same turn of the loop as the probe would make four.
    clients = []
    for _ in range(3):
        clients.append(RawClient(limited_broker.bootstrap))
        assert clients[-1].request(API_VERSIONS, 3, ApiVersionsRequest()).error_code == 0
    extra = RawClient(limited_broker.bootstrap)
    assert extra.is_closed_by_peer()
    assert "max.connections.per.ip" in limited_broker.log()
    clients[0].close()
    # A new connection is let in once the broker has read the closed one's end.
    deadline = time.monotonic() + 10
    while True:
        try:
            again = RawClient(limited_broker.bootstrap)
            assert again.request(API_VERSIONS, 3, ApiVersionsRequest()).error_code == 0
            break
        except ConnectionError:
            assert time.monotonic() < deadline, "no connection let in after one closed"
            time.sleep(0.05)


@pytest.mark.parametrize("limited_broker", [{"max.connections": "2"}], indirect=True)
def test_max_connections_holds_new_connections_back(limited_broker: BrokerNode) -> None:
    first, second = RawClient(limited_broker.bootstrap), RawClient(limited_broker.bootstrap)
    for c in (first, second):
        assert c.request(API_VERSIONS, 3, ApiVersionsRequest()).error_code == 0
    waiting = RawClient(limited_broker.bootstrap)  # completes in the kernel's backlog
    waiting.send(API_VERSIONS, 3, ApiVersionsRequest())
    waiting.sock.settimeout(0.5)
    with pytest.raises(TimeoutError):
        waiting.sock.recv(1)
    first.close()
    waiting.sock.settimeout(5)
    assert waiting.receive(API_VERSIONS, 3)[1].error_code == 0


@pytest.mark.parametrize("limited_broker", [{"connections.max.idle.ms": "300"}], indirect=True)
def test_idle_connections_are_closed(limited_broker: BrokerNode) -> None:
    idle = RawClient(limited_broker.bootstrap)
    busy = RawClient(limited_broker.bootstrap)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        busy.request(API_VERSIONS, 3, ApiVersionsRequest())
        time.sleep(0.05)
    assert idle.is_closed_by_peer(timeout=2)
    assert busy.request(API_VERSIONS, 3, ApiVersionsRequest()).error_code == 0


def test_sigterm_shuts_down_cleanly(broker: BrokerNode) -> None:
    client = RawClient(broker.bootstrap)
    os.kill(broker.process.pid, signal.SIGTERM)
    assert broker.process.wait(10) == 0
    assert client.is_closed_by_peer()
    assert "shut down completed" in broker.log()


def test_a_bad_config_fails_at_start_naming_the_setting(tmp_path: Path, zookeeper: str) -> None:
    bad = {"num.io.threads": "zero"}
    with (
        pytest.raises(LocalClusterError, match=r"num\.io\.threads"),
        lone_broker(tmp_path / "bad", zookeeper, bad),
    ):
        pass
