"""``JsonEvents``: what a client subprocess reports, one JSON object a line on its stdout."""

from __future__ import annotations

import json
import threading
from typing import IO, Any


class JsonEvents:
    """The JSON objects a subprocess prints on stdout, one a line, collected by a thread as they come
    (the group-member processes of the consumer-group tests report what their consumer sees so)."""

    def __init__(self, stdout: IO[str]) -> None:
        self._events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, args=(stdout,), daemon=True)
        self.reader.start()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self._lock:
                self._events.append(event)

    def all(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._events)

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The events so far whose "event" is ``kind``, in order."""
        with self._lock:
            return [e for e in self._events if e["event"] == kind]
