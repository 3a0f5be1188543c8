"""Framing: cutting a byte stream into Kafka frames (an int32 size, then that many bytes), sans I/O.

``FrameReader`` is the one state machine behind every reader of frames: the broker's connections, the
outbound client, the probe and the tests. Its caller does the I/O: it asks where the next bytes go
(``get_buffer``, as an asyncio ``BufferedProtocol`` or ``socket.recv_into`` wants), says how many came
(``buffer_updated``), and pulls events (``next_event``) until one says more bytes are needed:

- ``Frame``: a complete frame, without its size prefix, owned by the caller;
- ``NeedData``: the bytes still missing before the next event (partial prefix or partial frame);
- ``NeedBuffer``: a frame too large for the stage is announced; the caller hands ``receive_into`` a
  buffer of that size when it is ready to (the broker first reserves queued.max.request.bytes);
- ``BadFrameSize``: the announced size is outside 1..``max_size``; the stream is unusable.

Small frames are received into a stage (a buffer of ``STAGE_SIZE`` bytes, from a pool the caller may
supply) several at a time and copied out, so one read can bring many; a large frame is received
straight into the buffer the caller handed over and given back as that very buffer, never copied.
``read_frame`` reads one frame from a blocking socket.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Protocol

from protocol.primitives import DecodeError

SIZE = struct.Struct(">i")
_PREFIX = SIZE.size
_read_size = SIZE.unpack_from
# Frames of up to this size less the prefix are received into a stage and copied out of it; larger
# ones get a buffer of their own. A stage takes most reads whole (a socket buffer's worth).
STAGE_SIZE = 64 * 1024
MAX_FRAME_SIZE = 0x7FFFFFFF


class Stages(Protocol):
    """Where a reader borrows its stage while part of a frame waits in it (``StagingBuffers``)."""

    def take(self) -> memoryview: ...

    def give_back(self, stage: memoryview) -> None: ...


class OwnStage:
    """One stage kept for the reader's lifetime: for a reader that is alone or rarely idle."""

    def __init__(self, size: int = STAGE_SIZE) -> None:
        self._stage = memoryview(bytearray(size))

    def take(self) -> memoryview:
        return self._stage

    def give_back(self, stage: memoryview) -> None:
        pass


class Frame:
    """A complete frame without its size prefix: a copy out of the stage, or the caller's own buffer."""

    __slots__ = ("data",)

    def __init__(self, data: bytearray | memoryview) -> None:
        self.data = data


class NeedData:
    """``missing`` more bytes must arrive before the next event."""

    __slots__ = ("missing",)

    def __init__(self, missing: int) -> None:
        self.missing = missing


class NeedBuffer:
    """A frame of ``size`` bytes too large for the stage is announced; it is received once
    ``receive_into`` has a buffer for it (asked again until then)."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size


class BadFrameSize:
    """A frame announced with a size outside 1..``max_size``: zero, negative, or too large."""

    __slots__ = ("max_size", "size")

    def __init__(self, size: int, max_size: int) -> None:
        self.size = size
        self.max_size = max_size

    def __str__(self) -> str:
        return f"frame size {self.size} is outside 1..{self.max_size}"


Event = Frame | NeedData | NeedBuffer | BadFrameSize


class FrameReader:
    """Bytes in (``get_buffer`` / ``buffer_updated``), frames out (``next_event``)."""

    def __init__(self, max_size: int = MAX_FRAME_SIZE, stages: Stages | None = None) -> None:
        self.max_size = max_size
        self._stages: Stages = stages if stages is not None else OwnStage()
        # The stage is held only while part of a frame waits in it: thousands of idle broker
        # connections then hold no buffer. Its unread bytes are [_start, _end).
        self._stage: memoryview | None = None
        self._start = 0
        self._end = 0
        self._frame: memoryview | None = None  # a large frame's own buffer, being filled
        self._fill = 0
        self._refused: BadFrameSize | None = None

    @property
    def partial(self) -> bool:
        """Part of a frame (its prefix at least) has arrived and not yet come out."""
        return self._frame is not None or self._end > self._start

    def get_buffer(self) -> memoryview:
        """Where the next bytes go: the rest of a large frame's buffer, else the stage's free space
        (empty only while a ``NeedBuffer`` is unanswered and the stage is full)."""
        if self._frame is not None:
            return self._frame[self._fill :]
        stage = self._stage
        if stage is None:
            stage = self._stage = self._stages.take()
        elif self._end == len(stage):
            self._compact()
        return stage[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of the last ``get_buffer``."""
        if self._frame is not None:
            self._fill += nbytes
        else:
            self._end += nbytes

    def receive_into(self, buffer: memoryview) -> None:
        """Answers ``NeedBuffer``: the frame is received into ``buffer`` (exactly its size), which
        comes out as the ``Frame``; what the stage holds of it moves there, and the stage goes back."""
        stage = self._stage
        assert stage is not None and self._frame is None
        begin = self._start + _PREFIX
        have = self._end - begin
        buffer[:have] = stage[begin : self._end]
        self._frame, self._fill = buffer, have
        self._give_back_stage()

    def next_event(self) -> Event:
        """The next event; after a ``Frame`` there may be more, after any other there are none until
        the caller has done what it asks."""
        frame = self._frame
        if frame is not None:
            if self._fill < len(frame):
                return NeedData(len(frame) - self._fill)
            self._frame = None
            return Frame(frame)
        if self._refused is not None:
            return self._refused
        start = self._start
        available = self._end - start
        if available < _PREFIX:
            if not available:
                self._give_back_stage()
            return NeedData(_PREFIX - available)
        stage = self._stage
        assert stage is not None
        size = _read_size(stage, start)[0]
        if not 0 < size <= self.max_size:
            self._refused = BadFrameSize(size, self.max_size)
            return self._refused
        begin = start + _PREFIX
        if available - _PREFIX >= size:
            self._start = begin + size
            # A copy: the stage is used again, and the frame's owner may write into it (the broker's
            # log append patches batches in place).
            return Frame(bytearray(stage[begin : self._start]))
        if _PREFIX + size > len(stage):
            return NeedBuffer(size)
        if begin + size > len(stage):
            self._compact()
        return NeedData(size - available + _PREFIX)

    def close(self) -> None:
        """Drops any partial frame and gives the stage back."""
        self._frame = None
        self._give_back_stage()

    def _compact(self) -> None:
        stage = self._stage
        assert stage is not None
        n = self._end - self._start
        stage[:n] = stage[self._start : self._end]
        self._start, self._end = 0, n

    def _give_back_stage(self) -> None:
        self._start = self._end = 0
        if self._stage is not None:
            self._stages.give_back(self._stage)
            self._stage = None


def read_frame(recv_into: Callable[[memoryview], int]) -> bytearray | memoryview:
    """The next frame from a blocking ``recv_into`` (a socket's), asked for no more bytes than the
    frame needs so that nothing after it is read, and received straight into a buffer of its own.
    Raises ``ConnectionError`` at end of stream and ``DecodeError`` for a bad size."""
    # A stage of just the prefix: every frame is then announced with NeedBuffer.
    reader = FrameReader(stages=OwnStage(_PREFIX))
    while True:
        event = reader.next_event()
        if isinstance(event, Frame):
            return event.data
        if isinstance(event, NeedBuffer):
            reader.receive_into(memoryview(bytearray(event.size)))
        elif isinstance(event, BadFrameSize):
            raise DecodeError(str(event))
        else:
            n = recv_into(reader.get_buffer()[: event.missing])
            if not n:
                raise ConnectionError("connection closed")
            reader.buffer_updated(n)
