"""Logging shared by every ``samsa`` process: one line format and level setup, and ``LogThrottle``, the
token bucket that keeps lines a peer can cause (refused requests, paused connections) from filling the
disk."""

from __future__ import annotations

import logging
import os
import sys
import time

LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"


def setup_logging(level: str | None = None) -> None:
    level = (level or os.environ.get("SAMSA_LOG_LEVEL") or "INFO").upper()
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
    # kazoo narrates every connection at INFO; its session changes are logged by zk.client.
    logging.getLogger("kazoo").setLevel(max(logging.WARNING, logging.getLogger().level))


class LogThrottle:
    """A token bucket in front of a logger: ``allow()`` says whether a line may be written now."""

    def __init__(self, burst: int, per_second: float) -> None:
        self._burst = burst
        self._per_second = per_second
        self._tokens = float(burst)
        self._stamp = time.monotonic()
        self.suppressed = 0

    def allow(self) -> bool:
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._per_second)
        self._stamp = now
        if self._tokens < 1:
            self.suppressed += 1
            return False
        self._tokens -= 1
        return True
