"""Results that may come later: the ``asyncio.Future`` every delayed answer travels in.

Whatever may have to wait for something else (a produce for its followers, a long-poll fetch for data,
a DeleteRecords for the followers' log start offsets, a JoinGroup for its rebalance, an offset commit
for its record's replication) returns an ``asyncio.Future`` of its result, done already when nothing
had to wait. The delayed operations of ``server_common.purgatory`` complete these futures; the request
handler turns one into its response with ``network.handler_pool.park``. The helpers here combine them
without tasks, and compute at once what is already done, so that the common case costs no loop turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
U = TypeVar("U")


def completed(value: T) -> asyncio.Future[T]:
    """A future that is done already, with ``value``."""
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future


def then(later: asyncio.Future[T], convert: Callable[[T], U]) -> asyncio.Future[U]:
    """A future of ``convert(later's result)``: done at once if ``later`` is, else when it completes.
    An exception (of ``later``, or raised by ``convert``) and a cancellation pass on to the result."""
    result: asyncio.Future[U] = asyncio.get_running_loop().create_future()
    if later.done():
        _settle(later, convert, result)
    else:
        later.add_done_callback(lambda done: _settle(done, convert, result))
    return result


def all_of(futures: Sequence[asyncio.Future[T]]) -> asyncio.Future[list[T]]:
    """A future of every result, in order: done at once if all are, else once the last is."""
    if not all(future.done() for future in futures):
        return asyncio.gather(*futures)
    result: asyncio.Future[list[T]] = asyncio.get_running_loop().create_future()
    try:
        result.set_result([future.result() for future in futures])
    except Exception as e:
        result.set_exception(e)
    return result


def compose(first: asyncio.Future[T], step: Callable[[T], asyncio.Future[U]]) -> asyncio.Future[U]:
    """A future of the future ``step(first's result)`` returns: a later step that itself waits. An
    exception (of ``first``, raised by ``step``, or of its future) and a cancellation pass on."""
    if first.done() and not first.cancelled() and first.exception() is None:
        try:
            return step(first.result())
        except Exception as e:
            failed: asyncio.Future[U] = asyncio.get_running_loop().create_future()
            failed.set_exception(e)
            return failed
    result: asyncio.Future[U] = asyncio.get_running_loop().create_future()

    def run(done: asyncio.Future[T]) -> None:
        if result.done():
            return
        if done.cancelled():
            result.cancel()
            return
        try:
            forward(step(done.result()), result)
        except Exception as e:
            result.set_exception(e)

    first.add_done_callback(run)
    return result


def after(previous: asyncio.Future[Any], start: Callable[[], asyncio.Future[T]]) -> asyncio.Future[T]:
    """``start()``'s future, started once ``previous`` is done, whatever its outcome: work that must
    follow other work in order without depending on its result."""
    if previous.done():
        return start()
    result: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    def run(_: asyncio.Future[Any]) -> None:
        if result.done():
            return
        try:
            forward(start(), result)
        except Exception as e:
            result.set_exception(e)

    previous.add_done_callback(run)
    return result


def forward(source: asyncio.Future[T], target: asyncio.Future[T]) -> None:
    """``target`` gets ``source``'s outcome once ``source`` is done (unless ``target`` is done by then)."""
    source.add_done_callback(lambda done: _settle(done, _same, target))


def _same(value: T) -> T:
    return value


def _settle(done: asyncio.Future[T], convert: Callable[[T], U], result: asyncio.Future[U]) -> None:
    if result.done():
        return
    if done.cancelled():
        result.cancel()
        return
    try:
        result.set_result(convert(done.result()))
    except Exception as e:
        result.set_exception(e)
