"""Kafka's JSON message schemas, loaded into a small model the codec generator walks.

The schema files are data: Kafka 4.x's own under ``schemas/kafka`` and, under ``schemas/legacy``, the
ZooKeeper-era inter-broker APIs Kafka 4 removed. Everything the encoding depends on (field versions,
nullable and tagged versions, per-field flexible versions, defaults) comes from them.

Kafka 4 dropped the oldest versions of several APIs (KIP-896) by raising their ``validVersions`` but kept
the fields those versions use (``"versions": "0"``, ``"0-3"``, ...), so the files still describe them byte
for byte. ``KAFKA39_FLOORS`` lowers those APIs' valid versions back to Kafka 3.9's, which is all a Kafka
3.9-era client needs from the codec (``tests/protocol/test_kafka39_versions.py`` checks every one of those
versions against Kafka 3.9's own classes and kafka-python's).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

SCHEMA_DIRS = (Path(__file__).parent / "schemas" / "kafka", Path(__file__).parent / "schemas" / "legacy")

PRIMITIVES = frozenset(
    {
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "uint32",
        "float64",
        "bool",
        "uuid",
        "string",
        "bytes",
        "records",
    }
)

# Kafka 3.9's lowest version of each API whose Kafka 4 schema starts higher (KIP-896 removed them in Kafka
# 4.0). Applied to the API's request and response alike; nothing else about the schema changes.
KAFKA39_FLOORS: dict[str, int] = {
    "Produce": 0,  # 0-2: magic 0/1 message sets in the records field
    "Fetch": 0,  # 0-3: answered with magic 0 (v0-1) or magic 1 (v2-3) message sets
    "ListOffsets": 0,  # 0: MaxNumOffsets and the OldStyleOffsets array
    "OffsetCommit": 0,  # 0-1: no retention; v1 has a per-partition commit timestamp
    "OffsetFetch": 0,
    "CreateTopics": 0,  # 0-1
    "DeleteTopics": 0,
    "OffsetForLeaderEpoch": 0,  # 0-1
    "WriteTxnMarkers": 0,
    "DescribeAcls": 0,
    "CreateAcls": 0,
    "DeleteAcls": 0,
    "DescribeConfigs": 0,
    "AlterReplicaLogDirs": 0,
    "DescribeLogDirs": 0,
}

_NO_VERSION = 1 << 15  # above any int16 api version: the open end of "N+"


@dataclass(frozen=True)
class Versions:
    """An inclusive range of versions as Kafka writes it: "3+", "1-4", "2" or "none"."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text.strip() == "none":
            return NONE
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), _NO_VERSION)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high

    @property
    def empty(self) -> bool:
        return self.low > self.high

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.high == _NO_VERSION:
            return f"{self.low}+"
        return f"{self.low}-{self.high}" if self.low != self.high else str(self.low)


NONE = Versions(0, -1)


def snake_case(name: str) -> str:
    """Kafka's CamelCase field names as Python attribute names: ThrottleTimeMs -> throttle_time_ms."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


@dataclass
class FieldSpec:
    """One field of a struct. ``type`` is the schema's type; arrays are "[]T"."""

    name: str
    type: str
    versions: Versions
    nullable_versions: Versions = NONE
    tagged_versions: Versions = NONE
    tag: int | None = None
    flexible_versions: Versions | None = None  # a per-field override of the message's flexible versions
    default: str | None = None
    ignorable: bool = False
    fields: list[FieldSpec] | None = None  # for struct and struct-array types defined inline
    about: str = ""

    @property
    def attr(self) -> str:
        return snake_case(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in PRIMITIVES


@dataclass
class MessageSpec:
    """A message (request, response, header or data) and the structs it defines."""

    name: str
    type: str
    api_key: int | None
    valid_versions: Versions
    flexible_versions: Versions
    fields: list[FieldSpec]
    structs: dict[str, list[FieldSpec]] = field(default_factory=dict)  # every named struct, inline or common
    listeners: tuple[str, ...] = ()


def _strip_comments(text: str) -> str:
    # Kafka's schema files carry // comments, which JSON does not allow. Strings never contain "//" at the
    # start of a line, and a trailing comment after a value does not occur in the files.
    return re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE)


def _default_text(value: object) -> str | None:
    # A few schema files write defaults as JSON numbers or booleans rather than strings.
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse_field(raw: dict, structs: dict[str, list[FieldSpec]]) -> FieldSpec:
    tag = raw.get("tag")
    spec = FieldSpec(
        name=raw["name"],
        type=raw["type"],
        versions=Versions.parse(raw.get("versions")),
        nullable_versions=Versions.parse(raw.get("nullableVersions")),
        tagged_versions=Versions.parse(raw.get("taggedVersions")),
        tag=int(tag) if tag is not None else None,
        flexible_versions=Versions.parse(raw["flexibleVersions"]) if "flexibleVersions" in raw else None,
        default=_default_text(raw.get("default")),
        ignorable=bool(raw.get("ignorable", False)),
        about=raw.get("about", ""),
    )
    if "fields" in raw:
        spec.fields = [_parse_field(f, structs) for f in raw["fields"]]
        structs[spec.element_type] = spec.fields
    return spec


def parse_message(text: str) -> MessageSpec:
    raw = json.loads(_strip_comments(text))
    structs: dict[str, list[FieldSpec]] = {}
    for common in raw.get("commonStructs", []):
        structs[common["name"]] = [_parse_field(f, structs) for f in common["fields"]]
    fields = [_parse_field(f, structs) for f in raw["fields"]]
    return MessageSpec(
        name=raw["name"],
        type=raw["type"],
        api_key=raw.get("apiKey"),
        valid_versions=Versions.parse(raw["validVersions"]),
        flexible_versions=Versions.parse(raw.get("flexibleVersions")),
        fields=fields,
        structs=structs,
        listeners=tuple(raw.get("listeners", ())),
    )


@cache
def schema_paths() -> dict[str, Path]:
    """Message name -> its schema file. A legacy file never shadows a Kafka 4 one."""
    paths: dict[str, Path] = {}
    for directory in SCHEMA_DIRS:
        for path in sorted(directory.glob("*.json")):
            paths.setdefault(path.stem, path)
    return paths


def kafka39_floor(spec: MessageSpec) -> int | None:
    """Kafka 3.9's lowest version of this request or response when it is below the schema's own."""
    if spec.type not in ("request", "response"):
        return None
    floor = KAFKA39_FLOORS.get(spec.name.removesuffix(spec.type.capitalize()))
    return floor if floor is not None and floor < spec.valid_versions.low else None


@cache
def load_message(name: str) -> MessageSpec:
    """The schema of one message, with the versions Kafka 3.9 serves below Kafka 4's (``KAFKA39_FLOORS``)."""
    try:
        path = schema_paths()[name]
    except KeyError:
        raise KeyError(f"no message schema named {name!r}") from None
    spec = parse_message(path.read_text(encoding="utf-8"))
    floor = kafka39_floor(spec)
    if floor is not None:
        spec.valid_versions = Versions(floor, spec.valid_versions.high)
    return spec
