"""SocketServer: the network half of a Samsa server process (a broker or a controller).

It binds an acceptor per listener, creates the processors, the request channel and the handler pool
feeding the process's request handler, and closes idle connections. ``start_processing`` lets
requests in (a broker does that only once it is registered); ``shutdown`` stops accepting, closes the
connections and stops the handlers.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable

from broker.config import ServerConfig
from broker.handler_pool import KafkaRequestHandlerPool, RequestHandler
from broker.network.acceptor import Acceptor, ConnectionQuotas
from broker.network.processor import Processor
from broker.network.request_channel import RequestChannel
from broker.tasks import cancel_and_wait
from protocol.api import Api

log = logging.getLogger(__name__)


class SocketServer:
    def __init__(
        self,
        config: ServerConfig,
        handler: RequestHandler,
        supported: Callable[[int], tuple[Api, int, int] | None],
        *,
        max_idle_ms: int = -1,
        per_ip_overrides: dict[str, int] | None = None,
    ) -> None:
        self._max_idle_ms = max_idle_ms
        channel = RequestChannel(config["queued.max.requests"])
        self._handler_pool = KafkaRequestHandlerPool(channel, handler, config["num.io.threads"])
        quotas = ConnectionQuotas(
            config["max.connections"], config["max.connections.per.ip"], per_ip_overrides or {}
        )
        self.processors = [
            Processor(i, channel, supported, config["socket.request.max.bytes"], quotas.closed)
            for i in range(config["num.network.threads"])
        ]
        self.acceptors = [
            Acceptor(
                endpoint,
                self.processors,
                quotas,
                config["socket.listen.backlog.size"],
                config["socket.send.buffer.bytes"],
                config["socket.receive.buffer.bytes"],
            )
            for endpoint in config.listeners
        ]
        self._idle_task: asyncio.Task | None = None

    @property
    def bound_ports(self) -> dict[str, int]:
        """Listener name -> the port actually bound (a listener configured with port 0 gets one)."""
        return {a.endpoint.listener: a.port for a in self.acceptors}

    def describe(self) -> str:
        return ", ".join(f"{a.endpoint.listener}://{a.endpoint.host}:{a.port}" for a in self.acceptors)

    def start_processing(self) -> None:
        self._handler_pool.start()
        for acceptor in self.acceptors:
            acceptor.start()
        if self._max_idle_ms >= 0:
            self._idle_task = asyncio.get_running_loop().create_task(self._close_idle_connections())

    async def _close_idle_connections(self) -> None:
        interval = min(max(self._max_idle_ms / 10_000, 0.05), 30.0)
        while True:
            await asyncio.sleep(interval)
            for processor in self.processors:
                processor.close_idle(self._max_idle_ms / 1000)

    async def shutdown(self) -> None:
        for acceptor in self.acceptors:
            await acceptor.close()
        await cancel_and_wait([self._idle_task])
        for processor in self.processors:
            processor.close_all()
        await self._handler_pool.shutdown()


async def run_until_signalled(
    startup: Callable[[], Awaitable[None]], shutdown: Callable[[], Awaitable[None]]
) -> None:
    """Starts, serves until SIGTERM or SIGINT, then shuts down (also when the start fails midway)."""
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped.set)
    try:
        await startup()
        await stopped.wait()
    finally:
        await shutdown()
