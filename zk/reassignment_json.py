"""Kafka's partition reassignment JSON, shared by the controller (``/admin/reassign_partitions``) and
``samsa reassign-partitions`` (its --reassignment-json-file and the assignments it prints).

The format, version 1 (Kafka's ReassignPartitionsCommand and ReassignPartitionsZNode)::

    {"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}

``log_dirs`` is optional (one entry per replica; "any" for no preference). Kafka writes the znode
without it; the tool prints it. Parsing keeps duplicates and order, so that callers can report them
with Kafka's messages.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

VERSION = 1
# A (topic, partition) key: a plain tuple or a NamedTuple of one (a Mapping's key type is invariant).
_Partition = TypeVar("_Partition", bound=tuple[str, int])
_Scalar = TypeVar("_Scalar", int, str)
ANY_LOG_DIR = "any"


class ReassignmentJsonError(ValueError):
    """The JSON is not a partition reassignment Kafka would accept; the message says why."""


@dataclass(frozen=True)
class PartitionMove:
    topic: str
    partition: int
    replicas: list[int]
    log_dirs: list[str]


def _field(item: Mapping, name: str, kind: type[_Scalar]) -> _Scalar:
    value = item.get(name)
    if value is None:
        raise ReassignmentJsonError(f"No such field exists: `{name}`")
    if not isinstance(value, kind) or isinstance(value, bool):
        expected = "an integer" if kind is int else "a string"
        raise ReassignmentJsonError(f"Expected `{name}` to be {expected}, found {json.dumps(value)}")
    return value


def _list_of(item: Mapping, name: str, kind: type) -> list:
    value = item.get(name)
    if not isinstance(value, list) or not all(isinstance(v, kind) and not isinstance(v, bool) for v in value):
        raise ReassignmentJsonError(f"Expected `{name}` to be a list of {kind.__name__}s, found {value!r}")
    return value


def parse_reassignment(text: str | bytes) -> list[PartitionMove]:
    """The partitions of a reassignment JSON, in file order, duplicates kept."""
    try:
        body = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise ReassignmentJsonError(f"The input string is not a valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise ReassignmentJsonError("The input string is not a JSON object")
    version = body.get("version", VERSION)
    if version != VERSION:
        raise ReassignmentJsonError(f"Not supported version field value {version}")
    items = body.get("partitions") or []
    if not isinstance(items, list):
        raise ReassignmentJsonError("Expected `partitions` to be a list")
    moves = []
    for item in items:
        if not isinstance(item, dict):
            raise ReassignmentJsonError(f"Expected a partition object, found {json.dumps(item)}")
        topic = _field(item, "topic", str)
        partition = _field(item, "partition", int)
        replicas = _list_of(item, "replicas", int)
        log_dirs = _list_of(item, "log_dirs", str) if "log_dirs" in item else [ANY_LOG_DIR] * len(replicas)
        if len(log_dirs) != len(replicas):
            raise ReassignmentJsonError(
                f"Size of replicas list {_java_list(replicas)} is different from size of log dirs list "
                f"{_java_list(log_dirs)} for partition {topic}-{partition}"
            )
        moves.append(PartitionMove(topic, partition, replicas, log_dirs))
    return moves


def format_reassignment(assignment: Mapping[_Partition, Sequence[int]]) -> str:
    """Kafka's formatAsReassignmentJson: compact, partitions sorted by topic then partition, every
    log dir "any"."""
    return json.dumps(
        {
            "version": VERSION,
            "partitions": [
                {
                    "topic": topic,
                    "partition": partition,
                    "replicas": list(replicas),
                    "log_dirs": [ANY_LOG_DIR] * len(replicas),
                }
                for (topic, partition), replicas in sorted(assignment.items())
            ],
        },
        separators=(",", ":"),
    )


def encode_znode(assignment: Mapping[_Partition, Sequence[int]]) -> bytes:
    """``/admin/reassign_partitions`` as Kafka's ReassignPartitionsZNode writes it (no log dirs)."""
    return json.dumps(
        {
            "version": VERSION,
            "partitions": [
                {"topic": topic, "partition": partition, "replicas": list(replicas)}
                for (topic, partition), replicas in sorted(assignment.items())
            ],
        },
        separators=(",", ":"),
    ).encode()


def _java_list(values: Sequence[object]) -> str:
    """A list as Java's List.toString prints it: [1, 2, 3]."""
    return "[" + ", ".join(str(v) for v in values) + "]"
