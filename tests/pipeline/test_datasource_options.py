"""The data source's option parsing and offset-range arithmetic, without a broker or a JVM."""

from __future__ import annotations

import pytest

from pipeline.options import (
    EARLIEST,
    LATEST,
    OffsetBound,
    Subscription,
    parse_read_options,
    parse_write_options,
)

pytest.importorskip("pyspark", reason="PySpark is not installed (pip install -e '.[pipeline]')")
from pipeline.source import KafkaRange, rate_limit, split_ranges

BASE = {"kafka.bootstrap.servers": "127.0.0.1:1"}


def test_keys_are_case_insensitive_and_defaults_follow_the_built_in_connector() -> None:
    # Spark hands the options over lower-cased; users write them in camel case. Both must work.
    for key in ("startingOffsets", "startingoffsets"):
        options = parse_read_options({**BASE, "subscribe": "a, b,a", key: "earliest"}, streaming=True)
        assert options.starting == OffsetBound("earliest")
    options = parse_read_options({**BASE, "SUBSCRIBE": "a"}, streaming=True)
    assert options.subscription == Subscription(topics=("a",))
    assert options.starting == OffsetBound("latest")  # streaming default
    assert options.ending == OffsetBound("latest")
    assert options.fail_on_data_loss and not options.include_headers
    assert options.poll_timeout_ms == 120_000 and options.max_offsets_per_trigger is None
    assert parse_read_options({**BASE, "subscribe": "a"}, streaming=False).starting == OffsetBound("earliest")
    assert parse_read_options({**BASE, "subscribe": "a, b,a"}, streaming=True).subscription.topics == (
        "a",
        "b",
    )


def test_kafka_prefixed_options_pass_through_to_the_client() -> None:
    options = parse_read_options(
        {**BASE, "subscribe": "a", "kafka.isolation.level": "read_committed", "kafka.client.id": "x"}, True
    )
    assert options.client == {
        "bootstrap.servers": "127.0.0.1:1",
        "isolation.level": "read_committed",
        "client.id": "x",
    }
    assert parse_write_options({**BASE, "topic": "out"}).topic == "out"


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"subscribe": "a"}, True, "'kafka.bootstrap.servers' must be specified"),
        ({**BASE}, True, "exactly one of the options"),
        ({**BASE, "subscribe": "a", "assign": '{"a":[0]}'}, True, "exactly one of the options"),
        ({**BASE, "subscribePattern": "("}, True, "not a valid regular expression"),
        ({**BASE, "assign": "[0]"}, True, "option 'assign' must be JSON"),
        (
            {**BASE, "subscribe": "a", "startingOffsets": "latest"},
            False,
            "cannot be latest for a batch query",
        ),
        ({**BASE, "subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, False, "cannot use -1"),
        ({**BASE, "subscribe": "a", "startingOffsets": "{oops"}, True, "must be earliest, latest or JSON"),
        ({**BASE, "subscribe": "a", "endingOffsets": "latest"}, True, "for batch queries only"),
        ({**BASE, "subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, False, "cannot use -2"),
        ({**BASE, "subscribe": "a", "maxOffsetsPerTrigger": "10"}, False, "for streaming queries only"),
        ({**BASE, "subscribe": "a", "maxOffsetsPerTrigger": "0"}, True, "must be positive"),
        ({**BASE, "subscribe": "a", "minPartitions": "x"}, True, "must be an integer"),
        ({**BASE, "subscribe": "a", "failOnDataLoss": "maybe"}, True, "must be true or false"),
        ({**BASE, "subscribe": "a", "startingTimestamp": "yesterday"}, True, "must be milliseconds"),
        ({**BASE, "subscribe": "a", "kafka.auto.offset.reset": "earliest"}, True, "use startingOffsets"),
        ({**BASE, "subscribe": "a", "kafka.enable.auto.commit": "true"}, True, "checkpointed by Spark"),
    ],
)
def test_bad_options_are_refused_by_name(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_read_options(options, streaming)


def test_offsets_json_and_timestamps() -> None:
    options = parse_read_options(
        {
            **BASE,
            "subscribe": "a",
            "startingOffsets": '{"a":{"0":23,"1":-2}}',
            "endingOffsets": '{"a":{"0":-1}}',
        },
        streaming=False,
    )
    assert options.starting == OffsetBound("specific", {"a": {0: 23, 1: EARLIEST}})
    assert options.ending == OffsetBound("specific", {"a": {0: LATEST}})
    options = parse_read_options({**BASE, "subscribe": "a", "startingTimestamp": "1000"}, streaming=True)
    assert options.starting == OffsetBound("timestamp", timestamp_ms=1000)


def test_subscriptions_select_topics_and_partitions() -> None:
    pattern = parse_read_options({**BASE, "subscribePattern": "page.*"}, True).subscription
    assert pattern.select_topics(["pages", "page_views", "other", "__consumer_offsets"]) == [
        "page_views",
        "pages",
    ]
    assigned = parse_read_options({**BASE, "assign": '{"a":[2,0],"gone":[0]}'}, True).subscription
    assert assigned.select_topics(["a", "b"]) == ["a"]
    assert assigned.select_partitions("a", [0, 1, 2, 3]) == [0, 2]
    assert Subscription(topics=("b", "missing")).select_topics(["a", "b"]) == ["b"]


def test_min_partitions_cuts_ranges_in_proportion() -> None:
    ranges = [KafkaRange("a", 0, 0, 90), KafkaRange("a", 1, 10, 20)]
    assert split_ranges(ranges, None) == ranges
    assert split_ranges(ranges, 2) == ranges
    pieces = split_ranges(ranges, 5)
    assert pieces == [
        KafkaRange("a", 0, 0, 18),
        KafkaRange("a", 0, 18, 36),
        KafkaRange("a", 0, 36, 54),
        KafkaRange("a", 0, 54, 72),
        KafkaRange("a", 0, 72, 90),
        KafkaRange("a", 1, 10, 20),
    ]
    # a range is never cut into pieces smaller than one offset
    assert split_ranges([KafkaRange("a", 0, 5, 7), KafkaRange("a", 1, 0, 1)], 10) == [
        KafkaRange("a", 0, 5, 6),
        KafkaRange("a", 0, 6, 7),
        KafkaRange("a", 1, 0, 1),
    ]


def test_max_offsets_per_trigger_is_shared_by_backlog() -> None:
    start = {("a", 0): 0, ("a", 1): 100}
    end = {("a", 0): 300, ("a", 1): 200, ("a", 2): 1}  # a-2 is new: read from 0
    assert rate_limit(start, end, 1000) == end
    # backlogs 300, 100 and 1 of 401: shares 74.8, 24.9 and 0.25 -> 74, 24 and (at least) 1
    assert rate_limit(start, end, 100) == {("a", 0): 74, ("a", 1): 124, ("a", 2): 1}
    assert rate_limit({("a", 0): 5}, {("a", 0): 5}, 10) == {("a", 0): 5}
