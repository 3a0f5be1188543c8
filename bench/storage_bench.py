"""Storage benchmark: append throughput against raw os.write, offset lookup cost by log size, and
recovery time of a 1 GiB log after a kill.

Run: .venv/bin/python bench/storage_bench.py [--dir DIR] [--quick]
Data goes to a temporary directory under DIR (default /tmp) and is deleted afterwards. The figures are
also written to bench/results/storage-<date>.txt.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from protocol import record_batch as rb
from storage.config import LogConfig
from storage.log import Log

MIB = 1024 * 1024
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
_lines: list[str] = []


def report(text: str) -> None:
    print(text, flush=True)
    _lines.append(text)


TS = 1_700_000_000_000


def make_batch(size: int) -> bytes:
    """One client batch (base offset 0) of exactly `size` bytes holding one record."""
    overhead = len(rb.encode_batch([rb.Record(0, TS, None, b"")], base_offset=0))
    value = os.urandom(size - overhead - 2)  # the varint of a length >= 64 takes one byte more
    data = rb.encode_batch([rb.Record(0, TS, None, value)], base_offset=0)
    assert abs(len(data) - size) <= 2, len(data)
    return data


def timed_calls(template: bytes, calls: int, write) -> float:
    """Seconds spent in `write(buf)` over `calls` calls. Each call gets a fresh copy of the template,
    made untimed just before it, as a produce request's buffer is just filled from its socket (and
    a leader append patches it in place)."""
    elapsed = 0.0
    clock = time.perf_counter
    for _ in range(calls):
        buf = bytearray(template)
        start = clock()
        write(buf)
        elapsed += clock() - start
    return elapsed


def bench_append(
    root: str, label: str, batch_size: int, batches_per_call: int, calls: int, rounds: int
) -> None:
    template = make_batch(batch_size) * batches_per_call
    total = len(template) * calls
    raw_rates, disk_rates, log_rates = [], [], []
    for r in range(rounds):
        raw_path = os.path.join(root, f"raw-{r}")
        fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        raw_rates.append(total / timed_calls(template, calls, lambda buf, fd=fd: os.write(fd, buf)))
        os.close(fd)
        os.unlink(raw_path)
        # The disk itself: the same writes, then fsync (what `dd conv=fsync` reports).
        fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        elapsed = timed_calls(template, calls, lambda buf, fd=fd: os.write(fd, buf))
        start = time.perf_counter()
        os.fsync(fd)
        disk_rates.append(total / (elapsed + time.perf_counter() - start))
        os.close(fd)
        os.unlink(raw_path)
        log = Log(os.path.join(root, f"append-{r}"), LogConfig())
        log_rates.append(
            total / timed_calls(template, calls, lambda buf, log=log: log.append_as_leader(buf, 0))
        )
        log.close()
        shutil.rmtree(log.dir)
    raw, disk, stored = (statistics.median(x) for x in (raw_rates, disk_rates, log_rates))
    view = memoryview(bytearray(template))
    headers = list(rb.iter_headers(view))
    start = time.perf_counter()
    for _ in range(100):
        for pos, header in headers:
            rb.crc_ok(view, pos, header)
    crc_rate = 100 * len(template) / (time.perf_counter() - start)
    batches_per_s = stored / len(template) * batches_per_call
    report(
        f"{label}: {stored / MIB:.0f} MiB/s, {batches_per_s:.0f} batches/s\n"
        f"    raw os.write (page cache) {raw / MIB:.0f} MiB/s -> {100 * stored / raw:.1f}% of raw; "
        f"os.write+fsync (disk) {disk / MIB:.0f} MiB/s -> {100 * stored / disk:.0f}% of disk; "
        f"CRC32C check alone {crc_rate / MIB:.0f} MiB/s"
    )


def bench_lookup(root: str, sizes_mib: list[int], lookups: int) -> None:
    """Time per read of a random offset (index binary search + batch scan) as the log grows."""
    # One segment for the whole log, so that its index grows with it (segment.bytes is an int32).
    log = Log(os.path.join(root, "lookup-0"), LogConfig.from_props({"segment.bytes": 2**31 - 1}))
    call = make_batch(16 * 1024) * 64
    rnd = random.Random(7)
    written = 0
    for size in sizes_mib:
        while written < size * MIB:
            log.append_as_leader(bytearray(call), leader_epoch=0)
            written += len(call)
        log.update_high_watermark(log.log_end_offset)
        offsets = [rnd.randrange(log.log_end_offset) for _ in range(lookups)]
        start = time.perf_counter()
        for offset in offsets:
            log.read(offset, 1)
        per_read = (time.perf_counter() - start) / lookups
        segment = log.active_segment
        start = time.perf_counter()
        for offset in offsets:
            segment.offset_index.lookup(offset)
        per_probe = (time.perf_counter() - start) / lookups
        report(
            f"lookup in {size:5d} MiB log ({log.log_end_offset:7d} batches, "
            f"{segment.offset_index.entries:6d} index entries): read() {per_read * 1e6:6.2f} us, "
            f"index lookup {per_probe * 1e6:5.2f} us"
        )
    log.close()
    shutil.rmtree(log.dir)


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def bench_recovery(root: str, size_mib: int) -> None:
    """A log written and then abandoned as by kill -9 (indexes untrimmed, no snapshot at the end, no
    clean-shutdown marker, recovery point 0), reopened: every batch is checked."""
    path = os.path.join(root, "recover-0")
    config = LogConfig()
    log = Log(path, config)
    call = make_batch(16 * 1024) * 64
    for _ in range(size_mib):
        log.append_as_leader(bytearray(call), leader_epoch=0)
    end = log.log_end_offset
    log.close_handlers()
    for cold in (False, True):
        if cold and not drop_caches():
            report("recovery (cold cache): not measured, /proc/sys/vm/drop_caches is not writable")
            continue
        start = time.perf_counter()
        recovered = Log(path, config, recovery_point=0, had_clean_shutdown=False)
        elapsed = time.perf_counter() - start
        assert recovered.log_end_offset == end
        recovered.close_handlers()
        cache = "cold" if cold else "warm"
        report(
            f"recovery of a {size_mib} MiB log after a kill ({cache} page cache): {elapsed:6.2f} s "
            f"({size_mib / elapsed:6.0f} MiB/s)"
        )
    start = time.perf_counter()
    reopened = Log(path, config, had_clean_shutdown=True)
    report(
        f"open of the same log after a clean shutdown (no scan):      {time.perf_counter() - start:6.3f} s"
    )
    reopened.close()
    shutil.rmtree(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", default="/tmp", help="where to put the temporary data")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="samsa-storage-bench-", dir=args.dir)
    try:
        quick = args.quick
        report(
            f"{datetime.date.today()}, python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f}"
        )
        bench_append(
            root,
            "append 1 MiB of 16 KiB batches/call",
            16 * 1024,
            64,
            32 if quick else 256,
            1 if quick else 5,
        )
        bench_append(
            root, "append single 1 KiB batches", 1024, 1, 2_000 if quick else 50_000, 1 if quick else 3
        )
        bench_lookup(root, [10, 100] if quick else [10, 100, 1024], 2_000 if quick else 20_000)
        bench_recovery(root, 64 if quick else 1024)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if not args.quick:
        os.makedirs(RESULTS, exist_ok=True)
        with open(os.path.join(RESULTS, f"storage-{datetime.date.today()}.txt"), "w") as f:
            f.write("\n".join(_lines) + "\n")


if __name__ == "__main__":
    main()
