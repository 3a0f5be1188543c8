"""The console's group lag arithmetic and history (console/group_lag.py) and the groups page's reading
of its reset form (console/pages/groups.py), without a cluster."""

from __future__ import annotations

import pytest

from console.group_lag import LagHistory, history, lag_by_topic
from console.pages.groups import kafka_datetime, scenario_of
from tools.consumer_groups.reset_offsets import ResetScenario, parse_datetime


def test_lag_by_topic_sums_each_topic_s_partitions_and_skips_unknown_end_offsets() -> None:
    committed = {("a", 0): 2, ("a", 1): 5, ("b", 0): 7, ("c", 0): 1}
    ends = {("a", 0): 10, ("a", 1): 5, ("b", 0): 6}
    # b's end offset is older than its commit: no negative lag; c's end offset is unknown.
    assert lag_by_topic(committed, ends) == {"a": 8, "b": 0}


def test_the_history_keeps_fifteen_minutes_and_one_sample_per_interval() -> None:
    lag = LagHistory(window=900, min_interval=1)
    lag.record("g", 10, {"t": 10}, now=1000.0)
    lag.record("g", 12, {"t": 12}, now=1000.5)  # a second viewer's refresh: replaces the last sample
    lag.record("g", 5, {"t": 5}, now=1002.0)
    assert [(s.at, s.total) for s in lag.samples("g")] == [(1000.0, 12), (1002.0, 5)]
    lag.record("g", 1, {"t": 1}, now=1950.0)
    assert [s.total for s in lag.samples("g")] == [1]
    lag.record("other", 3, {}, now=3000.0)
    assert lag.samples("g") == []  # nothing left in its window: forgotten


def test_the_chart_series_has_the_total_and_each_topic_when_there_are_several() -> None:
    lag = LagHistory()
    lag.record("g", 3, {"a": 1, "b": 2}, now=10.0)
    lag.record("g", None, {}, now=20.0)
    lag.record("g", 4, {"a": 4}, now=30.0)
    data, labels = lag.series("g")
    assert data == {
        "x": [10.0, 20.0, 30.0],
        "total": [3, None, 4],
        "topic:a": [1, None, 4],
        "topic:b": [2, None, None],
    }
    assert labels == {"total": "Total lag", "topic:a": "a", "topic:b": "b"}
    one_topic = LagHistory()
    one_topic.record("g", 3, {"a": 3}, now=10.0)
    assert one_topic.series("g")[0] == {"x": [10.0], "total": [3]}


def test_the_history_lives_in_the_console_state() -> None:
    state: dict[str, object] = {}
    assert history(state) is history(state)


def test_the_reset_form_maps_to_the_reset_offsets_options() -> None:
    assert scenario_of({"scope": "all", "scenario": "earliest"}) == ResetScenario(
        all_topics=True, to_earliest=True
    )
    assert scenario_of({"scope": "topic", "topic": "t", "scenario": "latest"}) == ResetScenario(
        topics=["t"], to_latest=True
    )
    assert scenario_of({"scope": "all", "scenario": "offset", "value": "42"}).to_offset == 42
    assert scenario_of({"scope": "all", "scenario": "shift", "value": "-3"}).shift_by == -3
    assert scenario_of({"scope": "all", "scenario": "datetime", "value": "2024-01-31T12:00"}).to_datetime == (
        "2024-01-31T12:00:00.000"
    )


@pytest.mark.parametrize(
    ("form", "words"),
    [
        ({"scope": "topic", "topic": "", "scenario": "earliest"}, "Choose the topic"),
        ({"scope": "all", "scenario": "offset", "value": "ten"}, "The offset must be a whole number."),
        ({"scope": "all", "scenario": "shift", "value": ""}, "The shift must be a whole number."),
        ({"scope": "all", "scenario": "datetime", "value": ""}, "Give the time to reset to"),
        ({"scope": "all", "scenario": "sideways"}, "Choose how to reset the offsets."),
    ],
)
def test_a_reset_form_it_cannot_use_is_refused_in_words(form: dict[str, str], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        scenario_of(form)


def test_a_browser_s_time_gets_the_seconds_and_milliseconds_kafka_s_format_wants() -> None:
    assert kafka_datetime("2024-01-31T12:00") == "2024-01-31T12:00:00.000"
    assert kafka_datetime("2024-01-31 12:00:05") == "2024-01-31T12:00:05.000"
    assert kafka_datetime("2024-01-31T12:00:05.123+02:00") == "2024-01-31T12:00:05.123+02:00"
    assert parse_datetime(kafka_datetime("1970-01-01T00:00:01")) == 1000
