"""partition.metadata (KIP-516): Kafka's exact format, written atomically and durably, read back when
a log opens, a corrupt file refused with KAFKA_STORAGE_ERROR, and a log that knows its topic id refusing
another (INCONSISTENT_TOPIC_ID)."""

from __future__ import annotations

import os
import uuid

import pytest

from protocol.errors import ErrorCode
from storage.config import LogConfig
from storage.errors import KafkaStorageError
from storage.log import Log
from storage.partition_metadata import (
    PARTITION_METADATA_FILE,
    InconsistentTopicIdError,
    PartitionMetadataFile,
    parse_topic_id,
    topic_id_string,
)

# A topic id and the string Kafka's Uuid.toString gives for it (base64url, no padding).
TOPIC_ID = uuid.UUID("b7e1f0d2-5c1a-4e0b-9a3e-2f6d8c4b1a09")
TOPIC_ID_TEXT = "t-Hw0lwaTguaPi9tjEsaCQ"


def test_topic_id_string_is_kafkas_base64url_without_padding() -> None:
    assert topic_id_string(TOPIC_ID) == TOPIC_ID_TEXT
    assert parse_topic_id(TOPIC_ID_TEXT) == TOPIC_ID


def test_the_file_has_kafkas_exact_format(tmp_path) -> None:
    PartitionMetadataFile(str(tmp_path)).write(TOPIC_ID)
    data = (tmp_path / PARTITION_METADATA_FILE).read_bytes()
    assert data == f"version: 0\ntopic_id: {TOPIC_ID_TEXT}".encode()


def test_a_file_written_by_kafka_reads_back(tmp_path) -> None:
    (tmp_path / PARTITION_METADATA_FILE).write_text(f"version: 0\ntopic_id: {TOPIC_ID_TEXT}\n")
    assert PartitionMetadataFile(str(tmp_path)).read() == TOPIC_ID


def test_no_file_reads_as_no_topic_id(tmp_path) -> None:
    assert PartitionMetadataFile(str(tmp_path)).read() is None


def test_the_write_is_atomic_and_fsynced(tmp_path, monkeypatch) -> None:
    """The content goes to partition.metadata.tmp, is fsynced, renamed over the file and the
    directory fsynced; nothing is left behind."""
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync")
        real_fsync(fd)

    def replace(source: str, target: str) -> None:
        events.append(f"replace {os.path.basename(source)}")
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    (tmp_path / PARTITION_METADATA_FILE).write_text("old content")
    PartitionMetadataFile(str(tmp_path)).write(TOPIC_ID)
    assert events == ["fsync", f"replace {PARTITION_METADATA_FILE}.tmp", "fsync"]
    assert sorted(os.listdir(tmp_path)) == [PARTITION_METADATA_FILE]
    assert PartitionMetadataFile(str(tmp_path)).read() == TOPIC_ID


def test_a_failed_write_leaves_the_old_file_and_is_a_storage_error(tmp_path, monkeypatch) -> None:
    PartitionMetadataFile(str(tmp_path)).write(TOPIC_ID)

    def refuse(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(KafkaStorageError, match="No space left") as refused:
        PartitionMetadataFile(str(tmp_path)).write(uuid.uuid4())
    assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    monkeypatch.undo()
    assert PartitionMetadataFile(str(tmp_path)).read() == TOPIC_ID


@pytest.mark.parametrize(
    "content",
    [
        "",
        "version: 0",
        "version: x\ntopic_id: " + TOPIC_ID_TEXT,
        "version: -1\ntopic_id: " + TOPIC_ID_TEXT,
        "version:0\ntopic_id: " + TOPIC_ID_TEXT,
        "version: 0\ntopic_id: not-an-id",
        "version: 0\ntopic_id: " + TOPIC_ID_TEXT[:-1] + "*",
        "version: 0\ntopic_id: " + TOPIC_ID_TEXT[:-1],
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA",  # the zero uuid
        "version: 0\ntopic_id " + TOPIC_ID_TEXT,
    ],
    ids=[
        "empty",
        "no topic id",
        "bad version",
        "negative version",
        "no space after colon",
        "not base64",
        "not base64url",
        "short id",
        "zero id",
        "no colon",
    ],
)
def test_a_corrupt_file_is_a_storage_error_naming_it(tmp_path, content: str) -> None:
    (tmp_path / PARTITION_METADATA_FILE).write_text(content)
    with pytest.raises(KafkaStorageError, match=PARTITION_METADATA_FILE) as refused:
        PartitionMetadataFile(str(tmp_path)).read()
    assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR


def test_a_newer_version_reads_as_kafka_does(tmp_path) -> None:
    """Kafka reads any version from 0 up (downgrade compatibility)."""
    (tmp_path / PARTITION_METADATA_FILE).write_text(f"version: 1\ntopic_id: {TOPIC_ID_TEXT}")
    assert PartitionMetadataFile(str(tmp_path)).read() == TOPIC_ID


def _log(tmp_path) -> Log:
    return Log(str(tmp_path / "t-0"), LogConfig())


def test_a_log_learns_its_topic_id_once_and_reads_it_back_when_opened(tmp_path) -> None:
    log_ = _log(tmp_path)
    assert log_.topic_id is None
    assert not os.path.exists(os.path.join(log_.dir, PARTITION_METADATA_FILE))
    assert log_.assign_topic_id(TOPIC_ID) is True
    assert log_.assign_topic_id(TOPIC_ID) is False  # known already: nothing written
    log_.close()
    reopened = _log(tmp_path)
    assert reopened.topic_id == TOPIC_ID
    reopened.close()


def test_a_log_refuses_another_topic_id(tmp_path) -> None:
    log_ = _log(tmp_path)
    log_.assign_topic_id(TOPIC_ID)
    other = uuid.uuid4()
    with pytest.raises(InconsistentTopicIdError) as refused:
        log_.assign_topic_id(other)
    assert refused.value.error_code == ErrorCode.INCONSISTENT_TOPIC_ID
    assert log_.topic_id == TOPIC_ID
    assert PartitionMetadataFile(log_.dir).read() == TOPIC_ID
    log_.close()


def test_a_log_with_a_corrupt_partition_metadata_does_not_open(tmp_path) -> None:
    """As Kafka: the log cannot be opened (KafkaStorageException), rather than lose which topic it
    belongs to."""
    log_ = _log(tmp_path)
    log_.assign_topic_id(TOPIC_ID)
    log_.close()
    with open(os.path.join(log_.dir, PARTITION_METADATA_FILE), "w") as f:
        f.write("version: 0\ntopic_id: garbage")
    with pytest.raises(KafkaStorageError, match="Malformed line"):
        _log(tmp_path)
