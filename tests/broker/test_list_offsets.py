"""ListOffsets as Kafka 3.9 answers it (KafkaApis.handleListOffsetRequest, Partition.fetchOffsetForTimestamp,
UnifiedLog.fetchOffsetByTimestamp): special timestamps by version, MAX_TIMESTAMP's record offset
(KAFKA-16310), duplicates, epochs, OFFSET_NOT_AVAILABLE, and v0's old-style offsets."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from broker.list_offsets import ListOffsetsApis, legacy_offsets_before
from broker.partition import Partition
from protocol import record_batch as rb
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ListOffsetsRequest
from storage.config import LogConfig
from storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Log
from tests.storage.helpers import Clock

BROKER = 1
T0 = 1_700_000_000_000


def records_batch(timestamps: list[int], *, log_append: bool = False) -> bytearray:
    records = [rb.Record(i, ts, None, b"v%d" % i) for i, ts in enumerate(timestamps)]
    return bytearray(
        rb.encode_batch(records, base_offset=0, timestamp_type=1 if log_append else rb.CREATE_TIME)
    )


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def make_log(tmp_path: Any, clock: Clock) -> Iterator[Callable[..., Log]]:
    opened: list[Log] = []

    def make(props: dict[str, Any] | None = None, name: str = "topic-0") -> Log:
        lg = Log(str(tmp_path / name), LogConfig.from_props(props or {}), time_ms=clock)
        opened.append(lg)
        return lg

    yield make
    for lg in opened:
        if not lg.closed:
            lg.close_handlers()


class FakeReplicas:
    """The two ReplicaManager lookups ListOffsetsApis makes, over one partition."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition

    def local_partition(self, topic: str, index: int) -> Partition:
        if (topic, index) != self.partition.key:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return self.partition


@pytest.fixture
def partition(make_log: Any) -> Partition:
    p = Partition("t", 0, BROKER)
    p.log = make_log({"segment.bytes": 100_000}, name="t-0")
    p.leader_id, p.leader_epoch = BROKER, 3
    return p


def list_offsets(
    partition: Partition,
    version: int,
    *timestamps: int,
    replica_id: int = -1,
    current_leader_epoch: int = -1,
    partitions: list[int] | None = None,
    max_num_offsets: int = 1,
) -> list[Any]:
    indexes = partitions or [0] * len(timestamps)
    body = ListOffsetsRequest(
        replica_id=replica_id,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name="t",
                partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(
                        partition_index=i,
                        timestamp=ts,
                        current_leader_epoch=current_leader_epoch,
                        max_num_offsets=max_num_offsets,
                    )
                    for i, ts in zip(indexes, timestamps, strict=True)
                ],
            )
        ],
    )
    apis = ListOffsetsApis(None, FakeReplicas(partition))  # type: ignore[arg-type]
    request = SimpleNamespace(body=body, version=version)
    response = asyncio.run(apis.handle_list_offsets(request))  # type: ignore[arg-type]
    return list(response.topics[0].partitions)


def fill(partition: Partition, *batches: bytearray, epoch: int = 3) -> None:
    lg = partition.log
    assert lg is not None
    for b in batches:
        lg.append_as_leader(b, leader_epoch=epoch)
    lg.update_high_watermark(lg.log_end_offset)


def test_max_timestamp_is_the_offset_of_the_record_not_of_its_batch(partition: Partition) -> None:
    fill(partition, records_batch([T0, T0 + 1]), records_batch([T0 + 2, T0 + 50, T0 + 3]))
    [r] = list_offsets(partition, 7, MAX_TIMESTAMP)
    assert (r.error_code, r.offset, r.timestamp, r.leader_epoch) == (ErrorCode.NONE, 3, T0 + 50, 3)


def test_max_timestamp_first_record_holding_it_when_several_do(partition: Partition) -> None:
    fill(partition, records_batch([T0, T0 + 9, T0 + 9, T0 + 1]), records_batch([T0 + 9]))
    assert partition.log is not None
    assert partition.log.offset_for_timestamp(MAX_TIMESTAMP) == (T0 + 9, 1, 3)


def test_max_timestamp_of_a_log_append_time_batch_is_its_first_record(make_log: Any, clock: Clock) -> None:
    lg = make_log({"message.timestamp.type": "LogAppendTime"})
    lg.append_as_leader(records_batch([T0, T0 + 1]), leader_epoch=0)
    clock.advance(5)
    lg.append_as_leader(records_batch([T0, T0 + 1, T0 + 2]), leader_epoch=1)
    assert lg.offset_for_timestamp(MAX_TIMESTAMP) == (clock.now, 2, 1)
    lg.append_as_leader(records_batch([T0 + 99]), leader_epoch=1)  # stamped at the same time: not newer
    assert lg.offset_for_timestamp(MAX_TIMESTAMP) == (clock.now, 2, 1)


def test_max_timestamp_across_segments_takes_the_first_segment_on_ties(make_log: Any) -> None:
    lg = make_log({"segment.bytes": 100_000})
    lg.append_as_leader(records_batch([T0, T0 + 7, T0]), leader_epoch=0)
    lg.roll()
    lg.append_as_leader(records_batch([T0 + 7, T0 + 1]), leader_epoch=1)
    assert lg.offset_for_timestamp(MAX_TIMESTAMP) == (T0 + 7, 1, 0)
    lg.append_as_leader(records_batch([T0 + 1, T0 + 8]), leader_epoch=1)
    assert lg.offset_for_timestamp(MAX_TIMESTAMP) == (T0 + 8, 6, 1)


def test_max_timestamp_survives_reopening_the_log(make_log: Any, tmp_path: Any) -> None:
    lg = make_log({"index.interval.bytes": 1}, name="r-0")
    for i in range(5):
        lg.append_as_leader(records_batch([T0 + i, T0 + 100 + i, T0 + i]), leader_epoch=0)
    lg.close()
    reopened = make_log({"index.interval.bytes": 1}, name="r-0")
    assert reopened.offset_for_timestamp(MAX_TIMESTAMP) == (T0 + 104, 13, 0)


def test_max_timestamp_of_an_empty_log_is_none(partition: Partition) -> None:
    [r] = list_offsets(partition, 9, MAX_TIMESTAMP)
    assert (r.error_code, r.offset, r.timestamp) == (ErrorCode.NONE, -1, -1)


def test_max_timestamp_beyond_the_high_watermark_is_not_given_to_consumers(partition: Partition) -> None:
    fill(partition, records_batch([T0, T0 + 1]))
    assert partition.log is not None
    partition.log.append_as_leader(records_batch([T0 + 99]), leader_epoch=3)  # not replicated yet
    [r] = list_offsets(partition, 9, MAX_TIMESTAMP)
    assert (r.offset, r.timestamp) == (-1, -1)
    [r] = list_offsets(partition, 9, MAX_TIMESTAMP, replica_id=2)  # a replica: up to the log end
    assert (r.offset, r.timestamp) == (2, T0 + 99)


@pytest.mark.parametrize(
    ("timestamp", "first_version"), [(MAX_TIMESTAMP, 7), (-4, 8), (-5, 9), (-6, 1 << 15)]
)
def test_special_timestamps_before_their_version_are_unsupported(
    partition: Partition, timestamp: int, first_version: int
) -> None:
    fill(partition, records_batch([T0]))
    for version in range(1, 10):
        [r] = list_offsets(partition, version, timestamp)
        if version < first_version:
            assert (r.error_code, r.offset, r.timestamp) == (ErrorCode.UNSUPPORTED_VERSION, -1, -1)
        else:
            assert r.error_code == ErrorCode.NONE


def test_earliest_local_timestamp_is_the_log_start_offset_without_tiered_storage(
    partition: Partition,
) -> None:
    fill(partition, records_batch([T0, T0]), records_batch([T0]), epoch=2)
    assert partition.log is not None
    partition.log.delete_records_before(1)
    [local] = list_offsets(partition, 8, -4)
    [earliest] = list_offsets(partition, 8, EARLIEST_TIMESTAMP)
    assert (local.error_code, local.offset, local.timestamp, local.leader_epoch) == (0, 1, -1, 2)
    assert (earliest.offset, earliest.timestamp, earliest.leader_epoch) == (1, -1, 2)


def test_latest_tiered_timestamp_without_tiered_storage_is_offset_minus_one(partition: Partition) -> None:
    fill(partition, records_batch([T0, T0]))
    [r] = list_offsets(partition, 9, -5)
    assert (r.error_code, r.offset, r.timestamp, r.leader_epoch) == (ErrorCode.NONE, -1, -1, -1)


def test_latest_carries_the_partition_leader_epoch(partition: Partition) -> None:
    fill(partition, records_batch([T0, T0]), epoch=1)  # written in epoch 1, now led in epoch 3
    [r] = list_offsets(partition, 9, LATEST_TIMESTAMP)
    assert (r.offset, r.timestamp, r.leader_epoch) == (2, -1, 3)
    [r] = list_offsets(partition, 3, LATEST_TIMESTAMP)
    assert (r.offset, r.leader_epoch) == (2, -1)  # no leader epoch before v4


def test_a_partition_named_twice_is_an_invalid_request(partition: Partition) -> None:
    fill(partition, records_batch([T0]))
    responses = list_offsets(partition, 9, LATEST_TIMESTAMP, EARLIEST_TIMESTAMP)
    assert [r.error_code for r in responses] == [ErrorCode.INVALID_REQUEST] * 2
    assert all(r.offset == -1 and r.timestamp == -1 for r in responses)


def test_offset_not_available_while_the_high_watermark_lags_the_epoch_start(partition: Partition) -> None:
    fill(partition, records_batch([T0, T0]))
    partition.leader_epoch_start_offset = 5  # a new leader, the high watermark (2) not yet there
    assert [r.error_code for r in list_offsets(partition, 5, LATEST_TIMESTAMP)] == [
        ErrorCode.OFFSET_NOT_AVAILABLE
    ]
    assert [r.error_code for r in list_offsets(partition, 4, LATEST_TIMESTAMP)] == [
        ErrorCode.LEADER_NOT_AVAILABLE
    ]
    assert [r.error_code for r in list_offsets(partition, 9, T0 + 10)] == [ErrorCode.OFFSET_NOT_AVAILABLE]
    [found] = list_offsets(partition, 9, T0)  # found below the last fetchable offset: answered
    assert (found.error_code, found.offset) == (ErrorCode.NONE, 0)
    [earliest] = list_offsets(partition, 9, EARLIEST_TIMESTAMP)
    assert (earliest.error_code, earliest.offset) == (ErrorCode.NONE, 0)
    [replica] = list_offsets(partition, 9, LATEST_TIMESTAMP, replica_id=2)
    assert (replica.error_code, replica.offset) == (ErrorCode.NONE, 2)


def test_a_fenced_epoch_is_reported_before_not_leading(partition: Partition) -> None:
    partition.leader_id = 2
    [r] = list_offsets(partition, 9, LATEST_TIMESTAMP, current_leader_epoch=1)
    assert r.error_code == ErrorCode.FENCED_LEADER_EPOCH
    [r] = list_offsets(partition, 9, LATEST_TIMESTAMP, current_leader_epoch=3)
    assert r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    [r] = list_offsets(partition, 9, LATEST_TIMESTAMP, current_leader_epoch=4)
    assert r.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    [r] = list_offsets(partition, 9, LATEST_TIMESTAMP, replica_id=-2)  # a debugging client: any replica
    assert r.error_code == ErrorCode.NONE


def test_unknown_partition(partition: Partition) -> None:
    [r] = list_offsets(partition, 9, LATEST_TIMESTAMP, partitions=[7])
    assert (r.error_code, r.offset, r.timestamp) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)


def test_v0_lists_old_style_offsets_newest_first(partition: Partition) -> None:
    lg = partition.log
    assert lg is not None
    for _ in range(3):
        fill(partition, records_batch([T0, T0]))
        lg.roll()
    fill(partition, records_batch([T0]))
    for i, segment in enumerate(lg.segments):
        segment.set_last_modified_ms(T0 + i * 1000)
    [r] = list_offsets(partition, 0, LATEST_TIMESTAMP, max_num_offsets=10)
    assert (r.error_code, list(r.old_style_offsets)) == (ErrorCode.NONE, [7, 6, 4, 2, 0])
    [r] = list_offsets(partition, 0, LATEST_TIMESTAMP)
    assert list(r.old_style_offsets) == [7]
    [r] = list_offsets(partition, 0, EARLIEST_TIMESTAMP, max_num_offsets=3)
    assert list(r.old_style_offsets) == [0]
    [r] = list_offsets(partition, 0, T0 + 1500, max_num_offsets=5)
    assert list(r.old_style_offsets) == [2, 0]
    [r] = list_offsets(partition, 0, T0 - 1, max_num_offsets=5)
    assert list(r.old_style_offsets) == []
    [r] = list_offsets(partition, 0, MAX_TIMESTAMP)
    assert r.error_code == ErrorCode.UNSUPPORTED_VERSION


def test_v0_caps_a_consumer_at_the_high_watermark(partition: Partition) -> None:
    fill(partition, records_batch([T0, T0]))
    lg = partition.log
    assert lg is not None
    lg.append_as_leader(records_batch([T0]), leader_epoch=3)  # past the high watermark (2)
    [r] = list_offsets(partition, 0, LATEST_TIMESTAMP, max_num_offsets=5)
    assert list(r.old_style_offsets) == [2, 0]
    [r] = list_offsets(partition, 0, LATEST_TIMESTAMP, max_num_offsets=5, replica_id=2)
    assert list(r.old_style_offsets) == [3, 0]


def test_legacy_offsets_of_an_empty_log(make_log: Any) -> None:
    lg = make_log()
    assert legacy_offsets_before(lg, LATEST_TIMESTAMP, 5, T0) == [0]
    assert os.path.exists(lg.segments[0].log_path)
