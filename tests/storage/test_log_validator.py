"""LogValidator's request stage: what a Produce's records for one partition must pass before any log."""

import struct

import pytest

from protocol import record_batch as rb
from protocol.compression import ZSTD
from protocol.errors import ErrorCode
from storage.errors import InvalidRecordError, InvalidTopicError, UnsupportedCompressionTypeError
from storage.log_validator import LogValidator
from tests.storage.helpers import batch


def _compressed(codec: int) -> bytes:
    return rb.encode_batch([rb.Record(0, 0, b"k", b"v" * 100)], base_offset=0, compression=codec)


def test_uncompressed_batches_pass_and_need_no_decompression() -> None:
    assert LogValidator.validate_produce("t", batch(2) + batch(3), 9) is False


def test_a_compressed_batch_among_others_is_reported_for_the_off_loop_check() -> None:
    assert LogValidator.validate_produce("t", batch(2) + _compressed(1), 9) is True


@pytest.mark.parametrize("records", [None, b""])
def test_no_records_pass_with_nothing_to_check(records: bytes | None) -> None:
    assert LogValidator.validate_produce("t", records, 9) is False


@pytest.mark.parametrize("records", [None, b"", bytes(batch(1))])
def test_internal_topics_are_refused_whatever_the_records(records: bytes | None) -> None:
    with pytest.raises(InvalidTopicError, match="__consumer_offsets is internal") as e:
        LogValidator.validate_produce("__consumer_offsets", records, 9)
    assert e.value.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


@pytest.mark.parametrize("magic", [0, 1])
def test_a_legacy_entry_after_a_v2_batch_is_refused(magic: int) -> None:
    legacy = bytearray(batch(1))
    legacy[16] = magic
    with pytest.raises(InvalidRecordError, match="Produce v3 takes record batches of magic 2 only") as e:
        LogValidator.validate_produce("t", bytes(batch(1)) + legacy, 3)
    assert e.value.error_code == ErrorCode.INVALID_RECORD


@pytest.mark.timeout(5)
@pytest.mark.parametrize("length", [-12, -100, -(2**31)])
def test_a_negative_batch_length_ends_the_magic_walk(length: int) -> None:
    """The walk once stepped by the length field, so -12 stood still and the event loop with it."""
    records = bytearray(batch(1))
    struct.pack_into(">i", records, 8, length)
    assert LogValidator.validate_produce("t", records, 9) is False


def test_zstd_needs_produce_v7() -> None:
    with pytest.raises(UnsupportedCompressionTypeError, match=r"zstd needs Produce v7\+") as e:
        LogValidator.validate_produce("t", _compressed(ZSTD), 6)
    assert e.value.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert LogValidator.validate_produce("t", _compressed(ZSTD), 7) is True
