"""console.records: how the Messages page shows a record's bytes (text, pretty JSON, hex, auto), safely,
and how it reads the produce form's headers and the browse form's times."""

from __future__ import annotations

import pytest

from console.records import (
    HEX_LIMIT,
    SHORT_LIMIT,
    TEXT_LIMIT,
    decode,
    decode_short,
    hexdump,
    parse_headers,
    parse_timestamp,
    timestamp_type,
)


def test_auto_pretty_prints_a_json_object_and_array() -> None:
    shown = decode(b'{"order":7,"items":["a","b"]}')
    assert shown.kind == "json"
    assert shown.text == '{\n  "order": 7,\n  "items": [\n    "a",\n    "b"\n  ]\n}'
    assert decode(b"[1,2]").kind == "json"
    assert shown.size == 29 and not shown.truncated and shown.note is None


def test_auto_shows_json_scalars_and_plain_utf8_as_text() -> None:
    assert decode(b"42").kind == "text"
    assert decode(b"true").kind == "text"
    shown = decode("grüße, 世界".encode())
    assert (shown.kind, shown.text) == ("text", "grüße, 世界")


def test_auto_shows_invalid_utf8_and_control_bytes_as_hex() -> None:
    assert decode(b"\xff\xfe\x00\x01").kind == "hex"
    assert decode(b"abc\x00def").kind == "hex"
    assert decode(b"\x80abc").note is None  # auto chose hex: nothing to explain


def test_json_asked_of_something_else_falls_back_with_a_note() -> None:
    shown = decode(b"not json", "json")
    assert (shown.kind, shown.text, shown.note) == ("text", "not json", "not valid JSON: shown as text")
    shown = decode(b"\xc3\x28", "json")
    assert (shown.kind, shown.note) == ("hex", "not valid UTF-8: shown as hex")
    assert decode(b"NaN", "json").kind == "text"  # Python's parser takes NaN; JSON does not
    assert decode(b"42", "json").kind == "json"


def test_text_asked_of_invalid_utf8_is_hex_never_replacement_characters() -> None:
    shown = decode(b"caf\xe9", "text")
    assert shown.kind == "hex"
    assert "\ufffd" not in shown.text
    assert shown.note == "not valid UTF-8: shown as hex"


def test_text_escapes_control_and_bidi_override_characters() -> None:
    shown = decode(b"a\x00b\x1b[31m\tc\ne", "text")
    assert shown.text == "a\\u0000b\\u001b[31m\tc\ne"
    assert shown.note == "control characters shown as \\u escapes"
    shown = decode("abc\u202edcba".encode())  # a right-to-left override would reorder the page's text
    assert (shown.kind, shown.text) == ("text", "abc\\u202edcba")


def test_json_strings_with_bidi_characters_stay_valid_json_escapes() -> None:
    shown = decode('{"a": "x\u202ey\u0085"}'.encode())
    assert shown.kind == "json"
    assert shown.text == '{\n  "a": "x\\u202ey\\u0085"\n}'


def test_hex_asked_is_a_hexdump_with_an_ascii_column() -> None:
    shown = decode(b"hello, world\x00\x01\x02\xff" + b"A", "hex")
    assert shown.kind == "hex"
    assert shown.text == (
        "00000000  68 65 6c 6c 6f 2c 20 77  6f 72 6c 64 00 01 02 ff  |hello, world....|\n"
        "00000010  41                                                |A|"
    )


def test_a_null_is_not_an_empty_value() -> None:
    assert decode(None).kind == "null"
    empty = decode(b"")
    assert (empty.kind, empty.text, empty.size) == ("text", "", 0)
    assert decode_short(None).kind == "null"


def test_large_values_are_cut_and_say_so() -> None:
    text = decode(b"x" * (TEXT_LIMIT + 10))
    assert text.truncated and len(text.text) == TEXT_LIMIT and text.size == TEXT_LIMIT + 10
    binary = decode(bytes(range(256)) * 64)
    assert binary.kind == "hex" and binary.truncated
    assert len(binary.text.splitlines()) == HEX_LIMIT // 16
    big = decode(b"[" + b",".join([b"1"] * 20000) + b"]")
    assert big.kind == "json" and big.truncated


def test_keys_and_header_values_are_text_or_spaced_hex() -> None:
    assert decode_short(b"user-1").text == "user-1"
    assert decode_short(b'{"a":1}').text == '{"a":1}'  # not pretty-printed
    shown = decode_short(b"\xde\xad\xbe\xef")
    assert (shown.kind, shown.text) == ("hex", "de ad be ef")
    long = decode_short(b"\xff" * (SHORT_LIMIT + 1))
    assert long.truncated


def test_hexdump_of_nothing_is_empty() -> None:
    assert hexdump(b"") == ""


def test_headers_are_key_value_lines() -> None:
    assert parse_headers("trace=abc\n\n  source = a=b \n") == [("trace", b"abc"), ("source", b" a=b ")]
    assert parse_headers("") == []
    assert parse_headers("k=") == [("k", b"")]
    with pytest.raises(ValueError, match=r"Header line 2 .* is not key=value"):
        parse_headers("a=1\nnope")
    with pytest.raises(ValueError, match="no key"):
        parse_headers("=v")


def test_times_are_ms_or_iso_8601_in_utc_unless_an_offset_is_given() -> None:
    assert parse_timestamp("1700000000000") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14 22:13:20") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T23:13:20+01:00") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14") == 1_699_920_000_000
    with pytest.raises(ValueError, match="not a time"):
        parse_timestamp("yesterday")
    with pytest.raises(ValueError, match="Give a time"):
        parse_timestamp(" ")


def test_timestamp_types_have_kafkas_names() -> None:
    assert timestamp_type(0) == "CreateTime"
    assert timestamp_type(1) == "LogAppendTime"
    assert timestamp_type(-1) == "NoTimestampType"
