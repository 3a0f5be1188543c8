"""``samsa pipeline``: ``generate`` produces synthetic activity to a topic, ``run`` runs the page-stats
streaming job on a local Spark (``--available-now`` to catch up, print the results and stop)."""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("samsa.pipeline")

_NEEDS_EXTRA = "samsa pipeline needs the pipeline extra: pip install 'samsa-broker[pipeline]' (and Java 17)"


def _setting(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return key, value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="samsa pipeline", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    gen = commands.add_parser("generate", help="produce synthetic page views, searches and clicks")
    gen.add_argument("--bootstrap", default="127.0.0.1:9092", help="bootstrap servers (default %(default)s)")
    gen.add_argument("--topic", default="page_views", help="default %(default)s")
    gen.add_argument("--rate", type=float, required=True, help="events per second")
    gen.add_argument("--count", type=int, help="stop after this many events (default: run until Ctrl-C)")
    gen.add_argument("--duration", type=float, help="stop after this many seconds")
    gen.add_argument(
        "--partitions", type=int, default=4, help="when creating the topic (default %(default)s)"
    )
    gen.add_argument("--replication-factor", type=int, default=1, help="when creating the topic")
    gen.add_argument("--users", type=int, default=1000, help="distinct users (default %(default)s)")
    gen.add_argument(
        "--late-fraction", type=float, default=0.01, help="events 15-60 s late (default %(default)s)"
    )
    gen.add_argument("--disorder-fraction", type=float, default=0.1, help="events up to 8 s out of order")
    gen.add_argument("--seed", type=int, help="for a reproducible event sequence")

    run = commands.add_parser("run", help="run the page-stats streaming job")
    run.add_argument("--bootstrap", default="127.0.0.1:9092", help="bootstrap servers (default %(default)s)")
    run.add_argument("--in", dest="in_topic", default="page_views", help="input topic (default %(default)s)")
    run.add_argument(
        "--out", dest="out_topic", default="page_stats", help="output topic (default %(default)s)"
    )
    run.add_argument(
        "--checkpoint", type=Path, required=True, help="checkpoint directory (keep it to resume)"
    )
    run.add_argument("--parquet", type=Path, help="Parquet output directory (default CHECKPOINT/parquet)")
    run.add_argument(
        "--available-now", action="store_true", help="process what is there, print results, stop"
    )
    run.add_argument("--window", default="10 seconds", help="event-time window (default %(default)s)")
    run.add_argument("--watermark", default="10 seconds", help="allowed lateness (default %(default)s)")
    run.add_argument("--max-offsets-per-trigger", type=int, help="rate limit per micro-batch")
    run.add_argument("--trigger-seconds", type=float, default=5.0, help="micro-batch interval (default 5)")
    run.add_argument("--out-partitions", type=int, default=1, help="when creating the output topic")
    run.add_argument("--master", default="local[2]", help="Spark master (default %(default)s)")
    run.add_argument(
        "--kafka",
        action="append",
        default=[],
        type=_setting,
        metavar="KEY=VALUE",
        help="a client setting for reads and writes, e.g. security.protocol=SSL (repeatable)",
    )
    run.add_argument("--show", type=int, default=30, help="result rows printed with --available-now")
    run.add_argument(
        "--at-least-once",
        action="store_true",
        help="write the output topic without transactions (for brokers without them; replays may duplicate)",
    )
    return parser


def unreachable(bootstrap: str, timeout: float = 3.0) -> str | None:
    """None if a bootstrap server accepts a connection, else why not in one line naming the addresses
    (librdkafka would retry them forever, logging each failure)."""
    for item in filter(None, (s.strip() for s in bootstrap.split(","))):
        host, _, port = item.rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout).close()
            return None
        except (OSError, ValueError):
            continue
    return (
        f"no broker answers at {bootstrap} (`make run` starts a cluster on 127.0.0.1:9092; "
        "--bootstrap HOST:PORT names another)"
    )


def generate(args: argparse.Namespace) -> int:
    from confluent_kafka import Producer

    from pipeline.events import ActivityGenerator
    from pipeline.kafka import ensure_topic

    if args.rate <= 0:
        print("samsa pipeline generate: --rate must be positive", file=sys.stderr)
        return 2
    client = {"bootstrap.servers": args.bootstrap}
    if ensure_topic(client, args.topic, args.partitions, args.replication_factor):
        print(f"created topic {args.topic} ({args.partitions} partitions)", file=sys.stderr)
    producer = Producer({**client, "enable.idempotence": True, "linger.ms": 20})
    generator = ActivityGenerator(
        args.seed,
        users=args.users,
        disorder_fraction=args.disorder_fraction,
        late_fraction=args.late_fraction,
    )
    started = time.monotonic()
    sent, reported = 0, started
    try:
        while args.count is None or sent < args.count:
            elapsed = time.monotonic() - started
            if args.duration is not None and elapsed >= args.duration:
                break
            due = int(elapsed * args.rate) + 1
            if args.count is not None:
                due = min(due, args.count)
            now_ms = int(time.time() * 1000)
            while sent < due:
                event = generator.next_event(now_ms)
                while True:
                    try:
                        producer.produce(args.topic, key=event.key(), value=event.value())
                        break
                    except BufferError:  # the local queue is full: wait for deliveries
                        producer.poll(0.1)
                sent += 1
            producer.poll(0)
            if time.monotonic() - reported >= 5:
                reported = time.monotonic()
                print(f"{sent} events sent", file=sys.stderr)
            time.sleep(max(0.0, min(0.1, sent / args.rate - (time.monotonic() - started))))
    except KeyboardInterrupt:
        pass
    producer.flush()
    print(f"{sent} events sent to {args.topic} in {time.monotonic() - started:.1f} s")
    return 0


def run(args: argparse.Namespace) -> int:
    from pipeline import job, spark
    from pipeline.kafka import ensure_topic

    config = job.JobConfig(
        bootstrap=args.bootstrap,
        in_topic=args.in_topic,
        out_topic=args.out_topic,
        checkpoint=args.checkpoint.resolve(),
        parquet=args.parquet.resolve() if args.parquet else None,
        window=args.window,
        watermark=args.watermark,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        trigger_seconds=args.trigger_seconds,
        available_now=args.available_now,
        client=dict(args.kafka),
        exactly_once_topic=not args.at_least_once,
    )
    ensure_topic(
        {**config.client, "bootstrap.servers": args.bootstrap}, args.out_topic, args.out_partitions, 1
    )
    # Spark warns at every stateful query start about things it does anyway (AQE off, long plans).
    session = spark.session("samsa-pipeline", master=args.master, log_level="ERROR")

    def stop_on_sigterm(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        job.run(session, config)
        if args.available_now:
            _print_results(session, config.parquet_path, args.show)
    except KeyboardInterrupt:
        print("stopped; run again with the same --checkpoint to resume", file=sys.stderr)
    finally:
        spark.stop(session)
    return 0


def _print_results(session: SparkSession, parquet: Path, rows: int) -> None:
    from pipeline import job

    if not (parquet / "_spark_metadata").exists():
        print("no window is complete yet (a window closes once the watermark passes its end)")
        return
    results = job.results(session, parquet)
    total = results.count()
    print(f"{total} page-window rows in {parquet}; the latest {min(rows, total)}:")
    latest = (
        results.orderBy("window_start", "views", ascending=False).limit(rows).orderBy("window_start", "page")
    )
    latest.show(rows, truncate=False)


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
    problem = unreachable(args.bootstrap)
    if problem is not None:
        print(f"samsa pipeline {args.command}: {problem}", file=sys.stderr)
        return 1
    try:
        return generate(args) if args.command == "generate" else run(args)
    except ImportError as e:
        print(f"{_NEEDS_EXTRA} ({e})", file=sys.stderr)
        return 1
