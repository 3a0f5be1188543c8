"""Kafka's rules for topic names (``org.apache.kafka.common.internals.Topic``) and its internal topics."""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC})

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_error(name: str | None) -> str | None:
    """Why ``name`` is not a legal topic name, or None if it is."""
    if not name:
        return "the topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is {len(name)} characters long, over the limit of {MAX_NAME_LENGTH}"
    if not _LEGAL.match(name):
        return f"topic name {name!r} is illegal: use only ASCII alphanumerics, '.', '_' and '-'"
    return None


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS
