"""Helpers for storage tests: a controllable clock, batch builders, reading a whole log back, and
counting and limiting this process's file descriptors."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator

from protocol import record_batch as rb
from storage.log import Log


class Clock:
    """Milliseconds that only move when a test says so."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def batch(
    values: list[bytes | None] | int = 1,
    *,
    keys: list[bytes | None] | None = None,
    timestamp: int = 1_700_000_000_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    value_size: int = 10,
) -> bytearray:
    """A client-style batch (base offset 0) of the given values (or that many values of value_size bytes)."""
    if isinstance(values, int):
        values = [b"v" * value_size for _ in range(values)]
    keys = keys if keys is not None else [None] * len(values)
    records = [rb.Record(i, timestamp + i, k, v) for i, (k, v) in enumerate(zip(keys, values, strict=True))]
    return bytearray(
        rb.encode_batch(
            records,
            base_offset=0,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=transactional,
        )
    )


def marker(
    producer_id: int,
    producer_epoch: int,
    *,
    commit: bool,
    coordinator_epoch: int = 0,
    timestamp: int = 1_700_000_000_000,
) -> bytearray:
    return bytearray(
        rb.encode_control_batch(
            base_offset=0,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            commit=commit,
            coordinator_epoch=coordinator_epoch,
            timestamp=timestamp,
        )
    )


def read_all(log: Log, start: int | None = None) -> list[rb.Record]:
    """Every record from `start` (default the log start) to the log end, following segments."""
    offset = log.log_start_offset if start is None else start
    out: list[rb.Record] = []
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30)
        if data.length == 0:
            break
        view = data.records
        for pos, header in rb.iter_headers(view):
            out.extend(r for r in rb.decode_records(view, pos) if r.offset >= offset)
            offset = header.last_offset + 1
    return out


def open_descriptors(under: list[str] | None = None) -> int:
    """The descriptors this process holds (not counting the one that lists them); with ``under``, only
    those of files in these dirs (other tests' leftovers, closed whenever the garbage collector gets to
    them, then do not count)."""
    if under is None:
        return len(os.listdir("/proc/self/fd")) - 1
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += any(target.startswith(d.rstrip("/") + "/") for d in under)
    return count


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


@contextlib.contextmanager
def descriptors_limited(spare: int) -> Iterator[None]:
    """Within the block, this process can open exactly ``spare`` more descriptors: the soft
    RLIMIT_NOFILE bounds descriptor numbers, and numbers below it may be free."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    used = {int(fd) for fd in os.listdir("/proc/self/fd") if _is_open(int(fd))}
    limit, free = 0, 0
    while free < spare or limit in used:
        free += limit not in used
        limit += 1
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
