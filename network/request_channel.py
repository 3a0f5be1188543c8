"""The RequestChannel: decoded requests queued from the processors to the handler pool.

A ``Request`` carries everything a handler needs (API, version, header, body, the connection's peer
and listener) and a ``respond`` hook back to its connection, which writes responses in request order.
The queue is bounded by ``queued.max.requests``; a full queue holds the connection back.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol.api import Api
from server_common.principal import KafkaPrincipal

if TYPE_CHECKING:
    from network.processor import Connection


@dataclass(slots=True, eq=False)
class Request:
    connection: Connection
    api: Api
    version: int
    correlation_id: int
    client_id: str | None
    # The decoded request message; None when the client asked for an unsupported version. Its class is
    # the API's (protocol.messages): a handler reads it once, typed: ``body: ProduceRequest = request.body``.
    body: Any
    size: int
    requested_version: int  # differs from ``version`` only for an unsupported ApiVersions, answered in v0
    # Its way through the server, as time.monotonic() seconds (0.0: not reached yet), Kafka's
    # RequestChannel.Request times: read and decoded; taken by a handler; the handler returned (the local
    # work done; a parked response waits after it: the "remote" time); the response ready; the response
    # handed to the socket in full. Set by the network layer (network/processor.py, handler_pool.py).
    received_at: float = field(default_factory=time.monotonic)
    dequeued_at: float = 0.0
    api_local_done_at: float = 0.0
    response_complete_at: float = 0.0
    # The response's turn on its connection: every response before it complete (Kafka's response
    # dequeue time; the response queue time ends, the send time starts).
    response_dequeued_at: float = 0.0
    response_sent_at: float = 0.0
    # For the request metrics and the request log (network/request_metrics.py): the encoded response's
    # size in bytes (0: none) and the response's throttle_time_ms.
    response_size: int = 0
    throttle_time_ms: int = 0
    # Bytes of queued.max.request.bytes its frame holds until it has been handled (0: a small frame).
    reserved: int = 0
    # Filled in by the connection: the encoded response (None: nothing to send) once it is complete.
    response: list | None = None
    completed: bool = False

    @property
    def peer(self) -> str:
        return self.connection.peer

    @property
    def listener(self) -> str:
        return self.connection.listener

    @property
    def principal(self) -> KafkaPrincipal:
        """Who sent the request (``User:ANONYMOUS`` on a listener without authentication)."""
        return self.connection.principal

    @property
    def client_ip(self) -> str:
        return self.connection.client_ip


class RequestChannel:
    """A bounded FIFO of requests between the processors and the handler pool."""

    def __init__(self, queued_max_requests: int) -> None:
        self._queue: asyncio.Queue[Request] = asyncio.Queue(maxsize=queued_max_requests)

    async def send_request(self, request: Request) -> None:
        await self._queue.put(request)

    def try_send_request(self, request: Request) -> bool:
        try:
            self._queue.put_nowait(request)
        except asyncio.QueueFull:
            return False
        return True

    async def receive_request(self) -> Request:
        return await self._queue.get()

    def __len__(self) -> int:
        return self._queue.qsize()
