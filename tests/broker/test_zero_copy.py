"""Zero copy, as seen from outside: a Fetch's record bytes leave the broker process by sendfile(2), and
only the small response and partition headers by write. strace watches a real broker's syscalls while
a client fetches a few megabytes."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from protocol import record_batch
from protocol.api import ApiKey
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient, fetch_request, produce_request

pytestmark = pytest.mark.integration

BATCHES = 40
VALUE = b"x" * 100_000  # one 100 kB record per batch: 4 MB in all
WRITES = ("write", "writev", "sendto", "sendmsg")
SYSCALL = re.compile(r"^(?:\d+\s+)?(\w+)\(.*\)\s+=\s+(-?\d+)")


def _produce(bootstrap: str, topic: str) -> None:
    client = RawClient(bootstrap, timeout=10)
    try:
        for _ in range(BATCHES):
            now = int(time.time() * 1000)
            batch = record_batch.encode_batch([record_batch.Record(0, now, None, VALUE)], base_offset=0)
            request = produce_request(topic, batch, acks=1)
            answer = client.request(ApiKey.PRODUCE, 9, request).responses[0].partition_responses[0]
            assert answer.error_code == 0, answer
    finally:
        client.close()


def _fetch_everything(bootstrap: str, topic: str) -> int:
    request = fetch_request(topic, max_bytes=16 << 20)
    client = RawClient(bootstrap, timeout=10)
    try:
        return len(client.request(ApiKey.FETCH, 12, request).responses[0].partitions[0].records)
    finally:
        client.close()


def _bytes_by_syscall(trace: str) -> dict[str, int]:
    totals: dict[str, int] = {}
    for line in trace.splitlines():
        found = SYSCALL.match(line)
        if found and int(found.group(2)) > 0:
            totals[found.group(1)] = totals.get(found.group(1), 0) + int(found.group(2))
    return totals


def test_fetched_record_bytes_leave_by_sendfile_not_by_write(one_broker: Cluster, tmp_path: Path) -> None:
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed (Debian package strace)")
    one_broker.create_topic("zero-copy", 1, replication_factor=1)
    bootstrap = one_broker.broker(1).bootstrap
    _produce(bootstrap, "zero-copy")
    out = tmp_path / "strace.txt"
    tracer = subprocess.Popen(
        [strace, "-f", "-qq", "-e", "trace=sendfile," + ",".join(WRITES), "-e", "signal=none", "-o", str(out),
         "-p", str(one_broker.broker(1).pid)],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        time.sleep(1.0)  # attached to every thread
        if tracer.poll() is not None:
            pytest.skip(f"strace cannot attach here: {tracer.stderr.read().strip() if tracer.stderr else ''}")
        fetched = _fetch_everything(bootstrap, "zero-copy")
        time.sleep(0.5)
    finally:
        if tracer.poll() is None:
            os.kill(tracer.pid, signal.SIGINT)
        tracer.wait(timeout=10)
    assert fetched >= BATCHES * len(VALUE)
    totals = _bytes_by_syscall(out.read_text())
    written = sum(totals.get(name, 0) for name in WRITES)
    print(f"bytes out by syscall during the fetch: {totals}")
    # Each time the socket is full, 1 kB goes through the transport to be woken when it drains.
    assert totals.get("sendfile", 0) >= 0.95 * BATCHES * len(VALUE), totals
    assert written < 0.05 * BATCHES * len(VALUE), f"record bytes went through write: {totals}"
