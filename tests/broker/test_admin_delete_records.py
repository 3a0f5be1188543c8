"""DeleteRecords in the ReplicaManager, in process over real logs: the leader's log start offset moves at
once, and the answer waits (Kafka's DelayedDeleteRecords) until every live follower reports, in its
fetches, a log start offset that far."""

from __future__ import annotations

import asyncio
import time

from broker.metadata_cache import BrokerInfo, MetadataCache
from broker.replica_manager import ReplicaManager
from protocol.errors import ErrorCode
from protocol.record_batch import Record, encode_batch
from storage.log_manager import LogManager
from tests.broker.controller_requests import leader_and_isr

TP = ("trimmed", 0)


async def leader_with_follower(logs: LogManager, follower_alive: bool = True) -> ReplicaManager:
    """Broker 1 leads TP with broker 2 in the ISR; 10 records, all replicated (high watermark 10)."""
    cache = MetadataCache("cluster")
    cache.add_broker(BrokerInfo(1, None))
    if follower_alive:
        cache.add_broker(BrokerInfo(2, None))
    manager = ReplicaManager(1, logs, cache)
    await manager.become_leader_or_follower(leader_and_isr(TP[0], {0: [1, 2]}), 6)
    batch = encode_batch([Record(i, int(time.time() * 1000), None, b"v") for i in range(10)], base_offset=0)
    [result] = manager.append_records([(*TP, memoryview(bytearray(batch)))], 1).values()
    assert result.error == ErrorCode.NONE
    partition = manager.get_partition(*TP)
    assert partition is not None
    manager.update_follower_fetch_state(partition, 2, 10, log_start_offset=0)
    assert partition.log is not None and partition.log.high_watermark == 10
    return manager


async def test_waits_for_the_followers_log_start_offset(logs: LogManager) -> None:
    manager = await leader_with_follower(logs)
    pending = manager.delete_records({TP: 6}, 5000)
    assert isinstance(pending, asyncio.Future) and not pending.done()
    partition = manager.get_partition(*TP)
    assert partition is not None and partition.log is not None
    assert partition.log.log_start_offset == 6  # the leader moved at once

    manager.update_follower_fetch_state(partition, 2, 10, log_start_offset=3)
    assert not pending.done()
    manager.update_follower_fetch_state(partition, 2, 10, log_start_offset=6)
    result = (await pending)[TP]
    assert (result.error, result.low_watermark) == (ErrorCode.NONE, 6)


async def test_times_out_when_a_live_follower_lags(logs: LogManager) -> None:
    manager = await leader_with_follower(logs)
    result = (await manager.delete_records({TP: 4}, 50))[TP]
    assert (result.error, result.low_watermark) == (ErrorCode.REQUEST_TIMED_OUT, 0)


async def test_dead_followers_do_not_hold_it_up(logs: LogManager) -> None:
    manager = await leader_with_follower(logs, follower_alive=False)
    done = manager.delete_records({TP: 4}, 5000)
    result = (done if isinstance(done, dict) else await done)[TP]
    assert (result.error, result.low_watermark) == (ErrorCode.NONE, 4)


async def test_losing_leadership_ends_the_wait(logs: LogManager) -> None:
    manager = await leader_with_follower(logs)
    pending = manager.delete_records({TP: 5}, 5000)
    request = leader_and_isr(TP[0], {0: [2, 1]}, leader_epoch=1)
    await manager.become_leader_or_follower(request, 6)
    result = (await pending)[TP]
    assert (result.error, result.low_watermark) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)


async def test_errors_come_back_at_once(logs: LogManager) -> None:
    manager = await leader_with_follower(logs)
    results = manager.delete_records({TP: 11, ("trimmed", 1): 0}, 5000)
    assert isinstance(results, dict)
    assert (results[TP].error, results[TP].low_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
    assert results[("trimmed", 1)].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
