"""LogValidator: every check of the batches appended to a log (Kafka's LogValidator, with the request
checks of its ProduceRequest and ReplicaManager), in one place.

Four stages, each where it costs least and as Kafka orders them:

- `validate_produce`, per partition of a Produce request, before any log is looked up: no writes to
  internal topics, exactly one record batch of magic 2 (Kafka's ProduceRequest.validateRecords), zstd
  only from Produce v7. Reads a few bytes per batch.
- `validate_compressed`, for a producer's compressed batches: a codec Kafka defines, and a payload that
  decompresses into the records its header declares. It decompresses, so the broker runs it on a
  worker thread, never on its event loop.
- `validate_records`, for a topic whose config asks more of the records (`record_checks`: a
  compression.type other than producer, a compacted topic, bounded timestamps): the checks of
  `validate_compressed`, the records' keys and timestamps with the index of each record at fault
  (KIP-467, KIP-937), and the batches recompressed to the topic's codec at its KIP-390 level. A topic
  with the default config skips it.
- `validate_append`, inside `Log` on every append: framing, max.message.bytes, CRC32C, the v2 rules a
  producer's batch must follow (base offset 0, a count matching the offset delta, no control batch, a
  sequence with a producer id, no trailing partial batch), segment.bytes, keys on a compacted topic and
  the timestamp bounds. Only batch headers are read, except for the keys of a compacted topic.

Failures raise the StorageError subclass whose `error_code` the broker answers with; a refusal caused
by particular records lists them in its `record_errors`.

On a topic with bounded timestamps, `validate_records` reads every CreateTime record's timestamp, as
Kafka's LogValidator does (a record may be older than its batch's first one: timestamp deltas can be
negative); `validate_append` checks only the batch headers' first and largest timestamps.
"""

from __future__ import annotations

import logging
import mmap
import struct
import threading
from dataclasses import dataclass

from crc32c import crc32c

from protocol import record_batch
from protocol.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    BytesLike,
    DecompressionError,
    compress,
    decompress,
    decompress_into,
)
from protocol.record_batch import ATTR_COMPRESSION_MASK, HEADER_SIZE, LOG_OVERHEAD, BatchHeader
from protocol.topic import is_internal
from storage.config import LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTopicError,
    MessageTooLargeError,
    RecordListTooLargeError,
    StorageError,
    UnsupportedCompressionTypeError,
)
from storage.producer_state import AppendOrigin

log = logging.getLogger(__name__)

# compression.type -> the codec batches are stored with; "producer" keeps the producer's (None).
TOPIC_CODECS: dict[str, int | None] = {
    "producer": None,
    "uncompressed": NONE,
    "gzip": GZIP,
    "snappy": SNAPPY,
    "lz4": LZ4,
    "zstd": ZSTD,
}
# A v2 record's smallest encoding: length, attributes, timestamp and offset deltas, key and value
# lengths, header count (Kafka's DefaultRecord.MIN_RECORD_SIZE_IN_BYTES less its length varint).
_MIN_RECORD_BODY = 6
# How many record errors the summary message of a refusal shows (Kafka shows three).
_SHOWN_RECORD_ERRORS = 3
# A rebuilt batch's header: the fields before the CRC, then those it covers.
_PREFIX = struct.Struct(">qiibI")
_INT32 = struct.Struct(">i")
# Where a batch (or legacy message) keeps its magic byte, and the low byte of a batch's attributes.
_MAGIC_OFFSET = 16
_ATTRIBUTES_LOW_BYTE = 22
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_CRC_COVERED_HEADER = struct.Struct(">hiqqqhii")


@dataclass(frozen=True, slots=True)
class RecordChecks:
    """What a topic's config asks of a producer's records beyond their batches (`record_checks`)."""

    codec: int | None  # the codec batches are stored with; None keeps the producer's
    level: int | None  # its KIP-390 level (None: the codec's default)
    compact: bool  # every record needs a key
    timestamps: bool  # CreateTime timestamps must lie in [min_timestamp, max_timestamp]
    min_timestamp: int
    max_timestamp: int

    def reads_timestamps(self, header: BatchHeader) -> bool:
        """Whether the batch's records' timestamps must be read: those of every CreateTime batch (any
        record may be out of bounds, the header telling only of the first and the largest), and those
        of a producer's LogAppendTime batch, whose records all have its largest timestamp, only when
        that one is out of bounds (to name them). -1, no timestamp, is never out of bounds."""
        if not self.timestamps:
            return False
        if not header.timestamp_type:
            return True
        largest = header.max_timestamp
        low, high = self.min_timestamp, self.max_timestamp
        return largest != record_batch.NO_TIMESTAMP and not low <= largest <= high


# Kafka's codec ids are 0 (none) to 4 (zstd); 5-7 fit in the attributes' three bits but mean nothing.
MAX_CODEC_ID = 4
# Produce v7 is the first a zstd batch may come in (KIP-110).
ZSTD_MIN_PRODUCE_VERSION = 7
# What one compressed batch may decompress to: a payload that expands beyond it (a compression bomb) is
# refused without being held in memory. Kafka has no such bound; 64 MiB is 64 of its 1 MiB batches.
MAX_DECOMPRESSED_BATCH_BYTES = 64 << 20
# Scratch pages a thread keeps resident after a check; beyond this they go back to the kernel.
_SCRATCH_KEPT_BYTES = 4 << 20
_scratch = threading.local()

ValidBatches = list[tuple[int, BatchHeader]]


class LogValidator:
    """The checks of appended batches; stateless, so its stages are static methods."""

    @staticmethod
    def validate_produce(
        topic: str, records: BytesLike | None, produce_version: int, single_batch: bool = False
    ) -> bool:
        """The checks a Produce request's records for `topic` pass before they reach a log; True when
        they hold a compressed batch, which `validate_compressed` must check off the event loop. With
        `single_batch` (the produce path), also Kafka's ProduceRequest.validateRecords: exactly one
        record batch (a trailing partial batch is not counted: `validate_append` refuses it). One walk
        over the batches' length, magic and attributes bytes."""
        if is_internal(topic):
            raise InvalidTopicError(f"{topic} is internal")
        end = 0 if records is None else len(records)
        pos = count = codecs = 0  # codecs: a bit per codec id of the whole batches
        framed = True  # False once a length is below a batch header's: validate_append refuses it
        while end - pos > _MAGIC_OFFSET:
            assert records is not None
            # A v0/v1 message set keeps its magic at the same byte and frames entries by the same
            # length field, so the walk finds either.
            if records[pos + _MAGIC_OFFSET] != record_batch.MAGIC:
                raise InvalidRecordError(f"Produce v{produce_version} takes record batches of magic 2 only")
            (length,) = _INT32.unpack_from(records, pos + 8)
            if length < _MIN_BATCH_LENGTH:
                framed = False
                if length < 0:
                    break  # walking back would never end
            elif framed and end - pos >= length + LOG_OVERHEAD:
                count += 1
                codecs |= 1 << (records[pos + _ATTRIBUTES_LOW_BYTE] & ATTR_COMPRESSION_MASK)
            pos += length + LOG_OVERHEAD
        if not framed:
            return False
        if produce_version < ZSTD_MIN_PRODUCE_VERSION and codecs & (1 << ZSTD):
            raise UnsupportedCompressionTypeError("zstd needs Produce v7+")
        if single_batch:
            if count > 1:
                raise InvalidRecordError(
                    f"Produce requests with version {produce_version} are only allowed to contain exactly "
                    "one record batch per partition"
                )
            if count == 0 and end < LOG_OVERHEAD:
                raise InvalidRecordError(
                    f"Produce requests with version {produce_version} must have at least one record batch "
                    "per partition"
                )
        return codecs > 1

    @staticmethod
    def record_checks(config: LogConfig, now_ms: int) -> RecordChecks | None:
        """What `validate_records` must check of a producer's records for a log with `config` at
        `now_ms`; None for a topic that asks nothing beyond the batches (the default config)."""
        if not config.checks_records:
            return None
        codec = TOPIC_CODECS[config.compression_type]
        before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
        return RecordChecks(
            codec=codec,
            level=config.compression_level,
            compact=config.compact,
            timestamps=config.timestamps_bounded,
            min_timestamp=now_ms - before,
            max_timestamp=now_ms + after,
        )

    @staticmethod
    def validate_records(records: BytesLike, partition: str, checks: RecordChecks) -> bytearray | None:
        """The record stage of Kafka's LogValidator for a topic with `checks`: the checks of
        `validate_compressed`; on a compacted topic a key in every record, and every CreateTime
        timestamp within bounds, raising an InvalidRecordError or InvalidTimestampError whose
        `record_errors` name each record at fault (KIP-467: the client fails those records only);
        then every batch whose codec differs from the topic's is rebuilt with the topic's codec and
        level (the producer's fields, offsets and timestamps kept, a new CRC). Returns the records with
        the rebuilt batches, or None when none was rebuilt. Control batches and batches that fail
        their CRC are left as they are for `validate_append` to refuse. Decompresses and compresses:
        the broker runs it on a worker thread unless the records are uncompressed and stay so."""
        scratch = None
        rebuilt: list[tuple[int, int, bytes]] = []
        target = checks.codec
        try:
            for pos, header in record_batch.iter_headers(records):
                codec = header.compression
                if codec > MAX_CODEC_ID:
                    raise _unknown_codec(pos, codec, partition)
                convert = target is not None and target != codec
                fields = checks.compact or checks.reads_timestamps(header)
                if not (codec or convert or fields):
                    continue
                if header.is_control or not record_batch.crc_ok(records, pos, header):
                    continue
                payload = memoryview(records)[pos + HEADER_SIZE : pos + header.size]
                if codec:
                    scratch = scratch or _thread_scratch()
                    try:
                        payload = scratch.view[: decompress_into(codec, payload, scratch.view)]
                    except DecompressionError as e:
                        raise record_batch.CorruptRecordError(str(e)) from None
                if not fields:
                    _walk_records(payload, header, False)
                elif (
                    checks.compact
                    or header.timestamp_type
                    or not _create_times_within(payload, header, checks.min_timestamp, checks.max_timestamp)
                ):
                    # Every record's key, or timestamps of which some are out of bounds: each record's
                    # fields, to name those at fault.
                    walked = _walk_records(payload, header, True)
                    assert walked is not None
                    _check_record_fields(walked, header, checks, partition)
                if convert:
                    assert target is not None
                    rebuilt.append((pos, header.size, _rebuild_batch(header, payload, target, checks.level)))
        except record_batch.CorruptRecordError as e:
            raise CorruptRecordError(f"Invalid batch in the append to {partition}: {e}") from None
        finally:
            if scratch is not None:
                scratch.release()
        if not rebuilt:
            return None
        view = memoryview(records)
        out = bytearray()
        end = 0
        for pos, size, batch in rebuilt:
            out += view[end:pos]
            out += batch
            end = pos + size
        out += view[end:]
        return out

    @staticmethod
    def validate_compressed(records: BytesLike, partition: str) -> None:
        """A producer's compressed batches: a codec Kafka defines, and a payload that decompresses into
        the records its header declares, so that no consumer is handed a batch it cannot read. Batches
        that fail their CRC are left to `validate_append`, which refuses them."""
        scratch = None
        try:
            for pos, header in record_batch.iter_headers(records):
                codec = header.compression
                if codec == 0:
                    continue
                if codec > MAX_CODEC_ID:
                    raise _unknown_codec(pos, codec, partition)
                if record_batch.crc_ok(records, pos, header):
                    scratch = scratch or _thread_scratch()
                    record_batch.check_records(records, pos, header, scratch.view)
        except record_batch.CorruptRecordError as e:
            raise CorruptRecordError(f"Invalid compressed batch in the append to {partition}: {e}") from None
        finally:
            if scratch is not None:
                scratch.release()

    @staticmethod
    def validate_append(
        buf: memoryview, config: LogConfig, origin: AppendOrigin, partition: str, now_ms: int
    ) -> tuple[ValidBatches, int]:
        """The (position, header) of each complete batch, and how many bytes they span. A trailing partial
        batch is dropped, as Kafka trims invalid bytes (logged as a warning only when a client sent it)."""
        batches: ValidBatches = []
        max_size = config.max_message_bytes
        client = origin is AppendOrigin.CLIENT
        crc_ok = record_batch.crc_ok
        overhead = record_batch.LOG_OVERHEAD
        add = batches.append
        valid = 0
        try:
            for pos, header in record_batch.iter_headers(buf):
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
                    _reject_client_batch(header, partition)
                add((pos, header))
                valid = pos + size
        except record_batch.CorruptRecordError as e:
            raise CorruptRecordError(f"Invalid batch in the append to {partition}: {e}") from None
        if valid < len(buf):
            if client:
                # Appending the whole batches would acknowledge records the client did not send whole.
                raise CorruptRecordError(
                    f"The records of the append to {partition} end in {len(buf) - valid} bytes that are "
                    f"not a whole batch ({len(buf)} bytes sent)"
                )
            # A fetch cut at its byte limit routinely ends in part of a batch.
            log.debug(
                "Appending only %d bytes of %d to %s: trailing partial batch", valid, len(buf), partition
            )
        if valid > config.segment_bytes:
            raise RecordListTooLargeError(
                f"Message batch size is {valid} bytes in append to partition {partition} which exceeds "
                f"the maximum configured segment size of {config.segment_bytes}"
            )
        if client and config.compact:
            _require_keys(buf, batches, partition)
        if config.timestamps_bounded and origin is not AppendOrigin.REPLICATION:
            # A follower keeps what its leader accepted, as Kafka validates leader appends only.
            low, high = now_ms - config.timestamp_before_max_ms, now_ms + config.timestamp_after_max_ms
            _validate_timestamps(batches, low, high, partition)
        return batches, valid


class _Scratch:
    """A thread's anonymous mapping that compressed batches are decompressed into: pages cost memory
    only once written, and those beyond `_SCRATCH_KEPT_BYTES` are handed back after each use."""

    def __init__(self) -> None:
        self._map = mmap.mmap(-1, MAX_DECOMPRESSED_BATCH_BYTES)
        self.view = memoryview(self._map)

    def release(self) -> None:
        self._map.madvise(mmap.MADV_DONTNEED, _SCRATCH_KEPT_BYTES)


def _thread_scratch() -> _Scratch:
    found: _Scratch | None = getattr(_scratch, "value", None)
    if found is None:
        found = _scratch.value = _Scratch()
    return found


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


def _reject_client_batch(header: BatchHeader, partition: str) -> None:
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


def _unknown_codec(pos: int, codec: int, partition: str) -> UnsupportedCompressionTypeError:
    return UnsupportedCompressionTypeError(
        f"The batch at byte {pos} in the append to {partition} uses compression codec id {codec}, which is "
        f"not one of Kafka's (0-{MAX_CODEC_ID})"
    )


# Per record of a batch: (timestamp delta, offset delta, key length), as `_walk_records` reads them.
RecordFields = list[tuple[int, int, int]]


def _walk_records(payload: BytesLike, header: BatchHeader, fields: bool) -> RecordFields | None:
    """Checks that the (uncompressed) payload frames exactly the records its header declares, each no
    shorter than a record can be; with `fields`, returns each record's (timestamp delta, offset
    delta, key length). Raises record_batch.CorruptRecordError."""
    read_varint, read_varlong = record_batch.read_varint, record_batch.read_varlong
    end = len(payload)
    declared = header.records_count
    found: RecordFields | None = [] if fields else None
    p = count = 0
    try:
        while p < end and count < declared:
            length, p = read_varint(payload, p)
            if length < _MIN_RECORD_BODY:
                raise record_batch.CorruptRecordError(f"record {count} of the batch has length {length}")
            if found is not None:
                timestamp_delta, q = read_varlong(payload, p + 1)  # after the record's attributes
                offset_delta, q = read_varint(payload, q)
                key_length, q = read_varint(payload, q)
                if q > p + length:
                    raise record_batch.CorruptRecordError(f"record {count} overruns its length {length}")
                found.append((timestamp_delta, offset_delta, key_length))
            p += length
            count += 1
    except IndexError:
        p = end + 1
    _check_framed(header, p, end, count)
    return found


def _check_framed(header: BatchHeader, position: int, end: int, count: int) -> None:
    """The records walked ended exactly at the payload's end, as many as the batch declares."""
    if position != end or count != header.records_count:
        raise record_batch.CorruptRecordError(
            f"the batch declares {header.records_count} records but its "
            f"{'decompressed ' if header.compression else ''}payload of {end} bytes does not hold them "
            f"({count} records framed)"
        )


def _create_times_within(payload: BytesLike, header: BatchHeader, low: int, high: int) -> bool:
    """`_walk_records` for the timestamps of a CreateTime batch, reading only each record's length and
    timestamp delta: whether every record's timestamp lies in [low, high]. False may also mean a record
    without a timestamp (-1), which `_check_record_fields` lets pass. Raises
    record_batch.CorruptRecordError as `_walk_records` does."""
    read_varint, read_varlong = record_batch.read_varint, record_batch.read_varlong
    end = len(payload)
    declared = header.records_count
    smallest = largest = 0
    p = count = 0
    try:
        while p < end and count < declared:
            # The length: a one- or two-byte zig-zag varint inline (records up to 8 KiB), else the codec's.
            b = payload[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p += 1
            elif payload[p + 1] < 0x80:
                v = (b & 0x7F) | (payload[p + 1] << 7)
                length = (v >> 1) ^ -(v & 1)
                p += 2
            else:
                length, p = read_varint(payload, p)
            if length < _MIN_RECORD_BODY:
                raise record_batch.CorruptRecordError(f"record {count} of the batch has length {length}")
            b = payload[p + 1]  # the timestamp delta, after the record's attributes
            if b < 0x80:
                delta = (b >> 1) ^ -(b & 1)
            else:
                delta, q = read_varlong(payload, p + 1)
                if q > p + length:
                    raise record_batch.CorruptRecordError(f"record {count} overruns its length {length}")
            if delta < smallest:
                smallest = delta
            elif delta > largest:
                largest = delta
            p += length
            count += 1
    except IndexError:
        p = end + 1
    _check_framed(header, p, end, count)
    base = header.base_timestamp
    return low <= base + smallest and base + largest <= high


def _check_record_fields(
    records: RecordFields, header: BatchHeader, checks: RecordChecks, partition: str
) -> None:
    """Kafka's LogValidator.validateRecord for each record: a key on a compacted topic, then a CreateTime
    timestamp within bounds. Raises the refusal naming every record at fault."""
    errors: list[tuple[int, str | None]] = []
    bad_timestamp = False
    low, high = checks.min_timestamp, checks.max_timestamp
    base, largest = header.base_timestamp, header.max_timestamp
    log_append_time = bool(header.timestamp_type)
    for index, (timestamp_delta, offset_delta, key_length) in enumerate(records):
        if checks.compact and key_length < 0:
            errors.append(
                (index, f"Compacted topic cannot accept message without key in topic partition {partition}")
            )
            continue
        if not checks.timestamps:
            continue
        timestamp = largest if log_append_time else base + timestamp_delta
        if timestamp != record_batch.NO_TIMESTAMP and not low <= timestamp <= high:
            bad_timestamp = True
            errors.append(
                (
                    index,
                    f"Timestamp {timestamp} of message with offset {header.base_offset + offset_delta} is "
                    f"out of range. The timestamp should be within [{low}, {high}]",
                )
            )
    if errors:
        raise record_errors_refusal(errors, bad_timestamp)


def record_errors_refusal(errors: list[tuple[int, str | None]], bad_timestamp: bool) -> StorageError:
    """The refusal of a batch for `errors` (index in the batch, message), as Kafka's
    LogValidator.processRecordErrors words it: INVALID_TIMESTAMP if any record's timestamp is at fault,
    INVALID_RECORD otherwise."""
    refusal: StorageError
    if bad_timestamp:
        refusal = InvalidTimestampError("One or more records have been rejected due to invalid timestamp")
    else:
        shown = ", ".join(
            f"RecordError(batchIndex={index}, message='{message}')"
            for index, message in errors[:_SHOWN_RECORD_ERRORS]
        )
        refusal = InvalidRecordError(
            f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
            f"showing the first three errors at most: [{shown}]"
        )
    refusal.record_errors = tuple(errors)
    return refusal


def _rebuild_batch(header: BatchHeader, payload: BytesLike, codec: int, level: int | None) -> bytes:
    """The batch with `payload` (its records, uncompressed) stored with `codec`: every header field kept
    but the codec bits of the attributes, the length and the CRC."""
    data = compress(codec, payload, level) if codec else bytes(payload)
    covered = _CRC_COVERED_HEADER.pack(
        (header.attributes & ~ATTR_COMPRESSION_MASK) | codec,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.records_count,
    )
    prefix = _PREFIX.pack(
        header.base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(data),
        header.partition_leader_epoch,
        record_batch.MAGIC,
        crc32c(data, crc32c(covered)),
    )
    return b"".join((prefix, covered, data))


def _require_keys(buf: memoryview, batches: ValidBatches, partition: str) -> None:
    """A key in every record of a client's batches to a compacted topic (the request path checked them
    already with `validate_records`; this guards every other path into the log)."""
    try:
        for pos, header in batches:
            payload: BytesLike = buf[pos + HEADER_SIZE : pos + header.size]
            if header.compression:
                try:
                    payload = decompress(header.compression, payload)
                except DecompressionError as e:
                    raise record_batch.CorruptRecordError(str(e)) from None
            walked = _walk_records(payload, header, True)
            assert walked is not None
            keyless = [
                (index, f"Compacted topic cannot accept message without key in topic partition {partition}")
                for index, (_, _, key_length) in enumerate(walked)
                if key_length < 0
            ]
            if keyless:
                raise record_errors_refusal(list(keyless), False)
    except record_batch.CorruptRecordError as e:
        raise CorruptRecordError(f"Invalid batch in the append to {partition}: {e}") from None


def _validate_timestamps(batches: ValidBatches, low: int, high: int, partition: str) -> None:
    for _, header in batches:
        # A LogAppendTime batch's records all have its largest timestamp.
        for ts in (
            (header.max_timestamp,)
            if header.timestamp_type
            else (header.base_timestamp, header.max_timestamp)
        ):
            if ts != record_batch.NO_TIMESTAMP and not low <= ts <= high:
                raise InvalidTimestampError(
                    f"Timestamp {ts} of a batch of {header.records_count} records in {partition} is out of "
                    f"range. The timestamp should be within [{low}, {high}]"
                )
