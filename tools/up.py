"""``samsa up``: a whole local cluster for development (``make run``), on ``tools.local_cluster``.

``samsa up [--brokers N] [--controllers M] [--data-dir DIR] [--override KEY=VALUE ...]`` starts ZooKeeper,
M controllers (ids 9001, ...) and N brokers (ids 1..N) as its child processes, each with a config file and
a log file of its own under the data dir (tools/local_cluster_nodes.py shows the layout). It prints
``started <role> <id> pid=<pid>`` per process, waits until a controller is active and every broker is
registered and answering, prints ``metrics <role> <id> http://HOST:PORT/metrics`` for each controller and
broker (its Prometheus endpoint, ``metrics.listener``, on a port of its own kept across its restarts),
then ``bootstrap.servers=HOST:PORT,...`` and ``console=http://HOST:PORT`` (the web console, ``samsa console``,
which it runs as one more child, on a free port or ``--console-port``; ``--no-console`` runs none) and then
supervises: a node that dies is reported as
``exited <role> <id> code=<c>``; the others keep running. SIGINT or SIGTERM stops the controllers, then
the brokers (which then skip a controlled shutdown: the whole cluster stops), then ZooKeeper, saying what
it waits for; a second signal kills whatever is left.

Broker settings: ``--config FILE`` (a base server.properties), ``--override KEY=VALUE`` (every broker, and
the controllers for the settings they share), ``--broker-override ID:KEY=VALUE`` (one broker),
``--controller-override KEY=VALUE``. They are saved in ``DIR/samsa-up.json``: a later ``samsa up`` on the
same data dir keeps them unless given new ones of the same kind (``--clear-overrides`` drops them).
Topics, the internal ones included, are replicated min(3, brokers) times unless overridden.

While it runs, other commands act on its cluster by its data dir (``DIR/cluster.json`` has the pids):

    samsa up status                          every node: pid, state, address; the active controller
    samsa up stop|kill|pause|resume ROLE ID  SIGTERM | SIGKILL | SIGSTOP | SIGCONT, by PID
    samsa up start|restart ROLE ID           asks the running samsa up to start the node, so that it
                                             supervises it (and stops it at the end) like the others

ROLE is broker, controller or zookeeper (id 1). The data is kept across runs unless ``--fresh``; a data
dir that holds the data of more brokers than ``--brokers`` is refused.

``--secure`` starts it secured (tools/local_cluster_security.py): a CA and certificates in
``DIR/security``, a ``SASL_SSL`` listener with SCRAM-SHA-512 on every node (clients, brokers and
controllers alike), the ACL authorizer on, and a super user ``admin`` whose client settings (librdkafka's
names) it writes to ``DIR/client.properties`` and prints as ``client.properties=PATH`` after the
``bootstrap.servers`` line: ``samsa topics --bootstrap-server ... --command-config PATH``, confluent-kafka
and ``kcat -F PATH`` use it. Each run says whether it is secure (the certificates and passwords are kept).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from server_common.config import ConfigError
from server_common.log import setup_logging
from tools.local_cluster import (
    NODE_KEYS,
    Interrupted,
    LocalCluster,
    LocalClusterError,
    owner_running,
    read_state,
)
from tools.local_cluster_nodes import (
    belongs_to,
    pid_alive,
    port_in_use,
    process_state,
    signal_pid,
    wait_gone,
)
from zk.server import ZooKeeperNotInstalled

SAVED_SETTINGS = "samsa-up.json"
CONTROL_DIR = "control"
NODE_COMMANDS = ("status", "stop", "kill", "start", "restart", "pause", "resume")
ROLES = ("broker", "controller", "zookeeper")
REQUEST_TIMEOUT = 180.0


class UpError(Exception):
    """A reason ``samsa up`` cannot do what it was asked; printed as ``samsa up: <message>``."""


def _out(line: str) -> None:
    print(line, flush=True)


def _err(line: str) -> None:
    print(f"samsa up: {line}", file=sys.stderr, flush=True)


def _report(kind: str, text: str) -> None:
    """LocalCluster's events (started/stopped/exited lines) on stdout, its progress on stderr."""
    if kind == "event":
        _out(text)
    else:
        _err(text)


# -- settings -----------------------------------------------------------------------------------------


def _key_value(text: str, flag: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise UpError(f"{flag} {text!r} is not of the form KEY=VALUE")
    return key.strip(), value


def parse_overrides(items: list[str], flag: str = "--override") -> dict[str, str]:
    """``KEY=VALUE`` items; the settings that samsa up gives each node itself are refused."""
    settings = dict(_key_value(item, flag) for item in items)
    own = sorted(NODE_KEYS & set(settings))
    if own:
        raise UpError(
            f"{flag} {', '.join(own)}: samsa up sets {'these' if len(own) > 1 else 'this'} for each node "
            "itself; --broker-override ID:KEY=VALUE sets one broker's"
        )
    return settings


def parse_broker_overrides(items: list[str], brokers: int) -> dict[int, dict[str, str]]:
    """``ID:KEY=VALUE`` items, as {broker id: {key: value}}."""
    settings: dict[int, dict[str, str]] = {}
    for item in items:
        broker, colon, setting = item.partition(":")
        if not colon or not broker.strip().isdigit():
            raise UpError(
                f"--broker-override {item!r} is not of the form ID:KEY=VALUE (e.g. 2:broker.rack=b)"
            )
        broker_id = int(broker)
        if not 1 <= broker_id <= brokers:
            raise UpError(f"--broker-override {item!r}: there are brokers 1..{brokers} (--brokers {brokers})")
        key, value = _key_value(setting, "--broker-override")
        settings.setdefault(broker_id, {})[key] = value
    return settings


def merge_saved(args: argparse.Namespace, saved: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """This run's settings: those given on the command line, kind by kind, else those saved by the last
    run on the data dir. Returns them and the flags kept from the last run (to say so)."""
    given = {
        "overrides": parse_overrides(args.override) if args.override else None,
        "broker_overrides": parse_broker_overrides(args.broker_override, args.brokers)
        if args.broker_override
        else None,
        "controller_overrides": parse_overrides(args.controller_override, "--controller-override")
        if args.controller_override
        else None,
        "config": str(Path(args.config).resolve()) if args.config else None,
    }
    settings: dict[str, Any] = {}
    kept: list[str] = []
    for kind, value in given.items():
        if value is not None:
            settings[kind] = value
            continue
        old = saved.get(kind)
        settings[kind] = old
        if not old:
            continue
        if kind == "config":
            kept.append(f"--config {old}")
        elif kind == "broker_overrides":
            for broker, props in sorted(old.items(), key=lambda item: int(item[0])):
                kept += [f"--broker-override {broker}:{k}={v}" for k, v in props.items()]
        else:
            flag = "--override" if kind == "overrides" else "--controller-override"
            kept += [f"{flag} {k}={v}" for k, v in old.items()]
    broker_overrides = {int(b): dict(p) for b, p in (settings["broker_overrides"] or {}).items()}
    beyond = sorted(b for b in broker_overrides if b > args.brokers)
    if beyond:
        raise UpError(
            f"the saved --broker-override settings name brokers {beyond}, beyond --brokers {args.brokers}; "
            "--clear-overrides drops them"
        )
    settings["broker_overrides"] = broker_overrides
    settings["overrides"] = settings["overrides"] or {}
    settings["controller_overrides"] = settings["controller_overrides"] or {}
    return settings, kept


def load_saved(data_dir: Path) -> dict[str, Any]:
    try:
        saved: dict[str, Any] = json.loads((data_dir / SAVED_SETTINGS).read_text())
        return saved
    except (OSError, ValueError):
        return {}


def save_settings(data_dir: Path, settings: dict[str, Any]) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    saved = {**settings, "broker_overrides": {str(b): p for b, p in settings["broker_overrides"].items()}}
    (data_dir / SAVED_SETTINGS).write_text(json.dumps(saved, indent=1, sort_keys=True) + "\n")


def metrics_lines(cluster: LocalCluster) -> list[str]:
    """``metrics <role> <id> <url>`` for each controller and broker serving its Prometheus endpoint."""
    nodes = [*cluster.controllers.values(), *cluster.brokers.values()]
    return [f"metrics {node.ROLE} {node.id} {node.metrics_url}" for node in nodes if node.metrics_url]


def validate(cluster: LocalCluster) -> None:
    """Every node's settings parse (unknown names and bad values fail here, before anything starts)."""
    from broker.config import KafkaConfig
    from controller.config import ControllerConfig

    for broker in cluster.brokers.values():
        try:
            KafkaConfig(broker.config())
        except ConfigError as e:
            raise UpError(f"broker {broker.id}'s settings: {e}") from None
    for controller in cluster.controllers.values():
        try:
            ControllerConfig(controller.config())
        except ConfigError as e:
            raise UpError(f"controller {controller.id}'s settings: {e}") from None


# -- the supervising samsa up ---------------------------------------------------------------------


class Supervisor:
    """Runs the cluster until a signal: reports deaths, carries out ``samsa up start|restart`` requests."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.stop_requested = False
        self._wake = threading.Event()

    def on_signal(self, signum: int, frame: object) -> None:
        if self.stop_requested:
            self.cluster.forced = True
            _err("killing what is left (SIGKILL)")
        else:
            self.stop_requested = True
            _err(
                "stopping the cluster: the controllers first, so that the brokers skip their controlled "
                "shutdown (the whole cluster stops: no broker could take over their partitions); "
                "Ctrl-C again kills everything at once"
            )
        self.cluster.interrupt()
        self._wake.set()

    def supervise(self) -> int:
        control = self.cluster.data_dir / CONTROL_DIR
        control.mkdir(exist_ok=True)
        for stale in control.iterdir():  # requests and answers of an earlier run
            stale.unlink(missing_ok=True)
        while not self.stop_requested:
            self.cluster.reap()
            if all(not node.alive for node in self.cluster.nodes):
                _err("every process has exited")
                return 1
            for request in sorted(control.glob("*.request")):
                self._carry_out(request)
            self._wake.wait(0.2)
        return 0

    def _carry_out(self, request: Path) -> None:
        try:
            asked = json.loads(request.read_text())
        except (OSError, ValueError):
            return
        request.unlink(missing_ok=True)
        try:
            node = self.cluster.node(asked["role"], int(asked["id"]))
            if asked["action"] == "restart":
                if node.alive:
                    node.stop()
                node.start()
            elif node.alive:
                raise LocalClusterError(f"{node.ROLE} {node.id} is already running (pid {node.pid})")
            else:
                node.start()
            answer = {
                "ok": True,
                "message": f"{node.ROLE} {node.id} serves on {node.address} (pid {node.pid})",
            }
        except Interrupted:
            answer = {"ok": False, "message": "samsa up is stopping"}
        except (LocalClusterError, KeyError, ValueError) as e:
            answer = {"ok": False, "message": str(e)}
        temporary = request.with_suffix(".tmp")
        temporary.write_text(json.dumps(answer))
        temporary.replace(request.with_suffix(".response"))


def _up_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="samsa up",
        description="Start a local cluster (ZooKeeper, controllers, brokers) until Ctrl-C or SIGTERM.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="""commands on a running cluster (found by --data-dir):
  samsa up status                          every node: pid, state, address; the active controller
  samsa up stop|kill|pause|resume ROLE ID  SIGTERM | SIGKILL | SIGSTOP | SIGCONT, by PID
  samsa up start|restart ROLE ID           the running samsa up starts the node and supervises it
ROLE is broker, controller or zookeeper (id 1).""",
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
    parser.add_argument(
        "--config", metavar="FILE", help="a base server.properties for every broker (samsa up sets "
        "broker.id, listeners, log.dirs and zookeeper.connect itself)"
    )  # fmt: skip
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE",
        help="a setting of every broker (and of the controllers, if they have it); repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--broker-override", action="append", default=[], metavar="ID:KEY=VALUE",
        help="a setting of broker ID only; repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--controller-override", action="append", default=[], metavar="KEY=VALUE",
        help="a setting of every controller; repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--clear-overrides", action="store_true", help="forget the settings saved by the last run"
    )
    parser.add_argument("--fresh", action="store_true", help="delete the data dir's data first")
    parser.add_argument(
        "--secure", action="store_true",
        help="SASL_SSL listeners (SCRAM-SHA-512, a CA of its own), the ACL authorizer, an admin super user "
        "whose settings go to DIR/client.properties",
    )  # fmt: skip
    parser.add_argument(
        "--console-port", type=int, metavar="P",
        help="the web console (samsa console) listens on P of --host (default: a free port)",
    )  # fmt: skip
    parser.add_argument("--no-console", action="store_true", help="do not run the web console")
    return parser


def up(argv: list[str]) -> int:
    args = _up_parser().parse_args(argv)
    setup_logging()
    data_dir = Path(args.data_dir).resolve()
    if args.brokers < 1 or args.controllers < 1:
        _err("--brokers and --controllers must be at least 1")
        return 1
    broker_ports = [args.base_port + i for i in range(args.brokers)]
    try:
        if broker_ports[-1] > 65535:
            raise UpError(f"broker ports {broker_ports[0]}..{broker_ports[-1]} go past 65535")
        if args.no_console and args.console_port is not None:
            raise UpError("--console-port and --no-console: choose one")
        if args.console_port is not None and not 1 <= args.console_port <= 65535:
            raise UpError(f"--console-port {args.console_port} is not a port (1..65535)")
        if args.console_port is not None and args.console_port in (*broker_ports, args.zookeeper_port):
            raise UpError(f"--console-port {args.console_port} is taken by ZooKeeper or a broker")
        if args.zookeeper_port in broker_ports:
            raise UpError(
                f"--zookeeper-port {args.zookeeper_port} is one of the broker ports "
                f"{broker_ports[0]}..{broker_ports[-1]}; change --zookeeper-port or --base-port"
            )
        if owner_running(data_dir):
            state = read_state(data_dir) or {}
            raise UpError(
                f"another samsa up is running on {data_dir} (pid {state.get('owner_pid', '?')}); "
                f"`samsa up status --data-dir {args.data_dir}` shows it"
            )
        saved = {} if args.fresh or args.clear_overrides else load_saved(data_dir)
        settings, kept = merge_saved(args, saved)
        if args.config and not Path(args.config).is_file():
            raise UpError(f"--config {args.config}: no such file")
        cluster = LocalCluster(
            data_dir,
            brokers=args.brokers,
            controllers=args.controllers,
            host=args.host,
            broker_ports=broker_ports,
            zookeeper_port=args.zookeeper_port,
            config_file=settings["config"],
            overrides=settings["overrides"],
            broker_overrides=settings["broker_overrides"],
            controller_overrides=settings["controller_overrides"],
            fresh=args.fresh,
            report=_report,
            secure=args.secure,
            console=not args.no_console,
            console_port=args.console_port,
        )
        if not args.fresh:
            extra = sorted(cluster.data_dir_brokers() - set(cluster.brokers))
            if extra:
                found = sorted(cluster.data_dir_brokers())
                raise UpError(
                    f"{data_dir} holds the data of a {len(found)}-broker cluster (brokers {found}); with "
                    f"--brokers {args.brokers} the partitions with replicas on brokers {extra} would stay "
                    f"offline or under-replicated. Run it with --brokers {max(found)}, or wipe it: "
                    "samsa up --fresh (make clean-data)"
                )
        validate(cluster)
        ignored = cluster.ignored_file_keys()
        if ignored:
            _err(f"ignoring {', '.join(ignored)} of {settings['config']}: samsa up sets them for each node")
        if kept:
            _err(
                f"keeping the settings of the last run on {data_dir}: {' '.join(kept)} "
                "(new ones of a kind replace them; --clear-overrides drops them)"
            )
    except UpError as e:
        _err(str(e))
        return 1
    except LocalClusterError as e:
        _err(str(e))
        return 1

    supervisor = Supervisor(cluster)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, supervisor.on_signal)
    try:
        cluster.claim_data_dir()  # the lock, leftovers of a killed earlier run, --fresh
        save_settings(data_dir, settings)
        busy = []
        if port_in_use(args.host, args.zookeeper_port):
            busy.append(f"port {args.zookeeper_port} on {args.host} (ZooKeeper) is in use; choose another "
                        "with --zookeeper-port")  # fmt: skip
        for broker_id, port in enumerate(broker_ports, start=1):
            if port_in_use(args.host, port):
                busy.append(
                    f"port {port} on {args.host} (broker {broker_id}) is in use; choose another first broker "
                    f"port with --base-port (brokers take {args.brokers} consecutive ports)"
                )
        if args.console_port is not None and port_in_use(args.host, args.console_port):
            busy.append(
                f"port {args.console_port} on {args.host} (the console) is in use; choose another with "
                "--console-port, or --no-console"
            )
        if busy:
            raise UpError("; ".join(busy))
        if not supervisor.stop_requested:
            cluster.start(wait=False)
            cluster.wait_ready()
        if supervisor.stop_requested:
            return 0
        cluster.disconnect()
        for line in metrics_lines(cluster):
            _out(line)
        _out(f"bootstrap.servers={cluster.bootstrap}")
        if cluster.client_properties_path is not None:
            _out(f"client.properties={cluster.client_properties_path}")
        if cluster.console_node is not None:
            _out(f"console={cluster.console_node.url}")
        _err(
            f"logs under {data_dir}; Ctrl-C stops the cluster; `samsa up status --data-dir {args.data_dir}` "
            "shows it and `samsa up stop|kill|start|restart ROLE ID` act on one node"
        )
        return supervisor.supervise()
    except Interrupted:
        return 0
    except (UpError, LocalClusterError, ZooKeeperNotInstalled) as e:
        _err(str(e))
        return 1
    finally:
        cluster.stop()
        if supervisor.stop_requested:
            _err("stopped")


# -- commands on a running cluster ----------------------------------------------------------------


def _node_parser(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"samsa up {command}")
    if command != "status":
        parser.add_argument("role", choices=ROLES)
        parser.add_argument("id", type=int, nargs="?", help="broker id, controller id (9001...), or 1")
    parser.add_argument("--data-dir", default=".run", metavar="DIR", help="the cluster's (default .run)")
    parser.add_argument(
        "--timeout", type=float, default=90.0, metavar="S", help="how long to wait (default 90 s)"
    )
    return parser


def _live_state(entry: dict[str, Any], data_dir: Path) -> str:
    pid = entry.get("pid")
    if not isinstance(pid, int) or not pid_alive(pid) or not belongs_to(pid, data_dir):
        return "not running"
    return "paused" if process_state(pid) == "T" else "running"


def _zookeeper_view(state: dict[str, Any], data_dir: Path) -> tuple[set[int], int | None] | None:
    """The registered brokers and the active controller, or None if ZooKeeper does not answer quickly."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoNodeError

    from zk import znodes

    zookeeper = next((n for n in state.get("nodes", []) if n["role"] == "zookeeper"), None)
    if zookeeper is not None and _live_state(zookeeper, data_dir) != "running":
        return None
    zk = KazooClient(state["zookeeper"], timeout=3.0)
    try:
        zk.start(timeout=3.0)
    except Exception:
        return None
    try:
        brokers = (
            {int(b) for b in zk.get_children(znodes.BROKER_IDS)} if zk.exists(znodes.BROKER_IDS) else set()
        )
        try:
            active: int | None = znodes.decode_controller(zk.get(znodes.CONTROLLER)[0])
        except NoNodeError:
            active = None
        return brokers, active
    finally:
        zk.stop()
        zk.close()


def status(data_dir: Path, state: dict[str, Any]) -> int:
    supervised = owner_running(data_dir)
    owner = state.get("owner_pid")
    _out(
        f"cluster in {data_dir}: "
        + (
            f"supervised by samsa up (pid {owner})"
            if supervised
            else f"no samsa up is running (last: pid {owner})"
        )
    )
    _out(f"zookeeper.connect={state.get('zookeeper')}")
    view = _zookeeper_view(state, data_dir)
    rows = [("ROLE", "ID", "PID", "STATE", "ADDRESS", "LOG")]
    running_brokers = []
    for entry in state.get("nodes", []):
        live = _live_state(entry, data_dir)
        if view is not None and live == "running":
            brokers, active = view
            if entry["role"] == "broker":
                live += ", registered" if entry["id"] in brokers else ", not registered"
            elif entry["role"] == "controller":
                live += ", active" if entry["id"] == active else ", standing by"
        if entry["role"] == "broker" and live.startswith("running"):
            running_brokers.append(f"{entry['host']}:{entry['port']}")
        pid = str(entry.get("pid") or "-") if not live.startswith("not") else "-"
        log = entry.get("log") or ""
        if log.startswith(os.getcwd() + os.sep):
            log = os.path.relpath(log)
        rows.append((entry["role"], str(entry["id"]), pid, live, f"{entry['host']}:{entry['port']}", log))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        _out("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    if running_brokers:
        _out(f"bootstrap.servers={','.join(running_brokers)}")
    if state.get("client_properties"):
        _out(f"client.properties={state['client_properties']}")
    if view is None:
        _out("(ZooKeeper does not answer: registrations and the active controller unknown)")
    return 0


def _signal_node(
    command: str, entry: dict[str, Any], state: dict[str, Any], data_dir: Path, timeout: float
) -> int:
    name = f"{entry['role']} {entry['id']}"
    pid = entry.get("pid")
    if _live_state(entry, data_dir) == "not running" or not isinstance(pid, int):
        _err(f"{name} is not running")
        return 1
    if command == "pause":
        signal_pid(pid, signal.SIGSTOP)
        _out(f"paused {name} (pid {pid}); `samsa up resume {entry['role']} {entry['id']}` resumes it")
        if entry["role"] != "zookeeper":
            _err("its ZooKeeper session expires after zookeeper.session.timeout.ms: it is then deregistered")
        return 0
    if command == "resume":
        signal_pid(pid, signal.SIGCONT)
        _out(f"resumed {name} (pid {pid})")
        return 0
    if command == "kill":
        signal_pid(pid, signal.SIGKILL)
        if wait_gone([pid], 10.0):
            _err(f"{name} (pid {pid}) is still there after SIGKILL")
            return 1
        _out(f"killed {name} (pid {pid})")
        if entry["role"] == "broker":
            _err(
                "its leaderships move once its ZooKeeper session expires (zookeeper.session.timeout.ms, "
                f"6 s by default); `samsa up start broker {entry['id']}` brings it back"
            )
        return 0
    if entry["role"] == "broker":
        others = [
            n
            for n in state.get("nodes", [])
            if n["role"] == "broker" and n["id"] != entry["id"] and _live_state(n, data_dir) == "running"
        ]
        controllers = [
            n
            for n in state.get("nodes", [])
            if n["role"] == "controller" and _live_state(n, data_dir) == "running"
        ]
        if not controllers:
            _err(f"no controller is running: {name} shuts down without a controlled shutdown")
        elif not others:
            _err(
                f"{name} is the last broker running: its controlled shutdown cannot hand its partitions' "
                "leadership to anyone and retries (controlled.shutdown.max.retries x "
                "controlled.shutdown.retry.backoff.ms) before it gives up; "
                f"`samsa up kill broker {entry['id']}` does not wait"
            )
        else:
            _err(f"waiting for {name} to move its leaderships (controlled shutdown) and exit")
    signal_pid(pid, signal.SIGCONT)
    signal_pid(pid, signal.SIGTERM)
    if wait_gone([pid], timeout):
        _err(
            f"{name} (pid {pid}) is still running after {timeout:g} s; "
            f"`samsa up kill {entry['role']} {entry['id']}`"
        )
        return 1
    _out(f"stopped {name} (pid {pid})")
    return 0


def _ask_supervisor(command: str, role: str, node_id: int, data_dir: Path, timeout: float) -> int:
    if not owner_running(data_dir):
        _err(
            f"no samsa up is running on {data_dir}, so nothing would supervise a {role} started now; "
            f"`samsa up --data-dir {data_dir}` starts the cluster again"
        )
        return 1
    control = data_dir / CONTROL_DIR
    control.mkdir(exist_ok=True)
    name = uuid.uuid4().hex
    temporary = control / f"{name}.tmp"
    temporary.write_text(json.dumps({"action": command, "role": role, "id": node_id}))
    temporary.replace(control / f"{name}.request")
    response = control / f"{name}.response"
    deadline = time.monotonic() + max(timeout, REQUEST_TIMEOUT)
    while not response.exists():
        if time.monotonic() > deadline or not owner_running(data_dir):
            (control / f"{name}.request").unlink(missing_ok=True)
            _err(f"samsa up on {data_dir} did not answer (it may be stopping)")
            return 1
        time.sleep(0.1)
    answer = json.loads(response.read_text())
    response.unlink(missing_ok=True)
    if not answer["ok"]:
        _err(answer["message"])
        return 1
    _out(f"{'restarted' if command == 'restart' else 'started'} {answer['message']}")
    return 0


def node_command(argv: list[str]) -> int:
    command = argv[0]
    args = _node_parser(command).parse_args(argv[1:])
    data_dir = Path(args.data_dir).resolve()
    state = read_state(data_dir)
    if state is None:
        _err(f"no cluster has run in {data_dir} (there is no {data_dir / 'cluster.json'})")
        return 1
    if command == "status":
        return status(data_dir, state)
    node_id = args.id if args.id is not None else (1 if args.role == "zookeeper" else None)
    if node_id is None:
        _err(f"samsa up {command} {args.role} needs an id")
        return 2
    nodes = state.get("nodes", [])
    entry = next((n for n in nodes if n["role"] == args.role and n["id"] == node_id), None)
    if entry is None:
        known = sorted(n["id"] for n in nodes if n["role"] == args.role)
        _err(f"the cluster in {data_dir} has no {args.role} {node_id} ({args.role} ids: {known})")
        return 1
    if command in ("start", "restart"):
        return _ask_supervisor(command, args.role, node_id, data_dir, args.timeout)
    return _signal_node(command, entry, state, data_dir, args.timeout)


def main(argv: list[str]) -> int:
    if argv and argv[0] in NODE_COMMANDS:
        return node_command(argv)
    return up(argv)
