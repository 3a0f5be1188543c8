"""Connection framing and response ordering, driven directly with a fake transport (a unit test)."""

from __future__ import annotations

import asyncio
import struct

from network.processor import Connection, Processor
from network.request_channel import RequestChannel
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

    def get_write_buffer_size(self) -> int:
        return 0

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
    stream, ids = b"".join(transport.written), []
    while stream:
        size = struct.unpack_from(">i", stream)[0]
        ids.append(struct.unpack_from(">i", stream, 4)[0])
        stream = stream[4 + size :]
    assert ids == [0, 2]


async def test_a_client_far_ahead_is_paused() -> None:
    connection, transport, _ = _setup()
    _feed(connection, _frames(100), 65536)
    assert not transport.reading


async def test_an_oversized_frame_closes_without_reading_it() -> None:
    connection, transport, channel = _setup()
    _feed(connection, struct.pack(">i", (1 << 20) + 1) + b"\x00" * 10, 100)
    assert transport.closed and len(channel) == 0


async def test_file_regions_go_out_by_sendfile_in_order_even_when_the_socket_is_full(tmp_path) -> None:
    import os
    import socket

    from protocol.messages import FetchResponse

    class Region:
        """A network.send.FileRegion (as storage.fetch.FetchDataInfo is)."""

        def __init__(self, fd: int, position: int, length: int, records: memoryview) -> None:
            self.fd, self.position, self.length, self.records = fd, position, length, records

        def __len__(self) -> int:
            return self.length

    data = os.urandom(6 << 20)
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"junk" + data)
    fd = os.open(segment, os.O_RDONLY)
    view = memoryview(segment.read_bytes())
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    loop = asyncio.get_running_loop()
    channel = RequestChannel(10)
    processor = Processor(0, channel, lambda key: (VERSIONS, 0, 4), 1 << 20, lambda ip: None)
    _, connection = await loop.connect_accepted_socket(lambda: Connection(processor, "PLAINTEXT", "x"), ours)
    fetch = api(ApiKey.FETCH)
    from network.request_channel import Request

    requests = [Request(connection, fetch, 12, i, "c", None, 0, 12) for i in range(3)]
    for r in requests:
        connection.enqueue(r)
        connection.handled(r)
    for i, r in enumerate(requests):
        region = Region(fd, 4, len(data), view[4:])
        partition = FetchResponse.PartitionData(partition_index=i, records=region)
        body = FetchResponse(
            responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[partition])]
        )
        connection.complete(r, body)
    theirs.setblocking(False)
    received = bytearray()
    from protocol.frame import encode_response

    frame_size = sum(len(p) for p in encode_response(fetch, 12, 0, body))  # every frame is this long
    while len(received) < 3 * frame_size:
        try:
            chunk = await loop.sock_recv(theirs, 1 << 16)
        except BlockingIOError:
            continue
        assert chunk
        received += chunk
        await asyncio.sleep(0)  # a slow reader: the broker's socket fills up again and again
    pos = 0
    for i in range(3):
        size = struct.unpack_from(">i", received, pos)[0]
        frame = bytes(received[pos + 4 : pos + 4 + size])
        pos += 4 + size
        assert struct.unpack_from(">i", frame)[0] == i
        decoded = FetchResponse.decode(frame[5:], 12)
        assert bytes(decoded.responses[0].partitions[0].records) == data
    connection.close()
    theirs.close()
    os.close(fd)
