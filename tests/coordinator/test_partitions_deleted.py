"""A deleted topic's committed offsets go (Kafka's GroupCoordinator.onPartitionsDeleted, called with the
partitions an UpdateMetadata deletes): a topic re-created under the name is consumed from the consumers'
reset policy, not from the old topic's positions."""

from __future__ import annotations

from broker.metadata_cache import MetadataCache
from coordinator.group_metadata import OffsetAndMetadata
from protocol.errors import ErrorCode
from tests.broker.controller_requests import update_metadata
from tests.coordinator.conftest import Env

OLD = ("reborn", 0)
KEPT = ("other", 0)


async def test_the_deleted_partitions_lose_their_committed_offsets_and_the_rest_stay(env: Env) -> None:
    committed = {OLD: OffsetAndMetadata(20), KEPT: OffsetAndMetadata(7)}
    result = await env.coordinator.handle_commit_offsets("g", "", None, -1, committed)
    assert set(result.values()) == {ErrorCode.NONE}
    appends = env.topic.appends
    assert await env.coordinator.on_partitions_deleted([OLD]) == 1
    assert env.topic.appends == appends + 1  # the tombstone
    error, found = env.coordinator.handle_fetch_offsets("g", [OLD, KEPT])
    assert error == ErrorCode.NONE
    assert found[OLD] is None and found[KEPT] is not None and found[KEPT].offset == 7


async def test_a_group_left_without_offsets_goes(env: Env) -> None:
    await env.coordinator.handle_commit_offsets("only", "", None, -1, {OLD: OffsetAndMetadata(3)})
    assert await env.coordinator.on_partitions_deleted([OLD]) == 1
    assert env.manager.get_group("only") is None


def test_update_metadata_tells_its_listeners_the_partitions_it_deletes() -> None:
    cache = MetadataCache("cluster")
    told: list[list[tuple[str, int]]] = []
    cache.partitions_deleted_listeners.append(told.append)
    brokers = {1: ("127.0.0.1", 9092)}
    cache.update(update_metadata(brokers, "reborn", {0: [1], 1: [1]}), 8)
    assert told == []
    cache.update(update_metadata(brokers, "reborn", {0: [1], 1: [1]}, leader=-2), 8)
    assert told == [[("reborn", 0), ("reborn", 1)]]
    assert not cache.contains("reborn")
