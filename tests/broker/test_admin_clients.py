"""Each Python client's admin API against a real cluster (ZooKeeper, a controller, three brokers):
create, describe, alter and delete topics, add partitions, delete records, and an idempotent producer
(InitProducerId) whose records are read back."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator

import pytest

from tests.support.admin_cluster import AdminCluster, admin_cluster
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

RECORDS = 10
TRIMMED_TO = 4


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer
) -> Iterator[AdminCluster]:
    with admin_cluster(tmp_path_factory.mktemp("admin-clients"), zookeeper_server) as started:
        yield started


def replicas_in_zk(cluster: AdminCluster, topic: str) -> dict[int, list[int]]:
    found = cluster.znode(f"/brokers/topics/{topic}")
    return {} if found is None else {int(p): r for p, r in found["partitions"].items()}


def topic_config_in_zk(cluster: AdminCluster, topic: str) -> dict[str, str] | None:
    found = cluster.znode(f"/config/topics/{topic}")
    return None if found is None else found["config"]


async def eventually(
    check: Callable[[set[str]], bool], list_topics: Callable[[], Awaitable[list[str]]]
) -> None:
    """Waits until ``check`` holds for the listed topics: brokers learn of topics at slightly different
    times (from the controller's UpdateMetadata), and a client may ask any of them."""
    deadline = asyncio.get_running_loop().time() + 10
    while not check(set(await list_topics())):
        assert asyncio.get_running_loop().time() < deadline, "the topic listing did not change in time"
        await asyncio.sleep(0.05)


def test_kafka_python(cluster: AdminCluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, client_id="samsa-admin-test")
    try:
        admin.create_topics(
            [NewTopic("kp-topic", 3, 2, topic_configs={"retention.ms": "3600000"}), NewTopic("kp-data", 1, 1)]
        )

        # Only the answering broker is sure to know the topics already (see eventually()).
        def listed() -> set[str]:
            return set(admin.list_topics())

        cluster.wait_for(lambda: {"kp-topic", "kp-data"} <= listed(), 10, "every broker to list the topics")
        [described] = admin.describe_topics(["kp-topic"])
        assert len(described["partitions"]) == 3
        assert all(p["leader_id"] >= 0 and len(p["replica_nodes"]) == 2 for p in described["partitions"])
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic("kp-topic", 1, 1)])

        topic = ConfigResource(ConfigResourceType.TOPIC, "kp-topic")
        retention = admin.describe_configs([topic])["topic"]["kp-topic"]["retention.ms"]
        assert (retention["value"], retention["config_source"]) == ("3600000", "DYNAMIC_TOPIC_CONFIG")
        changed = ConfigResource(ConfigResourceType.TOPIC, "kp-topic", configs={"retention.ms": "7200000"})
        admin.alter_configs([changed])
        assert topic_config_in_zk(cluster, "kp-topic") == {"retention.ms": "7200000"}
        assert admin.describe_configs([topic])["topic"]["kp-topic"]["retention.ms"]["value"] == "7200000"

        admin.create_partitions({"kp-topic": NewPartitions(5)})
        assert sorted(replicas_in_zk(cluster, "kp-topic")) == [0, 1, 2, 3, 4]

        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap)  # idempotent by default
        assert producer.config["enable_idempotence"]
        for i in range(RECORDS):
            producer.send("kp-data", value=b"record-%d" % i)
        producer.flush()
        producer.close()

        deleted = admin.delete_records({TopicPartition("kp-data", 0): TRIMMED_TO})
        assert deleted[TopicPartition("kp-data", 0)]["low_watermark"] == TRIMMED_TO
        consumer = KafkaConsumer(
            "kp-data",
            bootstrap_servers=cluster.bootstrap,
            auto_offset_reset="earliest",
            consumer_timeout_ms=3000,
        )
        read = [(m.offset, m.value) for m in consumer]
        consumer.close()
        assert read == [(i, b"record-%d" % i) for i in range(TRIMMED_TO, RECORDS)]

        admin.delete_topics(["kp-topic", "kp-data"])
        cluster.wait_for(lambda: not {"kp-topic", "kp-data"} & listed(), 10, "the topics to go")
    finally:
        admin.close()


async def test_aiokafka(cluster: AdminCluster) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    await admin.start()
    try:
        created = await admin.create_topics(
            [
                NewTopic("aio-topic", 3, 2, topic_configs={"retention.ms": "3600000"}),
                NewTopic("aio-data", 1, 1),
            ]
        )
        assert [e[1] for e in created.topic_errors] == [0, 0]
        await eventually(lambda topics: {"aio-topic", "aio-data"} <= topics, admin.list_topics)
        [described] = await admin.describe_topics(["aio-topic"])
        assert len(described["partitions"]) == 3 and all(p["leader"] >= 0 for p in described["partitions"])

        topic = ConfigResource(ConfigResourceType.TOPIC, "aio-topic")
        [response] = await admin.describe_configs([topic])
        entries = {e[0]: e for e in response.resources[0][4]}
        assert entries["retention.ms"][1:4] == ("3600000", False, 1)  # value, read-only, DYNAMIC_TOPIC_CONFIG
        changed = ConfigResource(ConfigResourceType.TOPIC, "aio-topic", configs={"retention.ms": "7200000"})
        [altered] = await admin.alter_configs([changed])
        assert altered.resources[0][0] == 0
        assert topic_config_in_zk(cluster, "aio-topic") == {"retention.ms": "7200000"}
        [broker] = await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")])
        broker_entries = {e[0]: e for e in broker.resources[0][4]}
        assert broker_entries["broker.id"][1:4] == ("1", True, 4)  # STATIC_BROKER_CONFIG

        grown = await admin.create_partitions({"aio-topic": NewPartitions(5)})
        assert grown.topic_errors[0][1] == 0
        assert sorted(replicas_in_zk(cluster, "aio-topic")) == [0, 1, 2, 3, 4]

        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            for i in range(RECORDS):
                await producer.send_and_wait("aio-data", b"record-%d" % i)
        finally:
            await producer.stop()

        deleted = await admin.delete_records({TopicPartition("aio-data", 0): RecordsToDelete(TRIMMED_TO)})
        assert deleted == {TopicPartition("aio-data", 0): TRIMMED_TO}
        consumer = AIOKafkaConsumer(
            "aio-data", bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            batches = await consumer.getmany(timeout_ms=5000)
            read = [(m.offset, m.value) for messages in batches.values() for m in messages]
        finally:
            await consumer.stop()
        assert read == [(i, b"record-%d" % i) for i in range(TRIMMED_TO, RECORDS)]

        await admin.delete_topics(["aio-topic", "aio-data"])
        await eventually(lambda topics: not {"aio-topic", "aio-data"} & topics, admin.list_topics)
    finally:
        await admin.close()


def test_confluent_kafka(cluster: AdminCluster) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        ResourceType,
    )

    def wait_all(futures: dict) -> dict:
        return {key: future.result(timeout=30) for key, future in futures.items()}

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    wait_all(
        admin.create_topics(
            [NewTopic("ck-topic", 3, 2, config={"retention.ms": "3600000"}), NewTopic("ck-data", 1, 1)]
        )
    )

    def listed() -> set[str]:
        return set(admin.list_topics(timeout=10).topics)

    cluster.wait_for(lambda: {"ck-topic", "ck-data"} <= listed(), 10, "every broker to list the topics")
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
        wait_all(admin.create_topics([NewTopic("ck-topic", 1, 1)]))
    with pytest.raises(KafkaException, match="INVALID_REPLICATION_FACTOR"):
        wait_all(admin.create_topics([NewTopic("ck-too-wide", 1, 4)]))

    topic = ConfigResource(ResourceType.TOPIC, "ck-topic")
    [configs] = wait_all(admin.describe_configs([topic])).values()
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == ("3600000", 1)
    operation = ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)
    wait_all(
        admin.incremental_alter_configs(
            [ConfigResource(ResourceType.TOPIC, "ck-topic", incremental_configs=[operation])]
        )
    )
    assert topic_config_in_zk(cluster, "ck-topic") == {"retention.ms": "7200000"}
    [broker] = wait_all(admin.describe_configs([ConfigResource(ResourceType.BROKER, "2")])).values()
    assert (broker["broker.id"].value, broker["broker.id"].is_read_only) == ("2", True)

    wait_all(admin.create_partitions([NewPartitions("ck-topic", 5)]))
    assert sorted(replicas_in_zk(cluster, "ck-topic")) == [0, 1, 2, 3, 4]

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    for i in range(RECORDS):
        producer.produce("ck-data", b"record-%d" % i)
    assert producer.flush(30) == 0

    [deleted] = wait_all(admin.delete_records([TopicPartition("ck-data", 0, TRIMMED_TO)])).values()
    assert deleted.low_watermark == TRIMMED_TO
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("ck-data", 0, TRIMMED_TO)])
    read = []
    try:
        while len(read) < RECORDS - TRIMMED_TO:
            message = consumer.poll(10)
            assert message is not None and message.error() is None, message and message.error()
            read.append((message.offset(), message.value()))
    finally:
        consumer.close()
    assert read == [(i, b"record-%d" % i) for i in range(TRIMMED_TO, RECORDS)]

    wait_all(admin.delete_topics(["ck-topic", "ck-data"], operation_timeout=20))
    cluster.wait_for(lambda: not {"ck-topic", "ck-data"} & listed(), 10, "the topics to go")
