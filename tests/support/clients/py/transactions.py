"""The transactions scenario with one of the Python clients, run as a subprocess by
tests/support/clients/runners.py (transactions_<client>); the Python twin of js/transactions.js and
java/Transactions.java beside it, printing the same JSON.

Usage: python transactions.py CLIENT BOOTSTRAP TIMEOUT_MS DATA_TOPIC INPUT_TOPIC GROUP TXN_ID PARTITIONS
with CLIENT one of aiokafka, kafka-python, confluent-kafka; security settings from
$SAMSA_CLIENT_SECURITY (secure.py).

The scenario (every step through the client's own transactional API; record i of a transaction goes to
partition i % PARTITIONS of DATA_TOPIC, its key and value "<transaction>-<i>"):
  1. seed: a plain producer writes in-0..in-5 to INPUT_TOPIC partition 0;
  2. producer P1 (transactional.id TXN_ID) inits; "commit-1" committed; "abort-1" flushed, then aborted;
     "back-1" and "back-2" committed back to back; "empty" begun and committed with nothing in it;
  3. a consumer of group GROUP reads the six input records; "offsets-abort" sends offset 3 of the input
     to the transaction and aborts (the group's committed offset is read: none expected), then
     "offsets-commit" sends offset 6 and commits (the committed offset is read until it shows 6);
  4. producer P2 with the same id inits, which fences P1: P1 begins, sends and commits, and the error
     (and the step that raised it) is reported; P2 commits "fencer-1" and closes;
  5. producer P3 (a restart) inits with the same id and commits "restart-1", then begins "crashed", has
     its records acknowledged and is abandoned with the transaction open; P4 inits with the same id
     (aborting P3's transaction) and commits "recovered-1";
  6. a read_committed and a read_uncommitted consumer read DATA_TOPIC from the beginning without a group,
     once while "crashed" is open (before P4) and once at the end.

Prints one JSON object:
  {"txns": [{"name", "outcome": "commit"|"abort", "records": [[partition, value, offset|null], ...]}],
   "offsets": {"input_read": [offsets...], "after_abort": O|null, "after_commit": O|null},
   "fenced": {"step": "begin"|"send"|"commit", "error": "..."} | null,
   "read_committed": {"records": [[partition, offset, value], ...], "positions": {P: O} | null,
                      "end_offsets": {P: O} | null},
   "read_uncommitted": {...}, "read_committed_open": {...}, "read_uncommitted_open": {...},
   "notes": ["..."]}
where a reader's positions are the consumer's after reading and its end_offsets the end offsets the
client's ListOffsets gives at its isolation level (read_committed: the last stable offset).
Progress goes to stderr ("step NAME"); a failure is an exception: traceback on stderr, non-zero exit.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import traceback
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import secure

CLIENT_ID = "samsa-test-txn"
INPUT_COUNT = 6
TXN_RECORDS = 6
POLL_MS = 200
# After the expected records came, the readers keep polling this long: anything more is reported too.
SETTLE_S = 1.5
# Each client operation's own timeout; the whole run has the runner's budget (TIMEOUT_MS).
OP_TIMEOUT_MS = 45_000
TRANSACTION_TIMEOUT_MS = 60_000

T = TypeVar("T")
Record = tuple[int, str]  # (partition, value)


def step(name: str) -> None:
    print(f"step {name}", file=sys.stderr, flush=True)


def error_text(e: BaseException) -> str:
    """The exception's class and message, with librdkafka's error name where there is one."""
    text = f"{type(e).__name__}: {e}"
    inner = e.args[0] if e.args else None
    if hasattr(inner, "name") and callable(inner.name):
        text += f" [{inner.name()}]"
    return text


# ---------------------------------------------------------------------------------------------------
# confluent-kafka


class ConfluentProducer:
    def __init__(self, bootstrap: str, txn_id: str | None, topic: str) -> None:
        from confluent_kafka import Producer

        settings: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "client.id": CLIENT_ID,
            "message.timeout.ms": OP_TIMEOUT_MS,
            "linger.ms": 5,
            **secure.librdkafka(),
        }
        if txn_id is not None:
            settings["transactional.id"] = txn_id
            settings["transaction.timeout.ms"] = TRANSACTION_TIMEOUT_MS
        self.producer = Producer(settings)
        self.topic = topic

    def init(self) -> None:
        self.producer.init_transactions(OP_TIMEOUT_MS / 1000)

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, records: list[Record]) -> list[int | None]:
        from confluent_kafka import KafkaException

        offsets: dict[int, int | None] = {}
        errors: list[str] = []

        def delivered(i: int, err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(f"record {i}: {err}")
            else:
                offsets[i] = msg.offset() if msg.offset() >= 0 else None

        for i, (partition, value) in enumerate(records):
            self.producer.produce(
                self.topic,
                value.encode(),
                value.encode(),
                partition=partition,
                on_delivery=lambda err, msg, i=i: delivered(i, err, msg),
            )
        # poll(), not flush(): confluent-kafka 2.16's flush() raises a fatal error (such as _FENCED) as a
        # bare KafkaError object, which Python turns into a SystemError; poll() raises KafkaException.
        deadline = time.monotonic() + OP_TIMEOUT_MS / 1000
        while len(offsets) + len(errors) < len(records) and time.monotonic() < deadline:
            self.producer.poll(POLL_MS / 1000)
        if errors or len(offsets) < len(records):
            raise KafkaException(f"{len(records) - len(offsets)} records undelivered; failed: {errors[:3]}")
        return [offsets[i] for i in range(len(records))]

    def send_offsets(self, consumer: Any, topic: str, offset: int) -> None:
        from confluent_kafka import TopicPartition

        self.producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, offset)],
            consumer.consumer.consumer_group_metadata(),
            OP_TIMEOUT_MS / 1000,
        )

    def commit(self) -> None:
        self.producer.commit_transaction(OP_TIMEOUT_MS / 1000)

    def abort(self) -> None:
        self.producer.abort_transaction(OP_TIMEOUT_MS / 1000)

    def close(self) -> None:
        self.producer.flush(OP_TIMEOUT_MS / 1000)
        del self.producer

    def abandon(self) -> None:
        # Called once a newer producer has the id: whatever the destroy tries is fenced by then.
        self.producer.purge()
        del self.producer


class ConfluentGroupConsumer:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": CLIENT_ID,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                **secure.librdkafka(),
            }
        )
        self.consumer.subscribe([topic])
        self.topic = topic

    def read(self, count: int) -> list[int]:
        from confluent_kafka import KafkaException

        out: list[int] = []
        deadline = time.monotonic() + OP_TIMEOUT_MS / 1000
        while len(out) < count and time.monotonic() < deadline:
            m = self.consumer.poll(POLL_MS / 1000)
            if m is None:
                continue
            if m.error() is not None:
                raise KafkaException(m.error())
            out.append(m.offset())
        return out

    def committed(self) -> int | None:
        from confluent_kafka import TopicPartition

        (tp,) = self.consumer.committed([TopicPartition(self.topic, 0)], OP_TIMEOUT_MS / 1000)
        return tp.offset if tp.offset >= 0 else None

    def close(self) -> None:
        self.consumer.close()


def confluent_read(
    bootstrap: str, topic: str, partitions: int, isolation: str, expected: int
) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    # librdkafka insists on a group.id; assign() without commits never uses it.
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": CLIENT_ID,
            "group.id": "samsa-test-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": isolation,
            **secure.librdkafka(),
        }
    )
    try:
        tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
        consumer.assign(tps)
        out: list[list[Any]] = []

        def poll() -> None:
            for m in consumer.consume(num_messages=1000, timeout=POLL_MS / 1000):
                if m.error() is not None:
                    raise KafkaException(m.error())
                out.append([m.partition(), m.offset(), m.value().decode()])

        read_until(poll, lambda: len(out) >= expected)
        positions = {tp.partition: tp.offset for tp in consumer.position(tps)}
        # The high end that ListOffsets gives for the consumer's isolation level (not the cached one).
        ends = {
            tp.partition: consumer.get_watermark_offsets(tp, OP_TIMEOUT_MS / 1000, cached=False)[1]
            for tp in tps
        }
        return {"records": out, "positions": positions, "end_offsets": ends}
    finally:
        consumer.close()


class _SyncClient:
    """A client whose producer, group consumer and reads are plain blocking calls."""

    notes: list[str] = []
    producer_class: Callable[[str, str | None, str], Any]
    group_consumer_class: Callable[[str, str, str], Any]
    reader: Callable[[str, str, int, str, int], Any]

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def producer(self, txn_id: str | None, topic: str) -> Any:
        return self.producer_class(self.bootstrap, txn_id, topic)

    def group_consumer(self, topic: str, group: str) -> Any:
        return self.group_consumer_class(self.bootstrap, topic, group)

    def read(self, topic: str, partitions: int, isolation: str, expected: int) -> Any:
        return type(self).reader(self.bootstrap, topic, partitions, isolation, expected)

    def finish(self) -> None:
        pass


class ConfluentClient(_SyncClient):
    producer_class = ConfluentProducer
    group_consumer_class = ConfluentGroupConsumer
    reader = confluent_read


# ---------------------------------------------------------------------------------------------------
# kafka-python


class KafkaPythonProducer:
    def __init__(self, bootstrap: str, txn_id: str | None, topic: str) -> None:
        from kafka import KafkaProducer

        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            client_id=CLIENT_ID,
            transactional_id=txn_id,
            transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
            request_timeout_ms=OP_TIMEOUT_MS // 2,
            max_block_ms=OP_TIMEOUT_MS,
            linger_ms=5,
            **secure.kafka_python(),
        )
        self.topic = topic

    def init(self) -> None:
        self.producer.init_transactions()

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, records: list[Record]) -> list[int | None]:
        futures = [
            self.producer.send(self.topic, value.encode(), key=value.encode(), partition=partition)
            for partition, value in records
        ]
        self.producer.flush(OP_TIMEOUT_MS / 1000)
        return [f.get(OP_TIMEOUT_MS / 1000).offset for f in futures]

    def send_offsets(self, consumer: Any, topic: str, offset: int) -> None:
        from kafka import OffsetAndMetadata, TopicPartition

        self.producer.send_offsets_to_transaction(
            {TopicPartition(topic, 0): OffsetAndMetadata(offset, "", -1)}, consumer.consumer.group_metadata()
        )

    def commit(self) -> None:
        self.producer.commit_transaction()

    def abort(self) -> None:
        self.producer.abort_transaction()

    def close(self) -> None:
        self.producer.close(OP_TIMEOUT_MS / 1000)

    def abandon(self) -> None:
        # A zero-timeout close (a forced close) stops the sender without ending an open transaction.
        self.producer.close(0)


class KafkaPythonGroupConsumer:
    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            client_id=CLIENT_ID,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level="read_committed",
            request_timeout_ms=OP_TIMEOUT_MS,
            **secure.kafka_python(),
        )
        self.topic = topic

    def read(self, count: int) -> list[int]:
        out: list[int] = []
        deadline = time.monotonic() + OP_TIMEOUT_MS / 1000
        while len(out) < count and time.monotonic() < deadline:
            for records in self.consumer.poll(timeout_ms=POLL_MS).values():
                out += [r.offset for r in records]
        return out

    def committed(self) -> int | None:
        from kafka import TopicPartition

        return self.consumer.committed(TopicPartition(self.topic, 0), timeout_ms=OP_TIMEOUT_MS)

    def close(self) -> None:
        self.consumer.close()


def kafka_python_read(
    bootstrap: str, topic: str, partitions: int, isolation: str, expected: int
) -> dict[str, Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id=CLIENT_ID,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation,
        request_timeout_ms=OP_TIMEOUT_MS,
        **secure.kafka_python(),
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[list[Any]] = []

        def poll() -> None:
            for records in consumer.poll(timeout_ms=POLL_MS).values():
                out.extend([r.partition, r.offset, r.value.decode()] for r in records)

        read_until(poll, lambda: len(out) >= expected)
        return {
            "records": out,
            "positions": {tp.partition: consumer.position(tp) for tp in tps},
            "end_offsets": {tp.partition: o for tp, o in consumer.end_offsets(tps).items()},
        }
    finally:
        consumer.close()


class KafkaPythonClient(_SyncClient):
    producer_class = KafkaPythonProducer
    group_consumer_class = KafkaPythonGroupConsumer
    reader = kafka_python_read


# ---------------------------------------------------------------------------------------------------
# aiokafka: its objects live on one event loop, which each call runs until the call is done.


class AiokafkaClient:
    notes = [
        "aiokafka's start() is its init_transactions (it has no separate call)",
        "aiokafka's send_offsets_to_transaction takes a group id, not the consumer's group metadata: "
        "TxnOffsetCommit goes without generation or member id",
    ]

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.loop = asyncio.new_event_loop()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(coro, OP_TIMEOUT_MS / 1000))

    def producer(self, txn_id: str | None, topic: str) -> AiokafkaProducer:
        return AiokafkaProducer(self, txn_id, topic)

    def group_consumer(self, topic: str, group: str) -> AiokafkaGroupConsumer:
        return AiokafkaGroupConsumer(self, topic, group)

    def read(self, topic: str, partitions: int, isolation: str, expected: int) -> Any:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def run() -> dict[str, Any]:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap,
                client_id=CLIENT_ID,
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                isolation_level=isolation,
                request_timeout_ms=OP_TIMEOUT_MS,
                **secure.aiokafka(),
            )
            await consumer.start()
            try:
                tps = [TopicPartition(topic, p) for p in range(partitions)]
                consumer.assign(tps)
                await consumer.seek_to_beginning(*tps)
                out: list[list[Any]] = []
                deadline = time.monotonic() + OP_TIMEOUT_MS / 1000
                settle: float | None = None
                while time.monotonic() < (deadline if settle is None else settle):
                    for records in (await consumer.getmany(timeout_ms=POLL_MS)).values():
                        out.extend([r.partition, r.offset, r.value.decode()] for r in records)
                    if settle is None and len(out) >= expected:
                        settle = time.monotonic() + SETTLE_S
                return {
                    "records": out,
                    "positions": {tp.partition: await consumer.position(tp) for tp in tps},
                    "end_offsets": {tp.partition: o for tp, o in (await consumer.end_offsets(tps)).items()},
                }
            finally:
                await consumer.stop()

        return self.loop.run_until_complete(run())

    def finish(self) -> None:
        self.loop.close()


class AiokafkaProducer:
    def __init__(self, client: AiokafkaClient, txn_id: str | None, topic: str) -> None:
        from aiokafka import AIOKafkaProducer

        self.client = client
        self.topic = topic
        self.transactional = txn_id is not None

        async def create() -> AIOKafkaProducer:
            return AIOKafkaProducer(
                bootstrap_servers=client.bootstrap,
                client_id=CLIENT_ID,
                transactional_id=txn_id,
                transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
                enable_idempotence=True,
                request_timeout_ms=OP_TIMEOUT_MS // 2,
                linger_ms=5,
                **secure.aiokafka(),
            )

        self.producer = client.run(create())
        if not self.transactional:
            client.run(self.producer.start())

    def init(self) -> None:
        self.client.run(self.producer.start())

    def begin(self) -> None:
        self.client.run(self.producer.begin_transaction())

    def send(self, records: list[Record]) -> list[int | None]:
        async def send() -> list[int | None]:
            futures = [
                await self.producer.send(self.topic, value.encode(), key=value.encode(), partition=partition)
                for partition, value in records
            ]
            return [m.offset for m in await asyncio.gather(*futures)]

        return self.client.run(send())

    def send_offsets(self, consumer: Any, topic: str, offset: int) -> None:
        from aiokafka import TopicPartition

        self.client.run(
            self.producer.send_offsets_to_transaction({TopicPartition(topic, 0): offset}, consumer.group)
        )

    def commit(self) -> None:
        self.client.run(self.producer.commit_transaction())

    def abort(self) -> None:
        self.client.run(self.producer.abort_transaction())

    def close(self) -> None:
        self.client.run(self.producer.stop())

    def abandon(self) -> None:
        # stop() does not end an open transaction (aiokafka does not abort on close).
        self.client.run(self.producer.stop())


class AiokafkaGroupConsumer:
    def __init__(self, client: AiokafkaClient, topic: str, group: str) -> None:
        from aiokafka import AIOKafkaConsumer

        self.client = client
        self.topic = topic
        self.group = group

        async def start() -> AIOKafkaConsumer:
            consumer = AIOKafkaConsumer(
                topic,
                bootstrap_servers=client.bootstrap,
                client_id=CLIENT_ID,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                isolation_level="read_committed",
                request_timeout_ms=OP_TIMEOUT_MS,
                **secure.aiokafka(),
            )
            await consumer.start()
            return consumer

        self.consumer = client.run(start())

    def read(self, count: int) -> list[int]:
        async def read() -> list[int]:
            out: list[int] = []
            while len(out) < count:
                for records in (await self.consumer.getmany(timeout_ms=POLL_MS)).values():
                    out += [r.offset for r in records]
            return out

        return self.client.run(read())

    def committed(self) -> int | None:
        from aiokafka import TopicPartition

        return self.client.run(self.consumer.committed(TopicPartition(self.topic, 0)))

    def close(self) -> None:
        self.client.run(self.consumer.stop())


# ---------------------------------------------------------------------------------------------------
# the scenario


def read_until(poll: Callable[[], None], done: Callable[[], bool]) -> None:
    """Polls until done() or the deadline, then SETTLE_S more (so that extra records show up)."""
    deadline = time.monotonic() + OP_TIMEOUT_MS / 1000
    while not done() and time.monotonic() < deadline:
        poll()
    settle = time.monotonic() + SETTLE_S
    while time.monotonic() < settle:
        poll()


def records_of(name: str, count: int, partitions: int) -> list[Record]:
    return [(i % partitions, f"{name}-{i}") for i in range(count)]


def run_scenario(
    client: Any, data: str, input_topic: str, group: str, txn_id: str, partitions: int
) -> dict[str, Any]:
    txns: list[dict[str, Any]] = []

    def written(name: str, outcome: str, records: list[Record], acked: list[int | None]) -> None:
        rows = [[p, v, o] for (p, v), o in zip(records, acked, strict=True)]
        txns.append({"name": name, "outcome": outcome, "records": rows})

    def transaction(producer: Any, name: str, outcome: str, count: int = TXN_RECORDS) -> None:
        step(name)
        producer.begin()
        records = records_of(name, count, partitions)
        acked = producer.send(records) if records else []
        (producer.commit if outcome == "commit" else producer.abort)()
        written(name, outcome, records, acked)

    step("seed")
    seeder = client.producer(None, input_topic)
    seeder.send([(0, f"in-{i}") for i in range(INPUT_COUNT)])
    seeder.close()

    step("init P1")
    p1 = client.producer(txn_id, data)
    p1.init()
    transaction(p1, "commit-1", "commit")
    transaction(p1, "abort-1", "abort")
    transaction(p1, "back-1", "commit")
    transaction(p1, "back-2", "commit")
    transaction(p1, "empty", "commit", count=0)

    step("group consumer")
    consumer = client.group_consumer(input_topic, group)
    input_read = consumer.read(INPUT_COUNT)
    offsets: dict[str, Any] = {"input_read": input_read}

    step("offsets-abort")
    p1.begin()
    records = records_of("offsets-abort", INPUT_COUNT // 2, partitions)
    acked = p1.send(records)
    p1.send_offsets(consumer, input_topic, INPUT_COUNT // 2)
    p1.abort()
    written("offsets-abort", "abort", records, acked)
    offsets["after_abort"] = consumer.committed()

    step("offsets-commit")
    p1.begin()
    records = records_of("offsets-commit", INPUT_COUNT, partitions)
    acked = p1.send(records)
    p1.send_offsets(consumer, input_topic, INPUT_COUNT)
    p1.commit()
    written("offsets-commit", "commit", records, acked)
    # The commit's markers reach __consumer_offsets after EndTxn returns: read until they show.
    deadline = time.monotonic() + OP_TIMEOUT_MS / 1000
    offsets["after_commit"] = consumer.committed()
    while offsets["after_commit"] != INPUT_COUNT and time.monotonic() < deadline:
        time.sleep(0.2)
        offsets["after_commit"] = consumer.committed()
    consumer.close()

    step("init P2 (fences P1)")
    p2 = client.producer(txn_id, data)
    p2.init()
    fenced: dict[str, str] | None = None
    where = "begin"
    try:
        p1.begin()
        where = "send"
        p1.send(records_of("fenced", 3, partitions))
        where = "commit"
        p1.commit()
    except Exception as e:  # the client's fenced error is what the test checks
        fenced = {"step": where, "error": error_text(e)}
        traceback.print_exc()
    quietly(p1.abandon)
    transaction(p2, "fencer-1", "commit")
    p2.close()

    step("init P3 (restart)")
    p3 = client.producer(txn_id, data)
    p3.init()
    transaction(p3, "restart-1", "commit")
    step("crashed")
    p3.begin()
    records = records_of("crashed", TXN_RECORDS, partitions)
    acked = p3.send(records)
    # Aborted by P4's init: P3 is left as a crash leaves it, transaction open.
    written("crashed", "abort", records, acked)
    # While it is open, read_committed stops at its first record (the last stable offset).
    reads = {"open": read_both(client, data, partitions, txns)}
    step("init P4 (after the crash)")
    p4 = client.producer(txn_id, data)
    p4.init()
    transaction(p4, "recovered-1", "commit")
    p4.close()
    quietly(p3.abandon)

    reads["end"] = read_both(client, data, partitions, txns)
    client.finish()
    return {
        "txns": txns,
        "offsets": offsets,
        "fenced": fenced,
        "read_committed": reads["end"]["read_committed"],
        "read_uncommitted": reads["end"]["read_uncommitted"],
        "read_committed_open": reads["open"]["read_committed"],
        "read_uncommitted_open": reads["open"]["read_uncommitted"],
        "notes": client.notes,
    }


def read_both(client: Any, data: str, partitions: int, txns: list[dict[str, Any]]) -> dict[str, Any]:
    """A read_committed and a read_uncommitted consumer read DATA_TOPIC from the beginning, each
    expecting the records of the transactions so far that its isolation level shows."""
    out = {}
    for isolation, outcomes in (("read_committed", ("commit",)), ("read_uncommitted", ("commit", "abort"))):
        step(isolation)
        expected = sum(len(t["records"]) for t in txns if t["outcome"] in outcomes)
        out[isolation] = client.read(data, partitions, isolation, expected)
    return out


def quietly(action: Callable[[], None]) -> None:
    """Closing a fenced or abandoned producer may raise; the scenario does not depend on it."""
    try:
        action()
    except Exception as e:
        print(f"ignored on close: {error_text(e)}", file=sys.stderr, flush=True)


CLIENTS: dict[str, Callable[[str], Any]] = {
    "confluent-kafka": ConfluentClient,
    "kafka-python": KafkaPythonClient,
    "aiokafka": AiokafkaClient,
}


def main() -> None:
    global OP_TIMEOUT_MS
    client, bootstrap, timeout_ms, data, input_topic, group, txn_id, partitions = sys.argv[1:]
    OP_TIMEOUT_MS = min(OP_TIMEOUT_MS, int(timeout_ms))
    result = run_scenario(CLIENTS[client](bootstrap), data, input_topic, group, txn_id, int(partitions))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
