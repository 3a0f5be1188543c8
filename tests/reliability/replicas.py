"""Reads every replica of a topic from the brokers' log directories, for the checker's
replica-convergence check: run after the brokers stopped, so that nothing moves underneath.

Segments are read in offset order with ``protocol.record_batch``; a log ends at the first incomplete or
malformed batch, as the broker's recovery would end it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from protocol import record_batch
from tests.reliability.checker import ReplicaLog
from tests.reliability.history import decode_value


def read_replicas(log_dirs: Mapping[int, Path], topic: str) -> list[ReplicaLog]:
    """Every replica of ``topic`` found under each broker's log dir (broker id -> log dir)."""
    name = re.compile(rf"^{re.escape(topic)}-(\d+)$")
    replicas = []
    for broker, log_dir in sorted(log_dirs.items()):
        if not log_dir.is_dir():
            continue
        for directory in sorted(log_dir.iterdir()):
            match = name.match(directory.name)
            if match and directory.is_dir():
                replicas.append(read_replica(broker, topic, int(match[1]), directory))
    return replicas


def read_replica(broker: int, topic: str, partition: int, directory: Path) -> ReplicaLog:
    records: list[tuple[int, int | None]] = []
    batches: list[tuple[int, int, int, int]] = []
    segments = sorted(directory.glob("*.log"), key=lambda p: int(p.stem))
    end = int(segments[-1].stem) if segments else 0
    for segment in segments:
        data = segment.read_bytes()
        try:
            for position, header in record_batch.iter_headers(data):
                if not record_batch.crc_ok(data, position, header):
                    break
                batches.append(
                    (header.base_offset, header.last_offset, header.partition_leader_epoch, header.crc)
                )
                end = header.last_offset + 1
                if not header.is_control:
                    records += [
                        (r.offset, decode_value(r.value)) for r in record_batch.decode_records(data, position)
                    ]
        except record_batch.CorruptRecordError:
            pass  # the torn tail of a killed writer: the log ends before it
    return ReplicaLog(broker, topic, partition, tuple(records), tuple(batches), end)
