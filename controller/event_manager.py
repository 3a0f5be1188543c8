"""ControllerEventManager: one queue, one task (Kafka's ControllerEventManager).

Everything that changes the controller's state runs as an event on this task, one at a time, so the
controller needs no locks: a watch callback or a request handler only queues an event. An event that
raises is logged and the next one runs; the processor decides what a failure means (for instance,
resigning when it finds that another controller was elected).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from controller.events import ControllerEvent

log = logging.getLogger(__name__)

_STOP = ControllerEvent()


class EventObserver(Protocol):
    """Told of each event as it runs (controller/controller_metrics.py: Kafka's EventQueueTimeMs and
    the ControllerStats timers)."""

    def dequeued(self, event: ControllerEvent, queue_time_ms: float) -> None: ...

    def processed(self, event: ControllerEvent, processing_time_ms: float) -> None: ...


class ControllerEventManager:
    def __init__(self, process: Callable[[ControllerEvent], Awaitable[None]], name: str) -> None:
        self._process = process
        self._name = name
        # Each event with the time it was queued at (monotonic seconds).
        self._queue: asyncio.Queue[tuple[ControllerEvent, float]] = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._closing = False
        self.current: ControllerEvent | None = None  # the event being processed (Kafka's state)
        self.observer: EventObserver | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self._name)

    def put(self, event: ControllerEvent) -> None:
        if self._closing:
            event.abandon()
            return
        self._queue.put_nowait((event, time.monotonic()))

    def clear_and_put(self, event: ControllerEvent) -> None:
        """Drops every queued event, then queues ``event`` (a resignation makes them moot)."""
        self._drain()
        self.put(event)

    def _drain(self) -> None:
        while not self._queue.empty():
            self._queue.get_nowait()[0].abandon()

    def __len__(self) -> int:
        return self._queue.qsize()

    async def _run(self) -> None:
        while True:
            event, queued_at = await self._queue.get()
            if event is _STOP:
                return
            started = time.monotonic()
            observer = self.observer
            if observer is not None:
                observer.dequeued(event, (started - queued_at) * 1e3)
            self.current = event
            try:
                await self._process(event)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: error processing %s", self._name, type(event).__name__)
            finally:
                self.current = None
            took_ms = (time.monotonic() - started) * 1e3
            if observer is not None:
                observer.processed(event, took_ms)
            log.debug("%s: %s took %.1f ms", self._name, type(event).__name__, took_ms)

    async def close(self) -> None:
        """Lets the event in progress finish, abandons the queued ones and ends the task."""
        self._closing = True
        self._drain()
        self._queue.put_nowait((_STOP, time.monotonic()))
        if self._task is not None:
            await self._task
