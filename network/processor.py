"""Processors and their connections: framing, request decoding, and responses in request order.

A ``Processor`` owns a share of the broker's connections (the acceptor deals them out round-robin). Each
``Connection`` cuts its stream into frames with a ``FrameReader``: small frames are received into a
stage it borrows from the processor's ``StagingBuffers`` only while part of a frame waits in it, and a
large frame straight into a buffer of its own (a large Produce is received into one writable buffer
from the processor's ``FrameBuffers`` that later becomes the log append, with no intermediate copy)
once the broker's ``MemoryPool`` (queued.max.request.bytes) has room for it, not reading meanwhile; it
decodes the header and body, and queues the request.
Requests of one connection reach the handlers one at a time, in order (as Kafka mutes a channel while
a request is in flight), but a handler may park its response (a long-poll Fetch, an acks=all Produce)
and let the next request in; responses are still written in request order. Bad input is logged with
the peer and closes the connection, and so does a request left half sent (``close_stalled``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from network.frame_buffers import FrameBuffers, StagingBuffers
from network.listener_security import PLAINTEXT, ListenerSecurity
from network.memory_pool import MemoryPool
from network.request_channel import Request, RequestChannel
from network.request_metrics import NetworkMetrics
from network.send import RegionSend
from network.ssl_principal import NoMatchingRule, principal_from_certificate
from protocol.api import Api, ApiKey
from protocol.frame import decode_request, encode_response, peek_request
from protocol.framing import BadFrameSize, Frame, FrameReader, NeedBuffer
from protocol.messages import Message
from protocol.primitives import DecodeError, EncodeError
from server_common.metrics import Metrics
from server_common.principal import ANONYMOUS

log = logging.getLogger(__name__)

# Requests read from one connection but not yet answered before it stops reading more: the client has
# pipelined far ahead of us (Kafka reads one at a time; a little pipelining keeps the handlers busy).
_MAX_PENDING_REQUESTS = 64
# How much of a file region goes through the transport when sendfile finds the socket full. The slice
# is only there to have the transport wake us when the socket can take more (uvloop lets no one else
# watch a transport's fd); the wakeup comes as late whatever its size, so it is kept small: the bytes
# it copies are the only record bytes that do not leave by sendfile.
_SLICE_WHEN_FULL = 1024
# On a TLS connection a file region goes through the transport (encrypted: no sendfile, Kafka's
# buffered fallback) this much at a time, the next part once the transport has less than this queued.
_TLS_REGION_CHUNK = 256 * 1024
# What the output queue holds besides file regions (network.send.FileRegion): a response's buffers,
# and after each response's parts its Request, marking where that response has been handed to the
# socket in full.
_BUFFERS_OR_END = (bytes, bytearray, memoryview, Request)


class Connection(asyncio.BufferedProtocol):
    """One client connection: frames in, responses out in request order."""

    def __init__(
        self, processor: Processor, listener: str, client_ip: str, security: ListenerSecurity = PLAINTEXT
    ) -> None:
        self.processor = processor
        self.listener = listener
        self.client_ip = client_ip
        self.peer = client_ip
        self.principal = ANONYMOUS  # who the connection is once authenticated (server_common.principal)
        self.security = security
        self.tls = security.ssl_context is not None  # file regions are then written, not sendfile'd
        # A SASL listener's per-connection authenticator (network.sasl_server), made once connected.
        self.authenticator: Any = None
        self.transport: asyncio.Transport | None = None
        self.last_active = time.monotonic()
        self.closed = False
        self.reader = FrameReader(processor.max_request_size, processor.stages)
        self._reserved = 0  # bytes of the processor's MemoryPool held for the frame being received
        self._awaiting_memory = False  # a large frame's header is staged; the pool has no room yet
        self._pending: deque[Request] = deque()  # every unanswered request, in arrival order
        self._backlog: deque[Request] = deque()  # decoded requests not yet handed to the handlers
        self._in_handler = False
        self._reading_paused = False
        self._writing_paused = False
        self._out: deque[Any] = deque()  # response buffers and file regions not yet handed to the socket
        self._awaiting_drain = False
        self._socket_fd = -1
        self._throttle_timer: asyncio.TimerHandle | None = None  # set while the channel is muted (KIP-219)

    # -- asyncio protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        self._socket_fd = sock.fileno() if sock is not None else -1
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.processor.register(self)
        log.debug(
            "connection from %s on listener %s (processor %d)", self.peer, self.listener, self.processor.id
        )
        security = self.security
        if self.tls and security.principal_mapper is not None:  # SSL: the certificate is the principal
            ssl_object = transport.get_extra_info("ssl_object")
            der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
            try:
                self.principal = principal_from_certificate(der, security.principal_mapper)
            except (NoMatchingRule, ValueError) as e:
                self.processor.reject(self, f"no principal for its certificate: {e}")
                return
            log.debug("connection from %s authenticated as %s (TLS)", self.peer, self.principal)
        if security.authenticator_factory is not None:
            self.authenticator = security.authenticator_factory(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._throttle_timer is not None:
            self._throttle_timer.cancel()
            self._throttle_timer = None
        self._release_buffers()
        self.processor.unregister(self)
        log.debug("connection from %s closed%s", self.peer, f": {exc}" if exc else "")

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._awaiting_drain:
            self._awaiting_drain = False
            if self.transport is not None:
                self.transport.set_write_buffer_limits()
            self._pump()
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        reader = self.reader
        reader.buffer_updated(nbytes)
        process_frame = self.processor.process_frame
        while not self.closed:
            event = reader.next_event()
            if type(event) is Frame:  # first and by identity: the one event of a busy connection
                process_frame(self, event.data)
            elif type(event) is NeedBuffer:
                if self.processor.memory.reserve(self, event.size):
                    self._receive_large_frame(event.size)
                else:
                    self._awaiting_memory = True
                    self._update_reading()
                return
            elif type(event) is BadFrameSize:
                self.processor.reject(
                    self,
                    f"request size {event.size} is outside 1..{event.max_size} "
                    + (
                        "(sasl.server.max.receive.size, before SASL authentication)"
                        if self.authenticator is not None and not self.authenticator.complete
                        else "(socket.request.max.bytes)"
                    )
                    + (
                        "; its first bytes are a TLS handshake: a TLS client on this non-TLS listener?"
                        if event.size >> 16 in (0x1603, 0x1503) and not self.tls
                        else ""
                    ),
                )
                return
            else:
                return

    def eof_received(self) -> bool:
        return False  # close our side too

    # -- large frames ---------------------------------------------------------------------------

    def _receive_large_frame(self, size: int) -> None:
        """The frame the reader announced (``size`` bytes, reserved) is received into a buffer of its
        own, which later becomes the request's (and a Produce's log append)."""
        self._reserved = size
        self.reader.receive_into(self.processor.frame_buffers.take(size))

    def memory_granted(self, size: int) -> None:
        """The MemoryPool has reserved ``size`` bytes for the frame this connection waits to receive."""
        self._awaiting_memory = False
        if self.closed:  # connection_lost is still to come, and releases it
            self._reserved = size
            return
        self._receive_large_frame(size)
        self._update_reading()

    def _release_buffers(self) -> None:
        """Gives back what a closed connection holds: its stage, its frame, and the reservations of its
        partly received frame and of the requests that will now never be handled."""
        memory = self.processor.memory
        memory.cancel(self)
        reserved = self._reserved + sum(request.reserved for request in self._backlog)
        self._reserved = 0
        self._backlog.clear()
        self.reader.close()
        if reserved:
            memory.release(reserved)

    # -- requests and responses -----------------------------------------------------------------

    def enqueue(self, request: Request) -> None:
        # A frame's reservation passes to its request, released once the request has been handled.
        request.reserved, self._reserved = self._reserved, 0
        self._pending.append(request)
        self._backlog.append(request)
        self._dispatch_next()
        self._update_reading()

    def _dispatch_next(self) -> None:
        # A throttled connection's requests already read wait too (KIP-219: Kafka reads one request at
        # a time, so its muted channel holds everything back): _unthrottle dispatches them.
        if self._in_handler or not self._backlog or self.closed or self._throttle_timer is not None:
            return
        request = self._backlog.popleft()
        self._in_handler = True
        channel = self.processor.channel
        if not channel.try_send_request(request):
            self.processor.spawn(channel.send_request(request))

    def handled(self, request: Request) -> None:
        """The handler is done with ``request`` (its response may still be pending): let the next one in."""
        self._in_handler = False
        if request.reserved:
            self.processor.memory.release(request.reserved)
            request.reserved = 0
        self._dispatch_next()

    def complete(self, request: Request, body: Message | None) -> None:
        """The response to ``request`` is ready (None: the request gets no response, as acks=0 Produce)."""
        if self.closed:
            return
        request.response_complete_at = now = time.monotonic()
        if not request.api_local_done_at:
            request.api_local_done_at = now
        if body is not None:
            try:
                request.response = response = encode_response(
                    request.api, request.version, request.correlation_id, body
                )
            except (EncodeError, ValueError, TypeError, AttributeError) as e:
                log.error(
                    "cannot encode the %s v%d response to %s: %s",
                    request.api.name,
                    request.version,
                    self.peer,
                    e,
                )
                self.close()
                return
            # The frame's size prefix, plus its 4 bytes: the response's size.
            request.response_size = int.from_bytes(response[0][:4]) + 4
            self.processor.network_metrics.completed(request, body)
        request.completed = True
        pending = self._pending
        out = self._out
        while pending and pending[0].completed:
            done = pending.popleft()
            done.response_dequeued_at = now
            if done.response is not None:
                out.extend(done.response)
                out.append(done)  # the end of its response
                done.response = None
            else:  # no response: the request ends here
                done.response_sent_at = now
                self.processor.network_metrics.record(done)
        if not self._awaiting_drain:
            self._pump()
        self.last_active = now
        self._update_reading()

    def _sent(self, requests: list[Request]) -> None:
        """These requests' responses have been handed to the socket in full."""
        now = time.monotonic()
        record = self.processor.network_metrics.record
        for request in requests:
            request.response_sent_at = now
            record(request)

    def responses_queued(self) -> int:
        """Responses complete but not yet handed to the socket in full."""
        waiting = sum(1 for request in self._pending if request.completed and request.response is not None)
        return waiting + sum(1 for item in self._out if type(item) is Request)

    def _pump(self) -> None:
        """Hands queued response data to the socket in order: buffers through the transport, file
        regions by sendfile once the transport's own buffer is empty."""
        transport, out = self.transport, self._out
        if transport is None or self.closed:
            return
        while out:
            if isinstance(out[0], _BUFFERS_OR_END):
                batch = []
                ended: list[Request] | None = None
                while out and isinstance(out[0], _BUFFERS_OR_END):
                    item = out.popleft()
                    if type(item) is Request:
                        if ended is None:
                            ended = []
                        ended.append(item)
                    else:
                        batch.append(item)
                if batch:
                    transport.writelines(batch)
                if ended is not None:
                    self._sent(ended)
                continue
            if self.tls:
                if not self._write_region(transport):
                    return
                continue
            if transport.get_write_buffer_size():
                self._wait_for_drain()
                return
            send = out[0]
            if not isinstance(send, RegionSend):
                send = out[0] = RegionSend(send)
            try:
                if send.send_to(self._socket_fd):
                    out.popleft()
                    continue
            except OSError as e:
                log.warning("closing connection from %s: sendfile failed: %s", self.peer, e)
                self.close()
                return
            # The socket is full: keep it busy with a slice through the transport, then resume sendfile.
            transport.write(send.take_slice(_SLICE_WHEN_FULL))
            if not send.remaining:
                out.popleft()

    def _write_region(self, transport: asyncio.Transport) -> bool:
        """TLS: the file region at the head of the queue goes through the transport, which encrypts it
        from the mapped segment, a chunk at a time; True once all of it is written, False when the
        connection waits for the transport to drain first."""
        out = self._out
        send = out[0]
        if not isinstance(send, RegionSend):
            send = out[0] = RegionSend(send)
        while send.remaining:
            if transport.get_write_buffer_size() >= _TLS_REGION_CHUNK:
                self._wait_for_drain()
                return False
            transport.write(send.take_slice(_TLS_REGION_CHUNK))
        out.popleft()
        return True

    def _wait_for_drain(self) -> None:
        # With a high-water mark of 0 the transport calls pause_writing now and resume_writing once
        # everything it holds has been written.
        self._awaiting_drain = True
        assert self.transport is not None
        self.transport.set_write_buffer_limits(high=0)

    def throttle(self, seconds: float) -> None:
        """Mutes the connection for ``seconds``: nothing more is read from it until then (KIP-219: a
        quota's throttle is the client's to honour; the broker mutes the channel once the response
        carrying ``throttle_time_ms`` is on its way). A longer throttle replaces a shorter one."""
        if seconds <= 0 or self.closed:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        timer = self._throttle_timer
        if timer is not None:
            if timer.when() >= until:
                return
            timer.cancel()
        self._throttle_timer = loop.call_at(until, self._unthrottle)
        self._update_reading()

    def _unthrottle(self) -> None:
        self._throttle_timer = None
        self._update_reading()
        self._dispatch_next()

    @property
    def throttled(self) -> bool:
        return self._throttle_timer is not None

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        should_pause = (
            self._writing_paused
            or self._awaiting_memory
            or len(self._pending) >= _MAX_PENDING_REQUESTS
            or self._throttle_timer is not None
        )
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    @property
    def idle(self) -> bool:
        return not self._pending

    def stalled(self, deadline: float) -> bool:
        """Part of a frame has arrived and nothing since ``deadline``, though this connection was not
        held back by the broker (waiting for memory, too many requests unanswered, or throttled)."""
        return (
            self.reader.partial
            and self.last_active < deadline
            and not self._awaiting_memory
            and len(self._pending) < _MAX_PENDING_REQUESTS
            and self._throttle_timer is None
        )

    def close(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()


def _describe_tls_failure(error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        return "no handshake within the time allowed"
    if isinstance(error, ssl.SSLError):
        return error.reason or str(error)
    return str(error) or type(error).__name__


def _looks_plaintext(error: BaseException) -> bool:
    return isinstance(error, ssl.SSLError) and error.reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST")


class Processor:
    """Network I/O for a share of the connections, feeding the RequestChannel."""

    def __init__(
        self,
        processor_id: int,
        channel: RequestChannel,
        supported: Callable[[int], tuple[Api, int, int] | None],
        max_request_size: int,
        on_close: Callable[[str], None],
        memory: MemoryPool | None = None,
        network_metrics: NetworkMetrics | None = None,
    ) -> None:
        """``memory`` is the pool shared by the server's processors (unbounded when not given);
        ``network_metrics`` where the requests and connections are counted (the SocketServer's)."""
        self.id = processor_id
        if network_metrics is None:
            network_metrics = NetworkMetrics(Metrics(process=False))
        self.network_metrics = network_metrics
        self.channel = channel
        self._supported = supported
        self.max_request_size = max_request_size
        self._on_close = on_close
        self.memory = memory if memory is not None else MemoryPool(-1)
        self.connections: set[Connection] = set()
        self.closed_connections = 0  # since the start
        self.stages = StagingBuffers()
        self.frame_buffers = FrameBuffers()
        self._tasks: set[asyncio.Task] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Runs ``coro`` as a task this processor keeps a reference to until it ends."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def accept(
        self, sock: socket.socket, listener: str, client_ip: str, security: ListenerSecurity = PLAINTEXT
    ) -> None:
        """Takes over an accepted socket; ``on_close(client_ip)`` is called once it is gone. On a TLS
        listener the TLS handshake comes first: a connection that fails it (a plaintext client, a
        client certificate not trusted, a timeout) is closed and logged with its peer."""
        loop = asyncio.get_running_loop()
        self.network_metrics.connection_created(listener)
        self.spawn(self._attach(loop, sock, listener, client_ip, security))

    async def _attach(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        listener: str,
        ip: str,
        security: ListenerSecurity,
    ) -> None:
        def connection() -> Connection:
            return Connection(self, listener, ip, security)

        if security.ssl_context is None:
            try:
                await loop.connect_accepted_socket(connection, sock)
            except OSError as e:
                log.debug("could not attach a connection from %s: %s", ip, e)
                sock.close()
                self.network_metrics.connection_closed(listener)
                self._on_close(ip)
            return
        try:
            host, port = sock.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            peer = ip
        try:
            await loop.connect_accepted_socket(
                connection,
                sock,
                ssl=security.ssl_context,
                ssl_handshake_timeout=security.ssl_handshake_timeout,
            )
        except (OSError, ssl.SSLError) as e:
            log.warning(
                "closing connection from %s on listener %s: TLS handshake failed: %s%s",
                peer,
                listener,
                _describe_tls_failure(e),
                " (a plaintext client on this TLS listener?)" if _looks_plaintext(e) else "",
            )
            sock.close()
            self.network_metrics.connection_closed(listener)
            self._on_close(ip)

    def register(self, connection: Connection) -> None:
        self.connections.add(connection)

    def unregister(self, connection: Connection) -> None:
        if connection in self.connections:
            self.connections.discard(connection)
            self.closed_connections += 1
            self.network_metrics.connection_closed(connection.listener)
            self._on_close(connection.client_ip)

    def reject(self, connection: Connection, reason: str) -> None:
        log.warning("closing connection from %s: %s", connection.peer, reason)
        connection.close()

    def process_frame(self, connection: Connection, frame: Any) -> None:
        # SASL listeners: before authentication only ApiVersions and the SASL exchange (raw tokens after
        # a SaslHandshake v0), and an expired session only re-authenticates (network.sasl_server).
        authenticator = connection.authenticator
        if authenticator is not None and not authenticator.admit(frame):
            return
        try:
            api_key, version, correlation_id = peek_request(frame)
        except DecodeError as e:
            self.reject(connection, str(e))
            return
        supported = self._supported(api_key)
        if supported is None:
            self.reject(connection, f"unknown or unsupported api key {api_key} (version {version})")
            return
        api, low, high = supported
        if not low <= version <= high:
            if api_key == ApiKey.API_VERSIONS:
                # Answered in the v0 schema with UNSUPPORTED_VERSION so that the client retries lower.
                request = Request(connection, api, 0, correlation_id, None, None, len(frame) + 4, version)
                connection.enqueue(request)
                return
            self.reject(connection, f"unsupported version {version} of {api.name} (api key {api_key})")
            return
        try:
            header, body = decode_request(frame, api, version)
        except DecodeError as e:
            self.reject(connection, f"cannot parse {api.name} v{version} (api key {api_key}): {e}")
            return
        connection.enqueue(
            Request(connection, api, version, correlation_id, header.client_id, body, len(frame) + 4, version)
        )

    def close_idle(self, max_idle_seconds: float) -> None:
        deadline = time.monotonic() - max_idle_seconds
        for connection in list(self.connections):
            if connection.idle and connection.last_active < deadline:
                log.debug(
                    "closing connection from %s: idle for over %.0f s", connection.peer, max_idle_seconds
                )
                connection.close()

    def close_stalled(self, max_stall_seconds: float) -> None:
        """Closes connections that sent part of a request and nothing more for ``max_stall_seconds``:
        the partial frame holds its stage or its reservation, and its client has given up on it."""
        deadline = time.monotonic() - max_stall_seconds
        for connection in list(self.connections):
            if connection.stalled(deadline):
                log.warning(
                    "closing connection from %s: it sent part of a request and nothing more for %.0f s",
                    connection.peer,
                    max_stall_seconds,
                )
                connection.close()

    def close_all(self) -> None:
        for connection in list(self.connections):
            connection.close()

    def close_listener(self, listeners: set[str]) -> None:
        """Closes the connections accepted on these listeners (they were removed at runtime)."""
        for connection in list(self.connections):
            if connection.listener in listeners:
                connection.close()
