"""The metrics registry (server_common/metrics.py): families built at scrape time, and the endpoint."""

from __future__ import annotations

import asyncio

import pytest

from server_common.metrics import Metrics, MetricsHttpServer, parse_metrics_listener


def test_a_counter_child_counts_and_is_exposed_with_total() -> None:
    metrics = Metrics(process=False)
    messages_in = metrics.counter("kafka_server_brokertopicmetrics_messagesin", "Messages in.", ["topic"])
    child = messages_in.labels("t")
    child.inc(3)
    child.inc()
    assert metrics.sample("kafka_server_brokertopicmetrics_messagesin_total", {"topic": "t"}) == 4
    assert b'kafka_server_brokertopicmetrics_messagesin_total{topic="t"} 4.0' in metrics.render()


def test_a_histogram_is_cumulative_when_scraped() -> None:
    metrics = Metrics(process=False)
    times = metrics.histogram("kafka_network_requestmetrics_totaltimems", "Total.", ["request"], [1, 10])
    child = times.labels("Produce")
    for value in (0.5, 1, 5, 50):
        child.observe(value)
    labels = {"request": "Produce"}
    assert metrics.sample("kafka_network_requestmetrics_totaltimems_bucket", {**labels, "le": "1.0"}) == 2
    assert metrics.sample("kafka_network_requestmetrics_totaltimems_bucket", {**labels, "le": "10.0"}) == 3
    assert metrics.sample("kafka_network_requestmetrics_totaltimems_bucket", {**labels, "le": "+Inf"}) == 4
    assert metrics.sample("kafka_network_requestmetrics_totaltimems_count", labels) == 4
    assert metrics.sample("kafka_network_requestmetrics_totaltimems_sum", labels) == 56.5


def test_a_gauge_is_read_when_scraped_with_or_without_labels() -> None:
    metrics = Metrics(process=False)
    state = {"a": 1, "b": 2}
    metrics.gauge("kafka_server_replicamanager_partitioncount", "Partitions.", lambda: len(state))
    metrics.gauge("kafka_log_log_size", "Size.", lambda: [((k,), v) for k, v in state.items()], ["topic"])
    state["c"] = 3
    assert metrics.sample("kafka_server_replicamanager_partitioncount") == 3
    assert metrics.sample("kafka_log_log_size", {"topic": "c"}) == 3


def test_a_broken_gauge_does_not_break_the_scrape() -> None:
    metrics = Metrics(process=False)
    metrics.gauge("broken", "Fails.", lambda: 1 / 0)
    metrics.gauge("fine", "Works.", lambda: 7)
    assert b"fine 7.0" in metrics.render()


def test_a_name_is_defined_once() -> None:
    metrics = Metrics(process=False)
    metrics.counter("x", "X.")
    with pytest.raises(ValueError, match="already defined"):
        metrics.gauge("x", "X again.", lambda: 0)


def test_process_metrics_are_there_by_default() -> None:
    assert Metrics().sample("process_resident_memory_bytes") is not None


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", None), ("http://127.0.0.1:9404", ("127.0.0.1", 9404)), ("http://:0", ("", 0)),
     ("http://[::1]:80/", ("::1", 80))],
)  # fmt: skip
def test_metrics_listener_is_parsed(value: str, expected: tuple[str, int] | None) -> None:
    assert parse_metrics_listener(value) == expected


@pytest.mark.parametrize("value", ["127.0.0.1:9404", "http://host", "https://h:1", "http://h:99999"])
def test_a_bad_metrics_listener_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match=r"metrics\.listener"):
        parse_metrics_listener(value)


async def _get(port: int, path: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    answer = await reader.read()
    writer.close()
    return answer


async def test_the_endpoint_serves_metrics_and_404_elsewhere() -> None:
    metrics = Metrics(process=False)
    metrics.gauge("kafka_controller_kafkacontroller_activecontrollercount", "Active.", lambda: 1)
    server = MetricsHttpServer(metrics, "127.0.0.1", 0)
    port = await server.start()
    try:
        answer = await _get(port, "/metrics")
        assert answer.startswith(b"HTTP/1.0 200 OK")
        assert b"kafka_controller_kafkacontroller_activecontrollercount 1.0" in answer
        assert (await _get(port, "/nothing")).startswith(b"HTTP/1.0 404")
    finally:
        await server.stop()
