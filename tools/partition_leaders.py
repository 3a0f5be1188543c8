"""Requests to partition leaders, as Kafka's Admin client sends ListOffsets and DeleteRecords
(``AdminApiDriver`` with ``PartitionLeaderStrategy``): the partitions' leaders are looked up with
Metadata, each leader gets one request for its partitions, and a partition whose leader is unknown or
has moved (``NOT_LEADER_OR_FOLLOWER``, ``LEADER_NOT_AVAILABLE``, ...) or that answers another retriable
error is looked up and sent again after a backoff, until the deadline (Kafka's
``default.api.timeout.ms``, 60 s); then it fails with a ``TimeoutException``. Every other error fails
the partition at once, and so does a topic the cluster does not have or a partition its topic does not
have (Kafka's Admin client waits for those until the deadline, but for ListOffsets' unknown topics). Used
by ``samsa get-offsets`` and ``samsa delete-records``.

While partitions wait, a line on stderr every 5 s says which and why (Kafka's Admin client waits
silently); stdout carries only what Kafka's tools print.

Failures are reported as Kafka's tools print an ``ExecutionException``'s message: the cause's Java class
and message, ``org.apache.kafka.common.errors.NotLeaderOrFollowerException: ...`` (``java_exception``).
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from protocol.api import ApiKey
from protocol.errors import ErrorCode, description, retriable
from protocol.messages import Message
from tools.admin_client import AdminClient, AdminError
from tools.command_config import CommandConfigError

TopicPartition = tuple[str, int]

# Kafka's default.api.timeout.ms: how long the Admin client retries a call.
DEFAULT_API_TIMEOUT_MS = 60_000
RETRY_BACKOFF = 0.1
PROGRESS_INTERVAL = 5.0

# Kafka's exception class names that are not the error's name in camel case + "Exception".
_EXCEPTION_NAMES = {
    ErrorCode.UNKNOWN_SERVER_ERROR: "UnknownServerException",
    ErrorCode.CORRUPT_MESSAGE: "CorruptRecordException",
    ErrorCode.REQUEST_TIMED_OUT: "TimeoutException",
    ErrorCode.NETWORK_EXCEPTION: "NetworkException",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "InvalidTopicException",
    ErrorCode.KAFKA_STORAGE_ERROR: "KafkaStorageException",
}
# PartitionLeaderStrategy: Metadata's partition errors after which the lookup is tried again.
_LOOKUP_RETRIED = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
)


def api_timeout_ms(props: Mapping[str, str]) -> int:
    """``default.api.timeout.ms`` of a --command-config file's settings (Kafka's default: 60 s)."""
    value = props.get("default.api.timeout.ms")
    if value is None:
        return DEFAULT_API_TIMEOUT_MS
    if not re.fullmatch(r"[+-]?[0-9]+", value.strip()) or not 0 <= int(value) < 2**31:
        raise CommandConfigError(
            f"Invalid value {value} for configuration default.api.timeout.ms: Not a number of type INT"
        )
    return int(value)


def exception_class(code: int) -> str:
    """The Java class Kafka's clients raise for an error code (``Errors.exception()``)."""
    try:
        error = ErrorCode(code)
    except ValueError:
        return "org.apache.kafka.common.errors.UnknownServerException"
    name = _EXCEPTION_NAMES.get(error)
    if name is None:
        words = error.name.split("_")
        if error.name.endswith("_AUTHORIZATION_FAILED"):
            words = words[:-1]
        name = "".join(w.capitalize() for w in words) + "Exception"
    return f"org.apache.kafka.common.errors.{name}"


def java_exception(code: int, message: str | None = None) -> str:
    """``Throwable.toString()`` of the exception for ``code``: its class and message (Kafka's default
    message for the code unless the broker sent one)."""
    return f"{exception_class(code)}: {message or description(code)}"


@dataclass(frozen=True)
class Failure:
    """A partition's failure: its error code and message as Kafka's tools print it."""

    code: int
    message: str

    def __str__(self) -> str:
        return f"{exception_class(self.code)}: {self.message}"


@dataclass(frozen=True)
class TimedOut(Failure):
    """A partition still waiting at the deadline (code REQUEST_TIMED_OUT: a TimeoutException)."""


def tp_name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


async def send_to_leaders(
    admin: AdminClient,
    key: ApiKey,
    partitions: Iterable[TopicPartition],
    build: Callable[[list[TopicPartition]], Message],
    results_of: Callable[[Any], Iterable[tuple[TopicPartition, int, Any]]],
    *,
    timeout_ms: int = DEFAULT_API_TIMEOUT_MS,
    call: str,
) -> dict[TopicPartition, Any]:
    """Sends ``build(partitions of one leader)`` to each leader; ``results_of(response)`` gives each
    partition's ``(tp, error code, value)``. Returns the value of each partition that answered without
    error and a ``Failure`` for each that failed. A partition that answers a retriable error (Kafka's
    RetriableException, its InvalidMetadataException among them: a leader that moved) is looked up and
    sent again."""
    pending = set(partitions)
    results: dict[TopicPartition, Any] = {}
    waiting: dict[TopicPartition, str] = {}  # why each pending partition waits
    start = time.monotonic()
    deadline = start + timeout_ms / 1000
    next_progress = start + PROGRESS_INTERVAL
    while pending:
        leaders = await _lookup(admin, pending, results, waiting)
        pending -= results.keys()
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in sorted(pending):
            if tp in leaders:
                by_leader[leaders[tp]].append(tp)

        async def ask(leader: int, tps: list[TopicPartition]) -> None:
            try:
                response = await admin.send_to_node(key, build(tps), leader)
            except AdminError as e:
                for tp in tps:
                    waiting[tp] = f"broker {leader} cannot be reached: {e}"
                return
            asked, answered = set(tps), set()
            for tp, code, value in results_of(response):
                if tp not in asked:
                    continue
                answered.add(tp)
                if code == ErrorCode.NONE:
                    results[tp] = value
                elif retriable(code):
                    waiting[tp] = f"{ErrorCode(code).name} from broker {leader}"
                else:
                    results[tp] = Failure(code, description(code))
            for tp in asked - answered:
                results[tp] = Failure(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"The response from broker {leader} did not contain a result for topic partition "
                    + tp_name(tp),
                )

        await asyncio.gather(*(ask(leader, tps) for leader, tps in by_leader.items()))
        pending -= results.keys()
        if not pending:
            break
        now = time.monotonic()
        if now >= deadline:
            for tp in pending:
                results[tp] = TimedOut(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"Call(callName={call}) timed out after {timeout_ms} ms: {waiting.get(tp, 'no leader')}",
                )
            break
        if now >= next_progress:
            reasons = ", ".join(f"{tp_name(tp)} ({waiting.get(tp, 'no leader')})" for tp in sorted(pending))
            print(
                f"Waiting for {len(pending)} partition(s), {deadline - now:.0f} s left: {reasons}",
                file=sys.stderr,
                flush=True,
            )
            next_progress = now + PROGRESS_INTERVAL
        await asyncio.sleep(RETRY_BACKOFF)
    return results


async def _lookup(
    admin: AdminClient,
    pending: set[TopicPartition],
    results: dict[TopicPartition, Any],
    waiting: dict[TopicPartition, str],
) -> dict[TopicPartition, int]:
    """PartitionLeaderStrategy.handleResponse: the leader of each pending partition that has one; a
    ``Failure`` in ``results`` for those that cannot have one. An unknown topic, or a partition its topic
    does not have, fails at once (Kafka's ListOffsets does so for a topic; its DeleteRecords, and both for
    a partition, wait for it until the deadline)."""
    topics = sorted({t for t, _ in pending})
    try:
        metadata = await admin.metadata(topics)
    except AdminError as e:
        for tp in pending:
            waiting[tp] = f"Metadata failed: {e}"
        return {}
    leaders: dict[TopicPartition, int] = {}
    for topic in metadata.topics:
        mine = sorted(tp for tp in pending if tp[0] == topic.name)
        code = topic.error_code
        if code == ErrorCode.NONE:
            known = {p.partition_index: p for p in topic.partitions}
            for tp in mine:
                p = known.get(tp[1])
                if p is None:
                    results[tp] = Failure(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"Topic {topic.name} has no partition {tp[1]}",
                    )
                elif p.error_code in _LOOKUP_RETRIED:
                    waiting[tp] = ErrorCode(p.error_code).name
                elif p.error_code != ErrorCode.NONE:
                    results[tp] = Failure(
                        p.error_code, f"Unexpected error during metadata lookup for {tp_name(tp)}"
                    )
                elif p.leader_id >= 0:
                    leaders[tp] = p.leader_id
                else:
                    waiting[tp] = "no leader"
            continue
        for tp in mine:
            if code in (ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.BROKER_NOT_AVAILABLE):
                waiting[tp] = ErrorCode(code).name
                continue
            prefix = f"Failed to fetch metadata for partition {tp_name(tp)}"
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                reason = f"because metadata for topic `{topic.name}` could not be found"
            elif code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                reason = "due to topic authorization failure"
            elif code == ErrorCode.INVALID_TOPIC_EXCEPTION:
                reason = f"due to invalid topic `{topic.name}`"
            else:
                reason = f"due to unexpected error for topic `{topic.name}`"
            results[tp] = Failure(code, f"{prefix} {reason}")
    return leaders
