"""Record data a response sends straight from a segment file with os.sendfile (zero copy).

A Fetch response is a list of buffers; the records of each partition are a ``FileRegion``: anything
that names a file descriptor, a position and a length and can show those bytes as a memoryview (the
storage layer's read result is one, and a response carries it as it is). The connection wraps each
region in a ``RegionSend`` that sends it with ``os.sendfile`` once everything before it has left the
transport's buffer. When the socket is full, a small slice of the region goes through the transport
instead (from a memoryview of the mapped segment, so Python still copies nothing), which makes the
transport wake the connection once the socket takes data again, and ``sendfile`` resumes then.
"""

from __future__ import annotations

import os
from typing import Protocol


class TruncatedRegionError(OSError):
    """The file holds fewer bytes than the response promised (the log was truncated under a fetch)."""


class FileRegion(Protocol):
    """``length`` bytes at ``position`` of the file ``fd``; ``records`` is the same bytes, mapped."""

    @property
    def fd(self) -> int: ...

    @property
    def position(self) -> int: ...

    @property
    def length(self) -> int: ...

    @property
    def records(self) -> memoryview: ...

    def __len__(self) -> int: ...


class RegionSend:
    """How much of one region a connection has sent (Kafka's RecordsSend)."""

    __slots__ = ("region", "sent")

    def __init__(self, region: FileRegion) -> None:
        self.region = region
        self.sent = 0

    @property
    def remaining(self) -> int:
        return self.region.length - self.sent

    def send_to(self, socket_fd: int) -> bool:
        """Sends as much as the socket takes; True once the whole region is out."""
        region = self.region
        fd, position, length = region.fd, region.position, region.length
        while self.sent < length:
            try:
                n = os.sendfile(socket_fd, fd, position + self.sent, length - self.sent)
            except BlockingIOError:
                return False
            if n == 0:
                raise TruncatedRegionError(f"segment shrank under a fetch: {self.remaining} bytes missing")
            self.sent += n
        return True

    def take_slice(self, limit: int) -> memoryview:
        """The next ``limit`` bytes as a memoryview of the mapped segment, counted as sent."""
        start = self.sent
        n = min(limit, self.region.length - start)
        self.sent += n
        return self.region.records[start : start + n]
