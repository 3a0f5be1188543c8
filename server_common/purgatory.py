"""DelayedOperationPurgatory: operations that wait for something to happen, or for their deadline.

Every answer that cannot be given at once waits here, as in Kafka: an acks=all Produce for the high
watermark to pass its records, a long-poll Fetch for data, a DeleteRecords for the followers' log
start offsets (the broker's purgatories), a group's rebalance for its members to rejoin, a member's
session for its next heartbeat (the group coordinator's). A delayed operation watches keys (a
partition, a group, a member); whatever changes what a key stands for calls ``check(key)``, which asks
each watcher whether it can complete now. Every operation completes exactly once: when its
``try_complete`` says so, or at its deadline (then ``on_expiration`` runs too), unless it is cancelled.
Its result is delivered through its ``future`` (``server_common.futures``).

The timer is the event loop's (one ``call_later`` per waiting operation) rather than Kafka's timing
wheel: a broker holds at most a few thousand of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class DelayedOperation(Generic[T]):
    """Subclasses implement ``try_complete`` (return ``self.complete()`` once the operation can
    complete, else False) and ``on_complete`` (the result; it runs once, whatever completed the
    operation), and may implement ``on_expiration`` (what else happens when the deadline completed it)."""

    def __init__(self, timeout_ms: int) -> None:
        self.future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self.timeout_ms = timeout_ms
        self._timer: asyncio.TimerHandle | None = None
        self._purgatory: DelayedOperationPurgatory | None = None
        self._keys: tuple[Hashable, ...] = ()

    @property
    def completed(self) -> bool:
        return self.future.done()

    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_complete(self) -> T:
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Runs after ``on_complete`` when the deadline completed the operation."""

    def complete(self) -> bool:
        """Completes the operation now; False if it had completed (or been cancelled) already."""
        if not self._stop():
            return False
        try:
            self.future.set_result(self.on_complete())
        except Exception as e:  # whoever waits for the result sees the error
            self.future.set_exception(e)
        return True

    def cancel(self) -> bool:
        """Ends the operation without completing it: neither ``on_complete`` nor ``on_expiration`` runs,
        and its future is cancelled. False if it had ended already."""
        if not self._stop():
            return False
        self.future.cancel()
        return True

    def _stop(self) -> bool:
        if self.future.done():
            return False
        if self._timer is not None:
            self._timer.cancel()
        if self._purgatory is not None:
            self._purgatory._unwatch(self)
        return True

    def _expire(self) -> None:
        if self.complete():
            self.on_expiration()


class DelayedOperationPurgatory(Generic[T]):
    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, set[DelayedOperation[T]]] = {}

    def try_complete_else_watch(
        self, operation: DelayedOperation[T], keys: Iterable[Hashable]
    ) -> asyncio.Future[T]:
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

    def cancel_for_key(self, key: Hashable) -> int:
        """Cancels the operations watching ``key`` (their subject is gone); returns how many."""
        return sum(operation.cancel() for operation in list(self._watchers.get(key, ())))

    def watched(self, key: Hashable) -> list[DelayedOperation[T]]:
        """The operations waiting on ``key``."""
        return list(self._watchers.get(key, ()))

    def _unwatch(self, operation: DelayedOperation[T]) -> None:
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
