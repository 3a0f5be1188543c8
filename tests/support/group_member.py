"""One consumer-group member of a real Python client, run as a subprocess by the consumer-group tests.

Usage: python group_member.py CLIENT BOOTSTRAP TOPIC GROUP INSTANCE_ID SESSION_MS [STRATEGY]
with CLIENT one of aiokafka, kafka-python, confluent-kafka, INSTANCE_ID "-" for a dynamic member, and
STRATEGY a librdkafka partition.assignment.strategy (confluent-kafka only; its default otherwise).

The member subscribes to TOPIC and polls. It prints one JSON object per line on stdout:
  {"event": "assigned", "partitions": [...]}   its whole assignment, after every assignment it gets
                                               (cooperative protocols hand out increments)
  {"event": "revoked", "partitions": [...]}    partitions taken away
  {"event": "first", "partition": P, "offset": O}   the first record it reads of a partition
  {"event": "committed", "error": null | "..."}   after a commit command
and takes commands on stdin, one a line:
  commit P:O,P:O,...   commits these offsets synchronously (generation and member id of its group)
  close                leaves the group (for a static member: closes without leaving) and exits
"""

from __future__ import annotations

import asyncio
import json
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

POLL_SECONDS = 0.1
HEARTBEAT_MS = 500
MAX_POLL_INTERVAL_MS = 30_000  # the rebalance timeout: a member that does not rejoin in time is dropped


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def commands() -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            lines.put(line.strip())
        lines.put(CLOSE)  # the test went away

    threading.Thread(target=read, daemon=True).start()
    return lines


def parse_offsets(text: str) -> dict[int, int]:
    return {int(p): int(o) for p, o in (item.split(":") for item in text.split(","))}


CLOSE = "close"


def pending_command(lines: queue.Queue[str]) -> str | dict[int, int] | None:
    """The test's next command if one came: CLOSE, or the offsets (partition -> offset) to commit."""
    try:
        line = lines.get_nowait()
    except queue.Empty:
        return None
    return CLOSE if line == CLOSE else parse_offsets(line.split()[1])


class Member:
    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.seen: set[int] = set()
        # Eager protocols revoke everything before assigning the new whole; cooperative ones revoke
        # and assign only what changes: either way the assignment is what was assigned, less revoked.
        self.current: set[int] = set()

    def on_assigned(self, partitions: list[int]) -> None:
        self.seen -= set(partitions)
        self.current |= set(partitions)
        emit("assigned", partitions=sorted(self.current))

    def on_revoked(self, partitions: list[int]) -> None:
        self.current -= set(partitions)
        emit("revoked", partitions=sorted(partitions))

    def on_record(self, partition: int, offset: int) -> None:
        if partition not in self.seen:
            self.seen.add(partition)
            emit("first", partition=partition, offset=offset)


def _settings(bootstrap: str, group: str, instance: str | None, session_ms: int) -> dict[str, Any]:
    """The consumer settings kafka-python and aiokafka share (their names are the same)."""
    return {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "group_instance_id": instance,
        "session_timeout_ms": session_ms,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        "max_poll_interval_ms": MAX_POLL_INTERVAL_MS,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
    }


def _listener(base: type, member: Member) -> Any:
    """A rebalance listener of kafka-python's or aiokafka's kind (``base``) reporting to ``member``."""

    class Listener(base):  # type: ignore[misc, valid-type]
        def on_partitions_revoked(self, revoked: Any) -> None:
            member.on_revoked([tp.partition for tp in revoked])

        def on_partitions_assigned(self, assigned: Any) -> None:
            member.on_assigned([tp.partition for tp in assigned])

    return Listener()


def run_kafka_python(bootstrap: str, topic: str, group: str, instance: str | None, session_ms: int) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    member = Member(topic)
    listener = _listener(ConsumerRebalanceListener, member)

    consumer = KafkaConsumer(**_settings(bootstrap, group, instance, session_ms))
    consumer.subscribe([topic], listener=listener)
    lines = commands()
    while True:
        for tp, records in consumer.poll(timeout_ms=int(POLL_SECONDS * 1000)).items():
            member.on_record(tp.partition, records[0].offset)
        command = pending_command(lines)
        if command is None:
            continue
        if command == CLOSE:
            consumer.close()
            return
        try:
            consumer.commit(
                {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in command.items()}
            )
            emit("committed", error=None)
        except Exception as e:
            emit("committed", error=f"{type(e).__name__}: {e}")


def run_confluent_kafka(
    bootstrap: str, topic: str, group: str, instance: str | None, session_ms: int, strategy: str | None = None
) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    member = Member(topic)
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "session.timeout.ms": session_ms,
        "heartbeat.interval.ms": HEARTBEAT_MS,
        "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if instance is not None:
        config["group.instance.id"] = instance
    if strategy is not None:
        config["partition.assignment.strategy"] = strategy
    consumer = Consumer(config)
    consumer.subscribe(
        [topic],
        on_assign=lambda _, partitions: member.on_assigned([tp.partition for tp in partitions]),
        on_revoke=lambda _, partitions: member.on_revoked([tp.partition for tp in partitions]),
    )
    lines = commands()
    while True:
        message = consumer.poll(POLL_SECONDS)
        if message is not None and message.error() is None:
            member.on_record(message.partition(), message.offset())
        command = pending_command(lines)
        if command is None:
            continue
        if command == CLOSE:
            consumer.close()
            return
        try:
            offsets = [TopicPartition(topic, p, o) for p, o in command.items()]
            failed = [tp for tp in consumer.commit(offsets=offsets, asynchronous=False) if tp.error]
            emit("committed", error=str(failed[0].error) if failed else None)
        except KafkaException as e:
            emit("committed", error=str(e))


async def run_aiokafka(bootstrap: str, topic: str, group: str, instance: str | None, session_ms: int) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

    member = Member(topic)
    listener = _listener(ConsumerRebalanceListener, member)

    consumer = AIOKafkaConsumer(**_settings(bootstrap, group, instance, session_ms))
    await consumer.start()
    consumer.subscribe([topic], listener=listener)
    lines = commands()
    while True:
        batches = await consumer.getmany(timeout_ms=int(POLL_SECONDS * 1000))
        for tp, records in batches.items():
            member.on_record(tp.partition, records[0].offset)
        command = pending_command(lines)
        if command is None:
            continue
        if command == CLOSE:
            await consumer.stop()
            return
        try:
            await consumer.commit({TopicPartition(topic, p): o for p, o in command.items()})
            emit("committed", error=None)
        except Exception as e:
            emit("committed", error=f"{type(e).__name__}: {e}")


def main() -> None:
    client, bootstrap, topic, group, instance, session_ms, *strategy = sys.argv[1:]
    args = (bootstrap, topic, group, None if instance == "-" else instance, int(session_ms), *strategy)
    runners: dict[str, Callable[..., Any]] = {
        "kafka-python": run_kafka_python,
        "confluent-kafka": run_confluent_kafka,
        "aiokafka": lambda *a: asyncio.run(run_aiokafka(*a)),
    }
    runners[client](*args)
    emit("closed")


if __name__ == "__main__":
    main()
