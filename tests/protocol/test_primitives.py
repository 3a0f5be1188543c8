"""Unsigned varints and the compact (flexible-version) encodings, as properties."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from protocol import primitives as p

UINT32 = st.integers(min_value=0, max_value=2**32 - 1)


@given(UINT32)
def test_uvarint_round_trips(n: int) -> None:
    encoded = p.uvarint(n)
    assert p.read_uvarint(encoded, 0) == (n, len(encoded))
    assert len(encoded) == max(1, (n.bit_length() + 6) // 7)


def test_uvarint_is_little_endian_base_128() -> None:
    assert p.uvarint(0) == b"\x00"
    assert p.uvarint(127) == b"\x7f"
    assert p.uvarint(128) == b"\x80\x01"
    assert p.uvarint(300) == b"\xac\x02"


@given(st.text(), st.binary())
def test_prefix_and_suffix_bytes_are_untouched(text: str, tail: bytes) -> None:
    out = bytearray(b"\x99")
    p.write_compact_string(out, text)
    out += tail
    value, end = p.read_compact_string(bytes(out), 1)
    assert value == text and bytes(out[end:]) == tail


@given(st.one_of(st.none(), st.text()))
def test_nullable_strings_round_trip_both_encodings(s: str | None) -> None:
    classic, compact = bytearray(), bytearray()
    p.write_nullable_string(classic, s)
    p.write_nullable_compact_string(compact, s)
    assert p.read_string(bytes(classic), 0) == (s, len(classic))
    assert p.read_compact_string(bytes(compact), 0) == (s, len(compact))


@given(st.one_of(st.none(), st.binary()))
def test_nullable_bytes_round_trip_both_encodings(b: bytes | None) -> None:
    classic, compact = bytearray(), bytearray()
    p.write_nullable_bytes(classic, b)
    p.write_nullable_compact_bytes(compact, b)
    assert p.read_bytes(bytes(classic), 0) == (b, len(classic))
    assert p.read_compact_bytes(bytes(compact), 0) == (b, len(compact))


@given(st.one_of(st.none(), st.binary(max_size=10_000)))
def test_records_come_back_as_views(records: bytes | None) -> None:
    out, parts = bytearray(), []
    p.write_compact_records(out, parts, records)
    frame = b"".join([*parts, out])
    value, end = p.read_compact_records(frame, 0)
    assert end == len(frame)
    if records is None:
        assert value is None
    else:
        assert isinstance(value, memoryview) and bytes(value) == records


@given(st.integers(min_value=0, max_value=1000), st.binary(max_size=64))
def test_compact_array_length_cannot_exceed_the_message(n: int, rest: bytes) -> None:
    buf = p.uvarint(n + 1) + rest
    try:
        count, pos = p.read_compact_array_length(buf, 0)
    except p.DecodeError:
        assert n > len(rest)
    else:
        assert count == n <= len(buf) - pos


def test_a_varint_longer_than_five_bytes_is_rejected() -> None:
    try:
        p.read_uvarint(b"\xff" * 6 + b"\x01", 0)
    except p.DecodeError:
        return
    raise AssertionError("accepted an overlong varint")
