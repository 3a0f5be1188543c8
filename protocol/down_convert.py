"""Down-conversion of v2 record batches to the magic 0 and magic 1 message sets of Fetch v0-3.

Owns turning the record batches Samsa stores into the message format an old consumer reads, as Kafka's
``RecordsUtil.downConvert`` (behind ``LazyDownConversionRecords``) does: Kafka 3.9 answers Fetch v0-1 with
magic 0 and Fetch v2-3 with magic 1 (``FETCH_MAGIC``).

- Control batches (transaction markers) are dropped: magic 0 and 1 cannot represent them.
- Every record keeps its absolute offset, key and value; headers are dropped (magic < 2 has none).
- Magic 1 keeps each record's timestamp and the batch's timestamp type (the LogAppendTime attribute bit,
  with the batch's log-append time as every record's timestamp); magic 0 has no timestamps.
- An uncompressed batch becomes one message per record, minus the records below ``first_offset`` (the
  fetch offset): a consumer would discard them anyway. A compressed batch cannot be split, so all its
  records are kept and re-compressed with the batch's codec into one wrapper message whose offset is the
  last inner record's offset; inner offsets are relative to the first record at magic 1 (KIP-31) and
  absolute at magic 0; a magic 1 wrapper's timestamp is the log-append time or the newest inner one.
- zstd cannot be down-converted (magic < 2 has no zstd): ``UnsupportedDownConversionError``, which the
  fetch path answers with UNSUPPORTED_COMPRESSION_TYPE. Batches converted before a zstd batch are kept
  (the error is raised only when nothing precedes it), so a consumer reads up to it and gets the error
  on its next fetch, where Kafka would fail the response part-way.
- Entries already at or below the target magic are copied unchanged; a magic 1 entry is rewritten for
  magic 0. A truncated entry at the end of the buffer (a fetch read cut at its size limit) is dropped,
  as Kafka's batch iterator stops before it.

Everything here is pure computation on bytes; callers run it off the event loop when it is heavy.
Compression uses ``protocol.compression`` with Kafka's default levels (lz4 9). For magic 0 LZ4 Kafka
writes the frame-descriptor checksum wrongly (a 0.8-era bug every reader tolerates for magic 0: Java
ignores it, librdkafka and kafka-python recompute it); Samsa writes the correct one.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

from protocol.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    BytesLike,
    UnsupportedCompressionTypeError,
    compress,
)
from protocol.message_set import LegacyRecord, decode_message_set
from protocol.record_batch import (
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC,
    NO_TIMESTAMP,
    CorruptRecordError,
    decode_records,
    read_header,
)

# Kafka 3.9's message format per Fetch version (KafkaApis: v0-1 magic 0, v2-3 magic 1, v4+ as stored).
FETCH_MAGIC = {0: 0, 1: 0, 2: 1, 3: 1}

_MAGIC_OFFSET = 16  # of the magic byte in a v2 batch and in a v0/v1 message alike
_LENGTH = struct.Struct(">i")
_ENTRY_HEADER = struct.Struct(">qi")  # offset, size
_CRC_MAGIC_ATTRIBUTES = struct.Struct(">Ibb")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_TIMESTAMP_TYPE_BIT = 0x08
_CODEC_MASK = 0x07
_LEVELS = {LZ4: 9}  # Kafka's default compression.lz4.level; gzip and snappy use the codec's default
_CONVERTIBLE = frozenset({NONE, GZIP, SNAPPY, LZ4})


class UnsupportedDownConversionError(UnsupportedCompressionTypeError):
    """A zstd batch met before anything could be converted: Kafka's UNSUPPORTED_COMPRESSION_TYPE (76)
    for the partition. ``offset`` is the batch's base offset."""

    def __init__(self, offset: int, to_magic: int) -> None:
        super().__init__(f"the zstd batch at offset {offset} cannot be down-converted to magic {to_magic}")
        self.offset = offset


def down_convert(records: BytesLike, to_magic: int, first_offset: int = 0) -> bytes:
    """The magic ``to_magic`` (0 or 1) message set holding the records of ``records``, a buffer of v2
    record batches as read from a log segment; ``first_offset`` is the fetch offset (records of an
    uncompressed batch below it are left out).

    Raises UnsupportedDownConversionError (zstd), CorruptRecordError (a malformed batch).
    """
    if to_magic not in (0, 1):
        raise ValueError(f"down-conversion is to magic 0 or 1, not {to_magic}")
    view = memoryview(records)
    out = bytearray()
    pos, end = 0, len(view)
    while end - pos >= LOG_OVERHEAD:
        (length,) = _LENGTH.unpack_from(view, pos + 8)
        if length < 0:
            raise CorruptRecordError(f"entry length {length} at position {pos}")
        entry_end = pos + LOG_OVERHEAD + length
        if entry_end > end or end - pos <= _MAGIC_OFFSET:
            break  # a truncated last entry
        magic = view[pos + _MAGIC_OFFSET]
        try:
            if magic == MAGIC:
                _convert_batch(view, pos, to_magic, first_offset, out)
            elif magic <= to_magic:
                out += view[pos:entry_end]
            else:  # a magic 1 entry for a magic 0 reader
                _convert_legacy(view[pos:entry_end], to_magic, out)
        except UnsupportedDownConversionError:
            if out:
                break  # serve what precedes the zstd batch; the next fetch meets it first
            raise
        pos = entry_end
    return bytes(out)


def _convert_batch(view: memoryview, pos: int, to_magic: int, first_offset: int, out: bytearray) -> None:
    header = read_header(view, pos)
    if header.is_control:
        return
    codec = header.compression
    if codec == ZSTD:
        raise UnsupportedDownConversionError(header.base_offset, to_magic)
    if codec not in _CONVERTIBLE:
        raise CorruptRecordError(f"batch at offset {header.base_offset} has unknown codec id {codec}")
    records = decode_records(view, pos)
    if not codec:
        records = [r for r in records if r.offset >= first_offset]
    if not records:
        return
    log_append_time = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
    write_message_set(
        out,
        [(r.offset, r.timestamp, r.key, r.value) for r in records],
        to_magic,
        codec,
        log_append_time,
    )


def _convert_legacy(entry: memoryview, to_magic: int, out: bytearray) -> None:
    codec = entry[_MAGIC_OFFSET + 1] & _CODEC_MASK
    if codec == ZSTD:
        (offset,) = _INT64.unpack_from(entry, 0)
        raise UnsupportedDownConversionError(offset, to_magic)
    inner: list[LegacyRecord] = decode_message_set(entry)
    write_message_set(out, [(r.offset, r.timestamp, r.key, r.value) for r in inner], to_magic, codec, None)


Entry = tuple[int, int | None, bytes | None, bytes | None]  # absolute offset, timestamp, key, value


def write_message_set(
    out: bytearray,
    records: Sequence[Entry],
    magic: int,
    codec: int = NONE,
    log_append_time: int | None = None,
) -> None:
    """Append ``records`` to ``out`` as magic 0/1 messages, as Kafka's MemoryRecordsBuilder writes them:
    one message each when ``codec`` is NONE, else one wrapper message of that codec around them.
    ``log_append_time`` makes the set LogAppendTime (magic 1: every timestamp becomes it)."""
    if not records:
        return
    timestamp_type_bit = _TIMESTAMP_TYPE_BIT if magic == 1 and log_append_time is not None else 0
    if codec == NONE:
        for offset, timestamp, key, value in records:
            ts = log_append_time if log_append_time is not None else timestamp
            _write_message(out, offset, magic, timestamp_type_bit, ts, key, value)
        return
    if codec not in _CONVERTIBLE:
        raise UnsupportedCompressionTypeError(f"codec id {codec} has no magic {magic} form")
    base = records[0][0] if magic == 1 else 0  # KIP-31: relative inner offsets from magic 1
    inner = bytearray()
    max_timestamp = NO_TIMESTAMP
    for offset, timestamp, key, value in records:
        ts = log_append_time if log_append_time is not None else timestamp
        if ts is not None and ts > max_timestamp:
            max_timestamp = ts
        _write_message(inner, offset - base, magic, timestamp_type_bit, ts, key, value)
    wrapper_timestamp = log_append_time if log_append_time is not None else max_timestamp
    _write_message(
        out,
        records[-1][0],
        magic,
        codec | timestamp_type_bit,
        wrapper_timestamp,
        None,
        compress(codec, inner, _LEVELS.get(codec)),
    )


def _write_message(
    out: bytearray,
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int | None,
    key: BytesLike | None,
    value: BytesLike | None,
) -> None:
    start = len(out)
    out += _ENTRY_HEADER.pack(offset, 0)  # the size is filled in below
    out += _CRC_MAGIC_ATTRIBUTES.pack(0, magic, attributes)  # and the CRC
    if magic == 1:
        out += _INT64.pack(NO_TIMESTAMP if timestamp is None else timestamp)
    for field in (key, value):
        if field is None:
            out += _INT32.pack(-1)
        else:
            out += _INT32.pack(len(field))
            out += field
    _INT32.pack_into(out, start + 8, len(out) - start - LOG_OVERHEAD)
    with memoryview(out) as view:  # released before `out` grows again
        crc = zlib.crc32(view[start + LOG_OVERHEAD + 4 :])
    _UINT32.pack_into(out, start + LOG_OVERHEAD, crc)
