"""Legacy MessageSet v0/v1 (magic 0 and 1): read support, for tools facing old data or old clients.

Owns decoding a message set into records: per-message CRC-32 checks, unpacking compressed wrapper
messages (gzip, snappy, lz4) with Kafka's rules for inner offsets (relative in v1 wrappers, KIP-31) and
timestamps (a LogAppendTime wrapper's timestamp overrides the inner ones), and Kafka's leniency for
the broken LZ4 frame checksum of magic 0. The broker itself only speaks RecordBatch v2.
"""

import struct
import zlib
from collections.abc import Iterator
from typing import NamedTuple

from protocol.compression import LZ4, ZSTD, BytesLike, DecompressionError, decompress, decompress_lz4_lenient
from protocol.record_batch import LOG_APPEND_TIME, CorruptRecordError

_LOG_OVERHEAD = 12
_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_CRC_START = 16  # the CRC-32 covers magic to the end of the message
# Kafka's RECORD_OVERHEAD_V0/V1: crc, magic, attributes, [timestamp], key length, value length.
_MIN_SIZE = {0: 14, 1: 22}
_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08


class LegacyRecord(NamedTuple):
    """One message; timestamp and timestamp_type are None for magic 0."""

    offset: int
    timestamp: int | None
    timestamp_type: int | None
    key: bytes | None
    value: bytes | None
    magic: int


class _Message(NamedTuple):
    offset: int
    magic: int
    attributes: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None


def decode_message_set(buf: BytesLike) -> list[LegacyRecord]:
    """Decode a v0/v1 message set, unpacking compressed wrappers; a truncated last message is dropped."""
    records = []
    for message in _iter_messages(buf):
        if message.attributes & _CODEC_MASK:
            records.extend(_unwrap(message))
        else:
            timestamp_type = None if message.magic == 0 else (message.attributes & _TIMESTAMP_TYPE_MASK) >> 3
            records.append(
                LegacyRecord(
                    message.offset,
                    message.timestamp,
                    timestamp_type,
                    message.key,
                    message.value,
                    message.magic,
                )
            )
    return records


def _iter_messages(buf: BytesLike) -> Iterator[_Message]:
    view = memoryview(buf)
    end = len(view)
    pos = 0
    while end - pos >= _LOG_OVERHEAD:
        (size,) = _INT32.unpack_from(view, pos + 8)
        if size < _MIN_SIZE[0]:
            raise CorruptRecordError(f"message size {size} at position {pos} is below the minimum")
        message_end = pos + _LOG_OVERHEAD + size
        if message_end > end:
            return  # truncated trailing message, as a fetch response may end with one
        offset, _, crc, magic, attributes = _PREFIX.unpack_from(view, pos)
        if magic not in _MIN_SIZE:
            raise CorruptRecordError(f"unsupported message magic {magic} at offset {offset}")
        if size < _MIN_SIZE[magic]:
            raise CorruptRecordError(f"message size {size} at offset {offset} is below the minimum")
        if zlib.crc32(view[pos + _CRC_START : message_end]) != crc:
            raise CorruptRecordError(f"message at offset {offset} fails its CRC-32 check")
        p = pos + _PREFIX.size
        timestamp = None
        if magic == 1:
            (timestamp,) = _INT64.unpack_from(view, p)
            p += 8
        key, p = _read_bytes(view, p, message_end, offset)
        value, p = _read_bytes(view, p, message_end, offset)
        yield _Message(offset, magic, attributes, timestamp, key, value)
        pos = message_end


def _read_bytes(view: memoryview, pos: int, end: int, offset: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError(f"message at offset {offset} is shorter than its fields")
    (length,) = _INT32.unpack_from(view, pos)
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"key or value of message at offset {offset} overruns the message")
    return bytes(view[pos : pos + length]), pos + length


def _unwrap(wrapper: _Message) -> list[LegacyRecord]:
    codec = wrapper.attributes & _CODEC_MASK
    if wrapper.value is None:
        raise CorruptRecordError(f"compressed message at offset {wrapper.offset} has a null value")
    if codec == ZSTD:
        raise CorruptRecordError(f"zstd in a magic {wrapper.magic} message at offset {wrapper.offset}")
    try:
        if codec == LZ4 and wrapper.magic == 0:
            data = decompress_lz4_lenient(wrapper.value)
        else:
            data = decompress(codec, wrapper.value)
    except DecompressionError as exc:
        raise CorruptRecordError(f"message at offset {wrapper.offset}: {exc}") from exc
    inner = list(_iter_messages(data))
    if not inner:
        raise CorruptRecordError(f"compressed message at offset {wrapper.offset} holds no messages")

    # KIP-31: a v1 wrapper carries the absolute offset of its last inner message, whose offsets are
    # relative; a wrapper offset of 0 comes from producers (librdkafka) and leaves them as they are.
    base = 0
    if wrapper.magic == 1 and wrapper.offset != 0:
        base = wrapper.offset - inner[-1].offset
        if base < 0:
            raise CorruptRecordError(
                f"wrapper offset {wrapper.offset} is below its last inner offset {inner[-1].offset}"
            )
    wrapper_type = None if wrapper.magic == 0 else (wrapper.attributes & _TIMESTAMP_TYPE_MASK) >> 3

    records = []
    for message in inner:
        if message.attributes & _CODEC_MASK:
            raise CorruptRecordError(f"nested compression in message at offset {wrapper.offset}")
        timestamp = message.timestamp
        timestamp_type = None
        if message.magic == 1:
            timestamp_type = wrapper_type
            if wrapper_type == LOG_APPEND_TIME:
                timestamp = wrapper.timestamp
        records.append(
            LegacyRecord(
                base + message.offset, timestamp, timestamp_type, message.key, message.value, message.magic
            )
        )
    return records
