"""Config checks and descriptions without processes: topic configs through storage's LogConfig, dynamic
broker configs, IncrementalAlterConfigs' operations, and the sources and synonyms DescribeConfigs
reports for each way a value can be set."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from broker.config import KafkaConfig
from broker.config_admin import APPEND, DELETE, SET, SUBTRACT, apply_incremental_ops
from broker.config_entries import ConfigDescriber, ConfigEntry, ConfigSource, check_topic_configs
from broker.dynamic_config import RECONFIGURABLE, DynamicBrokerConfig, DynamicConfigError
from protocol.errors import ErrorCode, KafkaError
from server_common.config import ConfigType
from storage.config import TOPIC_CONFIG, LogConfig


def broker_config(**props: str) -> KafkaConfig:
    return KafkaConfig({"broker.id": "1", "zookeeper.connect": "zk:2181", **props})


def test_every_topic_config_is_a_log_config_field() -> None:
    fields = {f.name for f in dataclasses.fields(LogConfig)} - {"overrides"}
    assert fields == {name.replace(".", "_") for name in TOPIC_CONFIG.keys}
    assert {name for name, key in TOPIC_CONFIG.keys.items() if key.type is ConfigType.LIST} == {
        "cleanup.policy",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    }


def test_topic_configs_parse_over_the_defaults() -> None:
    config = check_topic_configs(
        {"retention.ms": "1000", "cleanup.policy": "compact"}, LogConfig(), ErrorCode.INVALID_CONFIG
    )
    assert config.retention_ms == 1000 and config.compact


@pytest.mark.parametrize(
    ("configs", "code", "key"),
    [
        ({"no.such.config": "1"}, ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such.config"),
        ({"retention.ms": "soon"}, ErrorCode.INVALID_REQUEST, "retention.ms"),
        ({"cleanup.policy": "shred"}, ErrorCode.INVALID_REQUEST, "cleanup.policy"),
        ({"min.insync.replicas": "0"}, ErrorCode.INVALID_REQUEST, "min.insync.replicas"),
        # Each value is fine alone; together they contradict each other.
        (
            {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
            ErrorCode.INVALID_CONFIG,
            "min.compaction.lag.ms",
        ),
    ],
)
def test_topic_config_errors_name_the_key(configs: dict[str, str], code: ErrorCode, key: str) -> None:
    with pytest.raises(KafkaError) as e:
        check_topic_configs(
            configs, LogConfig(), ErrorCode.INVALID_REQUEST, "ConfigResource(type=TOPIC, name='t')"
        )
    assert e.value.code == code and key in e.value.message


def test_dynamic_broker_configs_layer_over_server_properties() -> None:
    dynamic = DynamicBrokerConfig(broker_config(**{"log.retention.hours": "1", "log.segment.bytes": "5000"}))
    assert dynamic.log_defaults().retention_ms == 3_600_000
    dynamic.cluster_default = {"log.retention.ms": "2000", "log.segment.bytes": "6000"}
    assert dynamic.log_defaults().retention_ms == 2000  # ms beats hours, dynamic beats static
    dynamic.per_broker = {"log.segment.bytes": "7000"}
    assert dynamic.log_defaults().segment_bytes == 7000


def test_only_the_log_defaults_change_at_runtime() -> None:
    dynamic = DynamicBrokerConfig(broker_config())
    dynamic.validate({"log.retention.ms": "1000", "message.max.bytes": "2000"}, per_broker=True)
    assert {"log.retention.hours", "log.roll.jitter.hours", "min.insync.replicas"} <= RECONFIGURABLE
    assert "log.message.format.version" not in RECONFIGURABLE
    with pytest.raises(DynamicConfigError, match=r"Cannot update these configs dynamically: num\.partitions"):
        dynamic.validate({"num.partitions": "4"}, per_broker=True)
    with pytest.raises(DynamicConfigError, match=r"log.retention.ms"):
        dynamic.validate({"log.retention.ms": "often"}, per_broker=False)
    with pytest.raises(DynamicConfigError, match=r"min.insync.replicas"):
        dynamic.validate({"min.insync.replicas": "0"}, per_broker=False)


def op(name: str, operation: int, value: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(name=name, config_operation=operation, value=value)


def incremental(current: dict[str, str], *ops: SimpleNamespace) -> dict[str, str]:
    return apply_incremental_ops(current, ops, TOPIC_CONFIG, LogConfig().to_props())


def test_incremental_operations() -> None:
    current = {"retention.ms": "1", "segment.ms": "2"}
    assert incremental(current, op("retention.ms", SET, "5"), op("segment.ms", DELETE)) == {
        "retention.ms": "5"
    }
    # A list not set yet starts from its default (cleanup.policy: delete); APPEND skips what is there.
    assert incremental({}, op("cleanup.policy", APPEND, "compact,delete")) == {
        "cleanup.policy": "delete,compact"
    }
    assert incremental({"cleanup.policy": "compact,delete"}, op("cleanup.policy", SUBTRACT, "delete")) == {
        "cleanup.policy": "compact"
    }
    assert incremental({}, op("leader.replication.throttled.replicas", APPEND, "0:1")) == {
        "leader.replication.throttled.replicas": "0:1"
    }


@pytest.mark.parametrize(
    ("operation", "code", "message"),
    [
        (op("retention.ms", APPEND, "1"), ErrorCode.INVALID_CONFIG, "append is not allowed for config key"),
        (op("retention.ms", SUBTRACT, "1"), ErrorCode.INVALID_CONFIG, "subtract is not allowed"),
        (op("no.such", APPEND, "1"), ErrorCode.INVALID_CONFIG, "Unknown config name: no.such"),
    ],
)
def test_incremental_operation_errors(operation: SimpleNamespace, code: int, message: str) -> None:
    with pytest.raises(KafkaError) as e:
        incremental({}, operation)
    assert e.value.code == code and message in e.value.message


def entry(entries: list[ConfigEntry], name: str) -> ConfigEntry:
    return next(e for e in entries if e.name == name)


def test_topic_config_sources_and_synonyms() -> None:
    dynamic = DynamicBrokerConfig(broker_config(**{"log.segment.bytes": "5000"}))
    dynamic.cluster_default = {"message.max.bytes": "3000"}
    dynamic.per_broker = {"log.cleanup.policy": "compact"}
    entries = ConfigDescriber(dynamic).topic_entries({"retention.ms": "1000", "segment.bytes": "6000"})
    assert {e.name for e in entries} == set(TOPIC_CONFIG.keys)

    segment = entry(entries, "segment.bytes")
    assert (segment.value, segment.source, segment.type) == (
        "6000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        ConfigType.INT,
    )
    assert segment.synonyms == [
        ("segment.bytes", "6000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.segment.bytes", "5000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
    ]
    size = entry(entries, "max.message.bytes")
    assert (size.value, size.source) == ("3000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    policy = entry(entries, "cleanup.policy")
    assert (policy.value, policy.source, policy.type) == (
        "compact",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigType.LIST,
    )
    timestamps = entry(entries, "message.timestamp.type")
    assert (timestamps.source, timestamps.synonyms[0][2]) == (
        ConfigSource.DEFAULT_CONFIG,
        ConfigSource.DEFAULT_CONFIG,
    )
    throttled = entry(entries, "leader.replication.throttled.replicas")
    assert (throttled.source, throttled.synonyms) == (ConfigSource.DEFAULT_CONFIG, [])
    assert all(not e.read_only and not e.sensitive and e.doc for e in entries)


def test_a_time_set_in_other_units_is_listed_from_the_setting_itself() -> None:
    # Kafka lists a setting's synonyms starting at the setting itself: retention.ms's broker synonym is
    # log.retention.ms, so a log.retention.hours before it in the list is left out.
    dynamic = DynamicBrokerConfig(broker_config(**{"log.retention.hours": "2"}))
    retention = entry(ConfigDescriber(dynamic).topic_entries({}), "retention.ms")
    assert (retention.value, retention.source, retention.synonyms) == (
        "7200000",
        ConfigSource.DEFAULT_CONFIG,
        [],
    )
    dynamic.per_broker = {"log.retention.ms": "1000"}
    retention = entry(ConfigDescriber(dynamic).topic_entries({}), "retention.ms")
    assert retention.synonyms == [
        ("log.retention.ms", "1000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.hours", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]


def test_broker_entries() -> None:
    config = broker_config(
        **{"log.retention.hours": "2", "listener.name.sasl_plaintext.plain.sasl.jaas.config": "x"}
    )
    dynamic = DynamicBrokerConfig(config)
    dynamic.cluster_default = {"log.retention.ms": "5000"}
    describer = ConfigDescriber(dynamic)
    entries = describer.broker_entries(lambda name: config[name], per_broker=True)

    hours = entry(entries, "log.retention.hours")
    assert (hours.value, hours.source, hours.read_only, hours.type) == (
        "2",
        ConfigSource.STATIC_BROKER_CONFIG,
        False,
        ConfigType.INT,
    )
    assert hours.synonyms == [
        ("log.retention.hours", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    millis = entry(entries, "log.retention.ms")
    assert (millis.value, millis.source) == ("5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    broker_id = entry(entries, "broker.id")
    assert (broker_id.value, broker_id.source, broker_id.read_only) == (
        "1",
        ConfigSource.STATIC_BROKER_CONFIG,
        True,
    )
    threads = entry(entries, "num.io.threads")
    assert (threads.value, threads.source) == ("8", ConfigSource.DEFAULT_CONFIG)
    secret = entry(entries, "listener.name.sasl_plaintext.plain.sasl.jaas.config")
    assert (secret.value, secret.sensitive, secret.type) == (None, True, ConfigType.PASSWORD)
    assert all(s[1] is None for s in secret.synonyms)

    defaults = describer.broker_entries(lambda name: config[name], per_broker=False)
    assert [(e.name, e.value, e.source) for e in defaults] == [
        ("log.retention.ms", "5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    ]
