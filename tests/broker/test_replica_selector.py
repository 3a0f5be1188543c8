"""Fetch from followers (KIP-392): the replica selectors (Kafka's RackAwareReplicaSelector and
LeaderSelector), the leader's choice of a preferred read replica, and a follower serving consumers up
to its high watermark."""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from broker.metadata_cache import BrokerInfo, MetadataCache
from broker.replica_manager import FetchParams, FetchPartitionRequest, ReplicaManager
from broker.replica_selector import (
    LEADER_SELECTOR,
    NO_PREFERRED_REPLICA,
    RACK_AWARE_SELECTOR,
    LeaderSelector,
    RackAwareReplicaSelector,
    ReplicaView,
    replica_selector_from_config,
)
from protocol import record_batch
from protocol.errors import ErrorCode, KafkaError
from protocol.record_batch import Record, encode_batch
from server_common.config import ConfigError
from server_common.replica_assignment import (
    BrokerMetadata,
    assign_replicas,
    ignore_partial_racks,
    new_partitions_assignment,
)
from storage.log_manager import LogManager
from tests.broker.controller_requests import leader_and_isr

RACKS = {1: "r1", 2: "r2", 3: "r3"}
CONSUMER = -1


def view(broker_id: int, rack: str | None, end: int = 10, lag_ms: int = 0) -> ReplicaView:
    return ReplicaView(broker_id, rack, end, lag_ms)


def test_rack_aware_selector_prefers_the_leader_when_it_is_in_the_clients_rack() -> None:
    leader = view(1, "a")
    replicas = [leader, view(2, "a", end=20), view(3, "b")]
    assert RackAwareReplicaSelector().select("t", 0, "a", leader, replicas) == leader


def test_rack_aware_selector_picks_the_most_caught_up_replica_of_the_clients_rack() -> None:
    leader = view(1, "a")
    behind, ahead = view(2, "b", end=8), view(3, "b", end=9)
    assert RackAwareReplicaSelector().select("t", 0, "b", leader, [leader, behind, ahead]) == ahead
    # Same log end: the one caught up most recently, then the larger broker id (Kafka's comparator).
    stale, fresh = view(2, "b", lag_ms=500), view(4, "b", lag_ms=100)
    assert RackAwareReplicaSelector().select("t", 0, "b", leader, [leader, stale, fresh]) == fresh
    tie_low, tie_high = view(2, "b"), view(5, "b")
    assert RackAwareReplicaSelector().select("t", 0, "b", leader, [leader, tie_low, tie_high]) == tie_high


def test_rack_aware_selector_falls_back_to_the_leader_without_a_rack_match_or_a_client_rack() -> None:
    leader = view(1, "a")
    replicas = [leader, view(2, "b"), view(3, None)]
    selector = RackAwareReplicaSelector()
    assert selector.select("t", 0, "z", leader, replicas) == leader
    assert selector.select("t", 0, "", leader, replicas) == leader


def test_leader_selector_always_answers_the_leader() -> None:
    leader = view(1, "a")
    assert LeaderSelector().select("t", 0, "b", leader, [leader, view(2, "b")]) == leader


def test_replica_selector_class_accepts_kafkas_class_names_and_refuses_others() -> None:
    assert replica_selector_from_config(None) is None
    assert isinstance(replica_selector_from_config(RACK_AWARE_SELECTOR), RackAwareReplicaSelector)
    assert isinstance(replica_selector_from_config(LEADER_SELECTOR), LeaderSelector)
    with pytest.raises(ConfigError, match=re.escape("replica.selector.class='com.example.MySelector'")):
        replica_selector_from_config("com.example.MySelector")


def test_fetch_params_let_only_consumers_with_client_metadata_read_followers() -> None:
    def params(replica_id: int, rack: str | None) -> FetchParams:
        return FetchParams(replica_id, 0, 1, 1 << 20, 0, client_rack=rack)

    assert params(CONSUMER, None).fetch_only_from_leader  # Fetch < 11
    assert not params(CONSUMER, "").fetch_only_from_leader  # Fetch >= 11, no client.rack
    assert not params(CONSUMER, "r2").fetch_only_from_leader
    assert params(2, "").fetch_only_from_leader  # a follower
    assert params(-2, None).fetch_only_from_leader  # the debugging consumer counts as a consumer
    assert not params(-2, "").fetch_only_from_leader


# -- the leader: which replica a consumer should read from ------------------------------------------


def _cache() -> MetadataCache:
    cache = MetadataCache("cluster")
    for broker_id, rack in RACKS.items():
        cache.add_broker(BrokerInfo(broker_id, rack))
    return cache


def _batch(base_offset: int, count: int) -> memoryview:
    now = int(time.time() * 1000)
    records = [Record(base_offset + i, now, None, b"v%d" % i) for i in range(count)]
    return memoryview(bytearray(encode_batch(records, base_offset=base_offset)))


@pytest.fixture
def leader(logs: LogManager) -> Iterator[ReplicaManager]:
    replicas = ReplicaManager(1, logs, _cache())
    replicas.replica_selector = RackAwareReplicaSelector()
    try:
        yield replicas
    finally:
        replicas.shutdown()


def _fetch(
    manager: ReplicaManager,
    offset: int,
    *,
    replica_id: int = CONSUMER,
    rack: str | None = "",
    max_wait_ms: int = 0,
    leader_epoch: int = -1,
) -> tuple[int, int, int, int]:
    """(error, preferred read replica, high watermark, bytes) of one fetch of t-0."""
    params = FetchParams(replica_id, max_wait_ms, 1, 1 << 20, 0, client_rack=rack)
    future = manager.fetch_messages(params, [FetchPartitionRequest("t", 0, offset, 1 << 20, leader_epoch)])
    assert future.done()
    r = future.result()[("t", 0)]
    return r.error, r.preferred_read_replica, r.high_watermark, r.info.length if r.info else 0


async def _lead_with_caught_up_followers(manager: ReplicaManager, records: int) -> None:
    error, _, _ = await manager.become_leader_or_follower(leader_and_isr("t", {0: [1, 2, 3]}), 6)
    assert error == ErrorCode.NONE
    manager.append_records([("t", 0, _batch(0, records))], -1)
    for follower in (2, 3):
        _fetch(manager, records, replica_id=follower)


async def test_leader_points_a_consumer_to_the_follower_in_its_rack_without_records(
    leader: ReplicaManager,
) -> None:
    await _lead_with_caught_up_followers(leader, 5)
    # Answered at once (no long poll), with the high watermark but no records.
    assert _fetch(leader, 0, rack="r2", max_wait_ms=30_000) == (ErrorCode.NONE, 2, 5, 0)
    assert _fetch(leader, 0, rack="r3")[:2] == (ErrorCode.NONE, 3)


async def test_leader_serves_a_consumer_in_its_own_rack_or_in_no_replicas_rack(
    leader: ReplicaManager,
) -> None:
    await _lead_with_caught_up_followers(leader, 5)
    for rack in ("r1", "r9", ""):
        error, preferred, hw, size = _fetch(leader, 0, rack=rack)
        assert (error, preferred, hw) == (ErrorCode.NONE, NO_PREFERRED_REPLICA, 5) and size > 0
    # Below Fetch v11 (no client metadata) the selector is not asked.
    assert _fetch(leader, 0, rack=None)[1] == NO_PREFERRED_REPLICA


async def test_leader_without_a_selector_never_names_a_preferred_replica(leader: ReplicaManager) -> None:
    await _lead_with_caught_up_followers(leader, 5)
    leader.replica_selector = replica_selector_from_config(LEADER_SELECTOR)
    assert _fetch(leader, 0, rack="r2")[1] == NO_PREFERRED_REPLICA
    leader.replica_selector = None
    assert _fetch(leader, 0, rack="r2")[1] == NO_PREFERRED_REPLICA


async def test_leader_skips_followers_that_have_not_reached_the_fetch_offset_or_left_the_isr(
    leader: ReplicaManager,
) -> None:
    await _lead_with_caught_up_followers(leader, 5)
    leader.append_records([("t", 0, _batch(0, 5))], -1)  # producers send base offset 0
    _fetch(leader, 10, replica_id=3)  # follower 3 has 10 records, follower 2 still 5
    assert _fetch(leader, 7, rack="r2")[1] == NO_PREFERRED_REPLICA  # follower 2 ends at 5
    assert _fetch(leader, 5, rack="r2")[1] == 2
    partition = leader.get_partition("t", 0)
    assert partition is not None
    partition.isr = (1, 3)
    assert _fetch(leader, 5, rack="r2")[1] == NO_PREFERRED_REPLICA
    assert _fetch(leader, 7, rack="r3")[1] == 3


async def test_leader_skips_a_follower_whose_broker_is_not_alive(logs: LogManager) -> None:
    cache = MetadataCache("cluster")
    cache.add_broker(BrokerInfo(1, "r1"))
    cache.add_broker(BrokerInfo(3, "r3"))
    manager = ReplicaManager(1, logs, cache)
    manager.replica_selector = RackAwareReplicaSelector()
    try:
        await _lead_with_caught_up_followers(manager, 3)
        assert _fetch(manager, 0, rack="r2")[1] == NO_PREFERRED_REPLICA
        assert _fetch(manager, 0, rack="r3")[1] == 3
    finally:
        manager.shutdown()


async def test_leader_checks_the_consumers_leader_epoch_before_pointing_it_elsewhere(
    leader: ReplicaManager,
) -> None:
    await _lead_with_caught_up_followers(leader, 3)
    assert _fetch(leader, 0, rack="r2", leader_epoch=5)[:2] == (ErrorCode.UNKNOWN_LEADER_EPOCH, -1)


# -- a follower serving consumers --------------------------------------------------------------------


@pytest.fixture
def follower(logs: LogManager) -> Iterator[ReplicaManager]:
    replicas = ReplicaManager(2, logs, _cache())
    replicas.replica_selector = RackAwareReplicaSelector()
    try:
        yield replicas
    finally:
        replicas.shutdown()


async def _follow(manager: ReplicaManager, records: int, high_watermark: int) -> None:
    error, _, _ = await manager.become_leader_or_follower(leader_and_isr("t", {0: [1, 2, 3]}), 6)
    assert error == ErrorCode.NONE
    partition = manager.get_partition("t", 0)
    assert partition is not None and partition.log is not None and not partition.is_leader
    # Batches end at the high watermark, as a leader's do (a follower copies whole batches).
    partition.log.append_as_follower(_batch(0, high_watermark))
    partition.log.append_as_follower(_batch(high_watermark, records - high_watermark))
    partition.log.update_high_watermark(high_watermark)


async def test_follower_serves_a_consumer_with_client_metadata_up_to_its_high_watermark(
    follower: ReplicaManager,
) -> None:
    await _follow(follower, 10, 6)
    error, preferred, hw, size = _fetch(follower, 0, rack="r2")
    assert (error, preferred, hw) == (ErrorCode.NONE, NO_PREFERRED_REPLICA, 6) and size > 0
    params = FetchParams(CONSUMER, 0, 1, 1 << 20, 0, client_rack="r2")
    result = follower.read_from_local_logs(params, [FetchPartitionRequest("t", 0, 0, 1 << 20)])
    info = result[("t", 0)].info
    assert info is not None
    last = max(h.last_offset for _, h in record_batch.iter_headers(info.records))
    assert last < 6


async def test_follower_answers_empty_between_its_high_watermark_and_log_end_and_out_of_range_beyond(
    follower: ReplicaManager,
) -> None:
    await _follow(follower, 10, 6)
    assert _fetch(follower, 6, rack="r2") == (ErrorCode.NONE, NO_PREFERRED_REPLICA, 6, 0)
    assert _fetch(follower, 10, rack="r2") == (ErrorCode.NONE, NO_PREFERRED_REPLICA, 6, 0)
    assert _fetch(follower, 11, rack="r2")[0] == ErrorCode.OFFSET_OUT_OF_RANGE


async def test_follower_refuses_consumers_without_client_metadata_and_stale_epochs(
    follower: ReplicaManager,
) -> None:
    await _follow(follower, 10, 6)
    assert _fetch(follower, 0, rack=None)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _fetch(follower, 0, rack="r2", leader_epoch=3)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert _fetch(follower, 0, rack="r2", leader_epoch=0)[0] == ErrorCode.NONE


async def test_a_consumer_waiting_on_a_follower_gets_records_once_its_high_watermark_moves(
    follower: ReplicaManager,
) -> None:
    await _follow(follower, 10, 6)
    params = FetchParams(CONSUMER, 30_000, 1, 1 << 20, 0, client_rack="r2")
    waiting = follower.fetch_messages(params, [FetchPartitionRequest("t", 0, 6, 1 << 20)])
    assert not waiting.done()
    partition = follower.get_partition("t", 0)
    assert partition is not None and partition.log is not None
    partition.log.update_high_watermark(10)
    follower.fetch_purgatory.check(("t", 0))
    assert waiting.done()
    r = waiting.result()[("t", 0)]
    assert r.error == ErrorCode.NONE and r.high_watermark == 10 and r.info is not None and r.info.length


# -- rack-aware placement (KIP-36): several brokers per host, the host as their rack ------------------


def test_brokers_sharing_a_host_rack_never_hold_two_replicas_of_a_partition() -> None:
    hosts = [BrokerMetadata(b, f"host{(b - 1) // 4}") for b in range(1, 13)]  # 3 hosts x 4 brokers
    assignment = assign_replicas(hosts, 48, 3, rng=random.Random(7))
    rack = {b.id: b.rack for b in hosts}
    for replicas in assignment.values():
        assert len({rack[b] for b in replicas}) == 3
    leaders = Counter(replicas[0] for replicas in assignment.values())
    assert set(leaders.values()) == {4}  # every broker leads as many partitions
    added = new_partitions_assignment("t", assignment, hosts, 60, rng=random.Random(7))
    assert all(len({rack[b] for b in replicas}) == 3 for replicas in added.values())


def test_create_partitions_refuses_partial_racks_even_with_a_manual_assignment() -> None:
    partial = [BrokerMetadata(1, "r1"), BrokerMetadata(2, "r2"), BrokerMetadata(3)]
    for manual in (None, [[1, 2]]):
        with pytest.raises(KafkaError, match="Not all brokers have rack information") as refused:
            new_partitions_assignment("t", {0: [1, 2]}, partial, 2, manual)
        assert refused.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
    # Topic auto-creation ignores partial racks (RackAwareMode.Safe).
    assert len(assign_replicas(ignore_partial_racks(partial), 3, 2)) == 3
