"""One consumer-group member of a Python client, for the consumer-group tests
(tests/integration/test_consumer_groups_clients.py); the Python twin of js/group_member.js and
java/GroupMember.java beside it, speaking their protocol.

Usage: python group_member.py CLIENT BOOTSTRAP TIMEOUT_MS TOPIC GROUP SESSION_MS
with CLIENT one of aiokafka, kafka-python, confluent-kafka, each through its own consumer API and its
default (eager) assignors; security settings from $SAMSA_CLIENT_SECURITY (secure.py).

It subscribes to TOPIC (from the earliest offset where the group has none) and, without auto-commit,
commits each polled batch synchronously after "processing" it (printing its records). One JSON object
per stdout line, each with "ts" (epoch ms):
  {"event": "assigned", "member": ID, "generation": G, "partitions": [...]}  after each rebalance
  {"event": "revoked", "partitions": [...]}
  {"event": "record", "partition": P, "offset": O}
  {"event": "committed", "partition": P, "offset": O}      a commit that succeeded (O: next to read)
  {"event": "commit_failed", "partition": P, "offset": O, "error": "..."}
  {"event": "closed"}                                       after closing, which leaves the group
A line "close" on stdin (or its end) closes the consumer. A failure is an exception: traceback on
stderr, non-zero exit.

Where the generation comes from: kafka-python's group_metadata(); aiokafka keeps it only on its group
coordinator (no public accessor); confluent-kafka hands it out only inside the serialized group
metadata librdkafka writes for transactions (KIP-447), which this reads (see librdkafka_generation).
"""

from __future__ import annotations

import asyncio
import json
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import secure

HEARTBEAT_MS = 500
MAX_POLL_INTERVAL_MS = 30_000  # also the rebalance timeout the member announces
MAX_WAIT_MS = 200  # fetch.max.wait: a fetch that waits for data does not hold up a rebalance or close
POLL_MS = 100
MAX_RECORDS = 500

Batch = Iterable[tuple[int, int]]  # (partition, offset) of the records polled, in order


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "ts": int(time.time() * 1000), **fields}), flush=True)


def close_requested() -> threading.Event:
    """Set once stdin says "close" or ends (the test went away)."""
    requested = threading.Event()

    def read() -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        requested.set()

    threading.Thread(target=read, daemon=True).start()
    return requested


def assigned(member: str, generation: int, partitions: Iterable[int]) -> None:
    emit("assigned", member=member, generation=generation, partitions=sorted(partitions))


def revoked(partitions: Iterable[int]) -> None:
    emit("revoked", partitions=sorted(partitions))


def process(batch: Batch) -> dict[int, int]:
    """Prints the records; returns the offsets to commit (partition -> next offset to read)."""
    commits = {}
    for partition, offset in batch:
        emit("record", partition=partition, offset=offset)
        commits[partition] = offset + 1
    return commits


def report_commit(commits: dict[int, int], errors: dict[int, str]) -> None:
    """One event per partition of a commit; ``errors`` holds the partitions whose commit failed."""
    for partition, offset in sorted(commits.items()):
        if partition in errors:
            emit("commit_failed", partition=partition, offset=offset, error=errors[partition])
        else:
            emit("committed", partition=partition, offset=offset)


def _settings(client: str, bootstrap: str, timeout_ms: int, group: str, session_ms: int) -> dict[str, Any]:
    """The consumer settings kafka-python and aiokafka share (their names are the same)."""
    return {
        "bootstrap_servers": bootstrap,
        "client_id": f"samsa-test-{client}-group",
        "group_id": group,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": session_ms,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        "max_poll_interval_ms": MAX_POLL_INTERVAL_MS,
        "fetch_max_wait_ms": MAX_WAIT_MS,
        "request_timeout_ms": timeout_ms,
        **(secure.aiokafka() if client == "aiokafka" else secure.kafka_python()),
    }


def run_kafka_python(bootstrap: str, timeout_ms: int, topic: str, group: str, session_ms: int) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(**_settings("kafka-python", bootstrap, timeout_ms, group, session_ms))

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, partitions: Any) -> None:
            revoked(tp.partition for tp in partitions)

        def on_partitions_assigned(self, partitions: Any) -> None:
            group_metadata = consumer.group_metadata()
            assigned(
                group_metadata.member_id, group_metadata.generation_id, (tp.partition for tp in partitions)
            )

    closing = close_requested()
    try:
        consumer.subscribe([topic], listener=Listener())
        while not closing.is_set():
            polled = consumer.poll(timeout_ms=POLL_MS, max_records=MAX_RECORDS)
            commits = process((r.partition, r.offset) for records in polled.values() for r in records)
            if not commits:
                continue
            errors: dict[int, str] = {}
            try:
                consumer.commit(
                    {TopicPartition(topic, p): OffsetAndMetadata(o) for p, o in commits.items()},
                    timeout_ms=timeout_ms,
                )
            except KafkaError as e:
                errors = dict.fromkeys(commits, repr(e))
            report_commit(commits, errors)
    finally:
        consumer.close()


async def run_aiokafka(bootstrap: str, timeout_ms: int, topic: str, group: str, session_ms: int) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.errors import KafkaError

    consumer = AIOKafkaConsumer(**_settings("aiokafka", bootstrap, timeout_ms, group, session_ms))

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, partitions: Any) -> None:
            revoked(tp.partition for tp in partitions)

        def on_partitions_assigned(self, partitions: Any) -> None:
            # aiokafka calls this once its coordinator holds the generation and member id of the join.
            coordinator = consumer._coordinator
            assigned(coordinator.member_id, coordinator.generation, (tp.partition for tp in partitions))

    closing = close_requested()
    await consumer.start()
    try:
        consumer.subscribe([topic], listener=Listener())
        while not closing.is_set():
            polled = await consumer.getmany(timeout_ms=POLL_MS, max_records=MAX_RECORDS)
            commits = process((r.partition, r.offset) for records in polled.values() for r in records)
            if not commits:
                continue
            errors: dict[int, str] = {}
            try:
                await consumer.commit({TopicPartition(topic, p): o for p, o in commits.items()})
            except KafkaError as e:
                errors = dict.fromkeys(commits, repr(e))
            report_commit(commits, errors)
    finally:
        await consumer.stop()


CGMD_MAGIC = b"CGMDv2:"


def librdkafka_generation(group_metadata: bytes) -> int:
    """The generation id in librdkafka's serialized consumer group metadata (what confluent-kafka's
    Consumer.consumer_group_metadata() returns): the magic "CGMDv2:", then the id as a native int32."""
    if not group_metadata.startswith(CGMD_MAGIC):
        raise ValueError(f"unknown librdkafka group metadata format: {group_metadata[:16]!r}")
    (generation,) = struct.unpack_from("=i", group_metadata, len(CGMD_MAGIC))
    return int(generation)


def run_confluent_kafka(bootstrap: str, timeout_ms: int, topic: str, group: str, session_ms: int) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "samsa-test-confluent-kafka-group",
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
            "fetch.wait.max.ms": MAX_WAIT_MS,
            "socket.timeout.ms": timeout_ms,
            **secure.librdkafka(),
        }
    )

    def on_assign(c: Any, partitions: list[Any]) -> None:
        generation = librdkafka_generation(c.consumer_group_metadata())
        assigned(c.memberid(), generation, (tp.partition for tp in partitions))

    def on_revoke(c: Any, partitions: list[Any]) -> None:
        revoked(tp.partition for tp in partitions)

    closing = close_requested()
    try:
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        while not closing.is_set():
            batch = []
            for message in consumer.consume(num_messages=MAX_RECORDS, timeout=POLL_MS / 1000):
                error = message.error()
                if error is None:
                    batch.append((message.partition(), message.offset()))
                elif error.fatal():
                    raise KafkaException(error)
                else:  # librdkafka retries these itself (a broker down, a leader moving)
                    print(f"confluent-kafka: {error}", file=sys.stderr, flush=True)
            commits = process(batch)
            if not commits:
                continue
            try:
                results = consumer.commit(
                    offsets=[TopicPartition(topic, p, o) for p, o in commits.items()], asynchronous=False
                )
                errors = {tp.partition: str(tp.error) for tp in results if tp.error is not None}
            except KafkaException as e:
                errors = dict.fromkeys(commits, str(e))
            report_commit(commits, errors)
    finally:
        consumer.close()


CLIENTS: dict[str, Callable[[str, int, str, str, int], None]] = {
    "aiokafka": lambda *args: asyncio.run(run_aiokafka(*args)),
    "kafka-python": run_kafka_python,
    "confluent-kafka": run_confluent_kafka,
}


def main() -> None:
    client, bootstrap, timeout_ms, topic, group, session_ms = sys.argv[1:]
    CLIENTS[client](bootstrap, int(timeout_ms), topic, group, int(session_ms))
    emit("closed")


if __name__ == "__main__":
    main()
