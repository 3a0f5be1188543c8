"""Consume 100 B as run-bench measures it, and how much of that time the consumer spends backed off.

run-bench's consume workload runs librdkafka's ``rdkafka_performance -C``, which sets
``queued.min.messages=1000000``. With 100 B values its pre-fetch queue then reaches
``queued.max.messages.kbytes`` (64 MB, about 650,000 messages) whenever the broker delivers faster than
the application thread takes messages, and librdkafka stops fetching every partition for
``fetch.queue.backoff.ms`` (1,000 ms). The application drains the queue in about 0.3 s and then waits
for the rest of the second, so the faster a broker fills the queue, the larger the share of the run
the consumer spends idle. This probe consumes the same way twice per rep — as run-bench does, with
librdkafka's statistics every 250 ms to count the intervals in which no message arrived, and with the
backoff at 10 ms, which takes the client's flow control out of the figure and leaves the broker's
delivery rate.

    .venv/bin/python bench/consume_backoff.py HOST:PORT [--messages 5000000] [--reps 3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

if __package__:  # imported as bench.consume_backoff (the tests, bench/compare.py run as a module)
    from bench.e2e_latency import create_topic, delete_topic
else:  # run as a script
    from e2e_latency import create_topic, delete_topic

STATS_INTERVAL_MS = 250
SHORT_BACKOFF_MS = 10
_CONSUMED = re.compile(r"(\d+) messages \(\d+ bytes\) consumed in (\d+)ms")
_STATS = re.compile(r'\{ "name": "rdkafka#consumer')


def perf_binary() -> Path:
    """run-bench's build of rdkafka_performance (it builds it on its first run)."""
    return Path(os.environ.get("KBENCH_HOME", Path.home() / ".cache" / "kbench")) / "rdkafka_performance"


def consumed_rate(output: str) -> float | None:
    """Messages per second of rdkafka_performance's last "consumed in" line (it prints one with 0
    messages at the rebalance)."""
    found = [m for m in _CONSUMED.finditer(output) if int(m.group(1))]
    if not found:
        return None
    count, ms = map(int, found[-1].groups())
    return count / (max(ms, 1) / 1000)


def idle_share(output: str, total: int) -> float | None:
    """The share of the statistics intervals between the first message and the last in which no message
    arrived from the broker; None without two such intervals."""
    decoder = json.JSONDecoder(strict=False)
    received = []
    for line in output.splitlines():
        match = _STATS.search(line)
        if not match:
            continue
        try:
            stats, _ = decoder.raw_decode(line[match.start() :])
        except ValueError:
            continue
        received.append(int(stats.get("rxmsgs", 0)))
    during = [
        (before, after) for before, after in itertools.pairwise(received) if after > 0 and before < total
    ]
    if len(during) < 2:
        return None
    return sum(1 for before, after in during if after == before) / len(during)


def _run(command: list[str], timeout: float) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    return done.stdout + done.stderr


def measure(
    bootstrap: str, *, messages: int = 5_000_000, size: int = 100, reps: int = 3, timeout: float = 300.0
) -> dict[str, Any]:
    """Produces ``messages`` values of ``size`` bytes to a fresh 6-partition topic, then consumes them
    ``reps`` times each way; medians of the rates (msg/s) and of the idle share, and every run."""
    perf = str(perf_binary())
    if not Path(perf).exists():
        raise RuntimeError(f"{perf} is missing: run ../shared/bench/run-bench once to build it")
    topic = f"consume-backoff-{uuid.uuid4().hex[:10]}"
    create_topic(bootstrap, topic, 6, 1)
    try:
        produced = _run(
            [
                perf,
                "-P",
                "-t",
                topic,
                "-b",
                bootstrap,
                "-s",
                str(size),
                "-c",
                str(messages),
                "-a",
                "1",
                "-X",
                "linger.ms=5",
                "-i",
                "1000000",
            ],
            timeout,
        )
        if f"{messages} delivered" not in produced:
            raise RuntimeError(f"producing the probe's messages failed: {produced.strip()[-300:]}")
        runs: dict[str, list[float | None]] = {"default": [], "short_backoff": [], "idle_share": []}
        for _ in range(reps):
            for mode, extra in (
                ("default", ["-T", str(STATS_INTERVAL_MS)]),
                ("short_backoff", ["-X", f"fetch.queue.backoff.ms={SHORT_BACKOFF_MS}"]),
            ):
                group = f"consume-backoff-{uuid.uuid4().hex[:10]}"
                output = _run(
                    [
                        perf,
                        "-C",
                        "-G",
                        group,
                        "-t",
                        topic,
                        "-b",
                        bootstrap,
                        "-c",
                        str(messages),
                        "-i",
                        "1000000",
                        *extra,
                    ],
                    timeout,
                )
                runs[mode].append(consumed_rate(output))
                if mode == "default":
                    runs["idle_share"].append(idle_share(output, messages))
    finally:
        delete_topic(bootstrap, topic)

    def median(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return statistics.median(present) if present else None

    return {
        "rate": median(runs["default"]),
        "idle_share": median(runs["idle_share"]),
        "short_backoff_rate": median(runs["short_backoff"]),
        "runs": runs,
        "messages": messages,
        "size": size,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="bench/consume_backoff.py")
    parser.add_argument("bootstrap")
    parser.add_argument("--messages", type=int, default=5_000_000, help="default 5,000,000")
    parser.add_argument("--size", type=int, default=100, help="value bytes (default 100)")
    parser.add_argument("--reps", type=int, default=3, help="default 3")
    args = parser.parse_args(argv)
    print(
        json.dumps(measure(args.bootstrap, messages=args.messages, size=args.size, reps=args.reps), indent=1)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
