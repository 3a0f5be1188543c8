"""Legacy MessageSet v0/v1 reading, against sets built by kafka-python and aiokafka."""

import struct
import zlib

import cramjam
import pytest
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder as AioLegacyBuilder
from kafka.record.legacy_records import LegacyRecordBatch as KafkaLegacyBatch
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KafkaLegacyBuilder

from protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress
from protocol.message_set import LegacyRecord, decode_message_set
from protocol.record_batch import CorruptRecordError

ENTRIES = [
    (i, 1_600_000_000_000 + i, None if i == 2 else b"key%d" % i, None if i == 3 else b"payload " * 30)
    for i in range(6)
]


def legacy_message(
    offset: int, magic: int, attributes: int, key: bytes | None, value: bytes | None, timestamp: int = -1
) -> bytes:
    """One v0/v1 message, for shapes the clients' builders cannot make (broker-side wrappers, bad data)."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def built_by(builder: object, entries: list = ENTRIES) -> bytes:
    for offset, timestamp, key, value in entries:
        builder.append(offset, timestamp, key, value)
    return bytes(builder.build())


def expected(
    magic: int, entries: list = ENTRIES, *, base: int = 0, timestamp_type: int = 0
) -> list[LegacyRecord]:
    return [
        LegacyRecord(
            base + offset,
            None if magic == 0 else timestamp,
            None if magic == 0 else timestamp_type,
            key,
            value,
            magic,
        )
        for offset, timestamp, key, value in entries
    ]


@pytest.mark.parametrize("magic", [0, 1])
def test_helper_matches_kafka_python(magic: int) -> None:
    ours = b"".join(legacy_message(o, magic, 0, k, v, t) for o, t, k, v in ENTRIES)
    assert ours == built_by(KafkaLegacyBuilder(magic, 0, 1 << 20))


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed(magic: int) -> None:
    buf = built_by(KafkaLegacyBuilder(magic, NONE, 1 << 20))
    assert decode_message_set(buf) == expected(magic)
    assert decode_message_set(bytearray(buf)) == decode_message_set(memoryview(buf)) == expected(magic)


@pytest.mark.parametrize(
    ("magic", "codec", "builder"),
    [
        (0, GZIP, KafkaLegacyBuilder),
        (1, GZIP, KafkaLegacyBuilder),
        (0, GZIP, AioLegacyBuilder),
        (1, GZIP, AioLegacyBuilder),
        (0, SNAPPY, AioLegacyBuilder),
        (1, SNAPPY, AioLegacyBuilder),
        (1, LZ4, AioLegacyBuilder),
    ],
)
def test_producer_wrappers(magic: int, codec: int, builder: type) -> None:
    buf = built_by(builder(magic, codec, 1 << 20))
    assert buf[17] & 0x07 == codec  # attributes of a single compressed wrapper
    assert struct.unpack_from(">i", buf, 8)[0] + 12 == len(buf)
    assert decode_message_set(buf) == expected(magic)


def test_v1_wrapper_with_relative_offsets() -> None:
    # A broker assigns the wrapper the absolute offset of the last inner message (KIP-31).
    buf = bytearray(built_by(KafkaLegacyBuilder(1, GZIP, 1 << 20)))
    struct.pack_into(">q", buf, 0, 1005)  # outside the CRC
    assert decode_message_set(buf) == expected(1, base=1000)
    kafka_python = [(r.offset, r.timestamp, r.key, r.value) for r in KafkaLegacyBatch(bytes(buf), 1)]
    assert kafka_python == [(r.offset, r.timestamp, r.key, r.value) for r in decode_message_set(buf)]


def test_v1_wrapper_offset_below_last_inner_offset() -> None:
    buf = bytearray(built_by(KafkaLegacyBuilder(1, GZIP, 1 << 20)))
    struct.pack_into(">q", buf, 0, 4)
    with pytest.raises(CorruptRecordError):
        decode_message_set(buf)


def test_v0_wrapper_keeps_absolute_inner_offsets() -> None:
    entries = [(o + 50, t, k, v) for o, t, k, v in ENTRIES]
    buf = bytearray(built_by(KafkaLegacyBuilder(0, GZIP, 1 << 20), entries))
    struct.pack_into(">q", buf, 0, 55)
    assert decode_message_set(buf) == expected(0, entries)


def _wrapper(
    magic: int, codec: int, inner: bytes, *, offset: int = 0, timestamp: int = -1, attrs: int = 0
) -> bytes:
    return legacy_message(offset, magic, codec | attrs, None, inner, timestamp)


def test_log_append_time_wrapper_overrides_inner_timestamps() -> None:
    inner = built_by(KafkaLegacyBuilder(1, NONE, 1 << 20))
    buf = _wrapper(1, GZIP, compress(GZIP, inner), offset=5, timestamp=1_700_000_000_000, attrs=0x08)
    records = decode_message_set(buf)
    assert [r.timestamp for r in records] == [1_700_000_000_000] * len(ENTRIES)
    assert {r.timestamp_type for r in records} == {1}
    create_time = decode_message_set(_wrapper(1, GZIP, compress(GZIP, inner), offset=5, timestamp=123))
    assert create_time == expected(1)


def test_uncompressed_log_append_time_message() -> None:
    (record,) = decode_message_set(legacy_message(9, 1, 0x08, b"k", b"v", 77))
    assert record == LegacyRecord(9, 77, 1, b"k", b"v", 1)


def test_raw_snappy_wrapper_as_librdkafka_writes() -> None:
    inner = built_by(KafkaLegacyBuilder(1, NONE, 1 << 20))
    buf = _wrapper(1, SNAPPY, bytes(cramjam.snappy.compress_raw(inner)))
    assert decode_message_set(buf) == expected(1)


def _broken_checksum(frame: bytes) -> bytes:
    """Kafka 0.8/0.9 wrote a wrong frame descriptor checksum (byte 6 without a content size)."""
    broken = bytearray(frame)
    broken[6] ^= 0xA5
    return bytes(broken)


def test_magic0_lz4_with_broken_header_checksum() -> None:
    inner = built_by(KafkaLegacyBuilder(0, NONE, 1 << 20))
    assert decode_message_set(_wrapper(0, LZ4, _broken_checksum(compress(LZ4, inner)))) == expected(0)
    assert decode_message_set(_wrapper(0, LZ4, compress(LZ4, inner))) == expected(0)


def test_magic1_lz4_checksum_is_enforced() -> None:
    inner = built_by(KafkaLegacyBuilder(1, NONE, 1 << 20))
    with pytest.raises(CorruptRecordError):
        decode_message_set(_wrapper(1, LZ4, _broken_checksum(compress(LZ4, inner))))


def test_mixed_magics_in_one_set() -> None:
    buf = legacy_message(0, 0, 0, b"a", b"b") + legacy_message(1, 1, 0, None, b"c", 42)
    assert decode_message_set(buf) == [
        LegacyRecord(0, None, None, b"a", b"b", 0),
        LegacyRecord(1, 42, 0, None, b"c", 1),
    ]


@pytest.mark.parametrize("magic", [0, 1])
def test_truncated_trailing_message_is_dropped(magic: int) -> None:
    messages = [legacy_message(o, magic, 0, k, v, t) for o, t, k, v in ENTRIES[:3]]
    buf = b"".join(messages)
    two = len(messages[0]) + len(messages[1])
    for cut in (two, two + 5, two + 12, len(buf) - 1):
        assert decode_message_set(buf[:cut]) == expected(magic, ENTRIES[:2])
    assert decode_message_set(buf[:11]) == []
    assert decode_message_set(b"") == []


def test_bad_crc() -> None:
    buf = bytearray(legacy_message(0, 1, 0, b"k", b"v", 1))
    buf[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_message_set(buf)


def test_bad_inner_crc() -> None:
    inner = bytearray(built_by(KafkaLegacyBuilder(1, NONE, 1 << 20)))
    inner[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_message_set(_wrapper(1, GZIP, compress(GZIP, bytes(inner))))


@pytest.mark.parametrize(
    "buf",
    [
        struct.pack(">qi", 0, 13) + b"\x00" * 13,  # below the v0 minimum size
        legacy_message(0, 2, 0, b"k", b"v"),  # magic 2 is a RecordBatch, not a message
        legacy_message(0, 1, GZIP, None, None, 0),  # compressed wrapper without a value
        legacy_message(0, 1, ZSTD, None, b"x", 0),  # zstd needs magic 2
        legacy_message(0, 1, GZIP, None, b"not gzip", 0),
        legacy_message(0, 1, GZIP, None, compress(GZIP, b""), 0),  # wrapper with no inner message
        legacy_message(
            0, 1, GZIP, None, compress(GZIP, legacy_message(0, 1, GZIP, None, b"", 0)), 0
        ),  # nested
    ],
    ids=["too-small", "magic-2", "null-wrapper", "zstd", "bad-gzip", "empty-wrapper", "nested"],
)
def test_corrupt_sets(buf: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_message_set(buf)


def test_key_overrunning_its_message() -> None:
    body = struct.pack(">bbi", 0, 0, 50) + b"short" + struct.pack(">i", -1)
    buf = struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body
    with pytest.raises(CorruptRecordError):
        decode_message_set(buf)
