"""FrameBuffers: a mapping is handed out again only when nothing refers to it, and the pool stays within
its byte budget; a broker receiving large Produce frames reuses them. StagingBuffers keep a few idle
stages and unmap the rest. Tests hold mappings by weak reference: a strong one would itself keep a
mapping in use."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from network.frame_buffers import STAGE_SIZE, FrameBuffers, StagingBuffers
from protocol import record_batch
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import ProduceRequest
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient

MiB = 1 << 20


def test_a_buffer_has_the_size_asked_for_and_is_writable() -> None:
    view = FrameBuffers().take(1_000_123)
    assert len(view) == 1_000_123
    view[-3:] = b"abc"
    assert bytes(view[-3:]) == b"abc"


def test_a_mapping_is_used_again_once_every_view_of_it_is_gone() -> None:
    pool = FrameBuffers()
    first = pool.take(MiB)
    records = first[100:200]  # what a decoded request keeps: a slice of the frame
    mapping = weakref.ref(first.obj)
    del first
    second = pool.take(MiB)
    assert second.obj is not mapping()  # the records still refer to the first frame
    del records, second
    gc.collect()
    assert pool.take(MiB).obj is mapping()


def test_frames_of_nearly_the_same_size_share_a_mapping_and_the_smallest_fitting_one_is_taken() -> None:
    pool = FrameBuffers()
    big, small = pool.take(3 * MiB), pool.take(MiB - 10)
    big_mapping, small_mapping = weakref.ref(big.obj), weakref.ref(small.obj)
    del big, small
    assert pool.take(MiB - 20).obj is small_mapping()
    assert pool.take(2 * MiB).obj is big_mapping()


def test_the_pool_keeps_at_most_its_budget_and_frames_beyond_it_get_mappings_of_their_own() -> None:
    pool = FrameBuffers(max_bytes=4 * MiB)
    held = [pool.take(MiB) for _ in range(4)]  # the whole budget, in use
    extra = pool.take(MiB)
    extra_mapping = weakref.ref(extra.obj)
    del extra
    gc.collect()
    assert extra_mapping() is None  # not pooled (the budget was spent): unmapped once dropped
    huge = pool.take(8 * MiB)
    assert len(huge) == 8 * MiB
    del held
    gc.collect()
    # Idle mappings make room: a 2 MiB frame evicts the smallest idle ones instead of going unpooled.
    two = pool.take(2 * MiB)
    two_mapping = weakref.ref(two.obj)
    del two
    assert pool.take(2 * MiB).obj is two_mapping()


def test_stages_are_used_again_and_those_beyond_the_idle_ones_kept_are_unmapped() -> None:
    stages = StagingBuffers(keep=2)
    taken = [stages.take() for _ in range(3)]
    assert [len(stage) for stage in taken] == [STAGE_SIZE] * 3
    mappings = [weakref.ref(stage.obj) for stage in taken]
    for stage in taken:
        stages.give_back(stage)
    del taken, stage
    gc.collect()
    assert stages.idle == 2 and mappings[2]() is None
    assert stages.take().obj is mappings[1]()


def _minor_faults(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[7])  # minflt, the 10th field


@pytest.mark.integration
def test_a_broker_takes_a_stream_of_1_mb_produces_without_a_page_fault_per_page(one_broker: Cluster) -> None:
    one_broker.create_topic("large-frames", 1, replication_factor=1)
    broker = one_broker.broker(1)
    client = RawClient(broker.bootstrap)
    records = [record_batch.Record(i, 0, None, b"x" * 1000) for i in range(1000)]
    batch = record_batch.encode_batch(records, base_offset=0)

    def produce(acks: int) -> None:
        request = ProduceRequest(
            acks=acks,
            timeout_ms=5000,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name="large-frames",
                    partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)],
                )
            ],
        )
        response = client.request(ApiKey.PRODUCE, 9, request)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE

    for _ in range(3):
        produce(-1)
    before = _minor_faults(broker.pid)
    frames = 20
    for i in range(frames):
        produce(-1 if i % 2 else 1)
    faults = _minor_faults(broker.pid) - before
    client.close()
    # A fresh mapping per frame faults once per 4 KiB page: 20 x ~256 for these frames.
    assert faults < frames * len(batch) // 4096 // 4, faults
