"""LogConfig: Kafka's topic-level log configs (names, defaults, validation) and broker-level synonyms."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from storage.errors import InvalidConfigError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

COMPACT = "compact"
DELETE = "delete"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def _to_int(key: str, value: Any, lo: int, hi: int = LONG_MAX) -> int:
    try:
        n = value if isinstance(value, int) and not isinstance(value, bool) else int(str(value).strip())
    except ValueError:
        raise InvalidConfigError(key, value, "not an integer") from None
    if not lo <= n <= hi:
        raise InvalidConfigError(key, value, f"must be in [{lo}, {hi}]")
    return n


def _to_ratio(key: str, value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise InvalidConfigError(key, value, "not a number") from None
    if not 0.0 <= x <= 1.0:
        raise InvalidConfigError(key, value, "must be in [0, 1]")
    return x


def _to_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise InvalidConfigError(key, value, "must be true or false")
    return text == "true"


def _to_policy(key: str, value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    policy = tuple(sorted({str(p).strip().lower() for p in items if str(p).strip()}))
    if not policy or any(p not in (COMPACT, DELETE) for p in policy):
        raise InvalidConfigError(key, value, "must be a list of 'compact' and/or 'delete'")
    return policy


def _to_choice(choices: tuple[str, ...]) -> Callable[[str, Any], str]:
    def parse(key: str, value: Any) -> str:
        text = str(value).strip()
        if text not in choices:
            raise InvalidConfigError(key, value, f"must be one of {', '.join(choices)}")
        return text

    return parse


def _int(lo: int, hi: int = LONG_MAX) -> Callable[[str, Any], int]:
    return lambda key, value: _to_int(key, value, lo, hi)


def _text(key: str, value: Any) -> str:
    return str(value)


# Kafka topic config name -> (attribute, parser). Names without a storage meaning are kept so that
# clients setting them (CreateTopics, AlterConfigs) are accepted, as Kafka accepts them.
_TOPIC_KEYS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "segment.bytes": ("segment_bytes", _int(14, INT_MAX)),
    "segment.ms": ("segment_ms", _int(1)),
    "segment.jitter.ms": ("segment_jitter_ms", _int(0)),
    "segment.index.bytes": ("segment_index_bytes", _int(4, INT_MAX)),
    "index.interval.bytes": ("index_interval_bytes", _int(0, INT_MAX)),
    "retention.ms": ("retention_ms", _int(-1)),
    "retention.bytes": ("retention_bytes", _int(-1)),
    "file.delete.delay.ms": ("file_delete_delay_ms", _int(0)),
    "flush.messages": ("flush_messages", _int(1)),
    "flush.ms": ("flush_ms", _int(0)),
    "cleanup.policy": ("cleanup_policy", _to_policy),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _to_ratio),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _int(0)),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _int(1)),
    "delete.retention.ms": ("delete_retention_ms", _int(0)),
    "message.timestamp.type": ("message_timestamp_type", _to_choice((CREATE_TIME, LOG_APPEND_TIME))),
    "message.timestamp.difference.max.ms": ("message_timestamp_difference_max_ms", _int(0)),
    "max.message.bytes": ("max_message_bytes", _int(0, INT_MAX)),
    "min.insync.replicas": ("min_insync_replicas", _int(1, INT_MAX)),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _to_bool),
    "compression.type": ("compression_type", _to_choice(COMPRESSION_TYPES)),
    "preallocate": ("preallocate", _to_bool),
    "message.downconversion.enable": ("message_downconversion_enable", _to_bool),
    "message.format.version": ("message_format_version", _text),
    "leader.replication.throttled.replicas": ("leader_replication_throttled_replicas", _text),
    "follower.replication.throttled.replicas": ("follower_replication_throttled_replicas", _text),
}

# Broker-level default name -> topic-level name (Kafka's LogConfig.TopicConfigSynonyms). Time settings
# with several units are resolved in from_broker_props, ms winning over minutes over hours.
BROKER_SYNONYMS: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.difference.max.ms": "message.timestamp.difference.max.ms",
    "message.max.bytes": "max.message.bytes",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "compression.type": "compression.type",
    "log.preallocate": "preallocate",
    "log.message.downconversion.enable": "message.downconversion.enable",
    "log.message.format.version": "message.format.version",
}
_BROKER_TIME_UNITS = {
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)),
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ),
}


@dataclass(frozen=True)
class LogConfig:
    """One partition's log settings; attribute names are the Kafka names with '.' -> '_'."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3_600_000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3_600_000
    retention_bytes: int = -1
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    cleanup_policy: tuple[str, ...] = (DELETE,)
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 24 * 3_600_000
    message_timestamp_type: str = CREATE_TIME
    message_timestamp_difference_max_ms: int = LONG_MAX
    max_message_bytes: int = 1024 * 1024 + 12
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    compression_type: str = "producer"
    preallocate: bool = False
    message_downconversion_enable: bool = True
    message_format_version: str = "3.0-IV1"
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    # Topic-level overrides this config was built with (what DescribeConfigs reports as non-default).
    overrides: Mapping[str, str] = field(default_factory=dict, compare=False)

    @classmethod
    def from_props(cls, props: Mapping[str, Any], defaults: LogConfig | None = None) -> LogConfig:
        """Applies Kafka topic-config names over `defaults`; an unknown name or bad value raises
        InvalidConfigError naming the key."""
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}
        for key, value in props.items():
            if key not in _TOPIC_KEYS:
                raise InvalidConfigError(key, value, "unknown topic config name")
            attr, parse = _TOPIC_KEYS[key]
            changes[attr] = parse(key, value)
        merged = {**base.overrides, **{k: str(v) for k, v in props.items()}}
        config = dataclasses.replace(base, overrides=merged, **changes)
        config.validate()
        return config

    @classmethod
    def from_broker_props(cls, props: Mapping[str, Any]) -> LogConfig:
        """The broker-wide default LogConfig from server.properties names (log.segment.bytes, ...)."""
        topic_props: dict[str, Any] = {}
        for broker_key, topic_key in BROKER_SYNONYMS.items():
            if broker_key in props:
                topic_props[topic_key] = props[broker_key]
        for topic_key, units in _BROKER_TIME_UNITS.items():
            for broker_key, scale in units:
                if broker_key in props:
                    n = _to_int(broker_key, props[broker_key], -1)
                    topic_props[topic_key] = -1 if n < 0 else n * scale
                    break
        config = cls.from_props(topic_props)
        return dataclasses.replace(config, overrides={})

    def validate(self) -> None:
        """Cross-field checks Kafka makes (LogConfig.validateValues)."""
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigError(
                "min.compaction.lag.ms",
                self.min_compaction_lag_ms,
                f"must not be larger than max.compaction.lag.ms {self.max_compaction_lag_ms}",
            )
        if self.segment_index_bytes < 12:
            raise InvalidConfigError("segment.index.bytes", self.segment_index_bytes, "must hold one entry")

    def to_props(self) -> dict[str, str]:
        """Every topic config as Kafka names and string values (for DescribeConfigs)."""
        out: dict[str, str] = {}
        for key, (attr, _) in _TOPIC_KEYS.items():
            value = getattr(self, attr)
            if isinstance(value, tuple):
                out[key] = ",".join(value)
            elif isinstance(value, bool):
                out[key] = "true" if value else "false"
            else:
                out[key] = str(value)
        return out

    @property
    def compact(self) -> bool:
        return COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return DELETE in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    def random_segment_jitter(self) -> int:
        """Per-segment roll jitter, as Kafka draws it: uniform below min(segment.jitter.ms, segment.ms)."""
        if self.segment_jitter_ms == 0:
            return 0
        return random.randrange(min(self.segment_jitter_ms, self.segment_ms))


TOPIC_CONFIG_NAMES: tuple[str, ...] = tuple(_TOPIC_KEYS)
