"""Test tiers and shared fixtures.

Every test that starts processes carries the ``integration`` marker (``pytest -m "not integration"``
runs the others alone); collection fails for a test that uses a process-starting fixture without it.

The quick tier runs by default. Tests marked ``slow`` (soaks, fault injection, exhaustive sweeps) run
only with ``pytest --full`` (``make test FULL=1``); otherwise they are skipped with that reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster, chroot, lone_broker, running_zookeeper
from tools.local_cluster import BrokerNode
from zk.server import ZooKeeperServer


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true", help="also run the slow tier (soak and fault tests)")


# Fixtures that start processes: every cluster fixture needs the session's ZooKeeper; the reliability
# scenarios start their own; samsa.testing's cluster; the pipeline tests' Spark (a JVM).
PROCESS_FIXTURES = frozenset({"zookeeper_server", "open_scenario", "samsa_cluster", "spark"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unmarked = [
        item.nodeid
        for item in items
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())) and "integration" not in item.keywords
    ]
    if unmarked:
        raise pytest.UsageError(
            "these tests start processes (through a fixture that does) but lack the `integration` marker "
            "(`pytestmark = pytest.mark.integration` in their module):\n  " + "\n  ".join(unmarked)
        )
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


@pytest.fixture
def zookeeper(zookeeper_server: ZooKeeperServer) -> str:
    """A connect string with a chroot of this test's own: ``127.0.0.1:PORT/samsa-test-N``."""
    return chroot(zookeeper_server)


@pytest.fixture
def broker(tmp_path: Path, zookeeper: str) -> Iterator[BrokerNode]:
    """A real ``samsa broker`` process alone (no controller) on a free port, stopped by PID after the
    test."""
    with lone_broker(tmp_path / "broker", zookeeper) as started:
        yield started


@pytest.fixture
def one_broker(tmp_path: Path, zookeeper: str) -> Iterator[Cluster]:
    """A controller and one broker (topics can be created, consumer groups work), configured as
    `samsa up --brokers 1` configures the one `make bench` measures."""
    # LocalCluster's defaults for one broker: internal topics of one replica, no initial rebalance delay.
    with Cluster(
        tmp_path / "cluster", zookeeper, brokers=1, broker_overrides={"group.initial.rebalance.delay.ms": 0}
    ) as running:
        yield running


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: str) -> Iterator[Cluster]:
    """A real cluster: one controller and three brokers on a ZooKeeper chroot of this test's own."""
    with Cluster(tmp_path / "cluster", zookeeper) as running:
        yield running
