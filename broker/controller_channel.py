"""ControllerChannel: this broker's requests to the active controller (ControlledShutdown, AlterPartition).

The controller is a process of its own; its endpoint is published in ``/controller``. Each request
reads it afresh (the controller may have moved) and reuses the connection while it stays the same.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.network.client import NetworkClient
from broker.zk import znodes
from broker.zk.client import ZkClient
from protocol.api import api
from protocol.messages import Message

log = logging.getLogger(__name__)


class NoActiveControllerError(ConnectionError):
    pass


class ControllerChannel:
    def __init__(self, zk: ZkClient, broker_id: int, request_timeout: float) -> None:
        self._zk = zk
        self._client_id = f"broker-{broker_id}"
        self._timeout = request_timeout
        self._client: NetworkClient | None = None

    async def send(self, api_key: int, version: int, body: Message) -> Any:
        """The controller's response; NoActiveControllerError when none is elected, ConnectionError or
        TimeoutError when it could not be reached."""
        found = await self._zk.get(znodes.CONTROLLER)
        endpoint = znodes.decode_controller_endpoint(found[0]) if found else None
        if endpoint is None:
            raise NoActiveControllerError("no active controller")
        client = self._client
        if client is None or (client.host, client.port) != endpoint:
            if client is not None:
                await client.close()
            client = self._client = NetworkClient(*endpoint, self._client_id, request_timeout=self._timeout)
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
