"""Requests that ask for more than a broker can do: CreateTopics and CreatePartitions of billions of
partitions, or of more than Kafka's 10,000 per request, and topics whose znodes ZooKeeper cannot store.

Each is refused at once with Kafka's error code and message (POLICY_VIOLATION), the broker's memory
does not grow, a bystander producer and consumer keep going, and the broker keeps serving: a normal
CreateTopics still works after.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from broker.config_entries import ResourceType
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    Message,
)
from tests.support.bystander import Bystander
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient
from zk import znodes
from zk.client import JUTE_MAX_BUFFER

pytestmark = pytest.mark.integration

EXCESSIVE = "Excessively large number of partitions per request."  # Kafka's ReplicationControlManager
LIMIT = 10_000  # Kafka's MAX_PARTITIONS_PER_BATCH
MAX_INT32 = 2**31 - 1
MAX_PAUSE = 2.0  # s the bystander may go without an acknowledgement or a consumed value
MAX_RSS_GROWTH = 50 * 1024  # kB
ANSWER_SECONDS = 2.0  # a refusal comes at once, not after retries or an allocation
CREATE_TOPICS_VERSION = 7
# A throttled-replicas list is free text to the broker: a config value that makes the znode too large.
FREE_TEXT_CONFIG = "leader.replication.throttled.replicas"


@pytest.fixture
def client(one_broker: Cluster) -> Iterator[RawClient]:
    raw = RawClient(one_broker.bootstrap, timeout=30)
    try:
        yield raw
    finally:
        raw.close()


def rss_kb(one_broker: Cluster) -> int:
    status = open(f"/proc/{one_broker.broker(1).pid}/status").read()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))


def topic(name: str, partitions: int, configs: dict[str, str] | None = None) -> Message:
    return CreateTopicsRequest.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=1,
        assignments=[],
        configs=[
            CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
        ],
    )


def create_topics(client: RawClient, *topics: Message, validate_only: bool = False) -> tuple[Message, float]:
    """The response and how long it took."""
    body = CreateTopicsRequest(topics=list(topics), timeout_ms=10_000, validate_only=validate_only)
    started = time.monotonic()
    response = client.request(ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, body)
    return response, time.monotonic() - started


def create_partitions(client: RawClient, counts: dict[str, int], validate_only: bool = False) -> Message:
    body = CreatePartitionsRequest(
        topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=count, assignments=None)
            for name, count in counts.items()
        ],
        timeout_ms=10_000,
        validate_only=validate_only,
    )
    return client.request(ApiKey.CREATE_PARTITIONS, 3, body)


def assert_refused_as_excessive(results: list[Message]) -> None:
    for result in results:
        assert (result.error_code, result.error_message) == (ErrorCode.POLICY_VIOLATION, EXCESSIVE)


def znode_exists(one_broker: Cluster, path: str) -> bool:
    zk = KazooClient(one_broker.zookeeper_connect)
    zk.start(timeout=10)
    try:
        return zk.exists(path) is not None
    finally:
        zk.stop()
        zk.close()


def assert_still_creates_topics(one_broker: Cluster, client: RawClient) -> None:
    response, _ = create_topics(client, topic("after", 10))
    assert response.topics[0].error_code == ErrorCode.NONE, response.topics[0].error_message
    assert response.topics[0].num_partitions == 10
    one_broker.wait_for_leaders("after", 10)


def assert_undisturbed(one_broker: Cluster, bystander: Bystander) -> None:
    """The bystander was not held up, and the broker kept its ZooKeeper session and raised nothing."""
    bystander.check(max_pause=MAX_PAUSE)
    log = one_broker.broker(1).log()
    assert "ZooKeeper session suspended" not in log
    assert "Connection dropped" not in log
    assert "Traceback" not in log


@pytest.mark.parametrize("validate_only", [True, False], ids=["validate_only", "create"])
def test_create_topics_of_max_int32_partitions_is_refused_without_allocating(
    one_broker: Cluster, bystander: Bystander, client: RawClient, validate_only: bool
) -> None:
    before = rss_kb(one_broker)
    response, took = create_topics(client, topic("huge", MAX_INT32), validate_only=validate_only)
    after = rss_kb(one_broker)

    [result] = response.topics
    assert_refused_as_excessive([result])
    assert (result.num_partitions, result.replication_factor) == (-1, -1)
    assert took < ANSWER_SECONDS
    assert after - before < MAX_RSS_GROWTH, f"the broker grew from {before} kB to {after} kB"
    assert not znode_exists(one_broker, znodes.topic_path("huge"))
    log = one_broker.broker(1).log()
    assert log.count("refused CreateTopics") == 1
    assert f"POLICY_VIOLATION: {MAX_INT32} partitions in 1 topics" in log
    assert_still_creates_topics(one_broker, client)
    assert_undisturbed(one_broker, bystander)


def test_partitions_over_the_limit_are_refused_whole_however_they_are_split(
    one_broker: Cluster, bystander: Bystander, client: RawClient
) -> None:
    # The 100,000 partitions: before the limit, a topic znode over jute.maxbuffer.
    response, took = create_topics(client, topic("hundred-thousand", 100_000))
    assert_refused_as_excessive(response.topics)
    assert took < ANSWER_SECONDS

    # 10,001 over three topics, one of them also invalid: every topic gets the request's refusal.
    response, _ = create_topics(client, topic("a", 5_000), topic("b", 5_000), topic("bad name!", 1))
    assert_refused_as_excessive(response.topics)
    for name in ("a", "b"):
        assert not znode_exists(one_broker, znodes.topic_path(name))

    # Exactly the limit is allowed (validate_only: the 10,000 real partitions are not this test's point).
    response, took = create_topics(client, topic("a", 5_000), topic("b", 5_000), validate_only=True)
    assert [(t.error_code, t.num_partitions) for t in response.topics] == [(ErrorCode.NONE, 5_000)] * 2
    assert took < ANSWER_SECONDS

    assert_still_creates_topics(one_broker, client)
    assert_undisturbed(one_broker, bystander)


def test_create_partitions_over_the_limit_is_refused(
    one_broker: Cluster, bystander: Bystander, client: RawClient
) -> None:
    for name in ("grow-1", "grow-2"):
        response, _ = create_topics(client, topic(name, 1))
        assert response.topics[0].error_code == ErrorCode.NONE
    before = rss_kb(one_broker)

    for counts in (
        {"grow-1": MAX_INT32},
        {"grow-1": LIMIT + 2},  # adds 10,001
        {"grow-1": LIMIT // 2 + 1, "grow-2": LIMIT // 2 + 2},  # adds 5,000 + 5,001
    ):
        for validate_only in (True, False):
            response = create_partitions(client, counts, validate_only)
            assert_refused_as_excessive(response.results)
    assert rss_kb(one_broker) - before < MAX_RSS_GROWTH

    # Adding exactly the limit passes validation.
    response = create_partitions(client, {"grow-1": LIMIT + 1}, validate_only=True)
    assert response.results[0].error_code == ErrorCode.NONE, response.results[0].error_message
    response = create_partitions(client, {"grow-1": 4})
    assert response.results[0].error_code == ErrorCode.NONE, response.results[0].error_message
    one_broker.wait_for_leaders("grow-1", 4)

    assert_undisturbed(one_broker, bystander)


def test_a_znode_zookeeper_cannot_store_is_refused_once(
    one_broker: Cluster, bystander: Bystander, client: RawClient
) -> None:
    too_long = ",".join(f"{p}:1" for p in range(300_000))  # about 2.4 MB
    assert len(too_long) > JUTE_MAX_BUFFER

    response, took = create_topics(client, topic("big-configs", 1, {FREE_TEXT_CONFIG: too_long}))
    [result] = response.topics
    assert result.error_code == ErrorCode.POLICY_VIOLATION
    assert "big-configs" in result.error_message
    assert f"over ZooKeeper's limit of {JUTE_MAX_BUFFER} bytes (jute.maxbuffer)" in result.error_message
    assert took < ANSWER_SECONDS
    assert not znode_exists(one_broker, znodes.topic_path("big-configs"))
    assert not znode_exists(one_broker, znodes.topic_config_path("big-configs"))

    # The same value set on an existing topic.
    response, _ = create_topics(client, topic("small", 1))
    assert response.topics[0].error_code == ErrorCode.NONE
    one_broker.wait_for_leaders("small", 1)
    alter = AlterConfigsRequest(
        resources=[
            AlterConfigsRequest.AlterConfigsResource(
                resource_type=ResourceType.TOPIC,
                resource_name="small",
                configs=[AlterConfigsRequest.AlterableConfig(name=FREE_TEXT_CONFIG, value=too_long)],
            )
        ],
        validate_only=False,
    )
    started = time.monotonic()
    [resource] = client.request(ApiKey.ALTER_CONFIGS, 2, alter).responses
    assert resource.error_code == ErrorCode.POLICY_VIOLATION
    assert "(jute.maxbuffer)" in resource.error_message
    assert time.monotonic() - started < ANSWER_SECONDS

    assert_still_creates_topics(one_broker, client)
    assert_undisturbed(one_broker, bystander)


def test_topics_refused_are_logged_once_per_request(one_broker: Cluster, client: RawClient) -> None:
    response, _ = create_topics(client, topic("exists", 1))
    assert response.topics[0].error_code == ErrorCode.NONE
    bad_names = [f"bad name {i}!" for i in range(50)]
    response, _ = create_topics(client, *(topic(name, 1) for name in bad_names), topic("exists", 1))
    assert [t.error_code for t in response.topics] == [ErrorCode.INVALID_TOPIC_EXCEPTION] * 50 + [
        ErrorCode.TOPIC_ALREADY_EXISTS
    ]
    body = DeleteTopicsRequest(topic_names=["missing-1", "missing-2", "__consumer_offsets"], timeout_ms=1000)
    deleted = client.request(ApiKey.DELETE_TOPICS, 5, body)
    assert [r.error_code for r in deleted.responses] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2 + [
        ErrorCode.INVALID_TOPIC_EXCEPTION
    ]

    log = one_broker.broker(1).log()
    [created] = [line for line in log.splitlines() if "refused CreateTopics" in line]
    assert "51 of 51 topics refused: INVALID_TOPIC_EXCEPTION x50 ('bad name 0!'" in created
    assert "TOPIC_ALREADY_EXISTS x1 ('exists'" in created
    [deleted_line] = [line for line in log.splitlines() if "refused DeleteTopics" in line]
    assert "3 of 3 topics refused: UNKNOWN_TOPIC_OR_PARTITION x2" in deleted_line
