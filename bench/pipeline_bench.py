"""Pipeline benchmark: the Spark page-stats job's throughput (rows/s, local[2]) next to a plain Python
consumer reading the same topic.

Run against a running cluster (e.g. ``make run BROKERS=1 CONTROLLERS=1`` in another terminal):

    .venv/bin/python bench/pipeline_bench.py --bootstrap 127.0.0.1:9092 [--events 1000000] [--partitions 4]

It produces ``--events`` synthetic activity events (``pipeline.events``) to a new topic, then reads them:
with one confluent-kafka consumer (raw, then with ``json.loads`` of each value), with a Spark streaming
read into the no-op sink, and with the whole job (parse, windowed statistics, Parquet and topic sinks),
each Spark query with ``trigger(availableNow=True)`` after a warm-up query. The figures are printed and
written to bench/results/pipeline-<date>.txt. Its topics and temporary directories are left to the
cluster and removed, respectively.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import Consumer, Producer, TopicPartition

from pipeline import job, spark
from pipeline.events import ActivityGenerator
from pipeline.kafka import ensure_topic

RESULTS = Path(__file__).resolve().parent / "results"
_lines: list[str] = []


def report(text: str) -> None:
    print(text, flush=True)
    _lines.append(text)


def produce_events(bootstrap: str, topic: str, count: int, partitions: int) -> float:
    """Produces ``count`` events spread over 60 s of event time; returns messages per second."""
    ensure_topic({"bootstrap.servers": bootstrap}, topic, partitions, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    generator = ActivityGenerator(seed=1)
    start_ms = int(time.time() * 1000) - 60_000
    started = time.perf_counter()
    for i in range(count):
        event = generator.next_event(start_ms + 60_000 * i // count)
        while True:
            try:
                producer.produce(topic, key=event.key(), value=event.value())
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush()
    return count / (time.perf_counter() - started)


def plain_consumer(bootstrap: str, topic: str, count: int, partitions: int, decode: bool) -> float:
    """One confluent-kafka consumer, assigned every partition from offset 0; messages per second."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    started = time.perf_counter()
    while seen < count:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                seen += 1
                if decode:
                    json.loads(message.value())
    elapsed = time.perf_counter() - started
    consumer.close()
    return count / elapsed


def spark_read(session: object, bootstrap: str, topic: str, checkpoint: str) -> tuple[int, float]:
    """A streaming read of the whole topic into the no-op sink; (rows, seconds)."""
    query = (
        session.readStream.format("samsa")  # type: ignore[attr-defined]
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
    )
    started = time.perf_counter()
    running = query.start()
    running.awaitTermination()
    elapsed = time.perf_counter() - started
    return sum(p["numInputRows"] for p in running.recentProgress), elapsed


def spark_job(session: object, bootstrap: str, topic: str, checkpoint: Path) -> float:
    """The page-stats job (both sinks) over the whole topic; seconds."""
    config = job.JobConfig(
        bootstrap=bootstrap, in_topic=topic, out_topic=f"{topic}-stats", checkpoint=checkpoint
    )
    ensure_topic({"bootstrap.servers": bootstrap}, config.out_topic, 1, 1)
    started = time.perf_counter()
    job.run(session, job.JobConfig(**{**config.__dict__, "available_now": True}))  # type: ignore[arg-type]
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    run = uuid.uuid4().hex[:8]
    topic, warmup = f"bench-views-{run}", f"bench-warmup-{run}"

    report(f"# pipeline bench {datetime.date.today()}: {args.events} events, {args.partitions} partitions")
    rate = produce_events(args.bootstrap, topic, args.events, args.partitions)
    report(f"produce (confluent-kafka, idempotent): {rate:,.0f} msg/s")
    produce_events(args.bootstrap, warmup, 20_000, args.partitions)
    for decode in (False, True):
        rate = plain_consumer(args.bootstrap, topic, args.events, args.partitions, decode)
        report(f"plain Python consumer{' + json.loads' if decode else ''}: {rate:,.0f} msg/s")

    started = time.perf_counter()
    session = spark.session("samsa-pipeline-bench", driver_memory="2g")
    report(f"SparkSession start (local[2]): {time.perf_counter() - started:.1f} s")
    with tempfile.TemporaryDirectory(prefix="pipeline-bench-") as scratch:
        try:
            spark_read(session, args.bootstrap, warmup, f"{scratch}/warmup-read")
            spark_job(session, args.bootstrap, warmup, Path(scratch) / "warmup-job")
            rows, seconds = spark_read(session, args.bootstrap, topic, f"{scratch}/read")
            report(f"Spark streaming read -> noop sink: {rows / seconds:,.0f} rows/s ({seconds:.1f} s)")
            seconds = spark_job(session, args.bootstrap, topic, Path(scratch) / "job")
            report(
                f"Spark page-stats job (both sinks): {args.events / seconds:,.0f} rows/s ({seconds:.1f} s)"
            )
        finally:
            spark.stop(session)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"pipeline-{datetime.date.today()}.txt").write_text("\n".join(_lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
