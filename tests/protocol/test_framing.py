"""FrameReader, the one framing state machine: bytes in, frames out, with no I/O. Frames split anywhere,
several in one read, frames larger than the stage (received into the caller's buffer, not copied),
and sizes outside 1..max_size."""

from __future__ import annotations

import socket

import pytest

from protocol.framing import (
    SIZE,
    BadFrameSize,
    Event,
    Frame,
    FrameReader,
    NeedBuffer,
    NeedData,
    OwnStage,
    read_frame,
)
from protocol.primitives import DecodeError


def _frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload


class CountingStages:
    """A pool that counts what is out, as the broker's StagingBuffers would be."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self.out = 0

    def take(self) -> memoryview:
        self.out += 1
        return memoryview(bytearray(self.size))

    def give_back(self, stage: memoryview) -> None:
        self.out -= 1


def _pull(reader: FrameReader) -> list[Event]:
    """Events up to the first that waits for something (more bytes, a buffer) or refuses."""
    events = [reader.next_event()]
    while isinstance(events[-1], Frame):
        events.append(reader.next_event())
    return events


def _receive(reader: FrameReader, data: bytes) -> list[Event]:
    """Puts ``data`` in as an event loop would, in as many reads as the buffers take, pulling the
    events after each read."""
    events: list[Event] = []
    while data:
        buffer = reader.get_buffer()
        n = min(len(buffer), len(data))
        assert n, "the reader offered no room"
        buffer[:n] = data[:n]
        reader.buffer_updated(n)
        data = data[n:]
        events += _pull(reader)
    return events


def _frames(events: list[Event]) -> list[bytes]:
    return [bytes(e.data) for e in events if isinstance(e, Frame)]


def test_an_empty_reader_needs_a_size_prefix_and_holds_no_stage() -> None:
    stages = CountingStages()
    reader = FrameReader(stages=stages)
    event = reader.next_event()
    assert isinstance(event, NeedData) and event.missing == 4
    assert stages.out == 0 and not reader.partial


def test_a_frame_fed_byte_by_byte_comes_out_once_complete_and_says_what_is_missing() -> None:
    stages = CountingStages()
    reader = FrameReader(stages=stages)
    data = _frame(b"hello") + _frame(b"world!")
    missing = []
    frames: list[bytes] = []
    for byte in data:
        buffer = reader.get_buffer()
        buffer[0] = byte
        reader.buffer_updated(1)
        events = _pull(reader)
        frames += _frames(events)
        need = events[-1]
        assert isinstance(need, NeedData)
        missing.append(need.missing)
    assert frames == [b"hello", b"world!"]
    assert missing == [3, 2, 1, 5, 4, 3, 2, 1, 4, 3, 2, 1, 6, 5, 4, 3, 2, 1, 4]  # prefix, body, prefix, ...
    assert stages.out == 0 and not reader.partial  # the stage went back once it was empty


def test_several_frames_in_one_read_come_out_in_order_as_copies() -> None:
    stages = CountingStages(size=1024)
    reader = FrameReader(stages=stages)
    payloads = [bytes([i]) * (i + 1) for i in range(20)]
    events = _receive(reader, b"".join(_frame(p) for p in payloads) + _frame(b"partial")[:6])
    assert _frames(events) == payloads
    assert all(isinstance(e.data, bytearray) for e in events if isinstance(e, Frame))
    assert isinstance(events[-1], NeedData) and events[-1].missing == len(b"partial") - 2
    assert reader.partial and stages.out == 1


def test_a_frame_that_would_overrun_the_stage_is_moved_to_its_start() -> None:
    reader = FrameReader(stages=CountingStages(size=16))
    events = _receive(reader, _frame(b"abcdef") + _frame(b"0123456789")[:4])  # 14 bytes used, 10 to come
    assert _frames(events) == [b"abcdef"]
    assert _frames(_receive(reader, b"0123456789")) == [b"0123456789"]


def test_a_frame_too_large_for_the_stage_is_received_into_the_callers_buffer() -> None:
    stages = CountingStages(size=16)
    reader = FrameReader(stages=stages)
    payload = bytes(range(100))
    events = _receive(reader, _frame(b"small") + _frame(payload)[:12])
    assert _frames(events) == [b"small"]
    need = events[-1]
    assert isinstance(need, NeedBuffer) and need.size == 100
    assert isinstance(reader.next_event(), NeedBuffer)  # asked again until it is answered
    assert reader.partial and stages.out == 1

    own = memoryview(bytearray(100))
    reader.receive_into(own)
    assert stages.out == 0  # what the stage held moved into the buffer
    event = reader.next_event()
    assert isinstance(event, NeedData) and event.missing == 100 - 8
    assert len(reader.get_buffer()) == 100 - 8  # nothing of a next frame is read with this one
    events = _receive(reader, payload[8:] + _frame(b"next"))
    assert isinstance(events[0], Frame) and events[0].data is own and bytes(own) == payload  # not copied
    assert _frames(events) == [payload, b"next"]


@pytest.mark.parametrize("size", [0, -1, -(1 << 31), 1001])
def test_a_size_outside_one_to_max_is_refused_for_good(size: int) -> None:
    reader = FrameReader(max_size=1000, stages=CountingStages())
    events = _receive(reader, _frame(b"ok") + SIZE.pack(size))
    assert _frames(events) == [b"ok"]
    refused = events[-1]
    assert isinstance(refused, BadFrameSize) and (refused.size, refused.max_size) == (size, 1000)
    assert str(refused) == f"frame size {size} is outside 1..1000"
    assert reader.next_event() is refused


def test_the_largest_size_allowed_is_accepted() -> None:
    reader = FrameReader(max_size=10, stages=CountingStages())
    assert _frames(_receive(reader, _frame(b"x" * 10))) == [b"x" * 10]


def test_close_drops_the_partial_frame_and_gives_the_stage_back() -> None:
    stages = CountingStages()
    reader = FrameReader(stages=stages)
    assert isinstance(_receive(reader, _frame(b"abc")[:5])[-1], NeedData) and stages.out == 1
    reader.close()
    assert stages.out == 0 and not reader.partial


def test_an_own_stage_is_kept_between_frames() -> None:
    stage = OwnStage(32)
    reader = FrameReader(stages=stage)
    first = reader.get_buffer()
    assert _frames(_receive(reader, _frame(b"abc"))) == [b"abc"]
    assert reader.get_buffer().obj is first.obj


def test_read_frame_reads_exactly_one_frame_from_a_socket() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        big = bytes(range(256)) * 40  # larger than a stage of just the prefix, small enough to send ahead
        theirs.sendall(_frame(b"first") + _frame(big) + b"rest")
        assert bytes(read_frame(ours.recv_into)) == b"first"
        assert bytes(read_frame(ours.recv_into)) == big
        assert ours.recv(10) == b"rest"  # nothing after the frame was read
        theirs.sendall(SIZE.pack(-5))
        with pytest.raises(DecodeError, match="frame size -5"):
            read_frame(ours.recv_into)
        theirs.sendall(_frame(b"cut short")[:7])
        theirs.close()
        with pytest.raises(ConnectionError):
            read_frame(ours.recv_into)


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 13, 31, 32, 33, 64, 1000])
def test_a_stream_of_small_and_large_frames_cut_anywhere_comes_out_whole(chunk: int) -> None:
    stages = CountingStages(size=32)
    reader = FrameReader(stages=stages)
    payloads = [bytes([n % 251]) * n for n in (1, 27, 28, 29, 100, 5, 60, 1, 1, 300, 28)]
    stream = b"".join(_frame(p) for p in payloads)
    frames: list[bytes] = []
    for i in range(0, len(stream), chunk):
        piece = stream[i : i + chunk]
        while piece:
            buffer = reader.get_buffer()
            n = min(len(buffer), len(piece))
            buffer[:n] = piece[:n]
            reader.buffer_updated(n)
            piece = piece[n:]
            events = _pull(reader)
            frames += _frames(events)
            if isinstance(events[-1], NeedBuffer):
                reader.receive_into(memoryview(bytearray(events[-1].size)))
                frames += _frames(_pull(reader))
    assert frames == payloads
    assert stages.out == 0 and not reader.partial
