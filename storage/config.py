"""LogConfig: Kafka's topic-level log configs (names, types, defaults, validation, documentation) and the
broker-level settings that give their defaults (Kafka's LogConfig and its TopicConfigSynonyms).

The definitions use the ConfigDef machinery of ``server_common.config``; a bad topic config is an
``InvalidConfigError`` naming the key.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from server_common.config import (
    LONG_MAX,
    ConfigDef,
    ConfigKey,
    ConfigType,
    at_least,
    between,
    one_of,
    to_config_string,
)
from storage.errors import InvalidConfigError

COMPACT = "compact"
DELETE = "delete"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
PRODUCER = "producer"
# KIP-390: the levels a broker compresses with (Kafka's CompressionType min/max/default levels). gzip's
# -1 is zlib's default (6).
GZIP_LEVELS = (1, 9)
GZIP_DEFAULT_LEVEL = -1
LZ4_LEVELS = (1, 17)
LZ4_DEFAULT_LEVEL = 9
ZSTD_LEVELS = (-131072, 22)
ZSTD_DEFAULT_LEVEL = 3


def _cleanup_policy(value: list[str]) -> None:
    # Kafka 3.9 accepts an empty list: the log is neither compacted nor deleted by retention.
    if any(p.lower() not in (COMPACT, DELETE) for p in value):
        raise ValueError("must be a list of 'compact' and/or 'delete'")


def _gzip_level(value: int) -> None:
    low, high = GZIP_LEVELS
    if value != GZIP_DEFAULT_LEVEL and not low <= value <= high:
        raise ValueError(f"must be {GZIP_DEFAULT_LEVEL} or between {low} and {high}")


# Kafka's topic configs: type, validator, documentation; their defaults are LogConfig's fields (the
# attribute is the name with '.' -> '_'). Names without a storage meaning are kept so that clients
# setting them (CreateTopics, AlterConfigs) are accepted, as Kafka accepts them.
TOPIC_CONFIG = (
    ConfigDef()
    .define(
        "segment.bytes",
        ConfigType.INT,
        validator=at_least(14),
        doc="The size at which a segment file is closed and a new one started.",
    )
    .define(
        "segment.ms",
        ConfigType.LONG,
        validator=at_least(1),
        doc="How long after its first record a segment is rolled even if it is not full.",
    )
    .define(
        "segment.jitter.ms",
        ConfigType.LONG,
        validator=at_least(0),
        doc="A random amount up to this much is taken off segment.ms for each segment.",
    )
    .define(
        "segment.index.bytes",
        ConfigType.INT,
        validator=at_least(4),
        doc="The size of the offset index (and time index) preallocated per segment.",
    )
    .define(
        "index.interval.bytes",
        ConfigType.INT,
        validator=at_least(0),
        doc="How many bytes of records lie between two entries of the offset index.",
    )
    .define(
        "retention.ms",
        ConfigType.LONG,
        validator=at_least(-1),
        doc="How long records are kept before their segment may be deleted; -1 keeps them.",
    )
    .define(
        "retention.bytes",
        ConfigType.LONG,
        validator=at_least(-1),
        doc="The size a partition may grow to before old segments are deleted; -1: none.",
    )
    .define(
        "file.delete.delay.ms",
        ConfigType.LONG,
        validator=at_least(0),
        doc="How long a deleted segment's files stay on disk before removal.",
    )
    .define(
        "flush.messages",
        ConfigType.LONG,
        validator=at_least(1),
        doc="Force an fsync after this many records have been appended.",
    )
    .define(
        "flush.ms",
        ConfigType.LONG,
        validator=at_least(0),
        doc="Force an fsync when this much time has passed since the last one.",
    )
    .define(
        "cleanup.policy",
        ConfigType.LIST,
        validator=_cleanup_policy,
        doc="delete (by retention), compact (keep the latest record per key), or both.",
    )
    .define(
        "min.cleanable.dirty.ratio",
        ConfigType.DOUBLE,
        validator=between(0, 1),
        doc="The share of uncompacted log that makes a partition due for cleaning.",
    )
    .define(
        "min.compaction.lag.ms",
        ConfigType.LONG,
        validator=at_least(0),
        doc="How long a record stays uncompacted at least.",
    )
    .define(
        "max.compaction.lag.ms",
        ConfigType.LONG,
        validator=at_least(1),
        doc="How long a record may stay uncompacted at most.",
    )
    .define(
        "delete.retention.ms",
        ConfigType.LONG,
        validator=at_least(0),
        doc="How long tombstones are kept in a compacted topic.",
    )
    .define(
        "message.timestamp.type",
        ConfigType.STRING,
        validator=one_of(CREATE_TIME, LOG_APPEND_TIME),
        doc="CreateTime (the producer's timestamp) or LogAppendTime (the broker's).",
    )
    .define(
        "message.timestamp.difference.max.ms",
        ConfigType.LONG,
        validator=at_least(0),
        doc="Deprecated (KIP-937): how far a CreateTime timestamp may be from the broker's clock; used for "
        "message.timestamp.before.max.ms and message.timestamp.after.max.ms while they are left unset.",
    )
    .define(
        "message.timestamp.before.max.ms",
        ConfigType.LONG,
        validator=at_least(0),
        doc="How far before the broker's clock a CreateTime timestamp may be before its batch is refused.",
    )
    .define(
        "message.timestamp.after.max.ms",
        ConfigType.LONG,
        validator=at_least(0),
        doc="How far after the broker's clock a CreateTime timestamp may be before its batch is refused.",
    )
    .define(
        "max.message.bytes",
        ConfigType.INT,
        validator=at_least(0),
        doc="The largest record batch the topic accepts.",
    )
    .define(
        "min.insync.replicas",
        ConfigType.INT,
        validator=at_least(1),
        doc="How many in-sync replicas an acks=all produce needs.",
    )
    .define(
        "unclean.leader.election.enable",
        ConfigType.BOOLEAN,
        doc="Whether a replica outside the ISR may become leader.",
    )
    .define(
        "compression.type",
        ConfigType.STRING,
        validator=one_of(*COMPRESSION_TYPES),
        doc="The codec batches are stored with; producer keeps the producer's.",
    )
    .define(
        "compression.gzip.level",
        ConfigType.INT,
        validator=_gzip_level,
        doc="The level batches are recompressed to gzip with (compression.type gzip); -1: zlib's default.",
    )
    .define(
        "compression.lz4.level",
        ConfigType.INT,
        validator=between(*LZ4_LEVELS),
        doc="The level batches are recompressed to lz4 with (compression.type lz4).",
    )
    .define(
        "compression.zstd.level",
        ConfigType.INT,
        validator=between(*ZSTD_LEVELS),
        doc="The level batches are recompressed to zstd with (compression.type zstd).",
    )
    .define("preallocate", ConfigType.BOOLEAN, doc="Whether segment files are preallocated on creation.")
    .define(
        "message.downconversion.enable",
        ConfigType.BOOLEAN,
        doc="Whether fetches of old versions get records converted down.",
    )
    .define(
        "message.format.version",
        ConfigType.STRING,
        doc="Ignored since message format v2; kept for compatibility.",
    )
    .define(
        "leader.replication.throttled.replicas",
        ConfigType.LIST,
        doc="Replicas throttled on the leader side (p:b,...).",
    )
    .define(
        "follower.replication.throttled.replicas",
        ConfigType.LIST,
        doc="Replicas throttled on the follower side (p:b,...).",
    )
)

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
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "message.max.bytes": "max.message.bytes",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
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
# One unit of a broker time setting (log.retention.hours, ...): a long, -1 for "never".
_TIME_UNIT = ConfigKey("time", ConfigType.LONG, None, at_least(-1))


def broker_synonyms(name: str) -> list[str]:
    """The broker settings that set the same thing as ``name``, in precedence order (Kafka's
    DynamicBrokerConfig.brokerConfigSynonyms): the units of one time, or the setting alone."""
    for units in _BROKER_TIME_UNITS.values():
        group = [broker_key for broker_key, _ in units]
        if name in group:
            return group
    return [name]


def _parse_topic_config(name: str, value: Any) -> Any:
    key = TOPIC_CONFIG.keys.get(name)
    if key is None:
        raise InvalidConfigError(name, value, "unknown topic config name")
    try:
        parsed = key.parse(value)
    except ValueError as e:
        raise InvalidConfigError(name, value, str(e)) from None
    if name == "cleanup.policy":
        return tuple(sorted({p.lower() for p in parsed}))
    return tuple(parsed) if isinstance(parsed, list) else parsed


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
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    max_message_bytes: int = 1024 * 1024 + 12
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    compression_type: str = PRODUCER
    compression_gzip_level: int = GZIP_DEFAULT_LEVEL
    compression_lz4_level: int = LZ4_DEFAULT_LEVEL
    compression_zstd_level: int = ZSTD_DEFAULT_LEVEL
    preallocate: bool = False
    message_downconversion_enable: bool = True
    message_format_version: str = "3.0-IV1"
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    # Topic-level overrides this config was built with (what DescribeConfigs reports as non-default).
    overrides: Mapping[str, str] = field(default_factory=dict, compare=False)

    @classmethod
    def from_props(cls, props: Mapping[str, Any], defaults: LogConfig | None = None) -> LogConfig:
        """Applies Kafka topic-config names over `defaults`; an unknown name or bad value raises
        InvalidConfigError naming the key."""
        base = defaults if defaults is not None else cls()
        changes = {name.replace(".", "_"): _parse_topic_config(name, value) for name, value in props.items()}
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
                    try:
                        n = _TIME_UNIT.parse(props[broker_key])
                    except ValueError as e:
                        raise InvalidConfigError(broker_key, props[broker_key], str(e)) from None
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
        return {
            name: str(to_config_string(getattr(self, name.replace(".", "_")))) for name in TOPIC_CONFIG.keys
        }

    @property
    def compact(self) -> bool:
        return COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return DELETE in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def timestamp_before_max_ms(self) -> int:
        """How far before now a CreateTime timestamp may be (KIP-937). As Kafka, while
        message.timestamp.before.max.ms keeps its default (Long.MAX_VALUE) the deprecated
        message.timestamp.difference.max.ms stands for it."""
        before = self.message_timestamp_before_max_ms
        return before if before != LONG_MAX else self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        """How far after now a CreateTime timestamp may be (KIP-937), with the same fallback."""
        after = self.message_timestamp_after_max_ms
        return after if after != LONG_MAX else self.message_timestamp_difference_max_ms

    @functools.cached_property
    def timestamps_bounded(self) -> bool:
        """Whether CreateTime timestamps are held to bounds (KIP-937). Cached: every append asks."""
        bounded = self.timestamp_before_max_ms < LONG_MAX or self.timestamp_after_max_ms < LONG_MAX
        return bounded and not self.log_append_time

    @functools.cached_property
    def checks_records(self) -> bool:
        """Whether a producer's records need more than their batches checked before an append to a log
        with this config: a compression.type other than producer, compaction (keys), or bounded
        CreateTime timestamps. Cached: the produce path asks it for every partition."""
        return self.compression_type != PRODUCER or self.compact or self.timestamps_bounded

    @property
    def compression_level(self) -> int | None:
        """The KIP-390 level for the topic's compression.type, None where the codec has none (snappy,
        uncompressed, producer) or for gzip's -1 (zlib's default)."""
        codec = self.compression_type
        if codec == "gzip":
            return None if self.compression_gzip_level == GZIP_DEFAULT_LEVEL else self.compression_gzip_level
        if codec == "lz4":
            return self.compression_lz4_level
        if codec == "zstd":
            return self.compression_zstd_level
        return None

    def random_segment_jitter(self) -> int:
        """Per-segment roll jitter, as Kafka draws it: uniform below min(segment.jitter.ms, segment.ms)."""
        if self.segment_jitter_ms == 0:
            return 0
        return random.randrange(min(self.segment_jitter_ms, self.segment_ms))
