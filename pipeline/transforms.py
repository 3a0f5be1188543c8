"""The page-view job's transformations: pure DataFrame -> DataFrame functions, batch or streaming alike.

``parse_events`` turns the source's rows (JSON values, see ``pipeline.events``) into typed events,
``page_stats`` computes per page and 10-second event-time window the views, searches, clicks,
approximate unique users and latency percentiles, and ``stats_records`` shapes those rows as Kafka
records (key and JSON value). On a static DataFrame the watermark does nothing, which is what makes
the functions testable without a stream.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

EVENT_SCHEMA = StructType(
    [
        StructField("event_id", StringType()),
        StructField("type", StringType()),
        StructField("user", StringType()),
        StructField("page", StringType()),
        StructField("referrer", StringType()),
        StructField("latency_ms", IntegerType()),
        StructField("event_time", LongType()),
    ]
)

PERCENTILES = (0.5, 0.95, 0.99)
# HyperLogLog++ relative standard deviation: 2% keeps small windows' counts exact in practice at
# about 3 KB of state per (window, page).
UNIQUE_USERS_RSD = 0.02


def parse_events(raw: DataFrame) -> DataFrame:
    """Typed events from rows with a JSON ``value``; ``event_time`` becomes a timestamp. Rows that are
    not events (bad JSON, no time, page or type) are dropped."""
    parsed = raw.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")).select("e.*")
    return parsed.where(
        F.col("event_time").isNotNull() & F.col("page").isNotNull() & F.col("type").isNotNull()
    ).withColumn("event_time", F.timestamp_millis("event_time"))


def _count_of(kind: str) -> Column:
    return F.count(F.when(F.col("type") == kind, True))


def page_stats(
    events: DataFrame,
    window: str = "10 seconds",
    watermark: str = "10 seconds",
    rsd: float = UNIQUE_USERS_RSD,
) -> DataFrame:
    """Per page and tumbling event-time ``window``: ``views``, ``searches``, ``clicks``,
    ``unique_users`` (approximate, HyperLogLog++) and the latency percentiles ``latency_p50_ms``,
    ``latency_p95_ms``, ``latency_p99_ms`` (Spark's ``percentile_approx``: the smallest latency with
    at least that fraction of the window's latencies at or below it).

    Events more than ``watermark`` behind the newest event time seen are dropped in a stream, and a
    window's row is final (emitted in append mode) once the watermark passes its end.
    """
    latency = F.percentile_approx("latency_ms", list(PERCENTILES))
    return (
        events.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window).alias("window"), "page")
        .agg(
            _count_of("page_view").alias("views"),
            _count_of("search").alias("searches"),
            _count_of("click").alias("clicks"),
            F.approx_count_distinct("user", rsd).alias("unique_users"),
            latency.alias("latency"),
        )
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "page",
            "views",
            "searches",
            "clicks",
            "unique_users",
            *(F.col("latency")[i].alias(f"latency_p{round(p * 100)}_ms") for i, p in enumerate(PERCENTILES)),
        )
    )


def stats_records(stats: DataFrame) -> DataFrame:
    """``page_stats`` rows as Kafka records: key ``<page>@<window start, ISO-8601 UTC>`` (one key per
    result row, so a consumer deduplicates replays by key) and the whole row as a JSON value."""
    start = F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'")
    return stats.select(
        F.concat_ws("@", "page", start).alias("key"),
        F.to_json(F.struct(*stats.columns)).alias("value"),
    )
