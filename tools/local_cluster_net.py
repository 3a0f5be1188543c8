"""Network faults for a ``LocalCluster``: a private network namespace in which every node has an
address of its own, and partitions between nodes (the mechanism of reliability.md §3, topology 1).

``NetworkSandbox`` (also exported as ``Sandbox``) is a context manager. Entering it creates a network
namespace and moves the *calling thread* into it (``setns``), so processes that thread starts from then
on are inside too, and so are the thread's own connections: start the cluster, and the clients that
talk to it, from that thread. Every node gets a loopback address, 127.0.0.2 and up; the calling thread
itself is 127.0.0.1. Inside, port numbers cannot clash with anything else on the machine, and nothing
touches the host's network or firewall.

A node's *listeners* are bound to its address, but a connection a node *opens* would leave from
127.0.0.1: the kernel picks a loopback source address by route, not by process. So each node's
processes run in a cgroup (v2) of their own, and a ``nat POSTROUTING -m cgroup --path ... -j SNAT``
rule gives the connections they open their node's address. A partition is then plain address rules:
``-s A -d B -j DROP`` in INPUT (which sees packets after source NAT) and in OUTPUT (which sees replies
before it), both ways, for every pair. A process joins its cgroup by being started while the calling
process itself sits in that cgroup (``NetworkSandbox.as_node``), so nodes start one at a time.

It needs root (``ip netns add``, iptables, cgroup v2). Without the rights for ``ip netns add`` the
sandbox runs on the host's loopback (everything at 127.0.0.1) and partitions are unavailable;
``partition_unavailable`` says why (a test skips with that reason). Everything is undone in
``__exit__``: processes left in the namespace are killed by PID, the namespace is deleted, the cgroups
removed. ``tests/reliability/faults.py`` and ``LocalCluster(sandbox=...)`` use it.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CLONE_NEWNET = 0x40000000
LOCALHOST = "127.0.0.1"
FIRST_NODE_ADDRESS = 2
_sandboxes = itertools.count()


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


def _cgroup2_mount() -> Path | None:
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            _, mountpoint, fstype, *_ = line.split()
            if fstype == "cgroup2":
                return Path(mountpoint)
    return None


def _own_cgroup() -> str:
    with open("/proc/self/cgroup", encoding="utf-8") as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip()
    raise RuntimeError("this process is in no cgroup v2")


class NetworkSandbox:
    """A network namespace for one test, with an address per node and partitions between them."""

    def __init__(self, prefix: str = "samsa-rel") -> None:
        self.name = f"{prefix}-{os.getpid()}-{next(_sandboxes)}"
        self.unavailable: str | None = None  # why there is no namespace (host mode)
        self.partition_unavailable: str | None = None
        self._addresses: dict[str, str] = {}
        self._home_fd: int | None = None
        self._cgroups: Path | None = None
        self._cgroup_home: Path | None = None
        self._rules: list[list[str]] = []

    # -- lifecycle ----------------------------------------------------------------------------------

    def __enter__(self) -> NetworkSandbox:
        ip = shutil.which("ip")
        created = _run(ip, "netns", "add", self.name) if ip else None
        if created is None or created.returncode != 0:
            reason = created.stderr.strip() if created is not None else "the `ip` command is missing"
            self.unavailable = f"`ip netns add` is not permitted here ({reason})"
            self.partition_unavailable = self.unavailable
            return self
        try:
            self._enter_namespace()
            self._prepare_partitions()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _enter_namespace(self) -> None:
        self._home_fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        up = _run("ip", "link", "set", "lo", "up")
        if up.returncode != 0:
            raise RuntimeError(f"ip link set lo up in {self.name}: {up.stderr.strip()}")

    def _prepare_partitions(self) -> None:
        if shutil.which("iptables") is None:
            self.partition_unavailable = "iptables is not installed (apt-get install iptables)"
            return
        probe = _run("iptables", "-t", "nat", "-S")
        if probe.returncode != 0:
            self.partition_unavailable = f"iptables does not work here: {probe.stderr.strip()}"
            return
        mount = _cgroup2_mount()
        if mount is None:
            self.partition_unavailable = "no cgroup v2 hierarchy is mounted (needed to give nodes addresses)"
            return
        cgroups = mount / self.name
        try:
            cgroups.mkdir()
        except OSError as e:
            self.partition_unavailable = f"cannot create a cgroup under {mount}: {e}"
            return
        self._cgroups = cgroups
        self._cgroup_home = mount / _own_cgroup().lstrip("/")

    def __exit__(self, *_exc: Any) -> None:
        if self.unavailable is not None:
            return
        try:
            if self._home_fd is not None:  # first: `ip netns pids` would list this process too
                _setns(self._home_fd)
                os.close(self._home_fd)
                self._home_fd = None
            self._kill_leftovers()
        finally:
            _run("ip", "netns", "del", self.name)
            self._remove_cgroups()

    def _kill_leftovers(self) -> None:
        """Processes a scenario failed to stop: only this test's own processes can be in its namespace."""
        listed = _run("ip", "netns", "pids", self.name).stdout.split()
        pids = [int(p) for p in listed if int(p) != os.getpid()]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _is_zombie(p)]
            time.sleep(0.05)

    def _remove_cgroups(self) -> None:
        if self._cgroups is None:
            return
        for child in self._cgroups.iterdir():
            if child.is_dir():
                _rmdir_when_empty(child)
        _rmdir_when_empty(self._cgroups)

    # -- nodes --------------------------------------------------------------------------------------

    @property
    def isolated(self) -> bool:
        return self.unavailable is None

    def address(self, node: str) -> str:
        """The node's own address (127.0.0.1 for every node on the host's loopback)."""
        if not self.isolated:
            return LOCALHOST
        if node not in self._addresses:
            self._addresses[node] = f"127.0.0.{FIRST_NODE_ADDRESS + len(self._addresses)}"
        return self._addresses[node]

    @property
    def nodes(self) -> list[str]:
        """The nodes given an address so far, in the order they got it."""
        return list(self._addresses)

    def node_of(self, address: str) -> str | None:
        return next((n for n, a in self._addresses.items() if a == address), None)

    @contextmanager
    def as_node(self, node: str) -> Iterator[None]:
        """Processes started inside this block open their connections from the node's address."""
        if self._cgroups is None:
            yield
            return
        group = self._cgroups / node
        if not group.exists():
            group.mkdir()
            relative = f"{self.name}/{node}"
            self._iptables("-t", "nat", "-A", "POSTROUTING", "-m", "cgroup", "--path", relative,
                           "-j", "SNAT", "--to-source", self.address(node))  # fmt: skip
        (group / "cgroup.procs").write_text(str(os.getpid()))
        try:
            yield
        finally:
            assert self._cgroup_home is not None
            (self._cgroup_home / "cgroup.procs").write_text(str(os.getpid()))

    # -- partitions ---------------------------------------------------------------------------------

    def partition(self, side: Iterable[str], other_side: Iterable[str]) -> list[str]:
        """Drops every packet between a node of ``side`` and a node of ``other_side``, both ways, on
        connections old and new; returns the rules added (for the history)."""
        if self.partition_unavailable is not None:
            raise RuntimeError(self.partition_unavailable)
        added = []
        for a in side:
            for b in other_side:
                for source, destination in ((a, b), (b, a)):
                    for chain in ("INPUT", "OUTPUT"):
                        rule = [
                            chain,
                            "-s",
                            self.address(source),
                            "-d",
                            self.address(destination),
                            "-j",
                            "DROP",
                        ]
                        self._iptables("-A", *rule)
                        added.append(" ".join(rule))
        return added

    def heal(self) -> None:
        """Removes every partition."""
        if self.partition_unavailable is None:
            self._iptables("-F", "INPUT")
            self._iptables("-F", "OUTPUT")

    def _iptables(self, *args: str) -> None:
        done = _run("iptables", "-w", *args)
        if done.returncode != 0:
            raise RuntimeError(f"iptables {' '.join(args)}: {done.stderr.strip()}")


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def _rmdir_when_empty(path: Path, timeout: float = 5.0) -> None:
    # A killed process leaves its cgroup a moment after it is reaped.
    deadline = time.monotonic() + timeout
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


Sandbox = NetworkSandbox
