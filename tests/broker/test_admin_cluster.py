"""The admin APIs on a real cluster (ZooKeeper, a ``samsa controller``, brokers), spoken to in the Kafka
protocol at every advertised version: what the brokers answer and what they write to ZooKeeper.

The cluster is tests/support/admin_cluster.py's ``AdminCluster`` (a LocalCluster on a ZooKeeper chroot of
its own), started once for the module."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from protocol.record_batch import Record, encode_batch
from tests.support.admin_cluster import AdminCluster, admin_cluster
from zk.server import ZooKeeperServer
from zk.znodes import parse_topic_id

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer
) -> Iterator[AdminCluster]:
    with admin_cluster(tmp_path_factory.mktemp("admin-cluster"), zookeeper_server) as started:
        yield started


# -- request builders ---------------------------------------------------------------------------------


def new_topic(
    name: str,
    partitions: int = -1,
    replication_factor: int = -1,
    assignment: dict[int, list[int]] | None = None,
    configs: dict[str, str | None] | None = None,
) -> Any:
    return CreateTopicsRequest.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        assignments=[
            CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=replicas)
            for p, replicas in (assignment or {}).items()
        ],
        configs=[
            CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
        ],
    )


def create(
    cluster: AdminCluster,
    *topics: Any,
    version: int = 7,
    timeout_ms: int = 20_000,
    validate_only: bool = False,
    broker_id: int = 1,
) -> dict[str, Any]:
    body = CreateTopicsRequest(topics=list(topics), timeout_ms=timeout_ms, validate_only=validate_only)
    response = cluster.request(ApiKey.CREATE_TOPICS, version, body, broker_id)
    return {t.name: t for t in response.topics}


def create_ok(cluster: AdminCluster, *topics: Any) -> None:
    """Creates the topics and waits until every broker, not only the one that answered, knows them."""
    results = create(cluster, *topics)
    assert all(r.error_code == ErrorCode.NONE for r in results.values()), results
    for name in results:
        count = len(assignment_in_zk(cluster, name) or {})
        cluster.wait_for(
            lambda n=name, c=count: cluster.leaders_everywhere(n, c), 10, f"every broker to know {name}"
        )


def delete(
    cluster: AdminCluster, *names: str, version: int = 6, timeout_ms: int = 20_000, broker_id: int = 1
) -> Any:
    if version >= 6:
        body = DeleteTopicsRequest(
            topics=[DeleteTopicsRequest.DeleteTopicState(name=n, topic_id=ZERO) for n in names],
            timeout_ms=timeout_ms,
        )
    else:
        body = DeleteTopicsRequest(topic_names=list(names), timeout_ms=timeout_ms)
    return cluster.request(ApiKey.DELETE_TOPICS, version, body, broker_id).responses


def grow(
    cluster: AdminCluster,
    name: str,
    count: int,
    assignments: list[list[int]] | None = None,
    *,
    version: int = 3,
    validate_only: bool = False,
    timeout_ms: int = 20_000,
    broker_id: int = 1,
) -> Any:
    body = CreatePartitionsRequest(
        topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(
                name=name,
                count=count,
                assignments=None
                if assignments is None
                else [CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=a) for a in assignments],
            )
        ],
        timeout_ms=timeout_ms,
        validate_only=validate_only,
    )
    return cluster.request(ApiKey.CREATE_PARTITIONS, version, body, broker_id).results[0]


def describe(
    cluster: AdminCluster,
    resource_type: int,
    name: str,
    keys: list[str] | None = None,
    *,
    version: int = 4,
    broker_id: int = 1,
) -> Any:
    body = DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=keys
            )
        ],
        include_synonyms=True,
        include_documentation=True,
    )
    return cluster.request(ApiKey.DESCRIBE_CONFIGS, version, body, broker_id).results[0]


def described(cluster: AdminCluster, resource_type: int, name: str, key: str, broker_id: int = 1) -> Any:
    result = describe(cluster, resource_type, name, [key], broker_id=broker_id)
    assert result.error_code == ErrorCode.NONE, result
    return result.configs[0]


def alter(
    cluster: AdminCluster,
    resource_type: int,
    name: str,
    configs: dict[str, str | None],
    *,
    version: int = 2,
    validate_only: bool = False,
    broker_id: int = 1,
) -> Any:
    body = AlterConfigsRequest(
        resources=[
            AlterConfigsRequest.AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=[AlterConfigsRequest.AlterableConfig(name=k, value=v) for k, v in configs.items()],
            )
        ],
        validate_only=validate_only,
    )
    return cluster.request(ApiKey.ALTER_CONFIGS, version, body, broker_id).responses[0]


def alter_incrementally(
    cluster: AdminCluster,
    resource_type: int,
    name: str,
    ops: list[tuple[str, int, str | None]],
    *,
    version: int = 1,
    validate_only: bool = False,
    broker_id: int = 1,
) -> Any:
    body = IncrementalAlterConfigsRequest(
        resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=[
                    IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=op, value=v)
                    for k, op, v in ops
                ],
            )
        ],
        validate_only=validate_only,
    )
    return cluster.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, body, broker_id).responses[0]


def produce(
    cluster: AdminCluster, topic: str, partition: int, broker_id: int, count: int, size: int = 10
) -> Any:
    batch = encode_batch(
        [Record(i, int(time.time() * 1000), None, b"v" * size) for i in range(count)], base_offset=0
    )
    body = ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=batch)],
            )
        ],
    )
    return cluster.request(ApiKey.PRODUCE, 9, body, broker_id).responses[0].partition_responses[0]


def earliest_offset(cluster: AdminCluster, topic: str, partition: int, broker_id: int) -> int:
    body = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=-2)],
            )
        ],
    )
    return cluster.request(ApiKey.LIST_OFFSETS, 7, body, broker_id).topics[0].partitions[0].offset


def assignment_in_zk(cluster: AdminCluster, topic: str) -> dict[int, list[int]] | None:
    found = cluster.znode(f"/brokers/topics/{topic}")
    return None if found is None else {int(p): r for p, r in found["partitions"].items()}


def latest_change(cluster: AdminCluster) -> Any:
    assert cluster.zk is not None
    children = sorted(cluster.zk.get_children("/config/changes"))
    return cluster.znode(f"/config/changes/{children[-1]}")


ZERO = uuid.UUID(int=0)
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DEFAULT_SOURCE, TOPIC_SOURCE, DYNAMIC_BROKER_SOURCE, DYNAMIC_DEFAULT_SOURCE, STATIC_SOURCE = 5, 1, 2, 3, 4


# -- CreateTopics -------------------------------------------------------------------------------------


def test_create_topics_at_every_version(cluster: AdminCluster) -> None:
    for version in range(2, 8):
        name = f"created-v{version}"
        broker_id = version % 3 + 1
        topic = new_topic(name, 3, 2, configs={"retention.ms": "60000"})
        result = create(cluster, topic, version=version, broker_id=broker_id)[name]
        assert (result.error_code, result.error_message) == (ErrorCode.NONE, None)

        assignment = assignment_in_zk(cluster, name)
        assert assignment is not None and sorted(assignment) == [0, 1, 2]
        assert all(len(set(r)) == 2 and set(r) <= {1, 2, 3} for r in assignment.values())
        assert cluster.znode(f"/config/topics/{name}") == {"version": 1, "config": {"retention.ms": "60000"}}
        # The answer came once the answering broker knew every partition's leader.
        answered = cluster.metadata([name], broker_id).topics[0]
        assert [p.leader_id for p in answered.partitions] == [assignment[p][0] for p in range(3)]

        if version >= 5:
            configs = {c.name: c for c in result.configs}
            assert (result.num_partitions, result.replication_factor) == (3, 2)
            assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == (
                "60000",
                TOPIC_SOURCE,
            )
            assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == (
                "1073741824",
                DEFAULT_SOURCE,
            )
        else:
            assert (result.num_partitions, result.replication_factor, result.configs) == (-1, -1, [])
        zk_id = parse_topic_id(cluster.znode(f"/brokers/topics/{name}")["topic_id"])
        assert result.topic_id == (zk_id if version >= 7 else ZERO)
        assert answered.topic_id == zk_id
    cluster.wait_for(
        lambda: cluster.leaders_everywhere("created-v7", 3), 10, "every broker to see created-v7"
    )


def test_create_topics_errors(cluster: AdminCluster) -> None:
    create_ok(cluster, new_topic("exists", 1, 1), new_topic("collide_me", 1, 1))
    cases = {
        "bad name!": (new_topic("bad name!", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION, "illegal"),
        "x" * 250: (new_topic("x" * 250, 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION, "249"),
        "..": (new_topic("..", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION, ".."),
        "exists": (
            new_topic("exists", 1, 1),
            ErrorCode.TOPIC_ALREADY_EXISTS,
            "Topic 'exists' already exists.",
        ),
        "too-many-replicas": (
            new_topic("too-many-replicas", 1, 4),
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "larger than available brokers: 3",
        ),
        "no-partitions": (new_topic("no-partitions", 0, 1), ErrorCode.INVALID_PARTITIONS, "larger than 0"),
        "no-replicas": (
            new_topic("no-replicas", 1, 0),
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "larger than 0",
        ),
        "both": (new_topic("both", 2, -1, {0: [1]}), ErrorCode.INVALID_REQUEST, "Both numPartitions"),
        "twice-on-a-broker": (
            new_topic("twice-on-a-broker", assignment={0: [1, 1]}),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Duplicate replica assignment",
        ),
        "gap": (
            new_topic("gap", assignment={0: [1], 2: [2]}),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "consecutive",
        ),
        "uneven": (
            new_topic("uneven", assignment={0: [1], 1: [1, 2]}),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "same number of replicas",
        ),
        "ghost-broker": (
            new_topic("ghost-broker", assignment={0: [1, 9]}),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "[9]",
        ),
        "unknown-config": (
            new_topic("unknown-config", 1, 1, configs={"retention.forever": "1"}),
            ErrorCode.INVALID_CONFIG,
            "retention.forever",
        ),
        "bad-config": (
            new_topic("bad-config", 1, 1, configs={"retention.ms": "soon"}),
            ErrorCode.INVALID_CONFIG,
            "retention.ms",
        ),
        "null-config": (
            new_topic("null-config", 1, 1, configs={"retention.ms": None}),
            ErrorCode.INVALID_REQUEST,
            "retention.ms",
        ),
        "collide.me": (new_topic("collide.me", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION, "collide_me"),
    }
    body = [topic for topic, _, _ in cases.values()] + [new_topic("dup", 1, 1), new_topic("dup", 1, 1)]
    response = cluster.request(
        ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(topics=body, timeout_ms=10_000, validate_only=False)
    )
    results = response.topics
    assert [r.name for r in results] == [t.name for t in body]
    for result in results:
        if result.name == "dup":
            code, message = ErrorCode.INVALID_REQUEST, "multiple entries"
        else:
            _, code, message = cases[result.name]
        assert (result.error_code, result.name) == (code, result.name)
        assert message in result.error_message
        assert (result.num_partitions, result.replication_factor, result.configs) == (-1, -1, [])
        if result.error_code != ErrorCode.TOPIC_ALREADY_EXISTS and result.name != "..":
            assert assignment_in_zk(cluster, result.name) is None
    # v2 has error messages too.
    old = create(cluster, new_topic("exists", 1, 1), version=2)["exists"]
    assert (old.error_code, old.error_message) == (
        ErrorCode.TOPIC_ALREADY_EXISTS,
        "Topic 'exists' already exists.",
    )


def test_create_topics_validate_only(cluster: AdminCluster) -> None:
    result = create(
        cluster, new_topic("only-checked", 4, 3, configs={"cleanup.policy": "compact"}), validate_only=True
    )
    checked = result["only-checked"]
    assert (checked.error_code, checked.num_partitions, checked.replication_factor) == (ErrorCode.NONE, 4, 3)
    assert {c.name: c.value for c in checked.configs}["cleanup.policy"] == "compact"
    assert checked.topic_id == ZERO
    assert assignment_in_zk(cluster, "only-checked") is None
    assert cluster.znode("/config/topics/only-checked") is None


def test_create_topics_defaults_and_explicit_assignment(cluster: AdminCluster) -> None:
    create_ok(cluster, new_topic("by-default"), new_topic("placed", assignment={0: [3, 1], 1: [2, 3]}))
    assert len(assignment_in_zk(cluster, "by-default") or {}) == 1  # num.partitions=1
    assert len((assignment_in_zk(cluster, "by-default") or {0: []})[0]) == 1  # default.replication.factor=1
    assert cluster.znode("/config/topics/by-default") == {"version": 1, "config": {}}
    assert assignment_in_zk(cluster, "placed") == {0: [3, 1], 1: [2, 3]}
    assert [p.leader_id for p in cluster.metadata(["placed"]).topics[0].partitions] == [3, 2]


def test_create_topics_with_no_time_to_wait_times_out_but_creates(cluster: AdminCluster) -> None:
    result = create(cluster, new_topic("no-wait", 2, 1), timeout_ms=0)["no-wait"]
    assert result.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert assignment_in_zk(cluster, "no-wait") is not None
    cluster.wait_for(lambda: cluster.leaders_everywhere("no-wait", 2), 10, "no-wait's leaders")


def test_metadata_auto_creates_topics(cluster: AdminCluster) -> None:
    body = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="auto-made")], allow_auto_topic_creation=True
    )
    first = cluster.request(ApiKey.METADATA, 12, body, broker_id=2).topics[0]
    assert first.error_code == ErrorCode.LEADER_NOT_AVAILABLE
    assert len(assignment_in_zk(cluster, "auto-made") or {}) == 1
    assert cluster.znode("/config/topics/auto-made") == {"version": 1, "config": {}}
    cluster.wait_for(lambda: cluster.leaders_everywhere("auto-made", 1), 10, "auto-made's leader")
    again = cluster.request(ApiKey.METADATA, 12, body, broker_id=3).topics[0]
    assert again.error_code == ErrorCode.NONE
    assert cluster.metadata(["not-made"]).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert assignment_in_zk(cluster, "not-made") is None

    create_ok(cluster, new_topic("auto_twin", 1, 1))
    body = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="auto.twin")], allow_auto_topic_creation=True
    )
    assert (
        cluster.request(ApiKey.METADATA, 12, body).topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    )
    assert assignment_in_zk(cluster, "auto.twin") is None


# -- DeleteTopics -------------------------------------------------------------------------------------


def test_delete_topics_at_every_version(cluster: AdminCluster) -> None:
    names = [f"deleted-v{v}" for v in range(1, 7)] + ["deleted-by-id"]
    create_ok(cluster, *(new_topic(n, 2, 2) for n in names))
    for version in range(1, 7):
        name = f"deleted-v{version}"
        broker_id = version % 3 + 1
        [result] = delete(cluster, name, version=version, broker_id=broker_id)
        assert (result.name, result.error_code) == (name, ErrorCode.NONE)
        assert not cluster.metadata([name], broker_id).topics[0].partitions  # gone when answered
        cluster.wait_for(
            lambda n=name: assignment_in_zk(cluster, n) is None, 10, f"{name} to leave ZooKeeper"
        )
    topic_id = cluster.metadata(["deleted-by-id"]).topics[0].topic_id
    body = DeleteTopicsRequest(
        topics=[DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=topic_id)], timeout_ms=20_000
    )
    [result] = cluster.request(ApiKey.DELETE_TOPICS, 6, body).responses
    assert (result.name, result.topic_id, result.error_code) == ("deleted-by-id", topic_id, ErrorCode.NONE)
    cluster.wait_for(lambda: cluster.znode("/config/topics/deleted-by-id") is None, 10, "the configs to go")
    cluster.wait_for(lambda: not cluster.zk.get_children("/admin/delete_topics"), 10, "deletions to finish")


def test_delete_topics_errors(cluster: AdminCluster) -> None:
    create_ok(cluster, new_topic("kept", 1, 1))
    unknown, internal = delete(cluster, "never-was", "__consumer_offsets", version=5)
    assert (unknown.error_code, unknown.error_message) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "Topic 'never-was' does not exist.",
    )
    assert internal.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    [old] = delete(cluster, "never-was", version=1)
    assert old.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    ghost = uuid.uuid4()
    body = DeleteTopicsRequest(
        topics=[DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=ghost)], timeout_ms=1000
    )
    [by_id] = cluster.request(ApiKey.DELETE_TOPICS, 6, body).responses
    assert (by_id.name, by_id.topic_id, by_id.error_code) == (None, ghost, ErrorCode.UNKNOWN_TOPIC_ID)
    # Neither a name nor an ID names no topic (this was answered NONE).
    body = DeleteTopicsRequest(
        topics=[DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=ZERO)], timeout_ms=1000
    )
    [nameless] = cluster.request(ApiKey.DELETE_TOPICS, 6, body).responses
    assert (nameless.name, nameless.error_code) == (None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    both = DeleteTopicsRequest(
        topics=[
            DeleteTopicsRequest.DeleteTopicState(name="kept", topic_id=ghost),
            DeleteTopicsRequest.DeleteTopicState(name="kept", topic_id=ZERO),
        ],
        timeout_ms=1000,
    )
    results = cluster.request(ApiKey.DELETE_TOPICS, 6, both).responses
    assert [r.error_code for r in results] == [ErrorCode.INVALID_REQUEST] * 2
    assert assignment_in_zk(cluster, "kept") is not None


# -- CreatePartitions ---------------------------------------------------------------------------------


def test_create_partitions_at_every_version(cluster: AdminCluster) -> None:
    create_ok(cluster, new_topic("grown", 2, 2))
    before = cluster.znode("/brokers/topics/grown")
    for version in range(4):
        count = 3 + version
        broker_id = version % 3 + 1
        result = grow(cluster, "grown", count, version=version, broker_id=broker_id)
        assert (result.error_code, result.error_message) == (ErrorCode.NONE, None)
        partitions = cluster.metadata(["grown"], broker_id).topics[0].partitions
        assert len(partitions) == count and all(p.leader_id >= 0 for p in partitions)
    after = cluster.znode("/brokers/topics/grown")
    assert after["topic_id"] == before["topic_id"]
    assert {p: r for p, r in after["partitions"].items() if int(p) < 2} == before["partitions"]
    assert all(len(set(r)) == 2 for r in after["partitions"].values())

    assert grow(cluster, "grown", 8, [[1, 2], [3, 1]]).error_code == ErrorCode.NONE
    assert {p: r for p, r in (assignment_in_zk(cluster, "grown") or {}).items() if p >= 6} == {
        6: [1, 2],
        7: [3, 1],
    }

    checked = grow(cluster, "grown", 10, validate_only=True)
    assert checked.error_code == ErrorCode.NONE and len(assignment_in_zk(cluster, "grown") or {}) == 8


@pytest.mark.parametrize(
    ("count", "assignments", "code", "message"),
    [
        (
            1,
            None,
            ErrorCode.INVALID_PARTITIONS,
            "Topic currently has 2 partitions, which is higher than the requested 1.",
        ),
        (2, None, ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partitions."),
        (3, [[1, 7]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 7."),
        (3, [[1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Inconsistent replication factor"),
        (4, [[1, 2]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "but 1 assignments provided"),
    ],
)
def test_create_partitions_errors(
    cluster: AdminCluster, count: int, assignments: list[list[int]] | None, code: int, message: str
) -> None:
    if assignment_in_zk(cluster, "not-grown") is None:
        create_ok(cluster, new_topic("not-grown", 2, 2))
    result = grow(cluster, "not-grown", count, assignments)
    assert (result.error_code, result.error_message) == (code, message) or (
        result.error_code == code and message in result.error_message
    )
    assert len(assignment_in_zk(cluster, "not-grown") or {}) == 2


def test_create_partitions_of_unknown_or_repeated_topics(cluster: AdminCluster) -> None:
    assert grow(cluster, "no-such-topic", 3).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    create_ok(cluster, new_topic("asked-twice", 1, 1))
    topic = CreatePartitionsRequest.CreatePartitionsTopic(name="asked-twice", count=2, assignments=None)
    body = CreatePartitionsRequest(topics=[topic, topic], timeout_ms=1000, validate_only=False)
    results = cluster.request(ApiKey.CREATE_PARTITIONS, 3, body).results
    assert [(r.error_code, r.error_message) for r in results] == [
        (ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
    ] * 2


# -- DescribeConfigs ----------------------------------------------------------------------------------


def test_describe_configs_at_every_version(cluster: AdminCluster) -> None:
    create_ok(cluster, new_topic("described", 1, 1, configs={"retention.ms": "86400000"}))
    for version in range(1, 5):
        result = describe(cluster, TOPIC, "described", version=version)
        assert (result.error_code, result.error_message, result.resource_name) == (
            ErrorCode.NONE,
            None,
            "described",
        )
        configs = {c.name: c for c in result.configs}
        assert set(configs) >= {"retention.ms", "segment.bytes", "cleanup.policy", "min.insync.replicas"}
        retention = configs["retention.ms"]
        assert (retention.value, retention.config_source, retention.read_only, retention.is_sensitive) == (
            "86400000",
            TOPIC_SOURCE,
            False,
            False,
        )
        assert (retention.synonyms[0].name, retention.synonyms[0].source) == ("retention.ms", TOPIC_SOURCE)
        segment = configs["segment.bytes"]
        assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
            ("log.segment.bytes", "1073741824", DEFAULT_SOURCE)
        ]
        # Type and documentation came with v3.
        assert retention.config_type == (5 if version >= 3 else 0)  # LONG
        assert bool(retention.documentation) == (version >= 3)

    only = describe(cluster, TOPIC, "described", ["retention.ms", "no.such.config"])
    assert [c.name for c in only.configs] == ["retention.ms"]

    broker = {c.name: c for c in describe(cluster, BROKER, "2", broker_id=2).configs}
    assert (broker["broker.id"].value, broker["broker.id"].config_source, broker["broker.id"].read_only) == (
        "2",
        STATIC_SOURCE,
        True,
    )
    assert (broker["num.partitions"].value, broker["num.partitions"].config_source) == ("1", STATIC_SOURCE)
    hours = broker["log.retention.hours"]
    assert (hours.value, hours.config_source, hours.read_only, hours.config_type) == (
        "168",
        DEFAULT_SOURCE,
        False,
        3,
    )
    assert describe(cluster, BROKER, "").configs == []  # no cluster-wide dynamic defaults yet


@pytest.mark.parametrize(
    ("resource_type", "name", "code", "message"),
    [
        (TOPIC, "no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "does not exist"),
        (TOPIC, "bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION, "illegal"),
        (
            BROKER,
            "3",
            ErrorCode.INVALID_REQUEST,
            "Unexpected broker id, expected 1 or empty string, but received 3",
        ),
        (BROKER, "one", ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: one"),
        (BROKER_LOGGER, "3", ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1 but received 3"),
    ],
)
def test_describe_configs_errors(
    cluster: AdminCluster, resource_type: int, name: str, code: int, message: str
) -> None:
    result = describe(cluster, resource_type, name)
    assert (result.error_code, result.configs, result.resource_type, result.resource_name) == (
        code,
        [],
        resource_type,
        name,
    )
    assert message in result.error_message


# -- AlterConfigs and IncrementalAlterConfigs ----------------------------------------------------------


def test_alter_configs_at_every_version(cluster: AdminCluster) -> None:
    create_ok(
        cluster, new_topic("altered", 1, 1, configs={"retention.ms": "1000", "segment.bytes": "100000"})
    )
    for version in range(3):
        value = str(2000 + version)
        result = alter(
            cluster, TOPIC, "altered", {"retention.ms": value}, version=version, broker_id=version + 1
        )
        assert (result.error_code, result.error_message, result.resource_name) == (
            ErrorCode.NONE,
            None,
            "altered",
        )
        # AlterConfigs replaces the whole set: segment.bytes is gone.
        assert cluster.znode("/config/topics/altered") == {"version": 1, "config": {"retention.ms": value}}
        assert latest_change(cluster) == {"version": 2, "entity_path": "topics/altered"}
        seen = described(cluster, TOPIC, "altered", "retention.ms", broker_id=3 - version)
        assert (seen.value, seen.config_source) == (value, TOPIC_SOURCE)
    assert described(cluster, TOPIC, "altered", "segment.bytes").config_source == DEFAULT_SOURCE

    checked = alter(cluster, TOPIC, "altered", {"retention.ms": "1"}, validate_only=True)
    assert checked.error_code == ErrorCode.NONE
    assert cluster.znode("/config/topics/altered")["config"] == {"retention.ms": "2002"}


@pytest.mark.parametrize(
    ("name", "configs", "code", "message"),
    [
        (
            "altered-badly",
            {"retention.forever": "1"},
            ErrorCode.INVALID_CONFIG,
            "Unknown topic config name: retention.forever",
        ),
        (
            "altered-badly",
            {"retention.ms": "soon"},
            ErrorCode.INVALID_CONFIG,  # Kafka 3.3+ (KAFKA-13899)
            "Invalid config value for resource ConfigResource(type=TOPIC, name='altered-badly')",
        ),
        (
            "altered-badly",
            {"retention.ms": None},
            ErrorCode.INVALID_REQUEST,
            "Null value not supported for : retention.ms",
        ),
        ("never-created", {"retention.ms": "1"}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "does not exist"),
    ],
)
def test_alter_configs_errors(
    cluster: AdminCluster, name: str, configs: dict[str, str | None], code: int, message: str
) -> None:
    if name == "altered-badly" and assignment_in_zk(cluster, name) is None:
        create_ok(cluster, new_topic(name, 1, 1, configs={"retention.ms": "5"}))
    result = alter(cluster, TOPIC, name, configs)
    assert result.error_code == code and message in result.error_message
    if name == "altered-badly":
        assert cluster.znode(f"/config/topics/{name}")["config"] == {"retention.ms": "5"}


def test_incremental_alter_configs(cluster: AdminCluster) -> None:
    create_ok(cluster, new_topic("incremented", 1, 1, configs={"segment.bytes": "200000"}))
    steps = [
        (
            [("retention.ms", SET, "5000"), ("cleanup.policy", APPEND, "compact")],
            {"segment.bytes": "200000", "retention.ms": "5000", "cleanup.policy": "delete,compact"},
        ),
        (
            [("cleanup.policy", SUBTRACT, "delete"), ("segment.bytes", DELETE, None)],
            {"retention.ms": "5000", "cleanup.policy": "compact"},
        ),
    ]
    for version, (ops, expected) in enumerate(steps):
        result = alter_incrementally(cluster, TOPIC, "incremented", ops, version=version)
        assert (result.error_code, result.error_message) == (ErrorCode.NONE, None)
        assert cluster.znode("/config/topics/incremented")["config"] == expected
    assert described(cluster, TOPIC, "incremented", "cleanup.policy", broker_id=2).value == "compact"

    errors = [
        (
            [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)],
            ErrorCode.INVALID_REQUEST,
            "duplicate config keys : retention.ms",
        ),
        (
            [("retention.ms", APPEND, "1")],
            ErrorCode.INVALID_CONFIG,
            "append is not allowed for config key: retention.ms",
        ),
        (
            [("retention.ms", SET, None)],
            ErrorCode.INVALID_REQUEST,
            "Null value not supported for : SET:retention.ms",
        ),
        ([("retention.ms", 7, "1")], ErrorCode.INVALID_REQUEST, "Unknown config operation 7"),
        (
            [("retention.forever", SET, "1")],
            ErrorCode.INVALID_CONFIG,
            "Unknown topic config name: retention.forever",
        ),
    ]
    for ops, code, message in errors:
        result = alter_incrementally(cluster, TOPIC, "incremented", ops)
        assert result.error_code == code and message in result.error_message, result
    assert cluster.znode("/config/topics/incremented")["config"] == steps[-1][1]
    logger = alter_incrementally(cluster, BROKER_LOGGER, "1", [("root", DELETE, None)])
    assert logger.error_code == ErrorCode.INVALID_REQUEST  # the root logger's level cannot be unset


def test_config_changes_reach_the_logs_of_every_broker(cluster: AdminCluster) -> None:
    create_ok(cluster, new_topic("limited", assignment={0: [1], 1: [2], 2: [3]}))
    for partition in range(3):
        assert produce(cluster, "limited", partition, partition + 1, 5, 100).error_code == ErrorCode.NONE
    assert alter(cluster, TOPIC, "limited", {"max.message.bytes": "200"}).error_code == ErrorCode.NONE
    too_large = (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE)
    for partition in range(3):
        cluster.wait_for(
            lambda p=partition: produce(cluster, "limited", p, p + 1, 5, 100).error_code in too_large,
            10,
            f"broker {partition + 1} to apply max.message.bytes",
        )
    assert produce(cluster, "limited", 1, 2, 1, 10).error_code == ErrorCode.NONE


def test_a_new_topic_has_its_configs_on_every_broker(cluster: AdminCluster) -> None:
    # Created through broker 1; brokers 2 and 3 read the configs from the /config/topics watch before
    # the controller has them open the logs.
    topic = new_topic("born-limited", assignment={0: [2], 1: [3]}, configs={"max.message.bytes": "200"})
    create_ok(cluster, topic)
    for partition, broker_id in ((0, 2), (1, 3)):
        result = produce(cluster, "born-limited", partition, broker_id, 5, 100)
        assert result.error_code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE)


# -- DeleteRecords ------------------------------------------------------------------------------------


def delete_records(
    cluster: AdminCluster, topic: str, offsets: dict[int, int], *, version: int = 2, broker_id: int = 1
) -> dict[int, Any]:
    body = DeleteRecordsRequest(
        topics=[
            DeleteRecordsRequest.DeleteRecordsTopic(
                name=topic,
                partitions=[
                    DeleteRecordsRequest.DeleteRecordsPartition(partition_index=p, offset=o)
                    for p, o in offsets.items()
                ],
            )
        ],
        timeout_ms=5000,
    )
    response = cluster.request(ApiKey.DELETE_RECORDS, version, body, broker_id)
    return {p.partition_index: p for p in response.topics[0].partitions}


def test_delete_records_at_every_version(cluster: AdminCluster) -> None:
    create_ok(cluster, new_topic("trimmed", assignment={0: [1], 1: [2]}))
    assert produce(cluster, "trimmed", 0, 1, 10).error_code == ErrorCode.NONE
    for version, offset in enumerate((2, 4, 7)):
        result = delete_records(cluster, "trimmed", {0: offset}, version=version)[0]
        assert (result.error_code, result.low_watermark) == (ErrorCode.NONE, offset)
        assert earliest_offset(cluster, "trimmed", 0, 1) == offset
    results = delete_records(cluster, "trimmed", {0: 11, 1: 0, 5: 0})
    assert (results[0].error_code, results[0].low_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
    assert results[1].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER  # partition 1 is led by broker 2
    assert results[5].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # -1 means the high watermark.
    assert delete_records(cluster, "trimmed", {0: -1})[0].low_watermark == 10
    assert produce(cluster, "trimmed", 0, 1, 1).base_offset == 10
    assert earliest_offset(cluster, "trimmed", 0, 1) == 10


def test_delete_records_needs_the_delete_policy(cluster: AdminCluster) -> None:
    create_ok(cluster, new_topic("compacted", assignment={0: [1]}, configs={"cleanup.policy": "compact"}))
    result = delete_records(cluster, "compacted", {0: 0})[0]
    assert (result.error_code, result.low_watermark) == (ErrorCode.POLICY_VIOLATION, -1)


# -- InitProducerId -----------------------------------------------------------------------------------


def init_producer_id(
    cluster: AdminCluster,
    version: int,
    transactional_id: str | None = None,
    producer_id: int = -1,
    epoch: int = -1,
    broker_id: int = 1,
) -> Any:
    body = InitProducerIdRequest(
        transactional_id=transactional_id,
        transaction_timeout_ms=60_000,
        producer_id=producer_id,
        producer_epoch=epoch,
    )
    return cluster.request(ApiKey.INIT_PRODUCER_ID, version, body, broker_id)


def test_init_producer_id_at_every_version(cluster: AdminCluster) -> None:
    ids = []
    for version in range(5):
        for broker_id in (1, 2, 3):
            response = init_producer_id(cluster, version, broker_id=broker_id)
            assert (response.error_code, response.producer_epoch) == (ErrorCode.NONE, 0)
            ids.append((broker_id, response.producer_id))
    assert len({i for _, i in ids}) == len(ids)
    # Each broker hands out ids from its own block, one after the other.
    for broker_id in (1, 2, 3):
        mine = [i for b, i in ids if b == broker_id]
        assert mine == list(range(mine[0], mine[0] + 5)) and mine[0] % 1000 == 0
    block = cluster.znode("/latest_producer_id_block")
    assert block["version"] == 1 and int(block["block_end"]) - int(block["block_start"]) == 999

    # An idempotent producer asking again (KIP-360) gets a new id, as from Kafka.
    again = init_producer_id(cluster, 4, producer_id=ids[0][1], epoch=0)
    assert (again.error_code, again.producer_epoch) == (ErrorCode.NONE, 0) and again.producer_id not in dict(
        ids
    ).values()


@pytest.mark.parametrize(
    ("transactional_id", "producer_id", "epoch", "code"),
    [
        # No broker leads the id's __transaction_state partition (the topic does not even exist yet).
        ("a-transaction", -1, -1, ErrorCode.NOT_COORDINATOR),
        ("", -1, -1, ErrorCode.INVALID_REQUEST),
        (None, 5, -1, ErrorCode.INVALID_REQUEST),
        (None, -1, 3, ErrorCode.INVALID_REQUEST),
    ],
)
def test_init_producer_id_errors(
    cluster: AdminCluster, transactional_id: str | None, producer_id: int, epoch: int, code: int
) -> None:
    response = init_producer_id(cluster, 4, transactional_id, producer_id, epoch)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (code, -1, -1)


# -- clusters of their own ----------------------------------------------------------------------------


def test_refusals_of_a_broker_without_deletion_or_enough_brokers(
    tmp_path: Path, zookeeper_server: ZooKeeperServer
) -> None:
    overrides = {"delete.topic.enable": "false", "default.replication.factor": "2"}
    with admin_cluster(tmp_path, zookeeper_server, size=1, broker_overrides=overrides) as lone:
        create_ok(lone, new_topic("kept", 1, 1))
        for version in range(1, 7):
            [result] = delete(lone, "kept", version=version)
            expected = ErrorCode.INVALID_REQUEST if version < 3 else ErrorCode.TOPIC_DELETION_DISABLED
            assert result.error_code == expected
        assert assignment_in_zk(lone, "kept") is not None

        # The default replication factor (2) is more than the live brokers (1).
        result = create(lone, new_topic("defaulted"))["defaulted"]
        assert result.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
        body = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="auto")], allow_auto_topic_creation=True
        )
        auto = lone.request(ApiKey.METADATA, 12, body).topics[0]
        assert auto.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
        assert assignment_in_zk(lone, "auto") is None


def test_requests_time_out_while_the_controller_is_paused(
    tmp_path: Path, zookeeper_server: ZooKeeperServer
) -> None:
    with admin_cluster(tmp_path, zookeeper_server, size=1) as lone:
        create_ok(lone, new_topic("before", 1, 1))
        lone.controller.signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            created = create(lone, new_topic("during", 2, 1), timeout_ms=300)["during"]
            assert created.error_code == ErrorCode.REQUEST_TIMED_OUT
            assert 0.3 <= time.monotonic() - started < 3
            assert assignment_in_zk(lone, "during") is not None  # written all the same
            assert grow(lone, "before", 2, timeout_ms=300).error_code == ErrorCode.REQUEST_TIMED_OUT
            [deleted] = delete(lone, "before", timeout_ms=300)
            assert deleted.error_code == ErrorCode.REQUEST_TIMED_OUT
            queued = grow(lone, "before", 3)
            assert (queued.error_code, queued.error_message) == (
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                "The topic is queued for deletion.",
            )
        finally:
            lone.controller.signal(signal.SIGCONT)
        lone.wait_for(lambda: lone.leaders_everywhere("during", 2), 10, "the resumed controller")
        lone.wait_for(lambda: assignment_in_zk(lone, "before") is None, 10, "the deletion to finish")


def test_dynamic_broker_configs_and_racks(tmp_path: Path, zookeeper_server: ZooKeeperServer) -> None:
    racks = {1: "rack-a", 2: "rack-a", 3: "rack-b"}
    with admin_cluster(tmp_path, zookeeper_server, racks=racks) as racked:
        # Replicas spread over the racks the brokers registered with.
        create_ok(racked, new_topic("spread", 6, 2))
        for replicas in (assignment_in_zk(racked, "spread") or {}).values():
            assert {racks[b] for b in replicas} == {"rack-a", "rack-b"}

        # Per-broker: only broker 2 sees it, in its broker and topic configs.
        ops = [("log.retention.ms", SET, "1234")]
        result = alter_incrementally(racked, BROKER, "2", ops, broker_id=2)
        assert (result.error_code, result.error_message) == (ErrorCode.NONE, None)
        assert racked.znode("/config/brokers/2") == {"version": 1, "config": {"log.retention.ms": "1234"}}
        assert latest_change(racked) == {"version": 2, "entity_path": "brokers/2"}
        own = described(racked, BROKER, "2", "log.retention.ms", broker_id=2)
        assert (own.value, own.config_source, own.read_only) == ("1234", DYNAMIC_BROKER_SOURCE, False)
        topic = described(racked, TOPIC, "spread", "retention.ms", broker_id=2)
        assert (topic.value, topic.config_source) == ("1234", DYNAMIC_BROKER_SOURCE)
        assert described(racked, TOPIC, "spread", "retention.ms", broker_id=1).value == "604800000"

        # Cluster-wide defaults reach every broker through the change notification.
        assert alter(racked, BROKER, "", {"log.segment.bytes": "5000000"}).error_code == ErrorCode.NONE
        assert racked.znode("/config/brokers/<default>") == {
            "version": 1,
            "config": {"log.segment.bytes": "5000000"},
        }
        for broker_id in (1, 2, 3):
            racked.wait_for(
                lambda b=broker_id: (
                    described(racked, TOPIC, "spread", "segment.bytes", b).config_source
                    == DYNAMIC_DEFAULT_SOURCE
                ),
                10,
                f"broker {broker_id} to apply the dynamic default",
            )
        defaults = describe(racked, BROKER, "", broker_id=3)
        assert [(c.name, c.value, c.config_source) for c in defaults.configs] == [
            ("log.segment.bytes", "5000000", DYNAMIC_DEFAULT_SOURCE)
        ]

        refused = [
            (
                BROKER,
                "1",
                {"num.partitions": "2"},
                1,
                ErrorCode.INVALID_REQUEST,
                "Cannot update these configs dynamically: num.partitions",
            ),
            (BROKER, "", {"log.retention.ms": "soon"}, 1, ErrorCode.INVALID_REQUEST, "log.retention.ms"),
            (
                BROKER,
                "3",
                {"log.retention.ms": "1"},
                1,
                ErrorCode.INVALID_REQUEST,
                "Unexpected broker id, expected 1, but received 3",
            ),
            (
                BROKER,
                "x",
                {"log.retention.ms": "1"},
                1,
                ErrorCode.INVALID_REQUEST,
                "Broker id must be an integer",
            ),
        ]
        for resource_type, name, configs, broker_id, code, message in refused:
            result = alter(racked, resource_type, name, configs, broker_id=broker_id)
            assert result.error_code == code and message in result.error_message, result
        assert racked.znode("/config/brokers/1") is None

        # Gone again: the static value (the default here) is back.
        assert alter(racked, BROKER, "2", {}, broker_id=2).error_code == ErrorCode.NONE
        assert described(racked, TOPIC, "spread", "retention.ms", broker_id=2).value == "604800000"
