"""MemoryPool: ``queued.max.request.bytes``, the broker-wide bound on the bytes of large requests
being received or waiting to be handled (Kafka's ``SimpleMemoryPool`` in the role KIP-72 gave it).

A connection reserves a frame's announced size when it starts receiving a frame too large for its
staging buffer, and the reservation is released once the request has been handled (or the connection
closes first). When the pool is exhausted, a connection that needs a reservation stops reading until
releases make room; waiting connections are served in the order they started waiting. As in Kafka's
non-strict pool, a reservation is granted whenever anything is left, however large the frame: the
reserved total stays below the bound plus one frame, and a frame larger than the whole bound still
goes through. Frames that fit the staging buffer need no reservation, so a stalled large request
holding the budget does not hold back the small requests (metadata, heartbeats, fetches) of others.

All processors share one pool; everything runs on the broker's one event loop, so it needs no lock.
"""

from __future__ import annotations

import logging
from typing import Protocol

from server_common.log import LogThrottle

log = logging.getLogger(__name__)

# At most one line per minute says that reading paused for memory; each counts what it left out.
_PAUSE_LOG_PER_SECOND = 1 / 60


class MemoryWaiter(Protocol):
    """A connection waiting for a reservation (``Connection``)."""

    peer: str

    def memory_granted(self, size: int) -> None: ...


class MemoryPool:
    """The reservations of large requests; ``max_bytes`` <= 0 is unbounded (Kafka's -1)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        self._waiting: dict[MemoryWaiter, int] = {}  # insertion order: the order they started waiting
        self._pause_log = LogThrottle(burst=1, per_second=_PAUSE_LOG_PER_SECOND)

    @property
    def exhausted(self) -> bool:
        return 0 < self.max_bytes <= self.used

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def reserve(self, waiter: MemoryWaiter, size: int) -> bool:
        """Reserves ``size`` bytes now (True), or queues ``waiter``, whose ``memory_granted(size)`` is
        called once the reservation has been made (False: it should stop reading meanwhile)."""
        if not self.exhausted:  # someone is waiting only while the pool is exhausted
            self.used += size
            return True
        self._waiting[waiter] = size
        if self._pause_log.allow():
            suppressed, self._pause_log.suppressed = self._pause_log.suppressed, 0
            log.warning(
                "requests being received or waiting to be handled hold %d bytes "
                "(queued.max.request.bytes=%d): reading from %s paused until a %d-byte request fits; "
                "%d connection(s) waiting%s",
                self.used,
                self.max_bytes,
                waiter.peer,
                size,
                len(self._waiting),
                f" ({suppressed} more pauses since the last line)" if suppressed else "",
            )
        return False

    def release(self, size: int) -> None:
        self.used -= size
        while self._waiting and not self.exhausted:
            waiter = next(iter(self._waiting))
            size = self._waiting.pop(waiter)
            self.used += size
            waiter.memory_granted(size)

    def cancel(self, waiter: MemoryWaiter) -> None:
        """``waiter`` no longer wants its reservation (its connection closed)."""
        self._waiting.pop(waiter, None)
