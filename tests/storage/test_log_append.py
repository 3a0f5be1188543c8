"""Log appends: offset assignment in place, follower appends, validation errors, rolls at each trigger."""

import os
import struct

import pytest
from crc32c import crc32c

from protocol import record_batch as rb
from protocol.errors import ErrorCode
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    OffsetsOutOfOrderError,
    RecordListTooLargeError,
    UnexpectedAppendOffsetError,
    UnsupportedCompressionTypeError,
)
from storage.log_validator import LogValidator
from storage.producer_state import AppendOrigin
from tests.storage.helpers import batch, read_all


def test_leader_append_patches_offsets_and_epoch_in_place(make_log):
    log = make_log()
    buf = batch(3) + batch(2)
    info = log.append_as_leader(buf, leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.num_records) == (0, 4, 5)
    headers = [h for _, h in rb.iter_headers(buf)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 7), (3, 7)]
    info = log.append_as_leader(batch(1), leader_epoch=7)
    assert (info.first_offset, info.last_offset) == (5, 5)
    assert log.log_end_offset == 6
    assert [r.offset for r in read_all(log)] == list(range(6))
    assert log.leader_epoch_cache.entries == [(7, 0)]


def test_append_info_timestamps(make_log):
    log = make_log()
    info = log.append_as_leader(batch(3, timestamp=5000) + batch(1, timestamp=4000), leader_epoch=0)
    assert info.max_timestamp == 5002 and info.offset_of_max_timestamp == 2
    assert info.log_append_time == -1 and info.log_start_offset == 0


def test_log_append_time_topic(make_log, clock):
    log = make_log({"message.timestamp.type": "LogAppendTime"})
    buf = batch(2, timestamp=1)
    info = log.append_as_leader(buf, leader_epoch=0)
    assert info.log_append_time == clock.now
    header = rb.read_header(buf)
    assert header.timestamp_type == 1 and header.max_timestamp == clock.now
    assert rb.crc_ok(buf, 0, header)
    assert [r.timestamp for r in read_all(log)] == [clock.now, clock.now]


def test_bytes_input_is_copied(make_log):
    log = make_log()
    data = bytes(batch(1))
    log.append_as_leader(data, leader_epoch=0)
    log.append_as_leader(data, leader_epoch=0)
    assert [r.offset for r in read_all(log)] == [0, 1]


def test_data_reaches_the_file_before_append_returns(make_log):
    log = make_log()
    buf = batch(1)
    log.append_as_leader(buf, leader_epoch=0)
    with open(log.active_segment.log_path, "rb") as f:
        assert f.read() == bytes(buf)


def test_corrupt_batch_is_rejected(make_log):
    log = make_log()
    buf = batch(3)
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError) as e:
        log.append_as_leader(buf, leader_epoch=0)
    assert e.value.error_code == ErrorCode.CORRUPT_MESSAGE
    bad_magic = batch(1)
    bad_magic[16] = 1
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bad_magic, leader_epoch=0)
    assert log.log_end_offset == 0 and log.size == 0


def test_a_client_append_ending_in_a_partial_batch_is_refused_whole(make_log):
    log = make_log()
    for buf in (batch(1) + batch(1)[:30], batch(1)[:30], batch(2)[:-1]):
        with pytest.raises(CorruptRecordError, match="not a whole batch") as e:
            log.append_as_leader(bytearray(buf), leader_epoch=0)
        assert e.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert log.log_end_offset == 0 and log.size == 0


def test_size_limits(make_log):
    log = make_log({"max.message.bytes": 200, "segment.bytes": 1000})
    with pytest.raises(MessageTooLargeError) as e:
        log.append_as_leader(batch(1, value_size=300), leader_epoch=0)
    assert e.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    many = b"".join(batch(1, value_size=100) for _ in range(10))
    with pytest.raises(RecordListTooLargeError) as e:
        log.append_as_leader(bytearray(many), leader_epoch=0)
    assert e.value.error_code == ErrorCode.RECORD_LIST_TOO_LARGE


def test_client_batch_rules(make_log):
    log = make_log()
    nonzero = batch(1)
    rb.set_base_offset(nonzero, 0, 5)
    with pytest.raises(InvalidRecordError, match="baseOffset"):
        log.append_as_leader(nonzero, leader_epoch=0)
    with pytest.raises(InvalidRecordError, match="control"):
        log.append_as_leader(
            bytearray(
                rb.encode_control_batch(
                    base_offset=0,
                    producer_id=1,
                    producer_epoch=0,
                    commit=True,
                    coordinator_epoch=0,
                    timestamp=0,
                )
            ),
            leader_epoch=0,
        )
    with pytest.raises(InvalidRecordError, match="sequence"):
        log.append_as_leader(batch(1, producer_id=5, producer_epoch=0, base_sequence=-1), leader_epoch=0)
    # the coordinator may write control batches
    log.append_as_leader(
        bytearray(
            rb.encode_control_batch(
                base_offset=0,
                producer_id=1,
                producer_epoch=0,
                commit=True,
                coordinator_epoch=0,
                timestamp=0,
            )
        ),
        leader_epoch=0,
        origin=AppendOrigin.COORDINATOR,
    )
    assert log.log_end_offset == 1


def test_compacted_topic_requires_keys(make_log):
    log = make_log({"cleanup.policy": "compact"})
    with pytest.raises(InvalidRecordError, match="without key"):
        log.append_as_leader(batch(1), leader_epoch=0)
    log.append_as_leader(batch([b"v"], keys=[b"k"]), leader_epoch=0)


def test_timestamp_difference(make_log, clock):
    log = make_log({"message.timestamp.difference.max.ms": 1000})
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(batch(1, timestamp=clock.now - 5000), leader_epoch=0)
    log.append_as_leader(batch(1, timestamp=clock.now - 500), leader_epoch=0)


def test_follower_append_keeps_offsets_and_checks_order(make_log):
    log = make_log()
    leader = make_log(name="leader-0")
    for _ in range(3):
        leader.append_as_leader(batch(2), leader_epoch=4)
    data = leader.read(0, 1 << 20).records
    info = log.append_as_follower(bytes(data))
    assert (info.first_offset, info.last_offset) == (0, 5)
    assert log.leader_epoch_cache.entries == [(4, 0)]
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(bytes(data))
    b1, b2 = batch(1), batch(1)
    rb.set_base_offset(b1, 0, 10)
    rb.set_base_offset(b2, 0, 9)
    with pytest.raises(OffsetsOutOfOrderError):
        log.append_as_follower(b1 + b2)
    gap = batch(1)
    rb.set_base_offset(gap, 0, 20)
    log.append_as_follower(gap)
    assert log.log_end_offset == 21


def test_roll_on_segment_bytes(make_log):
    log = make_log({"segment.bytes": 500})
    size = len(batch(1, value_size=50))
    for _ in range(20):
        log.append_as_leader(batch(1, value_size=50), leader_epoch=0)
    assert all(s.size <= 500 for s in log.segments)
    assert log.num_segments == -(-20 * size // (500 // size * size))
    names = sorted(n for n in os.listdir(log.dir) if n.endswith(".log"))
    assert names == [f"{s.base_offset:020d}.log" for s in log.segments]
    assert [r.offset for r in read_all(log)] == list(range(20))


def test_roll_on_segment_ms_uses_record_timestamps(make_log, clock):
    log = make_log({"segment.ms": 1000})
    log.append_as_leader(batch(1, timestamp=10_000), leader_epoch=0)
    log.append_as_leader(batch(1, timestamp=10_500), leader_epoch=0)
    assert log.num_segments == 1
    log.append_as_leader(batch(1, timestamp=11_001), leader_epoch=0)
    assert log.num_segments == 2
    assert log.active_segment.base_offset == 2


def test_roll_on_segment_ms_with_jitter(make_log):
    log = make_log({"segment.ms": 1000, "segment.jitter.ms": 1000})
    jitter = log.active_segment.roll_jitter_ms = 400
    log.append_as_leader(batch(1, timestamp=10_000), leader_epoch=0)
    log.append_as_leader(batch(1, timestamp=10_000 + 1000 - jitter), leader_epoch=0)
    assert log.num_segments == 1
    log.append_as_leader(batch(1, timestamp=10_000 + 1000 - jitter + 1), leader_epoch=0)
    assert log.num_segments == 2


def test_roll_on_full_offset_index(make_log):
    log = make_log({"segment.index.bytes": 8 * 3, "index.interval.bytes": 0})
    for _ in range(10):
        log.append_as_leader(batch(1), leader_epoch=0)
    assert log.num_segments > 2
    assert all(s.offset_index.entries <= 3 for s in log.segments)
    assert [r.offset for r in read_all(log)] == list(range(10))


def test_roll_on_full_time_index(make_log):
    log = make_log({"segment.index.bytes": 24, "index.interval.bytes": 0})  # 3 offset / 2 time slots
    for i in range(6):
        log.append_as_leader(batch(1, timestamp=1000 + i), leader_epoch=0)
    assert all(s.time_index.entries <= 2 for s in log.segments)
    assert log.num_segments >= 3


def test_roll_on_relative_offset_overflow(make_log):
    log = make_log()
    log.append_as_leader(batch(1), leader_epoch=0)
    far = batch(1)
    rb.set_base_offset(far, 0, 2**31 + 10)
    log.append_as_follower(far)
    assert [s.base_offset for s in log.segments] == [0, 2**31 + 10]
    assert log.log_end_offset == 2**31 + 11


def test_roll_snapshots_producer_state(make_log):
    log = make_log({"segment.bytes": 300})
    for seq in range(5):
        log.append_as_leader(
            batch(1, value_size=100, producer_id=9, producer_epoch=0, base_sequence=seq), leader_epoch=0
        )
    snapshots = sorted(n for n in os.listdir(log.dir) if n.endswith(".snapshot"))
    assert snapshots == [f"{s.base_offset:020d}.snapshot" for s in log.segments[1:]]


def test_flush_messages_policy_advances_recovery_point(make_log):
    log = make_log({"flush.messages": 2})
    log.append_as_leader(batch(1), leader_epoch=0)
    assert log.recovery_point == 0
    log.append_as_leader(batch(1), leader_epoch=0)
    assert log.recovery_point == 2


def test_a_follower_append_ending_in_a_partial_batch_is_trimmed_and_logged_at_debug(make_log, caplog):
    log = make_log()
    caplog.set_level("DEBUG", logger="storage.log_validator")
    fetched = bytes(batch(1))
    log.append_as_follower(fetched + fetched[:30])  # a fetch cut at its byte limit
    assert log.log_end_offset == 1
    levels = [r.levelname for r in caplog.records if "trailing partial batch" in r.getMessage()]
    assert levels == ["DEBUG"]


def _recompressed(buf: bytearray, codec: int) -> bytearray:
    """The batch claiming `codec` in its attributes, payload untouched, its CRC made right again."""
    struct.pack_into(">h", buf, 21, codec)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return buf


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_client_batches_that_decode_into_their_records_pass(codec):
    records = [rb.Record(i, 0, b"k", b"v" * 300, []) for i in range(50)]
    buf = bytearray(rb.encode_batch(records, base_offset=0, compression=codec))
    LogValidator.validate_compressed(memoryview(batch(2) + buf), "t-0")


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_a_batch_with_a_codec_kafka_does_not_define_is_refused(codec):
    with pytest.raises(UnsupportedCompressionTypeError, match=f"codec id {codec}") as e:
        LogValidator.validate_compressed(memoryview(batch(2) + _recompressed(batch(3), codec)), "t-0")
    assert e.value.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_a_compressed_flag_on_an_uncompressed_payload_is_refused():
    with pytest.raises(CorruptRecordError, match="Invalid compressed batch in the append to t-0") as e:
        LogValidator.validate_compressed(memoryview(_recompressed(batch(3), 1)), "t-0")
    assert e.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_a_compressed_batch_failing_its_crc_is_left_to_the_append():
    buf = bytearray(rb.encode_batch([rb.Record(0, 0, None, b"v", [])], base_offset=0, compression=1))
    buf[-1] ^= 0xFF
    LogValidator.validate_compressed(memoryview(buf), "t-0")
