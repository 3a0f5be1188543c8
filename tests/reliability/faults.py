"""Fault injection for the reliability scenarios: ``Node``, one process of the cluster that faults act
on (signals, stops, starts) with every fault written to the nemesis history.

The network side (a private network namespace with an address per node, partitions between nodes) is
library code, ``tools.local_cluster_net.NetworkSandbox``, which ``LocalCluster`` uses too; it is
re-exported here as ``Sandbox``.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any, Protocol

from tests.reliability.history import INFO, HistoryWriter
from tools.local_cluster_net import LOCALHOST, NetworkSandbox, Sandbox

__all__ = ["LOCALHOST", "NetworkSandbox", "Node", "Sandbox"]


class _Process(Protocol):
    """What a LocalCluster node and zk.server.ZooKeeperServer have in common."""

    process: subprocess.Popen | None

    def start(self) -> Any: ...

    def stop(self) -> Any: ...


class Node:
    """One process of the cluster (ZooKeeper, a controller, a broker) that faults act on. Every fault
    is written to the nemesis history as an ``info`` op naming the node."""

    def __init__(self, name: str, process: _Process, sandbox: Sandbox, nemesis: HistoryWriter) -> None:
        self.name = name
        self.process = process
        self.sandbox = sandbox
        self.nemesis = nemesis
        self.paused = False

    def __repr__(self) -> str:
        return f"Node({self.name})"

    @property
    def pid(self) -> int | None:
        return None if self.process.process is None else self.process.process.pid

    def alive(self) -> bool:
        return self.process.process is not None and self.process.process.poll() is None

    def start(self) -> None:
        """Starts (or restarts) the process on its address and waits until it serves."""
        with self.sandbox.as_node(self.name):
            self.process.start()
        self.nemesis.write(INFO, "start", self.name)

    def stop(self) -> None:
        """A clean stop: SIGTERM, and for a broker its controlled shutdown."""
        self.process.stop()
        self.nemesis.write(INFO, "stop", self.name)

    def kill(self) -> None:
        """SIGKILL, and waits until the process is gone."""
        popen = self.process.process
        if popen is not None and popen.poll() is None:
            popen.kill()
            popen.wait()
        self.paused = False
        self.nemesis.write(INFO, "kill", self.name)

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)
        self.paused = True
        self.nemesis.write(INFO, "pause", self.name)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self.paused = False
        self.nemesis.write(INFO, "resume", self.name)

    def _signal(self, sig: int) -> None:
        popen = self.process.process
        if popen is not None and popen.poll() is None:
            os.kill(popen.pid, sig)

    def terminate(self) -> None:
        """Stops the process whatever state it is in, for cleanup; not a fault (nothing is logged)."""
        popen = self.process.process
        if popen is not None and popen.poll() is None:
            os.kill(popen.pid, signal.SIGKILL)
            popen.wait()
        self.process.stop()  # a no-op on the dead process but for closing its log file
