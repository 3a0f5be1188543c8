"""The client quota half of ``samsa configs`` (Kafka 3.9's ConfigCommand with ``--bootstrap-server``):
the DescribeClientQuotas filter and AlterClientQuotas entry it sends for ``--entity-type users|clients``
(``--user``/``--client``/``--user-defaults``/``--client-defaults``), and its output lines.

Describe sends a strict filter (``ClientQuotaFilter.containsOnly``) with one component per entity type
given: a name matches exactly, ``--entity-default`` the default, no name any name (the default
included). Each entity found prints as ConfigCommand prints it:
``Quota configs for user-principal 'alice', client-id 'c1' are producer_byte_rate=1048576.0`` (``the
default user-principal`` for the default; values as Java prints a double), in the order Kafka's tool
prints them: it iterates the Java ``HashMap``s the admin client builds, which this module reproduces
(``java_hash_map_order``) so that the lines come out in the same order.

Alter reads the entity's quotas first (a ``--delete-config`` of a quota not set is ``Invalid
config(s)``), then sends one AlterClientQuotas entry: ``--add-config`` values as doubles (``Cannot parse
quota configuration value for k: v``), ``--delete-config`` keys as removals.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from protocol.messages import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from tools.usage import CommandLineError
from zk.client_quotas import java_double

USER, CLIENT_ID = "user", "client-id"  # ClientQuotaEntity's types
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
_ENTITY_TYPES = {"users": USER, "clients": CLIENT_ID}
_TYPE_WORDS = {USER: "user-principal", CLIENT_ID: "client-id", "ip": "ip"}

T = TypeVar("T")


# -- Java's HashMap iteration order -----------------------------------------------------------------


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def java_string_hash(text: str | None) -> int:
    """``String.hashCode`` (over UTF-16 code units); 0 for null (``Objects.hashCode``)."""
    if text is None:
        return 0
    h = 0
    data = text.encode("utf-16-le")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "little")) & 0xFFFFFFFF
    return _int32(h)


def java_map_hash(entries: dict[str, str | None]) -> int:
    """``AbstractMap.hashCode``: the sum of ``key.hashCode() ^ value.hashCode()``."""
    return _int32(sum(java_string_hash(k) ^ java_string_hash(v) for k, v in entries.items()))


def _table_size_for(capacity: int) -> int:
    n = 1
    while n < capacity:
        n <<= 1
    return n


def java_hash_map_order(items: Sequence[T], hash_of: Callable[[T], int], initial_capacity: int) -> list[T]:
    """The order a ``new HashMap<>(initial_capacity)`` filled with ``items`` (distinct keys, in this
    order) iterates them: by bucket (``(h ^ h >>> 16) & (table size - 1)`` of the final table), then in
    insertion order (resizes keep it). Maps this small never treeify."""
    capacity, threshold = 0, _table_size_for(max(initial_capacity, 1))
    for size in range(1, len(items) + 1):
        if capacity == 0:  # the first put allocates the table at the threshold's size
            capacity = threshold
            threshold = int(capacity * 0.75)
        if size > threshold:
            capacity *= 2
            threshold = threshold * 2 if capacity >= 32 else int(capacity * 0.75)

    def bucket(item: T) -> int:
        h = hash_of(item) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return [item for _, _, item in sorted((bucket(x), i, x) for i, x in enumerate(items))] if items else []


# -- describe -------------------------------------------------------------------------------------


def describe_request(types: Sequence[str], names: Sequence[str]) -> DescribeClientQuotasRequest:
    """ConfigCommand.getAllClientQuotasConfigs' filter: ``containsOnly`` one component per type."""
    if len(names) > len(types):
        raise CommandLineError("More entity names specified than entity types")
    components = []
    for i, kind in enumerate(types):
        entity_type = _ENTITY_TYPES.get(kind)
        if entity_type is None:
            raise CommandLineError(f"Unexpected entity type {kind}")
        if i >= len(names):
            match_type, match = MATCH_SPECIFIED, None
        elif names[i] == "":
            match_type, match = MATCH_DEFAULT, None
        else:
            match_type, match = MATCH_EXACT, names[i]
        components.append(
            DescribeClientQuotasRequest.ComponentData(
                entity_type=entity_type, match_type=match_type, match=match
            )
        )
    return DescribeClientQuotasRequest(components=components, strict=True)


Entity = dict[str, str | None]


def described_entities(response: DescribeClientQuotasResponse) -> list[tuple[Entity, dict[str, float]]]:
    """The entities and their quotas as DescribeClientQuotasResponse.complete maps them, in the order
    Kafka's tool iterates those maps."""
    found: list[tuple[Entity, dict[str, float]]] = []
    seen: dict[tuple[tuple[str, str | None], ...], int] = {}
    for entry in response.entries or []:
        entity: Entity = {}
        for e in java_hash_map_order(
            list(entry.entity), lambda e: java_string_hash(e.entity_type), len(entry.entity)
        ):
            entity[e.entity_type] = e.entity_name
        values = {
            v.key: v.value
            for v in java_hash_map_order(
                list(entry.values), lambda v: java_string_hash(v.key), len(entry.values)
            )
        }
        key = tuple(sorted(entity.items(), key=lambda kv: kv[0]))
        if key in seen:  # HashMap.put of an equal entity: the value replaced, the position kept
            found[seen[key]] = (found[seen[key]][0], values)
        else:
            seen[key] = len(found)
            found.append((entity, values))
    size = len(response.entries or [])
    return java_hash_map_order(found, lambda item: java_map_hash(item[0]), size)


def quota_line(entity: Entity, values: dict[str, float]) -> str:
    """ConfigCommand.describeQuotaConfigs' line for one entity."""
    parts = []
    for entity_type in (USER, CLIENT_ID, "ip"):
        if entity_type in entity:
            name = entity[entity_type]
            word = _TYPE_WORDS[entity_type]
            parts.append(f"{word} '{name}'" if name is not None else f"the default {word}")
    text = ", ".join(f"{k}={java_double(v)}" for k, v in values.items())
    return f"Quota configs for {', '.join(parts)} are {text}"


_JAVA_DOUBLE = re.compile(r"([+-]?)(NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?")


def java_parse_double(text: str) -> float | None:
    """``Double.parseDouble`` (decimal forms; leading and trailing blanks ignored), None if Java would
    throw NumberFormatException."""
    match = _JAVA_DOUBLE.fullmatch(text.strip(" \t\n\r\x0b\x0c"))
    if match is None:
        return None
    sign, body = match.groups()
    number = math.nan if body == "NaN" else math.inf if body == "Infinity" else float(body)
    return -number if sign == "-" else number


# -- alter ----------------------------------------------------------------------------------------


def alter_request(
    types: Sequence[str],
    names: Sequence[str],
    old: dict[str, float],
    to_add: dict[str, str],
    to_delete: list[str],
) -> AlterClientQuotasRequest:
    """ConfigCommand.alterQuotaConfigs' one entry (``old``: the entity's quotas now)."""
    invalid = [k for k in to_delete if k not in old]
    if invalid:
        raise CommandLineError(f"Invalid config(s): {','.join(invalid)}")
    entity: Entity = {}
    for kind, name in zip(types, names, strict=False):
        entity[_ENTITY_TYPES[kind]] = name or None
    ops = []
    for key, value in to_add.items():
        number = java_parse_double(value)
        if number is None:
            raise CommandLineError(f"Cannot parse quota configuration value for {key}: {value}")
        ops.append(AlterClientQuotasRequest.OpData(key=key, value=number, remove=False))
    ops += [AlterClientQuotasRequest.OpData(key=key, value=0.0, remove=True) for key in to_delete]
    return AlterClientQuotasRequest(
        entries=[
            AlterClientQuotasRequest.EntryData(
                entity=[
                    AlterClientQuotasRequest.EntityData(entity_type=t, entity_name=n)
                    for t, n in entity.items()
                ],
                ops=ops,
            )
        ],
        validate_only=False,
    )
