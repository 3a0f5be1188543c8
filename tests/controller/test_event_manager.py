"""The controller's single event queue and its connections to brokers, with in-process fakes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller.channel_manager import ControllerChannelManager
from controller.controller_zk import ControllerMovedError
from controller.event_manager import ControllerEventManager
from controller.events import ControlledShutdown, ControllerEvent, PartitionModifications
from protocol.api import ApiKey, api
from tests.controller.fakes import live_broker


async def test_events_run_one_at_a_time_in_order_and_a_failure_does_not_stop_the_queue() -> None:
    seen: list[str] = []
    running = 0

    async def process(event: ControllerEvent) -> None:
        nonlocal running
        assert isinstance(event, PartitionModifications)
        running += 1
        assert running == 1
        await asyncio.sleep(0.001)
        seen.append(event.topic)
        running -= 1
        if event.topic == "boom":
            raise RuntimeError("boom")

    manager = ControllerEventManager(process, "test")
    manager.start()
    for topic in ("a", "boom", "b", "c"):
        manager.put(PartitionModifications(topic))
    while len(seen) < 4:
        await asyncio.sleep(0.001)
    assert seen == ["a", "boom", "b", "c"]
    # close() lets the event in progress finish and drops the queued ones.
    manager.put(PartitionModifications("in progress"))
    manager.put(PartitionModifications("dropped"))
    await asyncio.sleep(0)
    await manager.close()
    assert seen[4:] == ["in progress"]


async def test_clear_and_put_abandons_the_queued_events() -> None:
    gate = asyncio.Event()
    processed: list[ControllerEvent] = []

    async def process(event: ControllerEvent) -> None:
        await gate.wait()
        processed.append(event)

    manager = ControllerEventManager(process, "test")
    manager.start()
    first, waiting = PartitionModifications("first"), ControlledShutdown(1, -1)
    manager.put(first)
    await asyncio.sleep(0)
    manager.put(waiting)
    last = PartitionModifications("last")
    manager.clear_and_put(last)
    with pytest.raises(ControllerMovedError):
        await waiting.result
    gate.set()
    await asyncio.sleep(0.01)
    assert processed == [first, last]
    await manager.close()
    late = ControlledShutdown(2, -1)
    manager.put(late)  # after close: abandoned at once
    with pytest.raises(ControllerMovedError):
        await late.result


class FlakyClient:
    """Fails its first ``failures`` sends with a connection error, then answers with the request."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts: list[Any] = []
        self.closed = False

    async def send(self, api_: Any, version: int, body: Any) -> Any:
        self.attempts.append(body)
        if self.failures:
            self.failures -= 1
            raise ConnectionError("refused")
        return body

    async def close(self) -> None:
        self.closed = True


async def test_requests_are_retried_while_the_broker_lives_and_answered_in_order() -> None:
    clients: dict[int, FlakyClient] = {}

    def factory(host: str, port: int, client_id: str, timeout: float) -> FlakyClient:
        broker_id = port - 9000
        clients[broker_id] = FlakyClient(2 if broker_id == 1 else 0)
        return clients[broker_id]

    channel = ControllerChannelManager(9001, 3, 5.0, None, "PLAINTEXT", factory)
    channel.add_broker(live_broker(1))
    answers: list[str] = []
    update_metadata = api(ApiKey.UPDATE_METADATA)
    for body in ("first", "second", "third"):
        channel.send(1, update_metadata, 7, body, answers.append)
    channel.send(5, update_metadata, 7, "nowhere", answers.append)  # not live: dropped
    while len(answers) < 3:
        await asyncio.sleep(0.01)
    assert answers == ["first", "second", "third"]
    assert clients[1].attempts == ["first", "first", "first", "second", "third"]
    # A broker that leaves takes its queue with it; after stop() nothing is sent at all.
    clients[1].failures = 10**6
    channel.send(1, update_metadata, 7, "stuck", answers.append)
    await asyncio.sleep(0.05)
    channel.remove_broker(1)
    channel.add_broker(live_broker(2))
    channel.stop()
    channel.send(2, update_metadata, 7, "after stop", answers.append)
    await channel.shutdown()
    assert clients[1].closed and clients[2].closed
    assert clients[2].attempts == []
    assert answers == ["first", "second", "third"]
