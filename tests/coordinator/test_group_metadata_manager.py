"""Loading __consumer_offsets partitions: replaying from the log start in chunks, tombstones, records
that cannot be read, and leadership moving while a partition loads."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from coordinator.group_metadata import GroupMetadata, GroupState, OffsetAndMetadata
from coordinator.group_metadata_manager import GroupMetadataManager, OffsetConfig, read_partition
from coordinator.offsets_records import group_metadata_key, offset_commit_key, offset_commit_value
from protocol import record_batch
from protocol.errors import ErrorCode
from tests.coordinator.conftest import Clock, until
from tests.coordinator.fakes import FakeOffsetsTopic


@pytest.fixture
def topic(tmp_path: Path) -> FakeOffsetsTopic:
    t = FakeOffsetsTopic(tmp_path, 1)
    t.leading.add(0)
    yield t
    t.close()


def append(topic: FakeOffsetsTopic, *records: tuple[bytes, bytes | None]) -> None:
    batch = record_batch.encode_batch(
        [record_batch.Record(i, 1, k, v) for i, (k, v) in enumerate(records)], base_offset=0
    )
    topic.append(0, batch, 1, 1000)


async def test_replay_in_small_chunks_with_tombstones(topic: FakeOffsetsTopic) -> None:
    for i in range(20):
        append(
            topic,
            (
                offset_commit_key("g", "t", i % 4),
                offset_commit_value(OffsetAndMetadata(i, commit_timestamp=1)),
            ),
        )
    append(topic, (offset_commit_key("g", "t", 3), None))
    append(topic, (offset_commit_key("gone", "t", 0), offset_commit_value(OffsetAndMetadata(1))))
    append(topic, (offset_commit_key("gone", "t", 0), None), (group_metadata_key("gone"), None))
    loaded = read_partition(topic.logs[0], 100, "test")  # far below one batch: one batch per read
    assert {tp: c.value.offset for tp, c in loaded.offsets["g"].items()} == {
        ("t", 0): 16,
        ("t", 1): 17,
        ("t", 2): 18,
    }
    assert loaded.offsets["gone"] == {} and loaded.removed_groups == {"gone"}


async def test_unreadable_records_are_skipped(
    topic: FakeOffsetsTopic, caplog: pytest.LogCaptureFixture
) -> None:
    append(topic, (b"\x00\x07junk", b"x"), (offset_commit_key("g", "t", 0), b"\x00\x09"))
    append(topic, (offset_commit_key("g", "t", 1), offset_commit_value(OffsetAndMetadata(5))))
    with caplog.at_level(logging.WARNING):
        loaded = read_partition(topic.logs[0], 1 << 20, "test")
    assert [c.value.offset for c in loaded.offsets["g"].values()] == [5]
    assert sum("ignoring the record" in r.message for r in caplog.records) == 2


async def test_leadership_lost_while_loading(topic: FakeOffsetsTopic) -> None:
    append(topic, (offset_commit_key("g", "t", 0), offset_commit_value(OffsetAndMetadata(5))))
    manager = GroupMetadataManager(1, OffsetConfig(num_partitions=1), topic, Clock())
    loaded: list[GroupMetadata] = []
    manager.schedule_load(0, 3, loaded.append)
    assert manager.is_group_loading("g")
    manager.remove_groups_for_partition(0, 4, lambda g: None)
    assert not manager.is_group_loading("g") and not manager.is_group_local("g")
    await until(lambda: not manager._loads)
    assert loaded == [] and manager.get_group("g") is None
    # Elected again (a newer epoch): it loads.
    manager.schedule_load(0, 5, loaded.append)
    await until(lambda: manager.is_group_local("g"))
    assert [g.group_id for g in loaded] == ["g"] and manager.get_group("g").is_(GroupState.EMPTY)
    # A stale election is ignored; a partition this broker does not lead does not load.
    topic.leading.clear()
    manager.remove_groups_for_partition(0, 6, lambda g: None)
    manager.schedule_load(0, 6, loaded.append)
    await until(lambda: not manager.loading_partitions)
    assert not manager.is_group_local("g")
    manager.shutdown()


async def test_writes_to_a_partition_not_led(topic: FakeOffsetsTopic) -> None:
    manager = GroupMetadataManager(1, OffsetConfig(num_partitions=1), topic, Clock())
    group = GroupMetadata("g", GroupState.EMPTY, manager.time_ms)
    topic.leading.clear()
    errors = await manager.store_offsets(group, {("t", 0): OffsetAndMetadata(1)})
    assert errors == {("t", 0): ErrorCode.NOT_COORDINATOR}
    assert await manager.store_group(group, {}) == ErrorCode.NOT_COORDINATOR


async def test_compressed_commits_load(topic: FakeOffsetsTopic) -> None:
    manager = GroupMetadataManager(1, OffsetConfig(num_partitions=1, compression=1), topic, Clock())  # gzip
    group = GroupMetadata("g", GroupState.EMPTY, manager.time_ms)
    assert await manager.store_offsets(group, {("t", 0): OffsetAndMetadata(9)}) == {("t", 0): ErrorCode.NONE}
    data = bytes(topic.logs[0].read(0, 1 << 20).records)
    assert record_batch.read_header(data).compression == 1
    assert read_partition(topic.logs[0], 1 << 20, "test").offsets["g"][("t", 0)].value.offset == 9
