"""KafkaServer: starts the broker's parts in order, and stops them cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal

from broker.config import KafkaConfig
from broker.handler_pool import KafkaRequestHandlerPool
from broker.kafka_apis import KafkaApis
from broker.meta_properties import ensure_meta_properties
from broker.metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache
from broker.network.acceptor import Acceptor, ConnectionQuotas
from broker.network.processor import Processor
from broker.network.request_channel import RequestChannel

log = logging.getLogger(__name__)


class KafkaServer:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.acceptors: list[Acceptor] = []
        self.processors: list[Processor] = []
        self._handler_pool: KafkaRequestHandlerPool | None = None
        self._idle_task: asyncio.Task | None = None
        self._stopped = asyncio.Event()

    async def startup(self) -> None:
        config = self.config
        broker_id = config.broker_id
        if broker_id < 0:
            raise ValueError("broker.id must be set (generated broker ids need zookeeper.connect)")
        cluster_id = ensure_meta_properties(config.log_dirs, broker_id)
        self.metadata_cache = MetadataCache(cluster_id)
        self.apis = KafkaApis(broker_id, self.metadata_cache)
        channel = RequestChannel(config["queued.max.requests"])
        self._handler_pool = KafkaRequestHandlerPool(channel, self.apis, config["num.io.threads"])
        self._handler_pool.start()
        quotas = ConnectionQuotas(
            config["max.connections"],
            config["max.connections.per.ip"],
            config.max_connections_per_ip_overrides,
        )
        self.processors = [
            Processor(i, channel, self.apis.supported, config["socket.request.max.bytes"], quotas.closed)
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
        bound = {a.endpoint.listener: a.port for a in self.acceptors}
        endpoints = {}
        for listener in bound:
            advertised = config.advertised_endpoint(listener)
            # A listener on port 0 binds an ephemeral port; advertise the port it actually got.
            endpoints[listener] = BrokerEndpoint(advertised.host, advertised.port or bound[listener])
        self.metadata_cache.add_broker(BrokerInfo(broker_id, config["broker.rack"], endpoints))
        self.metadata_cache.controller_id = broker_id
        for acceptor in self.acceptors:
            acceptor.start()
        idle_ms = config["connections.max.idle.ms"]
        if idle_ms >= 0:
            self._idle_task = asyncio.get_running_loop().create_task(
                self._close_idle_connections(idle_ms / 1000)
            )
        listeners = ", ".join(f"{a.endpoint.listener}://{a.endpoint.host}:{a.port}" for a in self.acceptors)
        log.info(
            "[KafkaServer id=%d] started (cluster %s); listening on %s", broker_id, cluster_id, listeners
        )

    async def _close_idle_connections(self, max_idle: float) -> None:
        interval = min(max(max_idle / 10, 0.05), 30.0)
        while True:
            await asyncio.sleep(interval)
            for processor in self.processors:
                processor.close_idle(max_idle)

    async def shutdown(self) -> None:
        log.info("[KafkaServer id=%d] shutting down", self.config.broker_id)
        for acceptor in self.acceptors:
            await acceptor.close()
        if self._idle_task is not None:
            self._idle_task.cancel()
        for processor in self.processors:
            processor.close_all()
        if self._handler_pool is not None:
            await self._handler_pool.shutdown()
        log.info("[KafkaServer id=%d] shut down completed", self.config.broker_id)

    def stop(self) -> None:
        self._stopped.set()

    async def run(self) -> None:
        """Starts, serves until SIGTERM or SIGINT, then shuts down."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        await self.startup()
        await self._stopped.wait()
        await self.shutdown()
