"""Kafka's text checkpoint files, written atomically (temp file, fsync, rename, fsync of the directory).

Format: a version line, a count line, then one entry per line. Offset checkpoints
(recovery-point-offset-checkpoint, replication-offset-checkpoint, log-start-offset-checkpoint,
cleaner-offset-checkpoint) hold "topic partition offset"; the leader-epoch-checkpoint holds
"epoch startOffset".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Generic, NamedTuple, TypeVar

from storage.errors import CorruptCheckpointError

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

T = TypeVar("T")


def fsync_dir(path: str) -> None:
    """Makes a rename or create in `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str, data: bytes, *, sync: bool = True) -> None:
    """Replaces `path` with `data` so that a reader sees the old or the new content, never a mix."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


class CheckpointFile(Generic[T]):
    """A version-0 checkpoint file of entries of type T, one per line."""

    VERSION = 0

    def __init__(
        self, path: str, format_entry: Callable[[T], str], parse_entry: Callable[[list[str]], T]
    ) -> None:
        self.path = path
        self._format = format_entry
        self._parse = parse_entry

    def write(self, entries: Iterable[T]) -> None:
        lines = [self._format(e) for e in entries]
        text = f"{self.VERSION}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
        write_atomically(self.path, text.encode())

    def read(self) -> list[T]:
        """The entries; a missing or empty file is an empty checkpoint."""
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        if not lines:
            return []
        try:
            version = int(lines[0])
            count = int(lines[1])
        except (ValueError, IndexError):
            raise CorruptCheckpointError(f"{self.path}: malformed version/count header") from None
        if version != self.VERSION:
            raise CorruptCheckpointError(f"{self.path}: unrecognized version {version}")
        entries = lines[2:]
        if len(entries) != count:
            raise CorruptCheckpointError(f"{self.path}: expected {count} entries but found {len(entries)}")
        out = []
        for lineno, line in enumerate(entries, start=3):
            try:
                out.append(self._parse(line.split()))
            except (ValueError, IndexError):
                raise CorruptCheckpointError(f"{self.path} line {lineno}: malformed entry {line!r}") from None
        return out


def _format_offset(entry: tuple[tuple[str, int], int]) -> str:
    (topic, partition), offset = entry
    return f"{topic} {partition} {offset}"


def _parse_offset(fields: list[str]) -> tuple[tuple[str, int], int]:
    if len(fields) != 3:
        raise ValueError(fields)
    return (fields[0], int(fields[1])), int(fields[2])


class OffsetCheckpointFile:
    """A "topic partition offset" checkpoint (recovery point, high watermark, log start, cleaner)."""

    def __init__(self, path: str) -> None:
        self._file: CheckpointFile[tuple[tuple[str, int], int]] = CheckpointFile(
            path, _format_offset, _parse_offset
        )

    @property
    def path(self) -> str:
        return self._file.path

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        self._file.write(sorted(offsets.items()))

    def read(self) -> dict[tuple[str, int], int]:
        return dict(self._file.read())


class EpochEntry(NamedTuple):
    """A leader epoch and the first offset written in it."""

    epoch: int
    start_offset: int


def _parse_epoch(fields: list[str]) -> EpochEntry:
    if len(fields) != 2:
        raise ValueError(fields)
    return EpochEntry(int(fields[0]), int(fields[1]))


class LeaderEpochCheckpointFile:
    """The per-partition leader-epoch-checkpoint ("epoch startOffset" lines)."""

    def __init__(self, path: str) -> None:
        self._file: CheckpointFile[EpochEntry] = CheckpointFile(
            path, lambda e: f"{e.epoch} {e.start_offset}", _parse_epoch
        )

    @property
    def path(self) -> str:
        return self._file.path

    def write(self, entries: Iterable[EpochEntry]) -> None:
        self._file.write(entries)

    def read(self) -> list[EpochEntry]:
        return self._file.read()
