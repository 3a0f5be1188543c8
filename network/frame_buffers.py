"""The buffers connections receive into: ``StagingBuffers`` for small frames, ``FrameBuffers`` for
frames too large for a stage. Both are anonymous mappings, used again.

A frame of a megabyte or more (a librdkafka Produce, a replica Fetch response) received into a fresh
anonymous mapping costs a page fault for every 4 KiB the socket writes into it, the kernel zeroing each
page first, and an munmap when the frame is dropped: about a tenth of each broker's CPU in a
three-broker acks=all run at 1 KiB. A pool hands a mapping out again once nothing refers to it any
more. Nothing has to give a buffer back: the frame's decoded request or response holds memoryviews of
it for as long as anyone uses them (a parked acks=all Produce, a response still being written), and
each memoryview holds a reference to the mapping, so a mapping whose only references are the pool's is
free. A fresh mapping still costs memory only as bytes arrive, so a client announcing a huge frame and
sending it slowly does not pin its full size; the pool keeps at most ``max_bytes`` of mappings, and
frames beyond that get mappings of their own, unmapped when dropped.

A connection holds a stage only while part of a frame waits in it: an idle connection holds none, so
thousands of idle connections cost no buffers. Stages are mappings rather than heap blocks so that
memory given back is returned to the system (freed 64 KiB heap blocks mostly stay with the process);
a processor keeps a few idle ones to hand out without a system call or page faults.
"""

from __future__ import annotations

import mmap
import sys

from protocol.framing import STAGE_SIZE

# Idle stages a processor keeps: enough for the connections that hand theirs back and take one again
# read after read, few enough that closed connections' stages are mostly returned to the system.
_IDLE_STAGES = 16
_GRANULE = 1 << 20  # sizes are rounded up to this, so frames of nearly the same size share mappings
# References to a pooled mapping when nobody else holds one: the pool's list, the loop variable, and
# getrefcount's own argument.
_IDLE_REFERENCES = 3


class FrameBuffers:
    """A pool of anonymous mappings for one event loop's large frames (not thread-safe)."""

    def __init__(self, max_bytes: int = 16 << 20) -> None:
        self.max_bytes = max_bytes
        self._pooled: list[mmap.mmap] = []
        self._pooled_bytes = 0

    def take(self, size: int) -> memoryview:
        """A writable buffer of exactly ``size`` bytes (its contents are not cleared)."""
        best = self._smallest_idle(size)
        return memoryview(best if best is not None else self._allocate(size))[:size]

    def _smallest_idle(self, size: int) -> mmap.mmap | None:
        """The smallest pooled mapping of at least ``size`` bytes that nothing refers to."""
        best: mmap.mmap | None = None
        for buffer in self._pooled:
            if len(buffer) >= size and sys.getrefcount(buffer) == _IDLE_REFERENCES:
                if best is None or len(buffer) < len(best):
                    best = buffer
        return best

    def _allocate(self, size: int) -> mmap.mmap:
        length = -(-size // _GRANULE) * _GRANULE
        buffer = mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if length > self.max_bytes:
            return buffer
        while self._pooled_bytes + length > self.max_bytes:
            idle = self._smallest_idle(0)
            if idle is None:
                break
            self._pooled.remove(idle)
            self._pooled_bytes -= len(idle)
        if self._pooled_bytes + length <= self.max_bytes:
            self._pooled.append(buffer)
            self._pooled_bytes += length
        return buffer


class StagingBuffers:
    """The stages of one event loop's connections: ``STAGE_SIZE`` bytes each (not thread-safe)."""

    def __init__(self, keep: int = _IDLE_STAGES) -> None:
        self.keep = keep
        self._idle: list[memoryview] = []

    @property
    def idle(self) -> int:
        return len(self._idle)

    def take(self) -> memoryview:
        """A stage to receive into (its contents are not cleared)."""
        if self._idle:
            return self._idle.pop()
        return memoryview(mmap.mmap(-1, STAGE_SIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS))

    def give_back(self, stage: memoryview) -> None:
        """Takes back a stage nothing refers to any more; beyond ``keep`` idle ones it is dropped, and
        its mapping unmapped once the last view of it goes."""
        if len(self._idle) < self.keep:
            self._idle.append(stage)
