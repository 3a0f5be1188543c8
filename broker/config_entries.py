"""What DescribeConfigs (and CreateTopics v5+) reports for each config: its value, source, type, synonyms
and documentation, built from a topic's overrides over the broker's current defaults, or from the
broker's own settings; and the check of a topic's configs, with the Kafka error it answers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cache

from broker.config import BROKER_CONFIG
from broker.dynamic_config import DynamicBrokerConfig, is_dynamic, is_password
from protocol.errors import ErrorCode, KafkaError
from server_common.config import ConfigType, to_config_string
from storage.config import BROKER_SYNONYMS, TOPIC_CONFIG, LogConfig, broker_synonyms
from storage.errors import InvalidConfigError


class ConfigSource(IntEnum):
    """DescribeConfigsResponse's config source ids (Kafka's ConfigSource)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ResourceType(IntEnum):
    """ConfigResource.Type ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


# Topic config -> the broker setting that gives its default (the broker-side synonym Kafka names).
TOPIC_BROKER_SYNONYM: dict[str, str] = {topic: broker for broker, topic in BROKER_SYNONYMS.items()}

Synonym = tuple[str, str | None, ConfigSource]


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    sensitive: bool
    read_only: bool
    type: ConfigType
    doc: str | None
    synonyms: list[Synonym] = field(default_factory=list)


def is_sensitive(config_type: ConfigType) -> bool:
    """Kafka hides passwords, and anything of unknown type, which might be one."""
    return config_type in (ConfigType.PASSWORD, ConfigType.UNKNOWN)


@cache
def broker_defaults() -> dict[str, str]:
    """Every broker setting's default, as a string (Kafka's staticDefaultConfigs)."""
    return BROKER_CONFIG.default_strings()


def check_topic_configs(
    configs: Mapping[str, str], defaults: LogConfig, bad_value: ErrorCode, resource: str | None = None
) -> LogConfig:
    """The topic's LogConfig, or Kafka's error: INVALID_CONFIG for an unknown name or values that do not
    go together, ``bad_value`` for a value that does not parse or is out of range."""
    for name in configs:
        if name not in TOPIC_CONFIG.keys:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
    for name, value in configs.items():
        try:
            LogConfig.from_props({name: value})
        except InvalidConfigError as e:
            message = str(e) if resource is None else f"Invalid config value for resource {resource}: {e}"
            raise KafkaError(bad_value, message) from None
    try:
        return LogConfig.from_props(configs, defaults)
    except InvalidConfigError as e:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None


class ConfigDescriber:
    """Builds the entries DescribeConfigs (and CreateTopics v5+) report."""

    def __init__(self, dynamic: DynamicBrokerConfig) -> None:
        self.dynamic = dynamic

    def _synonyms(self, name: str, sensitive: bool) -> list[Synonym]:
        tiers = (
            (self.dynamic.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.dynamic.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.dynamic.static, ConfigSource.STATIC_BROKER_CONFIG),
            (broker_defaults(), ConfigSource.DEFAULT_CONFIG),
        )
        found = [
            (synonym, None if sensitive else values[synonym], source)
            for values, source in tiers
            for synonym in broker_synonyms(name)
            if synonym in values
        ]
        # Kafka starts the list at the setting itself (log.retention.ms's list skips log.retention.hours).
        while found and found[0][0] != name:
            found.pop(0)
        return found

    def topic_entries(self, overrides: Mapping[str, str]) -> list[ConfigEntry]:
        known = {k: v for k, v in overrides.items() if k in TOPIC_CONFIG.keys}
        values = LogConfig.from_props(known, self.dynamic.log_defaults()).to_props()
        entries = []
        for name, key in TOPIC_CONFIG.keys.items():
            sensitive = is_sensitive(key.type)
            value = None if sensitive else values[name]
            broker_name = TOPIC_BROKER_SYNONYM.get(name)
            synonyms = self._synonyms(broker_name, sensitive) if broker_name else []
            if name in known:
                synonyms.insert(0, (name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
            source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
            entries.append(ConfigEntry(name, value, source, sensitive, False, key.type, key.doc, synonyms))
        return entries

    def broker_entries(self, config_value: Callable[[str], object], per_broker: bool) -> list[ConfigEntry]:
        """Every setting of this broker (``per_broker``), or the cluster-wide dynamic defaults. A setting
        Kafka lets change at runtime is not read-only (Kafka's DynamicBrokerConfig.AllDynamicConfigs);
        dynamic settings Samsa does not define (Kafka's SSL/SASL ones, quotas) are listed as set."""
        dynamic = self.dynamic
        names: Sequence[str]
        if per_broker:
            extra = (set(dynamic.per_broker) | set(dynamic.cluster_default)) - set(BROKER_CONFIG.keys)
            names = [*BROKER_CONFIG.keys, *sorted(extra)]
        else:
            names = sorted(dynamic.cluster_default)
        entries = []
        for name in names:
            config_type = BROKER_CONFIG.type_of(name)
            defined = name in BROKER_CONFIG.keys
            sensitive = is_sensitive(config_type) if defined else is_password(name)
            synonyms = self._synonyms(name, sensitive)
            if not per_broker:
                synonyms = [s for s in synonyms if s[2] is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
            if sensitive:
                value = None
            elif name in dynamic.per_broker and per_broker:
                value = dynamic.per_broker[name]
            elif name in dynamic.cluster_default:
                value = dynamic.cluster_default[name]
            elif defined:
                value = to_config_string(config_value(name))
            else:
                value = dynamic.static.get(name)
            source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
            entries.append(
                ConfigEntry(
                    name,
                    value,
                    source,
                    sensitive,
                    not is_dynamic(name),
                    config_type,
                    BROKER_CONFIG.doc_of(name),
                    synonyms,
                )
            )
        return entries
