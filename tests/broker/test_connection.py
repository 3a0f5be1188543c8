"""Connection framing and response ordering, driven directly with a fake transport (a unit test)."""

from __future__ import annotations

import asyncio
import struct

from broker.network.processor import Connection, Processor
from broker.network.request_channel import RequestChannel
from protocol.api import ApiKey, api
from protocol.frame import encode_request
from protocol.messages import ApiVersionsRequest, ApiVersionsResponse


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closed = False
        self.reading = True

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("10.0.0.9", 4242) if name == "peername" else default

    def writelines(self, data) -> None:  # type: ignore[override]
        self.written.append(b"".join(bytes(d) for d in data))

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


VERSIONS = api(ApiKey.API_VERSIONS)


def _setup() -> tuple[Connection, FakeTransport, RequestChannel]:
    channel = RequestChannel(100)
    processor = Processor(
        0, channel, lambda key: (VERSIONS, 0, 4) if key == 18 else None, 1 << 20, lambda ip: None
    )
    connection = Connection(processor, "PLAINTEXT", "10.0.0.9")
    transport = FakeTransport()
    connection.connection_made(transport)
    return connection, transport, channel


def _feed(connection: Connection, data: bytes, chunk: int) -> None:
    for i in range(0, len(data), chunk):
        piece = data[i : i + chunk]
        while piece:
            buf = connection.get_buffer(len(piece))
            n = min(len(buf), len(piece))
            buf[:n] = piece[:n]
            connection.buffer_updated(n)
            piece = piece[n:]


def _frames(n: int, padding: int = 0) -> bytes:
    body = ApiVersionsRequest(client_software_name="x" * padding, client_software_version="1")
    return b"".join(encode_request(VERSIONS, 3, i, "c", body) for i in range(n))


async def test_frames_split_at_every_boundary_are_reassembled() -> None:
    for chunk in (1, 3, 7, 64, 4096):
        connection, _, channel = _setup()
        _feed(connection, _frames(5), chunk)
        received = [await channel.receive_request()]
        for _ in range(4):  # the next is dispatched only when the previous one has been handled
            connection.handled(received[-1])
            received.append(await channel.receive_request())
        assert [r.correlation_id for r in received] == [0, 1, 2, 3, 4]


async def test_a_frame_larger_than_the_staging_buffer() -> None:
    connection, _, channel = _setup()
    _feed(connection, _frames(2, padding=200_000), 10_000)
    first = await channel.receive_request()
    assert len(first.body.client_software_name) == 200_000
    connection.handled(first)
    assert (await channel.receive_request()).correlation_id == 1


async def test_responses_are_written_in_request_order() -> None:
    connection, transport, channel = _setup()
    _feed(connection, _frames(3), 1000)
    requests = []
    for _ in range(3):
        request = await channel.receive_request()
        connection.handled(request)
        requests.append(request)
    reply = ApiVersionsResponse(api_keys=[])
    connection.complete(requests[2], reply)
    connection.complete(requests[1], None)  # a request that gets no response (acks=0 Produce)
    assert transport.written == []
    connection.complete(requests[0], reply)
    assert [struct.unpack_from(">i", w, 4)[0] for w in transport.written] == [0, 2]


async def test_a_client_far_ahead_is_paused() -> None:
    connection, transport, _ = _setup()
    _feed(connection, _frames(100), 65536)
    assert not transport.reading


async def test_an_oversized_frame_closes_without_reading_it() -> None:
    connection, transport, channel = _setup()
    _feed(connection, struct.pack(">i", (1 << 20) + 1) + b"\x00" * 10, 100)
    assert transport.closed and len(channel) == 0
