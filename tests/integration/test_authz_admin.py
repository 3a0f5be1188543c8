"""ACLs on the admin and group APIs as clients meet them: a real broker with Kafka's AclAuthorizer, a
SASL_PLAINTEXT listener with PLAIN users (``User:alice``, ``User:bob``) next to the PLAINTEXT listener
the cluster's own tools use (``User:ANONYMOUS``, a super user), ACLs created with confluent-kafka's
AdminClient. As an unprivileged user, confluent-kafka's AdminClient is refused topic creation and
deletion and config descriptions with Kafka's errors, and gets them with the ACLs (a PREFIXED CREATE);
``list_consumer_groups`` lists only the groups the user may describe; describing or deleting a group
without the ACL is GROUP_AUTHORIZATION_FAILED; an aiokafka group member without READ on its group is
refused with GroupAuthorizationFailedError."""

from __future__ import annotations

import asyncio
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
T, G, C = admin.ResourceType.TOPIC, admin.ResourceType.GROUP, admin.ResourceType.BROKER
Op = admin.AclOperation

TIMEOUT = 20


def _commit_offsets(secured: Secured, group: str, topic: str) -> None:
    """A group with a committed offset, made by the super user."""
    consumer = confluent_kafka.Consumer(
        {**secured.superuser(), "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def secured(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    workdir = tmp_path_factory.mktemp("authz-admin")
    zookeeper = chroot(zookeeper_server)
    secured = sasl_cluster(
        workdir / "cluster", zookeeper, overrides={"group.initial.rebalance.delay.ms": "0"}
    )
    with secured.cluster:
        for topic in ("shared", "secret"):
            secured.cluster.create_topic(topic, partitions=1)
        for group in ("alice-group", "hidden-group"):
            _commit_offsets(secured, group, "shared")
        bindings = [
            allow(T, "alice-", Op.CREATE, admin.ResourcePatternType.PREFIXED),
            allow(T, "alice-", Op.DELETE, admin.ResourcePatternType.PREFIXED),
            allow(T, "alice-", Op.DESCRIBE_CONFIGS, admin.ResourcePatternType.PREFIXED),
            allow(T, "shared", Op.DESCRIBE_CONFIGS),
            allow(T, "shared", Op.READ),
            allow(G, "alice-group", Op.DESCRIBE),
        ]
        create_acls(secured, bindings, TIMEOUT)
        yield secured


def _error_of(future: Any) -> Any:
    """The KafkaError code a future failed with (None: it succeeded)."""
    try:
        future.result(timeout=TIMEOUT)
    except confluent_kafka.KafkaException as e:
        return e.args[0].code()
    return None


def test_creating_and_deleting_topics_needs_create_and_delete(secured: Secured) -> None:
    bob, alice = secured.admin("bob"), secured.admin("alice")
    name = f"alice-{uuid.uuid4().hex[:8]}"
    [future] = bob.create_topics([admin.NewTopic(name, 1, 1)], request_timeout=TIMEOUT).values()
    assert _error_of(future) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # A PREFIXED CREATE on alice-: hers to create.
    [future] = alice.create_topics([admin.NewTopic(name, 1, 1)], request_timeout=TIMEOUT).values()
    assert _error_of(future) is None
    [future] = bob.delete_topics([name], request_timeout=TIMEOUT).values()
    assert _error_of(future) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    [future] = alice.delete_topics(["shared"], request_timeout=TIMEOUT).values()
    assert _error_of(future) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    [future] = alice.delete_topics([name], request_timeout=TIMEOUT).values()
    assert _error_of(future) is None


def test_describe_configs_needs_describe_configs(secured: Secured) -> None:
    alice = secured.admin("alice")
    resources = [
        admin.ConfigResource(admin.ResourceType.TOPIC, "shared"),
        admin.ConfigResource(admin.ResourceType.TOPIC, "secret"),
        admin.ConfigResource(admin.ResourceType.BROKER, "1"),
    ]
    futures = alice.describe_configs(resources, request_timeout=TIMEOUT)
    shared, secret, broker = (futures[r] for r in resources)
    assert "retention.ms" in shared.result(timeout=TIMEOUT)
    assert _error_of(secret) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _error_of(broker) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # The super user sees the broker's (the client kept: its futures fail once it is gone).
    superuser = secured.admin()
    [future] = superuser.describe_configs(resources[2:], request_timeout=TIMEOUT).values()
    assert "log.retention.ms" in future.result(timeout=TIMEOUT)


def test_list_consumer_groups_shows_only_the_groups_the_user_may_describe(secured: Secured) -> None:
    def listed(config: dict[str, Any]) -> set[str]:
        client = admin.AdminClient(config)
        result = client.list_consumer_groups(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
        assert not result.errors
        return {g.group_id for g in result.valid}

    assert listed(secured.as_user("alice")) == {"alice-group"}
    assert listed(secured.as_user("bob")) == set()
    assert {"alice-group", "hidden-group"} <= listed(secured.superuser())


def test_describing_or_deleting_a_group_needs_its_acl(secured: Secured) -> None:
    alice = secured.admin("alice")
    futures = alice.describe_consumer_groups(["alice-group", "hidden-group"], request_timeout=TIMEOUT)
    assert futures["alice-group"].result(timeout=TIMEOUT).group_id == "alice-group"
    assert _error_of(futures["hidden-group"]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    [future] = alice.delete_consumer_groups(["hidden-group"], request_timeout=TIMEOUT).values()
    assert _error_of(future) == KafkaError.GROUP_AUTHORIZATION_FAILED
    # Its offsets are still there.
    superuser = secured.admin()
    offsets = superuser.list_consumer_group_offsets(
        [confluent_kafka.ConsumerGroupTopicPartitions("hidden-group")], request_timeout=TIMEOUT
    )
    [found] = offsets.values()
    assert [(tp.topic, tp.offset) for tp in found.result(timeout=TIMEOUT).topic_partitions] == [("shared", 1)]


def test_an_aiokafka_group_member_without_group_read_is_refused(secured: Secured) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    errors = pytest.importorskip("aiokafka.errors")

    async def join() -> None:
        consumer = aiokafka.AIOKafkaConsumer(
            "shared",
            bootstrap_servers=f"{secured.broker.host}:{secured.sasl_port}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password="alice-secret",
            group_id="alice-group",  # DESCRIBE only: not enough to join
            request_timeout_ms=TIMEOUT * 1000,
        )
        try:
            await consumer.start()
            await asyncio.wait_for(consumer.getmany(timeout_ms=5000), TIMEOUT)
        finally:
            await consumer.stop()

    with pytest.raises(errors.GroupAuthorizationFailedError):
        asyncio.run(join())


def test_altering_topics_needs_alter_alter_configs_and_delete(secured: Secured) -> None:
    alice = secured.admin("alice")
    entry = admin.ConfigEntry("retention.ms", "1000", incremental_operation=admin.AlterConfigOpType.SET)
    resource = admin.ConfigResource(admin.ResourceType.TOPIC, "shared", incremental_configs=[entry])
    [future] = alice.incremental_alter_configs([resource], request_timeout=TIMEOUT).values()
    assert _error_of(future) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # A broker setting (a bad one would be INVALID_REQUEST first: Kafka validates before authorizing).
    setting = admin.ConfigEntry("log.retention.ms", "1000", incremental_operation=admin.AlterConfigOpType.SET)
    broker = admin.ConfigResource(admin.ResourceType.BROKER, "1", incremental_configs=[setting])
    [future] = alice.incremental_alter_configs([broker], request_timeout=TIMEOUT).values()
    assert _error_of(future) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    [future] = alice.create_partitions([admin.NewPartitions("shared", 2)], request_timeout=TIMEOUT).values()
    assert _error_of(future) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    [future] = alice.delete_records(
        [confluent_kafka.TopicPartition("shared", 0, 0)], request_timeout=TIMEOUT
    ).values()
    assert _error_of(future) == KafkaError.TOPIC_AUTHORIZATION_FAILED
