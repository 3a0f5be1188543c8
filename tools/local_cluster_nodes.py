"""The processes of a ``LocalCluster`` (tools/local_cluster.py): one ``Node`` per ZooKeeper, controller and
broker, and the helpers that find, signal and sweep processes by PID.

Each node lives in a directory of its own under the cluster's data dir, with its config, its log file
(appended across restarts) and a pid file:

    DIR/zookeeper/            zoo.cfg, data/, zookeeper.log, zookeeper.pid
    DIR/controller-9001/      controller.properties, controller.log, controller.pid
    DIR/broker-1/             server.properties, broker.log, broker.pid, data/ (log.dirs)
    DIR/console-1/            console.properties (its client settings), console.log, console.pid

A node's process is started in a session of its own (a Ctrl-C in the terminal reaches only the parent,
which stops the nodes in order) and, on Linux, with ``PR_SET_PDEATHSIG``: the kernel sends it SIGTERM when
the thread that started it ends, which is when the parent process dies, even by SIGKILL, if that thread
is the main thread. (A node started from another thread gets no death signal, because the thread may
end long before the process; the parent's exit handler and the pid-file sweep at the next start of the
same data dir cover it.) The pid file and the process's command line, which names its config file under
the data dir, let a later ``LocalCluster`` on the same data dir find and kill what an earlier one left.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from tools.probe import answers_api_versions
from zk.server import ZooKeeperNotInstalled, ZooKeeperServer, four_letter_word

if TYPE_CHECKING:
    from tools.local_cluster import LocalCluster

FIRST_CONTROLLER_ID = 9001
_PR_SET_PDEATHSIG = 1
_POLL_S = 0.05


class LocalClusterError(Exception):
    """Why a cluster or a node cannot start, or a request on it cannot be done (the message says)."""


class NodeNotReady(LocalClusterError, TimeoutError):
    """A node (or the cluster) was not ready in time; the message names what was missing."""


class Interrupted(LocalClusterError):
    """A wait was cut short by ``LocalCluster.interrupt()`` (``samsa up``'s Ctrl-C)."""


# -- ports -------------------------------------------------------------------------------------------

_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago on ``host`` (the kernel picks it) and that this process has
    not handed out before: a cluster takes its ports before any of its processes binds, and the kernel
    may offer a just-closed port again."""
    with _handed_out_lock:
        while True:
            with socket.socket() as s:
                s.bind((host, 0))
                port: int = s.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port


def port_in_use(host: str, port: int) -> bool:
    """True if a listener could not bind ``host:port`` (servers set SO_REUSEADDR, and so does this)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError:
            return True
    return False


# -- processes by PID --------------------------------------------------------------------------------


def process_state(pid: int) -> str | None:
    """The state letter of ``/proc/PID/stat`` (R, S, D, T for stopped, Z for a zombie), None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except (OSError, IndexError):
        return None


def pid_alive(pid: int) -> bool:
    """The process exists and has not exited (a zombie, exited but not yet reaped, counts as gone)."""
    return process_state(pid) not in (None, "Z", "X")


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def belongs_to(pid: int, data_dir: Path) -> bool:
    """The process's command line names a file under ``data_dir`` (every node's does: its config), so a
    recorded PID that the kernel has since given to another program is left alone."""
    return pid != os.getpid() and f"{Path(data_dir).resolve()}/" in command_line(pid)


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Waits until none of ``pids`` is alive; returns those still alive at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in pids if pid_alive(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(_POLL_S)


def signal_pid(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


# Resolved once in the parent: the child calls it between fork and exec, where loading anything is unsafe.
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def _die_with_parent(parent_pid: int) -> None:
    """Runs in the child between fork and exec: the kernel sends it SIGTERM when the parent's starting
    thread ends (the parent dies, even by SIGKILL), so that no node outlives the process that owns it."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def death_signal_preexec() -> Callable[[], None] | None:
    """The ``preexec_fn`` that ties a child to this process, or None where that cannot be done safely:
    PR_SET_PDEATHSIG fires when the starting *thread* ends, so only the main thread may use it."""
    if _prctl is None or threading.current_thread() is not threading.main_thread():
        return None
    return partial(_die_with_parent, os.getpid())


def tail(path: Path, lines: int = 12, since: int = 0) -> str:
    """The last lines of a log file (from byte ``since``), indented, for error messages."""
    try:
        with open(path, "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


def write_properties_text(path: Path, text: str, private: bool = False) -> None:
    """Writes a node's config file; ``private``: readable by its owner only (it holds a password)."""
    if not private:
        path.write_text(text)
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, 0o600)


# -- nodes -------------------------------------------------------------------------------------------


class Node:
    """One process of the cluster. ``start``/``stop``/``kill``/``pause``/``resume``/``restart`` act on it by
    PID; ``process`` is its ``subprocess.Popen`` (None before the first start). Not thread-safe: drive a
    cluster from one thread."""

    ROLE: ClassVar[str] = "node"
    LOG_NAME: ClassVar[str] = "node.log"
    STOP_TIMEOUT: ClassVar[float] = 30.0

    def __init__(self, cluster: LocalCluster, node_id: int, host: str, port: int) -> None:
        self.cluster = cluster
        self.id = node_id
        self.host = host
        self.port = port
        self.overrides: dict[str, str] = {}  # this node's own settings, applied over the cluster's
        self.metrics_port: int | None = None  # its metrics.listener's port, once its config is written
        self.process: subprocess.Popen | None = None
        self.paused = False
        self.started_ms = 0  # wall clock of the last start, to tell its ZooKeeper nodes from older ones
        self.log_offset = 0  # where the log file stood at the last start
        self.expected_exit = True  # stopped or killed through this object, or never started
        self.exit_reported = True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} pid={self.pid} {self.state}>"

    @property
    def name(self) -> str:
        """``zookeeper``, ``controller-9001``, ``broker-1``: its directory and its name in the sandbox."""
        return f"{self.ROLE}-{self.id}"

    @property
    def directory(self) -> Path:
        return self.cluster.data_dir / self.name

    @property
    def log_path(self) -> Path:
        return self.directory / self.LOG_NAME

    @property
    def pid_path(self) -> Path:
        return self.directory / f"{self.ROLE}.pid"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str | None:
        """Where its Prometheus metrics are scraped (None: no metrics endpoint)."""
        if self.metrics_port is None:
            return None
        return f"http://{self.host}:{self.metrics_port}/metrics"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def alive(self) -> bool:
        """Started and not exited (a paused node is alive)."""
        return self.process is not None and self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    @property
    def state(self) -> str:
        if self.process is None:
            return "not started"
        code = self.process.poll()
        if code is not None:
            return f"exited code={code}"
        return "paused" if self.paused else "running"

    # -- logs ------------------------------------------------------------------------------------

    def log(self, since_start: bool = False) -> str:
        """The node's log file (every run of it appends), or only what its current run wrote."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset if since_start else 0)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def wait_for_log(self, text: str, timeout: float = 30.0) -> None:
        """Waits until the current run has logged ``text``."""
        self._wait(lambda: text in self.log(since_start=True), f"{self.name} to log {text!r}", timeout)

    def log_tail(self, lines: int = 12) -> str:
        return tail(self.log_path, lines, self.log_offset)

    # -- control ---------------------------------------------------------------------------------

    def start(self, wait: bool = True, timeout: float | None = None) -> Node:
        """Starts the process (again, after a stop or kill: same port, same data) and, with ``wait``,
        returns once it serves."""
        if self.alive:
            raise LocalClusterError(f"{self.name} is already running (pid {self.pid})")
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self.log_offset = self.log_path.stat().st_size
        except OSError:
            self.log_offset = 0
        self.started_ms = int(time.time() * 1000)
        self.paused = False
        sandbox = self.cluster.sandbox
        if sandbox is not None:
            with sandbox.as_node(self.name):
                self.process = self._spawn()
        else:
            self.process = self._spawn()
        self.pid_path.write_text(f"{self.process.pid}\n")
        self.expected_exit = False
        self.exit_reported = False
        self.cluster._started(self)
        if wait:
            self.wait_ready(timeout)
        return self

    def _spawn(self) -> subprocess.Popen:
        raise NotImplementedError

    def _popen(self, args: list[str]) -> subprocess.Popen:
        """Runs ``args`` as this node: in a session of its own, with the death signal, its output
        appended to its log file."""
        log = open(self.log_path, "ab")  # handed to the child
        try:
            return subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=death_signal_preexec(),
                env=self.cluster.env,
            )
        finally:
            log.close()

    def ready(self) -> bool:
        """Serving: a broker or controller answers ApiVersions (over TLS in a secure cluster: ApiVersions
        is served before SASL authentication), ZooKeeper answers ``srvr``."""
        security = self.cluster.security
        context = security.ssl_context() if security is not None else None
        return answers_api_versions(self.host, self.port, timeout=1.0, ssl_context=context)

    def wait_ready(self, timeout: float | None = None) -> None:
        self._wait(self.ready, f"{self.name} to serve on {self.address}", timeout)

    def _wait(self, condition: Callable[[], object], what: str, timeout: float | None) -> None:
        timeout = self.cluster.node_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while not condition():
            if not self.alive:
                raise LocalClusterError(
                    f"{self.name} exited ({self.state}) while waiting for {what}; the end of "
                    f"{self.log_path}:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise NodeNotReady(
                    f"waited {timeout:g} s for {what}; the end of {self.log_path}:\n{self.log_tail()}"
                )
            self.cluster._sleep(_POLL_S)

    def signal(self, sig: int) -> None:
        """Sends ``sig`` to this process only (if it is running)."""
        if self.alive:
            assert self.process is not None
            os.kill(self.process.pid, sig)

    def terminate(self) -> None:
        """The first half of ``stop``: SIGCONT (in case it is paused), then SIGTERM."""
        if self.alive:
            self.expected_exit = True
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            self.paused = False

    def wait_exit(self, timeout: float | None = None) -> int | None:
        """Waits for the process to exit; SIGKILLs it at the deadline, or at once when the cluster is
        told to force (``samsa up``'s second Ctrl-C). Returns the exit code."""
        if self.process is None:
            return None
        deadline = time.monotonic() + (self.STOP_TIMEOUT if timeout is None else timeout)
        while self.process.poll() is None:
            if self.cluster.forced or time.monotonic() > deadline:
                if not self.cluster.forced:
                    self.cluster.report(
                        "progress",
                        f"{self.name} did not exit in time: SIGKILL; the end of {self.log_path}:\n"
                        f"{self.log_tail(6)}",
                    )
                self.expected_exit = True
                self.process.kill()
                self.process.wait()
                break
            time.sleep(_POLL_S)
        return self.process.returncode

    def stop(self, timeout: float | None = None) -> int | None:
        """A clean stop: SIGTERM (a broker's controlled shutdown moves its leaderships first), SIGKILL if
        it has not exited after ``timeout`` s. Returns the exit code."""
        if not self.alive:
            return self.returncode
        self.terminate()
        code = self.wait_exit(timeout)
        self.cluster._stopped(self, "stopped")
        return code

    def kill(self) -> int | None:
        """SIGKILL (a crash: no controlled shutdown, the ZooKeeper session lives on until it times out);
        returns once the process is gone."""
        if not self.alive:
            return self.returncode
        assert self.process is not None
        self.expected_exit = True
        self.process.kill()
        self.process.wait()
        self.paused = False
        self.cluster._stopped(self, "killed")
        return self.process.returncode

    def pause(self) -> None:
        """SIGSTOP: the process freezes with its connections open (its ZooKeeper session expires after
        the session timeout), as a long GC pause or a hung VM."""
        self.signal(signal.SIGSTOP)
        self.paused = self.alive
        self.cluster._save_state()

    def resume(self) -> None:
        """SIGCONT after ``pause``."""
        self.signal(signal.SIGCONT)
        self.paused = False
        self.cluster._save_state()

    def restart(self, wait: bool = True, timeout: float | None = None, hard: bool = False) -> Node:
        """``stop`` (or ``kill`` with ``hard``), then ``start``."""
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start(wait=wait, timeout=timeout)

    def describe(self) -> dict[str, Any]:
        """What the cluster's state file records of this node."""
        return {
            "role": self.ROLE,
            "id": self.id,
            "name": self.name,
            "pid": self.pid,
            "host": self.host,
            "port": self.port,
            "state": self.state,
            "log": str(self.log_path),
        }


class ZooKeeperNode(Node):
    """The cluster's own standalone ZooKeeper (zk.server)."""

    ROLE = "zookeeper"
    LOG_NAME = "zookeeper.log"
    STOP_TIMEOUT = 5.0

    def __init__(self, cluster: LocalCluster, host: str, port: int) -> None:
        super().__init__(cluster, 1, host, port)
        self.server: ZooKeeperServer | None = None

    @property
    def name(self) -> str:
        return "zookeeper"

    @property
    def connect_string(self) -> str:
        return self.address

    def _spawn(self) -> subprocess.Popen:
        self.server = ZooKeeperServer(self.directory, self.port, self.host, preexec_fn=death_signal_preexec())
        try:
            self.server.start(timeout=self.cluster.node_timeout)  # returns once it serves
        except ZooKeeperNotInstalled:
            raise
        except (RuntimeError, TimeoutError) as e:
            raise LocalClusterError(f"{e}\n{tail(self.log_path, since=self.log_offset)}") from None
        assert self.server.process is not None
        return self.server.process

    def ready(self) -> bool:
        try:
            return b"Mode:" in four_letter_word(self.host, self.port, b"srvr")
        except OSError:
            return False


class _ServerNode(Node):
    """A ``samsa broker`` or ``samsa controller`` child: ``python -m tools ROLE --config FILE``, the file
    written at every start from the cluster's settings (edits to it are overwritten)."""

    CONFIG_NAME: ClassVar[str] = "server.properties"

    @property
    def config_path(self) -> Path:
        return self.directory / self.CONFIG_NAME

    def config(self) -> dict[str, str]:
        """The settings its next start writes to its config file."""
        raise NotImplementedError

    def _spawn(self) -> subprocess.Popen:
        security = self.cluster.security
        if security is not None:  # a node added since the cluster started needs a certificate too
            security.prepare({self.name: [self.host]})
        props = self.config()
        lines = [
            f"# Written by LocalCluster (samsa up) at every start of {self.name}: edits are overwritten."
        ]
        lines += [f"{key}={value}" for key, value in props.items()]
        text = "\n".join(lines) + "\n"
        if security is not None:  # it holds the inter-broker user's password
            write_properties_text(self.config_path, text, private=True)
        else:
            self.config_path.write_text(text)
        args = [sys.executable, "-m", "tools", self.ROLE, "--config", str(self.config_path)]
        return self._popen(args)


class ControllerNode(_ServerNode):
    ROLE = "controller"
    LOG_NAME = "controller.log"
    CONFIG_NAME = "controller.properties"
    STOP_TIMEOUT = 20.0

    @property
    def controller_id(self) -> int:
        return self.id

    @property
    def endpoint(self) -> str:
        return self.address

    def config(self) -> dict[str, str]:
        return self.cluster.controller_config(self)


class BrokerNode(_ServerNode):
    ROLE = "broker"
    LOG_NAME = "broker.log"
    STOP_TIMEOUT = 60.0  # a controlled shutdown retries with backoff before the broker gives up

    @property
    def broker_id(self) -> int:
        return self.id

    @property
    def bootstrap(self) -> str:
        return self.address

    @property
    def log_dir(self) -> Path:
        """Its ``log.dirs`` (unless an override moved it)."""
        return self.directory / "data"

    def config(self) -> dict[str, str]:
        return self.cluster.broker_config(self)

    def _spawn(self) -> subprocess.Popen:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return super()._spawn()


class ConsoleNode(Node):
    """``samsa console`` for the cluster, on ``host:port``: a Kafka client of the brokers, reading their
    metrics endpoints. Its client settings (the admin's TLS and SASL in a secure cluster) are written to
    ``console.properties`` at every start and given as its ``--command-config``."""

    ROLE = "console"
    LOG_NAME = "console.log"
    STOP_TIMEOUT = 10.0

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.directory / "console.properties"

    def _spawn(self) -> subprocess.Popen:
        cluster = self.cluster
        settings = cluster.security.client_properties() if cluster.security is not None else {}
        lines = [
            f"# Written by LocalCluster (samsa up) at every start of {self.name}: edits are overwritten."
        ]
        lines += [f"{key}={value}" for key, value in settings.items()]
        write_properties_text(self.config_path, "\n".join(lines) + "\n", private=True)
        brokers = list(cluster.brokers.values())
        args = [
            sys.executable, "-m", "tools", "console",
            "--bootstrap-server", ",".join(b.bootstrap for b in brokers),
            "--host", self.host, "--port", str(self.port),
            "--command-config", str(self.config_path),
        ]  # fmt: skip
        metrics = [b.metrics_url for b in brokers if b.metrics_url is not None]
        if metrics:
            args += ["--metrics", ",".join(metrics)]
        args += [f"--{key}={value}" for key, value in self.overrides.items()]
        return self._popen(args)

    def ready(self) -> bool:
        """Answers HTTP (a 401 of a console that asks for a password counts)."""
        try:
            with urllib.request.urlopen(f"{self.url}/static/console.css", timeout=1.0):
                return True
        except urllib.error.HTTPError:
            return True
        except (OSError, ValueError):
            return False
