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
import random
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from network.client_security import ClientSecurity
from network.frame_buffers import FrameBuffers
from network.sasl_mechanisms import SaslFailure, sasl_client
from protocol.api import Api, ApiKey, api
from protocol.errors import ErrorCode
from protocol.frame import decode_response, encode_request
from protocol.framing import BadFrameSize, Frame, FrameReader, NeedBuffer
from protocol.messages import Message, SaslAuthenticateRequest, SaslHandshakeRequest

log = logging.getLogger(__name__)

# The SASL step (Kafka's SaslClientAuthenticator): SaslHandshake v1, then SaslAuthenticate v1 (tokens in
# Kafka requests, with the session lifetime of KIP-368) — versions every Kafka since 2.2 serves.
_SASL_HANDSHAKE = api(ApiKey.SASL_HANDSHAKE)
_SASL_AUTHENTICATE = api(ApiKey.SASL_AUTHENTICATE)
_SASL_VERSION = 1
# KIP-368: a client re-authenticates at a random point between 85% and 95% of the session's lifetime.
_REAUTH_WINDOW = (0.85, 0.95)


class SaslAuthenticationError(ConnectionError):
    """The SASL exchange failed (wrong credentials, a mechanism the server does not enable)."""


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
        security: ClientSecurity | None = None,
    ) -> None:
        """``security``: the listener's security protocol and what the client needs for it (TLS
        context, SASL credentials); None is PLAINTEXT."""
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security = security or ClientSecurity()
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self._transport: asyncio.Transport | None = None
        self._in_flight: deque[tuple[int, Api, int, asyncio.Future]] = deque()
        self._correlation_ids = itertools.count(1)
        self._connecting: asyncio.Lock = asyncio.Lock()
        self._frame_buffers = FrameBuffers()
        # False while the connection authenticates (SASL): requests other than the exchange's wait.
        self._ready = False
        self._reauthenticate_at: float | None = None  # time.monotonic(), for a SASL session that expires

    @property
    def connected(self) -> bool:
        return self._ready and self._transport is not None and not self._transport.is_closing()

    async def _connect(self) -> None:
        async with self._connecting:
            if self.connected:
                return
            reader = _ResponseReader(self._on_frame, self._on_lost, self._frame_buffers)
            loop = asyncio.get_running_loop()
            # asyncio.timeout, never wait_for: Python 3.11's wait_for returns the operation's outcome when
            # a cancel arrives as it finishes, and a retry loop (the replica fetcher) then never ends.
            security = self.security
            async with asyncio.timeout(self.connect_timeout):
                if security.ssl_context is not None:
                    # The TLS handshake is part of the connect (and of its timeout); the server's
                    # certificate must name self.host when the context checks host names.
                    transport, _ = await loop.create_connection(
                        lambda: reader,
                        self.host,
                        self.port,
                        ssl=security.ssl_context,
                        server_hostname=security.server_hostname(self.host),
                        ssl_handshake_timeout=self.connect_timeout,
                    )
                else:
                    transport, _ = await loop.create_connection(lambda: reader, self.host, self.port)
            self._transport = transport  # type: ignore[assignment]
            if security.uses_sasl:
                await self._authenticate()
            self._ready = True

    async def _authenticate(self) -> None:
        """The SASL exchange on the connection just made (or, KIP-368, on the authenticated one whose
        session is to expire): SaslHandshake, then SaslAuthenticate until the mechanism completes.
        SaslAuthenticationError (the connection closed) when the server refuses."""
        security = self.security
        mechanism, username, password = security.sasl_mechanism, security.username, security.password
        assert mechanism is not None and username is not None and password is not None
        where = f"{self.host}:{self.port}"
        try:
            client = sasl_client(mechanism, username, password)
            await self._sasl_request(
                _SASL_HANDSHAKE,
                SaslHandshakeRequest(mechanism=mechanism),
                f"SASL handshake with {where}",
                lambda handshake: (
                    f"it enables {', '.join(handshake.mechanisms) or 'no mechanism'}, not {mechanism}"
                ),
            )
            token: bytes | None = client.initial_response()
            while True:
                assert token is not None
                response = await self._sasl_request(
                    _SASL_AUTHENTICATE,
                    SaslAuthenticateRequest(auth_bytes=token),
                    f"SASL {mechanism} authentication of {username!r} with {where}",
                    lambda refused: str(refused.error_message),
                )
                token = client.evaluate_challenge(response.auth_bytes)
                if client.complete:
                    break
                if token is None:
                    raise SaslAuthenticationError(f"SASL {mechanism} exchange with {where} ended incomplete")
        except SaslFailure as e:  # the server's messages do not check out
            error = SaslAuthenticationError(f"SASL {mechanism} authentication with {where} failed: {e}")
            self._fail(error)
            raise error from None
        except BaseException as e:
            self._fail(e if isinstance(e, ConnectionError) else ConnectionError(f"SASL with {where}: {e}"))
            raise
        lifetime_ms = response.session_lifetime_ms
        self._reauthenticate_at = None
        if lifetime_ms > 0:
            self._reauthenticate_at = time.monotonic() + lifetime_ms / 1000 * random.uniform(*_REAUTH_WINDOW)

    async def _sasl_request(
        self, sasl_api: Api | None, body: Message, what: str, why: Callable[[Any], str]
    ) -> Any:
        """One request of the SASL exchange; SaslAuthenticationError ``<what> failed (<error>):
        <why(response)>`` when the response carries an error."""
        assert sasl_api is not None
        response = await self._request(sasl_api, _SASL_VERSION, body)
        if response.error_code != ErrorCode.NONE:
            raise SaslAuthenticationError(
                f"{what} failed ({ErrorCode(response.error_code).name}): {why(response)}"
            )
        return response

    async def _reauthenticate(self) -> None:
        """KIP-368: once the requests in flight are answered, the exchange again on this connection."""
        async with self._connecting:
            due = self._reauthenticate_at
            if not self.connected or due is None or time.monotonic() < due:
                return
            self._ready = False  # other requests wait (in _connect) until this is done
            while self._in_flight:
                futures = [future for *_, future in self._in_flight]
                await asyncio.gather(*futures, return_exceptions=True)
            if self._transport is None:
                return  # lost meanwhile: the next request reconnects
            await self._authenticate()
            self._ready = True

    async def send(self, api: Api, version: int, body: Message, expect_response: bool = True) -> Any:
        """Sends a request and returns the decoded response body (None when ``expect_response`` is
        false, as for acks=0 Produce)."""
        if not self.connected:
            await self._connect()
        elif self._reauthenticate_at is not None and time.monotonic() >= self._reauthenticate_at:
            await self._reauthenticate()
            if not self.connected:
                await self._connect()
        return await self._request(api, version, body, expect_response)

    async def _request(self, api: Api, version: int, body: Message, expect_response: bool = True) -> Any:
        transport = self._transport
        if transport is None:
            raise ConnectionError(f"connection to {self.host}:{self.port} lost")
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

    def _fail(self, error: BaseException) -> None:
        transport, self._transport = self._transport, None
        self._ready = False
        self._reauthenticate_at = None
        if transport is not None:
            transport.close()
        while self._in_flight:
            _, _, _, future = self._in_flight.popleft()
            if not future.done():
                future.set_exception(error)

    async def close(self) -> None:
        self._fail(ConnectionError("client closed"))
