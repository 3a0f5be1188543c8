"""Fixtures of the controller tests: a ZooKeeper client on the test's chroot, controller processes and
in-process fake brokers, all stopped when the test ends."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from tests.controller.fake_broker import FakeBroker
from tests.support.cluster import Cluster
from tools.local_cluster import ControllerNode
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
def controllers(tmp_path: Path, zookeeper: str) -> Iterator[Callable[..., ControllerNode]]:
    """``controllers(id, {setting: value})`` starts a ``samsa controller`` on this test's chroot, with a
    short ZooKeeper session (2 s) unless told otherwise: nodes of a LocalCluster whose broker is never
    started (the tests' brokers are fakes), all stopped by PID after the test."""
    cluster = Cluster(tmp_path / "controllers", zookeeper, brokers=1)
    cluster.claim_data_dir()

    def start(controller_id: int = 9001, overrides: dict[str, str] | None = None) -> ControllerNode:
        settings = {"zookeeper.session.timeout.ms": "2000", **(overrides or {})}
        controller = cluster.add_controller(controller_id, settings)
        controller.start()
        return controller

    try:
        yield start
    finally:
        cluster.stop()


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
