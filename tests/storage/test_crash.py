"""Crash safety: a child appends in a loop and is killed with SIGKILL at random points, many rounds.

After each kill the logs are opened (recovery) and checked: every append that had returned is there
with its data, offsets of the plain log are contiguous, the compacted log holds the latest acknowledged
value of every key, and no index entry points past the data.
"""

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from protocol import record_batch as rb
from storage.log_manager import LogManager
from tests.storage.crash_writer import COMPACT, PLAIN
from tests.storage.helpers import read_all

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_acks(path):
    plain, compact = {}, {}
    with open(path, "rb") as f:
        for line in f.read().split(b"\n")[:-1]:  # the last line may be torn
            kind, *fields = line.split()
            if kind == b"plain":
                first, last, seed, counter = map(int, fields)
                plain[(seed, counter)] = (first, last)
            elif kind == b"compact":
                offset, key, seed, counter = map(int, fields)
                compact[key] = (offset, seed, counter)
    return plain, compact


def check_indexes(log):
    for segment in log.segments:
        segment.sanity_check()
        for i in range(segment.offset_index.entries):
            offset, position = segment.offset_index.entry(i)
            assert position < segment.size
            assert rb.read_header(segment.view(), position).last_offset == offset
        for i in range(segment.time_index.entries):
            assert segment.base_offset <= segment.time_index.entry(i).offset < log.log_end_offset


def verify(data_dir):
    manager = LogManager([os.path.join(data_dir, "logs")], PLAIN, topic_configs={"compact": COMPACT})
    try:
        plain_acks, compact_acks = parse_acks(os.path.join(data_dir, "acks"))
        plain = manager.get_log("plain", 0)
        compact = manager.get_log("compact", 0)
        if plain is None:
            assert not plain_acks
            return 0
        records = read_all(plain)
        assert [r.offset for r in records] == list(range(plain.log_end_offset))
        by_offset = {r.offset: r for r in records}
        for (seed, counter), (first, last) in plain_acks.items():
            for offset in range(first, last + 1):
                prefix = b"%d:%d:" % (seed, counter * 10 + offset - first)
                assert by_offset[offset].value.startswith(prefix), (offset, seed, counter)
        check_indexes(plain)
        latest = {}
        previous = -1
        for r in read_all(compact):
            assert r.offset > previous
            previous = r.offset
            latest[r.key] = r
        for key, (offset, seed, counter) in compact_acks.items():
            found = latest.get(b"k%d" % key)
            if counter < 0:
                assert found is None or found.offset > offset or found.value is None
            else:
                assert found is not None and found.offset >= offset
                if found.offset == offset:
                    assert found.value.startswith(b"%d:%d:" % (seed, counter))
        check_indexes(compact)
        return len(plain_acks)
    finally:
        if random.random() < 0.5:
            manager.shutdown()  # clean: the next child skips recovery
        else:
            for log in manager.all_logs():
                log.close_handlers()
            for fd in manager._lock_fds:
                os.close(fd)


def run_rounds(tmp_path, rounds, max_delay):
    data_dir = str(tmp_path)
    rnd = random.Random(1234)
    total = 0
    for seed in range(1, rounds + 1):
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.storage.crash_writer", data_dir, str(seed)],
            cwd=ROOT,
            stderr=subprocess.PIPE,
        )
        try:
            time.sleep(rnd.uniform(0.2, max_delay))
            assert child.poll() is None, child.stderr.read().decode()
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stderr.close()
        total = verify(data_dir)
    assert total > rounds  # appends did happen between kills


@pytest.mark.integration
def test_sigkill_loses_nothing_acknowledged(tmp_path):
    run_rounds(tmp_path, rounds=12, max_delay=0.6)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sigkill_soak(tmp_path):
    run_rounds(tmp_path, rounds=60, max_delay=1.2)
