"""NetworkClient: Samsa's own Kafka-protocol client, for the controller's requests to brokers, replica
fetchers and the command-line tools.

One connection to one node. Requests may be pipelined; responses are matched to requests by
correlation id (Kafka answers in order on a connection, which is checked). Any failure of the
connection fails every request in flight with ``ConnectionError`` and the next request reconnects.

Responses are received by a ``BufferedProtocol`` straight into a buffer of the frame's size (a large
one from the client's ``FrameBuffers``), and decoded in place: the records of a replica fetcher's Fetch
response reach the log as memoryviews of that buffer, copied by nobody between the socket and the
segment file.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from network.frame_buffers import FrameBuffers
from protocol.api import Api
from protocol.frame import SIZE, decode_response, encode_request
from protocol.messages import Message

log = logging.getLogger(__name__)

_SMALL_FRAME = 64 * 1024  # below this a response gets a bytearray of its own; above, a pooled mapping


class _ResponseReader(asyncio.BufferedProtocol):
    """Cuts the byte stream into response frames, each read into a buffer of its own size."""

    def __init__(
        self,
        on_frame: Callable[[_ResponseReader, bytearray | memoryview], None],
        on_lost: Callable[[_ResponseReader, ConnectionError], None],
        frame_buffers: FrameBuffers,
    ) -> None:
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._frame_buffers = frame_buffers
        self._size = bytearray(SIZE.size)
        self._frame: bytearray | memoryview | None = None
        self._filled = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCPTransport

    def get_buffer(self, sizehint: int) -> memoryview:
        target = self._size if self._frame is None else self._frame
        return memoryview(target)[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        self._filled += nbytes
        if self._frame is None:
            if self._filled < SIZE.size:
                return
            size = SIZE.unpack(self._size)[0]
            if size < 0:
                self._on_lost(self, ConnectionError(f"a response frame of {size} bytes"))
                return
            frame = bytearray(size) if size < _SMALL_FRAME else self._frame_buffers.take(size)
            self._frame, self._filled = frame, 0
            if size:
                return
        if self._filled == len(self._frame):
            frame, self._frame, self._filled = self._frame, None, 0
            self._on_frame(self, frame)

    def eof_received(self) -> bool:
        return False  # the transport closes; connection_lost reports it

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost(self, ConnectionError(f"connection lost: {exc or 'closed by the peer'}"))


class NetworkClient:
    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        *,
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self._transport: asyncio.Transport | None = None
        self._in_flight: deque[tuple[int, Api, int, asyncio.Future]] = deque()
        self._correlation_ids = itertools.count(1)
        self._connecting: asyncio.Lock = asyncio.Lock()
        self._frame_buffers = FrameBuffers()

    @property
    def connected(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    async def _connect(self) -> None:
        async with self._connecting:
            if self.connected:
                return
            reader = _ResponseReader(self._on_frame, self._on_lost, self._frame_buffers)
            loop = asyncio.get_running_loop()
            transport, _ = await asyncio.wait_for(
                loop.create_connection(lambda: reader, self.host, self.port), self.connect_timeout
            )
            self._transport = transport  # type: ignore[assignment]

    async def send(self, api: Api, version: int, body: Message, expect_response: bool = True) -> Any:
        """Sends a request and returns the decoded response body (None when ``expect_response`` is
        false, as for acks=0 Produce)."""
        if not self.connected:
            await self._connect()
        transport = self._transport
        assert transport is not None
        correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
        frame = encode_request(api, version, correlation_id, self.client_id, body)
        if not expect_response:
            transport.write(frame)
            return None
        future = asyncio.get_running_loop().create_future()
        self._in_flight.append((correlation_id, api, version, future))
        transport.write(frame)
        try:
            return await asyncio.wait_for(future, self.request_timeout)
        except TimeoutError:
            self._fail(
                TimeoutError(
                    f"{api.name} to {self.host}:{self.port} timed out after {self.request_timeout} s"
                )
            )
            raise

    def _current(self, reader: _ResponseReader) -> bool:
        # A connection already given up on may still report; it must not touch its successor.
        return reader.transport is not None and reader.transport is self._transport

    def _on_frame(self, reader: _ResponseReader, frame: bytearray | memoryview) -> None:
        if not self._current(reader):
            return
        if not self._in_flight:
            self._on_lost(reader, ConnectionError("a response arrived with no request in flight"))
            return
        expected, api, version, future = self._in_flight[0]
        try:
            correlation_id, body = decode_response(frame, api, version)
        except ValueError as e:
            self._on_lost(reader, ConnectionError(f"a response that does not parse: {e}"))
            return
        if correlation_id != expected:
            self._on_lost(
                reader, ConnectionError(f"correlation id {correlation_id} answered where {expected} was due")
            )
            return
        self._in_flight.popleft()  # only now: a failure above fails this request with the others
        if not future.done():
            future.set_result(body)

    def _on_lost(self, reader: _ResponseReader, error: ConnectionError) -> None:
        if self._current(reader):
            self._fail(ConnectionError(f"connection to {self.host}:{self.port} failed: {error}"))

    def _fail(self, error: Exception) -> None:
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()
        while self._in_flight:
            _, _, _, future = self._in_flight.popleft()
            if not future.done():
                future.set_exception(error)

    async def close(self) -> None:
        self._fail(ConnectionError("client closed"))
