"""What DescribeConfigs says about a config besides its value: Kafka's config types and sources, the
topic configs' documentation, and which broker settings stand behind each topic config (synonyms)."""

from __future__ import annotations

from enum import IntEnum

from broker import config as broker_config
from storage.config import BROKER_SYNONYMS


class ConfigSource(IntEnum):
    """DescribeConfigsResponse's config source ids (Kafka's ConfigSource)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigType(IntEnum):
    """DescribeConfigsResponse's config type ids (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ResourceType(IntEnum):
    """ConfigResource.Type ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


_B, _S, _I, _L, _D, _LIST = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)

# Topic config -> (Kafka's type, what it does).
TOPIC_CONFIGS: dict[str, tuple[ConfigType, str]] = {
    "segment.bytes": (_I, "The size at which a segment file is closed and a new one started."),
    "segment.ms": (_L, "How long after its first record a segment is rolled even if it is not full."),
    "segment.jitter.ms": (_L, "A random amount up to this much is taken off segment.ms for each segment."),
    "segment.index.bytes": (_I, "The size of the offset index (and time index) preallocated per segment."),
    "index.interval.bytes": (_I, "How many bytes of records lie between two entries of the offset index."),
    "retention.ms": (_L, "How long records are kept before their segment may be deleted; -1 keeps them."),
    "retention.bytes": (_L, "The size a partition may grow to before old segments are deleted; -1: none."),
    "file.delete.delay.ms": (_L, "How long a deleted segment's files stay on disk before removal."),
    "flush.messages": (_L, "Force an fsync after this many records have been appended."),
    "flush.ms": (_L, "Force an fsync when this much time has passed since the last one."),
    "cleanup.policy": (_LIST, "delete (by retention), compact (keep the latest record per key), or both."),
    "min.cleanable.dirty.ratio": (
        _D,
        "The share of uncompacted log that makes a partition due for cleaning.",
    ),
    "min.compaction.lag.ms": (_L, "How long a record stays uncompacted at least."),
    "max.compaction.lag.ms": (_L, "How long a record may stay uncompacted at most."),
    "delete.retention.ms": (_L, "How long tombstones are kept in a compacted topic."),
    "message.timestamp.type": (_S, "CreateTime (the producer's timestamp) or LogAppendTime (the broker's)."),
    "message.timestamp.difference.max.ms": (
        _L,
        "How far a CreateTime timestamp may be from the broker's clock before the batch is rejected.",
    ),
    "max.message.bytes": (_I, "The largest record batch the topic accepts."),
    "min.insync.replicas": (_I, "How many in-sync replicas an acks=all produce needs."),
    "unclean.leader.election.enable": (_B, "Whether a replica outside the ISR may become leader."),
    "compression.type": (_S, "The codec batches are stored with; producer keeps the producer's."),
    "preallocate": (_B, "Whether segment files are preallocated on creation."),
    "message.downconversion.enable": (_B, "Whether fetches of old versions get records converted down."),
    "message.format.version": (_S, "Ignored since message format v2; kept for compatibility."),
    "leader.replication.throttled.replicas": (_LIST, "Replicas throttled on the leader side (p:b,...)."),
    "follower.replication.throttled.replicas": (_LIST, "Replicas throttled on the follower side (p:b,...)."),
}
LIST_TOPIC_CONFIGS = frozenset(name for name, (t, _) in TOPIC_CONFIGS.items() if t is ConfigType.LIST)

# Topic config -> the broker setting that gives its default (the broker-side synonym Kafka names).
TOPIC_BROKER_SYNONYM: dict[str, str] = {topic: broker for broker, topic in BROKER_SYNONYMS.items()}

# Broker settings read as one value in different units; the first one set wins (Kafka's order).
_UNIT_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def broker_synonyms(name: str) -> list[str]:
    """The broker settings that set the same thing as ``name``, in precedence order (Kafka's
    DynamicBrokerConfig.brokerConfigSynonyms)."""
    for group in _UNIT_GROUPS:
        if name in group:
            return list(group)
    return [name]


def broker_config_type(name: str) -> ConfigType:
    key = broker_config.BROKER_CONFIG.keys.get(name)
    return ConfigType.UNKNOWN if key is None else ConfigType[key.type.name]


def broker_config_doc(name: str) -> str | None:
    key = broker_config.BROKER_CONFIG.keys.get(name)
    return (key.doc or None) if key is not None else None


def is_sensitive(config_type: ConfigType) -> bool:
    """Kafka hides passwords, and anything of unknown type, which might be one."""
    return config_type in (ConfigType.PASSWORD, ConfigType.UNKNOWN)


def to_config_string(value: object) -> str | None:
    """A parsed setting as Kafka prints it (ConfigDef.convertToString)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)
