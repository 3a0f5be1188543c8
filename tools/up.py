"""``samsa up``: a whole local cluster as child processes of one command, for development and ``make run``.

It starts ZooKeeper (Debian's package, through ``zk.server``), M controllers (ids 9001, 9002, ...)
and N brokers (ids 1..N), each with a config file and a log file of its own under the data dir:

    DIR/zookeeper/            zoo.cfg, data/, zookeeper.log, zookeeper.pid
    DIR/controller-9001/      controller.properties, controller.log, controller.pid
    DIR/broker-1/             server.properties, broker.log, broker.pid, data/ (log.dirs)

It prints ``started <role> <id> pid=<pid>`` per process, waits until ZooKeeper shows an active
controller and every broker registered (and each broker's listener answers), then prints
``bootstrap.servers=HOST:PORT,...``. A child that dies afterwards is reported as
``exited <role> <id> code=<c>`` and the others keep running. SIGINT or SIGTERM stops the brokers first
(their controlled shutdown needs a controller), then the controllers, then ZooKeeper; a second signal
kills whatever is left. Config files are rewritten from the flags at every start; the data (ZooKeeper's
and the brokers' logs) is kept, so running again on the same data dir keeps topics and messages.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from server_common.log import setup_logging
from tools.probe import answers_api_versions
from zk import znodes
from zk.server import ZooKeeperNotInstalled, ZooKeeperServer

FIRST_CONTROLLER_ID = 9001
STARTUP_TIMEOUT = 90.0  # a broker may wait for its previous session's registration to expire
BROKER_STOP_TIMEOUT = 60.0  # controlled shutdown retries with backoff before the broker gives up
CONTROLLER_STOP_TIMEOUT = 20.0
_PR_SET_PDEATHSIG = 1


class UpError(Exception):
    """A reason ``samsa up`` cannot start; printed as ``samsa up: <message>``."""


@dataclass
class Child:
    """A process ``samsa up`` started and watches."""

    role: str  # zookeeper, controller or broker
    id: int
    process: subprocess.Popen
    log_path: Path
    reported: bool = False  # its exit has been printed


def _die_with_parent(parent_pid: int) -> None:
    """Runs in the child between fork and exec: the kernel sends it SIGTERM when ``samsa up`` dies, even
    by SIGKILL, so that no broker outlives the command that owns it."""
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def _port_in_use(host: str, port: int) -> bool:
    """True if a listener could not bind ``host:port`` (servers set SO_REUSEADDR, and so does this)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError:
            return True
    return False


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


class Cluster:
    def __init__(self, args: argparse.Namespace) -> None:
        self.brokers_wanted: int = args.brokers
        self.controllers_wanted: int = args.controllers
        self.data_dir = Path(args.data_dir).resolve()
        self.host: str = args.host
        self.zookeeper_port: int = args.zookeeper_port
        self.broker_ports = [args.base_port + i for i in range(args.brokers)]
        self.zookeeper: ZooKeeperServer | None = None
        self.children: list[Child] = []
        self.children_started_ms = 0
        self.stop_requested = False
        self.force = False
        self._wake = threading.Event()
        self._lock_file: IO[str] | None = None

    # -- checks before anything starts -----------------------------------------------------------

    def check(self) -> None:
        if self.brokers_wanted < 1 or self.controllers_wanted < 1:
            raise UpError("--brokers and --controllers must be at least 1")
        if self.host in ("0.0.0.0", "::", ""):
            raise UpError("--host is advertised to clients, so it must be an address they can connect to")
        if self.broker_ports[-1] > 65535:
            raise UpError(f"broker ports {self.broker_ports[0]}..{self.broker_ports[-1]} go past 65535")
        if self.zookeeper_port in self.broker_ports:
            raise UpError(
                f"--zookeeper-port {self.zookeeper_port} is one of the broker ports "
                f"{self.broker_ports[0]}..{self.broker_ports[-1]}; change --zookeeper-port or --base-port"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(self.data_dir / ".samsa-up.lock", "w")  # held until this process exits
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UpError(f"another samsa up is running on {self.data_dir}") from None
        if _port_in_use(self.host, self.zookeeper_port):
            raise UpError(
                f"port {self.zookeeper_port} on {self.host} (ZooKeeper) is in use{self._leftover_hint()}; "
                "choose another with --zookeeper-port"
            )
        for broker_id, port in enumerate(self.broker_ports, start=1):
            if _port_in_use(self.host, port):
                raise UpError(
                    f"port {port} on {self.host} (broker {broker_id}) is in use; choose another first "
                    f"broker port with --base-port (brokers take {self.brokers_wanted} consecutive ports)"
                )

    def _leftover_hint(self) -> str:
        """Names a ZooKeeper left running by an earlier ``samsa up`` on this data dir that was killed
        (ZooKeeper runs in its own session, so it does not die with its parent)."""
        try:
            pid = int((self.data_dir / "zookeeper" / "zookeeper.pid").read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return ""
        if str(self.data_dir / "zookeeper").encode() not in cmdline:
            return ""
        return f" by the ZooKeeper of an earlier samsa up on this data dir (pid {pid}: kill {pid} stops it)"

    # -- starting --------------------------------------------------------------------------------

    def _announce(self, child: Child) -> None:
        self.children.append(child)
        print(f"started {child.role} {child.id} pid={child.process.pid}", flush=True)

    def start_zookeeper(self) -> None:
        zk_dir = self.data_dir / "zookeeper"
        self.zookeeper = ZooKeeperServer(zk_dir, self.zookeeper_port, self.host)
        try:
            self.zookeeper.start()
        except ZooKeeperNotInstalled as e:
            raise UpError(str(e)) from None
        except (RuntimeError, TimeoutError) as e:
            raise UpError(f"{e}\n{_tail(zk_dir / 'zookeeper.log')}") from None
        assert self.zookeeper.process is not None
        self._announce(Child("zookeeper", 1, self.zookeeper.process, zk_dir / "zookeeper.log"))

    def _spawn(self, role: str, child_id: int, command: str, config: Path, log_path: Path) -> None:
        args = [sys.executable, "-m", "tools", command, "--config", str(config)]
        log = open(log_path, "ab")  # handed to the child
        try:
            process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Its own session: Ctrl-C reaches only `samsa up`, which stops the children in order.
                start_new_session=True,
                preexec_fn=partial(_die_with_parent, os.getpid()) if sys.platform == "linux" else None,
            )
        finally:
            log.close()
        (log_path.parent / f"{role}.pid").write_text(f"{process.pid}\n")
        self._announce(Child(role, child_id, process, log_path))

    @property
    def zookeeper_connect(self) -> str:
        return f"{self.host}:{self.zookeeper_port}"

    def start_controllers(self) -> None:
        self.children_started_ms = int(time.time() * 1000)
        for i in range(self.controllers_wanted):
            controller_id = FIRST_CONTROLLER_ID + i
            directory = self.data_dir / f"controller-{controller_id}"
            directory.mkdir(exist_ok=True)
            config = directory / "controller.properties"
            # Port 0: brokers find the active controller's listener in /controller; clients never use it.
            _write_properties(
                config,
                {
                    "controller.id": controller_id,
                    "listeners": f"PLAINTEXT://{self.host}:0",
                    "zookeeper.connect": self.zookeeper_connect,
                },
            )
            self._spawn("controller", controller_id, "controller", config, directory / "controller.log")

    def start_brokers(self) -> None:
        replication = min(3, self.brokers_wanted)
        for broker_id, port in enumerate(self.broker_ports, start=1):
            directory = self.data_dir / f"broker-{broker_id}"
            (directory / "data").mkdir(parents=True, exist_ok=True)
            config = directory / "server.properties"
            _write_properties(
                config,
                {
                    "broker.id": broker_id,
                    "listeners": f"PLAINTEXT://{self.host}:{port}",
                    "log.dirs": directory / "data",
                    "zookeeper.connect": self.zookeeper_connect,
                    # Kafka's defaults for the internal topics need 3 brokers; a smaller cluster gets less.
                    "offsets.topic.replication.factor": replication,
                    "transaction.state.log.replication.factor": replication,
                    "transaction.state.log.min.isr": min(2, replication),
                    "group.initial.rebalance.delay.ms": 0,
                },
            )
            self._spawn("broker", broker_id, "broker", config, directory / "broker.log")

    # -- waiting and watching --------------------------------------------------------------------

    def reap(self) -> list[Child]:
        """Prints ``exited`` for each child that has died since the last call; returns them."""
        died = []
        for child in self.children:
            if not child.reported and child.process.poll() is not None:
                child.reported = True
                print(f"exited {child.role} {child.id} code={child.process.returncode}", flush=True)
                died.append(child)
        return died

    def wait_until_ready(self) -> bool:
        """True once a controller is active, every broker is registered and answering; False (with the
        reason printed) if a child dies, the deadline passes or a stop is requested."""
        deadline = time.monotonic() + STARTUP_TIMEOUT
        announce_at, announced = time.monotonic() + 5.0, False
        zk = KazooClient(hosts=self.zookeeper_connect, timeout=10.0)
        try:
            zk.start(timeout=10.0)
        except KazooTimeoutError:
            print(f"samsa up: cannot connect to ZooKeeper at {self.zookeeper_connect}", file=sys.stderr)
            return False
        controller_ids = {FIRST_CONTROLLER_ID + i for i in range(self.controllers_wanted)}
        broker_ids = set(range(1, self.brokers_wanted + 1))
        try:
            while not self.stop_requested:
                for child in self.reap():
                    print(
                        f"samsa up: {child.role} {child.id} exited during startup; the end of "
                        f"{child.log_path}:\n{_tail(child.log_path)}",
                        file=sys.stderr,
                    )
                    return False
                # Nodes older than this run's children are leftovers of a killed earlier run, which
                # ZooKeeper keeps until their sessions expire.
                controller = _node_since(zk, znodes.CONTROLLER, self.children_started_ms)
                active = znodes.decode_controller(controller) if controller is not None else None
                waiting_for = [
                    b
                    for b in sorted(broker_ids)
                    if _node_since(zk, znodes.broker_path(b), self.children_started_ms) is None
                ]
                if active in controller_ids and not waiting_for:
                    # A broker opens its listener just after registering.
                    waiting_for = [
                        b
                        for b, port in enumerate(self.broker_ports, start=1)
                        if not answers_api_versions(self.host, port)
                    ]
                    if not waiting_for:
                        return True
                missing = ["no active controller"] if active not in controller_ids else []
                if waiting_for:
                    missing.append(f"brokers {waiting_for} not registered or answering")
                reason = "; ".join(missing)
                if time.monotonic() > deadline:
                    print(
                        f"samsa up: the cluster was not ready after {STARTUP_TIMEOUT:.0f} s ({reason}); "
                        f"see the logs under {self.data_dir}",
                        file=sys.stderr,
                    )
                    return False
                if not announced and time.monotonic() > announce_at:
                    announced = True
                    print(
                        f"samsa up: waiting ({reason}); after an unclean stop, the previous run's "
                        "registrations last until their ZooKeeper sessions expire",
                        file=sys.stderr,
                    )
                self._wake.wait(0.1)
            return False
        finally:
            zk.stop()
            zk.close()

    def supervise(self) -> int:
        """Runs until a signal; reports children that die. Returns the exit code."""
        while not self.stop_requested:
            self.reap()
            if all(child.reported for child in self.children):
                print("samsa up: every process has exited", file=sys.stderr)
                return 1
            self._wake.wait(0.5)
        return 0

    def on_signal(self, signum: int, frame: object) -> None:
        if self.stop_requested:
            self.force = True  # a second Ctrl-C: stop waiting for clean shutdowns
        self.stop_requested = True
        self._wake.set()

    # -- stopping --------------------------------------------------------------------------------

    def _terminate(self, role: str, timeout: float) -> None:
        group = [c for c in self.children if c.role == role and c.process.poll() is None]
        for child in group:
            child.process.send_signal(signal.SIGCONT)  # in case someone paused it
            child.process.send_signal(signal.SIGKILL if self.force else signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while any(c.process.poll() is None for c in group):
            if self.force or time.monotonic() > deadline:
                for child in group:
                    if child.process.poll() is None:
                        child.process.kill()
                for child in group:
                    child.process.wait()
                break
            time.sleep(0.05)
        for child in group:
            child.reported = True
            print(f"stopped {role} {child.id} code={child.process.returncode}", flush=True)

    def stop(self) -> None:
        self._terminate("broker", BROKER_STOP_TIMEOUT)
        self._terminate("controller", CONTROLLER_STOP_TIMEOUT)
        zk = self.zookeeper
        if zk is not None and zk.process is not None and zk.process.poll() is None:
            zk.stop()
            print(f"stopped zookeeper 1 code={zk.process.returncode}", flush=True)
        for child in self.children:
            child.reported = True


def _node_since(zk: KazooClient, path: str, since_ms: int) -> bytes | None:
    """The data of ``path`` if it exists and was created at or after ``since_ms`` (ZooKeeper runs on this
    machine, so its clock is ours)."""
    try:
        data, stat = zk.get(path)
    except NoNodeError:
        return None
    return data if stat.ctime >= since_ms else None


def _write_properties(path: Path, props: dict[str, object]) -> None:
    lines = ["# Written by `samsa up` at every start, from its flags: edits here are overwritten."]
    lines += [f"{key}={value}" for key, value in props.items()]
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="samsa up",
        description="Start a local cluster (ZooKeeper, controllers, brokers) until Ctrl-C or SIGTERM.",
    )
    parser.add_argument("--brokers", type=int, default=3, metavar="N", help="brokers, ids 1..N (default 3)")
    parser.add_argument(
        "--controllers", type=int, default=2, metavar="M", help="controllers, ids 9001.. (default 2)"
    )
    parser.add_argument(
        "--data-dir", default=".run", metavar="DIR", help="configs, logs, data (default .run)"
    )
    parser.add_argument("--zookeeper-port", type=int, default=2181, metavar="P", help="default 2181")
    parser.add_argument(
        "--base-port", type=int, default=9092, metavar="P", help="broker i listens on P+i-1 (default 9092)"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", metavar="H", help="listen on and advertise H (default 127.0.0.1)"
    )
    args = parser.parse_args(argv)
    setup_logging()
    cluster = Cluster(args)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, cluster.on_signal)
    try:
        cluster.check()
        cluster.start_zookeeper()
        if not cluster.stop_requested:
            cluster.start_controllers()
        if not cluster.stop_requested:
            cluster.start_brokers()
        if not cluster.stop_requested and not cluster.wait_until_ready():
            return 0 if cluster.stop_requested else 1
        if cluster.stop_requested:
            return 0
        servers = ",".join(f"{cluster.host}:{port}" for port in cluster.broker_ports)
        print(f"bootstrap.servers={servers}", flush=True)
        print(f"samsa up: logs under {cluster.data_dir}; Ctrl-C stops the cluster", file=sys.stderr)
        return cluster.supervise()
    except UpError as e:
        print(f"samsa up: {e}", file=sys.stderr)
        return 1
    finally:
        cluster.stop()
