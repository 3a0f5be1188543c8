"""The request log (network/request_log.py): kafka.request.logger, off at WARN, a line per completed
request at DEBUG, slow requests at INFO whatever the level, never a request body (unit tests)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from broker.logger_configs import alter_loggers, logger_levels
from network.processor import Connection, Processor
from network.request_channel import Request, RequestChannel
from network.request_log import REQUEST_LOGGER, RequestLog, describe, request_logger
from network.request_metrics import NetworkMetrics
from protocol.api import ApiKey, api
from protocol.messages import SaslAuthenticateRequest
from server_common.metrics import Metrics
from server_common.principal import KafkaPrincipal


@pytest.fixture
def restore_level() -> Iterator[None]:
    level = request_logger.level
    yield
    request_logger.setLevel(level)


def _request(slow_ms: float = 0, total_ms: float = 1.0) -> tuple[Request, NetworkMetrics]:
    network = NetworkMetrics(Metrics(process=False), RequestLog(slow_ms))
    processor = Processor(
        0, RequestChannel(10), lambda key: None, 1 << 20, lambda ip: None, network_metrics=network
    )
    connection = Connection(processor, "SASL_PLAINTEXT", "10.0.0.9")
    connection.peer = "10.0.0.9:4242"
    connection.principal = KafkaPrincipal("User", "alice")
    connection.security = SimpleNamespace(security_protocol="SASL_PLAINTEXT")  # type: ignore[assignment]
    body = SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00hunter2-secret")
    request = Request(connection, api(ApiKey.SASL_AUTHENTICATE), 2, 17, "my-client", body, 64, 2)
    now = time.monotonic()
    request.received_at = now - total_ms / 1000
    request.dequeued_at = request.received_at + 0.0001
    request.api_local_done_at = request.response_complete_at = request.dequeued_at + 0.0002
    request.response_dequeued_at = request.response_complete_at
    request.response_sent_at = now
    request.response_size = 40
    return request, network


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == REQUEST_LOGGER]


def test_the_request_log_is_off_by_default(caplog: pytest.LogCaptureFixture) -> None:
    assert logger_levels()[REQUEST_LOGGER] == "WARN"
    request, network = _request()
    with caplog.at_level(logging.DEBUG):
        request_logger.setLevel(logging.WARNING)
        network.record(request)
    assert not _lines(caplog)


def test_at_debug_every_completed_request_is_one_line_with_kafkas_fields(
    caplog: pytest.LogCaptureFixture, restore_level: None
) -> None:
    request, network = _request(total_ms=5)
    request_logger.setLevel(logging.DEBUG)
    with caplog.at_level(logging.DEBUG):
        network.record(request)
    (record,) = _lines(caplog)
    assert record.levelno == logging.DEBUG
    text = record.getMessage()
    assert text.startswith("Completed request:")
    desc = json.loads(text[len("Completed request:") :])
    assert desc["requestHeader"] == {
        "requestApiKey": 36,
        "requestApiVersion": 2,
        "correlationId": 17,
        "clientId": "my-client",
        "requestApiKeyName": "SASL_AUTHENTICATE",
    }
    assert desc["principal"] == "User:alice" and desc["listener"] == "SASL_PLAINTEXT"
    assert desc["securityProtocol"] == "SASL_PLAINTEXT" and desc["connection"] == "10.0.0.9:4242"
    assert desc["requestSize"] == 64 and desc["responseSize"] == 40
    assert 4.9 <= desc["totalTimeMs"] <= 5.1
    assert desc["requestQueueTimeMs"] == pytest.approx(0.1, abs=0.01)
    assert desc["localTimeMs"] == pytest.approx(0.2, abs=0.01)
    for key in ("remoteTimeMs", "throttleTimeMs", "responseQueueTimeMs", "sendTimeMs"):
        assert key in desc


def test_the_line_never_holds_a_request_body() -> None:
    request, _ = _request()
    line = describe(request, 1, 0, 0, 0, 0, 0)
    assert "hunter2" not in line and "\\u0000" not in line and "auth_bytes" not in line


def test_a_slow_request_is_logged_at_info_whatever_the_level(
    caplog: pytest.LogCaptureFixture, restore_level: None
) -> None:
    request_logger.setLevel(logging.WARNING)
    slow, network = _request(slow_ms=10, total_ms=25)
    fast, _ = _request(slow_ms=10, total_ms=2)
    with caplog.at_level(logging.DEBUG):
        network.record(slow)
        network.record(fast)
    (record,) = _lines(caplog)
    assert record.levelno == logging.INFO and record.getMessage().startswith("Completed request:")
    assert json.loads(record.getMessage().split(":", 1)[1])["totalTimeMs"] >= 25


def test_the_request_logger_is_switched_as_a_broker_logger(restore_level: None) -> None:
    op = SimpleNamespace(name=REQUEST_LOGGER, config_operation=0, value="DEBUG")
    alter_loggers([op], validate_only=False)  # type: ignore[list-item]
    assert RequestLog().enabled and logger_levels()[REQUEST_LOGGER] == "DEBUG"
    op.value = "WARN"
    alter_loggers([op], validate_only=False)  # type: ignore[list-item]
    assert not RequestLog().enabled
