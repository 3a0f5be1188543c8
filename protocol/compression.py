"""Kafka's record compression codecs, as they appear on the wire.

Owns the codec ids (attributes bits 0-2 of a batch or legacy message) and the framing each codec uses
in Kafka: gzip streams, xerial-framed snappy (what the Java client writes; raw snappy from librdkafka
is accepted too), LZ4 frames with independent blocks (KIP-57) and zstd frames. The compression itself
is cramjam's; only the Kafka-specific framing is done here.
"""

import struct
from collections.abc import Iterator

import cramjam

BytesLike = bytes | bytearray | memoryview  # what cramjam, struct and crc32c accept without a copy

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}


class UnsupportedCompressionTypeError(ValueError):
    """The codec id is not one Kafka defines (Kafka's UNSUPPORTED_COMPRESSION_TYPE)."""


class DecompressionError(ValueError):
    """The compressed payload is not valid for its codec."""


# snappy-java's stream header: magic, then version 1 and minimum compatible version 1 (int32 BE).
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
# snappy-java's default block size, which Kafka's SnappyOutputStream uses.
_XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")

_LZ4_MAGIC = 0x184D2204
_LZ4_UINT32 = struct.Struct("<I")
_LZ4_MAX_BLOCK = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


def compress(codec: int, data: BytesLike, level: int | None = None) -> bytes:
    """Compress `data` as a Kafka producer using `codec` would.

    `level` (KIP-390's compression.<codec>.level) applies to gzip, lz4 and zstd; None takes cramjam's
    default: gzip 6 and zstd 3 as Kafka, but lz4 4 where Kafka defaults to 9. gzip's -1 is zlib's
    default (6), as Kafka's compression.gzip.level=-1; lz4 levels above 12 compress as 12 (Kafka's
    lz4-java goes to 17); zstd takes -131072 to 22.
    """
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=None if level is not None and level < 0 else level))
    if codec == SNAPPY:
        return _xerial_encode(data)
    if codec == LZ4:
        # Kafka's LZ4 reader (KIP-57) only supports independent blocks. No content checksum, as Java;
        # cramjam adds block checksums, which every Kafka reader verifies or skips.
        compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
        # The streaming compressor, the only one that can turn block linking off, takes only bytes.
        compressor.compress(data if type(data) is bytes else bytes(data))
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    if codec == NONE:
        return bytes(data)
    raise UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: BytesLike) -> bytes:
    """Decompress a payload written with `codec`; raises DecompressionError on malformed input."""
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decode(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise DecompressionError(f"invalid {CODEC_NAMES[codec]} payload: {exc}") from exc
    if codec == NONE:
        return bytes(data)
    raise UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")


def decompress_into(codec: int, data: BytesLike, out: memoryview) -> int:
    """Decompress a payload written with `codec` into `out`; returns how many bytes were written.

    Raises DecompressionError when the payload is malformed or would decompress to more than `out`
    holds, so a caller bounds what a small payload may expand to (a compression bomb) by `out`'s size.
    """
    try:
        if codec == GZIP:
            return cramjam.gzip.decompress_into(data, out)
        if codec == SNAPPY:
            return _snappy_decode_into(data, out)
        if codec == LZ4:
            return cramjam.lz4.decompress_into(data, out)
        if codec == ZSTD:
            return cramjam.zstd.decompress_into(data, out)
    except cramjam.DecompressionError as exc:
        # cramjam says "failed to write whole buffer" when `out` is too small.
        raise DecompressionError(
            f"invalid {CODEC_NAMES[codec]} payload, or one that decompresses to more than {len(out)} bytes: "
            f"{exc}"
        ) from exc
    raise UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")


def decompress_lz4_lenient(data: BytesLike) -> bytes:
    """Decode an LZ4 frame without checking its header, block or content checksums.

    Kafka 0.8/0.9 computed the frame descriptor checksum over the wrong bytes, so Kafka reads LZ4 in
    magic-0 messages ignoring it (KIP-57). The legacy message's own CRC-32 still covers the payload.
    """
    view = memoryview(data)
    try:
        magic, flg, bd = struct.unpack_from("<IBB", view, 0)
        if magic != _LZ4_MAGIC or flg >> 6 != 1:
            raise DecompressionError("not an LZ4 frame")
        if not flg & 0x20:
            raise DecompressionError("LZ4 frame with dependent blocks is not supported by Kafka")
        if flg & 0x01:
            raise DecompressionError("LZ4 frame with a dictionary id is not supported by Kafka")
        max_block = _LZ4_MAX_BLOCK.get((bd >> 4) & 7)
        if max_block is None:
            raise DecompressionError(f"invalid LZ4 block maximum size byte {bd:#x}")
        pos = 6 + (8 if flg & 0x08 else 0) + 1  # optional content size, then the header checksum
        block_checksum = 4 if flg & 0x10 else 0
        scratch = bytearray(max_block)
        out = bytearray()
        while True:
            (size,) = _LZ4_UINT32.unpack_from(view, pos)
            pos += 4
            if size == 0:
                return bytes(out)
            stored = size & 0x80000000
            size &= 0x7FFFFFFF
            if size > max_block or pos + size > len(view):
                raise DecompressionError("LZ4 block overruns its frame")
            block = view[pos : pos + size]
            if stored:
                out += block
            else:
                out += scratch[: cramjam.lz4.decompress_block_into(block, scratch)]
            pos += size + block_checksum
    except (struct.error, cramjam.DecompressionError) as exc:
        raise DecompressionError(f"invalid LZ4 frame: {exc}") from exc


def _xerial_encode(data: BytesLike) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE])
        parts.append(_INT32.pack(len(block)))
        parts.append(bytes(block))
    return b"".join(parts)


def _snappy_decode_into(data: BytesLike, out: memoryview) -> int:
    view = memoryview(data)
    if len(view) < 16 or view[:8] != _XERIAL_MAGIC:
        return cramjam.snappy.decompress_raw_into(view, out)
    written = 0
    for block in _xerial_blocks(view):
        written += cramjam.snappy.decompress_raw_into(block, out[written:])
    return written


def _xerial_blocks(view: memoryview) -> Iterator[memoryview]:
    """The raw snappy blocks of a xerial stream (after its 16-byte header)."""
    pos = 16
    end = len(view)
    while pos < end:
        if pos + 4 > end:
            raise DecompressionError("truncated xerial snappy block length")
        (size,) = _INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise DecompressionError("xerial snappy block overruns its stream")
        yield view[pos : pos + size]
        pos += size


def _snappy_decode(data: BytesLike) -> bytes:
    view = memoryview(data)
    # The version fields after the magic are not checked: some producers write them little-endian.
    if len(view) < 16 or view[:8] != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    out = bytearray()
    for block in _xerial_blocks(view):
        out += cramjam.snappy.decompress_raw(block)
    return bytes(out)
