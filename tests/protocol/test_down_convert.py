"""Down-conversion of v2 batches to magic 0/1 message sets (protocol.down_convert), read back with Samsa's
legacy reader and with kafka-python's (an independent implementation of the old formats)."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from kafka.record.legacy_records import LegacyRecordBatch as KafkaLegacyBatch
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KafkaLegacyBuilder
from kafka.record.memory_records import MemoryRecords as KafkaMemoryRecords

from protocol.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    UnsupportedCompressionTypeError,
    decompress,
    decompress_lz4_lenient,
)
from protocol.down_convert import FETCH_MAGIC, UnsupportedDownConversionError, down_convert, write_message_set
from protocol.message_set import LegacyRecord, decode_message_set
from protocol.record_batch import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    CorruptRecordError,
    Record,
    encode_batch,
    encode_control_batch,
    set_log_append_time,
)

T0 = 1_700_000_000_000
CODECS = [NONE, GZIP, SNAPPY, LZ4]


def records(base: int, n: int, *, step: int = 1) -> list[Record]:
    return [
        Record(
            base + i * step,
            T0 + 10 * i,
            None if i == 1 else b"k%d" % (base + i * step),
            None if i == 2 else b"value-%d " % (base + i * step) * 5,
            [("h", b"dropped")] if i == 0 else [],
        )
        for i in range(n)
    ]


def kafka_python_read(buf: bytes) -> list[tuple[int, int | None, int | None, bytes | None, bytes | None]]:
    """(offset, timestamp, timestamp_type, key, value) per record, as kafka-python's consumer reads them."""
    out = []
    memory = KafkaMemoryRecords(buf)
    while (batch := memory.next_batch()) is not None:
        assert isinstance(batch, KafkaLegacyBatch)
        assert batch.validate_crc()
        for r in batch:
            key = None if r.key is None else bytes(r.key)
            value = None if r.value is None else bytes(r.value)
            out.append((r.offset, r.timestamp, r.timestamp_type, key, value))
    return out


def expected(rs: list[Record], magic: int, log_append_time: int | None = None) -> list[LegacyRecord]:
    if magic == 0:
        return [LegacyRecord(r.offset, None, None, r.key, r.value, 0) for r in rs]
    ts_type = LOG_APPEND_TIME if log_append_time is not None else CREATE_TIME
    return [
        LegacyRecord(
            r.offset, log_append_time if log_append_time else r.timestamp, ts_type, r.key, r.value, 1
        )
        for r in rs
    ]


def as_kafka_python(legacy: list[LegacyRecord]) -> list[tuple]:
    # kafka-python reports magic 0 as timestamp None and timestamp type None.
    return [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value) for r in legacy]


def test_fetch_versions_map_to_kafka_39_magics() -> None:
    assert FETCH_MAGIC == {0: 0, 1: 0, 2: 1, 3: 1}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_records_keep_offsets_keys_values_and_timestamps(magic: int, codec: int) -> None:
    first, second = records(100, 4), records(104, 3)
    log = encode_batch(first, base_offset=100, compression=codec) + encode_batch(
        second, base_offset=104, compression=codec
    )
    converted = down_convert(log, magic)
    want = expected(first + second, magic)
    assert decode_message_set(converted) == want
    if not (magic == 0 and codec == LZ4):  # kafka-python needs xxhash for magic 0 LZ4
        assert kafka_python_read(converted) == as_kafka_python(want)


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_batch_matches_kafka_pythons_builder_byte_for_byte(magic: int) -> None:
    rs = records(7, 5)
    builder = KafkaLegacyBuilder(magic, 0, 1 << 20)
    for r in rs:
        builder.append(r.offset, r.timestamp, r.key, r.value)
    assert down_convert(encode_batch(rs, base_offset=7), magic) == bytes(builder.build())


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4])
@pytest.mark.parametrize("magic", [0, 1])
def test_compressed_batch_becomes_one_wrapper_at_its_last_offset(magic: int, codec: int) -> None:
    rs = records(50, 4, step=3)  # a compacted batch: gaps between offsets
    converted = down_convert(encode_batch(rs, base_offset=50, compression=codec), magic)
    offset, size = struct.unpack_from(">qi", converted)
    assert len(converted) == 12 + size  # one message
    assert offset == 59
    assert converted[16] == magic
    assert converted[17] & 0x07 == codec
    if magic == 1:  # the wrapper carries the newest inner timestamp
        assert struct.unpack_from(">q", converted, 18)[0] == T0 + 30
    assert [r.offset for r in decode_message_set(converted)] == [50, 53, 56, 59]


@pytest.mark.parametrize("magic", [0, 1])
def test_inner_offsets_relative_at_magic_1_absolute_at_magic_0(magic: int) -> None:
    rs = records(1000, 3)
    out = bytearray()
    write_message_set(out, [(r.offset, r.timestamp, r.key, r.value) for r in rs], magic, GZIP)
    wrapper = KafkaLegacyBatch(bytes(out), magic)
    inner = bytes(wrapper._decompress(18 if magic == 0 else 26))  # the wrapper value, decompressed
    inner_offsets = [r.offset for r in decode_message_set(inner)]
    assert inner_offsets == ([0, 1, 2] if magic == 1 else [1000, 1001, 1002])
    assert [r.offset for r in wrapper] == [1000, 1001, 1002]


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time_batch_gives_every_record_the_batch_time_at_magic_1(codec: int) -> None:
    rs = records(0, 3)
    batch = bytearray(encode_batch(rs, base_offset=0, compression=codec))
    set_log_append_time(batch, 0, T0 + 999)
    converted = down_convert(batch, 1)
    want = expected(rs, 1, log_append_time=T0 + 999)
    assert decode_message_set(converted) == want
    assert kafka_python_read(converted) == as_kafka_python(want)
    # and the attribute bit is on every message, the wrapper's included
    assert converted[17] & 0x08


def test_magic_0_has_no_timestamps() -> None:
    converted = down_convert(encode_batch(records(0, 2), base_offset=0), 0)
    # offset, size, crc, magic, attributes, then straight to the key length: 4 + len(b"k0")
    assert struct.unpack_from(">i", converted, 18)[0] == 2
    assert all(r.timestamp is None for r in decode_message_set(converted))


@pytest.mark.parametrize("magic", [0, 1])
def test_control_batches_are_dropped(magic: int) -> None:
    data = encode_batch(records(0, 2), base_offset=0, producer_id=7, producer_epoch=0, is_transactional=True)
    marker = encode_control_batch(
        base_offset=2, producer_id=7, producer_epoch=0, commit=True, coordinator_epoch=0, timestamp=T0
    )
    tail = encode_batch(records(3, 1), base_offset=3)
    converted = down_convert(data + marker + tail, magic)
    assert [r.offset for r in decode_message_set(converted)] == [0, 1, 3]
    assert down_convert(marker, magic) == b""


def test_uncompressed_records_below_the_fetch_offset_are_left_out() -> None:
    rs = records(10, 5)
    assert [r.offset for r in decode_message_set(down_convert(encode_batch(rs, base_offset=10), 1, 12))] == [
        12,
        13,
        14,
    ]


def test_compressed_records_below_the_fetch_offset_stay_in_their_wrapper() -> None:
    rs = records(10, 5)
    converted = down_convert(encode_batch(rs, base_offset=10, compression=GZIP), 1, 12)
    assert [r.offset for r in decode_message_set(converted)] == [10, 11, 12, 13, 14]


@pytest.mark.parametrize("magic", [0, 1])
def test_zstd_batch_raises_unsupported_compression_type(magic: int) -> None:
    zstd = encode_batch(records(0, 2), base_offset=0, compression=ZSTD)
    with pytest.raises(UnsupportedDownConversionError) as info:
        down_convert(zstd, magic)
    assert info.value.offset == 0
    assert isinstance(info.value, UnsupportedCompressionTypeError)


def test_batches_before_a_zstd_batch_are_served() -> None:
    plain = encode_batch(records(0, 2), base_offset=0)
    zstd = encode_batch(records(2, 2), base_offset=2, compression=ZSTD)
    after = encode_batch(records(4, 2), base_offset=4)
    assert [r.offset for r in decode_message_set(down_convert(plain + zstd + after, 1))] == [0, 1]
    with pytest.raises(UnsupportedDownConversionError):
        down_convert(zstd + after, 1)


def test_zstd_after_only_control_batches_still_raises() -> None:
    marker = encode_control_batch(
        base_offset=0, producer_id=7, producer_epoch=0, commit=True, coordinator_epoch=0, timestamp=T0
    )
    zstd = encode_batch(records(1, 2), base_offset=1, compression=ZSTD)
    with pytest.raises(UnsupportedDownConversionError):
        down_convert(marker + zstd, 0)


def test_truncated_last_batch_is_dropped() -> None:
    whole = encode_batch(records(0, 2), base_offset=0)
    partial = encode_batch(records(2, 3), base_offset=2)
    for cut in (5, 20, len(partial) - 1):
        converted = down_convert(whole + partial[:cut], 1)
        assert [r.offset for r in decode_message_set(converted)] == [0, 1]


def test_empty_input_and_empty_batches_give_nothing() -> None:
    assert down_convert(b"", 0) == b""
    empty = encode_batch([], base_offset=5, last_offset_delta=2)
    assert down_convert(empty, 1) == b""


def test_corrupt_batch_raises() -> None:
    batch = bytearray(encode_batch(records(0, 2), base_offset=0))
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        down_convert(batch, 1)


def test_input_may_be_a_memoryview() -> None:
    log = encode_batch(records(0, 3), base_offset=0, compression=SNAPPY)
    assert down_convert(memoryview(log), 1) == down_convert(log, 1)


def test_legacy_entries_at_or_below_the_target_magic_are_copied() -> None:
    builder = KafkaLegacyBuilder(0, 0, 1 << 20)
    builder.append(3, None, b"k", b"v")
    legacy = bytes(builder.build())
    v2 = encode_batch(records(4, 1), base_offset=4)
    converted = down_convert(legacy + v2, 0)
    assert converted.startswith(legacy)
    assert [r.offset for r in decode_message_set(converted)] == [3, 4]


def test_magic_1_entry_is_rewritten_for_magic_0() -> None:
    builder = KafkaLegacyBuilder(1, GZIP, 1 << 20)
    for i in range(3):
        builder.append(i, T0 + i, b"k%d" % i, b"v%d" % i)
    converted = down_convert(bytes(builder.build()), 0)
    assert decode_message_set(converted) == [
        LegacyRecord(i, None, None, b"k%d" % i, b"v%d" % i, 0) for i in range(3)
    ]


def test_target_magic_must_be_0_or_1() -> None:
    with pytest.raises(ValueError):
        down_convert(b"", 2)


# -- Kafka 3.9's own down-conversion (the kafka-clients jar) -------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
JARS = ROOT / ".cache" / "clients" / "java"
ORACLE = Path(__file__).parent / "java" / "DownConvertOracle.java"


def _oracle_log(codec: int, log_append_time: bool) -> bytes:
    """Three batches as a log holds them: one with offset gaps, a transaction marker, one with headers."""
    first = bytearray(encode_batch(records(100, 4, step=2), base_offset=100, compression=codec))
    if log_append_time:
        set_log_append_time(first, 0, T0 + 5000)
    marker = encode_control_batch(
        base_offset=107, producer_id=7, producer_epoch=0, commit=True, coordinator_epoch=0, timestamp=T0
    )
    return bytes(first) + marker + encode_batch(records(108, 3), base_offset=108, compression=codec)


def _random_log(seed: int) -> tuple[bytes, int]:
    """A log of random batches (codecs, sizes, nulls, gaps, markers, log-append time) and a fetch offset."""
    rng = random.Random(seed)
    log, offset = bytearray(), rng.randrange(0, 1 << 40)
    start = offset
    for _ in range(rng.randrange(1, 6)):
        if rng.random() < 0.2:
            log += encode_control_batch(
                base_offset=offset, producer_id=1, producer_epoch=0, commit=rng.random() < 0.5,
                coordinator_epoch=3, timestamp=T0,
            )  # fmt: skip
            offset += 1
            continue
        batch_records, o = [], offset
        for _ in range(rng.randrange(1, 30)):
            key = None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 20))
            value = None if rng.random() < 0.1 else rng.randbytes(rng.randrange(0, 3000))
            batch_records.append(Record(o, T0 + rng.randrange(-1000, 1000), key, value))
            o += rng.choice((1, 1, 1, 2, 7))
        batch = bytearray(encode_batch(batch_records, base_offset=offset, compression=rng.choice(CODECS)))
        if rng.random() < 0.3:
            set_log_append_time(batch, 0, T0 + rng.randrange(0, 10_000))
        log += batch
        offset = o
    return bytes(log), rng.randrange(start, offset + 1)


ORACLE_CASES: list[tuple[str, int, bytes, int]] = [
    (
        f"magic {magic} codec {codec} lat {lat} from {first_offset}",
        magic,
        _oracle_log(codec, lat),
        first_offset,
    )
    for magic in (0, 1)
    for codec in CODECS
    for lat in (False, True)
    for first_offset in (0, 103)
] + [(f"magic {magic} random {seed}", magic, *_random_log(seed)) for magic in (0, 1) for seed in range(12)]


def _legacy_entries(buf: bytes) -> list[tuple[bytes, bytes | None, bytes | None]]:
    """(offset, magic, attributes and timestamp; key; value, decompressed) for each top-level message."""
    entries, pos = [], 0
    while pos < len(buf):
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        magic, attributes = buf[pos + 16], buf[pos + 17]
        p = pos + 18 + (8 if magic == 1 else 0)
        fields: list[bytes | None] = []
        for _ in range(2):
            (length,) = struct.unpack_from(">i", buf, p)
            fields.append(None if length < 0 else buf[p + 4 : p + 4 + length])
            p += 4 + max(length, 0)
        key, value = fields
        codec = attributes & 0x07
        if codec and value is not None:
            value = decompress_lz4_lenient(value) if codec == LZ4 and magic == 0 else decompress(codec, value)
        entries.append((buf[pos : pos + 8] + buf[pos + 16 : pos + 18 + (8 if magic == 1 else 0)], key, value))
        pos += 12 + size
    return entries


@pytest.mark.integration
def test_kafka_39_converts_the_same() -> None:
    """Kafka's MemoryRecords.downConvert on the same logs: uncompressed output byte for byte; compressed
    output with the same wrappers around the same inner messages (only the compressed bytes differ); and
    Kafka's reader sees the same batches and records in both."""
    if shutil.which("java") is None or not (JARS / "kafka-clients.jar").exists():
        pytest.skip(f"needs java and {JARS}/kafka-clients.jar (installed by `make clientdeps`)")
    lines, ours_by_case = [], []
    for _, magic, log, first_offset in ORACLE_CASES:
        ours = down_convert(log, magic, first_offset)
        ours_by_case.append(ours)
        lines.append(f"{magic} {first_offset} {log.hex()} {ours.hex()}")
    zstd = encode_batch(records(0, 2), base_offset=0, compression=ZSTD)
    lines.append(f"1 0 {zstd.hex()} ")
    classpath = ":".join(str(p) for p in sorted(JARS.glob("*.jar")))
    result = subprocess.run(
        ["java", "-cp", classpath, str(ORACLE)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    out = iter(result.stdout.splitlines())
    for (label, _, _, _), ours in zip(ORACLE_CASES, ours_by_case, strict=True):
        kafka_line = next(out)
        assert kafka_line.startswith("KAFKA "), (label, kafka_line, result.stderr[-2000:])
        kafka = bytes.fromhex(kafka_line.removeprefix("KAFKA "))
        kafka_read, ours_read = next(out), next(out)
        assert ours_read.removeprefix("OURS ") == kafka_read.removeprefix("READ "), label
        assert "valid=false" not in ours_read
        assert ours == kafka or _legacy_entries(ours) == _legacy_entries(kafka), label
    zstd_answer = next(out)
    assert zstd_answer.startswith("ERR") and "UnsupportedCompressionType" in zstd_answer
    with pytest.raises(UnsupportedDownConversionError):
        down_convert(zstd, 1)
