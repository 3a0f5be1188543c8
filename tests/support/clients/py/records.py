"""Produce and consume with one of the Python clients, run as a subprocess by
tests/support/clients/runners.py.

Usage:
  python records.py CLIENT HOST:PORT TIMEOUT_MS produce TOPIC CODEC ACKS IDEMPOTENT INPUT
  python records.py CLIENT HOST:PORT TIMEOUT_MS consume TOPIC PARTITIONS EXPECTED
  python records.py CLIENT HOST:PORT TIMEOUT_MS consume-group TOPIC GROUP EXPECTED
with CLIENT one of aiokafka, kafka-python, confluent-kafka; security settings from
$SAMSA_CLIENT_SECURITY (secure.py).

produce sends the records of INPUT (one per line: key, value, timestamp, then header name/value pairs,
tab-separated) with the client's default partitioner, all in flight at once, and prints
{"acks": [[line, partition, offset], ...], "seconds": S}; null where the client does not say (acks=0).
consume assigns partitions 0..PARTITIONS-1 without a group, reads from the beginning until EXPECTED
records or the deadline (TIMEOUT_MS), and prints {"records": [[partition, offset, timestamp, key, value,
[[name, value], ...]], ...], "seconds": S} with keys, values and header names/values in base64.
consume-group subscribes to TOPIC in GROUP instead (from the earliest offset where the group has none),
reads the same way, commits what it read (synchronously) and closes, leaving the group.
A failure is an exception: traceback on stderr, non-zero exit.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import secure

CLIENT_ID = "samsa-test"
LINGER_MS = 10
BATCH_BYTES = 128 * 1024
POLL_MS = 200

Header = tuple[str, bytes]
Row = tuple[bytes, bytes, int, list[Header]]
Ack = tuple[int, int | None, int | None]


def read_input(path: str) -> list[Row]:
    rows = []
    with open(path, "rb") as f:
        for line in f:
            key, value, timestamp, *headers = line.rstrip(b"\n").split(b"\t")
            pairs = [(headers[i].decode(), headers[i + 1]) for i in range(0, len(headers), 2)]
            rows.append((key, value, int(timestamp), pairs))
    return rows


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def consumed(
    partition: int,
    offset: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[Header],
) -> list[Any]:
    return [
        partition,
        offset,
        timestamp,
        b64(key),
        b64(value),
        [[b64(n.encode()), b64(v)] for n, v in headers],
    ]


def offset_or_none(offset: int | None) -> int | None:
    return offset if offset is not None and offset >= 0 else None


def codec_or_none(codec: str) -> str | None:
    return None if codec == "none" else codec


# What a consume reads: int, that many partitions assigned without a group; str, the group to subscribe in.
Target = int | str


def next_offsets(records: list[Any]) -> dict[int, int]:
    """{partition: the offset after the last record read there}: what a group consumer commits."""
    return {r[0]: r[1] + 1 for r in records}


# ---------------------------------------------------------------------------------------------------
# aiokafka


def produce_aiokafka(
    bootstrap: str, timeout: float, topic: str, codec: str, acks: int, idempotent: bool, rows: list[Row]
) -> list[Ack]:
    from aiokafka import AIOKafkaProducer

    async def run() -> list[Ack]:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            client_id=CLIENT_ID,
            acks=acks,
            compression_type=codec_or_none(codec),
            linger_ms=LINGER_MS,
            max_batch_size=BATCH_BYTES,
            enable_idempotence=idempotent,
            request_timeout_ms=int(timeout * 1000),
            **secure.aiokafka(),
        )
        await producer.start()
        try:
            futures = [
                await producer.send(topic, value, key=key, headers=headers, timestamp_ms=ts)
                for key, value, ts, headers in rows
            ]
            sent = await asyncio.gather(*futures)
        finally:
            await producer.stop()
        # With acks=0 aiokafka resolves each future to None: the partition is unknown too.
        return [
            (i, None, None) if m is None else (i, m.partition, offset_or_none(m.offset))
            for i, m in enumerate(sent)
        ]

    return asyncio.run(asyncio.wait_for(run(), timeout))


def consume_aiokafka(bootstrap: str, timeout: float, topic: str, target: Target, expected: int) -> list[Any]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[Any]:
        group = target if isinstance(target, str) else None
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            client_id=CLIENT_ID,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=int(timeout * 1000),
            **secure.aiokafka(),
        )
        await consumer.start()
        try:
            if group is None:
                tps = [TopicPartition(topic, p) for p in range(int(target))]
                consumer.assign(tps)
                await consumer.seek_to_beginning(*tps)
            else:
                consumer.subscribe([topic])
            out: list[Any] = []
            deadline = time.monotonic() + timeout
            while len(out) < expected and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=POLL_MS)).values():
                    out += [
                        consumed(r.partition, r.offset, r.timestamp, r.key, r.value, r.headers)
                        for r in records
                    ]
            if group is not None:
                await consumer.commit({TopicPartition(topic, p): o for p, o in next_offsets(out).items()})
            return out
        finally:
            await consumer.stop()

    return asyncio.run(run())


# ---------------------------------------------------------------------------------------------------
# kafka-python


def produce_kafka_python(
    bootstrap: str, timeout: float, topic: str, codec: str, acks: int, idempotent: bool, rows: list[Row]
) -> list[Ack]:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id=CLIENT_ID,
        acks="all" if acks == -1 else acks,
        compression_type=codec_or_none(codec),
        linger_ms=LINGER_MS,
        batch_size=BATCH_BYTES,
        enable_idempotence=idempotent,
        request_timeout_ms=int(timeout * 1000),
        **secure.kafka_python(),
    )
    try:
        futures = [
            producer.send(topic, value, key=key, headers=headers, timestamp_ms=ts)
            for key, value, ts, headers in rows
        ]
        producer.flush(timeout)
        sent = [f.get(timeout) for f in futures]
    finally:
        producer.close(timeout)
    return [(i, m.partition, offset_or_none(m.offset)) for i, m in enumerate(sent)]


def consume_kafka_python(
    bootstrap: str, timeout: float, topic: str, target: Target, expected: int
) -> list[Any]:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    group = target if isinstance(target, str) else None
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id=CLIENT_ID,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=int(timeout * 1000),
        **secure.kafka_python(),
    )
    try:
        if group is None:
            tps = [TopicPartition(topic, p) for p in range(int(target))]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
        else:
            consumer.subscribe([topic])
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=POLL_MS).values():
                out += [
                    consumed(r.partition, r.offset, r.timestamp, r.key, r.value, r.headers) for r in records
                ]
        if group is not None:
            consumer.commit(
                {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in next_offsets(out).items()}
            )
        return out
    finally:
        consumer.close()


# ---------------------------------------------------------------------------------------------------
# confluent-kafka


def produce_confluent_kafka(
    bootstrap: str, timeout: float, topic: str, codec: str, acks: int, idempotent: bool, rows: list[Row]
) -> list[Ack]:
    from confluent_kafka import KafkaException, Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": CLIENT_ID,
            "acks": str(acks),
            "compression.type": codec,
            "linger.ms": LINGER_MS,
            "enable.idempotence": idempotent,
            "message.timeout.ms": int(timeout * 1000),
            **secure.librdkafka(),
        }
    )
    acked: list[Ack] = []
    errors: list[str] = []

    def delivered(line: int, err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(f"record {line}: {err}")
        else:
            acked.append((line, msg.partition(), offset_or_none(msg.offset())))

    for i, (key, value, ts, headers) in enumerate(rows):
        while True:
            try:
                producer.produce(
                    topic, value, key, headers=headers, timestamp=ts, on_delivery=partial(delivered, i)
                )
                break
            except BufferError:  # the local queue is full: serve delivery reports to make room
                producer.poll(0.05)
    remaining = producer.flush(timeout)
    if errors or remaining:
        raise KafkaException(f"{remaining} records undelivered; {len(errors)} failed: {errors[:5]}")
    return sorted(acked)


def consume_confluent_kafka(
    bootstrap: str, timeout: float, topic: str, target: Target, expected: int
) -> list[Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    group = target if isinstance(target, str) else None
    # librdkafka insists on a group.id, but assign() with explicit offsets and no commits never uses it.
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": CLIENT_ID,
            "group.id": group or "samsa-test-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            **secure.librdkafka(),
        }
    )
    try:
        if group is None:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(int(target))])
        else:
            consumer.subscribe([topic])
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=10_000, timeout=POLL_MS / 1000):
                if m.error() is not None:
                    raise KafkaException(m.error())
                out.append(
                    consumed(
                        m.partition(), m.offset(), m.timestamp()[1], m.key(), m.value(), m.headers() or []
                    )
                )
        if group is not None:
            offsets = [TopicPartition(topic, p, o) for p, o in next_offsets(out).items()]
            for tp in consumer.commit(offsets=offsets, asynchronous=False) or []:
                if tp.error is not None:
                    raise KafkaException(tp.error)
        return out
    finally:
        consumer.close()


# ---------------------------------------------------------------------------------------------------

PRODUCE: dict[str, Callable[..., list[Ack]]] = {
    "aiokafka": produce_aiokafka,
    "kafka-python": produce_kafka_python,
    "confluent-kafka": produce_confluent_kafka,
}
CONSUME: dict[str, Callable[..., list[Any]]] = {
    "aiokafka": consume_aiokafka,
    "kafka-python": consume_kafka_python,
    "confluent-kafka": consume_confluent_kafka,
}


def main() -> None:
    client, bootstrap, timeout, mode, topic, *args = sys.argv[1:]
    seconds = int(timeout) / 1000
    started = time.monotonic()
    if mode == "produce":
        codec, acks, idempotent, path = args
        rows = read_input(path)
        started = time.monotonic()
        acked = PRODUCE[client](bootstrap, seconds, topic, codec, int(acks), idempotent == "1", rows)
        result: dict[str, Any] = {"acks": acked}
    else:
        # consume: a number of partitions to assign; consume-group: the group to subscribe in
        target: Target = int(args[0]) if mode == "consume" else args[0]
        result = {"records": CONSUME[client](bootstrap, seconds, topic, target, int(args[1]))}
    result["seconds"] = round(time.monotonic() - started, 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
