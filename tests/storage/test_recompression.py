"""A topic's compression.type honoured (Kafka's LogValidator): batches whose codec differs from the topic's
are rebuilt with the topic's codec at its KIP-390 level, every producer field, offset delta, timestamp
and record kept, with a new CRC; `producer` keeps the producer's batches untouched. Also the topic
configs this needs (compression.*.level, message.timestamp.before/after.max.ms) with Kafka's defaults,
validation, broker synonyms and precedence."""

from __future__ import annotations

import os
import random

import pytest
from crc32c import crc32c

from protocol import record_batch as rb
from protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from protocol.errors import ErrorCode
from server_common.config import LONG_MAX
from storage.config import BROKER_SYNONYMS, LogConfig
from storage.errors import CorruptRecordError, InvalidConfigError, UnsupportedCompressionTypeError
from storage.log import Log
from storage.log_validator import LogValidator, RecordChecks

NOW = 1_700_000_000_000
CODEC_OF = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}


def _records(count: int = 20, size: int = 200) -> list[rb.Record]:
    rng = random.Random(7)
    words = [bytes(rng.choice(b"abcdefgh") for _ in range(6)) for _ in range(50)]
    return [
        rb.Record(
            i,
            NOW + i,
            b"key-%d" % i if i % 3 else None,
            b" ".join(rng.choice(words) for _ in range(size // 7)),
            [("h", b"x")] if i == 1 else [],
        )
        for i in range(count)
    ]


def _batch(codec: int, records: list[rb.Record] | None = None, **fields: object) -> bytes:
    return rb.encode_batch(records or _records(), base_offset=0, compression=codec, **fields)  # type: ignore[arg-type]


def _checks(config: dict[str, object]) -> RecordChecks:
    checks = LogValidator.record_checks(LogConfig.from_props(config), NOW)
    assert checks is not None
    return checks


@pytest.mark.parametrize("source", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("topic", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_batches_are_stored_with_the_topic_codec(source: str, topic: str) -> None:
    fields = {"producer_id": 42, "producer_epoch": 3, "base_sequence": 17, "is_transactional": True}
    original = _batch(CODEC_OF[source], **fields)  # type: ignore[arg-type]
    rebuilt = LogValidator.validate_records(original, "t-0", _checks({"compression.type": topic}))
    if source == topic:
        assert rebuilt is None  # in place, as Kafka's inPlaceAssignment
        return
    assert rebuilt is not None
    before, after = rb.read_header(original), rb.read_header(bytes(rebuilt))
    assert after.compression == CODEC_OF[topic]
    assert after.size == len(rebuilt)
    assert rb.crc_ok(bytes(rebuilt), 0, after)
    kept = (
        *("base_offset", "partition_leader_epoch", "last_offset_delta", "base_timestamp", "max_timestamp"),
        *("producer_id", "producer_epoch", "base_sequence", "records_count", "is_transactional"),
    )
    assert {k: getattr(after, k) for k in kept} == {k: getattr(before, k) for k in kept}
    assert rb.decode_records(bytes(rebuilt)) == rb.decode_records(original) == _records()


def test_the_producer_compression_type_asks_nothing_by_default() -> None:
    assert LogValidator.record_checks(LogConfig(), NOW) is None
    assert LogValidator.record_checks(LogConfig.from_props({"compression.type": "producer"}), NOW) is None


def test_a_rebuilt_batch_is_appended_and_read_back(tmp_path: object) -> None:
    config = LogConfig.from_props({"compression.type": "gzip"})
    log = Log(os.path.join(str(tmp_path), "t-0"), config)
    try:
        rebuilt = LogValidator.validate_records(_batch(LZ4), "t-0", _checks({"compression.type": "gzip"}))
        assert rebuilt is not None
        info = log.append_as_leader(memoryview(rebuilt), leader_epoch=2)
        assert (info.first_offset, info.last_offset) == (0, 19)
        stored = bytes(log.read(0, 1 << 20).records)
        header = rb.read_header(stored)
        assert (header.compression, header.partition_leader_epoch) == (GZIP, 2)
        assert [r.value for r in rb.decode_records(stored)] == [r.value for r in _records()]
    finally:
        log.close()


@pytest.mark.parametrize(
    ("topic", "low", "high"),
    [("gzip", 1, 9), ("lz4", 1, 12), ("zstd", -5, 19)],
)
def test_the_topic_level_decides_how_hard_the_batch_is_compressed(topic: str, low: int, high: int) -> None:
    records = _records(200, 400)
    sizes = {}
    for level in (low, high):
        checks = _checks({"compression.type": topic, f"compression.{topic}.level": level})
        assert checks.level == level
        rebuilt = LogValidator.validate_records(_batch(NONE, records), "t-0", checks)
        assert rebuilt is not None and rb.decode_records(bytes(rebuilt)) == records
        sizes[level] = len(rebuilt)
    assert sizes[high] < sizes[low]


def test_gzip_default_level_is_zlibs() -> None:
    checks = _checks({"compression.type": "gzip"})
    assert checks.level is None  # -1: zlib's default, as Kafka's Deflater.DEFAULT_COMPRESSION
    assert _checks({"compression.type": "lz4"}).level == 9
    assert _checks({"compression.type": "zstd"}).level == 3


def test_batches_that_fail_their_crc_or_are_control_batches_are_left_for_the_append() -> None:
    bad = bytearray(_batch(LZ4))
    bad[-1] ^= 0xFF
    assert LogValidator.validate_records(bytes(bad), "t-0", _checks({"compression.type": "gzip"})) is None
    control = rb.encode_control_batch(
        base_offset=0, producer_id=1, producer_epoch=0, commit=True, coordinator_epoch=0, timestamp=NOW
    )
    assert LogValidator.validate_records(control, "t-0", _checks({"compression.type": "gzip"})) is None


def test_only_the_batches_of_another_codec_are_rebuilt_and_trailing_bytes_kept() -> None:
    keep, convert = _batch(GZIP), _batch(ZSTD)
    tail = convert[:30]
    rebuilt = LogValidator.validate_records(
        keep + convert + tail, "t-0", _checks({"compression.type": "gzip"})
    )
    assert rebuilt is not None
    assert bytes(rebuilt[: len(keep)]) == keep
    assert rb.read_header(bytes(rebuilt), len(keep)).compression == GZIP
    assert bytes(rebuilt[-30:]) == tail


def test_a_batch_that_does_not_decompress_into_its_records_is_refused() -> None:
    lying = bytearray(_batch(ZSTD))
    lying[57:61] = (21).to_bytes(4, "big")  # records count 21, 20 in the payload
    lying[17:21] = crc32c(bytes(lying[21:])).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="declares 21 records") as e:
        LogValidator.validate_records(bytes(lying), "t-0", _checks({"compression.type": "gzip"}))
    assert e.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_a_codec_kafka_does_not_define_is_refused() -> None:
    batch = bytearray(_batch(NONE))
    batch[22] |= 0x07
    batch[17:21] = crc32c(bytes(batch[21:])).to_bytes(4, "big")
    with pytest.raises(UnsupportedCompressionTypeError):
        LogValidator.validate_records(bytes(batch), "t-0", _checks({"compression.type": "uncompressed"}))


def test_topic_configs_have_kafkas_defaults_and_broker_synonyms() -> None:
    config = LogConfig()
    assert (config.compression_gzip_level, config.compression_lz4_level, config.compression_zstd_level) == (
        -1,
        9,
        3,
    )
    assert (config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms) == (
        LONG_MAX,
        LONG_MAX,
    )
    props = config.to_props()
    assert props["compression.zstd.level"] == "3" and props["message.timestamp.after.max.ms"] == str(LONG_MAX)
    for name in ("compression.gzip.level", "compression.lz4.level", "compression.zstd.level"):
        assert BROKER_SYNONYMS[name] == name
    assert BROKER_SYNONYMS["log.message.timestamp.before.max.ms"] == "message.timestamp.before.max.ms"
    assert BROKER_SYNONYMS["log.message.timestamp.after.max.ms"] == "message.timestamp.after.max.ms"
    broker = LogConfig.from_broker_props(
        {"compression.lz4.level": "3", "log.message.timestamp.after.max.ms": "60000"}
    )
    assert (broker.compression_lz4_level, broker.timestamp_after_max_ms) == (3, 60000)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("compression.gzip.level", 0),
        ("compression.gzip.level", 10),
        ("compression.gzip.level", -2),
        ("compression.lz4.level", 0),
        ("compression.lz4.level", 18),
        ("compression.zstd.level", 23),
        ("compression.zstd.level", -131073),
        ("message.timestamp.before.max.ms", -1),
        ("message.timestamp.after.max.ms", -1),
    ],
)
def test_levels_and_bounds_outside_kafkas_ranges_are_refused(name: str, value: int) -> None:
    with pytest.raises(InvalidConfigError) as e:
        LogConfig.from_props({name: value})
    assert e.value.key == name


def test_timestamp_bounds_precedence() -> None:
    """Kafka's LogConfig: before/after.max.ms where set (not Long.MAX_VALUE), else difference.max.ms."""
    assert LogConfig().timestamp_before_max_ms == LONG_MAX
    deprecated = LogConfig.from_props({"message.timestamp.difference.max.ms": 5000})
    assert (deprecated.timestamp_before_max_ms, deprecated.timestamp_after_max_ms) == (5000, 5000)
    both = LogConfig.from_props(
        {"message.timestamp.difference.max.ms": 5000, "message.timestamp.after.max.ms": 100}
    )
    assert (both.timestamp_before_max_ms, both.timestamp_after_max_ms) == (5000, 100)


def test_the_append_refuses_header_timestamps_out_of_bounds_but_trusts_followers(tmp_path: object) -> None:
    config = LogConfig.from_props({"message.timestamp.before.max.ms": 1000})
    log = Log(os.path.join(str(tmp_path), "t-0"), config, time_ms=lambda: NOW)
    try:
        old = _batch(NONE, [rb.Record(0, NOW - 5000, b"k", b"v")])
        with pytest.raises(Exception, match="out of range") as e:
            log.append_as_leader(old, leader_epoch=0)
        assert getattr(e.value, "error_code", None) == ErrorCode.INVALID_TIMESTAMP
        assert log.append_as_follower(old).last_offset == 0  # the leader accepted it
    finally:
        log.close()
