"""Kafka RecordBatch v2 (magic 2): the 61-byte batch header, its in-place patches, and records.

Owns the on-disk/on-wire layout of a batch: reading headers without copying the batch, CRC32C
validation, the header edits a broker makes (base offset, partition leader epoch, LogAppendTime),
decoding a batch's records (decompressing as needed) and encoding batches, transaction markers
included. Records use zig-zag varints (Kafka's ByteUtils.readVarint/readVarlong), not the unsigned
varints of the flexible protocol versions.
"""

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from crc32c import crc32c

from protocol.compression import BytesLike, DecompressionError, compress, decompress, decompress_into

LOG_OVERHEAD = 12  # base offset int64 + batch length int32
HEADER_SIZE = 61  # v2 batch header, records count included
MAGIC = 2

NO_TIMESTAMP = -1
NO_SEQUENCE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qiibI")  # the fields before the CRC-covered range
_CRC_COVERED_HEADER = struct.Struct(">hiqqqhii")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_MARKER = struct.Struct(">hi")

_PARTITION_LEADER_EPOCH_OFFSET = 12
_MAGIC_OFFSET = 16
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_MAX_TIMESTAMP_OFFSET = 35
# batch_length counts everything after itself; anything shorter than a bare header is corrupt.
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
# attributes, timestamp delta, offset delta, key length, value length, header count: a byte each at least
_MIN_RECORD_LENGTH = 6
# Attribute bits Kafka's computeAttributes keeps when it rewrites them (timestamp type excluded).
_ATTR_KEPT_ON_REWRITE = ATTR_COMPRESSION_MASK | ATTR_TRANSACTIONAL | ATTR_CONTROL | ATTR_DELETE_HORIZON

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class CorruptRecordError(ValueError):
    """A batch or record is malformed: bad length, bad magic, bad CRC, truncated or inconsistent."""


class BatchHeader(NamedTuple):
    """The 61-byte header of a v2 batch, field for field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes, log overhead included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime."""
        return (self.attributes & ATTR_TIMESTAMP_TYPE) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        """base_timestamp holds the delete horizon of a compacted batch (KIP-534)."""
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def last_sequence(self) -> int:
        """Sequence of the batch's last record; like Kafka, it wraps from int32 max to 0."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & _INT32_MAX


class Record:
    """One record of a batch, with absolute offset and timestamp."""

    __slots__ = ("headers", "key", "offset", "timestamp", "value")

    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = [] if headers is None else headers

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return (
            self.offset == other.offset
            and self.timestamp == other.timestamp
            and self.key == other.key
            and self.value == other.value
            and list(self.headers) == list(other.headers)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (
            f"Record(offset={self.offset!r}, timestamp={self.timestamp!r}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )


def read_header(buf: BytesLike, pos: int = 0) -> BatchHeader:
    """Read the batch header at `pos` without copying the batch."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} left")
    header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptRecordError(f"unsupported record batch magic {header.magic} at position {pos}")
    if header.batch_length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {header.batch_length} is smaller than a batch header")
    return header


def iter_headers(buf: BytesLike, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for consecutive batches in buf[pos:end].

    Stops silently before an incomplete trailing batch, as a fetch response may end with one; callers
    compare the last position + size with `end` to see whether everything was consumed.
    """
    if end is None:
        end = len(buf)
    while end - pos >= LOG_OVERHEAD:
        (batch_length,) = _INT32.unpack_from(buf, pos + 8)
        if batch_length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {batch_length} at position {pos} is too small")
        size = batch_length + LOG_OVERHEAD
        if end - pos < size:
            return
        yield pos, read_header(buf, pos)
        pos += size


def has_legacy_entries(buf: BytesLike) -> bool:
    """Whether `buf` holds an entry other than a v2 batch: a v0/v1 message set keeps its magic at the
    same byte and frames entries by the same length field, so one walk finds either."""
    pos, end = 0, len(buf)
    while end - pos > _MAGIC_OFFSET:
        if buf[pos + _MAGIC_OFFSET] != MAGIC:
            return True
        (length,) = _INT32.unpack_from(buf, pos + 8)
        if length < 0:
            # Broken framing is the append's to refuse (CORRUPT_MESSAGE); walking back would never end.
            return False
        pos += LOG_OVERHEAD + length
    return False


def crc_ok(buf: BytesLike, pos: int, header: BatchHeader) -> bool:
    """Whether the batch's CRC32C (over attributes to the end of the batch) matches."""
    end = pos + header.size
    if end > len(buf):
        return False
    return crc32c(memoryview(buf)[pos + _ATTRIBUTES_OFFSET : end]) == header.crc


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign the batch's base offset in place (outside the CRC)."""
    _INT64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the partition leader epoch in place (outside the CRC)."""
    _INT32.pack_into(buf, pos + _PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Turn the batch into LogAppendTime with max_timestamp = `timestamp`, recomputing the CRC.

    As Kafka's DefaultRecordBatch.setMaxTimestamp: base_timestamp and the records stay untouched;
    readers take max_timestamp as every record's timestamp.
    """
    header = read_header(buf, pos)
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecordError(f"batch at position {pos} is truncated")
    attributes = (header.attributes & _ATTR_KEPT_ON_REWRITE) | ATTR_TIMESTAMP_TYPE
    _INT16.pack_into(buf, pos + _ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, pos + _MAX_TIMESTAMP_OFFSET, timestamp)
    _UINT32.pack_into(buf, pos + _CRC_OFFSET, crc32c(memoryview(buf)[pos + _ATTRIBUTES_OFFSET : end]))


def write_varint(out: bytearray, value: int) -> None:
    """Append a zig-zag varint (an int32)."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    _write_unsigned(out, (value << 1) ^ (value >> 31))


def write_varlong(out: bytearray, value: int) -> None:
    """Append a zig-zag varlong (an int64)."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    _write_unsigned(out, (value << 1) ^ (value >> 63))


def _write_unsigned(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_varint(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Read a zig-zag varint (at most 5 bytes); returns (value, position after it).

    Raises CorruptRecordError when it is too long, IndexError when `buf` ends inside it.
    """
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    return _read_long_form(buf, pos, 28)


def read_varlong(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Read a zig-zag varlong (at most 10 bytes); returns (value, position after it)."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    return _read_long_form(buf, pos, 63)


def _read_long_form(buf: BytesLike, pos: int, max_shift: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > max_shift:
            raise CorruptRecordError("varint is too long")


def decode_records(buf: BytesLike, pos: int = 0) -> list[Record]:
    """Decode every record of the batch at `pos`, checking CRC and framing, decompressing as needed.

    In a LogAppendTime batch every record gets the batch's max_timestamp, as Kafka's readers do.
    """
    header = read_header(buf, pos)
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecordError(f"batch at position {pos} is truncated: {header.size} bytes declared")
    if not crc_ok(buf, pos, header):
        raise CorruptRecordError(f"batch at offset {header.base_offset} fails its CRC32C check")
    count = header.records_count
    if count < 0:
        raise CorruptRecordError(f"negative records count {count}")
    payload = memoryview(buf)[pos + HEADER_SIZE : end]
    if header.compression:
        try:
            data = decompress(header.compression, payload)
        except DecompressionError as exc:
            raise CorruptRecordError(str(exc)) from exc
    else:
        data = bytes(payload)
    try:
        records, consumed = _decode_record_list(data, count, header)
    except IndexError as exc:
        raise CorruptRecordError(
            f"truncated or malformed record in batch at offset {header.base_offset}"
        ) from exc
    if consumed != len(data):
        raise CorruptRecordError(f"{len(data) - consumed} bytes left after the batch's {count} records")
    return records


def check_records(buf: BytesLike, pos: int, header: BatchHeader, scratch: memoryview) -> None:
    """Checks that the payload of the (CRC-checked) batch at `pos` frames exactly `records_count`
    records, decompressing it into `scratch` first when the batch is compressed: Kafka's LogValidator
    refuses a batch its consumers could not read. Only each record's length is read, so this is cheap
    next to the decompression; `scratch`'s size bounds what a payload may decompress to.

    Raises CorruptRecordError.
    """
    payload = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    if header.compression:
        try:
            payload = scratch[: decompress_into(header.compression, payload, scratch)]
        except DecompressionError as exc:
            raise CorruptRecordError(str(exc)) from exc
    end = len(payload)
    p = count = 0
    declared = header.records_count
    try:
        while p < end and count < declared:
            # A record's length varint, inlined for its one- and two-byte forms (records < 8 KiB).
            b = payload[p]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), p + 1
            elif payload[p + 1] < 0x80:
                v = (b & 0x7F) | (payload[p + 1] << 7)
                length, p = (v >> 1) ^ -(v & 1), p + 2
            else:
                length, p = _read_long_form(payload, p, 28)
            if length < _MIN_RECORD_LENGTH:
                raise CorruptRecordError(f"record {count} of the batch has length {length}")
            p += length
            count += 1
    except IndexError:
        p = end + 1
    if p != end or count != declared:
        raise CorruptRecordError(
            f"the batch declares {declared} records but its "
            f"{'decompressed ' if header.compression else ''}payload of {end} bytes does not hold them "
            f"({count} records framed)"
        )


def _decode_record_list(data: bytes, count: int, header: BatchHeader) -> tuple[list[Record], int]:
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = header.max_timestamp if header.attributes & ATTR_TIMESTAMP_TYPE else None
    records = []
    p = 0
    for _ in range(count):
        length, p = read_varint(data, p)
        record_start = p
        record_end = p + length
        if length < 0 or record_end > len(data):
            raise CorruptRecordError(f"record length {length} overruns the batch")
        p += 1  # record attributes: no bit is defined
        timestamp_delta, p = read_varlong(data, p)
        offset_delta, p = read_varint(data, p)
        key_length, p = read_varint(data, p)
        if key_length < 0:
            key = None
        else:
            key = data[p : p + key_length]
            p += key_length
        value_length, p = read_varint(data, p)
        if value_length < 0:
            value = None
        else:
            value = data[p : p + value_length]
            p += value_length
        header_count, p = read_varint(data, p)
        if header_count < 0:
            raise CorruptRecordError(f"negative record header count {header_count}")
        headers = []
        for _ in range(header_count):
            name_length, p = read_varint(data, p)
            if name_length < 0:
                raise CorruptRecordError("null record header key")
            # surrogateescape keeps non-UTF-8 header keys byte-exact if the record is re-encoded.
            name = data[p : p + name_length].decode("utf-8", "surrogateescape")
            p += name_length
            header_value_length, p = read_varint(data, p)
            if header_value_length < 0:
                header_value = None
            else:
                header_value = data[p : p + header_value_length]
                p += header_value_length
            headers.append((name, header_value))
        if p != record_end:
            raise CorruptRecordError(f"record declares {length} bytes but its fields take {p - record_start}")
        timestamp = base_timestamp + timestamp_delta if log_append_time is None else log_append_time
        records.append(Record(base_offset + offset_delta, timestamp, key, value, headers))
    return records, p


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int,
    compression: int = 0,
    timestamp_type: int = CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode `records` (absolute, strictly increasing offsets ≥ base_offset; gaps allowed) as one batch.

    base_timestamp is the first record's timestamp, or `delete_horizon_ms` when given (setting the
    delete-horizon attribute); max_timestamp is the records' maximum. An empty batch, as compaction
    keeps one for producer state, has both at -1 unless a delete horizon is given, and needs
    `last_offset_delta` to keep its last offset.
    """
    if records:
        base_timestamp = records[0].timestamp
        max_timestamp = max(record.timestamp for record in records)
    else:
        base_timestamp = max_timestamp = NO_TIMESTAMP
    attributes = compression | (timestamp_type << 3)
    if is_transactional:
        attributes |= ATTR_TRANSACTIONAL
    if is_control:
        attributes |= ATTR_CONTROL
    if delete_horizon_ms is not None:
        attributes |= ATTR_DELETE_HORIZON
        base_timestamp = delete_horizon_ms

    body = bytearray()
    record_buf = bytearray()
    previous_delta = -1
    for record in records:
        offset_delta = record.offset - base_offset
        if offset_delta <= previous_delta:
            raise ValueError(f"record offset {record.offset} does not follow {base_offset + previous_delta}")
        previous_delta = offset_delta
        record_buf.clear()
        record_buf.append(0)  # record attributes
        write_varlong(record_buf, record.timestamp - base_timestamp)
        write_varint(record_buf, offset_delta)
        _write_nullable_bytes(record_buf, record.key)
        _write_nullable_bytes(record_buf, record.value)
        write_varint(record_buf, len(record.headers))
        for name, header_value in record.headers:
            encoded_name = name.encode("utf-8", "surrogateescape")
            write_varint(record_buf, len(encoded_name))
            record_buf += encoded_name
            _write_nullable_bytes(record_buf, header_value)
        write_varint(body, len(record_buf))
        body += record_buf
    if last_offset_delta is None:
        last_offset_delta = max(previous_delta, 0)

    payload = compress(compression, body) if compression else body
    covered_header = _CRC_COVERED_HEADER.pack(
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    crc = crc32c(payload, crc32c(covered_header))
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(payload)
    prefix = _PREFIX.pack(base_offset, batch_length, partition_leader_epoch, MAGIC, crc)
    return b"".join((prefix, covered_header, payload))


def _write_nullable_bytes(out: bytearray, value: BytesLike | None) -> None:
    if value is None:
        out.append(1)  # zig-zag -1
    else:
        write_varint(out, len(value))
        out += value


def encode_control_batch(
    *,
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp: int,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Encode a transaction marker: one control record, key ControlRecordType v0, value EndTxnMarker v0."""
    marker = Record(
        base_offset,
        timestamp,
        _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT),
        _END_TXN_MARKER.pack(0, coordinator_epoch),
    )
    return encode_batch(
        [marker],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
