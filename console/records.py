"""How the Messages page shows a record's bytes, and how it reads what a user types for one: pure code,
no I/O.

A value is shown as one of ``FORMATS``: ``text`` (UTF-8), ``json`` (parsed and pretty-printed), ``hex``
(a hexdump with offsets and an ASCII column) or ``auto`` (JSON when it is a JSON object or array, text when
it is printable UTF-8, hex otherwise). Whatever is asked, bytes that cannot be shown that way fall back to
a way they can, with a note saying so: invalid UTF-8 is never decoded with replacement characters but
shown as hex. Control characters and the bidirectional-override characters (which could reorder what is
around them on screen) are shown as ``\\uXXXX`` escapes. HTML escaping is left to the templates (Jinja2's
autoescape): everything here is plain text.

What is shown is capped (``TEXT_LIMIT`` characters, ``HEX_LIMIT`` bytes as hex) so that one large
record cannot make a page of megabytes; ``Shown.truncated`` says when it was cut.

Also here: the produce form's headers (``key=value`` lines) and the timestamps the browse form takes.
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from typing import Any

FORMATS = ("auto", "text", "json", "hex")
TEXT_LIMIT = 32 * 1024  # characters of text or pretty JSON shown per value
HEX_LIMIT = 4 * 1024  # bytes shown as a hexdump per value (a dump is ~4.9 characters per byte)
SHORT_LIMIT = 1024  # characters (or bytes, as hex) shown of a key or a header value

# C0 controls other than tab, newline and carriage return; DEL and the C1 controls; the line and paragraph
# separators; the bidirectional embedding, override and isolate characters.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# What makes a text binary rather than text (for ``auto``): the controls, not the bidi characters.
_BINARY = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Shown:
    """Bytes as the page shows them."""

    kind: str  # "json", "text", "hex", "null" (no bytes at all: a tombstone's value, a record without key)
    text: str
    size: int  # the bytes' length
    truncated: bool = False
    note: str | None = None  # why it is not shown as asked, or what was escaped


def escape_unsafe(text: str) -> str:
    """``text`` with control and bidi characters as ``\\uXXXX`` escapes (valid in JSON strings too)."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def utf8(data: bytes) -> str | None:
    """``data`` as UTF-8, or None when it is not valid UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(text: str) -> Any:
    """Strict JSON (no NaN or Infinity, which Python's parser would otherwise take); ValueError if not."""
    return json.loads(text, parse_constant=_reject_constant)


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def hexdump(data: bytes, limit: int = HEX_LIMIT) -> str:
    """``hexdump -C``'s layout: offset, 16 bytes in hex, the printable ASCII ones (dots for the rest)."""
    lines = []
    for start in range(0, min(len(data), limit), 16):
        chunk = data[start : start + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk[:8]) + "  " + " ".join(f"{b:02x}" for b in chunk[8:])
        ascii_ = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        lines.append(f"{start:08x}  {hexes:<48}  |{ascii_}|")
    return "\n".join(lines)


def _cut(text: str, limit: int) -> tuple[str, bool]:
    return (text[:limit], True) if len(text) > limit else (text, False)


def _as_text(data: bytes, text: str, note: str | None = None, limit: int = TEXT_LIMIT) -> Shown:
    escaped = escape_unsafe(text)
    if escaped != text:
        note = (note + "; " if note else "") + "control characters shown as \\u escapes"
    shown, truncated = _cut(escaped, limit)
    return Shown("text", shown, len(data), truncated, note)


def _as_hex(data: bytes, note: str | None = None, limit: int = HEX_LIMIT) -> Shown:
    return Shown("hex", hexdump(data, limit), len(data), len(data) > limit, note)


def _as_json(data: bytes, value: Any, note: str | None = None) -> Shown:
    shown, truncated = _cut(escape_unsafe(pretty_json(value)), TEXT_LIMIT)
    return Shown("json", shown, len(data), truncated, note)


def decode(data: bytes | None, fmt: str = "auto") -> Shown:
    """A record's value (or key) shown as ``fmt`` (one of ``FORMATS``), or as what it can be shown as."""
    if data is None:
        return Shown("null", "null", 0)
    if fmt == "hex":
        return _as_hex(data)
    text = utf8(data)
    if text is None:
        note = None if fmt == "auto" else "not valid UTF-8: shown as hex"
        return _as_hex(data, note)
    if fmt in ("json", "auto"):
        try:
            value = parse_json(text)
        except ValueError:
            value = None
            if fmt == "json":
                return _as_text(data, text, "not valid JSON: shown as text")
        else:
            # ``auto`` pretty-prints objects and arrays only: a bare number, word or string is text as
            # much as it is JSON, and pretty-printing would change nothing but its quotes.
            if fmt == "json" or isinstance(value, dict | list):
                return _as_json(data, value)
    if fmt == "auto" and _BINARY.search(text):
        return _as_hex(data)
    return _as_text(data, text)


def decode_short(data: bytes | None) -> Shown:
    """A key or a header value: text when it is printable UTF-8, hex (``de ad be ef``) otherwise; no
    pretty-printing, and a smaller cap."""
    if data is None:
        return Shown("null", "null", 0)
    text = utf8(data)
    if text is None or _BINARY.search(text):
        shown = " ".join(f"{b:02x}" for b in data[:SHORT_LIMIT])
        return Shown("hex", shown, len(data), len(data) > SHORT_LIMIT)
    return _as_text(data, text, limit=SHORT_LIMIT)


def parse_headers(text: str) -> list[tuple[str, bytes]]:
    """The produce form's headers: one ``key=value`` per line (the value may hold ``=``; blank lines are
    skipped). ValueError in words for a line without ``=`` or with an empty key."""
    headers = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep:
            raise ValueError(f"Header line {number} ({line.strip()!r}) is not key=value")
        if not key:
            raise ValueError(f"Header line {number} has no key before '='")
        headers.append((key, value.encode("utf-8")))
    return headers


def parse_timestamp(text: str) -> int:
    """A time the browse form takes, as ms since the epoch: digits are ms since the epoch; otherwise ISO
    8601 (``2026-11-25T13:00:00Z``, ``2026-11-25 13:00``, a date alone), in UTC unless it names an
    offset. ValueError in words otherwise."""
    text = text.strip()
    if not text:
        raise ValueError("Give a time: ms since the epoch or an ISO 8601 date and time")
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: give ms since the epoch or ISO 8601 (2026-11-25T13:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def timestamp_type(code: int) -> str:
    """Kafka's name for a record's timestamp type (aiokafka's ``timestamp_type``)."""
    return TIMESTAMP_TYPES.get(code, "NoTimestampType")
