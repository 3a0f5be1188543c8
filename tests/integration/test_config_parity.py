"""Kafka 3.9 parity of configuration on a real broker, with real clients: a broker started with Kafka 3.9's
``server.properties`` plus Kafka settings Samsa does not implement starts and names each once; a typo
still stops it; confluent-kafka's AdminClient changes the settings Kafka marks dynamic, per broker and at
the cluster default, which land in ZooKeeper as Kafka writes them (test_dynamic_broker_configs shows them
applied); an empty ``cleanup.policy``; the authorized operations Metadata and DescribeCluster report
without an authorizer; and the oldest versions of CreateTopics, DeleteTopics and DescribeConfigs Kafka
3.9 serves."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterConfigsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
)
from tests.broker.test_config_parity import KAFKA_39_SERVER_PROPERTIES, kafka_settings
from tests.support.cluster import ROOT, Cluster, chroot
from tests.support.raw_client import RawClient
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

BROKER, TOPIC = 4, 2
NODE_KEYS = {"broker.id", "log.dirs", "zookeeper.connect"}


@pytest.fixture(scope="module")
def kafka_configured(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer
) -> Iterator[Cluster]:
    """A controller and one broker whose settings are Kafka 3.9's server.properties (but the node's own
    id, dirs and ZooKeeper) and Kafka settings Samsa does not implement."""
    overrides = {
        **{k: v for k, v in KAFKA_39_SERVER_PROPERTIES.items() if k not in NODE_KEYS},
        **kafka_settings(),
    }
    workdir = tmp_path_factory.mktemp("config-parity")
    with Cluster(workdir, chroot(zookeeper_server), brokers=1, broker_overrides=overrides) as running:
        yield running


def alter_cluster_default(raw: RawClient, configs: dict[str, str]) -> Any:
    body = IncrementalAlterConfigsRequest(
        resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=BROKER,
                resource_name="",
                configs=[
                    IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=0, value=v)
                    for k, v in configs.items()
                ],
            )
        ],
        validate_only=False,
    )
    return raw.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body).responses[0]  # type: ignore[attr-defined]


def admin(cluster: Cluster):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def test_a_kafka_server_properties_starts_the_broker_naming_what_it_ignores(
    kafka_configured: Cluster,
) -> None:
    broker = kafka_configured.broker(1)
    text = broker.log()
    for name in kafka_settings():
        assert text.count(f"WARNING {name} is an Apache Kafka setting") == 1, name
    metadata = admin(kafka_configured).list_topics(timeout=10)
    assert list(metadata.brokers) == [1]


def test_a_setting_no_kafka_has_stops_the_broker_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(
        "\n".join(f"{k}={v}" for k, v in {**KAFKA_39_SERVER_PROPERTIES, "num.io.thread": "8"}.items())
    )
    done = subprocess.run(
        [sys.executable, "-m", "tools", "broker", "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "unknown configuration setting: num.io.thread" in done.stderr


def test_dynamic_broker_configs_per_broker_and_at_the_cluster_default(kafka_configured: Cluster) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

    client = admin(kafka_configured)
    per_broker = ConfigResource(
        ConfigResource.Type.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry("num.io.threads", "12", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "advertised.listeners",
                kafka_configured.broker(1).config()["listeners"],
                incremental_operation=AlterConfigOpType.SET,
            ),
            ConfigEntry(
                "listener.name.plaintext.ssl.keystore.type",
                "PKCS12",
                incremental_operation=AlterConfigOpType.SET,
            ),
        ],
    )
    for future in client.incremental_alter_configs([per_broker]).values():
        future.result(timeout=10)
    # librdkafka and kafka-python refuse the empty resource name of the cluster default (the Java
    # client sends it): the request as the Java client sends it.
    raw = RawClient(kafka_configured.bootstrap)
    try:
        done = alter_cluster_default(raw, {"log.cleaner.threads": "2", "max.connections": "1000"})
        assert (done.error_code, done.resource_name) == (ErrorCode.NONE, "")
        refused = alter_cluster_default(raw, {"advertised.listeners": "PLAINTEXT://x:1"})
        assert refused.error_code == ErrorCode.INVALID_REQUEST
        assert "broker id must be specified: advertised.listeners" in refused.error_message
    finally:
        raw.close()

    zk = kafka_configured.zk()
    assert json.loads(zk.get("/config/brokers/1")[0]) == {
        "version": 1,
        "config": {
            "num.io.threads": "12",
            "advertised.listeners": kafka_configured.broker(1).config()["listeners"],
            "listener.name.plaintext.ssl.keystore.type": "PKCS12",
        },
    }
    assert json.loads(zk.get("/config/brokers/<default>")[0])["config"] == {
        "log.cleaner.threads": "2",
        "max.connections": "1000",
    }
    changes = sorted(zk.get_children("/config/changes"))
    entities = [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in changes]
    assert {"version": 2, "entity_path": "brokers/1"} in entities
    assert {"version": 2, "entity_path": "brokers/<default>"} in entities

    described = client.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")])
    configs = next(iter(described.values())).result(timeout=10)
    threads = configs["num.io.threads"]
    assert (threads.value, threads.source, threads.is_read_only) == (
        "12",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        False,
    )
    cleaner = configs["log.cleaner.threads"]
    assert (cleaner.value, cleaner.source) == ("2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert not configs["advertised.listeners"].is_read_only
    assert configs["broker.id"].is_read_only
    broker = kafka_configured.broker(1)
    assert "num.io.threads (/config/brokers/1) = 12: applied now" in broker.log()

    # At the next start the broker reads them from ZooKeeper before it builds anything.
    broker.restart()
    assert (
        "dynamic broker configs from ZooKeeper: advertised.listeners, "
        "listener.name.plaintext.ssl.keystore.type, log.cleaner.threads, max.connections, num.io.threads"
    ) in broker.log(since_start=True)
    configs = next(
        iter(client.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")]).values())
    ).result(timeout=10)
    assert (configs["num.io.threads"].value, configs["num.io.threads"].source) == (
        "12",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )


def test_incremental_alter_configs_may_leave_cleanup_policy_empty(kafka_configured: Cluster) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    kafka_configured.create_topic("policy-less")
    client = admin(kafka_configured)
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "policy-less",
        incremental_configs=[
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)
        ],
    )
    next(iter(client.incremental_alter_configs([resource]).values())).result(timeout=10)
    assert json.loads(kafka_configured.zk().get("/config/topics/policy-less")[0])["config"] == {
        "cleanup.policy": ""
    }
    configs = next(
        iter(client.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "policy-less")]).values())
    ).result(timeout=10)
    assert configs["cleanup.policy"].value == ""


def test_authorized_operations_without_an_authorizer(kafka_configured: Cluster) -> None:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation

    kafka_configured.create_topic("described-ops")
    client = admin(kafka_configured)
    cluster = client.describe_cluster(include_authorized_operations=True).result(timeout=10)
    assert set(cluster.authorized_operations) == {
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    }
    topics = client.describe_topics(TopicCollection(["described-ops"]), include_authorized_operations=True)
    topic = topics["described-ops"].result(timeout=10)
    assert set(topic.authorized_operations) == {
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    }
    raw = RawClient(kafka_configured.bootstrap)
    try:
        asked = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="described-ops")],
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=True,
            include_topic_authorized_operations=True,
        )
        for version in (8, 10, 11, 12):
            response = raw.request(ApiKey.METADATA, version, asked)
            assert response.topics[0].topic_authorized_operations == 3576
            assert response.cluster_authorized_operations == (8096 if version <= 10 else -(2**31))
        plain = raw.request(
            ApiKey.METADATA, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False)
        )
        assert plain.cluster_authorized_operations == -(2**31)
        assert {t.topic_authorized_operations for t in plain.topics} == {-(2**31)}
        # v12 names topics by id: unknown ids are UNKNOWN_TOPIC_ID.
        known = raw.request(ApiKey.METADATA, 12, asked).topics[0].topic_id
        by_id = raw.request(
            ApiKey.METADATA,
            12,
            MetadataRequest(
                topics=[
                    MetadataRequest.MetadataRequestTopic(topic_id=known),
                    MetadataRequest.MetadataRequestTopic(topic_id=uuid.uuid4()),
                ],
                allow_auto_topic_creation=False,
            ),
        )
        assert [(t.name, t.error_code) for t in by_id.topics] == [
            ("described-ops", 0),
            (None, ErrorCode.UNKNOWN_TOPIC_ID),
        ]
        for version in (0, 1):
            described = raw.request(
                ApiKey.DESCRIBE_CLUSTER,
                version,
                DescribeClusterRequest(include_cluster_authorized_operations=True),
            )
            assert (described.error_code, described.cluster_authorized_operations) == (0, 8096)
            assert [b.broker_id for b in described.brokers] == [1]
        wrong = raw.request(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(endpoint_type=2))
        assert wrong.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
    finally:
        raw.close()


def test_the_oldest_versions_kafka_39_serves(kafka_configured: Cluster) -> None:
    raw = RawClient(kafka_configured.bootstrap)
    try:
        for version in (0, 1):
            name = f"old-create-v{version}"
            created = raw.request(
                ApiKey.CREATE_TOPICS,
                version,
                CreateTopicsRequest(
                    topics=[
                        CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
                    ],
                    timeout_ms=20000,
                ),
            )
            assert [(t.name, t.error_code) for t in created.topics] == [(name, 0)]
        described = raw.request(
            ApiKey.DESCRIBE_CONFIGS,
            0,
            DescribeConfigsRequest(
                resources=[
                    DescribeConfigsRequest.DescribeConfigsResource(
                        resource_type=TOPIC,
                        resource_name="old-create-v0",
                        configuration_keys=["retention.ms", "segment.bytes"],
                    )
                ]
            ),
        )
        result = described.results[0]
        assert result.error_code == 0
        assert {(c.name, c.value, c.is_default) for c in result.configs} == {
            ("retention.ms", "604800000", True),
            ("segment.bytes", "1073741824", True),
        }
        deleted = raw.request(
            ApiKey.DELETE_TOPICS,
            0,
            DeleteTopicsRequest(topic_names=["old-create-v0", "old-create-v1"], timeout_ms=20000),
        )
        assert sorted((r.name, r.error_code) for r in deleted.responses) == [
            ("old-create-v0", 0),
            ("old-create-v1", 0),
        ]
    finally:
        raw.close()


def test_admin_refusals_kafka_39_makes(kafka_configured: Cluster) -> None:
    raw = RawClient(kafka_configured.bootstrap)
    try:
        metadata_log = CreateTopicsRequest(
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name="__cluster_metadata", num_partitions=1, replication_factor=1
                )
            ],
            timeout_ms=5000,
        )
        result = raw.request(ApiKey.CREATE_TOPICS, 7, metadata_log).topics[0]  # type: ignore[attr-defined]
        assert (result.error_code, result.error_message) == (
            ErrorCode.INVALID_REQUEST,
            "Creation of internal topic __cluster_metadata is prohibited.",
        )
        default_topic = IncrementalAlterConfigsRequest(
            resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(
                    resource_type=TOPIC,
                    resource_name="",
                    configs=[
                        IncrementalAlterConfigsRequest.AlterableConfig(
                            name="retention.ms", config_operation=0, value="1"
                        )
                    ],
                )
            ],
            validate_only=False,
        )
        refused = raw.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, default_topic).responses[0]  # type: ignore[attr-defined]
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.INVALID_REQUEST,
            "Default topic resources are not allowed.",
        )
        unnamed = AlterConfigsRequest(
            resources=[
                AlterConfigsRequest.AlterConfigsResource(
                    resource_type=TOPIC,
                    resource_name="",
                    configs=[AlterConfigsRequest.AlterableConfig(name="retention.ms", value="1")],
                )
            ],
            validate_only=False,
        )
        refused = raw.request(ApiKey.ALTER_CONFIGS, 2, unnamed).responses[0]  # type: ignore[attr-defined]
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.INVALID_REQUEST,
            "Default topic resources are not allowed.",
        )
    finally:
        raw.close()


def test_broker_loggers_with_kafka_python(kafka_configured: Cluster) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    python_admin = KafkaAdminClient(bootstrap_servers=kafka_configured.bootstrap)
    try:
        resource = ConfigResource(ConfigResourceType.BROKER_LOGGER, "1", {"broker.server": ("SET", "DEBUG")})
        python_admin.alter_configs([resource], incremental=True)
        described = python_admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER_LOGGER, "1")], config_filter="all"
        )
        entries = {name: config["value"] for name, config in described["broker_logger"]["1"].items()}
        assert entries["broker.server"] == "DEBUG" and entries["root"] in ("INFO", "DEBUG", "WARN")
        unset = ConfigResource(ConfigResourceType.BROKER_LOGGER, "1", {"broker.server": ("DELETE", None)})
        python_admin.alter_configs([unset], incremental=True)
    finally:
        python_admin.close()
    assert "Updated the log level of broker.server to DEBUG" in kafka_configured.broker(1).log()
