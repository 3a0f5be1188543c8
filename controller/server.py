"""ControllerServer: the ``samsa controller`` process: its listener, its ZooKeeper session and the
controller, started in order and stopped cleanly on SIGTERM/SIGINT.

The listener reuses the broker's network layer (acceptor, processors, request channel, handler pool)
with the controller's own request handler. It is bound before the election so that ``/controller`` can
publish the port actually bound when the configured port is 0.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from broker.handler_pool import KafkaRequestHandlerPool
from broker.network.acceptor import Acceptor, ConnectionQuotas
from broker.network.processor import Processor
from broker.network.request_channel import RequestChannel
from broker.zk.client import ZkClient
from controller.apis import ControllerApis
from controller.config import ControllerConfig
from controller.controller import KafkaController

log = logging.getLogger(__name__)


class ControllerServer:
    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self.zk = ZkClient(
            config["zookeeper.connect"],
            config.session_timeout_ms,
            operation_timeout=config.session_timeout_ms / 1000,
        )
        self.controller = KafkaController(config, self.zk)
        self.acceptors: list[Acceptor] = []
        self.processors: list[Processor] = []
        self._handler_pool: KafkaRequestHandlerPool | None = None
        self._stopped = asyncio.Event()

    async def startup(self) -> None:
        config = self.config
        prefix = f"[Controller id={config.controller_id}]"
        apis = ControllerApis(self.controller)
        channel = RequestChannel(config["queued.max.requests"])
        self._handler_pool = KafkaRequestHandlerPool(channel, apis, config["num.io.threads"])
        quotas = ConnectionQuotas(config["max.connections"], config["max.connections.per.ip"], {})
        self.processors = [
            Processor(i, channel, apis.supported, config["socket.request.max.bytes"], quotas.closed)
            for i in range(config["num.network.threads"])
        ]
        for endpoint in config.listeners:
            self.acceptors.append(
                Acceptor(
                    endpoint,
                    self.processors,
                    quotas,
                    config["socket.listen.backlog.size"],
                    config["socket.send.buffer.bytes"],
                    config["socket.receive.buffer.bytes"],
                )
            )
        endpoints = [str(config.advertised_endpoint(a.endpoint.listener, a.port)) for a in self.acceptors]
        await self.zk.start(timeout=config.connection_timeout_ms / 1000)
        self._handler_pool.start()
        for acceptor in self.acceptors:
            acceptor.start()
        log.info(
            "%s listening on %s; ZooKeeper %s", prefix, ", ".join(endpoints), config["zookeeper.connect"]
        )
        await self.controller.startup(endpoints)

    async def shutdown(self) -> None:
        prefix = f"[Controller id={self.config.controller_id}]"
        log.info("%s shutting down", prefix)
        await self.controller.shutdown()
        for acceptor in self.acceptors:
            await acceptor.close()
        for processor in self.processors:
            processor.close_all()
        if self._handler_pool is not None:
            await self._handler_pool.shutdown()
        await self.zk.close()
        log.info("%s shut down completed", prefix)

    def stop(self) -> None:
        self._stopped.set()

    async def run(self) -> None:
        """Starts, serves until SIGTERM or SIGINT, then shuts down."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        try:
            await self.startup()
            await self._stopped.wait()
        finally:
            await self.shutdown()
