"""The request handler pool: ``num.io.threads`` workers taking requests off the RequestChannel.

All workers run on the server's one event loop; there are several so that a handler that awaits I/O
(a ZooKeeper write) does not hold up the requests of other connections. A handler never waits for an
answer that comes later (followers' acks, a long poll, a rebalance): it ``park``s the response on the
future of that answer, the worker moves on, and the response is written once the future is done
(Kafka's handler threads never wait either).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol, TypeVar

from network.request_channel import Request, RequestChannel
from protocol.messages import Message
from server_common.futures import then
from server_common.tasks import cancel_and_wait

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Parked:
    """A response that is not ready yet: the pool writes it once ``response`` is done."""

    response: asyncio.Future[Message | None]


def park(later: asyncio.Future[T], respond: Callable[[T], Message | None]) -> Message | Parked | None:
    """The response to give for an answer that may come later: ``respond(result)`` now if ``later``
    is done, else a parked response written once it is. A handler returns what this returns."""
    if later.done():
        return respond(later.result())
    return Parked(then(later, respond))


class RequestHandler(Protocol):
    """What the pool feeds: KafkaApis on a broker, the controller's own handlers on a controller."""

    async def handle(self, request: Request) -> Message | Parked | None: ...


class KafkaRequestHandlerPool:
    def __init__(self, channel: RequestChannel, apis: RequestHandler, num_threads: int) -> None:
        self._channel = channel
        self._apis = apis
        self._num_threads = num_threads
        self._tasks: dict[int, asyncio.Task] = {}  # worker index -> its task
        self._started = False
        # Seconds the workers have spent inside handlers since the start (their busy time, for the
        # RequestHandlerAvgIdlePercent metric: network/request_metrics.py).
        self.busy_seconds = 0.0

    @property
    def size(self) -> int:
        return self._num_threads

    def start(self) -> None:
        self._started = True
        self._fill()

    def _fill(self) -> None:
        loop = asyncio.get_running_loop()
        for i in range(self._num_threads):
            task = self._tasks.get(i)
            if task is None or task.done():
                self._tasks[i] = loop.create_task(self._run(i), name=f"request-handler-{i}")

    def resize(self, num_threads: int) -> None:
        """``num.io.threads`` changed at runtime (Kafka's KafkaRequestHandlerPool.resizeThreadPool).
        New workers start at once; a worker beyond the new number stops after the request it handles
        (one waiting for a request handles the next one first: nothing is cut short)."""
        old, self._num_threads = self._num_threads, num_threads
        if self._started and num_threads != old:
            self._fill()
            log.info("request handler pool resized from %d to %d workers (num.io.threads)", old, num_threads)

    async def _run(self, index: int) -> None:
        while index < self._num_threads:
            request = await self._channel.receive_request()
            connection = request.connection
            request.dequeued_at = dequeued = time.monotonic()
            try:
                response = await self._apis.handle(request)
            except Exception:
                _log_failure(request)
                connection.close()
            else:
                request.api_local_done_at = done = time.monotonic()
                self.busy_seconds += done - dequeued
                if isinstance(response, Parked):
                    response.response.add_done_callback(partial(_write_parked_response, request))
                else:
                    connection.complete(request, response)
            connection.handled(request)
        if self._tasks.get(index) is asyncio.current_task():
            del self._tasks[index]

    async def shutdown(self) -> None:
        tasks, self._tasks = list(self._tasks.values()), {}
        self._started = False
        await cancel_and_wait(tasks)


def _log_failure(request: Request) -> None:
    log.exception(
        "error handling %s v%d from %s (client %s); closing the connection",
        request.api.name,
        request.version,
        request.peer,
        request.client_id,
    )


def _write_parked_response(request: Request, parked: asyncio.Future[Message | None]) -> None:
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
