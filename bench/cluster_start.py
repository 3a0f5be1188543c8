"""How fast a whole local cluster starts, and how much memory it holds: the figures a test suite pays for
``samsa_cluster`` (samsa.testing) or a ``LocalCluster``, next to a Kafka container's.

For 1 and 3 brokers (one controller, the cluster's own ZooKeeper, everything in a fresh temporary data
dir), each of ``--reps`` runs times:

- ZooKeeper serving: from ``LocalCluster.start()`` until ZooKeeper answers ``srvr`` (the JVM's share);
- ready: from ``LocalCluster.start()`` until it returns (a controller active, every broker registered
  in ZooKeeper and answering ApiVersions): the figure of the goal, under 3 s for 1 broker;
- first topic: then ``create_topic`` of a 1-partition topic, until every broker knows its leader (what
  ``samsa_topic`` adds to a test);
- stop: ``LocalCluster.stop()`` (controllers, brokers, ZooKeeper, by PID);

and, once the topic is there, the memory of every process of the cluster summed: RSS (``VmRSS``, which
counts pages shared between processes once per process) and PSS (``/proc/PID/smaps_rollup``, shared
pages divided among their sharers: the fair sum), per role. Medians are printed with min and max.

    .venv/bin/python bench/cluster_start.py [--reps 5] [--brokers 1,3] [--quick]

Writes ``bench/results/cluster-start-<date>-<HHMM>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.local_cluster import LocalCluster

RESULTS = Path(__file__).resolve().parent / "results"
KIB = 1024


def memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of a process in KiB; (0, 0) if it is gone."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def one_run(brokers: int, controllers: int) -> dict[str, Any]:
    directory = Path(tempfile.mkdtemp(prefix="samsa-cluster-start-"))
    marks: dict[str, float] = {}
    start = 0.0

    def report(kind: str, text: str) -> None:
        if kind == "event" and text.startswith("started zookeeper"):
            marks["zookeeper"] = time.perf_counter() - start

    cluster = LocalCluster(directory, brokers=brokers, controllers=controllers, report=report)
    try:
        start = time.perf_counter()
        cluster.start()
        ready = time.perf_counter() - start
        topic_start = time.perf_counter()
        cluster.create_topic("first", 1)
        first_topic = time.perf_counter() - topic_start
        memory: dict[str, dict[str, int]] = {}
        for name, pid in cluster.pids().items():
            role = name.split("-")[0]
            rss, pss = memory_kib(pid)
            totals = memory.setdefault(role, {"rss_kib": 0, "pss_kib": 0, "processes": 0})
            totals["rss_kib"] += rss
            totals["pss_kib"] += pss
            totals["processes"] += 1
    finally:
        stop_start = time.perf_counter()
        cluster.stop()
        stopped = time.perf_counter() - stop_start
        shutil.rmtree(directory, ignore_errors=True)
    return {
        "zookeeper_s": marks.get("zookeeper"),
        "ready_s": ready,
        "first_topic_s": first_topic,
        "stop_s": stopped,
        "memory": memory,
        "rss_kib": sum(m["rss_kib"] for m in memory.values()),
        "pss_kib": sum(m["pss_kib"] for m in memory.values()),
    }


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="runs per cluster size (default 5)")
    parser.add_argument("--brokers", default="1,3", help="cluster sizes, comma-separated (default 1,3)")
    parser.add_argument("--controllers", type=int, default=1, help="controllers (default 1)")
    parser.add_argument("--quick", action="store_true", help="one run per size, no result files")
    args = parser.parse_args(argv)
    reps = 1 if args.quick else args.reps
    sizes = [int(s) for s in args.brokers.split(",")]
    load_before = os.getloadavg()
    results: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "reps": reps,
        "controllers": args.controllers,
        "sizes": {},
    }
    for brokers in sizes:
        runs = []
        for rep in range(reps):
            run = one_run(brokers, args.controllers)
            runs.append(run)
            print(
                f"{brokers} broker(s) run {rep + 1}/{reps}: ZooKeeper {run['zookeeper_s']:.2f} s, "
                f"ready {run['ready_s']:.2f} s, first topic +{run['first_topic_s']:.2f} s, "
                f"stop {run['stop_s']:.2f} s, RSS {run['rss_kib'] / KIB:.0f} MiB, "
                f"PSS {run['pss_kib'] / KIB:.0f} MiB",
                flush=True,
            )
        roles = sorted({role for run in runs for role in run["memory"]})
        results["sizes"][str(brokers)] = {
            "runs": runs,
            **{key: spread([r[key] for r in runs]) for key in ("zookeeper_s", "ready_s", "first_topic_s")},
            "stop_s": spread([r["stop_s"] for r in runs]),
            "rss_mib": spread([r["rss_kib"] / KIB for r in runs]),
            "pss_mib": spread([r["pss_kib"] / KIB for r in runs]),
            "pss_mib_by_role": {
                role: statistics.median(r["memory"].get(role, {}).get("pss_kib", 0) / KIB for r in runs)
                for role in roles
            },
        }
    results["load_after"] = os.getloadavg()

    lines = [
        f"# Cluster start, {results['date']}",
        "",
        f"`bench/cluster_start.py`, Python {results['python']}, {results['cpus']} CPUs, load average "
        f"{load_before[0]:.2f} before and {results['load_after'][0]:.2f} after; {args.controllers} "
        f"controller(s), the cluster's own ZooKeeper; medians of {reps} runs (min-max).",
        "",
        "| brokers | ZooKeeper serving | ready | + first topic | stop | RSS, all processes | PSS, all |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def cell(figure: dict[str, float], unit: str, digits: int) -> str:
        return f"{figure['median']:.{digits}f} {unit} ({figure['min']:.{digits}f}-{figure['max']:.{digits}f})"

    for brokers, size in results["sizes"].items():
        lines.append(
            f"| {brokers} | {cell(size['zookeeper_s'], 's', 2)} | {cell(size['ready_s'], 's', 2)} | "
            f"{cell(size['first_topic_s'], 's', 2)} | {cell(size['stop_s'], 's', 2)} | "
            f"{cell(size['rss_mib'], 'MiB', 0)} | {cell(size['pss_mib'], 'MiB', 0)} |"
        )
    lines.append("")
    for brokers, size in results["sizes"].items():
        by_role = ", ".join(f"{role} {mib:.0f} MiB" for role, mib in size["pss_mib_by_role"].items())
        lines.append(f"PSS by role, {brokers} broker(s): {by_role}.")
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        stamp = datetime.datetime.now(datetime.UTC).strftime("%H%M")
        stem = RESULTS / f"cluster-start-{results['date']}-{stamp}"  # runs of one day side by side
        stem.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
        stem.with_suffix(".md").write_text(text)
        print(f"written: {stem}.json, {stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
