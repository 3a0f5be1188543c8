"""ControllerServer: the ``samsa controller`` process: its listener, its ZooKeeper session and the
controller, started in order and stopped cleanly on SIGTERM/SIGINT.

The listener is the shared Reactor of ``network`` (acceptor, processors, request channel, handler pool)
with the controller's own request handler. It is bound before the election so that ``/controller`` can
publish the port actually bound when the configured port is 0.

Shutdown is bounded: the controller's own (the event in progress, then the resignation, which deletes
``/controller``) gets zookeeper.connection.timeout.ms, Kafka's bound on waiting for ZooKeeper, since
with ZooKeeper down its calls would wait for as long as it stays down.
"""

from __future__ import annotations

import asyncio
import logging

from controller.apis import ControllerApis
from controller.config import ControllerConfig
from controller.controller import KafkaController
from controller.controller_metrics import register_controller_metrics
from network.socket_server import SocketServer, run_until_signalled
from server_common.acl_authorizer import AclAuthorizer, authorizer_from_config
from server_common.metrics import Metrics, MetricsHttpServer, parse_metrics_listener
from zk.acls import AclChangeListener, ZkAclStore
from zk.client import ZkClient
from zk.user_configs import UserConfigs

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
        # SCRAM credentials for a SASL listener: read from /config/users at each authentication (the
        # controller's few broker connections need no cache).
        self.scram_credentials = UserConfigs(self.zk)
        self.socket_server: SocketServer | None = None
        # authorizer.class.name: the ACL authorizer over ZooKeeper's ACLs (who may call the controller).
        self._acl_store = ZkAclStore(self.zk)
        self.authorizer: AclAuthorizer | None = authorizer_from_config(config, self._acl_store)
        self.acl_listener: AclChangeListener | None = None
        # The registry of this process's metrics, served at metrics.listener when it is set.
        self.metrics = Metrics()
        self.metrics_server: MetricsHttpServer | None = None

    @property
    def prefix(self) -> str:
        return f"[Controller id={self.config.controller_id}]"

    async def startup(self) -> None:
        config = self.config
        address = parse_metrics_listener(config["metrics.listener"])
        if address is not None:
            self.metrics_server = MetricsHttpServer(self.metrics, *address)
            await self.metrics_server.start()
        # Only brokers may call the controller (controller/apis.py): the authorizer's CLUSTER_ACTION,
        # else super.users.
        apis = ControllerApis(self.controller, authorizer=self.authorizer, super_users=config.super_users)
        self.socket_server = SocketServer(
            config, apis, apis.supported, scram_credentials=self.scram_credentials, metrics=self.metrics
        )
        register_controller_metrics(self.metrics, self)
        endpoints = [
            str(config.advertised_endpoint(name, port))
            for name, port in self.socket_server.bound_ports.items()
        ]
        await self.zk.start(timeout=config.connection_timeout_ms / 1000)
        if self.authorizer is not None:  # its ACLs loaded before any request is served
            await self._acl_store.create_paths()
            self.acl_listener = AclChangeListener(self.zk, self.authorizer)
            await self.acl_listener.start()
        self.socket_server.start_processing()
        log.info(
            "%s listening on %s; ZooKeeper %s", self.prefix, ", ".join(endpoints), config["zookeeper.connect"]
        )
        await self.controller.startup(endpoints)

    async def shutdown(self) -> None:
        log.info("%s shutting down", self.prefix)
        bound = self.config.connection_timeout_ms / 1000
        log.info("%s finishing the event in progress and resigning (up to %g s)", self.prefix, bound)
        try:
            async with asyncio.timeout(bound):
                await self.controller.shutdown()
        except TimeoutError:
            # /controller is ephemeral: it goes with this process's ZooKeeper session.
            log.info(
                "%s did not finish and resign within %g s (ZooKeeper unreachable?), skipping",
                self.prefix,
                bound,
            )
        log.info("%s closing the listener and the ZooKeeper session", self.prefix)
        if self.socket_server is not None:
            await self.socket_server.shutdown()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        if self.acl_listener is not None:
            await self.acl_listener.shutdown()
        await self.zk.close()
        log.info("%s shut down completed", self.prefix)

    async def run(self) -> None:
        """Starts, serves until SIGTERM or SIGINT, then shuts down."""
        await run_until_signalled(self.startup, self.shutdown)
