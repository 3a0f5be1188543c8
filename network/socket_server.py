"""SocketServer: the network half of a Samsa server process (a broker or a controller).

It binds an acceptor per listener, creates the processors, the memory pool they share
(``queued.max.request.bytes``), the request channel and the handler pool feeding the process's request
handler, closes idle connections and those that leave a request half sent, and hands the memory of
closed connections back to the system. ``start_processing`` lets requests in (a broker does that only
once it is registered); ``shutdown`` stops accepting, closes the connections and stops the handlers.
``run_until_signalled`` runs a server process from its start to SIGTERM or SIGINT and its shutdown; a
second signal ends it at once.

Dynamic broker configs (Kafka's SocketServer reconfigurables): ``reconfigure`` applies the connection
limits and ``num.io.threads`` (the handler pool's workers); ``add_listeners`` / ``remove_listeners``
bind a new listener (accepting at once) or close a removed one with its connections.
``num.network.threads`` has no effect at runtime: every processor shares the one event loop, so their
number does not change how much network I/O is done in parallel.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from network.acceptor import Acceptor, ConnectionQuotas
from network.handler_pool import KafkaRequestHandlerPool, RequestHandler
from network.listener_security import ListenerSecurity, listener_security
from network.memory_pool import MemoryPool
from network.processor import Processor
from network.request_channel import RequestChannel
from network.request_log import SLOW_SETTING, RequestLog
from network.request_metrics import LoopIdleSampler, NetworkMetrics, register_network_metrics
from protocol.api import Api
from server_common.config import ConfigError, Endpoint, ServerConfig
from server_common.metrics import Metrics
from server_common.tasks import cancel_and_wait

log = logging.getLogger(__name__)

# A connection that sent part of a request and nothing more for this long is closed: the default
# request.timeout.ms of Kafka's clients, after which the client has given up on that request (and Kafka
# itself, which has no such limit, keeps it for connections.max.idle.ms, pinning its buffer meanwhile).
STALLED_REQUEST_SECONDS = 30.0
# After this many connections have closed, the C heap's free pages are handed back to the system. A
# closed connection's objects go back to malloc's free lists, which glibc returns to the system only
# from the top of the heap: 2,000 closed connections otherwise leave ~8 MB with the process for good.
_TRIM_AFTER_CLOSED_CONNECTIONS = 256
_malloc_trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc's; absent elsewhere


class SocketServer:
    def __init__(
        self,
        config: ServerConfig,
        handler: RequestHandler,
        supported: Callable[[int], tuple[Api, int, int] | None],
        *,
        max_idle_ms: int = -1,
        per_ip_overrides: dict[str, int] | None = None,
        scram_credentials: Any = None,
        metrics: Metrics | None = None,
    ) -> None:
        """``scram_credentials``: the SCRAM credential lookup (``server_common.scram.
        ScramCredentialLookup``) the SASL listeners' SCRAM authenticators ask. Each listener's security
        (its SSLContext, SASL authenticators) is built here: a bad key store, trust store, rule or JAAS
        setting raises ConfigError naming it, and the server does not start. ``metrics``: the process's
        registry, where the network's own metrics go (requests, queues, idle shares)."""
        self.metrics = metrics if metrics is not None else Metrics(process=False)
        self._max_idle_ms = max_idle_ms
        self._config = config
        self._scram_credentials = scram_credentials
        self.security: dict[str, ListenerSecurity] = {
            endpoint.listener: listener_security(config, endpoint, scram_credentials)
            for endpoint in config.listeners
        }
        self.memory = MemoryPool(config["queued.max.request.bytes"])
        channel = self.channel = RequestChannel(config["queued.max.requests"])
        self._handler_pool = KafkaRequestHandlerPool(channel, handler, config["num.io.threads"])
        # The request metrics, the request log (samsa.request.log.slow.ms: a broker setting only) and
        # the gauges of the queues, connections and idle shares (network/request_metrics.py).
        try:
            slow_ms = config[SLOW_SETTING]
        except KeyError:
            slow_ms = 0
        self.network_metrics = NetworkMetrics(self.metrics, RequestLog(slow_ms))
        pool = self._handler_pool
        self._idle_sampler = LoopIdleSampler(lambda: pool.busy_seconds, lambda: pool.size)
        self._idle_sampling: asyncio.Task | None = None
        quotas = self.quotas = ConnectionQuotas(
            config["max.connections"], config["max.connections.per.ip"], per_ip_overrides or {}
        )
        self._socket_settings = (
            config["socket.listen.backlog.size"],
            config["socket.send.buffer.bytes"],
            config["socket.receive.buffer.bytes"],
        )
        self._processing = False
        self.processors = [
            Processor(
                i,
                channel,
                supported,
                config["socket.request.max.bytes"],
                quotas.closed,
                self.memory,
                self.network_metrics,
            )
            for i in range(config["num.network.threads"])
        ]
        self.acceptors = [
            Acceptor(
                endpoint, self.processors, quotas, *self._socket_settings, self.security[endpoint.listener]
            )
            for endpoint in config.listeners
        ]
        self._housekeeping: asyncio.Task | None = None
        self._closed_at_trim = 0
        register_network_metrics(self, self._idle_sampler)

    @property
    def bound_ports(self) -> dict[str, int]:
        """Listener name -> the port actually bound (a listener configured with port 0 gets one)."""
        return {a.endpoint.listener: a.port for a in self.acceptors}

    def describe(self) -> str:
        return ", ".join(f"{a.endpoint.listener}://{a.endpoint.host}:{a.port}" for a in self.acceptors)

    @property
    def num_io_threads(self) -> int:
        return self._handler_pool.size

    def reconfigure(
        self, max_connections: int, max_per_ip: int, per_ip_overrides: dict[str, int], num_io_threads: int
    ) -> None:
        """New connection limits and handler pool size (dynamic broker configs)."""
        self.quotas.update(max_connections, max_per_ip, per_ip_overrides)
        self._handler_pool.resize(num_io_threads)

    def add_listeners(self, endpoints: list[Endpoint], config: ServerConfig | None = None) -> None:
        """Binds and (once processing) starts an acceptor per new listener (Kafka's addListeners);
        ``config`` (the configuration that added them, else the one at start) gives their security."""
        for endpoint in endpoints:
            try:
                security = listener_security(config or self._config, endpoint, self._scram_credentials)
                acceptor = Acceptor(endpoint, self.processors, self.quotas, *self._socket_settings, security)
            except ConfigError as e:  # a TLS listener's key store cannot be read, ...
                log.error("listener %s not added: %s", endpoint, e)
                continue
            except OSError as e:  # e.g. the port is taken: the other changes still apply
                log.error(
                    "listener %s://%s:%d not added: %s", endpoint.listener, endpoint.host, endpoint.port, e
                )
                continue
            self.acceptors.append(acceptor)
            if self._processing:
                acceptor.start()
            log.info("listener %s://%s:%d added", endpoint.listener, endpoint.host, acceptor.port)

    async def remove_listeners(self, names: set[str]) -> None:
        """Stops accepting on these listeners and closes their connections (Kafka's removeListeners)."""
        removed = [a for a in self.acceptors if a.endpoint.listener in names]
        self.acceptors = [a for a in self.acceptors if a.endpoint.listener not in names]
        for acceptor in removed:
            await acceptor.close()
            log.info("listener %s removed", acceptor.endpoint.listener)
        for processor in self.processors:
            processor.close_listener(names)

    def start_processing(self) -> None:
        self._processing = True
        self._handler_pool.start()
        for acceptor in self.acceptors:
            acceptor.start()
        self._housekeeping = asyncio.get_running_loop().create_task(self._housekeep())
        self._idle_sampling = asyncio.get_running_loop().create_task(self._idle_sampler.run())

    async def _housekeep(self) -> None:
        interval = STALLED_REQUEST_SECONDS / 6
        if self._max_idle_ms >= 0:
            interval = min(max(self._max_idle_ms / 10_000, 0.05), interval)
        while True:
            await asyncio.sleep(interval)
            for processor in self.processors:
                if self._max_idle_ms >= 0:
                    processor.close_idle(self._max_idle_ms / 1000)
                processor.close_stalled(STALLED_REQUEST_SECONDS)
            closed = sum(processor.closed_connections for processor in self.processors)
            if closed - self._closed_at_trim >= _TRIM_AFTER_CLOSED_CONNECTIONS and _malloc_trim is not None:
                self._closed_at_trim = closed
                _malloc_trim(0)

    async def shutdown(self) -> None:
        for acceptor in self.acceptors:
            await acceptor.close()
        await cancel_and_wait([self._housekeeping, self._idle_sampling])
        for processor in self.processors:
            processor.close_all()
        await self._handler_pool.shutdown()


# The exit code when a second SIGTERM or SIGINT cuts a start or a shutdown short: Kafka halts with 1
# when its shutdown cannot finish. The logs are then recovered at the next start, as after a crash.
FORCED_EXIT_CODE = 1


async def run_until_signalled(
    startup: Callable[[], Awaitable[None]], shutdown: Callable[[], Awaitable[None]]
) -> None:
    """Starts, serves until SIGTERM or SIGINT, then shuts down (also when the start fails midway). A
    second SIGTERM or SIGINT, while it starts or shuts down, exits at once with FORCED_EXIT_CODE."""
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        if stopped.is_set():
            log.warning(
                "%s received again: exiting at once (code %d) without finishing", sig.name, FORCED_EXIT_CODE
            )
            _halt(FORCED_EXIT_CODE)
        log.info("%s received: shutting down (a second SIGTERM or SIGINT exits at once)", sig.name)
        stopped.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        await startup()
        await stopped.wait()
    finally:
        await shutdown()


def _halt(code: int) -> NoReturn:
    """Ends the process now, as Kafka's Exit.halt: no cleanup and no waiting for threads (kazoo's, the
    executor's), which are what a stuck shutdown waits on. The log is flushed first to keep the reason."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    os._exit(code)
