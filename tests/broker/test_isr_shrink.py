"""An ISR shrink the controller commits completes the acks=all produces that waited only for the
follower it removed: the high watermark moves with the smaller ISR, and what waited on it is checked
then (before, the partition moved its high watermark itself on the commit, so the check that follows
saw no move and the produce waited for its timeout; the transaction coordinator's state writes, which
nothing appends after, timed out after a follower was killed)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from broker.alter_partition_manager import AlterPartitionManager
from broker.metadata_cache import BrokerInfo, MetadataCache
from broker.replica_manager import ReplicaManager
from protocol.errors import ErrorCode
from protocol.messages import AlterPartitionResponse
from protocol.record_batch import Record, encode_batch
from storage.log_manager import LogManager
from tests.broker.controller_requests import leader_and_isr

LEADER, FOLLOWER = 1, 2


@pytest.fixture
def manager(logs: LogManager) -> Iterator[ReplicaManager]:
    cache = MetadataCache("cluster")
    cache.add_broker(BrokerInfo(LEADER, None))
    cache.add_broker(BrokerInfo(FOLLOWER, None))
    replicas = ReplicaManager(LEADER, logs, cache)
    try:
        yield replicas
    finally:
        replicas.shutdown()


def isr_committed(
    topic: str, partition: int, isr: list[int], leader_epoch: int = 0
) -> AlterPartitionResponse:
    return AlterPartitionResponse(
        error_code=ErrorCode.NONE,
        topics=[
            AlterPartitionResponse.TopicData(
                topic_name=topic,
                partitions=[
                    AlterPartitionResponse.PartitionData(
                        partition_index=partition,
                        error_code=ErrorCode.NONE,
                        leader_id=LEADER,
                        leader_epoch=leader_epoch,
                        isr=isr,
                        partition_epoch=1,
                    )
                ],
            )
        ],
    )


async def test_a_committed_isr_shrink_completes_the_produces_waiting_for_the_removed_follower(
    manager: ReplicaManager,
) -> None:
    error, _, _ = await manager.become_leader_or_follower(leader_and_isr("t", {0: [LEADER, FOLLOWER]}), 6)
    assert error == ErrorCode.NONE
    batch = encode_batch([Record(0, int(time.time() * 1000), None, b"v")], base_offset=0)
    results = manager.append_records([("t", 0, memoryview(bytearray(batch)))], -1)
    waiting = manager.wait_for_acks(results, 30_000)
    assert not waiting.done()  # the follower has not fetched it

    channel: Any = None  # the answer is applied directly; nothing is sent
    alter = AlterPartitionManager(channel, LEADER, lambda: 0, 100, manager.on_high_watermark_may_move)
    partition = manager.get_partition("t", 0)
    assert partition is not None
    partition.pending_isr = (LEADER,)
    alter._apply({("t", 0): partition}, isr_committed("t", 0, [LEADER]))

    assert waiting.done()
    assert waiting.result()[("t", 0)].error == ErrorCode.NONE
    assert partition.log is not None and partition.log.high_watermark == 1
