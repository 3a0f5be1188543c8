"""Test tiers and shared fixtures.

The quick tier runs by default. Tests marked ``slow`` (soaks, fault injection, exhaustive sweeps) run
only with ``pytest --full`` (``make test FULL=1``); otherwise they are skipped with that reason.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import BrokerProcess, Cluster, running_zookeeper
from zk.server import ZooKeeperServer


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true", help="also run the slow tier (soak and fault tests)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--full"):
        return
    skip = pytest.mark.skip(reason="slow tier: run with `make test FULL=1` (pytest --full)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper (Debian's package) for the whole run; tests isolate themselves by chroot."""
    with running_zookeeper(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


_chroots = itertools.count()


@pytest.fixture
def zookeeper(zookeeper_server: ZooKeeperServer) -> str:
    """A connect string with a chroot of this test's own: ``127.0.0.1:PORT/samsa-test-N``."""
    return f"{zookeeper_server.connect_string}/samsa-test-{next(_chroots)}"


@pytest.fixture
def broker(tmp_path: Path, zookeeper: str) -> Iterator[BrokerProcess]:
    """A real ``samsa broker`` process on a free port, stopped by PID after the test."""
    process = BrokerProcess(tmp_path / "broker", zookeeper)
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def one_broker(tmp_path: Path, zookeeper: str) -> Iterator[Cluster]:
    """A controller and one broker (topics can be created, consumer groups work), configured as
    `samsa up --brokers 1` configures the one `make bench` measures."""
    internal_topics = {
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    running = Cluster(tmp_path / "cluster", zookeeper, brokers=1, broker_overrides=internal_topics).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: str) -> Iterator[Cluster]:
    """A real cluster: one controller and three brokers on a ZooKeeper chroot of this test's own."""
    running = Cluster(tmp_path / "cluster", zookeeper).start()
    try:
        yield running
    finally:
        running.stop()
