"""Transactions on a real cluster (ZooKeeper, a controller, three brokers), on the wire and with one client.

- FindCoordinator for a transactional id creates ``__transaction_state`` on first use with Kafka's
  settings (50 partitions, three replicas, compacted, min.insync.replicas 2) and then names the leader of
  the id's partition, in both the single-key (v1-3) and the batched (v4) forms.
- InitProducerId with a transactional id, on the wire: the coordinator gives a producer id and bumps the
  epoch at each init (which fences the previous producer: PRODUCER_FENCED from v4, INVALID_PRODUCER_EPOCH
  before); another broker answers NOT_COORDINATOR. AddPartitionsToTxn, EndTxn, DescribeTransactions and
  ListTransactions follow a transaction through Ongoing to CompleteAbort.
- A confluent-kafka transactional producer commits one transaction and aborts another: a read_committed
  consumer sees the committed records only, a read_uncommitted one both, and the last stable offset lets
  read_committed reach the end once the abort's markers are written.
- A transaction left open past its ``transaction.timeout.ms`` is aborted by the coordinator: the
  partition's last stable offset moves on, read_committed consumers read what follows it, and the
  producer, whose epoch the abort bumped, is fenced.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from coordinator.group_metadata_manager import partition_for
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
    Message,
)
from protocol.topic import TRANSACTION_STATE_TOPIC
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient
from zk import znodes
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

TXN_PARTITIONS = 50


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer) -> Iterator[Cluster]:
    """Three brokers with Kafka's transaction settings (__transaction_state replicated 3 times,
    min.insync.replicas 2), one controller."""
    chroot = f"{zookeeper_server.connect_string}/samsa-transactions-core"
    # The coordinator looks for timed-out transactions every half second (Kafka: every 10 s).
    running = Cluster(
        tmp_path_factory.mktemp("transactions-core"),
        chroot,
        broker_overrides={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500},
    ).start()
    try:
        yield running
    finally:
        running.stop()


def request(bootstrap: str, api_key: int, version: int, body: Message, timeout: float = 15.0) -> Any:
    client = RawClient(bootstrap, timeout)
    try:
        return client.request(api_key, version, body)
    finally:
        client.close()


def find_txn_coordinator(cluster: Cluster, transactional_id: str, timeout: float = 60.0) -> tuple[int, str]:
    """(broker id, bootstrap) of the id's transaction coordinator, once a broker names a live one."""
    deadline = time.monotonic() + timeout
    body = FindCoordinatorRequest(key=transactional_id, key_type=1)
    while True:
        for broker in cluster.brokers.values():
            response = request(broker.bootstrap, ApiKey.FIND_COORDINATOR, 3, body)
            if response.error_code == ErrorCode.NONE and cluster.broker(response.node_id).alive:
                return response.node_id, f"{response.host}:{response.port}"
        if time.monotonic() > deadline:
            raise TimeoutError(f"no transaction coordinator for {transactional_id} after {timeout} s")
        time.sleep(0.25)


def init_producer_id(bootstrap: str, version: int, transactional_id: str | None, **fields: int) -> Any:
    body = InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60_000, **fields)
    return request(bootstrap, ApiKey.INIT_PRODUCER_ID, version, body)


def init_until_ready(bootstrap: str, transactional_id: str, timeout: float = 60.0) -> Any:
    """InitProducerId v4 retried while the coordinator loads or completes an earlier transaction."""
    deadline = time.monotonic() + timeout
    while True:
        response = init_producer_id(bootstrap, 4, transactional_id)
        if (
            response.error_code
            not in (
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                ErrorCode.CONCURRENT_TRANSACTIONS,
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                ErrorCode.NOT_COORDINATOR,
            )
            or time.monotonic() > deadline
        ):
            return response
        time.sleep(0.2)


def test_find_coordinator_creates_the_transaction_state_topic(cluster: Cluster) -> None:
    zk = cluster.zk()
    txn_id = f"creator-{uuid.uuid4().hex[:8]}"
    coordinator, _ = find_txn_coordinator(cluster, txn_id)

    assignment = znodes.TopicAssignment.decode(zk.get(znodes.topic_path(TRANSACTION_STATE_TOPIC))[0])
    assert len(assignment.partitions) == TXN_PARTITIONS
    assert {len(replicas) for replicas in assignment.partitions.values()} == {3}
    config = znodes.decode_config(zk.get(znodes.topic_config_path(TRANSACTION_STATE_TOPIC))[0])
    assert config["cleanup.policy"] == "compact"
    assert config["min.insync.replicas"] == "2"
    assert config["segment.bytes"] == "104857600"
    assert config["unclean.leader.election.enable"] == "false"

    # The coordinator is the leader of the id's partition, and every broker says so (once its metadata
    # has the new topic's leaders), in both forms.
    assert coordinator == cluster.leader(TRANSACTION_STATE_TOPIC, partition_for(txn_id, TXN_PARTITIONS))
    body = FindCoordinatorRequest(key_type=1, coordinator_keys=[txn_id, "other"])
    for broker in cluster.brokers.values():
        deadline = time.monotonic() + 30
        while True:
            batched = request(broker.bootstrap, ApiKey.FIND_COORDINATOR, 4, body)
            errors = [(c.key, c.error_code) for c in batched.coordinators]
            if errors == [(txn_id, 0), ("other", 0)] or time.monotonic() > deadline:
                break
            assert {e for _, e in errors} <= {ErrorCode.NONE, ErrorCode.COORDINATOR_NOT_AVAILABLE}
            time.sleep(0.2)
        assert errors == [(txn_id, 0), ("other", 0)]
        assert batched.coordinators[0].node_id == coordinator


def test_init_producer_id_bumps_the_epoch_and_fences(cluster: Cluster) -> None:
    txn_id = f"fencing-{uuid.uuid4().hex[:8]}"
    coordinator_id, coordinator = find_txn_coordinator(cluster, txn_id)
    first = init_until_ready(coordinator, txn_id)
    assert first.error_code == ErrorCode.NONE and first.producer_id >= 0
    assert first.producer_epoch == 0
    second = init_producer_id(coordinator, 4, txn_id)
    assert (second.error_code, second.producer_id, second.producer_epoch) == (0, first.producer_id, 1)

    # A broker that is not the id's coordinator says so.
    other = next(b for b in cluster.brokers.values() if b.id != coordinator_id)
    assert init_producer_id(other.bootstrap, 4, txn_id).error_code == ErrorCode.NOT_COORDINATOR

    # KIP-360: the first producer (epoch 0) asking to recover is fenced by the second's init.
    fenced = init_producer_id(coordinator, 4, txn_id, producer_id=first.producer_id, producer_epoch=0)
    assert (fenced.error_code, fenced.producer_id, fenced.producer_epoch) == (
        ErrorCode.PRODUCER_FENCED,
        -1,
        -1,
    )
    old_client = init_producer_id(coordinator, 3, txn_id, producer_id=first.producer_id, producer_epoch=0)
    assert old_client.error_code == ErrorCode.INVALID_PRODUCER_EPOCH

    # Without a transactional id any broker hands out a fresh id.
    idempotent = init_producer_id(other.bootstrap, 4, None)
    assert idempotent.error_code == ErrorCode.NONE and idempotent.producer_epoch == 0


def test_a_transaction_on_the_wire(cluster: Cluster) -> None:
    topic = f"wire-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 2, replication_factor=3)
    txn_id = f"wire-{uuid.uuid4().hex[:8]}"
    _, coordinator = find_txn_coordinator(cluster, txn_id)
    init = init_until_ready(coordinator, txn_id)
    assert init.error_code == ErrorCode.NONE
    pid, epoch = init.producer_id, init.producer_epoch

    add = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[0, 1]),
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="no-such-topic", partitions=[0]),
        ],
    )
    refused = request(coordinator, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add)
    assert {
        (t.name, p.partition_index): p.partition_error_code
        for t in refused.results_by_topic_v3_and_below
        for p in t.results_by_partition
    } == {
        (topic, 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
        (topic, 1): ErrorCode.OPERATION_NOT_ATTEMPTED,
        ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    add.v3_and_below_topics = add.v3_and_below_topics[:1]
    added = request(coordinator, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add)
    assert [
        p.partition_error_code for t in added.results_by_topic_v3_and_below for p in t.results_by_partition
    ] == [
        0,
        0,
    ]

    [ongoing] = request(
        coordinator, ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(transactional_ids=[txn_id])
    ).transaction_states
    assert (ongoing.error_code, ongoing.transaction_state, ongoing.producer_id) == (0, "Ongoing", pid)
    assert [(t.topic, sorted(t.partitions)) for t in ongoing.topics] == [(topic, [0, 1])]
    listed = request(
        coordinator,
        ApiKey.LIST_TRANSACTIONS,
        1,
        ListTransactionsRequest(
            state_filters=["Ongoing", "Bogus"], producer_id_filters=[pid], duration_filter=-1
        ),
    )
    assert listed.unknown_state_filters == ["Bogus"]
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
        (txn_id, "Ongoing")
    ]

    end = EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=False)
    assert request(coordinator, ApiKey.END_TXN, 3, end).error_code == ErrorCode.NONE
    deadline = time.monotonic() + 30
    while True:  # the markers go out after EndTxn's answer; then the transaction completes
        [state] = request(
            coordinator,
            ApiKey.DESCRIBE_TRANSACTIONS,
            0,
            DescribeTransactionsRequest(transactional_ids=[txn_id]),
        ).transaction_states
        if state.transaction_state == "CompleteAbort" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert (state.transaction_state, state.topics) == ("CompleteAbort", [])


def test_confluent_kafka_commit_and_abort_with_read_committed(cluster: Cluster) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 2, replication_factor=3)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "transactional.id": f"confluent-{uuid.uuid4().hex[:8]}",
            "transaction.timeout.ms": 60_000,
        }
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=f"committed-{i}".encode(), partition=i % 2)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(30)
    producer.abort_transaction(60)
    producer.begin_transaction()
    producer.produce(topic, value=b"last", partition=0)
    producer.commit_transaction(60)

    def read(isolation: str, expected: int) -> list[str]:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": isolation,
            }
        )
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(2)])
        values: list[str] = []
        deadline = time.monotonic() + 30
        try:
            while len(values) < expected and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None or message.error() is not None:
                    continue
                values.append(message.value().decode())
            # Nothing more arrives after what was expected.
            extra_until = time.monotonic() + 1.5
            while time.monotonic() < extra_until:
                message = consumer.poll(0.3)
                if message is not None and message.error() is None:
                    values.append(message.value().decode())
        finally:
            consumer.close()
        return values

    committed = read("read_committed", 5)
    assert sorted(committed) == sorted([f"committed-{i}" for i in range(4)] + ["last"])
    uncommitted = read("read_uncommitted", 9)
    assert sorted(uncommitted) == sorted(
        [f"committed-{i}" for i in range(4)] + [f"aborted-{i}" for i in range(4)] + ["last"]
    )


def test_a_transaction_open_past_its_timeout_is_aborted_by_the_coordinator(cluster: Cluster) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = f"txn-timeout-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 1, replication_factor=3)
    transactional_id = f"forgotten-{uuid.uuid4().hex[:8]}"
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 2000,
        }
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, value=b"never-committed", partition=0)
    producer.flush(30)
    plain = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    plain.produce(topic, value=b"after-it", partition=0)
    assert plain.flush(30) == 0

    _, coordinator = find_txn_coordinator(cluster, transactional_id)
    deadline = time.monotonic() + 30
    while True:
        described = request(
            coordinator,
            ApiKey.DESCRIBE_TRANSACTIONS,
            0,
            DescribeTransactionsRequest(transactional_ids=[transactional_id]),
        ).transaction_states[0]
        if described.transaction_state == "CompleteAbort" or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert described.transaction_state == "CompleteAbort", described

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while not values and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    assert values == [b"after-it"]

    # The abort bumped the epoch: the forgotten producer cannot commit what the coordinator rolled back.
    with pytest.raises(confluent_kafka.KafkaException):
        producer.commit_transaction(30)
