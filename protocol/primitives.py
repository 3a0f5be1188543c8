"""Wire primitives of the Kafka protocol: unsigned varints (KIP-482), strings, bytes and records.

Readers take a buffer (bytes or memoryview) and a position and return ``(value, new_position)``; writers
append to a ``bytearray``. The ``compact_`` forms are the flexible-version encodings (length + 1 as an
unsigned varint, 0 meaning null); the others use int16 (strings) or int32 (bytes, records, arrays)
lengths with -1 meaning null. Records are returned as memoryviews into the request (never copied) and
written as separate buffers when large, so that a response can go out as a list of buffers.
"""

from __future__ import annotations

import struct
from typing import Any

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")

# Records at least this long go out as their own buffer instead of being copied into the response.
INLINE_RECORDS_LIMIT = 4096


class DecodeError(ValueError):
    """The bytes do not follow the schema: truncated, a bad length, or a null where none is allowed."""


class EncodeError(ValueError):
    """A value cannot be written in the requested version (for example a null in a non-nullable field)."""


def read_uvarint(buf: Any, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 28:
            raise DecodeError("unsigned varint longer than 5 bytes")


_SMALL_UVARINTS = [bytes([n]) for n in range(0x80)]


def uvarint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL_UVARINTS[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _checked_length(buf: Any, pos: int, n: int) -> int:
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"length {n} at byte {pos} runs past the end of the message ({len(buf)} bytes)")
    return end


def read_string(buf: Any, pos: int) -> tuple[str | None, int]:
    (n,) = I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    end = _checked_length(buf, pos, n)
    return str(buf[pos:end], "utf-8"), end


def read_compact_string(buf: Any, pos: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _checked_length(buf, pos, n - 1)
    return str(buf[pos:end], "utf-8"), end


def read_bytes(buf: Any, pos: int) -> tuple[bytes | None, int]:
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    end = _checked_length(buf, pos, n)
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf: Any, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _checked_length(buf, pos, n - 1)
    return bytes(buf[pos:end]), end


def read_records(buf: Any, pos: int) -> tuple[memoryview | None, int]:
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    end = _checked_length(buf, pos, n)
    return memoryview(buf)[pos:end], end


def read_compact_records(buf: Any, pos: int) -> tuple[memoryview | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _checked_length(buf, pos, n - 1)
    return memoryview(buf)[pos:end], end


def read_array_length(buf: Any, pos: int) -> tuple[int, int]:
    """The element count of an array, -1 for null. Rejects counts the remaining bytes cannot hold."""
    (n,) = I32.unpack_from(buf, pos)
    pos += 4
    if n > len(buf) - pos:
        raise DecodeError(f"array of {n} elements at byte {pos - 4} exceeds the message")
    return n, pos


def read_compact_array_length(buf: Any, pos: int) -> tuple[int, int]:
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n > len(buf) - pos:
        raise DecodeError(f"array of {n} elements at byte {pos} exceeds the message")
    return n, pos


def skip_tagged_field(buf: Any, pos: int) -> int:
    size, pos = read_uvarint(buf, pos)
    return _checked_length(buf, pos, size)


def write_string(out: bytearray, s: str) -> None:
    b = s.encode()
    out += I16.pack(len(b))
    out += b


def write_nullable_string(out: bytearray, s: str | None) -> None:
    if s is None:
        out += b"\xff\xff"
    else:
        write_string(out, s)


def write_compact_string(out: bytearray, s: str) -> None:
    b = s.encode()
    out += uvarint(len(b) + 1)
    out += b


def write_nullable_compact_string(out: bytearray, s: str | None) -> None:
    if s is None:
        out += b"\x00"
    else:
        write_compact_string(out, s)


def write_bytes(out: bytearray, b: Any) -> None:
    out += I32.pack(len(b))
    out += b


def write_nullable_bytes(out: bytearray, b: Any) -> None:
    if b is None:
        out += b"\xff\xff\xff\xff"
    else:
        write_bytes(out, b)


def write_compact_bytes(out: bytearray, b: Any) -> None:
    out += uvarint(len(b) + 1)
    out += b


def write_nullable_compact_bytes(out: bytearray, b: Any) -> None:
    if b is None:
        out += b"\x00"
    else:
        write_compact_bytes(out, b)


def _append_records(out: bytearray, parts: list, records: Any) -> None:
    # Small record sets are cheaper copied; large ones (and file regions for sendfile, which are not
    # bytes-like) become their own buffer, with everything written so far frozen before them.
    if isinstance(records, (bytes, bytearray, memoryview)) and len(records) < INLINE_RECORDS_LIMIT:
        out += records
    else:
        parts.append(bytes(out))
        out.clear()
        parts.append(records)


def write_records(out: bytearray, parts: list, records: Any) -> None:
    if records is None:
        out += b"\xff\xff\xff\xff"
        return
    out += I32.pack(len(records))
    _append_records(out, parts, records)


def write_compact_records(out: bytearray, parts: list, records: Any) -> None:
    if records is None:
        out += b"\x00"
        return
    out += uvarint(len(records) + 1)
    _append_records(out, parts, records)


_ARRAY_STRUCTS: dict[tuple[str, int, str], struct.Struct] = {}


def _array_struct(code: str, n: int, length: str) -> struct.Struct:
    key = (code, n, length)
    s = _ARRAY_STRUCTS.get(key)
    if s is None:
        s = _ARRAY_STRUCTS[key] = struct.Struct(f">{length}{n}{code}")
    return s


SHORT_ARRAY = 16  # arrays shorter than this (most replica lists) are packed through a precomputed table


def short_array_structs(code: str, compact: bool) -> tuple[struct.Struct, ...]:
    """Structs packing an array's length and ``n`` elements, indexed by ``n`` < SHORT_ARRAY."""
    return tuple(_array_struct(code, n, "B" if compact else "i") for n in range(SHORT_ARRAY))


def write_fixed_array(out: bytearray, code: str, values: list, compact: bool) -> None:
    """An array of fixed-width numbers (struct format ``code``): its length and elements in one pack."""
    n = len(values)
    if not compact:
        out += _array_struct(code, n, "i").pack(n, *values)
    elif n < 0x7F:
        out += _array_struct(code, n, "B").pack(n + 1, *values)
    else:
        out += uvarint(n + 1)
        out += _array_struct(code, n, "").pack(*values)


def null_error(field: str) -> EncodeError:
    return EncodeError(f"field {field} is null, which its version does not allow")
