"""The reliability workload's client processes, each writing its own history file (history.py):

    python -m tests.reliability.workload ROLE BOOTSTRAP TOPIC PARTITIONS NAME HISTORY [ARGS]
      ROLE produce:    ARGS = FIRST RATE [--idempotent] [--compression CODEC]
      ROLE consume:    no ARGS
      ROLE final-read: ARGS = TIMEOUT_S

The clients are confluent-kafka (librdkafka), a real Kafka client with an idempotent producer and
KIP-320 truncation detection, light enough for two cores.

- ``produce`` sends RATE records a second, the values FIRST, FIRST+1, ... round robin over the
  partitions, with acks=all, until SIGTERM; then it waits a while for the outstanding
  acknowledgements and exits (what is still unanswered stays an invocation: indeterminate). Without
  ``--idempotent`` it makes one attempt per record (retries=0) so that a broker error is a definite
  ``fail``; with it librdkafka retries until its delivery timeout, and every error is ``info``.
- ``consume`` assigns every partition from offset 0 (no group) and polls until SIGTERM. With
  auto.offset.reset=error it sees an out-of-range position or a detected log truncation as an
  error; it logs that as a seek to an unknown position and restarts the partition from offset 0.
- ``final-read`` asks each partition's high watermark, reads from the log start up to it and writes
  one ``final-read`` op with everything it read (``fail`` if it cannot within TIMEOUT_S).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from tests.reliability.history import (
    FAIL,
    FINAL_READ,
    INFO,
    INVOKE,
    OK,
    POLL,
    SEEK,
    SEND,
    HistoryWriter,
    decode_value,
    encode_value,
)

DELIVERY_TIMEOUT_MS = 10_000
REQUEST_TIMEOUT_MS = 5_000
DRAIN_S = 12.0
# Broker errors that reject a produce before anything is appended. Not among them:
# NOT_ENOUGH_REPLICAS_AFTER_APPEND and REQUEST_TIMED_OUT (the records are in the leader's log and may
# commit), nor NOT_LEADER_OR_FOLLOWER and UNKNOWN_TOPIC_OR_PARTITION, which Kafka also answers to an
# acks=all produce that was appended and then lost its leadership while waiting for the followers
# (DelayedProduce). librdkafka re-sends after those even with retries=0 (it assumes "not appended"),
# which is how a producer without idempotence writes a duplicate, as with Kafka. For the same reason
# NOT_ENOUGH_REPLICAS is not among them either: it may answer such a re-send, after the first attempt
# was appended and later committed, and librdkafka reports the last attempt's error only. The
# scenarios count it by its error name instead.
DEFINITE_ERRORS = {
    KafkaError.INVALID_MSG,  # CORRUPT_MESSAGE
    KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError.INVALID_REQUIRED_ACKS,
    KafkaError.RECORD_LIST_TOO_LARGE,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.INVALID_RECORD,
}
RESET_ERRORS = {KafkaError._AUTO_OFFSET_RESET, KafkaError._LOG_TRUNCATION}
COMMON = {
    "reconnect.backoff.ms": 100,
    "reconnect.backoff.max.ms": 1000,
    "retry.backoff.ms": 100,
    "retry.backoff.max.ms": 1000,
    "topic.metadata.refresh.interval.ms": 2000,
    "socket.connection.setup.timeout.ms": 5000,
    "log_level": 4,
}


class _Stop:
    """Set by SIGTERM or SIGINT: the workload finishes its current step and winds down."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self._set)
        signal.signal(signal.SIGINT, self._set)

    def _set(self, *_: Any) -> None:
        self.requested = True


def _describe(error: KafkaError) -> str:
    return f"{error.name()} ({error.code()})"


# ---------------------------------------------------------------------------------------------------
# produce


def produce(
    bootstrap: str,
    topic: str,
    partitions: int,
    history: HistoryWriter,
    first: int,
    rate: float,
    idempotent: bool,
    compression: str = "none",
) -> None:
    config: dict[str, Any] = {
        **COMMON,
        "bootstrap.servers": bootstrap,
        "client.id": history.process,
        "acks": "all",
        "enable.idempotence": idempotent,
        "linger.ms": 5,
        "message.timeout.ms": DELIVERY_TIMEOUT_MS,
        "request.timeout.ms": REQUEST_TIMEOUT_MS,
        "max.in.flight.requests.per.connection": 5,
        "compression.type": compression,
    }
    if not idempotent:
        config["retries"] = 0
    producer = Producer(config)
    stop = _Stop()
    started = time.monotonic()
    value = first
    while not stop.requested:
        due = first + int((time.monotonic() - started) * rate)
        while value < due and not stop.requested:
            _send(producer, topic, value % partitions, value, history, idempotent)
            value += 1
        producer.poll(0.005)
    producer.flush(DRAIN_S)


def _send(
    producer: Producer, topic: str, partition: int, value: int, history: HistoryWriter, idempotent: bool
) -> None:
    history.write(INVOKE, SEND, [[topic, partition, value, None]])

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is None:
            history.write(OK, SEND, [[topic, message.partition(), value, message.offset()]])
            return
        definite = not idempotent and error.code() in DEFINITE_ERRORS
        history.write(
            FAIL if definite else INFO, SEND, [[topic, partition, value, None]], error=_describe(error)
        )

    while True:
        try:
            producer.produce(topic, encode_value(value), partition=partition, on_delivery=delivered)
            return
        except BufferError:  # librdkafka's queue is full: wait for deliveries, then try again
            producer.poll(0.05)


# ---------------------------------------------------------------------------------------------------
# consume and final read


def _consumer(bootstrap: str, name: str) -> Consumer:
    # librdkafka insists on a group id; assign() without commits never uses it.
    return Consumer(
        {
            **COMMON,
            "bootstrap.servers": bootstrap,
            "client.id": name,
            "group.id": f"samsa-reliability-{name}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "isolation.level": "read_uncommitted",
            "fetch.wait.max.ms": 100,
        }
    )


def consume(bootstrap: str, topic: str, partitions: int, history: HistoryWriter) -> None:
    consumer = _consumer(bootstrap, history.process)
    stop = _Stop()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    history.write(OK, SEEK, [[topic, p, None, 0] for p in range(partitions)])
    try:
        while not stop.requested:
            started = time.time()
            records = _poll(consumer, topic, history, 0.2)
            if records:  # empty polls are left out of the history
                history.write(INVOKE, POLL, [], t=started)
                history.write(OK, POLL, records)
    finally:
        consumer.close()


def _poll(consumer: Consumer, topic: str, history: HistoryWriter, timeout: float) -> list[list[Any]]:
    """One poll's records as [topic, partition, value, offset]; errors are logged, and a partition
    whose position was lost or whose log was truncated restarts from offset 0."""
    records = []
    for message in consumer.consume(num_messages=1000, timeout=timeout):
        error = message.error()
        if error is None:
            records.append([topic, message.partition(), decode_value(message.value()), message.offset()])
        elif error.code() in RESET_ERRORS and message.partition() is not None:
            history.write(INFO, SEEK, [[topic, message.partition(), None, None]], error=_describe(error))
            _restart_partition(consumer, topic, message.partition(), history)
        else:
            history.write(INFO, POLL, [], error=_describe(error))
    return records


def _restart_partition(consumer: Consumer, topic: str, partition: int, history: HistoryWriter) -> None:
    consumer.incremental_unassign([TopicPartition(topic, partition)])
    consumer.incremental_assign([TopicPartition(topic, partition, 0)])
    history.write(OK, SEEK, [[topic, partition, None, 0]])


def final_read(bootstrap: str, topic: str, partitions: int, history: HistoryWriter, timeout_s: float) -> bool:
    """Returns whether every partition was read up to its high watermark."""
    deadline = time.monotonic() + timeout_s
    consumer = _consumer(bootstrap, history.process)
    try:
        marks = _watermarks(consumer, topic, partitions, deadline)
        if isinstance(marks, str):
            history.write(INVOKE, FINAL_READ, [])
            history.write(FAIL, FINAL_READ, [], error=marks)
            return False
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in marks.items()])
        history.write(OK, SEEK, [[topic, p, None, low] for p, (low, _) in marks.items()])
        history.write(INVOKE, FINAL_READ, [])
        hw = [[topic, p, high] for p, (_, high) in marks.items()]
        position = {p: low for p, (low, _) in marks.items()}
        records: list[list[Any]] = []
        while any(position[p] < high for p, (_, high) in marks.items()):
            if time.monotonic() > deadline:
                behind = {p: f"{position[p]}/{high}" for p, (_, high) in marks.items() if position[p] < high}
                history.write(FAIL, FINAL_READ, records, error=f"timed out at offset/hw {behind}", hw=hw)
                return False
            for record in _poll(consumer, topic, history, 0.5):
                records.append(record)
                position[record[1]] = record[3] + 1
        history.write(OK, FINAL_READ, records, hw=hw)
        return True
    finally:
        consumer.close()


def _watermarks(
    consumer: Consumer, topic: str, partitions: int, deadline: float
) -> dict[int, tuple[int, int]] | str:
    """(log start, high watermark) per partition, or why they could not be had before the deadline."""
    marks: dict[int, tuple[int, int]] = {}
    error = "no attempt"
    while len(marks) < partitions and time.monotonic() < deadline:
        for p in range(partitions):
            if p in marks:
                continue
            try:
                marks[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=2, cached=False)
            except KafkaException as e:
                error = f"partition {p}: {e}"
        if len(marks) < partitions:
            time.sleep(0.2)
    return marks if len(marks) == partitions else f"high watermarks unknown: {error}"


# ---------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.workload")
    roles = parser.add_subparsers(dest="role", required=True)
    for role in ("produce", "consume", "final-read"):
        sub = roles.add_parser(role)
        for name in ("bootstrap", "topic", "partitions", "name", "history"):
            sub.add_argument(name)
        if role == "produce":
            sub.add_argument("first", type=int)
            sub.add_argument("rate", type=float)
            sub.add_argument("--idempotent", action="store_true")
            sub.add_argument("--compression", default="none")
        if role == "final-read":
            sub.add_argument("timeout", type=float)
    args = parser.parse_args(argv)
    history = HistoryWriter(args.history, args.name)
    partitions = int(args.partitions)
    try:
        if args.role == "produce":
            produce(
                args.bootstrap,
                args.topic,
                partitions,
                history,
                args.first,
                args.rate,
                args.idempotent,
                args.compression,
            )
        elif args.role == "consume":
            consume(args.bootstrap, args.topic, partitions, history)
        elif not final_read(args.bootstrap, args.topic, partitions, history, args.timeout):
            return 1
    finally:
        history.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
