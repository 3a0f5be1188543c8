"""Message classes for every schema, built on first use: ``from protocol.messages import MetadataRequest``.

A message class holds its nested struct classes as attributes (``MetadataResponse.MetadataResponseTopic``)
and knows how to decode and encode itself at any version of its schema::

    req = MetadataRequest.decode(buf, version=12)
    parts = MetadataResponse(brokers=[...]).encode_parts(version=12)

The classes are made at run time from the JSON schemas (``protocol.codegen``). Their types live in
``messages.pyi`` beside this file, written from the same schemas by ``python -m protocol.stubgen``
(``make stubs``); a test fails when it is out of date.
"""

from __future__ import annotations

from protocol.codegen import Message, Struct, message_class
from protocol.schema import schema_paths

__all__ = ["Message", "Struct", "message_class"]


def __getattr__(name: str) -> type[Message]:
    if name in schema_paths():
        return message_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
