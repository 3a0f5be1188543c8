"""Fetching from followers (KIP-392): a consumer reading the leader next to one reading a follower.

The script starts a ``LocalCluster`` (tools/local_cluster.py: ZooKeeper, a controller and three brokers
in racks r1, r2, r3 with ``replica.selector.class`` Kafka's RackAwareReplicaSelector; data on disk in a
temporary dir) and a topic of ``--partitions`` partitions, replication factor 3, every partition led
by broker 1. It produces ``--messages`` records of ``--size`` bytes (acks=all), then, ``--reps`` times,
alternating, reads them all from the beginning with confluent-kafka: once with ``client.rack=r1`` (the
leader's rack: the leader serves) and once with ``client.rack=r2`` (the leader answers the first fetch
of each partition with broker 2 as the preferred read replica; broker 2 serves the rest). For each read
it reports msg/s and MB/s, the CPU-seconds of each broker during the read, and which broker the client
fetched from (librdkafka's statistics). Then a tail probe: a producer sends one record every 5 ms for
``--tail-seconds`` while a consumer in each rack tails the topic, and the produce-to-consume latency
(the record's timestamp to its arrival) is reported per rack; a follower exposes a record only once the
leader's high watermark has reached it in a fetch response, which is what following costs. The
counted reads start once the followers have caught up, after one uncounted warm-up read per rack.

    .venv/bin/python bench/follower_fetch.py [--messages 300000] [--size 1024] [--reps 3] [--quick]

Figures go to stdout and ``bench/results/follower-fetch-<date>-<HHMM>.json``.
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
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tools.local_cluster import LocalCluster

RESULTS = Path(__file__).resolve().parent / "results"
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
TOPIC = "follower-fetch"
TAIL_TOPIC = "follower-fetch-tail"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU-seconds of a process so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


def create_topics(bootstrap: str, partitions: int) -> None:
    """Both topics led by broker 1 on every partition, replicas on brokers 1, 2, 3."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(
            name,
            num_partitions=count,
            replica_assignment=[[1, 2, 3] if p % 2 == 0 else [1, 3, 2] for p in range(count)],
        )
        for name, count in ((TOPIC, partitions), (TAIL_TOPIC, 1))
    ]
    for future in admin.create_topics(topics).values():
        future.result(30)


def produce(bootstrap: str, messages: int, size: int, partitions: int) -> float:
    value = os.urandom(size)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 10,
            "batch.size": 256 * 1024,
            "queue.buffering.max.kbytes": 512 * 1024,
        }
    )
    started = time.monotonic()
    for i in range(messages):
        while True:
            try:
                producer.produce(TOPIC, value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0, "produce did not finish"
    return time.monotonic() - started


def read_all(
    bootstrap: str, rack: str, messages: int, partitions: int, pids: dict[int, int]
) -> dict[str, Any]:
    """Reads the topic from the beginning as a consumer in ``rack``; msg/s, broker CPU, served by."""
    stats: list[dict[str, Any]] = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4()}",
            "client.rack": rack,
            "enable.auto.commit": False,
            "statistics.interval.ms": 500,
            "stats_cb": lambda raw: stats.append(json.loads(raw)),
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        received = size = 0
        cpu_before = {b: cpu_seconds(pid) for b, pid in pids.items()}
        started = time.monotonic()
        deadline = started + 300
        while received < messages and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.5):
                if message.error() is None:
                    received += 1
                    size += len(message.value() or b"")
        seconds = time.monotonic() - started
        cpu = {b: cpu_seconds(pid) - cpu_before[b] for b, pid in pids.items()}
        time.sleep(0.6)
        consumer.poll(0.1)  # the last statistics
    finally:
        consumer.close()
    served_by = sorted(
        {p["broker"] for p in stats[-1]["topics"][TOPIC]["partitions"].values() if p["partition"] >= 0}
    )
    return {
        "rack": rack,
        "messages": received,
        "seconds": seconds,
        "msg_per_s": received / seconds,
        "mb_per_s": size / seconds / 1e6,
        "broker_cpu_s": cpu,
        "served_by": served_by,
    }


def tail_latency(bootstrap: str, racks: list[str], seconds: float) -> dict[str, dict[str, Any]]:
    """Produce-to-consume latency of a trickle of records, per consumer rack, read at the same time."""
    latencies: dict[str, list[float]] = {rack: [] for rack in racks}
    ready = threading.Barrier(len(racks) + 1)
    stop = threading.Event()

    def tail(rack: str) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-tail-{uuid.uuid4()}",
                "client.rack": rack,
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
            }
        )
        try:
            consumer.assign([TopicPartition(TAIL_TOPIC, 0, -1)])  # the end
            consumer.poll(1.0)
            ready.wait()
            while not stop.is_set():
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    latencies[rack].append(time.time() * 1000 - message.timestamp()[1])
        finally:
            consumer.close()

    threads = [threading.Thread(target=tail, args=(rack,)) for rack in racks]
    for thread in threads:
        thread.start()
    ready.wait()
    time.sleep(1.0)  # every consumer has found its replica
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        producer.produce(TAIL_TOPIC, value=b"x")
        producer.poll(0)
        time.sleep(0.005)
    producer.flush(10)
    time.sleep(1.5)
    stop.set()
    for thread in threads:
        thread.join()
    return {
        rack: {
            "records": len(values),
            "p50_ms": percentile(values, 50),
            "p99_ms": percentile(values, 99),
        }
        for rack, values in latencies.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=300_000, help="records (default 300,000)")
    parser.add_argument("--size", type=int, default=1024, help="value bytes (default 1024)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions (default 6)")
    parser.add_argument("--reps", type=int, default=3, help="reads per rack (default 3)")
    parser.add_argument("--tail-seconds", type=float, default=10.0, help="tail probe length (default 10)")
    parser.add_argument("--quick", action="store_true", help="30,000 records, 1 rep, 3 s tail, no files")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.reps, args.tail_seconds = 30_000, 1, 3.0
    directory = Path(tempfile.mkdtemp(prefix="samsa-bench-follower-"))
    load_before = os.getloadavg()
    cluster = LocalCluster(
        directory,
        brokers=3,
        controllers=1,
        overrides={"replica.selector.class": RACK_AWARE},
        broker_overrides={b: {"broker.rack": f"r{b}"} for b in (1, 2, 3)},
    )
    try:
        cluster.start()
        pids = {b: pid for b in (1, 2, 3) if (pid := cluster.broker(b).pid) is not None}
        bootstrap = cluster.bootstrap
        create_topics(bootstrap, args.partitions)
        cluster.wait_for_leaders(TOPIC)
        cluster.wait_for_leaders(TAIL_TOPIC)
        seconds = produce(bootstrap, args.messages, args.size, args.partitions)
        print(f"produced {args.messages:,} x {args.size} B in {seconds:.1f} s", flush=True)
        time.sleep(3)  # the followers finish copying: their fetching is not in the reads' CPU
        for rack in ("r1", "r2"):  # warm-up reads (page cache, connections), not counted
            read_all(bootstrap, rack, args.messages, args.partitions, pids)
        reads: dict[str, list[dict[str, Any]]] = {"r1": [], "r2": []}
        for rep in range(args.reps):
            for rack in ("r1", "r2"):
                result = read_all(bootstrap, rack, args.messages, args.partitions, pids)
                reads[rack].append(result)
                cpu = ", ".join(f"broker {b} {s:.2f} s" for b, s in result["broker_cpu_s"].items())
                print(
                    f"rep {rep + 1} client.rack={rack}: {result['msg_per_s']:,.0f} msg/s "
                    f"({result['mb_per_s']:.1f} MB/s) from broker(s) {result['served_by']}; CPU {cpu}",
                    flush=True,
                )
        tail = tail_latency(bootstrap, ["r1", "r2"], args.tail_seconds)
        for rack, figures in tail.items():
            print(
                f"tail client.rack={rack}: {figures['records']} records, p50 {figures['p50_ms']:.1f} ms, "
                f"p99 {figures['p99_ms']:.1f} ms",
                flush=True,
            )
    except KafkaException as e:
        print(f"failed: {e}", file=sys.stderr)
        return 1
    finally:
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)
    summary = {
        rack: {
            "msg_per_s": statistics.median(r["msg_per_s"] for r in results),
            "mb_per_s": statistics.median(r["mb_per_s"] for r in results),
            "broker_cpu_s": {b: statistics.median(r["broker_cpu_s"][b] for r in results) for b in (1, 2, 3)},
            "served_by": results[-1]["served_by"],
        }
        for rack, results in reads.items()
    }
    print(json.dumps(summary, indent=2))
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d-%H%M")
        out = RESULTS / f"follower-fetch-{stamp}.json"
        out.write_text(
            json.dumps(
                {
                    "args": vars(args),
                    "python": platform.python_version(),
                    "load_before": load_before,
                    "load_after": os.getloadavg(),
                    "reads": reads,
                    "summary": summary,
                    "tail": tail,
                },
                indent=2,
            )
        )
        print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
