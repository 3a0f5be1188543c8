"""NetworkClient: Samsa's own Kafka-protocol client, for the controller's requests to brokers, replica
fetchers and the command-line tools.

One connection to one node. Requests may be pipelined; responses are matched to requests by
correlation id (Kafka answers in order on a connection, which is checked). Any failure of the
connection fails every request in flight with ``ConnectionError`` and the next request reconnects.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from typing import Any

from protocol.api import Api
from protocol.frame import SIZE, decode_response, encode_request
from protocol.messages import Message

log = logging.getLogger(__name__)


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
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._in_flight: deque[tuple[int, Api, int, asyncio.Future]] = deque()
        self._correlation_ids = itertools.count(1)
        self._receiver: asyncio.Task | None = None
        self._connecting: asyncio.Lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def _connect(self) -> None:
        async with self._connecting:
            if self.connected:
                return
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self.connect_timeout
            )
            self._receiver = asyncio.get_running_loop().create_task(self._receive_loop())

    async def send(self, api: Api, version: int, body: Message, *, expect_response: bool = True) -> Any:
        """Sends a request and returns the decoded response body (None when ``expect_response`` is
        false, as for acks=0 Produce)."""
        if not self.connected:
            await self._connect()
        assert self._writer is not None
        correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
        frame = encode_request(api, version, correlation_id, self.client_id, body)
        future: asyncio.Future | None = None
        if expect_response:
            future = asyncio.get_running_loop().create_future()
            self._in_flight.append((correlation_id, api, version, future))
        self._writer.write(frame)
        if future is None:
            await self._writer.drain()
            return None
        try:
            return await asyncio.wait_for(future, self.request_timeout)
        except TimeoutError:
            self._fail(
                TimeoutError(
                    f"{api.name} to {self.host}:{self.port} timed out after {self.request_timeout} s"
                )
            )
            raise

    async def _receive_loop(self) -> None:
        reader = self._reader
        assert reader is not None
        try:
            while True:
                size = SIZE.unpack(await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                if not self._in_flight:
                    raise ConnectionError("a response arrived with no request in flight")
                expected, api, version, future = self._in_flight.popleft()
                correlation_id, body = decode_response(frame, api, version)
                if correlation_id != expected:
                    raise ConnectionError(
                        f"correlation id {correlation_id} answered where {expected} was due"
                    )
                if not future.done():
                    future.set_result(body)
        except (asyncio.IncompleteReadError, ConnectionError, OSError, ValueError) as e:
            self._fail(
                ConnectionError(f"connection to {self.host}:{self.port} failed: {e or type(e).__name__}")
            )
        except asyncio.CancelledError:
            self._fail(ConnectionError("client closed"))
            raise

    def _fail(self, error: Exception) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
        while self._in_flight:
            _, _, _, future = self._in_flight.popleft()
            if not future.done():
                future.set_exception(error)
        receiver, self._receiver = self._receiver, None
        if receiver is not None and receiver is not asyncio.current_task():
            receiver.cancel()

    async def close(self) -> None:
        receiver = self._receiver
        self._fail(ConnectionError("client closed"))
        if receiver is not None:
            try:
                await receiver
            except (asyncio.CancelledError, ConnectionError):
                pass
