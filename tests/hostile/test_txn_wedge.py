"""The wedge of issue 17: one raw Produce with a made-up transactional id and a transactional batch
used to pin the partition's last stable offset at 0 forever, so read_committed consumers saw nothing new
on it. With KIP-890 part 1 verification (transaction.partition.verification.enable, on by default) the
leader asks the transaction coordinator first and refuses the batch; the LSO keeps moving with the
data, and a normal producer and consumer beside the attacker are not disturbed."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from protocol import record_batch as rb
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ProduceRequest,
)
from tests.support.bystander import Bystander
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient, fetch_request

pytestmark = pytest.mark.integration

TOPIC = "wedge"
MAX_PAUSE = 1.0
# What a refused unverified batch may get: no coordinator found or reachable (retriable, as Kafka's
# NOT_ENOUGH_REPLICAS), or the coordinator's own refusal of a transactional id it does not know.
REFUSALS = {
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    ErrorCode.INVALID_TXN_STATE,
    ErrorCode.INVALID_PRODUCER_EPOCH,
}
TXN_READY = os.path.exists("/tmp/txn-ready")


def _batch(
    values: list[bytes], *, producer_id: int = -1, epoch: int = -1, transactional: bool = False
) -> bytes:
    records = [rb.Record(i, int(time.time() * 1000), None, v, []) for i, v in enumerate(values)]
    return rb.encode_batch(
        records,
        base_offset=0,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=0 if producer_id >= 0 else -1,
        is_transactional=transactional,
    )


def _produce(client: RawClient, records: bytes, transactional_id: str | None) -> object:
    request = ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=TOPIC, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)]
            )
        ],
    )
    return client.request(ApiKey.PRODUCE, 9, request).responses[0].partition_responses[0]


def _committed_view(client: RawClient) -> tuple[int, int, int]:
    """(high watermark, last stable offset) of a read_committed Fetch, and ListOffsets' read_committed
    latest offset."""
    fetch = fetch_request(TOPIC)
    fetch.isolation_level = 1
    partition = client.request(ApiKey.FETCH, 12, fetch).responses[0].partitions[0]
    assert partition.error_code == ErrorCode.NONE
    listing = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=TOPIC,
                partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)],
            )
        ],
    )
    latest = client.request(ApiKey.LIST_OFFSETS, 7, listing).topics[0].partitions[0].offset
    return partition.high_watermark, partition.last_stable_offset, latest


def _read_committed(bootstrap: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "wedge-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


def _wait_for_committed(client: RawClient, end: int) -> tuple[int, int, int]:
    deadline = time.monotonic() + 10
    while True:
        view = _committed_view(client)
        if view == (end, end, end) or time.monotonic() > deadline:
            return view
        time.sleep(0.1)


def test_a_made_up_transactional_id_cannot_wedge_the_last_stable_offset(
    one_broker: Cluster, bystander: Bystander
) -> None:
    one_broker.create_topic(TOPIC, 1)
    client = RawClient(one_broker.bootstrap, timeout=15)
    try:
        attack = _batch([b"wedge"], producer_id=4242, epoch=0, transactional=True)
        response = _produce(client, attack, "made-up-transactional-id")
        assert response.error_code in REFUSALS and response.base_offset == -1, response
        assert response.error_message
        # Kafka refuses transactional batches that come without a transactional id outright.
        response = _produce(client, attack, None)
        assert (response.error_code, response.base_offset) == (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            -1,
        ), response
        assert _committed_view(client) == (0, 0, 0)  # nothing of the attack was written
        for i in range(3):
            assert _produce(client, _batch([f"after-{i}".encode()]), None).base_offset == i
        assert _wait_for_committed(client, 3) == (3, 3, 3)  # the LSO moves with the data
    finally:
        client.close()
    assert _read_committed(one_broker.bootstrap, 3) == [b"after-0", b"after-1", b"after-2"]
    log = one_broker.broker(1).log()
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in log
    bystander.check(max_pause=MAX_PAUSE)


def _find_transaction_coordinator(client: RawClient, transactional_id: str) -> None:
    """Asks for the coordinator until there is one (the first ask creates __transaction_state)."""
    deadline = time.monotonic() + 30
    while True:
        request = FindCoordinatorRequest(key_type=1, coordinator_keys=[transactional_id])
        [found] = client.request(ApiKey.FIND_COORDINATOR, 4, request).coordinators
        if found.error_code == ErrorCode.NONE:
            return
        assert time.monotonic() < deadline, f"no transaction coordinator: {ErrorCode(found.error_code).name}"
        time.sleep(0.2)


@pytest.mark.skipif(not TXN_READY, reason="needs the transaction coordinator (/tmp/txn-ready)")
def test_the_coordinator_refuses_batches_outside_a_transaction(one_broker: Cluster) -> None:
    """With a transaction coordinator running: a made-up id is unknown to it, and a real producer that
    skips AddPartitionsToTxn is told its partition is not in its transaction; the LSO stays free."""
    one_broker.create_topic(TOPIC, 1)
    client = RawClient(one_broker.bootstrap, timeout=15)
    try:
        _find_transaction_coordinator(client, "made-up-transactional-id")
        response = _produce(
            client, _batch([b"x"], producer_id=4242, epoch=0, transactional=True), "made-up-transactional-id"
        )
        assert response.error_code in REFUSALS and response.base_offset == -1, response

        _find_transaction_coordinator(client, "forgetful")
        init = InitProducerIdRequest(transactional_id="forgetful", transaction_timeout_ms=60000)
        deadline = time.monotonic() + 30
        while True:
            started = client.request(ApiKey.INIT_PRODUCER_ID, 4, init)
            if started.error_code == ErrorCode.NONE:
                break
            assert time.monotonic() < deadline, ErrorCode(started.error_code).name
            time.sleep(0.2)
        skipped = _batch(
            [b"y"], producer_id=started.producer_id, epoch=started.producer_epoch, transactional=True
        )
        response = _produce(client, skipped, "forgetful")
        assert (response.error_code, response.base_offset) == (ErrorCode.INVALID_TXN_STATE, -1), response
        assert _produce(client, _batch([b"plain"]), None).base_offset == 0
        assert _wait_for_committed(client, 1) == (1, 1, 1)
    finally:
        client.close()
