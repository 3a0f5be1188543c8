"""Kafka 3.9 parity of the broker's configuration, without processes: a Kafka ``server.properties``
starts, an empty ``cleanup.policy`` is accepted, the settings Kafka marks dynamic may change (with
Kafka's checks) and are described as writable, the finalized-features checks of UpdateFeatures, and the
authorized-operations bitfields Metadata and DescribeCluster report without an authorizer."""

from __future__ import annotations

import asyncio
import logging
import uuid
from types import SimpleNamespace

import pytest

from broker.config import KafkaConfig
from broker.config_admin import SUBTRACT, apply_incremental_ops
from broker.config_entries import ConfigDescriber, ConfigSource, check_topic_configs
from broker.dynamic_config import DynamicBrokerConfig, DynamicConfigError, with_dynamic_overrides
from broker.features import (
    SAFE_DOWNGRADE,
    UPGRADE,
    UPGRADE_UNKNOWN,
    FeatureUpdateError,
    upgrade_type,
    validate_feature_update,
)
from broker.kafka_apis import CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from controller.config import ControllerConfig
from protocol.errors import ErrorCode
from server_common import config as server_config
from server_common.config import ConfigError
from storage.config import TOPIC_CONFIG, LogConfig
from zk import znodes

# Kafka 3.9's config/server.properties (ZooKeeper mode) as distributed: its settings, as data.
KAFKA_39_SERVER_PROPERTIES = {
    "broker.id": "0",
    "num.network.threads": "3",
    "num.io.threads": "8",
    "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400",
    "socket.request.max.bytes": "104857600",
    "log.dirs": "/tmp/kafka-logs",
    "num.partitions": "1",
    "num.recovery.threads.per.data.dir": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "log.retention.hours": "168",
    "log.retention.check.interval.ms": "300000",
    "zookeeper.connect": "localhost:2181",
    "zookeeper.connection.timeout.ms": "18000",
    "group.initial.rebalance.delay.ms": "0",
}
# Settings a production server.properties commonly adds that Samsa does not implement.
KAFKA_SETTINGS_SAMSA_IGNORES = {
    "inter.broker.protocol.version": "3.9",
    "principal.builder.class": "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
    "ssl.keymanager.algorithm": "SunX509",
    "listener.name.internal.ssl.engine.factory.class": "x.Factory",
    "listener.name.sasl_ssl.scram-sha-512.sasl.login.callback.handler.class": "x.Handler",
    "metric.reporters": "",
    "num.replica.alter.log.dirs.threads": "2",
    "log.cleaner.io.buffer.size": "524288",
    "confluent.support.metrics.enable": None,  # not Kafka's: see the typo test
}


def kafka_settings() -> dict[str, str]:
    return {k: v for k, v in KAFKA_SETTINGS_SAMSA_IGNORES.items() if v is not None}


def test_kafka_39_server_properties_starts_a_broker() -> None:
    config = KafkaConfig(KAFKA_39_SERVER_PROPERTIES)
    assert config.broker_id == 0 and config["num.io.threads"] == 8
    assert config.unimplemented == []


def test_kafka_settings_samsa_does_not_implement_are_logged_once_by_name(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_config, "_logged_unimplemented", set())
    props = {**KAFKA_39_SERVER_PROPERTIES, **kafka_settings()}
    with caplog.at_level(logging.WARNING, logger="server_common.config"):
        config = KafkaConfig(props)
        KafkaConfig(props)  # a second parse (a dynamic config check) logs nothing new
    assert config.unimplemented == sorted(kafka_settings())
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == len(kafka_settings())
    for name in kafka_settings():
        assert sum(m.startswith(f"{name} is an Apache Kafka setting") for m in logged) == 1


def test_a_name_no_kafka_setting_has_still_stops_the_broker() -> None:
    with pytest.raises(ConfigError, match=r"unknown configuration setting: num\.io\.thread \("):
        KafkaConfig({**KAFKA_39_SERVER_PROPERTIES, "num.io.thread": "8"})
    with pytest.raises(ConfigError, match=r"confluent\.support\.metrics\.enable"):
        KafkaConfig({**KAFKA_39_SERVER_PROPERTIES, "confluent.support.metrics.enable": "false"})
    with pytest.raises(ConfigError, match=r"listener\.name\.internal\.ssl\.keystore\.locaton"):
        KafkaConfig({"listener.name.internal.ssl.keystore.locaton": "x"})


def test_an_invalid_value_of_a_known_setting_still_stops_the_broker() -> None:
    with pytest.raises(ConfigError, match=r"num\.io\.threads='eight' is invalid"):
        KafkaConfig({**KAFKA_39_SERVER_PROPERTIES, "num.io.threads": "eight"})
    with pytest.raises(ConfigError, match=r"log\.cleanup\.policy"):
        KafkaConfig({"log.cleanup.policy": "shred"})


def test_the_controller_accepts_kafka_broker_settings_the_same_way() -> None:
    config = ControllerConfig({**KAFKA_39_SERVER_PROPERTIES, "controller.id": "3000"})
    assert "log.dirs" in config.unimplemented and "num.partitions" in config.unimplemented
    with pytest.raises(ConfigError, match=r"num\.io\.thread"):
        ControllerConfig({"zookeeper.connect": "zk", "controller.id": "3000", "num.io.thread": "1"})


# -- cleanup.policy ---------------------------------------------------------------------------------


def test_an_empty_cleanup_policy_is_accepted_and_neither_compacts_nor_deletes() -> None:
    ops = [SimpleNamespace(name="cleanup.policy", config_operation=SUBTRACT, value="delete")]
    props = apply_incremental_ops({}, ops, TOPIC_CONFIG, LogConfig().to_props())
    assert props == {"cleanup.policy": ""}
    config = check_topic_configs(props, LogConfig(), ErrorCode.INVALID_REQUEST)
    assert config.cleanup_policy == () and not config.compact and not config.delete
    assert config.to_props()["cleanup.policy"] == ""
    assert KafkaConfig({"log.cleanup.policy": ""})["log.cleanup.policy"] == []


# -- dynamic broker configs -------------------------------------------------------------------------


def broker_config(**props: str) -> KafkaConfig:
    return KafkaConfig({"broker.id": "1", "zookeeper.connect": "zk:2181", **props})


def test_the_settings_kafka_marks_dynamic_may_change_per_broker() -> None:
    dynamic = DynamicBrokerConfig(broker_config(listeners="PLAINTEXT://:9092"))
    for props in (
        {"advertised.listeners": "PLAINTEXT://broker1.example:9092"},
        {"listeners": "PLAINTEXT://:9093"},
        {"num.io.threads": "16", "num.network.threads": "4", "background.threads": "5"},
        {"num.replica.fetchers": "2", "log.cleaner.threads": "2", "log.cleaner.backoff.ms": "1000"},
        {"max.connections": "100", "max.connections.per.ip": "10", "message.max.bytes": "2000"},
        {"listener.name.plaintext.ssl.keystore.location": "/ks.jks", "ssl.client.auth": "none"},
        {"leader.replication.throttled.rate": "1000000", "producer.id.expiration.ms": "1000"},
        {"log.cleaner.io.buffer.size": "1048576", "metric.reporters": ""},
    ):
        dynamic.validate(props, per_broker=True)


def test_the_cluster_default_takes_the_cluster_wide_dynamic_settings() -> None:
    dynamic = DynamicBrokerConfig(broker_config())
    dynamic.validate(
        {"num.io.threads": "12", "max.connections": "500", "log.retention.ms": "1"}, per_broker=False
    )
    dynamic.validate({"listener.name.plaintext.max.connections": "50"}, per_broker=False)


@pytest.mark.parametrize(
    ("props", "per_broker", "message"),
    [
        ({"broker.id": "2"}, True, "Cannot update these configs dynamically: broker.id"),
        ({"num.partitions": "2"}, True, "Cannot update these configs dynamically: num.partitions"),
        ({"log.message.format.version": "3.0"}, True, "Cannot update these configs dynamically"),
        ({"num.io.thread": "2"}, True, "(not settings of Samsa or Apache Kafka): num.io.thread"),
        ({"ssl.keystore.location": "/ks"}, True, "only per-listener using the listener prefix"),
        (
            {"advertised.listeners": "PLAINTEXT://h:1"},
            False,
            "broker id must be specified: advertised.listeners",
        ),
        ({"listener.name.plaintext.ssl.keystore.location": "/ks"}, False, "broker id must be specified"),
        (
            {"listener.name.plaintext.ssl.keystore.password": "pw"},
            True,
            "Password encoder secret not configured",
        ),
        ({"num.io.threads": "17"}, True, "should not be greater than double the current value 8"),
        ({"num.io.threads": "3"}, True, "should be at least half the current value 8"),
        ({"num.io.threads": "many"}, True, "num.io.threads='many' is invalid"),
        (
            {"advertised.listeners": "OTHER://h:1"},
            True,
            "OTHER has no entry in listener.security.protocol.map",
        ),
        ({"listeners": "SSL://:9093"}, True, "ssl.keystore.location"),
        ({"log.retention.ms": "soon"}, False, "log.retention.ms"),
    ],
)
def test_dynamic_changes_kafka_refuses_are_refused_naming_the_setting(
    props: dict[str, str], per_broker: bool, message: str
) -> None:
    dynamic = DynamicBrokerConfig(broker_config())
    with pytest.raises(DynamicConfigError) as e:
        dynamic.validate(props, per_broker)
    assert message in str(e.value)


def test_describe_reports_the_dynamic_settings_as_writable_with_their_sources() -> None:
    config = broker_config(**{"advertised.listeners": "PLAINTEXT://static:9092"})
    dynamic = DynamicBrokerConfig(config)
    dynamic.per_broker = {
        "advertised.listeners": "PLAINTEXT://dynamic:9092",
        "listener.name.plaintext.ssl.keystore.location": "/ks",
    }
    dynamic.cluster_default = {"num.io.threads": "12"}
    entries = {
        e.name: e for e in ConfigDescriber(dynamic).broker_entries(lambda n: config[n], per_broker=True)
    }
    advertised = entries["advertised.listeners"]
    assert (advertised.value, advertised.source, advertised.read_only) == (
        "PLAINTEXT://dynamic:9092",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        False,
    )
    assert advertised.synonyms == [
        ("advertised.listeners", "PLAINTEXT://dynamic:9092", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("advertised.listeners", "PLAINTEXT://static:9092", ConfigSource.STATIC_BROKER_CONFIG),
    ]
    threads = entries["num.io.threads"]
    assert (threads.value, threads.source, threads.read_only) == (
        "12",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        False,
    )
    for name in (
        "listeners",
        "num.network.threads",
        "log.cleaner.threads",
        "max.connections",
        "message.max.bytes",
    ):
        assert not entries[name].read_only, name
    for name in ("broker.id", "zookeeper.connect", "log.dirs", "num.partitions"):
        assert entries[name].read_only, name
    keystore = entries["listener.name.plaintext.ssl.keystore.location"]
    assert (keystore.value, keystore.source, keystore.read_only) == (
        "/ks",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        False,
    )


class FakeZk:
    def __init__(self, nodes: dict[str, bytes]) -> None:
        self.nodes = nodes

    async def get(self, path: str) -> tuple[bytes, None] | None:
        data = self.nodes.get(path)
        return None if data is None else (data, None)


def test_the_dynamic_settings_in_zookeeper_apply_when_the_broker_starts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = broker_config(**{"num.io.threads": "4", "log.retention.hours": "1"})
    zk = FakeZk(
        {
            "/config/brokers/<default>": znodes.encode_config(
                {"num.io.threads": "6", "max.connections": "9"}
            ),
            "/config/brokers/1": znodes.encode_config(
                {"num.io.threads": "7", "broker.id": "5", "num.network.threads": "zero"}
            ),
        }
    )
    with caplog.at_level(logging.ERROR, logger="broker.dynamic_config"):
        started = asyncio.run(with_dynamic_overrides(zk, config))  # type: ignore[arg-type]
    assert (started["num.io.threads"], started["max.connections"], started.broker_id) == (7, 9, 1)
    assert started["num.network.threads"] == 3  # the invalid stored value is ignored
    assert started.originals == config.originals  # the sources stay told apart
    errors = " ".join(r.getMessage() for r in caplog.records)
    assert "broker.id" in errors and "num.network.threads" in errors
    assert asyncio.run(with_dynamic_overrides(FakeZk({}), config)) is config  # type: ignore[arg-type]


# -- finalized features -----------------------------------------------------------------------------


def test_the_feature_znode_is_kafkas() -> None:
    assert znodes.encode_feature_znode({}) == b'{"features":{},"version":2,"status":1}'
    assert znodes.decode_feature_znode(
        b'{"features":{"x":{"max_version_level":2}},"version":2,"status":1}'
    ) == (
        1,
        {"x": 2},
    )
    v1 = b'{"features":{"x":{"min_version_level":1,"max_version_level":3}},"version":1,"status":0}'
    assert znodes.decode_feature_znode(v1) == (0, {"x": 3})
    for bad in (b"{}", b'{"version":3,"status":1,"features":{}}', b'{"version":2,"status":7,"features":{}}'):
        with pytest.raises(ValueError):
            znodes.decode_feature_znode(bad)


@pytest.mark.parametrize(
    ("feature", "level", "kind", "existing", "supported", "outcome"),
    [
        ("metadata.version", 21, UPGRADE, None, {}, "the provided feature is not supported"),
        ("", 1, UPGRADE, None, {}, "Feature name can not be empty."),
        ("f", 1, UPGRADE_UNKNOWN, None, {}, "Received unknown upgrade type."),
        ("f", 0, SAFE_DOWNGRADE, None, {}, "Can not delete non-existing finalized feature."),
        ("f", 0, SAFE_DOWNGRADE, 2, {}, None),
        ("f", 0, UPGRADE, 2, {}, "less than 1 without setting the SAFE downgradeType"),
        ("f", 2, UPGRADE, 2, {"f": (1, 3)}, "from existing versionLevel:2 to the same value."),
        ("f", 1, UPGRADE, 2, {"f": (1, 3)}, "without setting the downgradeType to SAFE"),
        ("f", 3, SAFE_DOWNGRADE, 2, {"f": (1, 3)}, "can not be greater than existing versionLevel:2"),
        ("f", 3, UPGRADE, 2, {"f": (1, 3)}, 3),
        ("f", 1, SAFE_DOWNGRADE, 2, {"f": (1, 3)}, 1),
        ("f", 4, UPGRADE, None, {"f": (2, 3)}, "higher than the supported maxVersion:3"),
    ],
)
def test_feature_updates_are_checked_as_kafkas_controller_checks_them(
    feature: str,
    level: int,
    kind: int,
    existing: int | None,
    supported: dict[str, tuple[int, int]],
    outcome: object,
) -> None:
    if isinstance(outcome, str):
        with pytest.raises(FeatureUpdateError) as e:
            validate_feature_update(feature, level, kind, existing, supported)
        assert e.value.code == ErrorCode.INVALID_REQUEST and outcome in e.value.message
    else:
        assert validate_feature_update(feature, level, kind, existing, supported) == outcome


def test_update_features_v0_reads_allow_downgrade_as_a_safe_downgrade() -> None:
    assert upgrade_type(SimpleNamespace(allow_downgrade=True), 0) == SAFE_DOWNGRADE  # type: ignore[arg-type]
    assert upgrade_type(SimpleNamespace(allow_downgrade=False), 0) == UPGRADE  # type: ignore[arg-type]
    assert upgrade_type(SimpleNamespace(upgrade_type=9), 1) == UPGRADE_UNKNOWN  # type: ignore[arg-type]


# -- authorized operations ----------------------------------------------------------------------------


def test_without_an_authorizer_every_operation_valid_for_the_resource_is_authorized() -> None:
    # AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
    # DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12 (AclEntry.supportedOperations).
    assert TOPIC_OPERATIONS == sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11)) == 3576
    assert CLUSTER_OPERATIONS == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12)) == 8096


def metadata_apis() -> object:
    from broker.metadata_cache import MetadataCache
    from tests.broker.controller_requests import update_metadata

    cache = MetadataCache("cluster")
    # Broker 3 is down: replica of partition 0, leader of partition 1.
    request = update_metadata({1: ("h1", 9092), 2: ("h2", 9092)}, "t", {0: [1, 2, 3], 1: [3, 1]})
    cache.update(request, 7)
    from broker.kafka_apis import KafkaApis

    return KafkaApis(1, cache, SimpleNamespace())  # type: ignore[arg-type]


def metadata(apis: object, version: int, listener: str = "PLAINTEXT", **fields: object) -> object:
    from protocol.api import ApiKey, api
    from protocol.messages import MetadataRequest

    body = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="t")], allow_auto_topic_creation=False, **fields
    )
    request = SimpleNamespace(
        version=version, body=body, listener=listener, api=api(ApiKey.METADATA), peer="p", client_id="c"
    )
    return asyncio.run(apis.handle_metadata(request))  # type: ignore[attr-defined]


def test_metadata_partitions_as_kafkas_metadata_cache_reports_them() -> None:
    apis = metadata_apis()
    v0 = metadata(apis, 0).topics[0].partitions  # type: ignore[attr-defined]
    assert [(p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes) for p in v0] == [
        (ErrorCode.REPLICA_NOT_AVAILABLE, 1, [1, 2], [1, 2]),
        (ErrorCode.LEADER_NOT_AVAILABLE, -1, [1], [1]),
    ]
    v12 = metadata(apis, 12).topics[0].partitions  # type: ignore[attr-defined]
    assert [(p.error_code, p.leader_id, p.replica_nodes) for p in v12] == [
        (ErrorCode.NONE, 1, [1, 2, 3]),
        (ErrorCode.LEADER_NOT_AVAILABLE, -1, [3, 1]),
    ]
    other = metadata(apis, 12, listener="INTERNAL").topics[0].partitions  # type: ignore[attr-defined]
    assert [(p.error_code, p.leader_id) for p in other] == [
        (ErrorCode.LISTENER_NOT_FOUND, -1),
        (ErrorCode.LEADER_NOT_AVAILABLE, -1),
    ]
    old = metadata(apis, 5, listener="INTERNAL").topics[0].partitions  # type: ignore[attr-defined]
    assert old[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE


def test_metadata_reports_authorized_operations_only_when_asked() -> None:
    apis = metadata_apis()
    asked = {"include_cluster_authorized_operations": True, "include_topic_authorized_operations": True}
    for version, cluster in ((8, 8096), (10, 8096), (11, -(2**31)), (12, -(2**31))):
        response = metadata(apis, version, **asked)
        assert (response.cluster_authorized_operations, response.topics[0].topic_authorized_operations) == (  # type: ignore[attr-defined]
            cluster,
            3576,
        )
    plain = metadata(apis, 12)
    assert plain.topics[0].topic_authorized_operations == -(2**31)  # type: ignore[attr-defined]
    from protocol.api import ApiKey, api
    from protocol.messages import MetadataRequest

    # Topic ids before v12: INVALID_REQUEST for every topic named, as Kafka's getErrorResponse.
    body = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="t", topic_id=uuid.uuid4())],
        allow_auto_topic_creation=False,
    )
    request = SimpleNamespace(
        version=11, body=body, listener="PLAINTEXT", api=api(ApiKey.METADATA), peer="p", client_id="c"
    )
    refused = asyncio.run(apis.handle_metadata(request))  # type: ignore[attr-defined]
    assert [(t.name, t.error_code) for t in refused.topics] == [("t", ErrorCode.INVALID_REQUEST)]


# -- BROKER_LOGGER --------------------------------------------------------------------------------


def test_broker_loggers_are_described_and_changed_as_kafka_does(monkeypatch: pytest.MonkeyPatch) -> None:
    from broker import logger_configs as lc
    from protocol.errors import KafkaError

    logger = logging.getLogger("samsa.test.parity")
    monkeypatch.setattr(logger, "level", logging.NOTSET)
    levels = lc.logger_levels()
    assert next(iter(levels)) == "root" and "samsa.test.parity" in levels
    entry = next(e for e in lc.logger_entries() if e.name == "samsa.test.parity")
    assert (entry.source, entry.read_only, entry.sensitive) == (
        ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
        False,
        False,
    )

    def op(name: str, kind: int, value: str | None = None) -> SimpleNamespace:
        return SimpleNamespace(name=name, config_operation=kind, value=value)

    lc.alter_loggers([op("samsa.test.parity", lc.SET, "TRACE")], validate_only=True)  # type: ignore[list-item]
    assert logger.level == logging.NOTSET
    lc.alter_loggers([op("samsa.test.parity", lc.SET, "WARN")], validate_only=False)  # type: ignore[list-item]
    assert logger.level == logging.WARNING and lc.logger_levels()["samsa.test.parity"] == "WARN"
    lc.alter_loggers([op("samsa.test.parity", lc.DELETE)], validate_only=False)  # type: ignore[list-item]
    assert logger.level == logging.NOTSET
    for bad, code, message in (
        (
            op("no.such.logger", lc.SET, "INFO"),
            ErrorCode.INVALID_CONFIG,
            "Logger no.such.logger does not exist!",
        ),
        (op("root", lc.SET, "WARNING"), ErrorCode.INVALID_CONFIG, "Valid log levels are DEBUG, ERROR, FATAL"),
        (op("root", lc.DELETE), ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger"),
        (op("root", lc.APPEND, "x"), ErrorCode.INVALID_REQUEST, "APPEND operation is not allowed"),
    ):
        with pytest.raises(KafkaError) as e:
            lc.alter_loggers([bad], validate_only=False)  # type: ignore[list-item]
        assert e.value.code == code and message in e.value.message
    with pytest.raises(KafkaError, match="Broker id must not be empty"):
        lc.check_node_id("", 1, describe=True)
    with pytest.raises(KafkaError, match=r"Unexpected node id\. Expected 1, but received 2"):
        lc.check_node_id("2", 1, describe=False)
