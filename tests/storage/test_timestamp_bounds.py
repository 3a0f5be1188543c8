"""KIP-937's timestamp bounds checked on every record, as Kafka's LogValidator.validateTimestamp: a batch's
header tells only of its first and largest timestamps, and a record's timestamp delta may be negative, so
on a topic whose message.timestamp.before/after.max.ms (or the deprecated difference.max.ms) is finite
every CreateTime record's timestamp is read, compressed batches' after decompressing them (on the
produce path's executor thread), and each record out of bounds is named by its index (KIP-467). A topic
at the defaults asks for no record checks at all."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c

from protocol import record_batch as rb
from protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from protocol.errors import ErrorCode
from storage.config import LogConfig
from storage.errors import CorruptRecordError, InvalidTimestampError
from storage.log_manager import LogManager
from storage.log_validator import LogValidator, RecordChecks
from tests.broker import test_produce_record_errors as produce_path

NOW = 1_700_000_000_000
HOUR = 3_600_000
CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]


def _checks(config: dict[str, object]) -> RecordChecks:
    checks = LogValidator.record_checks(LogConfig.from_props(config), NOW)
    assert checks is not None
    return checks


def _batch(timestamps: list[int], codec: int = NONE, **fields: Any) -> bytes:
    records = [rb.Record(i, ts, b"k", b"value-%d" % i) for i, ts in enumerate(timestamps)]
    return rb.encode_batch(records, base_offset=0, compression=codec, **fields)


def _refused(records: bytes, checks: RecordChecks) -> InvalidTimestampError:
    with pytest.raises(InvalidTimestampError) as e:
        LogValidator.validate_records(records, "t-0", checks)
    assert e.value.error_code == ErrorCode.INVALID_TIMESTAMP
    assert str(e.value) == "One or more records have been rejected due to invalid timestamp"
    return e.value


@pytest.mark.parametrize("codec", CODECS)
def test_a_record_older_than_its_batchs_first_is_refused_by_index(codec: int) -> None:
    """The batch's first and largest timestamps are within bounds; its middle record is not."""
    old = NOW - 2 * HOUR
    batch = _batch([NOW, old, NOW], codec)
    header = rb.read_header(batch, 0)
    assert (header.base_timestamp, header.max_timestamp) == (NOW, NOW)
    refusal = _refused(batch, _checks({"message.timestamp.before.max.ms": HOUR}))
    [(index, message)] = refusal.record_errors
    assert index == 1
    assert message is not None and message.startswith(
        f"Timestamp {old} of message with offset 1 is out of range. "
        f"The timestamp should be within [{NOW - HOUR}, "
    )


@pytest.mark.parametrize("codec", [NONE, ZSTD])
def test_every_record_out_of_the_deprecated_difference_bounds_is_named(codec: int) -> None:
    batch = _batch([NOW, NOW - 2 * HOUR, NOW + 2 * HOUR, NOW, NOW - 3 * HOUR], codec)
    refusal = _refused(batch, _checks({"message.timestamp.difference.max.ms": HOUR}))
    assert [index for index, _ in refusal.record_errors] == [1, 2, 4]


@pytest.mark.parametrize("codec", CODECS)
def test_records_before_their_batchs_first_but_within_bounds_pass(codec: int) -> None:
    checks = _checks({"message.timestamp.before.max.ms": HOUR, "message.timestamp.after.max.ms": HOUR})
    assert (
        LogValidator.validate_records(_batch([NOW, NOW - HOUR, NOW + HOUR, NOW - 5], codec), "t-0", checks)
        is None
    )


def test_a_record_without_a_timestamp_is_never_out_of_bounds() -> None:
    checks = _checks({"message.timestamp.before.max.ms": 0, "message.timestamp.after.max.ms": 0})
    assert LogValidator.validate_records(_batch([NOW, rb.NO_TIMESTAMP, NOW]), "t-0", checks) is None


def test_a_producers_log_append_time_batch_is_judged_by_its_largest_timestamp() -> None:
    """Every record of a batch with the LogAppendTime attribute has the batch's largest timestamp
    (Kafka's DefaultRecordBatch), whatever its delta says."""
    checks = _checks({"message.timestamp.before.max.ms": HOUR})
    in_bounds = _batch([NOW, NOW - 5 * HOUR, NOW], timestamp_type=rb.LOG_APPEND_TIME)
    assert not checks.reads_timestamps(rb.read_header(in_bounds, 0))
    assert LogValidator.validate_records(in_bounds, "t-0", checks) is None
    out = _batch([NOW - 3 * HOUR, NOW - 5 * HOUR, NOW - 2 * HOUR], timestamp_type=rb.LOG_APPEND_TIME)
    refusal = _refused(out, checks)
    assert [index for index, _ in refusal.record_errors] == [0, 1, 2]


def test_only_topics_with_finite_create_time_bounds_read_timestamps() -> None:
    """The default topic asks no record checks (the produce path's fast path), and a LogAppendTime
    topic none of timestamps; a bounded CreateTime topic reads every CreateTime batch's records."""
    assert LogValidator.record_checks(LogConfig(), NOW) is None
    assert (
        LogValidator.record_checks(
            LogConfig.from_props(
                {"message.timestamp.before.max.ms": 0, "message.timestamp.type": "LogAppendTime"}
            ),
            NOW,
        )
        is None
    )
    header = rb.read_header(_batch([NOW, NOW]), 0)
    assert not _checks({"cleanup.policy": "compact"}).reads_timestamps(header)
    for name in (
        "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms",
        "message.timestamp.difference.max.ms",
    ):
        assert _checks({name: HOUR}).reads_timestamps(header)


@pytest.fixture
def logs(tmp_path: Path) -> Any:
    manager = LogManager([str(tmp_path / "logs")], LogConfig())
    try:
        yield manager
    finally:
        manager.shutdown()


@pytest.mark.parametrize("codec", [NONE, LZ4, ZSTD])
async def test_the_produce_path_refuses_a_middle_record_too_old_off_the_loop_when_compressed(
    logs: LogManager, codec: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through ProduceApis: INVALID_TIMESTAMP naming the record, nothing appended; compressed records
    are decompressed and checked on an executor thread, uncompressed ones on the event loop."""
    threads: list[threading.Thread] = []
    validate = LogValidator.validate_records

    def spy(*args: Any) -> Any:
        threads.append(threading.current_thread())
        return validate(*args)

    monkeypatch.setattr(LogValidator, "validate_records", staticmethod(spy))
    apis, manager = await produce_path.setup(logs, {"message.timestamp.before.max.ms": HOUR})
    now = produce_path.now_ms()
    records = produce_path.batch([b"k"] * 3, [now, now - 2 * HOUR, now], codec=codec)
    p = produce_path.partition_response(await produce_path.respond(apis, produce_path.produce({0: records})))
    assert (p.error_code, p.base_offset) == (ErrorCode.INVALID_TIMESTAMP, -1)
    assert [i for i, _ in produce_path.record_errors(p)] == [1]
    assert produce_path.log_of(manager).log_end_offset == 0
    assert (threads[0] is threading.main_thread()) == (codec == NONE)
    # Within bounds, the same shape of batch is appended.
    records = produce_path.batch([b"k"] * 3, [now, now - HOUR // 2, now], codec=codec)
    p = produce_path.partition_response(await produce_path.respond(apis, produce_path.produce({0: records})))
    assert (p.error_code, p.base_offset) == (ErrorCode.NONE, 0)


@pytest.mark.parametrize("codec", [NONE, GZIP])
def test_large_records_and_large_deltas_are_read_whole(codec: int) -> None:
    """Records beyond a two-byte length varint and timestamp deltas of several bytes each way."""
    records = [
        rb.Record(0, NOW, b"k", b"x" * 20_000),
        rb.Record(1, NOW + HOUR // 2, b"k", b"y" * 9_000),
        rb.Record(2, NOW - 3 * HOUR, b"k", b"z" * 10),
        rb.Record(3, NOW - HOUR // 2, b"k", b"w" * 70_000),
    ]
    batch = rb.encode_batch(records, base_offset=0, compression=codec)
    checks = _checks({"message.timestamp.difference.max.ms": HOUR})
    assert [i for i, _ in _refused(batch, checks).record_errors] == [2]
    batch = rb.encode_batch(records[:2] + records[3:], base_offset=0, compression=codec)
    assert LogValidator.validate_records(batch, "t-0", checks) is None


def test_records_that_do_not_frame_as_declared_are_corrupt_on_a_bounded_topic() -> None:
    batch = bytearray(_batch([NOW, NOW, NOW]))
    batch[57:61] = (4).to_bytes(4, "big")  # the header's records count
    batch[17:21] = crc32c(bytes(batch[21:])).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="declares 4 records"):
        LogValidator.validate_records(bytes(batch), "t-0", _checks({"message.timestamp.before.max.ms": HOUR}))
