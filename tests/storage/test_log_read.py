"""Log reads: ranges for sendfile and memoryviews, bounds, segment boundaries, ListOffsets by time."""

import socket

import pytest

from network.send import RegionSend
from protocol import record_batch as rb
from protocol.errors import ErrorCode
from storage.errors import OffsetOutOfRangeError
from storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from tests.storage.helpers import batch


@pytest.fixture
def filled(make_log):
    """100 single-record batches over several segments, timestamps 1000+offset*10."""
    log = make_log({"segment.bytes": 1000, "index.interval.bytes": 100})
    for i in range(100):
        log.append_as_leader(batch(1, timestamp=1000 + i * 10), leader_epoch=i // 50)
    return log


def first_offset(data):
    return rb.read_header(data.records, 0).base_offset


def test_every_offset_reads_from_its_batch(filled):
    for offset in range(100):
        data = filled.read(offset, 1)
        assert data.fetch_offset_metadata.message_offset == offset
        assert first_offset(data) == offset
        assert data.length == rb.read_header(data.records, 0).size  # min_one_message


def test_segment_boundaries(filled):
    for segment in filled.segments[1:]:
        base = segment.base_offset
        data = filled.read(base - 1, 1 << 20)
        assert first_offset(data) == base - 1
        end = data.position + data.length
        # a read stays within one segment, ending at its last batch
        assert end == filled.segments[filled.segments.index(segment) - 1].size
        assert first_offset(filled.read(base, 1)) == base
        assert filled.read(base, 1).fetch_offset_metadata.segment_base_offset == base


def test_a_read_is_a_file_region_the_network_sends_as_is(filled):
    data = filled.read(10, 500)
    a, b = socket.socketpair()
    try:
        assert RegionSend(data).send_to(a.fileno())
        received = b.recv(data.length, socket.MSG_WAITALL)
    finally:
        a.close()
        b.close()
    assert len(data) == data.length > 0 and received == bytes(data.records)
    assert isinstance(data.records, memoryview) and data.records.readonly


def test_max_bytes_may_cut_the_last_batch(filled):
    size = rb.read_header(filled.read(0, 1).records, 0).size
    data = filled.read(0, size + 5)
    assert data.length == size + 5
    assert len(list(rb.iter_headers(data.records))) == 1
    data = filled.read(0, 5, min_one_message=False)
    assert data.length == 5 and data.first_entry_incomplete


def test_upper_bound_limits_the_read(filled):
    data = filled.read(0, 1 << 20, upper_bound=3)
    assert [h.base_offset for _, h in rb.iter_headers(data.records)] == [0, 1, 2]
    empty = filled.read(3, 1 << 20, upper_bound=3)
    assert empty.length == 0 and empty.records == b""
    assert filled.read(5, 100, upper_bound=3).length == 0


def test_out_of_range(filled):
    with pytest.raises(OffsetOutOfRangeError) as e:
        filled.read(101, 100)
    assert e.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    at_end = filled.read(100, 100)
    assert at_end.length == 0
    assert at_end.fetch_offset_metadata == filled.log_end_offset_metadata
    filled.update_high_watermark(100)
    filled.delete_records_before(40)
    with pytest.raises(OffsetOutOfRangeError):
        filled.read(39, 100)
    assert first_offset(filled.read(40, 100)) == 40


def test_offset_for_timestamp(filled):
    assert filled.offset_for_timestamp(1000) == (1000, 0, 0)
    assert filled.offset_for_timestamp(1005) == (1010, 1, 0)
    assert filled.offset_for_timestamp(1990) == (1990, 99, 1)
    assert filled.offset_for_timestamp(5000) is None
    for offset in range(0, 100, 7):
        assert filled.offset_for_timestamp(1000 + offset * 10).offset == offset
    assert filled.offset_for_timestamp(EARLIEST_TIMESTAMP) == (-1, 0, 0)
    assert filled.offset_for_timestamp(LATEST_TIMESTAMP) == (-1, 100, 1)
    assert filled.offset_for_timestamp(MAX_TIMESTAMP) == (1990, 99, 1)


def test_offset_for_timestamp_respects_log_start(filled):
    filled.update_high_watermark(100)
    filled.delete_records_before(30)
    assert filled.offset_for_timestamp(0).offset == 30
    assert filled.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 30


def test_convert_to_offset_metadata(filled):
    meta = filled.convert_to_offset_metadata(55)
    segment = next(s for s in reversed(filled.segments) if s.base_offset <= 55)
    assert meta.segment_base_offset == segment.base_offset
    assert rb.read_header(segment.view(), meta.relative_position).base_offset == 55


def test_end_offset_for_epoch(filled):
    assert filled.end_offset_for_epoch(0) == (0, 50)
    assert filled.end_offset_for_epoch(1) == (1, 100)
    assert filled.end_offset_for_epoch(2) == (-1, -1)
