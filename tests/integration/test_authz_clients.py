"""ACLs as a client meets them: a real broker with Kafka's AclAuthorizer (``authorizer.class.name``),
a SASL_PLAINTEXT listener with PLAIN users (the principals ``User:alice``, ``User:bob``) next to the
PLAINTEXT listener the cluster's own tools use (``User:ANONYMOUS``, a super user), ACLs created with
confluent-kafka's AdminClient, and confluent-kafka (librdkafka) clients reporting Kafka's errors: a
producer without WRITE gets TOPIC_AUTHORIZATION_FAILED, a consumer without READ on its group
GROUP_AUTHORIZATION_FAILED, without READ on the topic TOPIC_AUTHORIZATION_FAILED, a transactional
producer without WRITE on its transactional id TRANSACTIONAL_ID_AUTHORIZATION_FAILED; Metadata lists
only the topics the principal may describe; the same clients with the ACLs they need work."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cluster import chroot
from tests.support.secure import SecuredBroker as Secured
from tests.support.secure import allow, create_acls, sasl_cluster
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
admin = pytest.importorskip("confluent_kafka.admin")
KafkaError = confluent_kafka.KafkaError


@pytest.fixture(scope="module")
def secured(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    workdir = tmp_path_factory.mktemp("authz")
    zookeeper = chroot(zookeeper_server)
    secured = sasl_cluster(
        workdir / "cluster", zookeeper, overrides={"group.initial.rebalance.delay.ms": "0"}
    )
    with secured.cluster:
        for topic in ("granted", "described", "secret"):
            secured.cluster.create_topic(topic, partitions=1)
        T, G, X = admin.ResourceType.TOPIC, admin.ResourceType.GROUP, admin.ResourceType.TRANSACTIONAL_ID
        Op = admin.AclOperation
        bindings = [
            allow(T, "granted", Op.WRITE),
            allow(T, "granted", Op.READ),
            allow(T, "described", Op.DESCRIBE),
            allow(G, "alice-group", Op.READ),
            allow(X, "alice-tx", Op.WRITE),
        ]
        create_acls(secured, bindings)
        yield secured


def _delivery_errors(config: dict[str, Any], topic: str, count: int = 3) -> list[Any]:
    """The delivery reports' errors of ``count`` messages produced to ``topic`` (None: delivered)."""
    errors: list[Any] = []
    producer = confluent_kafka.Producer({**config, "message.timeout.ms": 15000})
    for i in range(count):
        producer.produce(topic, f"m{i}".encode(), on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert len(errors) == count
    return errors


def test_a_producer_without_write_gets_topic_authorization_failed(secured: Secured) -> None:
    alice = secured.as_user("alice")
    # Not even describable: Metadata already refuses the topic.
    assert {e.code() for e in _delivery_errors(alice, "secret")} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    # Describable but not writable: the Produce itself is refused.
    assert {e.code() for e in _delivery_errors(alice, "described")} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert _delivery_errors(alice, "granted") == [None, None, None]
    # Kafka's authorizer log names who was denied what from where; the refusal log names the peer.
    log = secured.broker.log(since_start=True)
    assert re.search(
        r"Principal = User:alice is Denied Operation = Write from host = 127\.0\.0\.1 on resource = "
        r"Topic:LITERAL:described",
        log,
    ), secured.broker.log_tail(30)
    assert re.search(r"refused Produce v\d+ from 127\.0\.0\.1:\d+ .*TOPIC_AUTHORIZATION_FAILED", log)


def test_metadata_lists_only_the_topics_the_principal_may_describe(secured: Secured) -> None:
    seen = admin.AdminClient(secured.as_user("alice")).list_topics(timeout=20).topics
    assert set(seen) == {"granted", "described"}
    assert set(admin.AdminClient(secured.as_user("bob")).list_topics(timeout=20).topics) == set()
    assert {"granted", "described", "secret"} <= set(
        admin.AdminClient(secured.superuser()).list_topics(timeout=20).topics
    )


def _first_error(consumer: Any) -> Any:
    """The code of the first error ``consumer`` polls within 30 s (None: none came)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is not None:
            return message.error().code()
    return None


def test_a_consumer_without_group_read_gets_group_authorization_failed(secured: Secured) -> None:
    config = secured.as_user("alice", **{"group.id": "forbidden-group", "auto.offset.reset": "earliest"})
    consumer = confluent_kafka.Consumer(config)
    try:
        consumer.subscribe(["granted"])
        assert _first_error(consumer) == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_a_consumer_without_topic_read_gets_topic_authorization_failed(secured: Secured) -> None:
    config = secured.as_user("alice", **{"group.id": "alice-group", "enable.auto.commit": "false"})
    consumer = confluent_kafka.Consumer(config)
    try:
        consumer.assign([confluent_kafka.TopicPartition("described", 0, confluent_kafka.OFFSET_BEGINNING)])
        assert _first_error(consumer) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_a_consumer_with_the_acls_it_needs_reads_in_its_group(secured: Secured) -> None:
    marker = f"read-{uuid.uuid4().hex[:8]}".encode()
    producer = confluent_kafka.Producer(secured.as_user("alice"))
    producer.produce("granted", marker)
    assert producer.flush(30) == 0
    config = secured.as_user(
        "alice", **{"group.id": "alice-group", "auto.offset.reset": "earliest", "enable.auto.commit": "false"}
    )
    consumer = confluent_kafka.Consumer(config)
    try:
        consumer.subscribe(["granted"])
        deadline = time.monotonic() + 30
        values: list[bytes] = []
        while marker not in values and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert marker in values
    finally:
        consumer.close()


def test_a_transactional_producer_without_transactional_id_write_is_refused(secured: Secured) -> None:
    producer = confluent_kafka.Producer(secured.as_user("alice", **{"transactional.id": "forbidden-tx"}))
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        producer.init_transactions(20)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_a_transactional_producer_with_transactional_id_write_commits(secured: Secured) -> None:
    producer = confluent_kafka.Producer(secured.as_user("alice", **{"transactional.id": "alice-tx"}))
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce("granted", b"in a transaction")
    producer.commit_transaction(20)


def _kafka_python_security(user: str) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": f"{user}-secret",
    }


def test_kafka_python_reports_kafkas_authorization_errors(secured: Secured) -> None:
    kafka = pytest.importorskip("kafka")
    errors = pytest.importorskip("kafka.errors")
    bootstrap = f"{secured.broker.host}:{secured.sasl_port}"
    # kafka-python's sender treats the error as fatal: a producer per attempt.
    for topic, refused in (("described", True), ("secret", True), ("granted", False)):
        producer = kafka.KafkaProducer(
            bootstrap_servers=bootstrap, max_block_ms=15000, **_kafka_python_security("alice")
        )
        try:
            if refused:
                with pytest.raises(errors.TopicAuthorizationFailedError):
                    producer.send(topic, b"no").get(timeout=15)
            else:
                producer.send(topic, b"yes").get(timeout=15)
        finally:
            producer.close(5)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id="forbidden-group",
        auto_offset_reset="earliest",
        **_kafka_python_security("alice"),
    )
    try:
        consumer.subscribe(["granted"])
        with pytest.raises(errors.GroupAuthorizationFailedError):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                consumer.poll(500)
    finally:
        consumer.close()


async def test_aiokafka_reports_kafkas_authorization_errors(secured: Secured) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    errors = pytest.importorskip("aiokafka.errors")
    producer = aiokafka.AIOKafkaProducer(
        bootstrap_servers=f"{secured.broker.host}:{secured.sasl_port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
        request_timeout_ms=15000,
    )
    await producer.start()
    try:
        with pytest.raises(errors.TopicAuthorizationFailedError):
            await producer.send_and_wait("described", b"no")
        await producer.send_and_wait("granted", b"yes")
    finally:
        await producer.stop()
