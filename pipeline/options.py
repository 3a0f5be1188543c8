"""The ``samsa`` data source's options, parsed once into frozen dataclasses.

The names and meanings are those of Spark's built-in Kafka connector (the Structured Streaming + Kafka
integration guide). Spark hands a Python data source its options with lower-cased keys, so every
lookup here is by the lower-cased name and every message names the option as users spell it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# Kafka's ListOffsets sentinels, also the per-partition values of startingOffsets/endingOffsets JSON.
EARLIEST = -2
LATEST = -1

# Keys the connector decides itself: a user setting them would break the offset contract.
_RESERVED_CLIENT_KEYS = {
    "auto.offset.reset": "use startingOffsets / startingTimestamp instead",
    "enable.auto.commit": "offsets are checkpointed by Spark, never committed to a group",
}

Offsets = dict[str, dict[int, int]]


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: exactly one of ``subscribe``, ``subscribePattern`` and ``assign``."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: Mapping[str, tuple[int, ...]] | None = None

    def select_topics(self, available: Iterable[str]) -> list[str]:
        """The topics of ``available`` this subscription covers (internal topics only when named)."""
        if self.assigned is not None:
            return sorted(t for t in self.assigned if t in set(available))
        if self.pattern is not None:
            regex = re.compile(self.pattern)
            return sorted(t for t in available if regex.fullmatch(t) and not t.startswith("__"))
        present = set(available)
        return [t for t in self.topics if t in present]

    def select_partitions(self, topic: str, partitions: Iterable[int]) -> list[int]:
        if self.assigned is None:
            return sorted(partitions)
        present = set(partitions)
        return sorted(p for p in self.assigned.get(topic, ()) if p in present)


@dataclass(frozen=True)
class OffsetBound:
    """Where a read starts or ends: ``earliest``, ``latest``, a JSON per partition, or a timestamp."""

    kind: str  # "earliest", "latest", "specific" or "timestamp"
    offsets: Offsets = field(default_factory=dict)
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class ReadOptions:
    """Everything a reader needs; picklable, so it travels to the executors with the read closure."""

    client: Mapping[str, str]
    subscription: Subscription
    starting: OffsetBound
    ending: OffsetBound
    timestamp_strategy: str
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int


@dataclass(frozen=True)
class WriteOptions:
    client: Mapping[str, str]
    topic: str | None


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """A plain dict with lower-cased keys: Spark's own map is case-insensitive but ``dict()`` of it
    is lower-case only, so normalising once makes lookups behave the same in every process."""
    return {str(k).lower(): str(v) for k, v in options.items()}


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.``-prefixed options, prefix removed: librdkafka settings passed through."""
    config = {k[len("kafka.") :]: v for k, v in options.items() if k.startswith("kafka.")}
    if "bootstrap.servers" not in config:
        raise ValueError("option 'kafka.bootstrap.servers' must be specified")
    for key, why in _RESERVED_CLIENT_KEYS.items():
        if key in config:
            raise ValueError(f"Kafka option 'kafka.{key}' is not supported: {why}")
    return config


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = options.get(name.lower())
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ValueError(f"option '{name}' must be true or false, not {value!r}")
    return value.strip().lower() == "true"


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    value = options.get(name.lower())
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"option '{name}' must be an integer, not {value!r}") from None
    if number <= 0:
        raise ValueError(f"option '{name}' must be positive, not {number}")
    return number


def _subscription(options: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if options.get(k, "").strip()]
    if len(given) != 1:
        raise ValueError("exactly one of the options 'subscribe', 'subscribePattern' and 'assign' is needed")
    value = options[given[0]].strip()
    if given[0] == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise ValueError("option 'subscribe' names no topic")
        return Subscription(topics=topics)
    if given[0] == "subscribepattern":
        try:
            re.compile(value)
        except re.error as e:
            raise ValueError(f"option 'subscribePattern' is not a valid regular expression: {e}") from None
        return Subscription(pattern=value)
    try:
        parsed = json.loads(value)
        assigned = {str(t): tuple(sorted({int(p) for p in ps})) for t, ps in parsed.items()}
    except (ValueError, TypeError, AttributeError):
        raise ValueError(f"option 'assign' must be JSON like {{\"topicA\":[0,1]}}, not {value!r}") from None
    return Subscription(assigned=assigned)


def _offsets_json(name: str, value: str) -> Offsets:
    try:
        parsed = json.loads(value)
        return {str(t): {int(p): int(o) for p, o in ps.items()} for t, ps in parsed.items()}
    except (ValueError, TypeError, AttributeError):
        raise ValueError(
            f'option \'{name}\' must be earliest, latest or JSON like {{"topicA":{{"0":23,"1":-2}}}}, '
            f"not {value!r}"
        ) from None


def _starting(options: Mapping[str, str], streaming: bool) -> OffsetBound:
    timestamp = options.get("startingtimestamp")
    if timestamp is not None:
        try:
            return OffsetBound("timestamp", timestamp_ms=int(timestamp))
        except ValueError:
            raise ValueError(f"option 'startingTimestamp' must be milliseconds, not {timestamp!r}") from None
    value = options.get("startingoffsets", "latest" if streaming else "earliest").strip()
    if value.lower() in ("earliest", "latest"):
        if value.lower() == "latest" and not streaming:
            raise ValueError("option 'startingOffsets' cannot be latest for a batch query")
        return OffsetBound(value.lower())
    offsets = _offsets_json("startingOffsets", value)
    if not streaming and any(o == LATEST for ps in offsets.values() for o in ps.values()):
        raise ValueError("option 'startingOffsets' cannot use -1 (latest) for a batch query")
    return OffsetBound("specific", offsets)


def _ending(options: Mapping[str, str], streaming: bool) -> OffsetBound:
    value = options.get("endingoffsets")
    if value is None:
        return OffsetBound("latest")
    if streaming:
        raise ValueError("option 'endingOffsets' is for batch queries only")
    value = value.strip()
    if value.lower() == "latest":
        return OffsetBound("latest")
    if value.lower() == "earliest":
        raise ValueError("option 'endingOffsets' cannot be earliest")
    offsets = _offsets_json("endingOffsets", value)
    if any(o == EARLIEST for ps in offsets.values() for o in ps.values()):
        raise ValueError("option 'endingOffsets' cannot use -2 (earliest)")
    return OffsetBound("specific", offsets)


def include_headers(options: Mapping[str, str]) -> bool:
    """Whether the read schema has a ``headers`` column: the schema is asked for before any reader."""
    return _flag(lower_keys(options), "includeHeaders", False)


def parse_read_options(options: Mapping[str, str], streaming: bool) -> ReadOptions:
    """Reads and checks a reader's options; raises ValueError naming the option at fault."""
    options = lower_keys(options)
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        name = "startingOffsetsByTimestampStrategy"
        raise ValueError(f"option '{name}' must be error or latest, not {strategy!r}")
    max_offsets = _positive_int(options, "maxOffsetsPerTrigger")
    if max_offsets is not None and not streaming:
        raise ValueError("option 'maxOffsetsPerTrigger' is for streaming queries only")
    return ReadOptions(
        client=client_config(options),
        subscription=_subscription(options),
        starting=_starting(options, streaming),
        ending=_ending(options, streaming),
        timestamp_strategy=strategy,
        max_offsets_per_trigger=max_offsets,
        min_partitions=_positive_int(options, "minPartitions"),
        fail_on_data_loss=_flag(options, "failOnDataLoss", True),
        include_headers=_flag(options, "includeHeaders", False),
        poll_timeout_ms=_positive_int(options, "kafkaConsumer.pollTimeoutMs") or 120_000,
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    options = lower_keys(options)
    topic = options.get("topic", "").strip() or None
    return WriteOptions(client=client_config(options), topic=topic)
