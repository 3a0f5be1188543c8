"""The request log: Kafka's ``kafka.request.logger``, one line per completed request.

Off by default: the logger's level is WARN, as Kafka's log4j.properties sets it. At DEBUG (switched at
run time with ``samsa configs --entity-type broker-loggers --entity-name <id> --alter --add-config
kafka.request.logger=DEBUG``, or SAMSA_LOG_LEVEL / a logging setup at start) every request, once its
response has been handed to the socket (a request without a response: once it is complete), is logged
as Kafka 3.9's RequestChannel logs it: ``Completed request:`` and a JSON object with the request header,
the connection, the time breakdown in milliseconds (totalTimeMs, requestQueueTimeMs, localTimeMs,
remoteTimeMs, throttleTimeMs, responseQueueTimeMs, sendTimeMs), the security protocol, the principal and
the listener. Kafka also writes the request and response bodies as JSON; Samsa writes their sizes
instead (``requestSize``, ``responseSize``): no body, so no password, SASL token or record data ever
reaches the log.

``samsa.request.log.slow.ms`` (a broker setting, 0 = off): a request whose total time is at least that
many milliseconds is logged at INFO whatever the logger's level (the same line).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from protocol.api import ApiKey

if TYPE_CHECKING:
    from network.request_channel import Request

REQUEST_LOGGER = "kafka.request.logger"
SLOW_SETTING = "samsa.request.log.slow.ms"

request_logger = logging.getLogger(REQUEST_LOGGER)
if request_logger.level == logging.NOTSET:
    request_logger.setLevel(logging.WARNING)  # Kafka's log4j.properties: kafka.request.logger=WARN


class RequestLog:
    """Writes the request log lines of one SocketServer."""

    def __init__(self, slow_ms: float = 0, logger: logging.Logger = request_logger) -> None:
        self.slow_ms = slow_ms
        self.logger = logger

    @property
    def enabled(self) -> bool:
        """Every request is logged (the logger is at DEBUG or below)."""
        return self.logger.isEnabledFor(logging.DEBUG)

    def log(
        self,
        request: Request,
        total_ms: float,
        queue_ms: float,
        local_ms: float,
        remote_ms: float,
        response_queue_ms: float,
        send_ms: float,
    ) -> None:
        slow = bool(self.slow_ms) and total_ms >= self.slow_ms
        if not slow and not self.enabled:
            return
        line = "Completed request:" + describe(
            request, total_ms, queue_ms, local_ms, remote_ms, response_queue_ms, send_ms
        )
        logger = self.logger
        if slow:
            # INFO whatever the logger's level: handle() passes the record to the handlers directly.
            if not logger.disabled:
                logger.handle(logger.makeRecord(logger.name, logging.INFO, __file__, 0, line, (), None))
        else:
            logger.debug(line)


def _ms(value: float) -> float:
    # Kafka's nanosToMs: milliseconds with microsecond precision, never negative.
    return round(max(value, 0.0), 3)


def describe(
    request: Request,
    total_ms: float,
    queue_ms: float,
    local_ms: float,
    remote_ms: float,
    response_queue_ms: float,
    send_ms: float,
) -> str:
    """The JSON of one request log line (Kafka's RequestConvertToJson.requestDescMetrics, bodies left out)."""
    connection = request.connection
    api = request.api
    header: dict[str, object] = {
        "requestApiKey": api.key,
        "requestApiVersion": request.requested_version,
        "correlationId": request.correlation_id,
        "clientId": request.client_id,
        "requestApiKeyName": _kafka_api_key_name(api.key, api.name),
    }
    desc = {
        "isForwarded": False,
        "requestHeader": header,
        "connection": _connection_id(connection),
        "totalTimeMs": _ms(total_ms),
        "requestQueueTimeMs": _ms(queue_ms),
        "localTimeMs": _ms(local_ms),
        "remoteTimeMs": _ms(remote_ms),
        "throttleTimeMs": request.throttle_time_ms,
        "responseQueueTimeMs": _ms(response_queue_ms),
        "sendTimeMs": _ms(send_ms),
        "securityProtocol": connection.security.security_protocol,
        "principal": str(connection.principal),
        "listener": connection.listener,
        "requestSize": request.size,
        "responseSize": request.response_size,
    }
    return json.dumps(desc, separators=(",", ":"), ensure_ascii=False)


def _kafka_api_key_name(key: int, name: str) -> str:
    """ApiKeys' enum name (PRODUCE, LIST_OFFSETS), as Kafka's requestApiKeyName."""
    try:
        return ApiKey(key).name
    except ValueError:
        return name


def _connection_id(connection: object) -> str:
    """Kafka's connection id, ``local address-peer address`` (Kafka adds an index)."""
    peer = getattr(connection, "peer", "")
    transport = getattr(connection, "transport", None)
    local = transport.get_extra_info("sockname") if transport is not None else None
    if isinstance(local, tuple) and len(local) >= 2:
        return f"{local[0]}:{local[1]}-{peer}"
    return str(peer)
