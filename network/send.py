"""FileRegion: record data a response sends straight from a segment file with os.sendfile (zero copy).

A Fetch response is a list of buffers; the records of each partition are a ``FileRegion`` (a file
descriptor, a position and a length) that the connection sends with ``os.sendfile`` once everything
before it has left the transport's buffer. When the socket is full, a small slice of the region goes
through the transport instead (from a memoryview of the mapped segment, so Python still copies
nothing), which makes the transport wake the connection once the socket takes data again, and
``sendfile`` resumes then.
"""

from __future__ import annotations

import os
from collections.abc import Callable


class TruncatedRegionError(OSError):
    """The file holds fewer bytes than the response promised (the log was truncated under a fetch)."""


class FileRegion:
    __slots__ = ("_view", "fd", "length", "position", "sent")

    def __init__(self, fd: int, position: int, length: int, view: Callable[[], memoryview]) -> None:
        self.fd = fd
        self.position = position
        self.length = length
        self.sent = 0
        self._view = view

    def __len__(self) -> int:
        return self.length

    @property
    def remaining(self) -> int:
        return self.length - self.sent

    def send_to(self, socket_fd: int) -> bool:
        """Sends as much as the socket takes; True once the whole region is out."""
        while self.sent < self.length:
            try:
                n = os.sendfile(socket_fd, self.fd, self.position + self.sent, self.length - self.sent)
            except BlockingIOError:
                return False
            if n == 0:
                raise TruncatedRegionError(f"segment shrank under a fetch: {self.remaining} bytes missing")
            self.sent += n
        return True

    def take_slice(self, limit: int) -> memoryview:
        """The next ``limit`` bytes as a memoryview of the mapped segment, counted as sent."""
        start = self.sent
        n = min(limit, self.length - start)
        self.sent += n
        return self._view()[start : start + n]
