"""Request metrics and the request log on a real broker: exact Produce and Fetch requests move Kafka's
RequestMetrics series by their counts and sizes (scraped over HTTP), the network gauges are served by
the broker and the controller, and kafka.request.logger switched at run time through broker-loggers
logs each request, then stops."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from protocol import record_batch
from protocol.api import ApiKey, api
from protocol.frame import encode_request
from tests.support.cluster import Cluster, chroot
from tests.support.metrics import Samples, scrape, total, value
from tests.support.raw_client import RawClient, fetch_request, produce_request
from tools import configs
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

TOPIC = "request-metrics"
COUNT = 5
PRODUCE_VERSION, FETCH_VERSION = 9, 12


@pytest.fixture(scope="module")
def one(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer) -> Iterator[Cluster]:
    """A controller and one broker, shared by the module's tests."""
    connect = chroot(zookeeper_server, "samsa-request-metrics")
    running = Cluster(tmp_path_factory.mktemp("request-metrics"), connect, brokers=1).start()
    try:
        running.create_topic(TOPIC)
        yield running
    finally:
        running.stop()


def _delta(after: Samples, before: Samples, name: str, **labels: str) -> float:
    return (value(after, name, **labels) or 0.0) - (value(before, name, **labels) or 0.0)


def _exchange(client: RawClient, api_key: int, version: int, body: object) -> tuple[int, int, object]:
    """Sends one request; its frame's size, the response frame's size and the response."""
    frame = encode_request(api(api_key), version, 1, "raw-test", body)
    correlation_id = client.send(api_key, version, body, correlation_id=1)
    response_frame = client.read_frame()
    from protocol.frame import decode_response

    received, response = decode_response(response_frame, api(api_key), version)
    assert received == correlation_id
    return len(frame), len(response_frame) + 4, response


def test_produce_and_fetch_move_the_request_metrics_by_their_counts_and_sizes(one: Cluster) -> None:
    broker = one.broker(1)
    assert broker.metrics_url is not None
    before = scrape(broker.metrics_url)
    client = RawClient(broker.bootstrap)
    sizes = {"Produce": [0, 0], "Fetch": [0, 0]}
    try:
        for i in range(COUNT):
            batch = record_batch.encode_batch(
                [record_batch.Record(0, int(time.time() * 1000), b"k", b"v" * (100 + i))], base_offset=0
            )
            sent, received, response = _exchange(
                client, ApiKey.PRODUCE, PRODUCE_VERSION, produce_request(TOPIC, batch)
            )
            assert response.responses[0].partition_responses[0].error_code == 0  # type: ignore[attr-defined]
            sizes["Produce"][0] += sent
            sizes["Produce"][1] += received
        for i in range(COUNT):
            sent, received, _ = _exchange(client, ApiKey.FETCH, FETCH_VERSION, fetch_request(TOPIC, 0, i))
            sizes["Fetch"][0] += sent
            sizes["Fetch"][1] += received
        after = scrape(broker.metrics_url)
    finally:
        client.close()
    for request, version in (("Produce", PRODUCE_VERSION), ("Fetch", FETCH_VERSION)):
        labels = {"request": request}
        assert (
            _delta(
                after, before, "kafka_network_requestmetrics_requests_total", version=str(version), **labels
            )
            == COUNT
        )
        # One partition per request: one NONE per response (the Fetch's top level error code too).
        nones = COUNT * (2 if request == "Fetch" else 1)
        assert (
            _delta(after, before, "kafka_network_requestmetrics_errors_total", error="NONE", **labels)
            == nones
        )
        for histogram in (
            "totaltimems",
            "requestqueuetimems",
            "localtimems",
            "remotetimems",
            "responsesendtimems",
        ):
            name = f"kafka_network_requestmetrics_{histogram}_count"
            assert _delta(after, before, name, **labels) == COUNT, (request, histogram)
        assert (
            _delta(after, before, "kafka_network_requestmetrics_requestbytes_sum", **labels)
            == sizes[request][0]
        )
        assert (
            _delta(after, before, "kafka_network_requestmetrics_responsebytes_sum", **labels)
            == sizes[request][1]
        )
        assert _delta(after, before, "kafka_network_requestmetrics_totaltimems_sum", **labels) > 0
    consumer = {"request": "FetchConsumer", "version": str(FETCH_VERSION)}
    assert _delta(after, before, "kafka_network_requestmetrics_requests_total", **consumer) == COUNT
    assert value(after, "kafka_network_requestmetrics_requests_total", request="FetchFollower") is None
    # The network gauges and the connection counters.
    assert (value(after, "kafka_server_socketserver_connectioncount", listener="PLAINTEXT") or 0) >= 1
    assert (
        _delta(after, before, "kafka_server_socketserver_connectioncreation_total", listener="PLAINTEXT") >= 1
    )
    assert value(after, "kafka_network_requestchannel_requestqueuesize") == 0
    assert value(after, "kafka_network_requestchannel_responsequeuesize") == 0
    for idle in (
        "kafka_network_socketserver_networkprocessoravgidlepercent",
        "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
    ):
        assert 0.0 <= (value(after, idle) or -1) <= 1.0, idle
    # The controller's SocketServer serves the same network metrics.
    controller = one.controllers[min(one.controllers)]
    assert controller.metrics_url is not None
    scraped = scrape(controller.metrics_url)
    assert value(scraped, "kafka_network_socketserver_networkprocessoravgidlepercent") is not None
    assert total(scraped, "kafka_server_socketserver_connectioncount") >= 0
    assert value(scraped, "kafka_network_requestchannel_requestqueuesize") == 0


def _set_request_logger(one: Cluster, level: str) -> None:
    argv = ["--bootstrap-server", one.bootstrap, "--entity-type", "broker-loggers", "--entity-name", "1"]
    assert configs.main([*argv, "--alter", "--add-config", f"kafka.request.logger={level}"]) == 0


def _metadata(one: Cluster, correlation_id: int) -> None:
    from protocol.messages import MetadataRequest

    client = RawClient(one.broker(1).bootstrap)
    try:
        client.send(ApiKey.METADATA, 9, MetadataRequest(topics=[]), correlation_id=correlation_id)
        client.read_frame()
    finally:
        client.close()


def test_the_request_log_follows_kafka_request_logger_switched_at_run_time(one: Cluster) -> None:
    broker = one.broker(1)
    _metadata(one, 424201)
    _set_request_logger(one, "DEBUG")
    try:
        _metadata(one, 424202)
        broker.wait_for_log('"correlationId":424202', timeout=10)
    finally:
        _set_request_logger(one, "WARN")
    _metadata(one, 424203)
    _metadata(one, 424204)
    time.sleep(0.5)
    log = broker.log(since_start=True)
    line = next(line for line in log.splitlines() if '"correlationId":424202' in line)
    assert "Completed request:" in line and '"requestApiKeyName":"METADATA"' in line
    assert '"clientId":"raw-test"' in line and '"principal":"User:ANONYMOUS"' in line
    assert "(kafka.request.logger)" in line and " DEBUG " in line
    for quiet in (424201, 424203, 424204):
        assert f'"correlationId":{quiet}' not in log


def test_a_real_producer_and_consumer_move_every_series_in_step(one: Cluster) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    broker = one.broker(1)
    assert broker.metrics_url is not None
    before = scrape(broker.metrics_url)
    producer = confluent_kafka.Producer({"bootstrap.servers": one.bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce(TOPIC, value=b"m%d" % i)
        producer.flush(10)
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": one.bootstrap, "group.id": "request-metrics", "enable.auto.commit": False}
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, confluent_kafka.OFFSET_BEGINNING)])
        got = 0
        deadline = time.monotonic() + 20
        while got < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got += 1
        assert got >= 10
    finally:
        consumer.close()
    after = scrape(broker.metrics_url)
    requests = "kafka_network_requestmetrics_requests_total"
    produced = total(after, requests, request="Produce") - total(before, requests, request="Produce")
    assert produced >= 10  # one request per flushed message
    errors = "kafka_network_requestmetrics_errors_total"
    assert _delta(after, before, errors, request="Produce", error="NONE") == produced
    assert (
        _delta(after, before, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produced
    )
    fetched = total(after, requests, request="FetchConsumer") - total(
        before, requests, request="FetchConsumer"
    )
    assert fetched >= 1
    assert total(after, requests, request="Fetch") - total(before, requests, request="Fetch") == fetched
    assert (
        _delta(after, before, "kafka_network_requestmetrics_responsebytes_count", request="Fetch") == fetched
    )
