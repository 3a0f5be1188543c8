"""The history format the reliability workloads write and the checker reads (reliability.md §5).

One JSON object per line, one file per process (producer, consumer, final reader, nemesis):

    {"t": 1700000000.123, "process": "producer-0", "type": "invoke", "f": "send",
     "value": [["topic", 0, 17, null]]}

- ``type`` is Jepsen's: ``invoke`` starts an operation, ``ok`` says it happened, ``fail`` says it
  certainly did not (a broker error that promises nothing was appended), ``info`` says it may or may
  not have (timeouts, lost connections). An invocation with no completion is ``info`` too.
- ``f`` is ``send`` (one record), ``poll`` (the records one consumer poll returned), ``seek`` (a
  consumer's position was set: ``assign`` and resets after errors), ``final-read`` (a fresh consumer
  read every partition from the start up to its high watermark; the ok op carries ``hw``), or a
  nemesis operation (``kill``, ``pause``, ``partition``, ``heal``...).
- ``value`` of a data op is a list of ``[topic, partition, value, offset]``; values are unique
  integers, offsets are null where unknown (an invocation). A seek's entries carry ``null`` values
  and the new position (``null``: unknown).
- ``error`` (optional) is the client's error name and code for fail and info completions.

Record payloads are the value in ASCII followed by padding, so that a broker's log files can be read
back into values (``decode_value``).
"""

from __future__ import annotations

import heapq
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
SEND, POLL, SEEK, FINAL_READ = "send", "poll", "seek", "final-read"
NEMESIS = "nemesis"
PAYLOAD_SIZE = 100
_PADDING = b"." * PAYLOAD_SIZE


@dataclass(frozen=True)
class Op:
    """One history line. ``index`` is the position in the merged history (``load``), -1 before."""

    process: str
    type: str
    f: str
    value: Any = None
    t: float = 0.0
    error: str | None = None
    hw: list[list[Any]] | None = None
    index: int = field(default=-1, compare=False)

    def records(self) -> list[tuple[str, int, int | None, int | None]]:
        """The [topic, partition, value, offset] entries of a data op as tuples."""
        return [(str(r[0]), int(r[1]), r[2], r[3]) for r in (self.value or [])]

    def to_json(self) -> str:
        line: dict[str, Any] = {
            "t": round(self.t, 6),
            "process": self.process,
            "type": self.type,
            "f": self.f,
        }
        line["value"] = self.value
        if self.error is not None:
            line["error"] = self.error
        if self.hw is not None:
            line["hw"] = self.hw
        return json.dumps(line, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, index: int = -1) -> Op:
        raw = json.loads(text)
        return cls(
            process=raw["process"],
            type=raw["type"],
            f=raw["f"],
            value=raw.get("value"),
            t=float(raw.get("t", 0.0)),
            error=raw.get("error"),
            hw=raw.get("hw"),
            index=index,
        )


class HistoryWriter:
    """Appends one process's operations to its file, a line at a time (a killed writer loses at most
    the line being written)."""

    def __init__(self, path: Path, process: str) -> None:
        self.process = process
        self._file: TextIO = open(path, "a", buffering=1, encoding="utf-8")  # closed in close()

    def write(
        self,
        type: str,
        f: str,
        value: Any = None,
        *,
        error: str | None = None,
        hw: Any = None,
        t: float | None = None,
    ) -> Op:
        """Writes an op stamped now, or at ``t`` (an invocation logged once its outcome is known)."""
        op = Op(self.process, type, f, value, time.time() if t is None else t, error, hw)
        self._file.write(op.to_json() + "\n")
        return op

    def close(self) -> None:
        self._file.close()


def read_ops(path: Path) -> Iterator[Op]:
    """The ops of one file in the order written; a torn last line (a killed writer) is skipped."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.endswith("\n"):
                yield Op.from_json(line)


def load(directory: Path) -> list[Op]:
    """Every ``*.jsonl`` history under ``directory`` merged by time, with ``index`` set to the position
    in the merged history."""
    ops: list[Op] = []
    for path in sorted(directory.glob("*.jsonl")):
        ops.extend(read_ops(path))
    return index(ops)


def index(ops: Iterable[Op]) -> list[Op]:
    """Merges the ops by time and numbers them. Each process's ops keep the order they are given in
    (the order written), even where its clock stepped back: only the heads of the processes'
    sequences are compared."""
    by_process: dict[str, list[Op]] = {}
    for op in ops:
        by_process.setdefault(op.process, []).append(op)
    merged = heapq.merge(*by_process.values(), key=lambda op: op.t)
    return [Op(o.process, o.type, o.f, o.value, o.t, o.error, o.hw, i) for i, o in enumerate(merged)]


def encode_value(value: int) -> bytes:
    head = b"%d " % value
    return head + _PADDING[: max(0, PAYLOAD_SIZE - len(head))]


def decode_value(payload: bytes | None) -> int | None:
    """The value a record carries, or None for a payload no workload wrote."""
    if not payload:
        return None
    head = payload.split(b" ", 1)[0]
    return int(head) if head.isdigit() else None
