"""Topic ids on the broker's side of LeaderAndIsr (KIP-516, Kafka's ReplicaManager.becomeLeaderOrFollower,
Partition.checkOrSetTopicId, UnifiedLog.assignTopicId): a new replica's log learns its topic id and
keeps it in partition.metadata; a LeaderAndIsr whose topic id differs from the log's is refused with
INCONSISTENT_TOPIC_ID and the old log is never led or followed as the new topic's (not after a
restart either) until the controller's StopReplica with delete removes it; a request without topic ids
checks nothing; and a log made before topic ids learns its id, even at the same leader epoch."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.metadata_cache import BrokerInfo, MetadataCache
from broker.replica_manager import ReplicaManager
from protocol.errors import ErrorCode
from protocol.messages import LeaderAndIsrRequest
from protocol.record_batch import Record, encode_batch
from storage.config import LogConfig
from storage.log_manager import LogManager
from storage.partition_metadata import PARTITION_METADATA_FILE, PartitionMetadataFile
from tests.broker.controller_requests import leader_and_isr, stop_replica

BROKER = 1
ZERO = uuid.UUID(int=0)
OLD_ID = uuid.UUID("11111111-2222-4333-8444-555555555555")
NEW_ID = uuid.UUID("99999999-8888-4777-8666-555555555555")


class Broker:
    """A ReplicaManager over a log dir that survives 'restarts' (a new LogManager over the same dir)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = str(log_dir)
        self.logs = LogManager([self.log_dir], LogConfig())
        cache = MetadataCache("cluster")
        cache.add_broker(BrokerInfo(BROKER, None))
        self.replicas = ReplicaManager(BROKER, self.logs, cache)

    def close(self) -> None:
        self.replicas.shutdown()
        self.logs.shutdown()

    async def lead(self, topic_id: uuid.UUID, leader_epoch: int = 0, version: int = 6) -> int:
        request = leader_and_isr("t", {0: [BROKER]}, leader_epoch=leader_epoch, topic_id=topic_id)
        error, errors, _ = await self.replicas.become_leader_or_follower(request, version)
        assert error == ErrorCode.NONE
        return errors[("t", 0)]

    def produce(self, value: bytes) -> int:
        batch = encode_batch([Record(0, 0, None, value)], base_offset=0)
        [result] = self.replicas.append_records([("t", 0, memoryview(bytearray(batch)))], 1).values()
        return result.error

    def metadata_file(self) -> uuid.UUID | None:
        return PartitionMetadataFile(os.path.join(self.log_dir, "t-0")).read()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "logs")
    yield b
    b.close()


async def test_a_new_replica_writes_its_topic_id_to_partition_metadata(broker: Broker) -> None:
    assert await broker.lead(OLD_ID) == ErrorCode.NONE
    assert broker.metadata_file() == OLD_ID
    partition = broker.replicas.get_partition("t", 0)
    assert partition is not None and partition.topic_id == OLD_ID and partition.log is not None
    assert partition.log.topic_id == OLD_ID


async def test_another_topic_id_is_inconsistent_and_the_old_log_is_no_longer_served(broker: Broker) -> None:
    assert await broker.lead(OLD_ID) == ErrorCode.NONE
    assert broker.produce(b"old") == ErrorCode.NONE
    assert await broker.lead(NEW_ID, leader_epoch=1) == ErrorCode.INCONSISTENT_TOPIC_ID
    assert broker.replicas.get_partition("t", 0) is None  # not led or followed with the old log
    assert broker.produce(b"new") != ErrorCode.NONE
    old_log = broker.logs.get_log("t", 0)
    assert old_log is not None and old_log.log_end_offset == 1  # kept for the controller's deletion
    assert broker.metadata_file() == OLD_ID


async def test_the_topic_id_is_checked_before_the_leader_epoch(broker: Broker) -> None:
    """Kafka's order: an inconsistent id wins over a stale epoch."""
    assert await broker.lead(OLD_ID, leader_epoch=5) == ErrorCode.NONE
    assert await broker.lead(OLD_ID, leader_epoch=3) == ErrorCode.STALE_CONTROLLER_EPOCH
    assert await broker.lead(NEW_ID, leader_epoch=3) == ErrorCode.INCONSISTENT_TOPIC_ID


async def test_a_stale_log_found_at_startup_is_refused_until_stop_replica_deletes_it(
    broker: Broker, tmp_path: Path
) -> None:
    """The broker was down while the topic was deleted and re-created: its old log, on disk with the old
    id, is never served as the new topic's; the controller's deletion retry (StopReplica with delete)
    removes it, and the next LeaderAndIsr makes a fresh log with the new id."""
    assert await broker.lead(OLD_ID) == ErrorCode.NONE
    assert broker.produce(b"old") == ErrorCode.NONE
    broker.close()
    restarted = Broker(tmp_path / "logs")
    try:
        assert restarted.metadata_file() == OLD_ID
        on_disk = restarted.logs.get_log("t", 0)
        assert on_disk is not None and on_disk.topic_id == OLD_ID
        assert await restarted.lead(NEW_ID, leader_epoch=0) == ErrorCode.INCONSISTENT_TOPIC_ID
        assert restarted.replicas.get_partition("t", 0) is None
        assert restarted.logs.get_log("t", 0) is on_disk and on_disk.log_end_offset == 1

        _, errors = await restarted.replicas.stop_replicas(stop_replica("t", [0], delete=True), 3)
        assert errors == {("t", 0): ErrorCode.NONE}
        assert restarted.logs.get_log("t", 0) is None

        assert await restarted.lead(NEW_ID, leader_epoch=0) == ErrorCode.NONE
        partition = restarted.replicas.get_partition("t", 0)
        assert partition is not None and partition.log is not None
        assert partition.log.log_end_offset == 0  # nothing of the old topic
        assert partition.topic_id == NEW_ID and restarted.metadata_file() == NEW_ID
    finally:
        restarted.close()


async def test_a_restarted_replica_reads_its_topic_id_back(broker: Broker, tmp_path: Path) -> None:
    assert await broker.lead(OLD_ID) == ErrorCode.NONE
    assert broker.produce(b"kept") == ErrorCode.NONE
    broker.close()
    restarted = Broker(tmp_path / "logs")
    try:
        assert await restarted.lead(OLD_ID, leader_epoch=1) == ErrorCode.NONE
        partition = restarted.replicas.get_partition("t", 0)
        assert partition is not None and partition.topic_id == OLD_ID
        assert partition.log is not None and partition.log.log_end_offset == 1
    finally:
        restarted.close()


async def test_a_request_without_topic_id_checks_nothing_and_writes_nothing(broker: Broker) -> None:
    assert await broker.lead(ZERO) == ErrorCode.NONE
    assert not os.path.exists(os.path.join(broker.log_dir, "t-0", PARTITION_METADATA_FILE))
    partition = broker.replicas.get_partition("t", 0)
    assert partition is not None and partition.topic_id == ZERO


async def test_a_log_without_topic_id_learns_it_at_the_same_leader_epoch(broker: Broker) -> None:
    """Kafka: the controller may name the id of a topic made before topic ids without bumping the
    leader epoch; the log learns it (NONE, not STALE_CONTROLLER_EPOCH)."""
    assert await broker.lead(ZERO, leader_epoch=2) == ErrorCode.NONE
    assert broker.metadata_file() is None
    assert await broker.lead(NEW_ID, leader_epoch=2) == ErrorCode.NONE
    assert broker.metadata_file() == NEW_ID
    partition = broker.replicas.get_partition("t", 0)
    assert partition is not None and partition.topic_id == NEW_ID and partition.is_leader
    # The same id at the same epoch again: stale, as before.
    assert await broker.lead(NEW_ID, leader_epoch=2) == ErrorCode.STALE_CONTROLLER_EPOCH


async def test_a_log_without_topic_id_learns_it_at_a_new_leader_epoch(broker: Broker) -> None:
    assert await broker.lead(ZERO, leader_epoch=0) == ErrorCode.NONE
    assert await broker.lead(NEW_ID, leader_epoch=1) == ErrorCode.NONE
    assert broker.metadata_file() == NEW_ID


async def test_an_old_request_version_carries_no_topic_id(broker: Broker) -> None:
    """Before v5 nothing in the request is a topic id: a log that has one keeps serving."""
    assert await broker.lead(OLD_ID) == ErrorCode.NONE
    request = leader_and_isr("t", {0: [BROKER]}, leader_epoch=1, topic_id=NEW_ID)
    request.ungrouped_partition_states = [
        LeaderAndIsrRequest.LeaderAndIsrPartitionState(
            topic_name="t", partition_index=0, leader=BROKER, leader_epoch=1, isr=[BROKER], replicas=[BROKER]
        )
    ]
    _, errors, _ = await broker.replicas.become_leader_or_follower(request, 1)
    assert errors[("t", 0)] == ErrorCode.NONE
    partition = broker.replicas.get_partition("t", 0)
    assert partition is not None and partition.topic_id == OLD_ID and partition.leader_epoch == 1
