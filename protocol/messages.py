"""Message classes for every schema, built on first use: ``from protocol.messages import MetadataRequest``.

A message class holds its nested struct classes as attributes (``MetadataResponse.MetadataResponseTopic``)
and knows how to decode and encode itself at any version of its schema::

    req = MetadataRequest.decode(buf, version=12)
    parts = MetadataResponse(brokers=[...]).encode_parts(version=12)
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Any, Self

from protocol.codegen import CodecBuilder, Struct, make_struct_class
from protocol.primitives import DecodeError
from protocol.schema import MessageSpec, load_message, schema_paths


class Message(Struct):
    """Base of top-level messages: adds version-aware decode and encode."""

    __slots__ = ()
    _spec: MessageSpec
    _codecs: dict[int, tuple[Any, Any, str]]

    @classmethod
    def codec(cls, version: int) -> tuple[Any, Any, str]:
        """(reader, writer, generated source) for one version, compiled once."""
        try:
            return cls._codecs[version]
        except KeyError:
            pass
        codec = CodecBuilder(cls._spec, version, cls._classes).build()  # type: ignore[attr-defined]
        cls._codecs[version] = codec
        return codec

    @classmethod
    def decode_from(cls, buf: Any, version: int, pos: int = 0) -> tuple[Self, int]:
        """Decode at ``pos``; returns the message and the position after it."""
        try:
            return cls.codec(version)[0](buf, pos)
        except DecodeError:
            raise
        except (struct.error, IndexError, UnicodeDecodeError) as e:  # truncated input or bad UTF-8
            raise DecodeError(f"{cls.__name__} v{version}: {e}") from e

    @classmethod
    def decode(cls, buf: Any, version: int) -> Self:
        return cls.decode_from(buf, version)[0]

    def encode_into(self, version: int, out: bytearray, parts: list) -> None:
        self.codec(version)[1](self, out, parts)

    def encode_parts(self, version: int) -> list:
        """The encoding as a list of buffers; large record sets stay separate (zero copy)."""
        out = bytearray()
        parts: list = []
        self.codec(version)[1](self, out, parts)
        if out or not parts:
            parts.append(out)
        return parts

    def encode(self, version: int) -> bytes:
        parts = self.encode_parts(version)
        return bytes(parts[0]) if len(parts) == 1 else b"".join(parts)


def _build(spec: MessageSpec) -> type[Message]:
    classes: dict[str, type] = {}
    for name, fields in spec.structs.items():
        classes[name] = make_struct_class(name, fields, classes)
    top = make_struct_class(spec.name, spec.fields, classes, base=Message)
    top._spec = spec
    top._codecs = {}
    top._classes = classes
    for name, cls in list(classes.items()):
        cls.__qualname__ = f"{spec.name}.{name}"
        setattr(top, name, cls)
    classes[spec.name] = top
    return top  # type: ignore[return-value]


@cache
def message_class(name: str) -> type[Message]:
    """The class of a message schema by its name, e.g. "FetchResponse"."""
    return _build(load_message(name))


def __getattr__(name: str) -> type[Message]:
    if name in schema_paths():
        return message_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
