"""The five commands of ``samsa transactions`` and their tables, as kafka-transactions.sh prints them
(ToolsUtils.prettyPrintTable: every cell padded to its column's width and followed by a tab).

Each command takes the ``TransactionsAdmin`` (or anything with its methods: the unit tests pass a fake),
the parsed arguments, a stream to print on and a clock; a failure that ends it is ``CommandError``,
printed alone on stderr with exit code 1.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TextIO, TypeVar

from protocol.errors import ErrorCode
from tools.transactions.admin import (
    AbortSpec,
    ProducerState,
    RequestError,
    TopicPartition,
    TransactionDescription,
    TransactionsAdmin,
    tp_string,
)

T = TypeVar("T")
MAX_BATCH_SIZE = 500  # partitions per DescribeProducers in find-hanging, as Kafka's tool
MINUTE_MS = 60_000

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = (
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
)
PRODUCERS_HEADERS = (
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
)
HANGING_HEADERS = (
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
)


class CommandError(Exception):
    """A failure that ends the command: its message on stderr, exit code 1."""


def failed(message: str, cause: Exception) -> CommandError:
    """Kafka's printErrorAndExit(message, cause): ``<message>: <cause's message>.``"""
    return CommandError(f"{message}: {cause}.")


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of ToolsUtils.prettyPrintTable: each cell left-aligned to the widest of its column
    (header included), each followed by a tab, the last one too."""
    widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]
    return [
        "".join(f"{cell:<{w}}\t" for cell, w in zip(row, widths, strict=True)) for row in [headers, *rows]
    ]


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    for line in format_table(headers, rows):
        print(line, file=out)


Clock = Callable[[], int]  # wall-clock milliseconds


async def list_transactions(
    admin: TransactionsAdmin, args: argparse.Namespace, out: TextIO, now: Clock
) -> None:
    try:
        by_broker = await admin.list_transactions(duration_ms=args.duration_filter)
    except RequestError as e:
        raise failed("Failed to list transactions", e) from None
    rows = [
        [listing.transactional_id, str(broker), str(listing.producer_id), listing.state]
        for broker, listings in sorted(by_broker.items())
        for listing in listings
    ]
    print_table(LIST_HEADERS, rows, out)


async def describe_transaction(
    admin: TransactionsAdmin, args: argparse.Namespace, out: TextIO, now: Clock
) -> None:
    transactional_id = args.transactional_id
    result = (await admin.describe_transactions([transactional_id]))[transactional_id]
    if isinstance(result, RequestError):
        raise failed(f"Failed to describe transaction state of transactional-id `{transactional_id}`", result)
    print_table(DESCRIBE_HEADERS, [describe_row(transactional_id, result, now())], out)


def describe_row(transactional_id: str, d: TransactionDescription, now_ms: int) -> list[str]:
    start = d.transaction_start_time_ms
    return [
        str(d.coordinator_id),
        transactional_id,
        str(d.producer_id),
        str(d.producer_epoch),
        d.state,
        str(d.transaction_timeout_ms),
        "None" if start is None else str(start),
        "None" if start is None else str(now_ms - start),
        ",".join(tp_string(tp) for tp in sorted(d.topic_partitions)),
    ]


async def describe_producers(
    admin: TransactionsAdmin, args: argparse.Namespace, out: TextIO, now: Clock
) -> None:
    tp = (args.topic, args.partition)
    result = (await admin.describe_producers([tp], args.broker_id))[tp]
    if isinstance(result, RequestError):
        where = "leader" if args.broker_id is None else f"broker {args.broker_id}"
        raise failed(f"Failed to describe producers for partition {tp_string(tp)} on {where}", result)
    print_table(PRODUCERS_HEADERS, [producer_row(p) for p in result], out)


def producer_row(p: ProducerState) -> list[str]:
    start = p.current_transaction_start_offset
    return [
        str(p.producer_id),
        str(p.producer_epoch),
        str(-1 if p.coordinator_epoch is None else p.coordinator_epoch),
        str(p.last_sequence),
        str(p.last_timestamp),
        "None" if start is None else str(start),
    ]


async def abort_transaction(
    admin: TransactionsAdmin, args: argparse.Namespace, out: TextIO, now: Clock
) -> None:
    tp = (args.topic, args.partition)
    if args.start_offset is None:
        # A producer whose transaction hung before any marker was written for it has coordinator epoch
        # -1 in DescribeProducers; 0 is at most any coordinator epoch, so the leader takes it.
        spec = AbortSpec(tp, args.producer_id, args.producer_epoch, max(args.coordinator_epoch, 0))
    else:
        spec = await abort_spec_at(admin, tp, args.start_offset)
    try:
        await admin.abort_transaction(spec)
    except RequestError as e:
        raise failed(f"Failed to abort transaction {spec}", e) from None


async def abort_spec_at(admin: TransactionsAdmin, tp: TopicPartition, start_offset: int) -> AbortSpec:
    """The producer whose open transaction on ``tp`` starts at ``start_offset``, from the leader's
    DescribeProducers."""
    result = (await admin.describe_producers([tp]))[tp]
    if isinstance(result, RequestError):
        raise failed(f"Failed to validate producer state for partition {tp_string(tp)}", result)
    for p in result:
        if p.current_transaction_start_offset == start_offset:
            return AbortSpec(tp, p.producer_id, p.producer_epoch, p.coordinator_epoch or 0)
    raise CommandError(
        f"Could not find any open transactions starting at offset {start_offset} on partition {tp_string(tp)}"
    )


@dataclass(frozen=True)
class OpenTransaction:
    topic_partition: TopicPartition
    producer: ProducerState


async def find_hanging(admin: TransactionsAdmin, args: argparse.Namespace, out: TextIO, now: Clock) -> None:
    """Kafka's algorithm: the partitions in scope; their producers whose open transaction has seen no
    write for longer than the maximum transaction timeout; of those, the ones whose producer id no
    coordinator lists, whose transactional id it cannot describe, or whose transaction (as the
    coordinator describes it) does not include the partition: no marker will ever come for them."""
    max_timeout_ms = args.max_transaction_timeout * MINUTE_MS
    partitions = await partitions_to_search(admin, args.topic, args.partition, args.broker_id)
    candidates = await candidate_open_transactions(admin, args.broker_id, max_timeout_ms, partitions, now)
    hanging: list[OpenTransaction] = []
    if candidates:
        by_producer: dict[int, list[OpenTransaction]] = defaultdict(list)
        for candidate in candidates:
            by_producer[candidate.producer.producer_id].append(candidate)
        transactional_ids = await lookup_transactional_ids(admin, set(by_producer))
        descriptions = await describe_all(admin, set(transactional_ids.values()))
        hanging = filter_hanging(by_producer, transactional_ids, descriptions)
    now_ms = now()
    rows = [
        [
            t.topic_partition[0],
            str(t.topic_partition[1]),
            str(t.producer.producer_id),
            str(t.producer.producer_epoch),
            str(-1 if t.producer.coordinator_epoch is None else t.producer.coordinator_epoch),
            str(
                -1
                if t.producer.current_transaction_start_offset is None
                else t.producer.current_transaction_start_offset
            ),
            str(t.producer.last_timestamp),
            str((now_ms - t.producer.last_timestamp) // MINUTE_MS),
        ]
        for t in hanging
    ]
    print_table(HANGING_HEADERS, rows, out)


async def partitions_to_search(
    admin: TransactionsAdmin, topic: str | None, partition: int | None, broker_id: int | None
) -> list[TopicPartition]:
    if topic is not None and partition is not None:
        return [(topic, partition)]
    if topic is not None:
        topics = [topic]
    else:
        try:
            topics = await admin.list_topics()
        except RequestError as e:
            raise failed("Failed to list topics", e) from None
    found: list[TopicPartition] = []
    for batch in _batches(topics, MAX_BATCH_SIZE):
        try:
            described = await admin.describe_topics(batch)
        except RequestError as e:
            raise failed(f"Failed to describe {len(batch)} topics", e) from None
        for name, partitions in sorted(described.items()):
            found += [
                (name, p) for p, _, replicas in partitions if broker_id is None or broker_id in replicas
            ]
    return found


async def candidate_open_transactions(
    admin: TransactionsAdmin,
    broker_id: int | None,
    max_timeout_ms: int,
    partitions: list[TopicPartition],
    now: Clock,
) -> list[OpenTransaction]:
    """The producers with an open transaction on these partitions whose last write is older than the
    maximum transaction timeout (any coordinator would have timed it out by now)."""
    candidates = []
    for batch in _batches(partitions, MAX_BATCH_SIZE):
        results = await admin.describe_producers(batch, broker_id)
        now_ms = now()
        for tp in batch:
            result = results[tp]
            if isinstance(result, RequestError):
                where = "their leaders" if broker_id is None else f"broker {broker_id}"
                raise failed(f"Failed to describe producers for {len(batch)} partitions on {where}", result)
            for producer in result:
                if (
                    producer.current_transaction_start_offset is not None
                    and now_ms - producer.last_timestamp > max_timeout_ms
                ):
                    candidates.append(OpenTransaction(tp, producer))
    return candidates


async def lookup_transactional_ids(admin: TransactionsAdmin, producer_ids: set[int]) -> dict[int, str]:
    """Producer id -> the transactional id a coordinator lists it under."""
    try:
        by_broker = await admin.list_transactions(producer_ids=producer_ids)
    except RequestError as e:
        raise failed(f"Failed to list transactions for {len(producer_ids)} producers", e) from None
    return {
        listing.producer_id: listing.transactional_id
        for listings in by_broker.values()
        for listing in listings
        if listing.producer_id in producer_ids  # a coordinator that ignored the filter
    }


async def describe_all(
    admin: TransactionsAdmin, transactional_ids: set[str]
) -> dict[str, TransactionDescription | None]:
    """Each id's description; None for an id the coordinator no longer knows."""
    results = await admin.describe_transactions(transactional_ids)
    descriptions: dict[str, TransactionDescription | None] = {}
    for transactional_id, result in results.items():
        if isinstance(result, RequestError):
            if result.code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                raise failed(f"Failed to describe {len(transactional_ids)} transactions", result)
            descriptions[transactional_id] = None
        else:
            descriptions[transactional_id] = result
    return descriptions


def filter_hanging(
    by_producer: dict[int, list[OpenTransaction]],
    transactional_ids: dict[int, str],
    descriptions: dict[str, TransactionDescription | None],
) -> list[OpenTransaction]:
    """The open transactions no marker will close. A coordinator describes an ongoing transaction with
    all its partitions, and one that is completing with the partitions still waiting for their marker:
    a partition it names will get its marker; one it does not name will not."""
    hanging = []
    for producer_id, open_transactions in by_producer.items():
        transactional_id = transactional_ids.get(producer_id)
        description = None if transactional_id is None else descriptions.get(transactional_id)
        if description is None:
            hanging += open_transactions
        else:
            hanging += [t for t in open_transactions if t.topic_partition not in description.topic_partitions]
    return hanging


def _batches(items: Sequence[T], size: int) -> list[Sequence[T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


Command = Callable[[TransactionsAdmin, argparse.Namespace, TextIO, Clock], Awaitable[None]]

COMMANDS: dict[str, Command] = {
    "list": list_transactions,
    "describe": describe_transaction,
    "describe-producers": describe_producers,
    "abort": abort_transaction,
    "find-hanging": find_hanging,
}
