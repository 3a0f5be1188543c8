"""Fixtures of the controller tests: a ZooKeeper client on the test's chroot, controller processes and
in-process fake brokers, all stopped when the test ends."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from tests.controller.fake_broker import FakeBroker
from tests.harness import ControllerProcess
from zk import znodes
from zk.client import ZkClient


@pytest.fixture
async def zk(zookeeper: str) -> AsyncIterator[ZkClient]:
    client = ZkClient(zookeeper, 4000, operation_timeout=10)
    await client.start()
    for path in znodes.PERSISTENT_PATHS:
        await client.ensure_path(path)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def controllers(tmp_path: Path, zookeeper: str) -> Iterator[Callable[..., ControllerProcess]]:
    """``controllers(id, {setting: value})`` starts a ``samsa controller`` on this test's chroot, with a
    short ZooKeeper session (2 s) unless told otherwise."""
    started: list[ControllerProcess] = []

    def start(controller_id: int = 9001, overrides: dict[str, str] | None = None) -> ControllerProcess:
        settings = {"zookeeper.session.timeout.ms": "2000", **(overrides or {})}
        process = ControllerProcess(tmp_path, controller_id, zookeeper, settings)
        started.append(process)
        return process.start()

    try:
        yield start
    finally:
        for process in started:
            process.stop()


@pytest.fixture
async def brokers(zookeeper: str) -> AsyncIterator[Callable[..., FakeBroker]]:
    """``await brokers(id)`` starts a fake broker registered in this test's chroot."""
    started: list[FakeBroker] = []

    async def start(broker_id: int, rack: str | None = None) -> FakeBroker:
        broker = FakeBroker(broker_id, zookeeper, rack)
        started.append(broker)
        return await broker.start()

    try:
        yield start
    finally:
        for broker in started:
            await broker.stop()
