"""DelayedOperationPurgatory: requests that wait for something to happen to a partition, or for a timeout.

A long-poll Fetch waits for data to arrive below the high watermark; an acks=all Produce waits for the
high watermark to pass its records. A delayed operation watches the partitions it depends on; whatever
changes a partition (an append, a high-watermark move, a leadership change) calls ``check(key)``,
which asks each watcher whether it can complete now. Every operation completes exactly once: when its
``try_complete`` says so, or at its deadline (``on_expiration``), or when it is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable
from typing import Any


class DelayedOperation:
    """Subclasses implement ``try_complete`` (return True once done, after calling ``complete``) and
    ``on_complete`` (build the result). The result is delivered through ``future``."""

    def __init__(self, timeout_ms: int) -> None:
        loop = asyncio.get_running_loop()
        self.future: asyncio.Future = loop.create_future()
        self.timeout_ms = timeout_ms
        self._timer: asyncio.TimerHandle | None = None
        self._purgatory: DelayedOperationPurgatory | None = None
        self._keys: tuple[Hashable, ...] = ()

    @property
    def completed(self) -> bool:
        return self.future.done()

    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_complete(self) -> Any:
        """The operation's result; called once, when it completes for whatever reason."""
        raise NotImplementedError

    def complete(self) -> bool:
        """Completes the operation now; False if it had already completed."""
        if self.future.done():
            return False
        if self._timer is not None:
            self._timer.cancel()
        if self._purgatory is not None:
            self._purgatory._unwatch(self)
        try:
            self.future.set_result(self.on_complete())
        except Exception as e:  # the waiting handler sees the error (and closes the connection)
            self.future.set_exception(e)
        return True

    def _expire(self) -> None:
        self.complete()


class DelayedOperationPurgatory:
    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, set[DelayedOperation]] = {}

    def try_complete_else_watch(
        self, operation: DelayedOperation, keys: Iterable[Hashable]
    ) -> asyncio.Future:
        """Completes ``operation`` at once if it can, otherwise parks it until a ``check`` of one of
        ``keys`` completes it or its timeout expires. Returns the operation's future."""
        if operation.try_complete():
            return operation.future
        operation._keys = tuple(keys)
        operation._purgatory = self
        for key in operation._keys:
            self._watchers.setdefault(key, set()).add(operation)
        loop = asyncio.get_running_loop()
        operation._timer = loop.call_later(operation.timeout_ms / 1000, operation._expire)
        return operation.future

    def check(self, key: Hashable) -> int:
        """Lets the operations watching ``key`` complete if they can; returns how many did."""
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        done = 0
        for operation in list(watchers):
            if not operation.completed and operation.try_complete():
                done += 1
        return done

    def _unwatch(self, operation: DelayedOperation) -> None:
        for key in operation._keys:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.discard(operation)
                if not watchers:
                    del self._watchers[key]

    def complete_all(self) -> None:
        """Completes every waiting operation (at shutdown)."""
        for operation in {op for watchers in self._watchers.values() for op in watchers}:
            operation.complete()

    def __len__(self) -> int:
        return len({op for watchers in self._watchers.values() for op in watchers})
