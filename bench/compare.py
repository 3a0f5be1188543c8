"""``make bench``: Samsa next to Tansu, measured in the same run with the shared load generator.

It runs ``../shared/bench/run-bench`` with the same workloads and options against, one after the other:
Tansu 0.6 (``../shared/bench/tansu-ref``, memory storage); a one-broker Samsa cluster (``LocalCluster``
of tools/local_cluster.py, as ``samsa up --brokers 1`` starts it, data on disk in a temporary dir); and,
with ``--cluster``, a three-broker Samsa cluster, produce only, at replication factor 3 (acks=all next to
acks=1, broker CPU summed over the three brokers). Only one of them runs at a time, each on ports found
free just before it starts.

It prints each figure with its ratio Samsa/Tansu and broker CPU-seconds per million messages, then each
goal of the performance issue as met / not met / missing, and writes ``bench/results/compare-<date>.json``
(every run-bench figure of every broker) and ``.md`` (the tables). A figure that a run could not measure
(a failed workload) is reported as missing, not as an error.

    .venv/bin/python bench/compare.py [--quick] [--reps N] [--workloads produce,consume,latency,conns]
                                      [--run-timeout S] [--cluster] [--readme]
    .venv/bin/python bench/compare.py --latest [--readme]   # the newest results again

``--readme`` also writes the tables into bench/README.md, between its ``compare:latest`` markers.
Every process it starts is stopped by PID when it ends, on an error or Ctrl-C too.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__:  # imported as bench.compare (the tests)
    from bench import consume_backoff, e2e_latency
else:  # run as bench/compare.py: the repository's packages (tools.local_cluster) from its root too
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import consume_backoff
    import e2e_latency

from tools.local_cluster import LocalCluster, LocalClusterError
from tools.local_cluster_nodes import command_line, pid_alive

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
README = ROOT / "bench" / "README.md"
SHARED = ROOT.parent / "shared" / "bench"
README_START, README_END = "<!-- compare:latest -->", "<!-- /compare:latest -->"
HOST = "127.0.0.1"
SAMSA_START_TIMEOUT = 150.0  # `samsa up` gives its cluster 90 s
TANSU, SAMSA, SAMSA_RF3 = "tansu", "samsa", "samsa-rf3"

Figures = dict[str, float | None]
PROBE_FIGURES = ("p50", "p99", "p999", "ack_p99")  # of bench/e2e_latency.py, as e2e_probe_<name>
# bench/consume_backoff.py's figures, as consume_100B_probe_<name>
BACKOFF_FIGURES = ("rate", "idle_share", "short_backoff_rate")


# -- the pure part: figures, ratios, goals, tables -----------------------------------------------------


def parse_run(doc: Mapping[str, Any] | None) -> Figures:
    """Figure name -> value of a ``run-bench --json`` document; a figure it could not measure is None."""
    figures: Figures = {}
    for figure in (doc or {}).get("figures", []):
        value = figure.get("value")
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        figures[figure["name"]] = float(value) if ok else None
    return figures


def broker_figures(entry: Mapping[str, Any] | None) -> Figures | None:
    """The figures of one broker's entry in a compare report (run-bench's plus the broker's peak RSS),
    or None if that broker was not benchmarked."""
    if entry is None:
        return None
    figures = parse_run(entry.get("run_bench"))
    figures["broker_peak_rss_MB"] = entry.get("peak_rss_mb")
    figures["rss_1000_partitions_200_conns_MB"] = entry.get("rss_1000_partitions_200_conns_mb")
    probe = entry.get("e2e_probe") or {}
    for name in PROBE_FIGURES:
        figures[f"e2e_probe_{name}"] = probe.get(name)
    backoff = entry.get("consume_backoff") or {}
    for name in BACKOFF_FIGURES:
        figures[f"consume_100B_probe_{name}"] = backoff.get(name)
    return figures


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


@dataclass(frozen=True)
class Metric:
    """A row of the tables: a run-bench figure, or broker CPU-seconds per million messages derived from
    a ``*_per_broker_core`` figure (messages per broker CPU-second)."""

    label: str
    unit: str
    name: str
    per_million: bool = False

    def value(self, figures: Figures | None) -> float | None:
        if figures is None:
            return None
        value = figures.get(self.name)
        if self.per_million:
            return 1e6 / value if value else None
        return value


def _cpu(label: str, name: str) -> Metric:
    return Metric(f"broker CPU, {label}", "cpu-s/M msgs", f"{name}_per_broker_core", per_million=True)


ONE_BROKER = [
    Metric("produce 100 B acks=1", "msg/s", "produce_100B_acks1_rate"),
    Metric("produce 100 B acks=all", "msg/s", "produce_100B_acksall_rate"),
    Metric("produce 1 KiB acks=1", "msg/s", "produce_1KB_acks1_rate"),
    Metric("produce 1 KiB acks=all", "msg/s", "produce_1KB_acksall_rate"),
    Metric("consume 100 B", "msg/s", "consume_100B_rate"),
    Metric("consume 1 KiB", "msg/s", "consume_1KB_rate"),
    Metric("consume 100 B, probe, as run-bench", "msg/s", "consume_100B_probe_rate"),
    Metric("consume 100 B, probe: share of time no data arrives", "share", "consume_100B_probe_idle_share"),
    Metric(
        f"consume 100 B, probe, fetch.queue.backoff.ms={consume_backoff.SHORT_BACKOFF_MS}",
        "msg/s",
        "consume_100B_probe_short_backoff_rate",
    ),
    _cpu("produce 100 B acks=1", "produce_100B_acks1"),
    _cpu("produce 100 B acks=all", "produce_100B_acksall"),
    _cpu("produce 1 KiB acks=1", "produce_1KB_acks1"),
    _cpu("produce 1 KiB acks=all", "produce_1KB_acksall"),
    _cpu("consume 100 B (incl. group join)", "consume_100B"),
    _cpu("consume 1 KiB (incl. group join)", "consume_1KB"),
    Metric("broker cores, produce 100 B acks=1", "cores", "produce_100B_acks1_broker_cpu"),
    Metric("broker cores, produce 1 KiB acks=1", "cores", "produce_1KB_acks1_broker_cpu"),
    Metric("e2e latency p50, 5,000 msg/s of 1 KiB", "ms", "e2e_probe_p50"),
    Metric("e2e latency p99", "ms", "e2e_probe_p99"),
    Metric("e2e latency p99.9", "ms", "e2e_probe_p999"),
    Metric("e2e latency p50, run-bench (consumer batches ≤ 200 ms)", "ms", "e2e_latency_p50"),
    Metric("e2e latency p99, run-bench", "ms", "e2e_latency_p99"),
    Metric("produce-ack latency p50", "ms", "produce_ack_latency_p50"),
    Metric("produce-ack latency p99", "ms", "produce_ack_latency_p99"),
    Metric("200 idle conns: setup", "ms", "conns_setup_time"),
    Metric("200 idle conns: produce 100 B / without", "ratio", "produce_100B_acks1_conns200_over_base"),
    Metric("200 idle conns: e2e p99 / without", "ratio", "e2e_latency_conns200_p99_over_base"),
    Metric("200 idle conns: idle ping p99 under load", "ms", "conns_idle_ping_p99"),
    Metric("200 idle conns: alive at the end", "count", "conns_alive_at_end"),
    Metric("broker peak RSS (VmHWM)", "MB", "broker_peak_rss_MB"),
]

# For the three-broker table: (size label, run-bench's size tag).
CLUSTER_SIZES = [("100 B", "100B"), ("1 KiB", "1KB")]


@dataclass(frozen=True)
class GoalSpec:
    """A goal of the performance issue. ``source`` says what is compared with ``target``: "ratio" is
    the metric's Samsa/Tansu ratio, "samsa" its value on one Samsa broker, "cluster" its value on the
    three-broker cluster."""

    text: str
    source: str
    metric: Metric
    at_most: bool
    target: float
    analysis: str | None = None  # the bench/README.md section on what bounds it, when it is not met


@dataclass(frozen=True)
class Goal:
    spec: GoalSpec
    value: float | None
    status: str  # met, not met, missing (the figure was not measured), not run (no --cluster)


def _m(name: str) -> Metric:
    return Metric(name, "", name)


GOALS = [
    GoalSpec("produce 1 KiB acks=1, Samsa/Tansu", "ratio", _m("produce_1KB_acks1_rate"), False, 1.0),
    GoalSpec("produce 100 B acks=1, Samsa/Tansu", "ratio", _m("produce_100B_acks1_rate"), False, 0.8),
    GoalSpec("consume 1 KiB, Samsa/Tansu", "ratio", _m("consume_1KB_rate"), False, 1.0),
    GoalSpec(
        "consume 100 B, Samsa/Tansu",
        "ratio",
        _m("consume_100B_rate"),
        False,
        1.0,
        "Consume 100 B: what run-bench's figure measures",
    ),
    *(
        GoalSpec(
            f"broker CPU-s per million msgs, {m.label[len('broker CPU, ') :]}, Samsa/Tansu",
            "ratio",
            m,
            True,
            2.0,
        )
        for m in ONE_BROKER
        if m.per_million and m.name.startswith("produce_")
    ),
    GoalSpec("e2e latency p50 at 5,000 msg/s of 1 KiB, ms", "samsa", _m("e2e_probe_p50"), True, 5.0),
    GoalSpec("e2e latency p99 at 5,000 msg/s of 1 KiB, ms", "samsa", _m("e2e_probe_p99"), True, 25.0),
    GoalSpec(
        "200 idle conns: produce 100 B with / without",
        "samsa",
        _m("produce_100B_acks1_conns200_over_base"),
        False,
        0.95,
        "200 idle connections: what run-bench's figure measures",
    ),
    GoalSpec(
        "broker RSS with 1,000 partitions and 200 connections, MB",
        "samsa",
        _m("rss_1000_partitions_200_conns_MB"),
        True,
        300.0,
    ),
    GoalSpec(
        "3 brokers RF=3: acks=all / acks=1, 1 KiB",
        "cluster",
        _m("produce_1KB_acksall_over_acks1"),
        False,
        0.6,
        "Three brokers, replication factor 3: acks=all next to acks=1",
    ),
    GoalSpec(
        "3 brokers RF=3: acks=all / acks=1, 100 B",
        "cluster",
        _m("produce_100B_acksall_over_acks1"),
        False,
        0.6,
    ),
]


# Said above the goals when Samsa's run measured the figure: how a goal is judged where run-bench's own
# figure would mislead.
GOAL_NOTES = [
    (
        "e2e_latency_p50",
        [
            "The e2e latency goals are judged on bench/e2e_latency.py: run-bench's method, except that its",
            "consumer takes each message when it arrives. run-bench's own consumer waits for 1,000 messages",
            "or 200 ms per `consume()` call, which alone spreads latency over 0 to 200 ms at 5,000 msg/s,",
            'whatever the broker does; its figures are in the table as "run-bench".',
        ],
    ),
    (
        "consume_100B_probe_short_backoff_rate",
        [
            "The consume 100 B goal is judged on run-bench's figure. bench/consume_backoff.py shows what",
            "bounds it: rdkafka_performance's consumer stops fetching for fetch.queue.backoff.ms (1 s)",
            "whenever its 64 MB pre-fetch queue is full, so the faster a broker fills it, the longer the",
            "consumer idles; with that backoff at 10 ms the figure is the broker's delivery rate.",
        ],
    ),
]


def evaluate_goals(tansu: Figures | None, samsa: Figures | None, cluster: Figures | None) -> list[Goal]:
    """Each goal with the measured value and its verdict. ``cluster`` is None when no three-broker run
    was asked for."""
    goals = []
    for spec in GOALS:
        if spec.source == "cluster" and cluster is None:
            goals.append(Goal(spec, None, "not run"))
            continue
        if spec.source == "ratio":
            value = ratio(spec.metric.value(samsa), spec.metric.value(tansu))
        else:
            value = spec.metric.value(cluster if spec.source == "cluster" else samsa)
        if value is None:
            status = "missing"
        else:
            met = value <= spec.target if spec.at_most else value >= spec.target
            status = "met" if met else "not met"
        goals.append(Goal(spec, value, status))
    return goals


def fmt(value: float | None, unit: str = "") -> str:
    """A figure for a table: msg/s with k and M, about three significant digits otherwise; "—" if missing."""
    if value is None:
        return "—"
    if unit == "msg/s":
        if value >= 1e6:
            return f"{value / 1e6:.2f} M"
        if value >= 1e3:
            return f"{value / 1e3:.0f} k"
    if unit == "count" or abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.1:
        return f"{value:.2f}"
    return f"{value:.2g}"


def markdown_table(header: list[str], rows: list[list[str]], right_from: int = 1) -> list[str]:
    """A markdown table padded to line up in a terminal; columns from ``right_from`` on align right."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        padded = [
            c.rjust(w) if i >= right_from else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = ["-" * (w + 1) + (":" if i >= right_from else "-") for i, w in enumerate(widths)]
    return [line(header), "|" + "|".join(rule) + "|", *(line(r) for r in rows)]


def one_broker_rows(tansu: Figures | None, samsa: Figures | None) -> list[list[str]]:
    rows = []
    for m in ONE_BROKER:
        t, s = m.value(tansu), m.value(samsa)
        rows.append([m.label, m.unit, fmt(t, m.unit), fmt(s, m.unit), fmt(ratio(s, t), "ratio")])
    return rows


def cluster_rows(cluster: Figures) -> list[list[str]]:
    rows = []
    for label, tag in CLUSTER_SIZES:
        rate = [cluster.get(f"produce_{tag}_acks{acks}_rate") for acks in ("1", "all")]
        cpu = [
            Metric("", "", f"produce_{tag}_acks{acks}_per_broker_core", True).value(cluster)
            for acks in ("1", "all")
        ]
        rows.append(
            [
                f"produce {label}",
                "msg/s",
                fmt(rate[0], "msg/s"),
                fmt(rate[1], "msg/s"),
                fmt(ratio(rate[1], rate[0]), "ratio"),
            ]
        )
        rows.append(
            [
                f"broker CPU (3 brokers), produce {label}",
                "cpu-s/M msgs",
                fmt(cpu[0]),
                fmt(cpu[1]),
                fmt(ratio(cpu[1], cpu[0]), "ratio"),
            ]
        )
    return rows


def goal_rows(goals: list[Goal]) -> list[list[str]]:
    return [
        [g.spec.text, ("≤ " if g.spec.at_most else "≥ ") + fmt(g.spec.target), fmt(g.value), g.status]
        for g in goals
    ]


def _describe(label: str, entry: Mapping[str, Any]) -> str:
    doc = entry.get("run_bench") or {}
    load = (
        f"load1 {doc['load_start']:.2f}→{doc['load_end']:.2f}"
        if "load_start" in doc
        else "no run-bench result"
    )
    error = f"; ERROR: {entry['error']}" if entry.get("error") else ""
    return f"{label} ({entry.get('bootstrap', '?')}): {load}{error}"


def render(report: Mapping[str, Any]) -> str:
    """The markdown of a compare report (the dict written to ``compare-<date>.json``)."""
    runs = report.get("runs", {})
    tansu, samsa = broker_figures(runs.get(TANSU)), broker_figures(runs.get(SAMSA))
    cluster = broker_figures(runs.get(SAMSA_RF3))
    options = report.get("options", {})
    reps = options.get("reps") or (1 if options.get("quick") else 3)
    out = [
        f"{report.get('time', '?')}, {'--quick, ' if options.get('quick') else ''}{reps} rep(s) per figure "
        f"(median), workloads {options.get('workloads')}; load generator: {report.get('client', '?')}.",
        "",
    ]
    out += [f"- {_describe(label, runs[label])}" for label in (TANSU, SAMSA, SAMSA_RF3) if label in runs]
    clients = {(runs[label].get("run_bench") or {}).get("client") for label in runs} - {None}
    if len(clients) > 1:
        out.append(f"- WARNING: the runs used different load generators ({sorted(clients)}): do not compare.")
    if reps < 3:
        out.append(
            "- Fewer than 3 reps: the verdicts below are indicative; the issue judges medians of ≥ 3 runs."
        )
    out += ["", "One broker:", ""]
    out += markdown_table(
        ["figure", "unit", "Tansu", "Samsa", "Samsa/Tansu"], one_broker_rows(tansu, samsa), 2
    )
    if cluster is not None:
        out += ["", "Three Samsa brokers, replication factor 3:", ""]
        out += markdown_table(
            ["figure", "unit", "acks=1", "acks=all", "acks=all / acks=1"], cluster_rows(cluster), 2
        )
    out += ["", "Goals of the performance issue:", ""]
    for figure, note in GOAL_NOTES:
        if (samsa or {}).get(figure) is not None:
            out += [*note, ""]
    goals = evaluate_goals(tansu, samsa, cluster)
    out += markdown_table(["goal", "target", "measured", "verdict"], goal_rows(goals))
    analysed = [g for g in goals if g.status == "not met" and g.spec.analysis]
    if analysed:
        out += ["", "Where the time goes and what was tried, for the goals not met (bench/README.md):", ""]
        out += [f'- {g.spec.text}: "{g.spec.analysis}"' for g in analysed]
    return "\n".join(out) + "\n"


def replace_readme_block(text: str, block: str) -> str:
    """``text`` with what lies between the ``compare:latest`` markers replaced by ``block``."""
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"bench/README.md has no {README_START} ... {README_END} block")
    return text[: start + len(README_START)] + "\n" + block.rstrip("\n") + "\n" + text[end:]


# -- processes -------------------------------------------------------------------------------------


class BenchError(Exception):
    """A broker that could not be started; the run goes on with the others."""


@contextlib.contextmanager
def _no_interrupt() -> Iterator[None]:
    """Stopping processes must finish even if Ctrl-C is pressed again (or SIGTERM comes) meanwhile."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the brokers' listeners do
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port_run(count: int) -> int:
    """The first of ``count`` consecutive ports that were free a moment ago, below Linux's ephemeral
    range so that no client's outgoing connection takes one meanwhile."""
    for _ in range(500):
        first = random.randrange(20000, 32000 - count)
        if all(_bindable(first + i) for i in range(count)):
            return first
    raise BenchError(f"found no {count} consecutive free ports")


def _kill_if_ours(pid: int, marker: str) -> None:
    """SIGKILL ``pid`` if it still runs and its command line names ``marker`` (our temporary dir), so
    that a PID reused by somebody else's process is left alone."""
    if pid_alive(pid) and marker in command_line(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident set (VmHWM), in MB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return int(match.group(1)) / 1024 if match else None


def rss_mb(pid: int) -> float | None:
    """The process's resident set now (VmRSS), in MB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    return int(match.group(1)) / 1024 if match else None


def memory_with_many_partitions(bootstrap: str, pid: int, partitions: int = 1000, conns: int = 200) -> float:
    """The issue's memory goal: a topic of ``partitions`` partitions and ``conns`` open connections
    (each after an ApiVersions exchange), then the broker's RSS in MB."""
    create = [
        sys.executable,
        "-m",
        "tools",
        "topics",
        "--bootstrap-server",
        bootstrap,
        "--create",
        "--topic",
        "bench-memory",
        "--partitions",
        str(partitions),
        "--replication-factor",
        "1",
    ]
    done = subprocess.run(create, cwd=ROOT, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise BenchError(f"could not create the memory topic: {done.stdout}{done.stderr}")
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    api_versions_v0 = struct.pack(">ihhih", 10, 18, 0, 1, -1)
    opened = []
    try:
        for _ in range(conns):
            sock = socket.create_connection((host, int(port)), timeout=10)
            opened.append(sock)
            sock.sendall(api_versions_v0)
            size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
            sock.recv(size, socket.MSG_WAITALL)
        time.sleep(2)  # the broker's partitions settled, every connection idle
        found = rss_mb(pid)
        if found is None:
            raise BenchError(f"broker process {pid} is gone")
        return found
    finally:
        for sock in opened:
            sock.close()


def _wait_for_port(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1):
            return True
        time.sleep(0.1)
    return False


class Tansu:
    """Tansu through ``tansu-ref``, under a KBENCH_HOME of its own so that its PID file is not shared
    with anybody else's ``tansu-ref`` (the binary is linked in from the shared cache when it is there)."""

    def __init__(self, shared: Path, workdir: Path) -> None:
        self.script = shared / "tansu-ref"
        self.home = workdir / "kbench-tansu"
        self.bootstrap = ""

    @property
    def pid(self) -> int | None:
        """From tansu-ref's PID file, which exists as soon as Tansu was started, even if ``start`` was
        interrupted before it returned."""
        try:
            return int((self.home / "tansu" / "tansu.pid").read_text())
        except (OSError, ValueError):
            return None

    @property
    def broker_pids(self) -> list[int]:
        return [self.pid] if self.pid else []

    def _env(self) -> dict[str, str]:
        return {**os.environ, "KBENCH_HOME": str(self.home)}

    def start(self) -> None:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        shared_calf = Path(os.environ.get("KBENCH_HOME") or cache / "kbench") / "tansu" / "calf"
        (self.home / "tansu").mkdir(parents=True)
        if shared_calf.is_dir():
            (self.home / "tansu" / "calf").symlink_to(shared_calf)
        port = free_port_run(1)
        self.bootstrap = f"{HOST}:{port}"
        # Its own session: Ctrl-C reaches only this script, which stops Tansu itself.
        done = subprocess.run(
            [str(self.script), "start", str(port)],
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=600,
            start_new_session=True,
            check=False,
        )
        print(f"# {done.stdout.strip()}", flush=True)
        if done.returncode != 0 or self.pid is None or not _wait_for_port(port, 20):
            raise BenchError(f"tansu-ref start failed: {done.stdout.strip()} {done.stderr.strip()}")

    def stop(self) -> None:
        pid = self.pid
        if pid is None:
            return
        with _no_interrupt():
            subprocess.run(
                [str(self.script), "stop"], env=self._env(), capture_output=True, timeout=30, check=False
            )
            deadline = time.monotonic() + 10
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            _kill_if_ours(pid, str(self.home))


class Samsa:
    """A Samsa cluster as ``samsa up`` runs it (tools/local_cluster.py's ``LocalCluster``): ZooKeeper, one
    controller and ``brokers`` brokers, the brokers and ZooKeeper on ports below the ephemeral range."""

    def __init__(self, workdir: Path, name: str, brokers: int) -> None:
        self.data_dir = workdir / name
        self.brokers = brokers
        self.cluster: LocalCluster | None = None
        self.bootstrap = ""

    @property
    def broker_pids(self) -> list[int]:
        if self.cluster is None:
            return []
        return [b.pid for b in self.cluster.brokers.values() if b.pid is not None]

    def start(self) -> None:
        base = free_port_run(self.brokers + 1)  # the brokers, then ZooKeeper
        self.cluster = LocalCluster(
            self.data_dir,
            brokers=self.brokers,
            controllers=1,
            host=HOST,
            broker_ports=range(base, base + self.brokers),
            zookeeper_port=base + self.brokers,
            startup_timeout=SAMSA_START_TIMEOUT,
            report=lambda kind, text: kind == "event" and print(f"# samsa: {text}", flush=True),
        )
        try:
            self.cluster.start()
        except LocalClusterError as e:
            raise BenchError(f"the Samsa cluster did not get ready: {e}") from None
        self.bootstrap = self.cluster.bootstrap
        pids = self.cluster.pids()
        print(f"# samsa: {self.brokers} broker(s) at {self.bootstrap}, pids {pids}", flush=True)

    def stop(self) -> None:
        if self.cluster is None:
            return
        with _no_interrupt():
            self.cluster.stop()  # by PID: the controller, then the brokers, then ZooKeeper


def _stop_group(process: subprocess.Popen[str]) -> None:
    """Stops a process started in its own session, with whatever it started (rdkafka_performance)."""
    with _no_interrupt():
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def run_bench(
    shared: Path, label: str, bootstrap: str, broker_pids: list[int], json_path: Path, options: list[str]
) -> dict[str, Any] | None:
    """Runs run-bench, its output shown prefixed with ``label``; returns its JSON document, or None if
    it wrote none."""
    command = [str(shared / "run-bench"), bootstrap, "--json", str(json_path), "--label", label]
    command += [arg for pid in broker_pids for arg in ("--broker-pid", str(pid))]
    command += options
    print(f"# {' '.join(command)}", flush=True)
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            print(f"[{label}] {line}", end="", flush=True)
        process.wait()
    finally:
        _stop_group(process)
    if process.returncode != 0:
        print(f"# run-bench against {label} exited with code {process.returncode}", flush=True)
    try:
        return json.loads(json_path.read_text())
    except (OSError, ValueError):
        return None


def bench_broker(
    broker: Tansu | Samsa,
    label: str,
    shared: Path,
    workdir: Path,
    options: list[str],
    probe_seconds: float | None = None,
    backoff_probe: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Starts ``broker``, runs run-bench against it (and, given ``probe_seconds``, the e2e latency probe
    for that long; given ``backoff_probe``, bench/consume_backoff.py with those arguments), stops it; its
    entry of the compare report."""
    entry: dict[str, Any] = {"label": label, "run_bench": None, "error": None}
    try:
        broker.start()
        pids = broker.broker_pids
        entry.update(bootstrap=broker.bootstrap, broker_pids=pids)
        entry["run_bench"] = run_bench(
            shared, label, broker.bootstrap, pids, workdir / f"{label}.json", options
        )
        if entry["run_bench"] is None:
            entry["error"] = "run-bench wrote no results"
        if probe_seconds:
            print(f"# [{label}] e2e latency probe, {probe_seconds:.0f} s (bench/e2e_latency.py)", flush=True)
            try:
                entry["e2e_probe"] = e2e_latency.measure(broker.bootstrap, seconds=probe_seconds)
                print(f"# [{label}] e2e latency probe: {json.dumps(entry['e2e_probe'])}", flush=True)
            except Exception as e:  # a failed probe is a missing figure, not a failed run
                print(f"# [{label}] e2e latency probe failed: {e!r}", flush=True)
        if backoff_probe:
            print(
                f"# [{label}] consume 100 B probe, {dict(backoff_probe)} (bench/consume_backoff.py)",
                flush=True,
            )
            try:
                entry["consume_backoff"] = consume_backoff.measure(broker.bootstrap, **backoff_probe)
                print(f"# [{label}] consume 100 B probe: {json.dumps(entry['consume_backoff'])}", flush=True)
            except Exception as e:  # a failed probe is a missing figure, not a failed run
                print(f"# [{label}] consume 100 B probe failed: {e!r}", flush=True)
        rss = [peak_rss_mb(pid) for pid in pids]
        entry["peak_rss_mb"] = max((r for r in rss if r is not None), default=None)
        if isinstance(broker, Samsa) and len(pids) == 1:
            entry["rss_1000_partitions_200_conns_mb"] = memory_with_many_partitions(broker.bootstrap, pids[0])
    except (BenchError, OSError, subprocess.SubprocessError) as e:
        entry["error"] = str(e)
        print(f"# {label}: {e}", flush=True)
    finally:
        broker.stop()
    return entry


def _result_stem(now: datetime.datetime) -> Path:
    stem = RESULTS / f"compare-{now:%Y-%m-%d-%H%M}"
    return stem if not stem.with_suffix(".json").exists() else RESULTS / f"compare-{now:%Y-%m-%d-%H%M%S}"


def latest_report() -> dict[str, Any]:
    found = sorted(RESULTS.glob("compare-*.json"))
    if not found:
        raise SystemExit("no bench/results/compare-*.json yet: run `make bench` first")
    print(f"# {found[-1].relative_to(ROOT)}")
    return json.loads(found[-1].read_text())


def write_readme(markdown: str) -> None:
    README.write_text(replace_readme_block(README.read_text(), markdown))
    print(f"# wrote the tables into {README.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="bench/compare.py")
    parser.add_argument("--quick", action="store_true", help="run-bench --quick: 1 rep of short runs")
    parser.add_argument("--reps", type=int, help="run-bench --reps (default 3, quick 1)")
    parser.add_argument("--workloads", default="produce,consume,latency,conns", help="run-bench --workloads")
    parser.add_argument(
        "--run-timeout", type=int, help="run-bench --run-timeout, seconds per load-generator run"
    )
    parser.add_argument("--cluster", action="store_true", help="also 3 Samsa brokers, RF=3, produce only")
    parser.add_argument("--latest", action="store_true", help="print the newest results again, run nothing")
    parser.add_argument("--readme", action="store_true", help="also write the tables into bench/README.md")
    parser.add_argument("--shared", type=Path, default=SHARED, help=f"run-bench's folder (default {SHARED})")
    args = parser.parse_args(argv)
    missing = [name for name in ("run-bench", "tansu-ref") if not (args.shared / name).exists()]
    if missing and not args.latest:
        print(
            f"# {' and '.join(missing)} not found in {args.shared}: pass the folder that holds them with "
            "--shared DIR (make bench SHARED=DIR)",
            file=sys.stderr,
        )
        return 2

    if args.latest:
        markdown = render(latest_report())
        print(markdown, end="")
        if args.readme:
            write_readme(markdown)
        return 0

    def on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    options = ["--workloads", args.workloads]
    options += ["--quick"] if args.quick else []
    options += ["--reps", str(args.reps)] if args.reps else []
    options += ["--run-timeout", str(args.run_timeout)] if args.run_timeout else []
    now = datetime.datetime.now()
    report: dict[str, Any] = {
        "time": f"{now:%Y-%m-%d %H:%M}",
        "options": {
            "quick": args.quick,
            "reps": args.reps,
            "workloads": args.workloads,
            "cluster": args.cluster,
        },
        "runs": {},
    }
    workdir = Path(tempfile.mkdtemp(prefix="samsa-compare-"))
    probe = (5.0 if args.quick else 15.0) if "latency" in args.workloads.split(",") else None
    backoff_probe = (
        (
            {"messages": 2_000_000, "reps": 1}
            if args.quick
            else {"messages": 5_000_000, "reps": args.reps or 3}
        )
        if "consume" in args.workloads.split(",")
        else None
    )
    interrupted = False
    try:
        report["runs"][TANSU] = bench_broker(
            Tansu(args.shared, workdir), TANSU, args.shared, workdir, options, probe, backoff_probe
        )
        report["runs"][SAMSA] = bench_broker(
            Samsa(workdir, SAMSA, 1), SAMSA, args.shared, workdir, options, probe, backoff_probe
        )
        if args.cluster:
            if "produce" in args.workloads.split(","):
                cluster_options = [*options, "--workloads", "produce", "--replication-factor", "3"]
                report["runs"][SAMSA_RF3] = bench_broker(
                    Samsa(workdir, SAMSA_RF3, 3), SAMSA_RF3, args.shared, workdir, cluster_options
                )
            else:
                print("# --cluster needs the produce workload: three-broker run skipped", flush=True)
    except KeyboardInterrupt:
        interrupted = True
        print("\n# interrupted: every process started was stopped; no results written", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if interrupted:
        return 130
    report["client"] = next(
        (r["run_bench"]["client"] for r in report["runs"].values() if r.get("run_bench")), None
    )
    if not any(r.get("run_bench") for r in report["runs"].values()):
        return 1
    markdown = render(report)
    RESULTS.mkdir(exist_ok=True)
    stem = _result_stem(now)
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    stem.with_suffix(".md").write_text(f"# Samsa / Tansu, `make bench`\n\n{markdown}")
    print("\n" + markdown, end="")
    print(f"# wrote {stem.relative_to(ROOT)}.json and .md", flush=True)
    if args.readme:
        write_readme(markdown)
    return 1 if any(r.get("error") for r in report["runs"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
