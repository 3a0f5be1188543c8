"""ControllerChannel: this broker's requests to the active controller (ControlledShutdown, AlterPartition).

The controller is a process of its own; its endpoint is published in ``/controller``. Each request
reads it afresh (the controller may have moved) and reuses the connection while it stays the same.
The connection and the request are bounded by the client's connect timeout and ``request_timeout``;
the read of ``/controller`` by ``zk_timeout`` when one is given (ZooKeeper may be down, and kazoo would
hold the read until it is back), else by the ZooKeeper client's own retry policy.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import KazooException

from network.client import NetworkClient
from network.client_security import ClientSecurity
from protocol.api import ApiKey, api
from protocol.messages import Message
from zk import znodes
from zk.client import ZkClient

log = logging.getLogger(__name__)


class NoActiveControllerError(ConnectionError):
    pass


class ZooKeeperUnreachableError(ConnectionError):
    """ZooKeeper did not say in time which controller is active."""


@dataclass(frozen=True)
class ActiveController:
    id: int
    host: str
    port: int


class ControllerChannel:
    """``security`` (ClientSecurity.for_inter_broker) and ``listener`` (the inter-broker listener's
    name): the controller is reached as the brokers reach each other, on its endpoint of that name
    when it publishes one, else its first."""

    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        request_timeout: float,
        zk_timeout: float | None = None,
        *,
        security: ClientSecurity | None = None,
        listener: str | None = None,
    ) -> None:
        self._zk = zk
        self._client_id = f"broker-{broker_id}"
        self.request_timeout = request_timeout
        self.zk_timeout = zk_timeout
        self.security = security
        self.listener = listener
        self._client: NetworkClient | None = None

    async def active_controller(self) -> ActiveController:
        """The controller ``/controller`` names now; NoActiveControllerError when none is elected,
        ZooKeeperUnreachableError when ZooKeeper did not answer in time."""
        try:
            found = await self._zk.get(znodes.CONTROLLER, timeout=self.zk_timeout)
        except TimeoutError as e:
            waited = self.zk_timeout or self._zk.operation_timeout
            raise ZooKeeperUnreachableError(f"no answer within {waited:g} s") from e
        except KazooException as e:  # not NoNodeError: get returns None
            raise ZooKeeperUnreachableError(repr(e)) from e
        endpoint = znodes.decode_controller_endpoint(found[0], self.listener) if found else None
        if found is None or endpoint is None:
            raise NoActiveControllerError("no active controller")
        return ActiveController(znodes.decode_controller(found[0]), *endpoint)

    async def send(
        self, api_key: ApiKey, version: int, body: Message, controller: ActiveController | None = None
    ) -> Any:
        """The response of ``controller`` (by default the active one, looked up now). Raises as
        ``active_controller`` does, and ConnectionError or TimeoutError when it could not be reached."""
        if controller is None:
            controller = await self.active_controller()
        endpoint = (controller.host, controller.port)
        client = self._client
        if client is None or (client.host, client.port) != endpoint:
            if client is not None:
                await client.close()
            client = self._client = NetworkClient(
                *endpoint, self._client_id, request_timeout=self.request_timeout, security=self.security
            )
        try:
            return await client.send(api(api_key), version, body)
        except (OSError, TimeoutError):
            await client.close()
            self._client = None
            raise

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
