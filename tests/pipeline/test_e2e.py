"""End to end (tier 3): a real Samsa cluster and a local[2] SparkSession. Known events in, the page-stats
job with AvailableNow, exact results out in Parquet and in the output topic; a second run from the
checkpoint drops late events; a batch replayed after its transaction committed is not written again; and
a driver killed mid-stream resumes with exact results, each window once in Parquet and, for
read_committed consumers, in the topic."""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="PySpark is not installed (pip install -e '.[pipeline]')")
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import SparkSession

from pipeline import job
from pipeline.events import Event
from pipeline.topic_sink import CommittedBatch, committed_batch, query_id_of, transactional_id_for
from tests.pipeline.util import produce
from tests.support.cluster import ROOT, Cluster

pytestmark = pytest.mark.integration

T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z, on a window boundary
WINDOW_MS = 10_000
WATERMARK_MS = 10_000
PERCENTILES = (0.5, 0.95, 0.99)

Stats = dict[tuple[int, str], tuple[int, ...]]


def activity(start_s: float, end_s: float, seed: int, per_second: int = 10) -> list[Event]:
    """``per_second`` events from ``start_s`` to ``end_s`` after T0, every seventh 3 s out of order
    (within the watermark), then one more at ``end_s + 0.5`` s: the latest event time, which fixes
    where the watermark ends up."""
    rng = random.Random(seed)
    events = []
    for i in range(int((end_s - start_s) * per_second)):
        at = T0 + int(start_s * 1000) + i * 1000 // per_second
        if i % 7 == 3 and at - 3000 >= T0 + start_s * 1000:
            at -= 3000
        kind = rng.choice(("page_view", "page_view", "search", "click"))
        page = "/search" if kind == "search" else rng.choice(("/", "/a", "/b"))
        events.append(
            Event(f"{seed}-{i}", kind, f"u{rng.randrange(12)}", page, "/", rng.randrange(1, 500), at)
        )
    events.append(Event(f"{seed}-last", "page_view", "u0", "/", "/", 1, T0 + int(end_s * 1000) + 500))
    return events


def send(samsa: Cluster, topic: str, events: list[Event]) -> None:
    """Round robin over the topic's two partitions, so both advance through event time together."""
    produce(
        samsa.bootstrap,
        topic,
        ({"key": e.key(), "value": e.value(), "partition": i % 2} for i, e in enumerate(events)),
    )


def expected_stats(events: list[Event]) -> Stats:
    """What the job must emit for ``events`` (all on time): the windows the watermark has closed."""
    watermark = max(e.event_time for e in events) - WATERMARK_MS
    groups: dict[tuple[int, str], list[Event]] = defaultdict(list)
    for e in events:
        groups[(e.event_time - (e.event_time - T0) % WINDOW_MS - T0, e.page)].append(e)
    stats: Stats = {}
    for (start, page), group in groups.items():
        if T0 + start + WINDOW_MS > watermark:
            continue
        latencies = sorted(e.latency_ms for e in group)
        stats[(start, page)] = (
            sum(e.type == "page_view" for e in group),
            sum(e.type == "search" for e in group),
            sum(e.type == "click" for e in group),
            len({e.user for e in group}),
            *(latencies[max(0, math.ceil(p * len(latencies)) - 1)] for p in PERCENTILES),
        )
    return stats


def as_stats(rows: list[dict[str, Any]]) -> Stats:
    stats: Stats = {}
    for r in rows:
        key = (r["start_ms"], r["page"])
        assert key not in stats, f"duplicate result row for {key}"
        stats[key] = tuple(
            r[c]
            for c in (
                "views",
                "searches",
                "clicks",
                "unique_users",
                "latency_p50_ms",
                "latency_p95_ms",
                "latency_p99_ms",
            )
        )
    return stats


def parquet_stats(spark: SparkSession, path: Path) -> Stats:
    rows = job.results(spark, path).selectExpr(f"unix_millis(window_start) - {T0} as start_ms", "*").collect()
    return as_stats([r.asDict() for r in rows])


def topic_stats(spark: SparkSession, samsa: Cluster, topic: str) -> tuple[Stats, int]:
    """The output topic's rows as a read_committed consumer sees them, deduplicated by key (the last one
    wins), and how many records that consumer sees."""
    records = (
        spark.read.format("samsa")
        .option("kafka.bootstrap.servers", samsa.bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
        .load()
        .selectExpr("cast(key as string) as key", "cast(value as string) as value", "offset")
        .orderBy("offset")
        .collect()
    )
    latest = {r.key: json.loads(r.value) for r in records}
    rows = []
    for key, value in latest.items():
        page, start = key.rsplit("@", 1)
        assert page == value["page"] and value["window_start"].startswith(start[:-1])
        start_ms = int(datetime.strptime(start, "%Y-%m-%dT%H:%M:%S%z").timestamp() * 1000)
        rows.append({**value, "start_ms": start_ms - T0})
    return as_stats(rows), len(records)


def spark_commits(checkpoint: Path) -> list[int]:
    """The batches a query's checkpoint marks done (``commits/N``)."""
    return sorted(int(p.name) for p in (checkpoint / "commits").glob("[0-9]*"))


def group_batch(samsa: Cluster, cfg: job.JobConfig) -> CommittedBatch | None:
    """The last batch the topic query's own group records as written (read as the sink reads it)."""
    group = transactional_id_for(query_id_of(cfg.checkpoint / "topic"))
    consumer = Consumer(
        {"bootstrap.servers": samsa.bootstrap, "group.id": group, "isolation.level": "read_committed"}
    )
    try:
        [found] = consumer.committed([TopicPartition(cfg.out_topic, 0)], timeout=30)
    finally:
        consumer.close()
    assert found.error is None, found.error
    return committed_batch(found.offset, found.metadata)


def config(samsa: Cluster, source: str, checkpoint: Path) -> job.JobConfig:
    return job.JobConfig(
        bootstrap=samsa.bootstrap,
        in_topic=source,
        out_topic=f"{source}-stats",
        checkpoint=checkpoint,
        max_offsets_per_trigger=100,
        available_now=True,
    )


def test_batch_write_then_read_through_spark(
    spark: SparkSession, samsa: Cluster, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(2)
    rows = spark.range(1000).selectExpr(
        "cast(id as string) as key",
        "concat('value-', id) as value",
        "cast(id % 2 as int) as partition",
        "array(named_struct('key', 'n', 'value', cast(cast(id as string) as binary))) as headers",
    )
    rows.write.format("samsa").option("kafka.bootstrap.servers", samsa.bootstrap).option("topic", topic).mode(
        "append"
    ).save()
    read = (
        spark.read.format("samsa")
        .option("kafka.bootstrap.servers", samsa.bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )
    assert read.rdd.getNumPartitions() == 2
    got = read.selectExpr(
        "cast(key as string) as k",
        "cast(value as string) as v",
        "partition",
        "offset",
        "cast(headers[0].value as string) as h",
    ).collect()
    # two Spark tasks wrote into both Kafka partitions at once: offsets are dense, their order is not
    assert sorted((r.partition, r.k, r.v, r.h) for r in got) == sorted(
        (i % 2, str(i), f"value-{i}", str(i)) for i in range(1000)
    )
    for partition in (0, 1):
        assert sorted(r.offset for r in got if r.partition == partition) == list(range(500))


def test_job_available_now_gives_exact_windows_and_drops_late_events_on_the_next_run(
    spark: SparkSession, samsa: Cluster, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    source = new_topic(2, prefix="views")
    first = activity(0, 39, seed=1)  # latest event 39.5 s: windows up to 20 s close
    send(samsa, source, first)
    cfg = config(samsa, source, tmp_path / "checkpoint")
    job.run(spark, cfg)

    expected = expected_stats(first)
    assert sorted({start for start, _ in expected}) == [0, 10_000]
    assert parquet_stats(spark, cfg.parquet_path) == expected
    assert topic_stats(spark, samsa, cfg.out_topic) == (expected, len(expected))

    # The watermark (29.5 s) survived in the checkpoint: late events for the first window are dropped,
    # one at 29.8 s still counts, and the new latest event (59.5 s) closes the windows up to 40 s.
    late = [Event(f"late-{i}", "page_view", "u99", "/a", "/", 1, T0 + 5_000) for i in range(3)]
    on_time = Event("on-time", "click", "u99", "/b", "/", 7, T0 + 29_800)
    second = activity(40, 59, seed=2)
    send(samsa, source, [*late, on_time, *second])
    job.run(spark, cfg)

    expected = expected_stats([*first, on_time, *second])
    assert sorted({start for start, _ in expected}) == [0, 10_000, 20_000, 30_000]
    assert parquet_stats(spark, cfg.parquet_path) == expected
    assert topic_stats(spark, samsa, cfg.out_topic) == (expected, len(expected))


def test_a_batch_replayed_after_its_transaction_committed_is_not_written_again(
    spark: SparkSession, samsa: Cluster, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    source = new_topic(2, prefix="replay")
    events = activity(0, 39, seed=4)
    send(samsa, source, events)
    cfg = config(samsa, source, tmp_path / "checkpoint")
    job.run(spark, cfg)
    expected = expected_stats(events)
    assert topic_stats(spark, samsa, cfg.out_topic) == (expected, len(expected))

    # A driver that died after the sink's transaction committed but before Spark wrote commits/N: the
    # group says batch N is written, the checkpoint does not, so the next run replays batch N.
    last = spark_commits(cfg.checkpoint / "topic")[-1]
    written = group_batch(samsa, cfg)
    assert written is not None and written.batch_id == last
    assert written.records, "the last batch should have emitted windows, or this test shows nothing"
    for name in (str(last), f".{last}.crc"):  # the log entry and Hadoop's checksum of it
        (cfg.checkpoint / "topic" / "commits" / name).unlink(missing_ok=True)

    job.run(spark, cfg)
    assert spark_commits(cfg.checkpoint / "topic")[-1] == last  # replayed and marked done again
    assert group_batch(samsa, cfg) == written  # skipped: no new transaction
    assert topic_stats(spark, samsa, cfg.out_topic) == (expected, len(expected))


def _descendants(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        children = (task / "children").read_text().split() if (task / "children").exists() else []
        for child in map(int, children):
            found += [child, *_descendants(child)]
    return found


@pytest.mark.slow  # a query killed and resumed (~30 s); the quick tier keeps the replayed-batch check
def test_driver_killed_mid_stream_resumes_from_the_checkpoint_exactly(
    spark: SparkSession, samsa: Cluster, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    source = new_topic(2, prefix="crash")
    events = activity(0, 59, seed=3)  # 591 events: 6 batches of at most 100 rows
    send(samsa, source, events)
    cfg = config(samsa, source, tmp_path / "checkpoint")
    offsets = cfg.checkpoint / "parquet-sink" / "offsets"
    command = [sys.executable, "-m", "tools", "pipeline", "run", "--bootstrap", samsa.bootstrap]
    command += ["--in", source, "--out", cfg.out_topic, "--checkpoint", str(cfg.checkpoint)]
    command += ["--available-now", "--max-offsets-per-trigger", "100"]
    with open(tmp_path / "driver.log", "wb") as log:
        driver = subprocess.Popen(
            command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy()
        )
    try:
        deadline = time.monotonic() + 120
        while not (offsets / "2").exists():
            assert driver.poll() is None, (tmp_path / "driver.log").read_text()
            assert time.monotonic() < deadline, "the job never reached its third batch"
            time.sleep(0.05)
        victims = [driver.pid, *_descendants(driver.pid)]  # the Python driver, its JVM, Python workers
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):  # a worker that had just finished
                os.kill(pid, signal.SIGKILL)
    finally:
        if driver.poll() is None:
            driver.kill()
        driver.wait()
    # killed as batch 2 began: it is planned (offsets/2) but not committed, so the resumed run replays it
    committed = {int(p.name) for p in (cfg.checkpoint / "parquet-sink" / "commits").glob("[0-9]*")}
    assert 2 not in committed

    job.run(spark, cfg)  # same checkpoint, in this process's session

    expected = expected_stats(events)
    assert sorted({start for start, _ in expected}) == [0, 10_000, 20_000, 30_000]
    assert parquet_stats(spark, cfg.parquet_path) == expected  # exactly once: no duplicate rows
    # Exactly once in the topic too: read_committed sees every window's row once (append mode: one row
    # per window and page, so no batch's output appears twice), whichever moment the kill hit the
    # topic query (mid-transaction: aborted when the query restarts; committed but not in commits/N:
    # skipped when replayed).
    assert topic_stats(spark, samsa, cfg.out_topic) == (expected, len(expected))
    written = group_batch(samsa, cfg)
    assert written is not None and written.batch_id == spark_commits(cfg.checkpoint / "topic")[-1]
