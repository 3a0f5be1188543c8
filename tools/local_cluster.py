"""``LocalCluster``: a whole Samsa cluster (ZooKeeper, controllers, brokers) as child processes of the
calling Python process, in a data dir of its own. ``samsa up`` is a command line on it; the tests and the
benchmarks start their clusters with it.

    from tools.local_cluster import LocalCluster

    with LocalCluster(tmp_path / "cluster", brokers=3, overrides={"num.partitions": 2}) as cluster:
        produce_to(cluster.bootstrap)
        cluster.broker(2).kill()                 # SIGKILL; stop() is SIGTERM (a controlled shutdown)
        cluster.wait(lambda: cluster.leader("t", 0) not in (-1, 2), "a new leader", 30)
        cluster.broker(2).start()                # same port, same data

What it starts (``start()``), each on a free port unless told otherwise:

- ZooKeeper, Debian's package or ``ZOOKEEPER_HOME`` (zk.server), unless ``zookeeper=`` names one to use
  (``host:port[/chroot]``; give each cluster a chroot of its own);
- ``controllers`` controllers, ids 9001, 9002, ...: one is active, the others stand by;
- ``brokers`` brokers, ids 1..N, each with its ``log.dirs`` under ``DIR/broker-<id>/data``.

A broker's settings, weakest first: the cluster's defaults (``default_broker_config``: replication factors
min(3, brokers), a ``session_timeout_ms`` ZooKeeper session), the ``config_file`` (a base
server.properties, without the settings that are each node's own: ``NODE_KEYS``), the node's own
(``broker.id``, ``listeners``, ``log.dirs``, ``zookeeper.connect``), ``overrides`` (every broker), then
``broker_overrides[id]``. A controller gets the settings of the file and of ``overrides`` that a controller
knows too (``unclean.leader.election.enable``, ``zookeeper.session.timeout.ms``, ...: Kafka's controller
read the broker's file), then its own, then ``controller_overrides``. Each node's effective settings are
written to its config file at every start.

``secure=True`` secures it (tools/local_cluster_security.py): a CA and the nodes' certificates in
``DIR/security``, one ``SASL_SSL`` listener per node with SCRAM-SHA-512 for clients and between servers,
the ACL authorizer on, users ``admin`` and ``broker`` (super users) whose SCRAM credentials are written to
ZooKeeper before the controllers and brokers start, and the admin's client settings in
``DIR/client.properties`` (librdkafka's names; ``client_properties_path``) and
``DIR/client-java.properties``. The cluster's own requests (``create_topic``, ...) go as the admin.

Nodes (``broker(id)``, ``controller(id)``, ``zookeeper_node``, ``node(name)``) are controlled by PID:
``stop()`` (SIGTERM), ``kill()`` (SIGKILL), ``pause()``/``resume()`` (SIGSTOP/SIGCONT), ``start()``,
``restart()``; ``add_broker()`` grows the cluster. With a ``NetworkSandbox`` (``sandbox=True`` or one of
your own), every node has an address of its own in a private network namespace and ``partition()``,
``isolate()`` and ``heal()`` cut and restore the network between them (root only; otherwise
``partition_unavailable`` says why).

Nothing outlives it: ``stop()`` (or leaving the ``with`` block) stops every node by PID (controllers
first, so that the brokers skip a controlled shutdown nobody could take over, then the brokers, then
ZooKeeper); children started from the main thread get SIGTERM from the kernel if this process dies
(``PR_SET_PDEATHSIG``); an exit handler kills what is left at interpreter exit; and ``start()`` first kills
the leftovers of an earlier owner of the data dir that was itself killed (their pids are in
``DIR/cluster.json`` and the nodes' pid files). One ``LocalCluster`` at a time owns a data dir (a lock).

The API is synchronous and not thread-safe: drive a cluster from one thread (async tests: call it through
``asyncio.to_thread``, from one thread at a time).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Self

from tools.local_cluster_net import NetworkSandbox
from tools.local_cluster_nodes import (
    FIRST_CONTROLLER_ID,
    BrokerNode,
    ConsoleNode,
    ControllerNode,
    Interrupted,
    LocalClusterError,
    Node,
    NodeNotReady,
    ZooKeeperNode,
    belongs_to,
    free_port,
    pid_alive,
    signal_pid,
    wait_gone,
)
from tools.local_cluster_security import CLIENT_PROPERTIES, SECURITY_DIR, SecureSetup
from zk import znodes
from zk.server import ZooKeeperNotInstalled

if TYPE_CHECKING:
    from network.client_security import ClientSecurity

__all__ = [
    "NODE_KEYS",
    "BrokerNode",
    "ConsoleNode",
    "ControllerNode",
    "Interrupted",
    "LocalCluster",
    "LocalClusterError",
    "NetworkSandbox",
    "Node",
    "NodeNotReady",
    "ZooKeeperNode",
    "ZooKeeperNotInstalled",
    "default_broker_config",
    "free_port",
    "wipe_data_dir",
]

STATE_FILE = "cluster.json"
LOCK_FILE = "cluster.lock"
# Settings that are each node's own: taken from neither the base config file nor, for controllers, the
# brokers' overrides.
NODE_KEYS = frozenset(
    {
        "broker.id",
        "controller.id",
        "listeners",
        "advertised.listeners",
        "log.dir",
        "log.dirs",
        "zookeeper.connect",
        "metrics.listener",
    }
)
DEFAULT_SESSION_TIMEOUT_MS = 6000

Report = Callable[[str, str], None]  # (kind, text): kind "event" (started/stopped/...) or "progress"


def default_broker_config(
    brokers: int, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
) -> dict[str, str]:
    """What a ``LocalCluster`` of ``brokers`` brokers sets unless told otherwise: topics (the internal
    ones too) replicated min(3, brokers) times, so that losing a broker of three loses no partition; no
    wait for more members before a group's first rebalance; a short ZooKeeper session, so that a killed
    broker's leaderships move within ``session_timeout_ms``."""
    replication = min(3, max(1, brokers))
    return {
        "default.replication.factor": str(replication),
        "offsets.topic.replication.factor": str(replication),
        "transaction.state.log.replication.factor": str(replication),
        "transaction.state.log.min.isr": str(min(2, replication)),
        "group.initial.rebalance.delay.ms": "0",
        "zookeeper.session.timeout.ms": str(session_timeout_ms),
    }


def _strings(settings: Mapping[str, object] | None) -> dict[str, str]:
    out = {}
    for key, value in (settings or {}).items():
        out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def read_properties_file(path: str | Path) -> dict[str, str]:
    from server_common.config import read_properties

    return read_properties(Path(path).read_text(encoding="utf-8"))


def looks_like_a_cluster_dir(path: Path) -> bool:
    """Empty, or a cluster's data dir (it has a state file, ``samsa up``'s saved settings, or a ZooKeeper
    or broker directory): what ``fresh`` may wipe, with whatever else was put in it (``samsa pipeline``'s
    checkpoints under ``.run/``, say)."""
    entries = {entry.name for entry in path.iterdir()} - {LOCK_FILE}
    markers = {STATE_FILE, "samsa-up.json", "zookeeper"}
    return not entries or bool(markers & entries) or any(e.startswith("broker-") for e in entries)


def wipe_data_dir(path: str | Path) -> None:
    """Deletes a cluster's data dir (``samsa up --fresh``, ``LocalCluster(fresh=True)``); refuses one that
    holds anything a cluster does not write, and one a running cluster owns."""
    path = Path(path).resolve()
    if not path.exists():
        return
    if not looks_like_a_cluster_dir(path):
        raise LocalClusterError(f"{path} holds files a cluster did not write; not deleting it")
    with _owner_lock(path) as owner:
        if owner is None:
            raise LocalClusterError(f"a cluster is running on {path} ({_owner_text(path)}): stop it first")
        shutil.rmtree(path)


@contextlib.contextmanager
def _owner_lock(data_dir: Path) -> Any:
    """Yields the lock file (held) if no cluster owns ``data_dir``, else None."""
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = open(data_dir / LOCK_FILE, "a+")
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        yield lock
    finally:
        lock.close()


def read_state(data_dir: str | Path) -> dict[str, Any] | None:
    """``DIR/cluster.json``: the owner's pid, ZooKeeper, bootstrap servers and each node's pid, address,
    state and log, as the owner last wrote it (``samsa up status`` reads it)."""
    try:
        state: dict[str, Any] = json.loads((Path(data_dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return state


def owner_running(data_dir: str | Path) -> bool:
    """A LocalCluster (``samsa up``) holds the data dir's lock."""
    path = Path(data_dir)
    if not (path / LOCK_FILE).exists():
        return False
    with _owner_lock(path) as lock:
        return lock is None


def _owner_text(data_dir: Path) -> str:
    state = read_state(data_dir) or {}
    return f"pid {state.get('owner_pid', '?')}"


def _child_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """The nodes' environment: ``env`` (default: this process's), with this source tree on PYTHONPATH
    when Samsa runs from a checkout rather than an installed package, so ``python -m tools`` finds it."""
    child = dict(os.environ if env is None else env)
    root = Path(__file__).resolve().parent.parent
    paths = [p for p in child.get("PYTHONPATH", "").split(os.pathsep) if p]
    if not {"site-packages", "dist-packages"} & set(root.parts) and str(root) not in paths:
        child["PYTHONPATH"] = os.pathsep.join([str(root), *paths])
    return child


def _kill_children(children: list[subprocess.Popen]) -> None:
    """The exit handler: whatever is still running is killed by PID (SIGCONT first: a paused process
    would not see SIGTERM)."""
    running = [p for p in children if p.poll() is None]
    for process in running:
        signal_pid(process.pid, signal.SIGCONT)
        signal_pid(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    for process in running:
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class _RetriedZk:
    """A kazoo client whose reads and writes go through its command retry. A plain kazoo call fails with
    ConnectionLoss or SessionExpiredError while the client reconnects after a ZooKeeper restart (when the
    restart outlasted the session, kazoo opens a new one by itself); a test looking at the cluster then
    must see the state, not the reconnection."""

    _RETRIED = frozenset({"get", "exists", "get_children", "create", "set", "delete", "ensure_path"})

    def __init__(self, client: Any) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if name in self._RETRIED:
            return functools.partial(self.client.retry, attr)
        return attr


class LocalCluster:
    """ZooKeeper (or a given one), ``controllers`` controllers and ``brokers`` brokers under ``data_dir``.

    ``report(kind, text)`` hears about it: kind "event" for ``started broker 1 pid=123``, ``stopped ...``,
    ``killed ...``, ``exited ...`` (``reap``), kind "progress" for what a wait is waiting for."""

    def __init__(
        self,
        data_dir: str | Path,
        *,
        brokers: int = 1,
        controllers: int = 1,
        zookeeper: str | None = None,
        host: str = "127.0.0.1",
        broker_ports: Iterable[int] | None = None,
        zookeeper_port: int | None = None,
        config_file: str | Path | None = None,
        overrides: Mapping[str, object] | None = None,
        broker_overrides: Mapping[int, Mapping[str, object]] | None = None,
        controller_overrides: Mapping[str, object] | None = None,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        sandbox: NetworkSandbox | bool | None = None,
        fresh: bool = False,
        startup_timeout: float = 90.0,
        node_timeout: float = 60.0,
        report: Report | None = None,
        env: Mapping[str, str] | None = None,
        secure: bool = False,
        metrics: bool = True,
        console: bool = False,
        console_port: int | None = None,
    ) -> None:
        """``metrics``: every broker and controller serves its Prometheus endpoint (``metrics.listener``)
        on a free port of its host, at its node's ``metrics_url``. ``console``: ``samsa console`` runs too,
        started once the brokers serve, on ``console_port`` (default: a free port), at
        ``console_node.url``; its ``overrides`` are extra ``--flag=value`` arguments."""
        if brokers < 1 or controllers < 1:
            raise LocalClusterError("a cluster needs at least one broker and one controller")
        if host in ("0.0.0.0", "::", ""):
            raise LocalClusterError("host is advertised to clients, so it must be an address they can reach")
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.session_timeout_ms = session_timeout_ms
        self.config_file = Path(config_file).resolve() if config_file is not None else None
        self.overrides = _strings(overrides)
        self.controller_overrides = _strings(controller_overrides)
        self.fresh = fresh
        self.startup_timeout = startup_timeout
        self.node_timeout = node_timeout
        self.report: Report = report or (lambda kind, text: None)
        self.env = _child_env(env)
        self.security: SecureSetup | None = SecureSetup(self.data_dir / SECURITY_DIR) if secure else None
        self._own_sandbox = sandbox is True
        self.sandbox: NetworkSandbox | None = (
            NetworkSandbox("samsa-lc") if sandbox is True else (sandbox or None)
        )
        self.metrics = metrics
        self.forced = False  # stop waits SIGKILL at once (samsa up's second Ctrl-C)
        self._interrupt = threading.Event()
        self._initial_brokers = brokers
        self._external_zookeeper = zookeeper
        self._lock: IO[str] | None = None
        self._zk: Any = None
        self._children: list[subprocess.Popen] = []
        self._finalizer = weakref.finalize(self, _kill_children, self._children)

        self.zookeeper_node: ZooKeeperNode | None = None
        if zookeeper is None:
            port = zookeeper_port if zookeeper_port is not None else free_port()
            self.zookeeper_node = ZooKeeperNode(self, self._host_of("zookeeper"), port)
        self.controllers: dict[int, ControllerNode] = {}
        for i in range(controllers):
            controller_id = FIRST_CONTROLLER_ID + i
            self.controllers[controller_id] = ControllerNode(
                self, controller_id, self._host_of(f"controller-{controller_id}"), free_port()
            )
        ports = list(broker_ports) if broker_ports is not None else [free_port() for _ in range(brokers)]
        if len(ports) != brokers:
            raise LocalClusterError(f"{len(ports)} broker ports given for {brokers} brokers")
        self.brokers: dict[int, BrokerNode] = {}
        for broker_id, port in enumerate(ports, start=1):
            self.brokers[broker_id] = BrokerNode(self, broker_id, self._host_of(f"broker-{broker_id}"), port)
        self.console_node: ConsoleNode | None = None
        if console:
            host = self._host_of("console-1")
            self.console_node = ConsoleNode(self, 1, host, console_port or free_port(host))
        for broker_id, settings in (broker_overrides or {}).items():
            if broker_id not in self.brokers:
                raise LocalClusterError(f"broker_overrides names broker {broker_id}, not one of 1..{brokers}")
            self.brokers[broker_id].overrides.update(_strings(settings))

    def _host_of(self, node: str) -> str:
        return self.sandbox.address(node) if self.sandbox is not None else self.host

    # -- views -----------------------------------------------------------------------------------

    @property
    def zookeeper_connect(self) -> str:
        """``host:port[/chroot]`` of the ZooKeeper the cluster uses."""
        if self.zookeeper_node is not None:
            return self.zookeeper_node.connect_string
        assert self._external_zookeeper is not None
        return self._external_zookeeper

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of the running brokers (of every broker when none runs)."""
        running = [b for b in self.brokers.values() if b.alive]
        return ",".join(b.bootstrap for b in (running or list(self.brokers.values())))

    @property
    def secure(self) -> bool:
        return self.security is not None

    @property
    def client_properties_path(self) -> Path | None:
        """``DIR/client.properties``: the admin's client settings of a secure cluster (None otherwise)."""
        return self.data_dir / CLIENT_PROPERTIES if self.security is not None else None

    def client_properties(self) -> dict[str, str]:
        """What a confluent-kafka client needs to reach the cluster as its admin: bootstrap.servers and,
        when secure, the settings of ``client.properties``."""
        settings = self.security.client_properties() if self.security is not None else {}
        return {"bootstrap.servers": self.bootstrap, **settings}

    def client_security(self) -> ClientSecurity | None:
        """The admin's ``ClientSecurity`` for Samsa's own clients (None when not secure)."""
        return self.security.client_security() if self.security is not None else None

    @property
    def nodes(self) -> list[Node]:
        """Every node, in start order: ZooKeeper, the controllers, the brokers, the console."""
        zk: list[Node] = [self.zookeeper_node] if self.zookeeper_node is not None else []
        console: list[Node] = [self.console_node] if self.console_node is not None else []
        return [*zk, *self.controllers.values(), *self.brokers.values(), *console]

    def broker(self, broker_id: int) -> BrokerNode:
        try:
            return self.brokers[broker_id]
        except KeyError:
            raise LocalClusterError(f"no broker {broker_id} (brokers: {sorted(self.brokers)})") from None

    def controller(self, controller_id: int) -> ControllerNode:
        try:
            return self.controllers[controller_id]
        except KeyError:
            raise LocalClusterError(
                f"no controller {controller_id} (controllers: {sorted(self.controllers)})"
            ) from None

    def node(self, role: str, node_id: int | None = None) -> Node:
        """A node by role and id (``node("broker", 2)``) or by name (``node("broker-2")``,
        ``node("zookeeper")``)."""
        if node_id is None and "-" in role:
            role, _, number = role.partition("-")
            node_id = int(number)
        if role == "broker" and node_id is not None:
            return self.broker(node_id)
        if role == "controller" and node_id is not None:
            return self.controller(node_id)
        if role == "zookeeper" and node_id in (None, 1):
            if self.zookeeper_node is None:
                raise LocalClusterError(f"this cluster uses the ZooKeeper at {self.zookeeper_connect}")
            return self.zookeeper_node
        raise LocalClusterError(f"no node {role} {node_id if node_id is not None else ''}".rstrip())

    def pids(self) -> dict[str, int]:
        """``{"broker-1": pid, ...}`` of the running nodes."""
        return {n.name: n.pid for n in self.nodes if n.alive and n.pid is not None}

    def describe(self) -> str:
        """One line per node, for failure messages."""
        return "\n".join(f"  {n.name:<16} {n.address:<22} pid={n.pid} {n.state}" for n in self.nodes)

    # -- settings --------------------------------------------------------------------------------

    def _base_file(self) -> dict[str, str]:
        return read_properties_file(self.config_file) if self.config_file is not None else {}

    def ignored_file_keys(self) -> list[str]:
        """The settings of ``config_file`` that the cluster sets per node instead."""
        return sorted(NODE_KEYS & set(self._base_file()))

    def broker_config(self, broker: BrokerNode) -> dict[str, str]:
        """The settings ``broker``'s next start writes to its config file."""
        base = {k: v for k, v in self._base_file().items() if k not in NODE_KEYS}
        own = {
            "broker.id": str(broker.id),
            "listeners": self._listener(broker),
            "log.dirs": str(broker.log_dir),
            "zookeeper.connect": self.zookeeper_connect,
        }
        defaults = default_broker_config(self._initial_brokers, self.session_timeout_ms)
        secure = self.security.server_settings(broker.name) if self.security is not None else {}
        metrics = self._metrics_setting(broker)
        return {**defaults, **base, **secure, **own, **metrics, **self.overrides, **broker.overrides}

    def _metrics_setting(self, node: Node) -> dict[str, str]:
        """``metrics.listener`` on a port of the node's own, the same at every start of the node."""
        if not self.metrics:
            return {}
        if node.metrics_port is None:
            node.metrics_port = free_port()
        return {"metrics.listener": f"http://{node.host}:{node.metrics_port}"}

    def _listener(self, node: Node) -> str:
        if self.security is not None:
            return self.security.listener(node.host, node.port)
        return f"PLAINTEXT://{node.host}:{node.port}"

    def controller_config(self, controller: ControllerNode) -> dict[str, str]:
        """The settings ``controller``'s next start writes to its config file."""
        from controller.config import CONTROLLER_CONFIG
        from server_common.config import listener_setting_name

        def known(settings: Mapping[str, str]) -> dict[str, str]:
            # Kafka's listener.name.<l>.<setting> too (the secure mode's JAAS configuration is one).
            return {
                k: v
                for k, v in settings.items()
                if k not in NODE_KEYS
                and (k in CONTROLLER_CONFIG.keys or listener_setting_name(k) in CONTROLLER_CONFIG.keys)
            }

        own = {
            "controller.id": str(controller.id),
            "listeners": self._listener(controller),
            "zookeeper.connect": self.zookeeper_connect,
        }
        session = {"zookeeper.session.timeout.ms": str(self.session_timeout_ms)}
        secure = self.security.server_settings(controller.name) if self.security is not None else {}
        return {
            **session,
            **known(self._base_file()),
            **secure,
            **known(self.overrides),
            **own,
            **self._metrics_setting(controller),
            **self.controller_overrides,
            **controller.overrides,
        }

    # -- starting --------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self, wait: bool = True, timeout: float | None = None) -> Self:
        """Takes the data dir (killing an earlier owner's leftovers), starts every node and, with
        ``wait``, returns once the cluster is ready (``wait_ready``). On failure everything started is
        stopped again."""
        self.claim_data_dir()
        try:
            if self._own_sandbox and self.sandbox is not None:
                self.sandbox.__enter__()
            if self.zookeeper_node is not None:
                self.zookeeper_node.start()
            self.prepare_security()
            for controller in self.controllers.values():
                controller.start(wait=False)
            for broker in self.brokers.values():
                broker.start(wait=False)
            if wait:
                self.wait_ready(timeout)
            if self.console_node is not None:
                self.console_node.start(wait=wait)
        except BaseException as e:
            self.stop(graceful=isinstance(e, Interrupted))  # a failed start leaves nothing to be careful of
            raise
        return self

    def prepare_security(self) -> None:
        """Secure mode, before the controllers and brokers start: the CA and every node's certificate
        (made once, kept in ``DIR/security``), the users' SCRAM credentials in ZooKeeper, and the admin's
        ``client.properties``. Nothing without ``secure``."""
        if self.security is None:
            return
        nodes = [*self.controllers.values(), *self.brokers.values()]
        self.security.prepare({node.name: [node.host] for node in nodes})
        written = self.security.write_credentials(self.zookeeper_connect, self.node_timeout)
        if written:
            self.report("progress", f"SCRAM-SHA-512 credentials of {', '.join(written)} written to ZooKeeper")
        self.security.write_client_files(self.data_dir, self.bootstrap)

    def claim_data_dir(self) -> None:
        """The first step of ``start`` (idempotent): takes the data dir's lock (LocalClusterError if another
        cluster holds it), kills an earlier owner's leftovers (``sweep_leftovers``), wipes the data with
        ``fresh``, and refuses a data dir that holds brokers this cluster does not have."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._lock is not None:
            return
        lock = open(self.data_dir / LOCK_FILE, "a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise LocalClusterError(
                f"another cluster is running on {self.data_dir} ({_owner_text(self.data_dir)})"
            ) from None
        self._lock = lock
        try:
            self.sweep_leftovers()
            if self.fresh:
                self._wipe_contents()
            self._check_brokers_of_data_dir()
        except BaseException:
            self._release_data_dir()
            raise

    def sweep_leftovers(self) -> list[int]:
        """Kills (by PID) the processes an earlier owner of this data dir left running: those recorded in
        its state file and pid files whose command line still names this data dir. Returns their pids."""
        recorded: dict[int, str] = {}
        state = read_state(self.data_dir) or {}
        for node in state.get("nodes", []):
            if isinstance(node.get("pid"), int):
                recorded[node["pid"]] = node.get("name", "node")
        for pid_file in self.data_dir.glob("*/*.pid"):
            with contextlib.suppress(OSError, ValueError):
                recorded.setdefault(int(pid_file.read_text().split()[0]), pid_file.parent.name)
        leftovers = {
            pid: name for pid, name in recorded.items() if pid_alive(pid) and belongs_to(pid, self.data_dir)
        }
        for pid, name in leftovers.items():
            self.report(
                "progress",
                f"killing {name} (pid {pid}), left running by an earlier cluster on {self.data_dir}",
            )
            signal_pid(pid, signal.SIGCONT)
            signal_pid(pid, signal.SIGKILL)
        still = wait_gone(list(leftovers), 10.0)
        if still:
            raise LocalClusterError(f"processes {still} of an earlier cluster on {self.data_dir} do not die")
        return list(leftovers)

    def _wipe_contents(self) -> None:
        if not looks_like_a_cluster_dir(self.data_dir):
            raise LocalClusterError(f"{self.data_dir} holds files a cluster did not write; not wiping it")
        for entry in self.data_dir.iterdir():
            if entry.name == LOCK_FILE:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        self.report("progress", f"wiped {self.data_dir}")

    def data_dir_brokers(self) -> set[int]:
        """The broker ids whose data is in the data dir (their ``meta.properties``)."""
        found = set()
        for meta in self.data_dir.glob("broker-*/data/meta.properties"):
            with contextlib.suppress(ValueError):
                found.add(int(meta.parent.parent.name.removeprefix("broker-")))
        return found

    def _check_brokers_of_data_dir(self) -> None:
        extra = sorted(self.data_dir_brokers() - set(self.brokers))
        if extra:
            raise LocalClusterError(
                f"{self.data_dir} holds the data of brokers {sorted(self.data_dir_brokers())}, but this "
                f"cluster has brokers {sorted(self.brokers)}: partitions with replicas on brokers {extra} "
                "would stay offline or under-replicated. Start as many brokers, or wipe the data dir first"
            )

    def _release_data_dir(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _started(self, node: Node) -> None:
        assert node.process is not None
        self._children.append(node.process)
        self._children[:] = [p for p in self._children if p.poll() is None]
        self.report("event", f"started {node.ROLE} {node.id} pid={node.process.pid}")
        self._save_state()

    def _stopped(self, node: Node, how: str) -> None:
        node.exit_reported = True
        self.report("event", f"{how} {node.ROLE} {node.id} code={node.returncode}")
        self._save_state()

    def _save_state(self) -> None:
        if self._lock is None:
            return
        state = {
            "owner_pid": os.getpid(),
            "data_dir": str(self.data_dir),
            "zookeeper": self.zookeeper_connect,
            "bootstrap": self.bootstrap,
            "client_properties": str(self.client_properties_path) if self.security is not None else None,
            "nodes": [n.describe() for n in self.nodes],
        }
        temporary = self.data_dir / f".{STATE_FILE}.tmp"
        temporary.write_text(json.dumps(state, indent=1) + "\n")
        temporary.replace(self.data_dir / STATE_FILE)

    def add_broker(
        self,
        broker_id: int | None = None,
        overrides: Mapping[str, object] | None = None,
        port: int | None = None,
        start: bool = True,
        wait: bool = True,
    ) -> BrokerNode:
        """A new broker (id: the next free one), started unless ``start`` is false. It gets the cluster's
        settings (replication defaults of the cluster's initial size) and ``overrides``."""
        broker_id = broker_id if broker_id is not None else max(self.brokers) + 1
        if broker_id in self.brokers:
            raise LocalClusterError(f"broker {broker_id} exists")
        broker = BrokerNode(
            self, broker_id, self._host_of(f"broker-{broker_id}"), port if port is not None else free_port()
        )
        broker.overrides.update(_strings(overrides))
        self.brokers[broker_id] = broker
        if start:
            broker.start(wait=False)
            if wait:
                broker.wait_ready()
                self.wait(lambda: broker_id in self.registered_brokers(), f"broker {broker_id} registered")
        return broker

    # -- waiting ---------------------------------------------------------------------------------

    def interrupt(self) -> None:
        """Makes the waits in progress (and later ones) raise ``Interrupted``; for a signal handler."""
        self._interrupt.set()

    def _sleep(self, seconds: float) -> None:
        if self._interrupt.wait(seconds):
            raise Interrupted("interrupted")

    def wait(self, condition: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
        """Polls ``condition()`` until it returns something truthy, and returns that; NodeNotReady naming
        ``what`` and the nodes' states after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            found = condition()
            if found:
                return found
            if time.monotonic() > deadline:
                raise NodeNotReady(f"waited {timeout:g} s for {what}\n{self.describe()}")
            self._sleep(0.05)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Waits until every started node serves, a controller of this cluster is active, and every
        started broker is registered in ZooKeeper (since its start) and answers ApiVersions. A node that
        exits meanwhile fails the wait with the end of its log."""
        timeout = self.startup_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        announce_at = time.monotonic() + 5.0
        while True:
            for node in self.nodes:
                if node.process is not None and not node.expected_exit and not node.alive:
                    raise LocalClusterError(
                        f"{node.name} exited ({node.state}) during startup; the end of "
                        f"{node.log_path}:\n{node.log_tail()}"
                    )
            missing = self._not_ready()
            if not missing:
                self.report("progress", f"ready: bootstrap.servers={self.bootstrap}")
                return
            if time.monotonic() > deadline:
                raise NodeNotReady(
                    f"the cluster was not ready after {timeout:g} s ({missing}); the logs are under "
                    f"{self.data_dir}\n{self.describe()}"
                )
            if announce_at and time.monotonic() > announce_at:
                announce_at = 0.0
                self.report(
                    "progress",
                    f"waiting for {missing} (after an unclean stop, the previous run's registrations last "
                    "until their ZooKeeper sessions expire)",
                )
            self._sleep(0.1)

    def _not_ready(self) -> str:
        """What is missing before the cluster is ready, or "" when it is."""
        running = [n for n in self.nodes if n.alive]
        if self.zookeeper_node is not None and self.zookeeper_node.alive and not self.zookeeper_node.ready():
            return "ZooKeeper"
        try:
            zk = self.zk()
            holder = self._node_since(
                zk, znodes.CONTROLLER, min(c.started_ms for c in self.controllers.values())
            )
            active = znodes.decode_controller(holder) if holder is not None else None
            unregistered = [
                b.id
                for b in self.brokers.values()
                if b.alive and self._node_since(zk, znodes.broker_path(b.id), b.started_ms) is None
            ]
        except Exception as e:  # ZooKeeper not reachable yet
            return f"ZooKeeper at {self.zookeeper_connect} ({type(e).__name__})"
        missing = []
        if active not in self.controllers:
            missing.append("an active controller")
        if unregistered:
            missing.append(f"brokers {unregistered} to register")
        not_serving = [n.name for n in running if n.ROLE != "zookeeper" and not n.ready()]
        if not_serving:
            missing.append(f"{', '.join(not_serving)} to answer")
        return "; ".join(missing)

    @staticmethod
    def _node_since(zk: Any, path: str, since_ms: int) -> bytes | None:
        """The data of ``path`` if it exists and was created at or after ``since_ms`` (an older node is an
        earlier run's, which ZooKeeper keeps until its session expires)."""
        from kazoo.exceptions import NoNodeError

        try:
            data, stat = zk.get(path)
        except NoNodeError:
            return None
        return data if stat.ctime >= since_ms else None

    # -- ZooKeeper views -------------------------------------------------------------------------

    def zk(self) -> Any:
        """A kazoo client of the cluster's ZooKeeper (its chroot), kept until ``stop``; it reconnects by
        itself after a ZooKeeper restart, and its reads and writes are retried meanwhile (``_RetriedZk``)."""
        if self._zk is None:
            from kazoo.client import KazooClient
            from kazoo.retry import KazooRetry

            retry = {"max_tries": -1, "delay": 0.1, "backoff": 1.5, "max_delay": 1}
            client = KazooClient(
                self.zookeeper_connect,
                timeout=10,
                connection_retry=KazooRetry(**retry),
                command_retry=KazooRetry(**{**retry, "max_tries": 20}),
            )
            client.start(timeout=10)
            self._zk = _RetriedZk(client)
        return self._zk

    def disconnect(self) -> None:
        """Closes the kazoo client of ``zk()`` (the next ZooKeeper view opens another); ``samsa up`` does
        so once the cluster is ready, so that a stopped ZooKeeper does not make it log reconnects."""
        self._close_zk()

    def _close_zk(self) -> None:
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()
            self._zk = None

    def registered_brokers(self) -> set[int]:
        zk = self.zk()
        return {int(b) for b in zk.get_children(znodes.BROKER_IDS)} if zk.exists(znodes.BROKER_IDS) else set()

    def active_controller_id(self) -> int | None:
        from kazoo.exceptions import NoNodeError

        try:
            return znodes.decode_controller(self.zk().get(znodes.CONTROLLER)[0])
        except NoNodeError:
            return None

    def active_controller(self, timeout: float = 30.0) -> ControllerNode:
        """The active controller, waiting up to ``timeout`` s for one of this cluster's to be elected."""
        found = self.wait(
            lambda: self.active_controller_id() in self.controllers, "an active controller", timeout
        )
        assert found
        controller_id = self.active_controller_id()
        assert controller_id is not None
        return self.controllers[controller_id]

    def partition_state(self, topic: str, partition: int) -> znodes.PartitionState | None:
        """Leader, leader epoch and ISR as ZooKeeper has them (None before the controller wrote them)."""
        path = znodes.partition_state_path(topic, partition)
        found = self.zk().exists(path) and self.zk().get(path)
        return znodes.PartitionState.decode(found[0], found[1].version) if found else None

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader, -1 when it has none (or no state yet)."""
        state = self.partition_state(topic, partition)
        return znodes.LEADER_NONE if state is None else state.leader

    # -- topics ----------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int | None = None,
        configs: Mapping[str, object] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Creates a topic (replication factor: the cluster's default) through CreateTopics and waits
        until every running broker's metadata shows a leader for each partition."""
        from protocol.api import ApiKey
        from protocol.errors import ErrorCode
        from protocol.messages import CreateTopicsRequest

        topic = CreateTopicsRequest.CreatableTopic(
            name=name,
            num_partitions=partitions,
            replication_factor=-1 if replication_factor is None else replication_factor,
            assignments=[],
            configs=[
                CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                for k, v in _strings(configs).items()
            ],
        )
        request = CreateTopicsRequest(topics=[topic], timeout_ms=int(timeout * 1000), validate_only=False)

        (result,) = self._ask_controller(
            ApiKey.CREATE_TOPICS, request, lambda r: [t.error_code for t in r.topics], timeout
        ).topics
        if result.error_code != ErrorCode.NONE:
            raise LocalClusterError(
                f"creating {name}: {ErrorCode(result.error_code).name} {result.error_message or ''}".rstrip()
            )
        self.wait_for_leaders(name, partitions, timeout)

    def delete_topic(self, name: str, timeout: float = 30.0) -> None:
        """Deletes a topic through DeleteTopics (its data goes once the controller has deleted it)."""
        import uuid

        from protocol.api import ApiKey
        from protocol.errors import ErrorCode
        from protocol.messages import DeleteTopicsRequest

        request = DeleteTopicsRequest(
            topics=[DeleteTopicsRequest.DeleteTopicState(name=name, topic_id=uuid.UUID(int=0))],
            timeout_ms=int(timeout * 1000),
        )

        (result,) = self._ask_controller(
            ApiKey.DELETE_TOPICS, request, lambda r: [t.error_code for t in r.responses], timeout
        ).responses
        if result.error_code != ErrorCode.NONE:
            raise LocalClusterError(f"deleting {name}: {ErrorCode(result.error_code).name}")

    def _ask_controller(
        self, api_key: Any, request: Any, error_codes: Callable[[Any], list[int]], timeout: float
    ) -> Any:
        """The response of the broker that forwards ``request`` to the controller (AdminClient's
        send_to_controller: retried on NOT_CONTROLLER), over a client of its own for this one call."""

        async def ask() -> Any:
            async with self._admin_client(self.bootstrap, timeout) as admin:
                return await admin.send_to_controller(api_key, request, error_codes)

        return asyncio.run(ask())

    def _admin_client(self, bootstrap: str, timeout: float) -> Any:
        """Samsa's AdminClient for one call, as the admin user in a secure cluster."""
        from tools.admin_client import AdminClient

        if self.security is None:
            return AdminClient(bootstrap, "local-cluster", timeout)
        return AdminClient(bootstrap, "local-cluster", timeout, security=self.client_security())

    def topic_partitions(self, topic: str, broker_id: int | None = None) -> dict[int, int]:
        """``{partition: leader}`` in a running broker's metadata ({} when it does not know the topic)."""
        broker = (
            self.broker(broker_id)
            if broker_id is not None
            else next((b for b in self.brokers.values() if b.alive), None)
        )
        if broker is None:
            raise LocalClusterError("no broker is running")

        async def metadata() -> Any:
            async with self._admin_client(broker.bootstrap, 10.0) as admin:
                return await admin.metadata([topic])

        (found,) = asyncio.run(metadata()).topics
        if found.error_code:
            return {}
        return {p.partition_index: p.leader_id for p in found.partitions}

    def wait_for_leaders(self, topic: str, partitions: int | None = None, timeout: float = 30.0) -> None:
        """Waits until every running broker's metadata shows ``topic`` (with ``partitions`` partitions,
        when given), each partition with a leader."""

        def everywhere() -> bool:
            for broker in self.brokers.values():
                if not broker.alive or broker.paused:
                    continue
                found = self.topic_partitions(topic, broker.id)
                if not found or (partitions is not None and len(found) != partitions):
                    return False
                if any(leader < 0 for leader in found.values()):
                    return False
            return True

        self.wait(everywhere, f"leaders for every partition of {topic} on every broker", timeout)

    # -- network faults --------------------------------------------------------------------------

    @property
    def partition_unavailable(self) -> str | None:
        """Why ``partition``/``isolate`` cannot work here, or None when they can."""
        if self.sandbox is None:
            return "the cluster runs without a network sandbox (LocalCluster(sandbox=True))"
        return self.sandbox.partition_unavailable

    def _names(self, nodes: Iterable[Node | str]) -> list[str]:
        return [n.name if isinstance(n, Node) else n for n in nodes]

    def partition(self, side: Iterable[Node | str], other_side: Iterable[Node | str]) -> list[str]:
        """Drops every packet between a node of ``side`` and one of ``other_side`` (nodes or names such as
        ``"broker-1"``, or names given to clients with ``sandbox.as_node``), both ways, on connections
        old and new; returns the rules added. LocalClusterError when partitions are unavailable."""
        reason = self.partition_unavailable
        if reason is not None:
            raise LocalClusterError(f"network partitions are unavailable: {reason}")
        assert self.sandbox is not None
        return self.sandbox.partition(self._names(side), self._names(other_side))

    def isolate(self, node: Node | str) -> list[str]:
        """Cuts ``node`` off from every other node (and client) of the sandbox."""
        name = self._names([node])[0]
        others = [n for n in (self.sandbox.nodes if self.sandbox is not None else []) if n != name]
        return self.partition([name], others)

    def heal(self) -> None:
        """Removes every partition."""
        if self.sandbox is not None:
            self.sandbox.heal()

    # -- supervising -----------------------------------------------------------------------------

    def reap(self) -> list[Node]:
        """The nodes that exited on their own (or by a signal from elsewhere) since the last call, each
        reported once as ``exited <role> <id> code=<c>``."""
        died = []
        for node in self.nodes:
            if node.process is not None and not node.exit_reported and node.process.poll() is not None:
                node.exit_reported = True
                node.paused = False
                self.report("event", f"exited {node.ROLE} {node.id} code={node.returncode}")
                died.append(node)
        if died:
            self._save_state()
        return died

    # -- stopping --------------------------------------------------------------------------------

    def stop(self, graceful: bool = True) -> None:
        """Stops every node by PID and releases the data dir. Gracefully: the controllers first (the
        brokers then find no controller and skip their controlled shutdown, which nothing could take
        over from as the whole cluster stops), then the brokers (each flushes its logs and closes its
        ZooKeeper session), then ZooKeeper; ``graceful=False`` SIGKILLs them all. Idempotent."""
        try:
            if graceful:
                if self.console_node is not None:
                    self._stop_group([self.console_node], "to exit")
                self._stop_group(list(self.controllers.values()), "to resign and exit")
                brokers_what = "to flush {} logs and close {} ZooKeeper session{}"
                self._stop_group(list(self.brokers.values()), brokers_what)
                self._close_zk()
                if self.zookeeper_node is not None:
                    self._stop_group([self.zookeeper_node], "to exit")
            else:
                for node in reversed(self.nodes):
                    node.kill()
        finally:
            self._close_zk()
            _kill_children(self._children)
            self._save_state()
            if self._own_sandbox and self.sandbox is not None:
                self.sandbox.__exit__(None, None, None)
            self._release_data_dir()

    def _stop_group(self, nodes: list[Node], what: str) -> None:
        running = [n for n in nodes if n.alive]
        if not running:
            return
        timeout = max(n.STOP_TIMEOUT for n in running)
        names = ", ".join(str(n.id) for n in running)
        plural = len(running) > 1
        role = running[0].ROLE + ("s" if plural else "")
        what = what.format(*(("their", "their", "s") if plural else ("its", "its", "")))
        self.report(
            "progress",
            f"waiting for {role} {names} {what} (up to {timeout:g} s, then SIGKILL)"
            if running[0].ROLE != "zookeeper"
            else f"waiting for ZooKeeper {what}",
        )
        for node in running:
            node.terminate()
        deadline = time.monotonic() + timeout
        for node in running:
            node.wait_exit(max(0.0, deadline - time.monotonic()))
            self._stopped(node, "stopped")

    def kill_all(self) -> None:
        """SIGKILLs every node (the data dir stays taken until ``stop``)."""
        for node in reversed(self.nodes):
            node.kill()
