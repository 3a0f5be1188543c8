"""The Acceptor: one per listener; accepts connections, enforces connection limits, deals them to processors.

``max.connections`` holds accepting back (new connections wait in the listen backlog, as in Kafka) until
a connection closes; ``max.connections.per.ip`` (and its overrides) closes a new connection from an
address that already has its share. The three limits change at runtime (``ConnectionQuotas.update``,
Kafka's dynamic ConnectionQuotas): they apply to the next connection accepted; connections already open
stay open, as in Kafka.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
from collections import Counter
from collections.abc import Sequence

from network.listener_security import PLAINTEXT, ListenerSecurity
from network.processor import Processor
from server_common.config import Endpoint
from server_common.tasks import cancel_and_wait

log = logging.getLogger(__name__)


class ConnectionQuotas:
    """Counts open connections, overall and per client address."""

    def __init__(self, max_connections: int, max_per_ip: int, per_ip_overrides: dict[str, int]) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = per_ip_overrides
        self.total = 0
        self.per_ip: Counter[str] = Counter()
        self._slot_freed = asyncio.Event()

    def update(self, max_connections: int, max_per_ip: int, per_ip_overrides: dict[str, int]) -> None:
        """New limits from dynamic broker configs; a higher max.connections lets waiting acceptors on."""
        limits = (max_connections, max_per_ip, dict(per_ip_overrides))
        if limits != (self.max_connections, self.max_per_ip, self.per_ip_overrides):
            log.info(
                "connection limits now max.connections=%d max.connections.per.ip=%d "
                "max.connections.per.ip.overrides=%s",
                *limits,
            )
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = dict(per_ip_overrides)
        self._slot_freed.set()

    def ip_allowed(self, ip: str) -> bool:
        return self.per_ip[ip] < self.per_ip_overrides.get(ip, self.max_per_ip)

    async def wait_for_slot(self) -> None:
        while self.total >= self.max_connections:
            self._slot_freed.clear()
            await self._slot_freed.wait()

    def opened(self, ip: str) -> None:
        self.total += 1
        self.per_ip[ip] += 1

    def closed(self, ip: str) -> None:
        self.total -= 1
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]
        self._slot_freed.set()


def _bind(endpoint: Endpoint, backlog: int) -> socket.socket:
    host = endpoint.host
    if not host and socket.has_dualstack_ipv6():
        sock = socket.create_server(
            ("", endpoint.port), family=socket.AF_INET6, backlog=backlog, dualstack_ipv6=True
        )
    else:
        sock = socket.create_server((host or "0.0.0.0", endpoint.port), backlog=backlog)
    sock.setblocking(False)
    return sock


def configure_accepted(sock: socket.socket, send_buffer: int, receive_buffer: int) -> None:
    """Non-blocking, no Nagle; socket.send/receive.buffer.bytes when positive. At -1 (the default) the
    sizes stay with the kernel, whose autotuning a fixed SO_SNDBUF/SO_RCVBUF would turn off."""
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if send_buffer > 0:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    if receive_buffer > 0:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)


class Acceptor:
    """Accepts connections on one listener."""

    def __init__(
        self,
        endpoint: Endpoint,
        processors: Sequence[Processor],
        quotas: ConnectionQuotas,
        backlog: int,
        send_buffer: int,
        receive_buffer: int,
        security: ListenerSecurity = PLAINTEXT,
    ) -> None:
        """``security``: the listener's TLS context and SASL authenticator factory (PLAINTEXT: none)."""
        self.endpoint = endpoint
        self.security = security
        self._processors = itertools.cycle(processors)
        self._quotas = quotas
        self._send_buffer = send_buffer
        self._receive_buffer = receive_buffer
        self._sock = _bind(endpoint, backlog)
        self.port: int = self._sock.getsockname()[1]
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"acceptor-{self.endpoint.listener}"
        )

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._quotas.wait_for_slot()
            try:
                sock, address = await loop.sock_accept(self._sock)
            except OSError as e:
                log.warning("accept failed on %s: %s", self.endpoint, e)
                await asyncio.sleep(0.1)
                continue
            self._hand_over(sock, address)
            # Drain the whole accept queue now: a burst of connections larger than the listen backlog
            # would otherwise lose SYNs and wait a second for TCP to retry them.
            while self._quotas.total < self._quotas.max_connections:
                try:
                    sock, address = self._sock.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as e:
                    log.warning("accept failed on %s: %s", self.endpoint, e)
                    break
                self._hand_over(sock, address)

    def _hand_over(self, sock: socket.socket, address: tuple) -> None:
        ip = address[0]
        if not self._quotas.ip_allowed(ip):
            log.warning(
                "closing connection from %s:%s: too many connections from %s (max.connections.per.ip)",
                ip,
                address[1],
                ip,
            )
            sock.close()
            return
        configure_accepted(sock, self._send_buffer, self._receive_buffer)
        self._quotas.opened(ip)
        next(self._processors).accept(sock, self.endpoint.listener, ip, self.security)

    async def close(self) -> None:
        await cancel_and_wait([self._task])
        self._sock.close()
