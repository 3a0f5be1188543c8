"""Transactional produce next to idempotent produce, same cluster, same run (issue 17's performance goal).

The script starts a ``LocalCluster`` (tools/local_cluster.py: ZooKeeper, a controller and ``--brokers``
brokers in a temporary data dir, Samsa's defaults), creates one topic per phase (``--partitions``, the
cluster's replication factor), and with confluent-kafka (librdkafka: the fastest client here):

1. warms up for 2 s (idempotent, untimed);
2. **idempotent**: ``enable.idempotence=true`` (acks=all), records of ``--size`` bytes for
   ``--seconds``, then a flush: messages delivered / elapsed;
3. **transactional**: the same producer settings plus a ``transactional.id``; begin, produce for
   ``--commit-interval-ms`` (100 ms), ``commit_transaction()`` (timed), again, for ``--seconds``:
   messages committed / elapsed, and the commit calls' p50/p99 (each includes librdkafka's flush of the
   last linger batch before its EndTxn);
4. **commit probe**: ``--probe-commits`` transactions of 100 records each, without other load: produce,
   flush (untimed), then time ``commit_transaction()`` (the EndTxn round trip: the coordinator writes
   PrepareCommit and answers) and, from the same start, until a read_committed ListOffsets shows the
   last stable offset past the transaction's last record on every partition it wrote (the COMMIT
   markers written): "time to commit" p50/p99 both ways.

It prints msg/s for both phases, the ratio transactional / idempotent (the goal is >= 0.8), the commit
times and the brokers' CPU-seconds per phase, and writes ``bench/results/transactions-<date>-<HHMM>.json``
and ``.md`` (not with ``--quick``). Every process it starts is stopped by PID at the end.

    .venv/bin/python bench/transactions.py [--seconds 20] [--brokers 1] [--partitions 6] [--size 1024]
                                           [--commit-interval-ms 100] [--probe-commits 200] [--quick]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka
from confluent_kafka import IsolationLevel, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from tools.local_cluster import LocalCluster

RESULTS = Path(__file__).resolve().parent / "results"
GOAL_RATIO = 0.8
WARMUP_S = 2.0
PROBE_RECORDS = 100
PROBE_TIMEOUT_S = 30.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (nearest rank) of ``values``; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU-seconds of these processes so far (0 for one that is gone)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / CLOCK_TICKS


@dataclass
class Phase:
    name: str
    messages: int = 0
    seconds: float = 0.0
    errors: int = 0
    broker_cpu_s: float = 0.0
    commits_ms: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0

    def summary(self, size: int) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "seconds": round(self.seconds, 3),
            "msg_per_s": round(self.rate, 1),
            "mb_per_s": round(self.rate * size / 1e6, 1),
            "errors": self.errors,
            "broker_cpu_s": round(self.broker_cpu_s, 2),
            "commits": len(self.commits_ms),
            "commit_p50_ms": percentile(self.commits_ms, 50),
            "commit_p99_ms": percentile(self.commits_ms, 99),
        }


class Counter:
    """Delivery reports: messages delivered, failures, and the highest offset per partition since the
    last ``reset`` (what a transaction wrote)."""

    def __init__(self) -> None:
        self.delivered = 0
        self.errors = 0
        self.last_offsets: dict[int, int] = {}

    def reset(self) -> None:
        self.last_offsets = {}

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors += 1
            return
        self.delivered += 1
        partition, offset = msg.partition(), msg.offset()
        if offset > self.last_offsets.get(partition, -1):
            self.last_offsets[partition] = offset


def producer_config(bootstrap: str, transactional_id: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,  # acks=all, in-flight <= 5, sequence numbers
        "linger.ms": 5,
        "queue.buffering.max.messages": 200_000,
        "queue.buffering.max.kbytes": 512 * 1024,
    }
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
        config["transaction.timeout.ms"] = 60_000
    return config


def produce_for(
    producer: Producer,
    topic: str,
    value: bytes,
    seconds: float,
    counter: Counter,
    on_tick: Callable[[float], None] | None = None,
) -> None:
    """Produces ``value`` to ``topic`` as fast as librdkafka's queue takes it for ``seconds``;
    ``on_tick(now)`` between bursts (the transactional phase commits there)."""
    end = time.perf_counter() + seconds
    while True:
        now = time.perf_counter()
        if now >= end:
            return
        for _ in range(200):
            try:
                producer.produce(topic, value, on_delivery=counter)
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.005)
                break
        producer.poll(0)
        if on_tick is not None:
            on_tick(now)


def idempotent_phase(bootstrap: str, topic: str, value: bytes, seconds: float, brokers: list[int]) -> Phase:
    phase = Phase("idempotent")
    producer = Producer(producer_config(bootstrap, None))
    counter = Counter()
    cpu_before = cpu_seconds(brokers)
    start = time.perf_counter()
    produce_for(producer, topic, value, seconds, counter)
    if producer.flush(60) != 0:
        raise RuntimeError("idempotent producer: messages left undelivered after 60 s")
    phase.seconds = time.perf_counter() - start
    phase.broker_cpu_s = cpu_seconds(brokers) - cpu_before
    phase.messages, phase.errors = counter.delivered, counter.errors
    return phase


def transactional_phase(
    bootstrap: str, topic: str, value: bytes, seconds: float, interval_s: float, brokers: list[int]
) -> Phase:
    phase = Phase("transactional")
    producer = Producer(producer_config(bootstrap, "bench-transactions"))
    producer.init_transactions(60)
    counter = Counter()
    cpu_before = cpu_seconds(brokers)
    start = time.perf_counter()
    producer.begin_transaction()
    began = start

    def commit() -> None:
        t0 = time.perf_counter()
        producer.commit_transaction(60)
        phase.commits_ms.append((time.perf_counter() - t0) * 1000)

    def tick(now: float) -> None:
        nonlocal began
        if now - began >= interval_s:
            commit()
            producer.begin_transaction()
            began = time.perf_counter()

    produce_for(producer, topic, value, seconds, counter, tick)
    commit()  # everything produced is committed before the clock stops
    phase.seconds = time.perf_counter() - start
    phase.broker_cpu_s = cpu_seconds(brokers) - cpu_before
    phase.messages, phase.errors = counter.delivered, counter.errors
    return phase


def commit_probe(bootstrap: str, topic: str, value: bytes, commits: int) -> dict[str, Any]:
    """Per transaction of PROBE_RECORDS records: the commit call alone, and commit to markers visible
    (a read_committed ListOffsets past the transaction's last record on each partition it wrote)."""
    producer = Producer(producer_config(bootstrap, "bench-transactions-probe"))
    producer.init_transactions(60)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    counter = Counter()
    call_ms: list[float] = []
    visible_ms: list[float] = []
    polls: list[int] = []
    for _ in range(commits):
        counter.reset()
        producer.begin_transaction()
        for _ in range(PROBE_RECORDS):
            producer.produce(topic, value, on_delivery=counter)
        producer.flush(60)
        written = dict(counter.last_offsets)
        t0 = time.perf_counter()
        producer.commit_transaction(60)
        call_ms.append((time.perf_counter() - t0) * 1000)
        wanted = {TopicPartition(topic, p): OffsetSpec.latest() for p in written}
        asked = 0
        deadline = t0 + PROBE_TIMEOUT_S
        while True:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"the last stable offset did not pass {written} in {PROBE_TIMEOUT_S} s")
            asked += 1
            futures = admin.list_offsets(wanted, isolation_level=IsolationLevel.READ_COMMITTED)
            stable = {tp.partition: f.result().offset for tp, f in futures.items()}
            if all(stable[p] > offset for p, offset in written.items()):
                break
        visible_ms.append((time.perf_counter() - t0) * 1000)
        polls.append(asked)
    return {
        "transactions": commits,
        "records_per_transaction": PROBE_RECORDS,
        "commit_call_p50_ms": percentile(call_ms, 50),
        "commit_call_p99_ms": percentile(call_ms, 99),
        "commit_to_markers_visible_p50_ms": percentile(visible_ms, 50),
        "commit_to_markers_visible_p99_ms": percentile(visible_ms, 99),
        "list_offsets_polls_median": statistics.median(polls) if polls else None,
    }


def client_version() -> str:
    """confluent-kafka's version and librdkafka's (version() is a string in some releases, a tuple in
    others)."""
    version = confluent_kafka.version()
    python = version if isinstance(version, str) else version[0]
    return f"{python} (librdkafka {confluent_kafka.libversion()[0]})"


def fmt(value: float | None, digits: int = 1, unit: str = "") -> str:
    return "-" if value is None else f"{value:,.{digits}f}{unit}"


def report(results: dict[str, Any]) -> str:
    idem, txn, probe = results["idempotent"], results["transactional"], results["commit_probe"]
    ratio = results["ratio"]
    lines = [
        f"# Transactions, {results['date']}",
        "",
        f"`bench/transactions.py`, Python {results['python']}, confluent-kafka {results['client']}, "
        f"{results['cpus']} CPUs, load average {results['load_before'][0]:.2f} before and "
        f"{results['load_after'][0]:.2f} after; {results['brokers']} broker(s), {results['partitions']} "
        f"partitions, {results['size']} B records, {results['seconds']:.0f} s per phase, a commit every "
        f"{results['commit_interval_ms']} ms.",
        "",
        "| producer | msg/s | MB/s | broker CPU-s | commits | commit() p50 | commit() p99 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, phase in (("idempotent", idem), ("transactional", txn)):
        lines.append(
            f"| {name} | {fmt(phase['msg_per_s'], 0)} | {fmt(phase['mb_per_s'])} | "
            f"{fmt(phase['broker_cpu_s'])} | {phase['commits'] or '-'} | "
            f"{fmt(phase['commit_p50_ms'], 1, ' ms')} | {fmt(phase['commit_p99_ms'], 1, ' ms')} |"
        )
    met = "met" if ratio is not None and ratio >= GOAL_RATIO else "not met"
    lines += [
        "",
        f"Transactional / idempotent: **{fmt(ratio, 2)}** (goal: at least {GOAL_RATIO}, {met}).",
        "",
        f"Commit probe ({probe['transactions']} transactions of {probe['records_per_transaction']} records, "
        "flushed before the commit, nothing else running):",
        "",
        "| time to commit | p50 | p99 |",
        "|---|---:|---:|",
        f"| commit_transaction() call (EndTxn round trip) | {fmt(probe['commit_call_p50_ms'], 1, ' ms')} | "
        f"{fmt(probe['commit_call_p99_ms'], 1, ' ms')} |",
        f"| commit to markers written (read_committed LSO past the records) | "
        f"{fmt(probe['commit_to_markers_visible_p50_ms'], 1, ' ms')} | "
        f"{fmt(probe['commit_to_markers_visible_p99_ms'], 1, ' ms')} |",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase (default 20)")
    parser.add_argument("--brokers", type=int, default=1, help="brokers in the cluster (default 1)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of each topic (default 6)")
    parser.add_argument("--size", type=int, default=1024, help="record value size in bytes (default 1024)")
    parser.add_argument(
        "--commit-interval-ms", type=int, default=100, help="transaction length (default 100)"
    )
    parser.add_argument(
        "--probe-commits", type=int, default=200, help="transactions timed alone (default 200)"
    )
    parser.add_argument("--quick", action="store_true", help="3 s phases, 20 probe commits, no result files")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.probe_commits = 3.0, 20
    value = os.urandom(args.size)
    directory = Path(tempfile.mkdtemp(prefix="samsa-bench-txn-"))
    load_before = os.getloadavg()
    cluster = LocalCluster(directory, brokers=args.brokers, controllers=1)
    try:
        cluster.start()
        brokers = [pid for name, pid in cluster.pids().items() if name.startswith("broker")]
        for topic in ("bench-warmup", "bench-idempotent", "bench-transactional", "bench-probe"):
            cluster.create_topic(topic, args.partitions)
        bootstrap = cluster.bootstrap
        print(f"cluster up: {bootstrap}; warming up {WARMUP_S:.0f} s", flush=True)
        idempotent_phase(bootstrap, "bench-warmup", value, WARMUP_S, brokers)
        idem = idempotent_phase(bootstrap, "bench-idempotent", value, args.seconds, brokers)
        print(f"idempotent: {idem.rate:,.0f} msg/s ({idem.messages:,} in {idem.seconds:.1f} s)", flush=True)
        txn = transactional_phase(
            bootstrap, "bench-transactional", value, args.seconds, args.commit_interval_ms / 1000, brokers
        )
        print(
            f"transactional: {txn.rate:,.0f} msg/s ({txn.messages:,} in {txn.seconds:.1f} s, "
            f"{len(txn.commits_ms)} commits)",
            flush=True,
        )
        probe = commit_probe(bootstrap, "bench-probe", value, args.probe_commits)
    except KafkaException as e:
        print(f"failed: {e}", file=sys.stderr)
        return 1
    finally:
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)
    results: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "client": client_version(),
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "brokers": args.brokers,
        "partitions": args.partitions,
        "size": args.size,
        "seconds": args.seconds,
        "commit_interval_ms": args.commit_interval_ms,
        "idempotent": idem.summary(args.size),
        "transactional": txn.summary(args.size),
        "ratio": txn.rate / idem.rate if idem.rate else None,
        "commit_probe": probe,
        "transactional_commits_ms": [round(ms, 2) for ms in txn.commits_ms],
    }
    text = report(results)
    print()
    print(text)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        stamp = datetime.datetime.now(datetime.UTC).strftime("%H%M")
        stem = RESULTS / f"transactions-{results['date']}-{stamp}"
        stem.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
        stem.with_suffix(".md").write_text(text)
        print(f"written: {stem}.json, {stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
