"""The page-stats transformations on static DataFrames, with exact expected outputs (tier 2: Spark, no
broker)."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="PySpark is not installed (pip install -e '.[pipeline]')")
from pyspark.sql import SparkSession

from pipeline.events import ActivityGenerator, Event
from pipeline.transforms import page_stats, parse_events, stats_records

T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z


def event(kind: str, user: str, page: str, latency: int, at_ms: int) -> str:
    return Event(f"{user}-{at_ms}", kind, user, page, "/", latency, T0 + at_ms).value().decode()


EVENTS = [
    # window [0 s, 10 s): /a viewed three times by two users and clicked once; two searches by u3
    event("page_view", "u1", "/a", 10, 1_000),
    event("page_view", "u2", "/a", 20, 9_999),
    event("click", "u2", "/a", 5, 2_000),
    event("page_view", "u1", "/a", 30, 5_000),
    event("search", "u3", "/search", 200, 3_000),
    event("search", "u3", "/search", 100, 0),
    # window [10 s, 20 s)
    event("page_view", "u4", "/a", 50, 10_000),
    # window [20 s, 30 s): latencies 1..100 from seven users
    *(event("page_view", f"u{i % 7}", "/p", i, 20_000 + i) for i in range(1, 101)),
    # not events
    "not json",
    json.dumps({"type": "page_view", "page": "/a"}),
    json.dumps({"type": "page_view", "event_time": T0, "user": "u9"}),
]


def stats(spark: SparkSession) -> list[dict[str, Any]]:
    raw = spark.createDataFrame([(v.encode(),) for v in EVENTS], "value binary")
    result = page_stats(parse_events(raw)).selectExpr(
        "unix_millis(window_start) - 1704067200000 as start_ms",
        "unix_millis(window_end) - unix_millis(window_start) as length_ms",
        "*",
    )
    return [
        r.asDict() for r in result.drop("window_start", "window_end").orderBy("start_ms", "page").collect()
    ]


@pytest.mark.integration
def test_parse_events_types_the_json_and_drops_what_is_not_an_event(spark: SparkSession) -> None:
    raw = spark.createDataFrame([(v.encode(),) for v in EVENTS], "value binary")
    events = parse_events(raw)
    assert [f.name for f in events.schema.fields] == [
        "event_id",
        "type",
        "user",
        "page",
        "referrer",
        "latency_ms",
        "event_time",
    ]
    assert events.schema["event_time"].dataType.simpleString() == "timestamp"
    assert events.count() == len(EVENTS) - 3
    first = events.selectExpr("unix_millis(event_time) as ms", "user", "latency_ms").first()
    assert first is not None and first.asDict() == {"ms": T0 + 1_000, "user": "u1", "latency_ms": 10}


def expected(start_ms: int, page: str, counts: tuple[int, int, int], users: int, p: tuple[int, ...]) -> dict:
    views, searches, clicks = counts
    return {
        "start_ms": start_ms,
        "length_ms": 10_000,
        "page": page,
        "views": views,
        "searches": searches,
        "clicks": clicks,
        "unique_users": users,
        "latency_p50_ms": p[0],
        "latency_p95_ms": p[1],
        "latency_p99_ms": p[2],
    }


@pytest.mark.integration
def test_page_stats_per_page_and_ten_second_window(spark: SparkSession) -> None:
    # percentiles are the smallest latency with at least that fraction of the window's at or below it
    assert stats(spark) == [
        expected(0, "/a", (3, 0, 1), 2, (10, 30, 30)),
        expected(0, "/search", (0, 2, 0), 1, (100, 200, 200)),
        expected(10_000, "/a", (1, 0, 0), 1, (50, 50, 50)),
        expected(20_000, "/p", (100, 0, 0), 7, (50, 95, 99)),
    ]


@pytest.mark.integration
def test_stats_records_key_each_row_by_page_and_window(spark: SparkSession) -> None:
    raw = spark.createDataFrame([(v.encode(),) for v in EVENTS[:7]], "value binary")
    records = stats_records(page_stats(parse_events(raw))).orderBy("key").collect()
    assert [r.key for r in records] == [
        "/a@2024-01-01T00:00:00Z",
        "/a@2024-01-01T00:00:10Z",
        "/search@2024-01-01T00:00:00Z",
    ]
    assert json.loads(records[0].value) == {
        "window_start": "2024-01-01T00:00:00.000Z",
        "window_end": "2024-01-01T00:00:10.000Z",
        "page": "/a",
        "views": 3,
        "searches": 0,
        "clicks": 1,
        "unique_users": 2,
        "latency_p50_ms": 10,
        "latency_p95_ms": 30,
        "latency_p99_ms": 30,
    }


def test_the_generator_is_reproducible_and_its_lateness_bounded() -> None:
    first, again = ActivityGenerator(seed=7), ActivityGenerator(seed=7)
    events = [first.next_event(T0) for _ in range(2000)]
    assert events == [again.next_event(T0) for _ in range(2000)]
    delays = [T0 - e.event_time for e in events]
    assert min(delays) == 0 and max(delays) <= 60_000
    assert 0 < sum(d > 10_000 for d in delays) < 60  # about 1% late, past a 10 s watermark
    assert {e.type for e in events} == {"page_view", "search", "click"}
    assert all(e.page == "/search" for e in events if e.type == "search")
    assert json.loads(events[0].value())["event_time"] == events[0].event_time
