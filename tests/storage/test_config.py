"""LogConfig: Kafka names and defaults, validation naming the key, broker synonyms."""

import pytest

from protocol.errors import ErrorCode
from storage.config import LONG_MAX, LogConfig
from storage.errors import InvalidConfigError


def test_defaults_are_kafkas():
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.segment_ms == 604_800_000
    assert c.segment_index_bytes == 10 * 1024 * 1024
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 604_800_000
    assert c.retention_bytes == -1
    assert c.file_delete_delay_ms == 60_000
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.cleanup_policy == ("delete",)
    assert c.min_cleanable_dirty_ratio == 0.5
    assert c.delete_retention_ms == 86_400_000
    assert c.max_message_bytes == 1_048_588
    assert c.message_timestamp_type == "CreateTime"


def test_from_props_parses_strings_and_keeps_overrides():
    props = {"segment.bytes": "1024", "cleanup.policy": "compact,delete", "retention.ms": -1}
    c = LogConfig.from_props(props)
    assert c.segment_bytes == 1024
    assert c.compact and c.delete
    assert c.retention_ms == -1
    assert c.overrides == {"segment.bytes": "1024", "cleanup.policy": "compact,delete", "retention.ms": "-1"}
    assert c.to_props()["cleanup.policy"] == "compact,delete"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "10"),
        ("segment.bytes", "abc"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("cleanup.policy", "shred"),
        ("message.timestamp.type", "Whenever"),
        ("unclean.leader.election.enable", "maybe"),
        ("no.such.config", "1"),
    ],
)
def test_bad_values_name_the_key(key, value):
    with pytest.raises(InvalidConfigError) as e:
        LogConfig.from_props({key: value})
    assert e.value.key == key
    assert key in str(e.value)
    assert e.value.error_code == ErrorCode.INVALID_CONFIG


def test_cross_field_validation():
    with pytest.raises(InvalidConfigError) as e:
        LogConfig.from_props({"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5})
    assert e.value.key == "min.compaction.lag.ms"


def test_topic_overrides_apply_over_broker_defaults():
    broker = LogConfig.from_broker_props({"log.segment.bytes": "2048", "log.retention.hours": "1"})
    assert broker.segment_bytes == 2048
    assert broker.retention_ms == 3_600_000
    topic = LogConfig.from_props({"retention.ms": "5"}, broker)
    assert topic.segment_bytes == 2048 and topic.retention_ms == 5


def test_broker_time_units_precedence():
    c = LogConfig.from_broker_props({"log.retention.hours": "1", "log.retention.minutes": "2"})
    assert c.retention_ms == 120_000
    c = LogConfig.from_broker_props({"log.retention.ms": "7", "log.retention.minutes": "2"})
    assert c.retention_ms == 7
    assert LogConfig.from_broker_props({"log.retention.hours": "-1"}).retention_ms == -1


def test_jitter_is_below_segment_ms():
    c = LogConfig.from_props({"segment.ms": 10, "segment.jitter.ms": 100})
    assert all(0 <= c.random_segment_jitter() < 10 for _ in range(100))
    assert LogConfig().random_segment_jitter() == 0
