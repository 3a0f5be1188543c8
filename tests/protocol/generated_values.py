"""Random, schema-valid instances of generated message classes, for codec round-trip tests."""

from __future__ import annotations

import random
import uuid
from typing import Any

from protocol.codegen import default_value
from protocol.messages import Message
from protocol.schema import FieldSpec

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}
# kio maps these to enums or durations; keep them in ranges those types accept.
ERROR_CODES = [0, 1, 3, 5, 6, 7, 35, 42]
_ALPHABET = "abcdefghijklmnopqrstuvwxyz-._0123456789éü"


def _scalar(f: FieldSpec, t: str, rng: random.Random, version: int) -> Any:
    if f.attr == "error_code" or f.attr.endswith("_error_code"):
        return rng.choice(ERROR_CODES)
    if t in _INT_RANGES:
        if f.attr.endswith("_ms") or "timeout" in f.attr:
            return rng.randint(0, 100_000)
        low, high = _INT_RANGES[t]
        return rng.choice([low, high, 0, -1, rng.randint(low, high)]) if low < 0 else rng.randint(low, high)
    if t == "bool":
        return rng.random() < 0.5
    if t == "float64":
        return rng.uniform(-1e9, 1e9)
    if t == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if t == "string":
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 12)))
    if t in ("bytes", "records"):
        return rng.randbytes(rng.randint(0, 40))
    raise AssertionError(t)


def random_value(f: FieldSpec, classes: dict[str, type], rng: random.Random, version: int, depth: int) -> Any:
    if version in f.nullable_versions and rng.random() < 0.2:
        return None
    if f.is_array:
        n = rng.randint(0, 3 if depth < 3 else 1)
        if f.is_struct:
            return [
                random_struct(classes[f.element_type], classes, rng, version, depth + 1) for _ in range(n)
            ]
        return [_scalar(f, f.element_type, rng, version) for _ in range(n)]
    if f.is_struct:
        return random_struct(classes[f.type], classes, rng, version, depth + 1)
    return _scalar(f, f.type, rng, version)


def random_struct(
    cls: type, classes: dict[str, type], rng: random.Random, version: int, depth: int = 0
) -> Any:
    """Fields present in ``version`` get random values; the others keep their defaults (so that a
    decode of the encoding equals the original)."""
    obj = cls()
    for f in cls._specs:
        present = version in f.versions or version in f.tagged_versions
        if present and not (f.tagged_versions.low <= version and rng.random() < 0.5):
            value = random_value(f, classes, rng, version, depth)
            if f.tag is not None and f.is_struct and not f.is_array and value == classes[f.type]():
                value = None  # a tagged struct equal to its default is not written: it decodes as absent
            setattr(obj, f.attr, value)
        else:
            setattr(obj, f.attr, default_value(f, classes))
    return obj


def random_message(cls: type[Message], version: int, seed: int) -> Message:
    return random_struct(cls, cls._classes, random.Random(seed), version)
