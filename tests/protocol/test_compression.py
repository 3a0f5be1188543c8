"""Kafka codecs: round trips, Kafka's framings, and frames compressed by other clients' code."""

import gzip
import os
import struct

import cramjam
import pytest
from aiokafka import codec as aiokafka_codec
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from protocol.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    DecompressionError,
    UnsupportedCompressionTypeError,
    compress,
    decompress,
    decompress_into,
    decompress_lz4_lenient,
)

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
# Compressible yet not trivial, and long enough to span several snappy (32 KiB) and LZ4 (64 KiB) blocks.
LARGE = b"".join(b"record-%08d:" % i + os.urandom(8) for i in range(12000))
PAYLOADS = [b"", b"x", b"hello kafka " * 100, LARGE]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("payload", PAYLOADS, ids=["empty", "one", "small", "large"])
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_round_trip(codec: int, payload: bytes, kind: type) -> None:
    compressed = compress(codec, kind(payload))
    assert isinstance(compressed, bytes)
    assert decompress(codec, kind(compressed)) == payload


@settings(deadline=None)
@given(codec=st.sampled_from(CODECS), payload=st.binary(max_size=5000))
def test_round_trip_property(codec: int, payload: bytes) -> None:
    assert decompress(codec, compress(codec, payload)) == payload


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])
def test_levels(codec: int) -> None:
    for level in (1, 9):
        assert decompress(codec, compress(codec, LARGE, level=level)) == LARGE


def test_snappy_writes_xerial_like_java() -> None:
    compressed = compress(SNAPPY, LARGE)
    assert compressed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, sizes = 16, []
    while pos < len(compressed):
        (size,) = struct.unpack_from(">i", compressed, pos)
        sizes.append(len(cramjam.snappy.decompress_raw(compressed[pos + 4 : pos + 4 + size])))
        pos += 4 + size
    assert pos == len(compressed)
    assert sizes[:-1] == [32 * 1024] * (len(sizes) - 1)
    assert sum(sizes) == len(LARGE)


@pytest.mark.parametrize("payload", PAYLOADS, ids=["empty", "one", "small", "large"])
def test_snappy_reads_other_clients(payload: bytes) -> None:
    # aiokafka frames xerial itself (raw snappy from cramjam), and can write raw snappy like librdkafka.
    assert decompress(SNAPPY, aiokafka_codec.snappy_encode(payload)) == payload
    assert decompress(SNAPPY, aiokafka_codec.snappy_encode(payload, xerial_compatible=False)) == payload
    assert decompress(SNAPPY, aiokafka_codec.snappy_encode(payload, xerial_blocksize=1000)) == payload
    if payload:  # both clients' xerial detection wants more than the 16-byte header
        assert aiokafka_codec.snappy_decode(compress(SNAPPY, payload)) == payload


def test_snappy_xerial_version_fields_are_not_checked() -> None:
    compressed = bytearray(compress(SNAPPY, LARGE))
    struct.pack_into("<ii", compressed, 8, 1, 1)  # as some producers write them
    assert decompress(SNAPPY, compressed) == LARGE


@pytest.mark.parametrize("payload", PAYLOADS, ids=["empty", "one", "small", "large"])
def test_gzip_interoperates(payload: bytes) -> None:
    assert decompress(GZIP, kafka_codec.gzip_encode(payload)) == payload
    assert decompress(GZIP, gzip.compress(payload, mtime=0)) == payload
    assert kafka_codec.gzip_decode(compress(GZIP, payload)) == payload
    assert gzip.decompress(compress(GZIP, payload)) == payload


def test_gzip_multiple_members() -> None:
    assert decompress(GZIP, gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"


@pytest.mark.parametrize("payload", PAYLOADS, ids=["empty", "one", "small", "large"])
def test_lz4_interoperates(payload: bytes) -> None:
    assert decompress(LZ4, aiokafka_codec.lz4_encode(payload)) == payload
    assert aiokafka_codec.lz4_decode(compress(LZ4, payload)) == payload
    # A frame with linked blocks and a content checksum (LZ4's defaults) decodes as well.
    assert decompress(LZ4, bytes(cramjam.lz4.compress(payload))) == payload


def test_lz4_writes_independent_blocks() -> None:
    compressed = compress(LZ4, LARGE)
    magic, flg, bd = struct.unpack_from("<IBB", compressed)
    assert magic == 0x184D2204
    assert flg >> 6 == 1  # frame version
    assert flg & 0x20  # independent blocks: Kafka's reader (KIP-57) supports nothing else
    assert not flg & 0x04  # no content checksum, as Kafka's Java writer
    assert (bd >> 4) & 7 == 4  # 64 KiB blocks


@pytest.mark.parametrize("payload", PAYLOADS, ids=["empty", "one", "small", "large"])
def test_zstd_interoperates(payload: bytes) -> None:
    assert decompress(ZSTD, aiokafka_codec.zstd_encode(payload)) == payload
    assert aiokafka_codec.zstd_decode(compress(ZSTD, payload)) == payload
    # Streaming writers (zstd-jni's ZstdOutputStream) leave the content size out of the frame.
    streaming = cramjam.zstd.Compressor()
    streaming.compress(payload)
    assert decompress(ZSTD, bytes(streaming.finish())) == payload


def _handmade_lz4_frame(payload: bytes, *, content_size: bool, block_checksums: bool) -> bytes:
    """An LZ4 frame with a wrong header checksum, as Kafka 0.8/0.9 wrote for magic 0."""
    flg = 0x40 | 0x20 | (0x10 if block_checksums else 0) | (0x08 if content_size else 0)
    out = bytearray(struct.pack("<IBB", 0x184D2204, flg, 0x40))
    if content_size:
        out += struct.pack("<Q", len(payload))
    out.append(0)  # the header checksum, deliberately not xxh32's
    for start in range(0, len(payload), 64 * 1024):
        chunk = payload[start : start + 64 * 1024]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):
            out += struct.pack("<I", len(chunk) | 0x80000000) + chunk  # stored uncompressed
        else:
            out += struct.pack("<I", len(block)) + block
        if block_checksums:
            out += b"\xde\xad\xbe\xef"
    out += struct.pack("<I", 0)
    return bytes(out)


@pytest.mark.parametrize("content_size", [False, True])
@pytest.mark.parametrize("block_checksums", [False, True])
def test_lz4_lenient_ignores_checksums(content_size: bool, block_checksums: bool) -> None:
    payload = LARGE + os.urandom(70000)  # the random tail is stored uncompressed
    frame = _handmade_lz4_frame(payload, content_size=content_size, block_checksums=block_checksums)
    assert decompress_lz4_lenient(frame) == payload
    with pytest.raises(DecompressionError):
        decompress(LZ4, frame)


def test_lz4_lenient_reads_standard_frames() -> None:
    assert decompress_lz4_lenient(compress(LZ4, LARGE)) == LARGE
    assert decompress_lz4_lenient(compress(LZ4, b"")) == b""


@pytest.mark.parametrize(
    "frame",
    [b"", b"\x04\x22\x4d\x18", b"not an lz4 frame", bytes(cramjam.lz4.compress(LARGE))],
    ids=["empty", "header-only", "garbage", "linked-blocks"],
)
def test_lz4_lenient_rejects(frame: bytes) -> None:
    with pytest.raises(DecompressionError):
        decompress_lz4_lenient(frame)


def test_lz4_lenient_rejects_truncation() -> None:
    frame = compress(LZ4, LARGE)
    with pytest.raises(DecompressionError):
        decompress_lz4_lenient(frame[: len(frame) // 2])


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_garbage_raises_decompression_error(codec: int) -> None:
    with pytest.raises(DecompressionError):
        decompress(codec, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x10\x00garbage")
    with pytest.raises(DecompressionError):
        decompress(codec, compress(codec, LARGE)[:-7])


@pytest.mark.parametrize("codec", [-1, 5, 6, 7, 100])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(UnsupportedCompressionTypeError):
        compress(codec, b"data")
    with pytest.raises(UnsupportedCompressionTypeError):
        decompress(codec, b"data")


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_decompress_into_writes_within_its_buffer_and_refuses_more(codec: int) -> None:
    out = memoryview(bytearray(len(LARGE) + 100))
    assert out[: decompress_into(codec, compress(codec, LARGE), out)] == LARGE
    with pytest.raises(DecompressionError, match="more than 1000 bytes"):
        decompress_into(codec, compress(codec, LARGE), memoryview(bytearray(1000)))


def test_decompress_into_reads_raw_snappy_too() -> None:
    out = memoryview(bytearray(len(LARGE)))
    assert out[: decompress_into(SNAPPY, cramjam.snappy.compress_raw(LARGE), out)] == LARGE


def test_decompress_into_refuses_a_payload_of_another_codec() -> None:
    with pytest.raises(DecompressionError):
        decompress_into(GZIP, b"hello kafka " * 100, memoryview(bytearray(4096)))
