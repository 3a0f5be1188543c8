"""The page-stats streaming job: events from a topic in, windowed page statistics out to a topic and to
Parquet, each sink a query of its own with its own checkpoint.

Two queries rather than one writing both: each sink then keeps its own guarantee, both exactly once
across driver crashes. The Parquet sink's ``_spark_metadata`` log lists committed files only; the topic
sink (pipeline.topic_sink) writes each micro-batch in one Kafka transaction together with its batch id,
and skips a replayed batch whose id is committed. ``exactly_once_topic=False`` keeps the at-least-once
``samsa`` sink, for brokers without transactions (docs/pipeline.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from pipeline.options import WriteOptions
from pipeline.topic_sink import TransactionalTopicSink
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
    exactly_once_topic: bool = True  # False: the at-least-once sink, for brokers without transactions

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
    """Starts the topic query and the Parquet query; returns them running. (``run`` also closes the
    topic sink's Kafka clients when the queries end; here they go with the sink object.)"""
    return _start(spark, config)[0]


def _start(
    spark: SparkSession, config: JobConfig
) -> tuple[list[StreamingQuery], list[TransactionalTopicSink]]:
    stats = page_stats(parse_events(source(spark, config)), config.window, config.watermark)
    trigger = (
        {"availableNow": True}
        if config.available_now
        else {"processingTime": f"{config.trigger_seconds} seconds"}
    )
    topic_checkpoint = config.checkpoint / "topic"
    records = stats_records(stats).writeStream.queryName(f"{config.out_topic}-topic")
    sinks: list[TransactionalTopicSink] = []
    if config.exactly_once_topic:
        client = {"bootstrap.servers": config.bootstrap, **config.client}
        sink = TransactionalTopicSink(WriteOptions(client, config.out_topic), topic_checkpoint)
        sinks.append(sink)
        records = records.foreachBatch(sink)
    else:
        records = (
            records.format("samsa")
            .option("kafka.bootstrap.servers", config.bootstrap)
            .option("topic", config.out_topic)
            .options(**{f"kafka.{k}": v for k, v in config.client.items()})
        )
    to_topic = (
        records.option("checkpointLocation", str(topic_checkpoint))
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
    return [to_topic, to_parquet], sinks


def run(spark: SparkSession, config: JobConfig) -> None:
    """Runs the job until both queries end (with AvailableNow: once they have caught up); raises the
    first query's failure and stops the other."""
    queries, sinks = _start(spark, config)
    try:
        for query in queries:
            query.awaitTermination()
    finally:
        for query in queries:
            if query.isActive:
                query.stop()
        for sink in sinks:
            sink.close()


def results(spark: SparkSession, parquet: Path) -> DataFrame:
    """The job's Parquet output as written so far, through the sink's log (committed files only)."""
    return spark.read.parquet(str(parquet)).orderBy("window_start", "page")
