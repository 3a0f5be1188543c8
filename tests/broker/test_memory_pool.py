"""queued.max.request.bytes and per-connection buffers, driven directly with fake transports (unit tests):
the MemoryPool's accounting, a connection pausing until a large frame fits and resuming without losing
a byte, small frames going through while the pool is exhausted, reservations released when requests
are handled or connections close, stages held only while part of a frame waits, and half-sent
requests closed."""

from __future__ import annotations

import logging
import time

import pytest

from network.memory_pool import MemoryPool
from network.processor import Connection, Processor
from network.request_channel import RequestChannel
from protocol.api import ApiKey, api
from protocol.frame import encode_request
from protocol.messages import ApiVersionsRequest
from tests.broker.test_connection import FakeTransport

VERSIONS = api(ApiKey.API_VERSIONS)


class Waiter:
    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.granted: list[int] = []

    def memory_granted(self, size: int) -> None:
        self.granted.append(size)


def test_reservations_are_granted_while_anything_is_left_however_large() -> None:
    pool = MemoryPool(1000)
    first, second, third = Waiter("a"), Waiter("b"), Waiter("c")
    assert pool.reserve(first, 600)
    assert pool.reserve(second, 5000)  # larger than the whole bound: granted, as 400 bytes were left
    assert pool.used == 5600 and pool.exhausted
    assert not pool.reserve(third, 10)
    assert pool.waiting == 1


def test_releases_serve_the_waiting_in_order_until_the_pool_is_exhausted_again() -> None:
    pool = MemoryPool(1000)
    assert pool.reserve(Waiter("holder"), 1000)
    waiters = [Waiter(str(i)) for i in range(3)]
    for waiter in waiters:
        assert not pool.reserve(waiter, 600)
    pool.release(1000)
    # The first takes 600 of 1000, the second 600 more (non-strict); the third waits on.
    assert [w.granted for w in waiters] == [[600], [600], []]
    assert pool.used == 1200 and pool.waiting == 1
    pool.cancel(waiters[2])
    pool.release(1200)
    assert pool.used == 0 and waiters[2].granted == []


def test_an_unbounded_pool_never_refuses() -> None:
    pool = MemoryPool(-1)
    assert all(pool.reserve(Waiter("x"), 100 << 20) for _ in range(10))
    assert not pool.exhausted


def test_a_pause_is_logged_once_however_many_connections_wait(caplog: pytest.LogCaptureFixture) -> None:
    pool = MemoryPool(10)
    pool.reserve(Waiter("holder"), 10)
    with caplog.at_level(logging.WARNING, logger="network.memory_pool"):
        for i in range(5):
            pool.reserve(Waiter(f"10.0.0.{i}:1"), 100)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert "queued.max.request.bytes=10" in lines[0] and "10.0.0.0:1" in lines[0]


# -- connections --------------------------------------------------------------------------------


def _processor(pool: MemoryPool, channel: RequestChannel) -> Processor:
    return Processor(0, channel, lambda key: (VERSIONS, 0, 4), 1 << 20, lambda ip: None, pool)


def _connect(processor: Processor) -> tuple[Connection, FakeTransport]:
    connection = Connection(processor, "PLAINTEXT", "10.0.0.9")
    transport = FakeTransport()
    connection.connection_made(transport)
    return connection, transport


def _feed(connection: Connection, data: bytes, transport: FakeTransport) -> bytes:
    """Feeds ``data`` as the event loop would, until the connection pauses; returns what is left."""
    while data and transport.reading:
        buf = connection.get_buffer(len(data))
        n = min(len(buf), len(data))
        buf[:n] = data[:n]
        connection.buffer_updated(n)
        data = data[n:]
    return data


def _frame(correlation_id: int, padding: int) -> bytes:
    body = ApiVersionsRequest(client_software_name="x" * padding, client_software_version="1")
    return encode_request(VERSIONS, 3, correlation_id, "c", body)


LARGE = 200_000  # a frame of about this size goes into a buffer of its own, with a reservation


async def test_a_connection_pauses_until_its_large_frame_fits_then_resumes_losing_nothing() -> None:
    pool = MemoryPool(100_000)  # less than one large frame: only one is received at a time
    channel = RequestChannel(100)
    processor = _processor(pool, channel)
    (a, a_transport), (b, b_transport) = _connect(processor), _connect(processor)
    a_frame, b_frame = _frame(1, LARGE), _frame(2, LARGE)

    assert _feed(a, a_frame[:100_000], a_transport) == b""
    assert pool.used == len(a_frame) - 4  # the announced size, from the moment the buffer is taken
    left = _feed(b, b_frame, b_transport)
    assert not b_transport.reading and pool.waiting == 1
    assert len(left) == len(b_frame) - 65536  # what B sent stays staged (a full stage) or in the socket

    assert _feed(a, a_frame[100_000:], a_transport) == b""
    request = await channel.receive_request()
    assert request.correlation_id == 1 and request.reserved == len(a_frame) - 4
    assert not b_transport.reading  # received but not yet handled: still counted
    a.handled(request)
    assert b_transport.reading and pool.waiting == 0 and pool.used == len(b_frame) - 4

    assert _feed(b, left, b_transport) == b""
    request = await channel.receive_request()
    assert request.correlation_id == 2 and request.body.client_software_name == "x" * LARGE
    b.handled(request)
    assert pool.used == 0


async def test_small_frames_go_through_while_the_pool_is_exhausted() -> None:
    pool = MemoryPool(100_000)
    channel = RequestChannel(100)
    processor = _processor(pool, channel)
    (hog, hog_transport), (small, small_transport) = _connect(processor), _connect(processor)
    _feed(hog, _frame(1, LARGE)[:150_000], hog_transport)  # a stalled large frame holds the budget
    assert pool.exhausted
    _feed(small, _frame(7, 100) + _frame(8, 30_000), small_transport)
    assert small_transport.reading
    first = await channel.receive_request()
    small.handled(first)
    assert [first.correlation_id, (await channel.receive_request()).correlation_id] == [7, 8]


async def test_closing_releases_the_partial_frame_and_the_unhandled_requests() -> None:
    pool = MemoryPool(1 << 30)
    channel = RequestChannel(100)
    processor = _processor(pool, channel)
    connection, transport = _connect(processor)
    # Three large frames: the first goes to the handlers, the second waits in the connection's backlog,
    # the third is half received.
    frames = _frame(1, LARGE) + _frame(2, LARGE)
    _feed(connection, frames + _frame(3, LARGE)[:1000], transport)
    in_handler = await channel.receive_request()
    assert pool.used == 3 * (len(frames) // 2 - 4)
    connection.close()
    connection.connection_lost(None)
    assert pool.used == len(frames) // 2 - 4  # the request the handler still has
    connection.handled(in_handler)
    assert pool.used == 0


async def test_a_connection_that_closes_while_waiting_gives_up_its_place() -> None:
    pool = MemoryPool(100_000)
    processor = _processor(pool, RequestChannel(100))
    (hog, hog_transport), (waiting, waiting_transport) = _connect(processor), _connect(processor)
    _feed(hog, _frame(1, LARGE)[:1000], hog_transport)
    _feed(waiting, _frame(2, LARGE), waiting_transport)
    assert pool.waiting == 1
    waiting.connection_lost(None)
    assert pool.waiting == 0
    hog.connection_lost(None)
    assert pool.used == 0


async def test_a_stage_is_held_only_while_part_of_a_frame_waits_in_it() -> None:
    processor = _processor(MemoryPool(-1), RequestChannel(100))
    connection, transport = _connect(processor)
    assert processor.stages.idle == 0  # an idle connection holds no buffer (and has taken none)
    frame = _frame(1, 100)
    _feed(connection, frame[:10], transport)
    assert connection.reader.partial and processor.stages.idle == 0
    _feed(connection, frame[10:], transport)
    assert not connection.reader.partial and processor.stages.idle == 1
    _feed(connection, frame[:10], transport)
    assert processor.stages.idle == 0  # the same stage, taken again
    connection.connection_lost(None)
    assert processor.stages.idle == 1


async def test_a_request_left_half_sent_is_closed_but_not_one_the_broker_holds_back() -> None:
    pool = MemoryPool(100_000)
    processor = _processor(pool, RequestChannel(100))
    (stalled, stalled_transport), (waiting, waiting_transport) = _connect(processor), _connect(processor)
    idle, idle_transport = _connect(processor)
    _feed(stalled, _frame(1, LARGE)[:1000], stalled_transport)
    _feed(waiting, _frame(2, LARGE), waiting_transport)
    for connection in (stalled, waiting, idle):
        connection.last_active = time.monotonic() - 60
    processor.close_stalled(30)
    assert stalled_transport.closed
    assert not waiting_transport.closed and not idle_transport.closed
    stalled.connection_lost(None)
    assert waiting_transport.reading  # the reservation went to the waiting connection
