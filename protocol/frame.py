"""Request and response headers around a message body, in frames.

A frame is ``int32 size`` followed by ``size`` bytes of header and body. The functions here take a frame
*without* its size prefix (``protocol.framing`` cuts frames out of a stream and strips it) and produce
frames *with* it.
"""

from __future__ import annotations

import struct
from typing import Any

from protocol.api import Api
from protocol.framing import SIZE
from protocol.messages import Message, RequestHeader, ResponseHeader
from protocol.primitives import DecodeError

_REQUEST_PREFIX = struct.Struct(">hhi")
_RESPONSE_V0 = struct.Struct(">ii")


def peek_request(frame: Any) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): the fixed start of every request header, at any version."""
    if len(frame) < _REQUEST_PREFIX.size:
        raise DecodeError(f"request of {len(frame)} bytes is shorter than a request header")
    return _REQUEST_PREFIX.unpack_from(frame, 0)


def decode_request_header(frame: Any, api: Api, version: int) -> tuple[RequestHeader, int]:
    """The request header (v0, v1 or v2 as the API version requires) and where the body starts."""
    return RequestHeader.decode_from(frame, api.request_header_version(version))


def decode_request(frame: Any, api: Api, version: int) -> tuple[RequestHeader, Message]:
    """(header, body) of a request frame; raises DecodeError if either does not parse."""
    header, pos = decode_request_header(frame, api, version)
    body, _ = api.request.decode_from(frame, version, pos)
    return header, body


def encode_response(api: Api, version: int, correlation_id: int, body: Message) -> list:
    """A complete response frame as a list of buffers (size prefix, header, body parts)."""
    parts = body.encode_parts(version)
    header_flexible = api.response_header_version(version) == 1
    size = 4 + header_flexible + sum(len(p) for p in parts)
    prefix = _RESPONSE_V0.pack(size, correlation_id)
    if header_flexible:
        prefix += b"\x00"  # an empty tag buffer
    if len(parts) == 1:
        parts[0][:0] = prefix  # small responses: one buffer
        return parts
    return [prefix, *parts]


def encode_request(
    api: Api, version: int, correlation_id: int, client_id: str | None, body: Message
) -> bytes:
    """A complete request frame, as Samsa's own clients (controller, replica fetchers) send them."""
    header = RequestHeader(
        request_api_key=api.key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    out = bytearray(4)
    parts: list = []
    header.encode_into(api.request_header_version(version), out, parts)
    body.encode_into(version, out, parts)
    if parts:
        out = bytearray(b"".join([*parts, out]))
    SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def decode_response(frame: Any, api: Api, version: int) -> tuple[int, Message]:
    """(correlation_id, body) of a response frame without its size prefix."""
    header, pos = ResponseHeader.decode_from(frame, api.response_header_version(version))
    body, _ = api.response.decode_from(frame, version, pos)
    return header.correlation_id, body
