"""Samsa's public Python API: ``LocalCluster``, a whole Samsa cluster (ZooKeeper, controllers, brokers) as
child processes, and the ``samsa.testing`` pytest plugin built on it (docs/testing.md).

    from samsa import LocalCluster

    with LocalCluster("/tmp/my-cluster", brokers=3) as cluster:
        print(cluster.bootstrap)

The names are loaded on first use, so that ``import samsa`` (which pytest does for every run once
``samsa-broker`` is installed, to load ``samsa.testing``) costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tools.local_cluster import (
        BrokerNode,
        ControllerNode,
        LocalCluster,
        LocalClusterError,
        Node,
        NodeNotReady,
        ZooKeeperNode,
        ZooKeeperNotInstalled,
    )

__all__ = [
    "BrokerNode",
    "ControllerNode",
    "LocalCluster",
    "LocalClusterError",
    "Node",
    "NodeNotReady",
    "ZooKeeperNode",
    "ZooKeeperNotInstalled",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from tools import local_cluster

        return getattr(local_cluster, name)
    if name == "__version__":
        from importlib.metadata import version

        return version("samsa-broker")
    raise AttributeError(f"module 'samsa' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__, "__version__"])
