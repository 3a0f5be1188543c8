"""Requests for the broker's handlers in process, without a socket: ``FakeConnection`` (the connection side
a handler reads: peer, listener, principal, client address, ``close()``), ``handler_request`` (a decoded
request on one) and ``answer`` (a handler's result, waited for when parked)."""

from __future__ import annotations

import asyncio
from typing import Any

from network.handler_pool import Parked
from network.request_channel import Request
from protocol.api import ApiKey, api
from protocol.messages import Message
from server_common.principal import ANONYMOUS, KafkaPrincipal

__all__ = ["FakeConnection", "answer", "handler_request"]


class FakeConnection:
    """A client at ``host`` on ``listener``, authenticated as ``principal``; ``closed`` once closed."""

    def __init__(
        self,
        principal: KafkaPrincipal = ANONYMOUS,
        host: str = "10.0.0.7",
        listener: str = "PLAINTEXT",
        port: int = 5555,
    ) -> None:
        self.peer = f"{host}:{port}"
        self.listener = listener
        self.principal = principal
        self.client_ip = host
        self.closed = False

    def close(self) -> None:
        self.closed = True


def handler_request(
    key: ApiKey, version: int, body: Message, connection: Any = None, client_id: str = "test"
) -> Request:
    """``body`` as a request at ``version`` (correlation id 1) on ``connection`` (a new FakeConnection)."""
    definition = api(key)
    assert definition is not None
    connection = connection or FakeConnection()
    return Request(connection, definition, version, 1, client_id, body, 0, version)  # type: ignore[arg-type]


async def answer(result: Any, timeout: float | None = None) -> Any:
    """A handler's ``result``: its response, waited for (at most ``timeout`` s) when it was parked."""
    if isinstance(result, Parked):
        if timeout is None:
            return await result.response
        return await asyncio.wait_for(result.response, timeout)
    return result
