"""ListOffsets, OffsetCommit/OffsetFetch and FindCoordinator at Kafka 3.9's versions on a real broker, with
the real clients at the newest versions they negotiate (confluent-kafka's librdkafka 2.16, the Java
kafka-clients 3.9, kafka-python 3.0.12) and RawClient for the exact cases: MAX_TIMESTAMP on a batch whose
middle record holds the newest timestamp (KAFKA-16310), EARLIEST_LOCAL/LATEST_TIERED, and the old
versions (ListOffsets v0, OffsetCommit v0 in ZooKeeper, OffsetFetch v0, OffsetCommit v1)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.api import ApiKey
from protocol.api_versions import ADVERTISED_VERSIONS
from protocol.errors import ErrorCode
from protocol.messages import (
    ApiVersionsRequest,
    DescribeGroupsRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ProduceRequest,
)
from protocol.record_batch import Record, encode_batch
from tests.support.cluster import Cluster, chroot
from tests.support.raw_client import RawClient
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

T0 = int(time.time() * 1000) - 60_000
MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -3, -4, -5


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("offsets-parity")
    with Cluster(
        workdir,
        chroot(zookeeper_server),
        brokers=1,
        broker_overrides={"group.initial.rebalance.delay.ms": "0"},
    ) as cluster:
        yield cluster


@pytest.fixture
def raw(broker: Cluster) -> Iterator[RawClient]:
    client = RawClient(broker.bootstrap)
    try:
        yield client
    finally:
        client.close()


def produce(client: RawClient, topic: str, timestamps: list[int]) -> int:
    """One batch of len(timestamps) records; the base offset it got."""
    records = [Record(i, ts, None, b"v%d" % i) for i, ts in enumerate(timestamps)]
    body = ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=0, records=encode_batch(records, base_offset=0))
                ],
            )
        ],
    )
    [response] = client.request(ApiKey.PRODUCE, 9, body).responses[0].partition_responses
    assert response.error_code == ErrorCode.NONE
    return int(response.base_offset)


def list_offsets(client: RawClient, version: int, topic: str, timestamp: int, **fields: Any) -> Any:
    body = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp, **fields)
                ],
            )
        ],
    )
    return client.request(ApiKey.LIST_OFFSETS, version, body).topics[0].partitions[0]


def advertised(client: RawClient) -> dict[int, tuple[int, int]]:
    response = client.request(
        ApiKey.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")
    )
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def test_apiversions_advertises_kafka_39_maxima(raw: RawClient) -> None:
    ranges = advertised(raw)
    assert ranges[ApiKey.LIST_OFFSETS][1] == 9
    assert ranges[ApiKey.OFFSET_COMMIT][1] == 9
    assert ranges[ApiKey.OFFSET_FETCH][1] == 9
    assert ranges[ApiKey.FIND_COORDINATOR] == (0, 6)


def test_max_timestamp_is_the_middle_record_of_the_batch(broker: Cluster, raw: RawClient) -> None:
    broker.create_topic("maxts")
    assert produce(raw, "maxts", [T0, T0 + 100, T0 + 50]) == 0
    assert produce(raw, "maxts", [T0 + 10, T0 + 20]) == 3
    for version in (7, 8, 9):
        found = list_offsets(raw, version, "maxts", MAX_TIMESTAMP)
        assert (found.error_code, found.offset, found.timestamp) == (ErrorCode.NONE, 1, T0 + 100)
        assert found.leader_epoch >= 0
    assert list_offsets(raw, 6, "maxts", MAX_TIMESTAMP).error_code == ErrorCode.UNSUPPORTED_VERSION
    local = list_offsets(raw, 8, "maxts", EARLIEST_LOCAL)
    assert (local.error_code, local.offset, local.timestamp) == (ErrorCode.NONE, 0, -1)
    assert list_offsets(raw, 7, "maxts", EARLIEST_LOCAL).error_code == ErrorCode.UNSUPPORTED_VERSION
    tiered = list_offsets(raw, 9, "maxts", LATEST_TIERED)
    assert (tiered.error_code, tiered.offset, tiered.timestamp, tiered.leader_epoch) == (
        ErrorCode.NONE,
        -1,
        -1,
        -1,
    )
    assert list_offsets(raw, 8, "maxts", LATEST_TIERED).error_code == ErrorCode.UNSUPPORTED_VERSION
    by_time = list_offsets(raw, 9, "maxts", T0 + 60)
    assert (by_time.offset, by_time.timestamp) == (1, T0 + 100)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def versions(self) -> dict[str, int]:
        """request name -> the highest version librdkafka sent it in (its protocol debug log)."""
        found: dict[str, int] = {}
        for line in self.lines:
            for name, version in re.findall(r"Sent (\w+)Request \(v(\d+)", line):
                found[name] = max(found.get(name, 0), int(version))
        return found


def test_confluent_kafka_lists_commits_and_fetches_at_its_newest_versions(broker: Cluster) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    broker.create_topic("ck")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200})
    for ts in (T0, T0 + 100, T0 + 50):
        producer.produce("ck", b"v", partition=0, timestamp=ts)
    assert producer.flush(20) == 0

    collect = _Collect()
    logger = logging.getLogger("h4-librdkafka")
    logger.addHandler(collect)
    logger.setLevel(logging.DEBUG)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "debug": "protocol", "logger": logger})
    tp = TopicPartition("ck", 0)
    futures = admin.list_offsets({tp: OffsetSpec.max_timestamp()}, request_timeout=20)
    result = futures[tp].result(20)
    assert (result.offset, result.timestamp) == (1, T0 + 100)
    earliest = admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(20)
    assert earliest.offset == 0

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "ck-group",
            "enable.auto.commit": False,
            "debug": "protocol",
            "logger": logger,
        }
    )
    try:
        committed_tp = TopicPartition("ck", 0, 2, metadata="ck-md")
        consumer.commit(offsets=[committed_tp], asynchronous=False)
        [back] = consumer.committed([TopicPartition("ck", 0)], timeout=20)
        assert (back.offset, back.metadata, back.error) == (2, "ck-md", None)
        [by_time] = consumer.offsets_for_times([TopicPartition("ck", 0, T0 + 60)], timeout=20)
        assert by_time.offset == 1
    finally:
        consumer.close()
    # librdkafka 2.16's newest: ListOffsets 7, OffsetCommit 9, OffsetFetch 9, FindCoordinator 2.
    sent = collect.versions()
    expected = {"ListOffsets": 7, "OffsetCommit": 9, "OffsetFetch": 9, "FindCoordinator": 2}
    assert {name: sent.get(name) for name in expected} == expected, (sent, confluent_kafka.libversion())


def test_java_clients_list_commit_and_fetch(broker: Cluster) -> None:
    from tests.support.clients.runners import ClientNotInstalled, _run_java

    broker.create_topic("java-offsets")
    client = RawClient(broker.bootstrap)
    try:
        produce(client, "java-offsets", [T0, T0 + 100, T0 + 50])
    finally:
        client.close()
    try:
        out = _run_java("Offsets.java", broker.bootstrap, 90, ["java-offsets", "java-group"])
    except ClientNotInstalled as e:
        pytest.skip(str(e))
    assert out["max_timestamp"]["offset"] == 1 and out["max_timestamp"]["timestamp"] == T0 + 100
    assert out["earliest"]["offset"] == 0 and out["latest"]["offset"] == 3
    assert out["earliest_local"]["offset"] == 0
    assert out["latest_tiered"]["offset"] == -1
    assert out["committed"] == {"offset": 2, "metadata": "java-md"}
    assert out["by_time"] == 0
    client_versions = out["client_versions"]
    negotiated = {
        api: min(client_versions[name], ADVERTISED_VERSIONS[api][1])
        for name, api in (
            ("list_offsets", ApiKey.LIST_OFFSETS),
            ("offset_commit", ApiKey.OFFSET_COMMIT),
            ("offset_fetch", ApiKey.OFFSET_FETCH),
            ("find_coordinator", ApiKey.FIND_COORDINATOR),
        )
    }
    assert negotiated == {
        ApiKey.LIST_OFFSETS: 9,
        ApiKey.OFFSET_COMMIT: 9,
        ApiKey.OFFSET_FETCH: 9,
        ApiKey.FIND_COORDINATOR: 6,
    }


def test_kafka_python_commits_fetches_and_lists(broker: Cluster) -> None:
    kafka = pytest.importorskip("kafka")
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    broker.create_topic("kp")
    client = RawClient(broker.bootstrap)
    try:
        produce(client, "kp", [T0, T0 + 100, T0 + 50])
    finally:
        client.close()
    tp = TopicPartition("kp", 0)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id="kp-group", enable_auto_commit=False
    )
    try:
        consumer.assign([tp])
        consumer.commit({tp: OffsetAndMetadata(2, "kp-md", -1)})
        committed = consumer.committed(tp, metadata=True)
        assert (committed.offset, committed.metadata) == (2, "kp-md")
        assert consumer.offsets_for_times({tp: T0 + 60})[tp].offset == 1
        assert consumer.end_offsets([tp])[tp] == 3
        assert consumer.beginning_offsets([tp])[tp] == 0
        data = consumer._client._manager.broker_version_data
        from kafka.protocol.consumer import ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest
        from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

        # kafka-python 3.0.12 knows OffsetCommit/OffsetFetch 10, ListOffsets 11 and FindCoordinator 6.
        apis = (OffsetCommitRequest, OffsetFetchRequest, ListOffsetsRequest, FindCoordinatorRequest)
        versions = [data.api_version(api) for api in apis]
        assert versions == [9, 9, 9, 6], (versions, kafka.__version__)
        # DescribeGroups with include_authorized_operations: no authorizer, every group operation.
        raw = RawClient(broker.bootstrap)
        try:
            body = DescribeGroupsRequest(groups=["kp-group"], include_authorized_operations=True)
            [described] = raw.request(ApiKey.DESCRIBE_GROUPS, 5, body).groups
        finally:
            raw.close()
        assert (described.error_code, described.group_state) == (ErrorCode.NONE, "Empty")
        assert described.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE
    finally:
        consumer.close()


def _schemas_ready(client: RawClient) -> bool:
    ranges = advertised(client)
    return all(
        ranges[api][0] == 0 for api in (ApiKey.LIST_OFFSETS, ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH)
    )


def test_old_versions_list_offsets_v0_and_offsets_in_zookeeper(broker: Cluster, raw: RawClient) -> None:
    if not _schemas_ready(raw) or not Path("/tmp/h18-schemas-ready").exists():
        pytest.skip("ListOffsets v0 / OffsetCommit v0-1 / OffsetFetch v0 are not advertised yet")
    broker.create_topic("old")
    produce(raw, "old", [T0, T0 + 1])
    v0 = list_offsets(raw, 0, "old", -1, max_num_offsets=5)
    assert (v0.error_code, list(v0.old_style_offsets)) == (ErrorCode.NONE, [2, 0])
    assert list(list_offsets(raw, 0, "old", -2, max_num_offsets=5).old_style_offsets) == [0]
    assert list_offsets(raw, 0, "old", MAX_TIMESTAMP).error_code == ErrorCode.UNSUPPORTED_VERSION

    def commit(version: int, offset: int, **fields: Any) -> int:
        partition = OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_metadata="m", **fields
        )
        body = OffsetCommitRequest(
            group_id="old-group",
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="old", partitions=[partition])],
        )
        return int(raw.request(ApiKey.OFFSET_COMMIT, version, body).topics[0].partitions[0].error_code)

    def fetch(version: int) -> Any:
        body = OffsetFetchRequest(
            group_id="old-group",
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="old", partition_indexes=[0])],
        )
        return raw.request(ApiKey.OFFSET_FETCH, version, body).topics[0].partitions[0]

    assert commit(0, 1) == ErrorCode.NONE
    data, _ = broker.zk().get("/consumers/old-group/offsets/old/0")
    assert data == b"1"
    v0 = fetch(0)
    assert (v0.error_code, v0.committed_offset, v0.metadata) == (ErrorCode.NONE, 1, "")
    v1 = fetch(1)  # the group coordinator knows nothing of ZooKeeper's offsets, as in Kafka
    assert (v1.error_code, v1.committed_offset) == (ErrorCode.NONE, -1)
    assert commit(1, 2, commit_timestamp=T0) == ErrorCode.NONE
    v1 = fetch(1)
    assert (v1.error_code, v1.committed_offset, v1.metadata) == (ErrorCode.NONE, 2, "m")
    assert fetch(0).committed_offset == 1
