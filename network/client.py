"""NetworkClient: Samsa's own Kafka-protocol client, for the controller's requests to brokers, replica
fetchers and the command-line tools.

One connection to one node. Requests may be pipelined; responses are matched to requests by
correlation id (Kafka answers in order on a connection, which is checked). Any failure of the
connection fails every request in flight with ``ConnectionError`` and the next request reconnects.

Responses are cut out of the stream by a ``FrameReader`` under a ``BufferedProtocol``: small ones are
received several to a read into its stage and copied out, a large one straight into a buffer of its
own from the client's ``FrameBuffers``, and each is decoded in place: the records of a replica
fetcher's large Fetch response reach the log as memoryviews of that buffer, copied by nobody between
the socket and the segment file.
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
from protocol.frame import decode_response, encode_request
from protocol.framing import BadFrameSize, Frame, FrameReader, NeedBuffer
from protocol.messages import Message

log = logging.getLogger(__name__)


class _ResponseReader(asyncio.BufferedProtocol):
    """Cuts the byte stream into response frames."""

    def __init__(
        self,
        on_frame: Callable[[_ResponseReader, bytearray | memoryview], None],
        on_lost: Callable[[_ResponseReader, ConnectionError], None],
        frame_buffers: FrameBuffers,
    ) -> None:
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._frame_buffers = frame_buffers
        self._reader = FrameReader()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCPTransport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        reader = self._reader
        reader.buffer_updated(nbytes)
        while True:
            event = reader.next_event()
            if type(event) is Frame:
                self._on_frame(self, event.data)
            elif type(event) is NeedBuffer:
                reader.receive_into(self._frame_buffers.take(event.size))
            elif type(event) is BadFrameSize:
                self._on_lost(self, ConnectionError(f"a response frame of {event.size} bytes"))
                return
            else:
                return

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
            # asyncio.timeout, never wait_for: Python 3.11's wait_for returns the operation's outcome when
            # a cancel arrives as it finishes, and a retry loop (the replica fetcher) then never ends.
            async with asyncio.timeout(self.connect_timeout):
                transport, _ = await loop.create_connection(lambda: reader, self.host, self.port)
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
            async with asyncio.timeout(self.request_timeout):
                return await future
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
