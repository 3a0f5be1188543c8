"""Validation of the batches of one append (Kafka's analyzeAndValidateRecords and LogValidator checks that
need no decoding) and the LogAppendInfo an append returns.

Only batch headers are read: framing, magic, size limits, CRC32C, and for producer appends the v2 rules
(base offset 0, count matching the offset delta, no control batches, a sequence with a producer id).
Records are decoded only where Kafka must: key presence on compacted topics.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from storage.config import LONG_MAX, LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    RecordListTooLargeError,
)
from storage.producer_state import AppendOrigin
from storage.record_format import BatchHeader, RecordFormat

log = logging.getLogger(__name__)


@dataclass(slots=True)
class LogAppendInfo:
    """What an append did: offsets assigned (or, for a duplicate, those of the original append)."""

    first_offset: int
    last_offset: int
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    log_append_time: int = -1
    log_start_offset: int = 0
    num_records: int = 0
    valid_bytes: int = 0
    duplicate: bool = False


def validate_batches(
    fmt: RecordFormat, buf: memoryview, config: LogConfig, origin: AppendOrigin, partition: str, now_ms: int
) -> tuple[list[tuple[int, BatchHeader]], int]:
    """The (position, header) of each complete batch, and how many bytes they span. A trailing partial
    batch is dropped, as Kafka trims invalid bytes (logged as a warning only when a client sent it)."""
    batches: list[tuple[int, BatchHeader]] = []
    max_size = config.max_message_bytes
    client = origin is AppendOrigin.CLIENT
    crc_ok = fmt.crc_ok
    overhead = fmt.LOG_OVERHEAD
    add = batches.append
    valid = 0
    try:
        for pos, header in fmt.iter_headers(buf):
            size = header.batch_length + overhead
            # The codec already refused lengths below a header (CorruptRecordError).
            if size > max_size or not crc_ok(buf, pos, header):
                _reject_batch(pos, header, size, max_size, partition)
            if client and (
                header.base_offset
                or header.records_count != header.last_offset_delta + 1
                or header.records_count <= 0
                or header.is_control
                or (header.producer_id >= 0 and header.base_sequence < 0)
            ):
                _validate_client_batch(header, partition)
            add((pos, header))
            valid = pos + size
    except fmt.CorruptRecordError as e:
        raise CorruptRecordError(f"Invalid batch in the append to {partition}: {e}") from None
    if valid < len(buf):
        # A fetch cut at its byte limit routinely ends in part of a batch; from a client it is odd.
        log.log(
            logging.WARNING if client else logging.DEBUG,
            "Appending only %d bytes out of %d to %s: trailing partial batch",
            valid,
            len(buf),
            partition,
        )
    if valid > config.segment_bytes:
        raise RecordListTooLargeError(
            f"Message batch size is {valid} bytes in append to partition {partition} which exceeds "
            f"the maximum configured segment size of {config.segment_bytes}"
        )
    if client and config.compact:
        _require_keys(fmt, buf, batches, partition)
    if not config.log_append_time and config.message_timestamp_difference_max_ms < LONG_MAX:
        _validate_timestamps(batches, config.message_timestamp_difference_max_ms, now_ms, partition)
    return batches, valid


def _reject_batch(pos: int, header: BatchHeader, size: int, max_size: int, partition: str) -> None:
    if size > max_size:
        raise MessageTooLargeError(
            f"The batch of {size} bytes at byte {pos} in the append to {partition} is larger than "
            f"max.message.bytes {max_size}"
        )
    raise CorruptRecordError(
        f"Record is corrupt (stored crc = {header.crc}) in the batch at byte {pos} of the append to "
        f"{partition}"
    )


def _validate_client_batch(header: BatchHeader, partition: str) -> None:
    """Raises the InvalidRecordError a client batch deserves (called only when one check failed)."""
    if header.base_offset != 0:
        raise InvalidRecordError(
            f"The baseOffset of the record batch in the append to {partition} should be 0, "
            f"but it is {header.base_offset}"
        )
    if header.records_count <= 0 or header.records_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [0, {header.last_offset_delta}] and count of records "
            f"{header.records_count} in the append to {partition}"
        )
    if header.is_control:
        raise InvalidRecordError(f"Clients are not allowed to write control records in {partition}")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {header.base_sequence} in record batch with producerId "
            f"{header.producer_id} in {partition}"
        )


def _require_keys(
    fmt: RecordFormat, buf: memoryview, batches: list[tuple[int, BatchHeader]], partition: str
) -> None:
    for pos, _ in batches:
        for record in fmt.decode_records(buf, pos):
            if record.key is None:
                raise InvalidRecordError(f"Compacted topic cannot accept message without key in {partition}")


def _validate_timestamps(
    batches: list[tuple[int, BatchHeader]], max_diff: int, now_ms: int, partition: str
) -> None:
    for _, header in batches:
        for ts in (header.base_timestamp, header.max_timestamp):
            if abs(ts - now_ms) > max_diff:
                raise InvalidTimestampError(
                    f"Timestamp {ts} of a batch of {header.records_count} records in {partition} is out of "
                    f"range. The timestamp should be within [{now_ms - max_diff}, {now_ms + max_diff}]"
                )
