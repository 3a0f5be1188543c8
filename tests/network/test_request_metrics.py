"""The request metrics (network/request_metrics.py): a request's time points, Kafka's RequestMetrics
histograms and error counts, the response queue, the connection counters and the idle shares, driven
through a Processor and a handler pool with a fake transport (unit tests)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from network.handler_pool import KafkaRequestHandlerPool, Parked
from network.processor import Connection, Processor
from network.request_channel import Request, RequestChannel
from network.request_metrics import LoopIdleSampler, NetworkMetrics, error_counts, is_follower_fetch
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode
from protocol.frame import encode_request
from protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    ProduceResponse,
)
from server_common.metrics import Metrics

VERSIONS = api(ApiKey.API_VERSIONS)
FETCH = api(ApiKey.FETCH)


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closed = False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return {"peername": ("10.0.0.9", 4242), "sockname": ("10.0.0.1", 9092)}.get(name, default)

    def writelines(self, data) -> None:  # type: ignore[override]
        self.written.append(b"".join(bytes(d) for d in data))

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _setup() -> tuple[Connection, FakeTransport, RequestChannel, Metrics]:
    metrics = Metrics(process=False)
    channel = RequestChannel(100)
    processor = Processor(
        0,
        channel,
        lambda key: (VERSIONS, 0, 4) if key == 18 else None,
        1 << 20,
        lambda ip: None,
        network_metrics=NetworkMetrics(metrics),
    )
    connection = Connection(processor, "PLAINTEXT", "10.0.0.9")
    transport = FakeTransport()
    connection.connection_made(transport)
    return connection, transport, channel, metrics


def _feed(connection: Connection, data: bytes) -> None:
    while data:
        buf = connection.get_buffer(len(data))
        n = min(len(buf), len(data))
        buf[:n] = data[:n]
        connection.buffer_updated(n)
        data = data[n:]


def _api_versions(correlation_id: int) -> bytes:
    body = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    return encode_request(VERSIONS, 3, correlation_id, "c", body)


def _sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.sample(name, labels) or 0.0


class _Apis:
    """A request handler answering ApiVersions, after ``delay`` seconds of 'work' when told to."""

    def __init__(self, delay: float = 0.0, park_for: float = 0.0) -> None:
        self.delay = delay
        self.park_for = park_for

    async def handle(self, request: Request) -> Any:
        if self.delay:
            time.sleep(self.delay)  # handler work, on the loop, as a CPU-bound handler
        response = ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=[], throttle_time_ms=7)
        if self.park_for:
            later: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_later(self.park_for, later.set_result, response)
            return Parked(later)
        return response


async def _wait_until(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


async def test_a_request_is_counted_with_its_times_sizes_and_error_codes() -> None:
    connection, transport, channel, metrics = _setup()
    pool = KafkaRequestHandlerPool(channel, _Apis(delay=0.02), 2)
    pool.start()
    try:
        frame = _api_versions(1)
        _feed(connection, frame)
        await _wait_until(lambda: transport.written)
    finally:
        await pool.shutdown()
    labels = {"request": "ApiVersions"}
    assert _sample(metrics, "kafka_network_requestmetrics_requests_total", version="3", **labels) == 1
    assert _sample(metrics, "kafka_network_requestmetrics_errors_total", error="NONE", **labels) == 1
    for name in (
        "totaltimems",
        "requestqueuetimems",
        "localtimems",
        "remotetimems",
        "throttletimems",
        "responsequeuetimems",
        "responsesendtimems",
        "requestbytes",
        "responsebytes",
    ):
        assert _sample(metrics, f"kafka_network_requestmetrics_{name}_count", **labels) == 1, name
    local = _sample(metrics, "kafka_network_requestmetrics_localtimems_sum", **labels)
    total = _sample(metrics, "kafka_network_requestmetrics_totaltimems_sum", **labels)
    assert 20 <= local <= total
    assert _sample(metrics, "kafka_network_requestmetrics_throttletimems_sum", **labels) == 7
    assert _sample(metrics, "kafka_network_requestmetrics_requestbytes_sum", **labels) == len(frame)
    sent = sum(len(w) for w in transport.written)
    assert _sample(metrics, "kafka_network_requestmetrics_responsebytes_sum", **labels) == sent
    assert pool.busy_seconds >= 0.02


async def test_a_parked_response_counts_its_wait_as_remote_time() -> None:
    connection, transport, channel, metrics = _setup()
    pool = KafkaRequestHandlerPool(channel, _Apis(park_for=0.05), 1)
    pool.start()
    try:
        _feed(connection, _api_versions(1))
        await _wait_until(lambda: transport.written)
    finally:
        await pool.shutdown()
    remote = _sample(metrics, "kafka_network_requestmetrics_remotetimems_sum", request="ApiVersions")
    local = _sample(metrics, "kafka_network_requestmetrics_localtimems_sum", request="ApiVersions")
    assert remote >= 45 and local < 45


async def test_a_response_waiting_for_an_earlier_one_counts_response_queue_time() -> None:
    connection, transport, channel, metrics = _setup()
    _feed(connection, _api_versions(1) + _api_versions(2))
    first = await channel.receive_request()
    connection.handled(first)  # parked: the next request goes to the handlers
    second = await channel.receive_request()
    connection.handled(second)
    response = ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=[])
    connection.complete(second, response)
    assert not transport.written and connection.responses_queued() == 1
    await asyncio.sleep(0.03)
    connection.complete(first, response)
    assert len(transport.written) == 1 and connection.responses_queued() == 0
    assert second.response_dequeued_at - second.response_complete_at >= 0.03
    assert first.response_sent_at >= first.response_dequeued_at >= first.response_complete_at
    queued = _sample(metrics, "kafka_network_requestmetrics_responsequeuetimems_sum", request="ApiVersions")
    assert queued >= 30
    assert (
        _sample(metrics, "kafka_network_requestmetrics_requests_total", request="ApiVersions", version="3")
        == 2
    )


async def test_a_request_without_a_response_ends_when_complete() -> None:
    connection, transport, channel, metrics = _setup()
    _feed(connection, _api_versions(1))
    request = await channel.receive_request()
    connection.handled(request)
    connection.complete(request, None)
    assert not transport.written
    assert request.response_sent_at == request.response_complete_at > 0
    labels = {"request": "ApiVersions"}
    assert _sample(metrics, "kafka_network_requestmetrics_totaltimems_count", **labels) == 1
    assert _sample(metrics, "kafka_network_requestmetrics_responsebytes_count", **labels) == 0
    assert _sample(metrics, "kafka_network_requestmetrics_errors_total", error="NONE", **labels) == 0


def _partition(index: int, error: int) -> Any:
    return ProduceResponse.PartitionProduceResponse(index=index, error_code=error)


def test_error_counts_count_each_error_code_field_by_occurrence() -> None:
    response = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name="t",
                partition_responses=[
                    _partition(0, ErrorCode.NONE),
                    _partition(1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
                    _partition(2, ErrorCode.NONE),
                ],
            ),
            ProduceResponse.TopicProduceResponse(
                name="u", partition_responses=[_partition(0, ErrorCode.NOT_LEADER_OR_FOLLOWER)]
            ),
        ]
    )
    assert error_counts(response, 9) == {ErrorCode.NONE: 2, ErrorCode.NOT_LEADER_OR_FOLLOWER: 2}


def test_error_code_fields_absent_from_the_version_are_not_counted() -> None:
    partition = FetchResponse.PartitionData(partition_index=0, error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
    response = FetchResponse(
        error_code=ErrorCode.NONE,
        responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[partition])],
    )
    # v7+ has a top-level error code (FetchResponse's), v0-6 only the partitions'.
    assert error_counts(response, 12) == {ErrorCode.NONE: 1, ErrorCode.OFFSET_OUT_OF_RANGE: 1}
    assert error_counts(response, 4) == {ErrorCode.OFFSET_OUT_OF_RANGE: 1}


def _fetch(connection: Connection, replica_id: int, version: int) -> Request:
    body = FetchRequest(replica_id=replica_id)
    if version >= 15:
        body = FetchRequest(replica_state=FetchRequest.ReplicaState(replica_id=replica_id, replica_epoch=1))
    request = Request(connection, FETCH, version, 1, "c", body, 100, version)
    request.response_sent_at = time.monotonic()
    return request


def test_a_fetch_counts_as_fetch_and_as_fetch_consumer_or_fetch_follower() -> None:
    connection, _, _, metrics = _setup()
    network = connection.processor.network_metrics
    network.record(_fetch(connection, -1, 12))
    network.record(_fetch(connection, 2, 12))
    network.record(_fetch(connection, 3, 15))
    network.record(_fetch(connection, -1, 16))
    requests = "kafka_network_requestmetrics_requests_total"
    assert _sample(metrics, requests, request="Fetch", version="12") == 2
    assert _sample(metrics, requests, request="FetchConsumer", version="12") == 1
    assert _sample(metrics, requests, request="FetchFollower", version="12") == 1
    assert _sample(metrics, requests, request="FetchFollower", version="15") == 1
    assert _sample(metrics, requests, request="FetchConsumer", version="16") == 1
    assert _sample(metrics, "kafka_network_requestmetrics_totaltimems_count", request="FetchFollower") == 2
    assert not is_follower_fetch(None, 0)


def test_connections_created_and_closed_are_counted_by_listener() -> None:
    connection, _, _, metrics = _setup()
    processor = connection.processor
    processor.network_metrics.connection_created("PLAINTEXT")
    connection.connection_lost(None)
    assert _sample(metrics, "kafka_server_socketserver_connectioncreation_total", listener="PLAINTEXT") == 1
    assert _sample(metrics, "kafka_server_socketserver_connectionclose_total", listener="PLAINTEXT") == 1


def test_idle_shares_follow_the_loop_threads_cpu_and_the_handlers_busy_time() -> None:
    busy = [0.0]
    sampler = LoopIdleSampler(lambda: busy[0], lambda: 2, interval=0.01, window=10)
    assert sampler.loop_idle() == 1.0 and sampler.handler_idle() == 1.0  # no window yet
    sampler.sample()
    time.sleep(0.1)  # idle: no CPU used
    sampler.sample()
    assert sampler.loop_idle() > 0.8
    start = time.monotonic()
    while time.monotonic() - start < 0.1:  # busy: the thread spins
        pass
    busy[0] = 0.2  # the two workers were each in handlers 0.1 s of the last ~0.2 s
    sampler.sample()
    assert 0.2 < sampler.loop_idle() < 0.8
    assert sampler.handler_idle() <= sampler.loop_idle()
