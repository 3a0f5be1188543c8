"""Real clusters for the tests, all started by ``tools.local_cluster.LocalCluster``: one ZooKeeper for
the whole run (``running_zookeeper``, the session fixture ``zookeeper_server``) with a chroot of its own
per cluster (``chroot``), and ``Cluster``, a LocalCluster with the conveniences the tests use.

Nothing here starts or stops a process itself: LocalCluster does, on free ports, stopping every node by
PID when the cluster stops (the fixtures stop it at the end of the test, whatever happened).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tools.local_cluster import BrokerNode, ControllerNode, LocalCluster, free_port
from tools.local_cluster_nodes import death_signal_preexec
from zk.server import ZooKeeperNotInstalled, ZooKeeperServer

__all__ = ["KAFKA_DEFAULTS", "ROOT", "Cluster", "chroot", "free_port", "lone_broker", "running_zookeeper"]

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def running_zookeeper(workdir: Path) -> Iterator[ZooKeeperServer]:
    """A real ZooKeeper (Debian's package or ``ZOOKEEPER_HOME``) on a free port in ``workdir``, stopped
    on exit; the calling test is skipped, saying why, when ZooKeeper is not installed."""
    import pytest

    # Tied to this process: a test run killed mid-way leaves no ZooKeeper behind.
    server = ZooKeeperServer(workdir, free_port(), preexec_fn=death_signal_preexec())
    try:
        server.start()
    except ZooKeeperNotInstalled as e:
        pytest.skip(str(e))
    try:
        yield server
    finally:
        server.stop()


_chroots = itertools.count()


def chroot(server: ZooKeeperServer, label: str = "samsa-test") -> str:
    """A connect string with a chroot no other cluster of this run uses: ``127.0.0.1:PORT/LABEL-N``."""
    return f"{server.connect_string}/{label}-{next(_chroots)}"


# Where LocalCluster's defaults (every topic replicated min(3, brokers) times, no initial rebalance
# delay) differ from Kafka's, the tests' clusters keep Kafka's, which the tests were written against.
KAFKA_DEFAULTS = {"default.replication.factor": "1", "group.initial.rebalance.delay.ms": "3000"}


class Cluster(LocalCluster):
    """A LocalCluster on a ZooKeeper chroot (``zookeeper``), with ``broker_overrides`` for every broker
    (over ``KAFKA_DEFAULTS``) and the controllers' ZooKeeper session as the brokers' (6 s)."""

    def __init__(
        self,
        workdir: Path,
        zookeeper: str,
        brokers: int = 3,
        controllers: int = 1,
        broker_overrides: Mapping[str, object] | None = None,
        **options: Any,
    ) -> None:
        settings = {**KAFKA_DEFAULTS, **(broker_overrides or {})}
        super().__init__(
            workdir,
            brokers=brokers,
            controllers=controllers,
            zookeeper=zookeeper,
            broker_overrides={i: settings for i in range(1, brokers + 1)},
            **options,
        )

    def wait_for(self, condition: Callable[[Any], Any], what: str, timeout: float = 20.0) -> Any:
        """Polls ``condition(kazoo_client)`` (the cluster's chroot) until it returns something truthy,
        and returns that; TimeoutError naming ``what`` after ``timeout`` s."""
        return self.wait(lambda: condition(self.zk()), what, timeout)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int | None = 1,
        configs: Mapping[str, object] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """LocalCluster's, one replica unless told otherwise."""
        super().create_topic(name, partitions, replication_factor, configs, timeout)

    def add_controller(
        self, controller_id: int, overrides: Mapping[str, object] | None = None
    ) -> ControllerNode:
        """Another controller (or a replacement for one never started), not started: ``.start()``."""
        if controller_id in self.controllers and self.controllers[controller_id].process is not None:
            raise ValueError(f"controller {controller_id} exists")
        controller = ControllerNode(self, controller_id, self.host, free_port())
        controller.overrides.update({k: str(v) for k, v in (overrides or {}).items()})
        self.controllers[controller_id] = controller
        return controller


@contextlib.contextmanager
def lone_broker(
    workdir: Path, zookeeper: str, overrides: Mapping[str, object] | None = None
) -> Iterator[BrokerNode]:
    """Broker 1 of a ``Cluster`` alone, no controller started: it registers and serves, but nothing
    leads a partition until a controller (a test's own, or a fake) says so. Stopped on exit."""
    cluster = Cluster(workdir, zookeeper, brokers=1, broker_overrides=overrides)
    cluster.claim_data_dir()
    try:
        broker = cluster.broker(1)
        broker.start()
        yield broker
    finally:
        cluster.stop()
