"""The one way to answer later: delayed operations in a purgatory (completed by a check, by their
deadline, or cancelled), the futures their results travel in, and ``park``, which turns such a
future into a response now or a parked one."""

from __future__ import annotations

import asyncio

import pytest

from network.handler_pool import Parked, park
from protocol.messages import ApiVersionsResponse, Message
from server_common.futures import after, all_of, completed, compose, forward, then
from server_common.purgatory import DelayedOperation, DelayedOperationPurgatory


class Waiting(DelayedOperation[str]):
    def __init__(self, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.ready = False
        self.expired = False

    def try_complete(self) -> bool:
        return self.ready and self.complete()

    def on_complete(self) -> str:
        return "ready" if self.ready else "timed out"

    def on_expiration(self) -> None:
        self.expired = True


async def test_an_operation_that_can_complete_is_not_watched() -> None:
    purgatory = DelayedOperationPurgatory[str]("test")
    operation = Waiting(10_000)
    operation.ready = True
    assert purgatory.try_complete_else_watch(operation, ["k"]).result() == "ready"
    assert len(purgatory) == 0


async def test_a_check_of_its_key_completes_it_once() -> None:
    purgatory = DelayedOperationPurgatory[str]("test")
    operation = Waiting(10_000)
    future = purgatory.try_complete_else_watch(operation, ["a", "b"])
    assert purgatory.check("a") == 0 and not future.done()
    operation.ready = True
    assert purgatory.check("b") == 1 and future.result() == "ready"
    assert purgatory.check("a") == 0 and len(purgatory) == 0 and not operation.expired


async def test_the_deadline_completes_it_and_runs_on_expiration() -> None:
    purgatory = DelayedOperationPurgatory[str]("test")
    operation = Waiting(10)
    assert await purgatory.try_complete_else_watch(operation, ["k"]) == "timed out"
    assert operation.expired and len(purgatory) == 0


async def test_cancelled_operations_neither_complete_nor_expire() -> None:
    purgatory = DelayedOperationPurgatory[str]("test")
    first, second = Waiting(10), Waiting(10)
    purgatory.try_complete_else_watch(first, ["k"])
    purgatory.try_complete_else_watch(second, ["k", "other"])
    assert purgatory.watched("k") and purgatory.cancel_for_key("k") == 2
    await asyncio.sleep(0.03)
    assert first.future.cancelled() and second.future.cancelled()
    assert not first.expired and not second.expired and len(purgatory) == 0


async def test_then_computes_at_once_what_is_done() -> None:
    assert then(completed(2), lambda n: n * 3).result() == 6
    later: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    tripled = then(later, lambda n: n * 3)
    assert not tripled.done()
    later.set_result(5)
    assert await tripled == 15
    failing = then(completed(0), lambda n: 1 // n)
    with pytest.raises(ZeroDivisionError):
        failing.result()


async def test_all_of_and_forward() -> None:
    assert all_of([completed(1), completed(2)]).result() == [1, 2]
    later: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    both = all_of([completed(1), later])
    first: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    forward(later, first)
    later.set_result(7)
    assert await both == [1, 7] and await first == 7


async def test_compose_chains_a_step_that_itself_waits() -> None:
    assert compose(completed(2), lambda n: completed(n + 1)).result() == 3
    later: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    step: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    chained = compose(later, lambda n: step)
    later.set_result(1)
    await asyncio.sleep(0)
    assert not chained.done()
    step.set_result(9)
    assert await chained == 9
    failing = compose(completed(0), lambda n: completed(1 // n))
    with pytest.raises(ZeroDivisionError):
        failing.result()


async def test_after_starts_once_the_previous_is_done_whatever_its_outcome() -> None:
    previous: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    started: list[int] = []
    following = after(previous, lambda: started.append(1) or completed(4))
    assert not started
    previous.set_exception(RuntimeError("the earlier work failed"))
    assert await following == 4 and started == [1]
    previous.exception()  # retrieved: the failure belonged to the earlier work


def _response(error: int) -> Message:
    return ApiVersionsResponse(error_code=error, api_keys=[])


async def test_park_answers_now_or_parks() -> None:
    now = park(completed(0), _response)
    assert isinstance(now, ApiVersionsResponse) and now.error_code == 0
    later: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    parked = park(later, _response)
    assert isinstance(parked, Parked) and not parked.response.done()
    later.set_result(35)
    response = await parked.response
    assert isinstance(response, ApiVersionsResponse) and response.error_code == 35
