"""``partition.metadata``: the topic id of a partition directory (KIP-516; Kafka's PartitionMetadataFile).

The file holds exactly what Kafka writes, two lines and no trailing newline::

    version: 0
    topic_id: <the id as base64url without padding, 22 characters>

It is written atomically (a ``.tmp`` file written and fsynced, renamed over the file, the directory
fsynced) the first time the log learns its topic id (a LeaderAndIsr v5+ naming it), and read when the
log is opened: from then on the log belongs to that topic id, and a LeaderAndIsr naming another id for
the same topic name is refused with INCONSISTENT_TOPIC_ID (a log of a deleted topic is never taken for
the log of a topic re-created under its name).

Reading is Kafka's ``PartitionMetadataReadBuffer``: ``<key>:<whitespace><value>`` lines, a version
below 0 refused, any version from 0 up read as version 0 (downgrade compatibility), a missing, malformed
or zero topic id refused. A file that cannot be read or parsed raises ``KafkaStorageError`` naming the
file (Kafka's KafkaStorageException: the log cannot be opened).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import threading
import uuid
from dataclasses import dataclass

from protocol.errors import ErrorCode
from storage.checkpoints import write_atomically
from storage.errors import KafkaStorageError, StorageError

PARTITION_METADATA_FILE = "partition.metadata"
CURRENT_VERSION = 0
ZERO_UUID = uuid.UUID(int=0)
_SEPARATOR = re.compile(r":\s+")


class InconsistentTopicIdError(StorageError):
    """A topic id is assigned to a log that already belongs to another (Kafka's
    InconsistentTopicIdException)."""

    error_code = ErrorCode.INCONSISTENT_TOPIC_ID


def topic_id_string(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: base64url of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def parse_topic_id(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``; ValueError unless ``text`` is 22 base64url characters."""
    if len(text) != 22:
        raise ValueError(f"{text!r} is not a 22-character base64url topic id")
    if "+" in text or "/" in text:
        raise ValueError(f"{text!r} is not base64url")
    try:
        raw = base64.b64decode(text.replace("-", "+").replace("_", "/") + "==", validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"{text!r} is not base64url: {e}") from None
    if len(raw) != 16:
        raise ValueError(f"{text!r} does not decode to 16 bytes")
    return uuid.UUID(bytes=raw)


@dataclass(frozen=True)
class PartitionMetadata:
    version: int
    topic_id: uuid.UUID

    def encode(self) -> str:
        return f"version: {self.version}\ntopic_id: {topic_id_string(self.topic_id)}"


def decode(text: str, location: str) -> PartitionMetadata:
    """Parses the file's text as Kafka does; KafkaStorageError naming ``location`` when it cannot."""
    lines = text.splitlines()
    line = lines[0] if lines else ""
    try:
        fields = _SEPARATOR.split(line)
        if len(fields) != 2:
            raise _malformed(location, line)
        version = int(fields[1])
        if version < CURRENT_VERSION:
            raise KafkaStorageError(
                f"Unrecognized version of partition metadata file ({location}): {version}"
            )
        line = lines[1] if len(lines) > 1 else ""
        fields = _SEPARATOR.split(line)
        if len(fields) != 2:
            raise _malformed(location, line)
        topic_id = parse_topic_id(fields[1].strip())
    except ValueError as e:
        raise KafkaStorageError(f"Malformed line in checkpoint file [{location}]: {line} ({e})") from None
    if topic_id == ZERO_UUID:
        raise KafkaStorageError(f"Invalid topic ID in partition metadata file ({location})")
    return PartitionMetadata(version, topic_id)


def _malformed(location: str, line: str) -> KafkaStorageError:
    return KafkaStorageError(f"Malformed line in checkpoint file [{location}]: {line}")


class PartitionMetadataFile:
    """The ``partition.metadata`` file of one partition directory."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, PARTITION_METADATA_FILE)
        self._lock = threading.Lock()

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def read(self) -> uuid.UUID | None:
        """The topic id on disk, None when there is no file; KafkaStorageError when it is unreadable
        or corrupt."""
        with self._lock:
            if not os.path.exists(self.path):  # a new log: no descriptor needed to know it
                return None
            try:
                with open(self.path, "rb") as f:
                    raw = f.read()
            except FileNotFoundError:
                return None
            except OSError as e:
                raise KafkaStorageError(
                    f"Error while reading partition metadata file {self.path}: {e}"
                ) from e
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise KafkaStorageError(
                    f"Error while reading partition metadata file {self.path}: {e}"
                ) from None
            return decode(text, self.path).topic_id

    def write(self, topic_id: uuid.UUID) -> None:
        """Writes the file atomically and durably; KafkaStorageError when the disk refuses."""
        if topic_id == ZERO_UUID:
            raise ValueError("the zero uuid is not a topic id")
        data = PartitionMetadata(CURRENT_VERSION, topic_id).encode().encode()
        with self._lock:
            try:
                write_atomically(self.path, data)
            except OSError as e:
                raise KafkaStorageError(
                    f"Error while writing partition metadata file {self.path}: {e}"
                ) from e

    def __repr__(self) -> str:
        return f"PartitionMetadataFile(path={self.path})"
