"""The request handler pool: ``num.io.threads`` workers taking requests off the RequestChannel.

All workers run on the server's one event loop; there are several so that a handler that awaits
(a ZooKeeper write, a delayed operation) does not hold up the requests of other connections. A handler
whose answer may take as long as a group rebalance returns a ``Parked`` future instead: the worker moves
on, and the response is written once the future is done (Kafka's handler threads never wait either).
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Protocol

from network.request_channel import Request, RequestChannel
from protocol.messages import Message
from server_common.tasks import cancel_and_wait

log = logging.getLogger(__name__)

# A response that completes later, without holding a worker (a JoinGroup waiting for its rebalance).
Parked = asyncio.Future  # of Message | None


class RequestHandler(Protocol):
    """What the pool feeds: KafkaApis on a broker, the controller's own handlers on a controller."""

    async def handle(self, request: Request) -> Message | Parked | None: ...


class KafkaRequestHandlerPool:
    def __init__(self, channel: RequestChannel, apis: RequestHandler, num_threads: int) -> None:
        self._channel = channel
        self._apis = apis
        self._num_threads = num_threads
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._run(), name=f"request-handler-{i}") for i in range(self._num_threads)
        ]

    async def _run(self) -> None:
        while True:
            request = await self._channel.receive_request()
            connection = request.connection
            try:
                response = await self._apis.handle(request)
            except Exception:
                _log_failure(request)
                connection.close()
            else:
                if isinstance(response, asyncio.Future):
                    response.add_done_callback(partial(_complete_parked, request))
                else:
                    connection.complete(request, response)
            connection.handled(request)

    async def shutdown(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []


def _log_failure(request: Request) -> None:
    log.exception(
        "error handling %s v%d from %s (client %s); closing the connection",
        request.api.name,
        request.version,
        request.peer,
        request.client_id,
    )


def _complete_parked(request: Request, parked: Parked) -> None:
    if parked.cancelled():
        request.connection.close()
        return
    try:
        response = parked.result()
    except Exception:
        _log_failure(request)
        request.connection.close()
    else:
        request.connection.complete(request, response)
