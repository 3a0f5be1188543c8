"""How fast the web console's pages load on a cluster with 1,000 partitions (issue 21: "pages load fast on
a cluster with 1,000 partitions (measure)").

A ``LocalCluster`` (3 brokers, one controller, metrics on, ``samsa console`` started by it as ``samsa up``
starts it) gets topics totalling ``--partitions`` partitions (``--topics`` topics of equal size,
replication factor 3). Then, each a median of ``--reps`` runs (min-max printed too):

- HTTP GET of ``/`` (Cluster), ``/topics``, one topic's page (``/topics/<name>``) and ``/groups``, whole
  responses over a new connection, both *cold* (the console's shared cluster snapshot has expired, so
  the request pays for Metadata, ListOffsets and DescribeLogDirs of every partition: the first visitor
  after ``--refresh`` seconds) and *warm* (the snapshot is fresh: rendering alone);
- one round of the live view: from opening ``/events/cluster`` (and ``/events/topics``, if the page has
  one) until its first event has arrived, cold;
- the browser's load of ``/topics`` and of the topic's page: headless Chromium (Debian's, driven by
  Playwright), a new page each time, the Navigation Timing entry's ``responseEnd`` (HTML received),
  ``domContentLoadedEventEnd`` and ``loadEventEnd`` (scripts and styles done), cold.

    .venv/bin/python bench/console_load.py [--partitions 1000] [--topics 10] [--reps 7]

Prints a table; writes ``bench/results/console-load-<date>-<HHMM>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.local_cluster import LocalCluster

RESULTS = Path(__file__).resolve().parent / "results"
REFRESH = 1.0  # the console's --refresh: its snapshot is shared for min(2, refresh) seconds
COLD_WAIT = REFRESH + 0.3


def get(url: str) -> tuple[int, int, float]:
    """(status, bytes, seconds) of one GET over a new connection, body read to the end."""
    parts = urllib.parse.urlsplit(url)
    start = time.perf_counter()
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    try:
        connection.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""))
        response = connection.getresponse()
        body = response.read()
        return response.status, len(body), time.perf_counter() - start
    finally:
        connection.close()


def first_event(url: str) -> tuple[int, float]:
    """(status, seconds) from opening an event stream until its first whole event (a blank line)."""
    parts = urllib.parse.urlsplit(url)
    start = time.perf_counter()
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    try:
        connection.request("GET", parts.path, headers={"Accept": "text/event-stream"})
        response = connection.getresponse()
        if response.status != 200:
            return response.status, time.perf_counter() - start
        seen_data = False
        while True:
            line = response.fp.readline()
            if not line:
                break
            if line.startswith(b"data:"):
                seen_data = True
            elif line in (b"\n", b"\r\n") and seen_data:
                break
        return 200, time.perf_counter() - start
    finally:
        connection.close()


def seconds_to_get(url: str) -> float:
    return get(url)[2]


def seconds_to_first_event(url: str) -> float:
    return first_event(url)[1]


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def timed(reps: int, fn: Callable[[], float], cold: bool) -> dict[str, float]:
    values = []
    for _ in range(reps):
        if cold:
            time.sleep(COLD_WAIT)
        values.append(fn())
    return summary(values)


def http_figures(base: str, paths: dict[str, str], reps: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for label, path in paths.items():
        status, size, _ = get(base + path)
        if status != 200:
            figures[label] = {"path": path, "status": status}
            continue
        figures[label] = {
            "path": path,
            "bytes": size,
            "cold": timed(reps, partial(seconds_to_get, base + path), cold=True),
            "warm": timed(reps, partial(seconds_to_get, base + path), cold=False),
        }
    return figures


def live_figures(base: str, views: list[str], reps: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for view in views:
        status, _ = first_event(f"{base}/events/{view}")
        if status != 200:
            continue  # the page has no live view (yet)
        figures[view] = timed(reps, partial(seconds_to_first_event, f"{base}/events/{view}"), cold=True)
    return figures


def browser_figures(base: str, paths: dict[str, str], reps: int) -> dict[str, Any]:
    from tests.support.browser import launched_browser

    figures: dict[str, Any] = {}
    with launched_browser() as browser:
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        for label, path in paths.items():
            runs: dict[str, list[float]] = {"responseEnd": [], "domContentLoaded": [], "load": []}
            status = None
            for _ in range(reps):
                time.sleep(COLD_WAIT)
                page = context.new_page()
                try:
                    response = page.goto(base + path, wait_until="load")
                    status = response.status if response is not None else None
                    timing = page.evaluate(
                        "() => { const n = performance.getEntriesByType('navigation')[0];"
                        " return [n.responseEnd, n.domContentLoadedEventEnd, n.loadEventEnd]; }"
                    )
                finally:
                    page.close()
                for key, value in zip(runs, timing, strict=True):
                    runs[key].append(value / 1000)
            figures[label] = {"path": path, "status": status, **{k: summary(v) for k, v in runs.items()}}
        context.close()
    return figures


def ms(figure: dict[str, float]) -> str:
    return f"{figure['median'] * 1000:.0f} ms ({figure['min'] * 1000:.0f}-{figure['max'] * 1000:.0f})"


def table(result: dict[str, Any]) -> str:
    lines = [
        f"{result['partitions']} partitions in {result['topics']} topics (replication factor 3, 3 brokers); "
        f"medians of {result['reps']} (min-max)",
        "",
        "| request | size | cold (snapshot expired) | warm (snapshot fresh) |",
        "|---|---:|---:|---:|",
    ]
    for label, figure in result["http"].items():
        if "cold" not in figure:
            lines.append(f"| GET {figure['path']} ({label}) | HTTP {figure['status']} | - | - |")
            continue
        lines.append(
            f"| GET {figure['path']} ({label}) | {figure['bytes'] / 1024:.0f} KiB | {ms(figure['cold'])} "
            f"| {ms(figure['warm'])} |"
        )
    for view, figure in result["live"].items():
        lines.append(f"| /events/{view}: first event | | {ms(figure)} | |")
    lines += [
        "",
        "| browser (Chromium), cold | HTML received | DOMContentLoaded | load |",
        "|---|---:|---:|---:|",
    ]
    for label, figure in result["browser"].items():
        lines.append(
            f"| {figure['path']} ({label}) | {ms(figure['responseEnd'])} | {ms(figure['domContentLoaded'])} "
            f"| {ms(figure['load'])} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--no-browser", action="store_true", help="HTTP figures only")
    args = parser.parse_args()
    per_topic = args.partitions // args.topics
    directory = Path(tempfile.mkdtemp(prefix="samsa-console-load-"))
    cluster = LocalCluster(directory, brokers=3, controllers=1, console=True)
    assert cluster.console_node is not None
    cluster.console_node.overrides["refresh"] = str(REFRESH)
    try:
        cluster.start()
        start = time.perf_counter()
        names = [f"load-{i:02d}" for i in range(args.topics)]
        for name in names:
            cluster.create_topic(name, per_topic, replication_factor=3)
        created = time.perf_counter() - start
        print(f"{args.topics} topics x {per_topic} partitions created in {created:.1f} s", file=sys.stderr)
        base = cluster.console_node.url
        # create_topic returns once every broker knows each partition's leader; one untimed visit warms
        # the console's client (its connections to the brokers) as any earlier visitor would have
        get(base + "/topics")
        paths = {"cluster": "/", "topics": "/topics", "topic": f"/topics/{names[0]}", "groups": "/groups"}
        load_before = os.getloadavg()[0]
        result: dict[str, Any] = {
            "date": datetime.datetime.now().isoformat(timespec="minutes"),
            "python": platform.python_version(),
            "partitions": per_topic * args.topics,
            "topics": args.topics,
            "reps": args.reps,
            "http": http_figures(base, paths, args.reps),
            "live": live_figures(base, ["cluster", "topics"], args.reps),
            "browser": {}
            if args.no_browser
            else browser_figures(base, {"topics": paths["topics"], "topic": paths["topic"]}, args.reps),
        }
        result["load_average"] = [load_before, os.getloadavg()[0]]
    finally:
        cluster.stop()
    text = table(result)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / f"console-load-{datetime.datetime.now():%Y-%m-%d-%H%M}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    stem.with_suffix(".md").write_text(text + "\n")
    print(f"results: {stem}.json, .md (load average {result['load_average']})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
