"""The page-stats streaming job: events from a topic in, windowed page statistics out to a topic and to
Parquet, each sink a query of its own with its own checkpoint.

Two queries rather than one writing both: each sink then keeps its own guarantee. The Parquet sink's
``_spark_metadata`` log makes that output exactly once across crashes; the topic gets every result
row at least once, keyed so that a consumer can drop replays (docs/pipeline.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from pipeline.transforms import page_stats, parse_events, stats_records


@dataclass(frozen=True)
class JobConfig:
    bootstrap: str
    in_topic: str
    out_topic: str
    checkpoint: Path
    parquet: Path | None = None  # default: <checkpoint>/parquet
    window: str = "10 seconds"
    watermark: str = "10 seconds"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    trigger_seconds: float = 5.0
    available_now: bool = False
    client: Mapping[str, str] = field(default_factory=dict)  # extra kafka.* settings, prefix removed

    @property
    def parquet_path(self) -> Path:
        return self.parquet if self.parquet is not None else self.checkpoint / "parquet"


def source(spark: SparkSession, config: JobConfig) -> DataFrame:
    reader = (
        spark.readStream.format("samsa")
        .option("kafka.bootstrap.servers", config.bootstrap)
        .option("subscribe", config.in_topic)
        .option("startingOffsets", config.starting_offsets)
    )
    if config.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
    for key, value in config.client.items():
        reader = reader.option(f"kafka.{key}", value)
    return reader.load()


def start(spark: SparkSession, config: JobConfig) -> list[StreamingQuery]:
    """Starts the topic query and the Parquet query; returns them running."""
    stats = page_stats(parse_events(source(spark, config)), config.window, config.watermark)
    trigger = (
        {"availableNow": True}
        if config.available_now
        else {"processingTime": f"{config.trigger_seconds} seconds"}
    )
    to_topic = (
        stats_records(stats)
        .writeStream.queryName(f"{config.out_topic}-topic")
        .format("samsa")
        .option("kafka.bootstrap.servers", config.bootstrap)
        .option("topic", config.out_topic)
        .options(**{f"kafka.{k}": v for k, v in config.client.items()})
        .option("checkpointLocation", str(config.checkpoint / "topic"))
        .outputMode("append")
        .trigger(**trigger)
        .start()
    )
    to_parquet = (
        stats.writeStream.queryName(f"{config.out_topic}-parquet")
        .format("parquet")
        .option("path", str(config.parquet_path))
        .option("checkpointLocation", str(config.checkpoint / "parquet-sink"))
        .outputMode("append")
        .trigger(**trigger)
        .start()
    )
    return [to_topic, to_parquet]


def run(spark: SparkSession, config: JobConfig) -> None:
    """Runs the job until both queries end (with AvailableNow: once they have caught up); raises the
    first query's failure and stops the other."""
    queries = start(spark, config)
    try:
        for query in queries:
            query.awaitTermination()
    finally:
        for query in queries:
            if query.isActive:
                query.stop()


def results(spark: SparkSession, parquet: Path) -> DataFrame:
    """The job's Parquet output as written so far, through the sink's log (committed files only)."""
    return spark.read.parquet(str(parquet)).orderBy("window_start", "page")
