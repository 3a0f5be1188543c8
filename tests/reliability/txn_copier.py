"""The transactional scenario's client processes, each writing its own history file (history.py):

    python -m tests.reliability.txn_copier copy BOOTSTRAP INPUT OUTPUT OUTPUT_PARTITIONS GROUP TXN_ID
        NAME HISTORY [--mode transactional|at-least-once|at-most-once] [--batch N] [--hold PATH]
        [--transaction-timeout-ms MS]
    python -m tests.reliability.txn_copier read-committed BOOTSTRAP TOPIC PARTITIONS NAME HISTORY TIMEOUT_S
    python -m tests.reliability.txn_copier read-raw BOOTSTRAP TOPIC PARTITIONS NAME HISTORY TIMEOUT_S

``copy`` is a consume-transform-produce copier, as Kafka's TransactionalMessageCopier (the process of
its tests/kafkatest/tests/core/transactions_test.py), on confluent-kafka (librdkafka): a consumer in
group GROUP (read_committed, no auto commit) reads INPUT; each batch it returns is copied to OUTPUT
(the record of value v to partition v % OUTPUT_PARTITIONS, its key naming the input position, its
payload the value followed by where it came from) and the batch's next offsets are committed:

- ``transactional`` (the default): begin, produce, send_offsets_to_transaction, commit. An abortable
  error aborts the transaction and rewinds the consumer to the group's committed offsets; fencing or a
  fatal error closes the producer and starts a new one with the same transactional id (its
  init_transactions fences the old epoch and aborts what it left open), then rewinds.
- ``at-least-once`` (a negative control): an idempotent producer; produce, flush, then commit the
  offsets. A copier that dies between the two copies the batch again: duplicates.
- ``at-most-once`` (a negative control): commit the offsets, then produce. A copier that dies
  between the two never copies the batch: loss.

The producer is started (and its transactional id's previous transaction aborted) before the consumer
joins the group, so that the group's committed offsets are stable when the consumer fetches them.
With ``--hold PATH``, once a batch has been produced and flushed and before its offsets are sent, the
copier looks for the file PATH; while it exists the copier writes a ``hold`` op and waits, so that the
scenario can SIGKILL it exactly there (a transaction open with records in the log). SIGTERM finishes
the batch at hand and exits. A transactional call that has not returned 45 s after it began
(librdkafka's own timeout is 30 s) makes the copier exit with status 3 after an ``error`` op saying
so; the scenario then starts a new copier.

History ops of the copier (process NAME): ``txn`` (transactional; invoke with the input records, then
``ok`` committed, ``fail`` aborted, ``info`` unknown, each completion with the input records, the
output positions the delivery reports gave and the offsets committed), ``produce`` and ``commit``
(the negative controls), ``rewind`` (the committed offsets the consumer went back to), ``assign`` /
``revoke``, ``init`` (a new producer), ``hold``, ``error`` (every client error, for the reader).
Values: ``{"in": [[partition, offset, value], ...], "out": [[partition, offset, value], ...],
"offsets": [[partition, next offset], ...]}``.

``read-committed`` reads every partition of TOPIC from the start with a read_committed consumer until
each reports the end of the partition (the last stable offset), and writes one ``read-committed`` op
with the records as [topic, partition, value, offset] and ``hw`` the offsets where each ended.

``read-raw`` reads every partition of TOPIC with raw Fetch requests (protocol v11): once with
isolation_level 0 from offset 0 to the high watermark, keeping every batch's producer id, epoch and
whether it is transactional, and the transaction markers (control batches: commit or abort) the
clients never see; once with isolation_level 1 up to the last stable offset, keeping the aborted
transactions the broker reports. It writes one ``read-raw`` op: ``{"topic": TOPIC, "partitions":
[{"partition", "hw", "lso", "log_start", "entries": [[offset, producer id, epoch, kind, value]],
"aborted": [[producer id, first offset]]}]}`` with kind ``t`` (transactional data), ``d``
(non-transactional data), ``commit`` or ``abort`` (a marker; value null).
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import struct
import sys
import threading
import time
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from tests.reliability.history import FAIL, INFO, INVOKE, OK, HistoryWriter, decode_value
from tests.reliability.workload import COMMON, _Stop

TXN, PRODUCE, COMMIT, REWIND = "txn", "produce", "commit", "rewind"
ASSIGN, REVOKE, INIT, HOLD, ERROR = "assign", "revoke", "init", "hold", "error"
READ_COMMITTED, READ_RAW = "read-committed", "read-raw"
MODES = ("transactional", "at-least-once", "at-most-once")
PAYLOAD_SIZE = 100
CLIENT_TIMEOUT_S = 30.0
HOLD_MAX_S = 60.0
# A transactional call that has not returned this long after its own 30 s timeout is stuck: the copier
# exits (as a crashed copier would) and the scenario starts a new one. librdkafka 2.x was seen blocking
# in send_offsets_to_transaction for minutes after the group coordinator moved, sending nothing.
WATCHDOG_S = 45.0
EXIT_STUCK = 3
FETCH_VERSION = 11
CONTROL_ABORT, CONTROL_COMMIT = 0, 1


def transform(value: int, partition: int, offset: int) -> bytes:
    """The output payload of the input record ``value`` at ``partition``/``offset``: the value first
    (``history.decode_value`` reads it back), then where it came from."""
    head = b"%d copied-from %d/%d " % (value, partition, offset)
    return head + b"." * max(0, PAYLOAD_SIZE - len(head))


def _describe(error: Any) -> str:
    if isinstance(error, KafkaError):
        return f"{error.name()} ({error.code()}): {error.str()}"
    return f"{type(error).__name__}: {error}"


def _kafka_error(e: BaseException) -> KafkaError | None:
    return (
        e.args[0] if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError) else None
    )


# ---------------------------------------------------------------------------------------------------
# copy


class Copier:
    def __init__(self, args: argparse.Namespace, history: HistoryWriter) -> None:
        self.args = args
        self.history = history
        self.mode: str = args.mode
        self.stop = _Stop()
        self.producers_started = 0
        self._call: tuple[str, float] | None = None  # the transactional call under way, since when
        threading.Thread(target=self._watchdog, daemon=True).start()
        self.producer = self._new_producer()
        self.consumer = self._new_consumer()

    # -- clients ------------------------------------------------------------------------------------

    def _new_producer(self) -> Producer:
        """A producer; the transactional one has fenced its previous epoch (and aborted the open
        transaction of a dead predecessor) once this returns."""
        a = self.args
        config: dict[str, Any] = {
            **COMMON,
            "bootstrap.servers": a.bootstrap,
            "client.id": f"{self.history.process}-producer",
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "request.timeout.ms": 5000,
            "message.timeout.ms": min(15000, a.transaction_timeout_ms),
        }
        if a.debug:
            config["debug"] = a.debug
        if self.mode == "transactional":
            config["transactional.id"] = a.txn_id
            config["transaction.timeout.ms"] = a.transaction_timeout_ms
        self.producers_started += 1
        self.history.write(INFO, INIT, {"mode": self.mode, "producer": self.producers_started})
        producer = Producer(config)
        if self.mode != "transactional":
            return producer
        while True:
            try:
                producer.init_transactions(CLIENT_TIMEOUT_S)
                self.history.write(OK, INIT, {"producer": self.producers_started})
                return producer
            except KafkaException as e:
                self._error("init_transactions", e)
                if self.stop.requested:
                    raise
                error = _kafka_error(e)
                if error is None or not error.retriable():
                    producer = Producer(config)  # a fatal error: only a new producer can go on
                time.sleep(0.5)

    def _new_consumer(self) -> Consumer:
        a = self.args
        consumer = Consumer(
            {
                **COMMON,
                "bootstrap.servers": a.bootstrap,
                "client.id": f"{self.history.process}-consumer",
                "group.id": a.group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 1000,
                "max.poll.interval.ms": 60000,
                "fetch.wait.max.ms": 100,
            }
        )
        consumer.subscribe([a.input], on_assign=self._on_assign, on_revoke=self._on_revoke)
        return consumer

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.history.write(OK, ASSIGN, sorted(tp.partition for tp in partitions))

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.history.write(OK, REVOKE, sorted(tp.partition for tp in partitions))

    def _error(self, where: str, e: BaseException | KafkaError) -> None:
        error = e if isinstance(e, KafkaError) else _kafka_error(e)
        flags = ""
        if error is not None:
            flags = "".join(
                f" {name}"
                for name, is_set in (
                    ("retriable", error.retriable()),
                    ("abortable", error.txn_requires_abort()),
                    ("fatal", error.fatal()),
                )
                if is_set
            )
        self.history.write(INFO, ERROR, {"where": where, "flags": flags.strip()}, error=_describe(error or e))

    # -- the loop -----------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            while not self.stop.requested:
                batch = self._poll()
                if not batch:
                    continue
                if self.mode == "transactional":
                    self._copy_in_transaction(batch)
                else:
                    self._copy_without_transaction(batch)
        finally:
            self._close()

    def _poll(self) -> list[tuple[int, int, int, bytes]]:
        """(partition, offset, value, payload) of the records of one consume() call."""
        batch = []
        for message in self.consumer.consume(num_messages=self.args.batch, timeout=0.2):
            error = message.error()
            if error is not None:
                self._error("consume", error)
                continue
            value = decode_value(message.value())
            if value is None:
                self.history.write(
                    INFO, ERROR, {"where": "consume"}, error=f"undecodable {message.value()!r}"
                )
                continue
            partition, offset, payload = message.partition(), message.offset(), message.value()
            assert partition is not None and offset is not None and payload is not None
            batch.append((partition, offset, value, payload))
        return batch

    def _produce(
        self, batch: list[tuple[int, int, int, bytes]], out: list[list[int]], failed: list[str]
    ) -> None:
        """Sends the batch's transformed records and flushes; ``out`` gets each delivered record's
        [partition, offset, value], ``failed`` each delivery error."""
        a = self.args
        for partition, offset, value, _ in batch:

            def delivered(error: KafkaError | None, message: Message, value: int = value) -> None:
                if error is None:
                    out.append([message.partition() or 0, message.offset() or 0, value])
                else:
                    failed.append(_describe(error))

            while True:
                try:
                    self.producer.produce(
                        a.output,
                        transform(value, partition, offset),
                        key=b"%d/%d" % (partition, offset),
                        partition=value % a.output_partitions,
                        on_delivery=delivered,
                    )
                    break
                except BufferError:
                    self.producer.poll(0.05)
        self.producer.flush(CLIENT_TIMEOUT_S)

    def _hold(self) -> None:
        """Waits while the hold file exists: the scenario kills the copier here."""
        path = self.args.hold
        if not path or not os.path.exists(path):
            return
        self.history.write(INFO, HOLD, None)
        deadline = time.monotonic() + HOLD_MAX_S
        while os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)

    @staticmethod
    def _next_offsets(batch: list[tuple[int, int, int, bytes]]) -> dict[int, int]:
        offsets: dict[int, int] = {}
        for partition, offset, _, _ in batch:
            offsets[partition] = max(offsets.get(partition, 0), offset + 1)
        return offsets

    def _copy_in_transaction(self, batch: list[tuple[int, int, int, bytes]]) -> None:
        a = self.args
        offsets = self._next_offsets(batch)
        inputs = [[p, o, v] for p, o, v, _ in batch]
        out: list[list[int]] = []
        failed: list[str] = []

        def outcome() -> dict[str, Any]:
            return {"in": inputs, "out": sorted(out), "offsets": sorted([p, o] for p, o in offsets.items())}

        self.history.write(INVOKE, TXN, {"in": inputs})
        committing = False
        try:
            self.producer.begin_transaction()
            self._produce(batch, out, failed)
            self._hold()
            positions = [TopicPartition(a.input, p, o) for p, o in sorted(offsets.items())]
            self._retrying(
                "send_offsets_to_transaction",
                lambda: self.producer.send_offsets_to_transaction(
                    positions, self.consumer.consumer_group_metadata(), CLIENT_TIMEOUT_S
                ),
            )
            committing = True
            self._retrying("commit_transaction", lambda: self.producer.commit_transaction(CLIENT_TIMEOUT_S))
            self.history.write(OK, TXN, outcome())
            return
        except KafkaException as e:
            self._error("transaction", e)
            error = _kafka_error(e)
            if error is not None and error.txn_requires_abort() and self._abort():
                self.history.write(FAIL, TXN, outcome(), error=_describe(error))
            else:
                # Fenced, fatal, or an abort that failed: whatever was committing may have been
                # committed. A new producer fences this one and completes or aborts what it left.
                self.history.write(
                    INFO,
                    TXN,
                    outcome(),
                    error=_describe(error or e) + (" (committing)" if committing else ""),
                )
                self._replace_producer()
        self._rewind()

    def _retrying(self, what: str, call: Any) -> None:
        """Calls ``call`` again while it fails with a retriable error (librdkafka's advice for the
        transactional calls: the same call may be retried)."""
        while True:
            try:
                self._call = (what, time.monotonic())
                call()
                return
            except KafkaException as e:
                error = _kafka_error(e)
                if error is None or not error.retriable() or error.txn_requires_abort() or error.fatal():
                    raise
                self._error(what, e)
                time.sleep(0.2)
            finally:
                self._call = None

    def _watchdog(self) -> None:
        while True:
            time.sleep(1)
            call = self._call
            if call is not None and time.monotonic() - call[1] > WATCHDOG_S:
                self.history.write(
                    INFO,
                    ERROR,
                    {"where": call[0], "flags": "stuck"},
                    error=f"no return in {WATCHDOG_S:g} s: exiting",
                )
                os._exit(EXIT_STUCK)

    def _abort(self) -> bool:
        """Aborts the transaction; False if that failed for good (the producer must be replaced)."""
        try:
            self._retrying("abort_transaction", lambda: self.producer.abort_transaction(CLIENT_TIMEOUT_S))
            return True
        except KafkaException as e:
            self._error("abort_transaction", e)
            return False

    def _replace_producer(self) -> None:
        old = self.producer
        try:
            old.flush(0)
        except Exception:  # a fatal producer may refuse even that
            pass
        del old
        self.producer = self._new_producer()

    def _copy_without_transaction(self, batch: list[tuple[int, int, int, bytes]]) -> None:
        offsets = self._next_offsets(batch)
        inputs = [[p, o, v] for p, o, v, _ in batch]
        if self.mode == "at-most-once":
            if not self._commit(offsets, inputs):
                self._rewind()
                return
            self._hold()
        out: list[list[int]] = []
        failed: list[str] = []
        self.history.write(INVOKE, PRODUCE, {"in": inputs})
        self._produce(batch, out, failed)
        done = {"in": inputs, "out": sorted(out)}
        if failed or len(out) < len(batch):
            self.history.write(
                INFO, PRODUCE, done, error="; ".join(failed[:3]) or "not every record delivered"
            )
            self._rewind()
            return
        self.history.write(OK, PRODUCE, done)
        if self.mode == "at-least-once":
            self._hold()
            if not self._commit(offsets, inputs):
                self._rewind()

    def _commit(self, offsets: dict[int, int], inputs: list[list[int]]) -> bool:
        positions = [TopicPartition(self.args.input, p, o) for p, o in sorted(offsets.items())]
        value = {"in": inputs, "offsets": sorted([p, o] for p, o in offsets.items())}
        self.history.write(INVOKE, COMMIT, value)
        try:
            self.consumer.commit(offsets=positions, asynchronous=False)
        except KafkaException as e:
            self._error("commit", e)
            self.history.write(INFO, COMMIT, value, error=_describe(_kafka_error(e) or e))
            return False
        self.history.write(OK, COMMIT, value)
        return True

    def _rewind(self) -> None:
        """Back to the group's committed offsets (the log start where there are none), as Kafka's
        copier does after an abort; a consumer whose position cannot be set is replaced."""
        while not self.stop.requested:
            assignment = self.consumer.assignment()
            try:
                committed = (
                    self.consumer.committed(assignment, timeout=CLIENT_TIMEOUT_S) if assignment else []
                )
            except KafkaException as e:
                self._error("committed", e)
                time.sleep(0.5)
                continue
            try:
                for tp in committed:
                    offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                    self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            except KafkaException as e:
                self._error("seek", e)
                self.history.write(INFO, REWIND, {"offsets": []}, error="a new consumer instead")
                self.consumer.close()
                self.consumer = self._new_consumer()
                return
            self.history.write(OK, REWIND, {"offsets": sorted([tp.partition, tp.offset] for tp in committed)})
            return

    def _close(self) -> None:
        try:
            self.producer.flush(10)
        finally:
            self.consumer.close()


# ---------------------------------------------------------------------------------------------------
# read-committed


def read_committed(
    bootstrap: str, topic: str, partitions: int, history: HistoryWriter, timeout_s: float
) -> bool:
    """Reads every partition from the start to the end a read_committed consumer sees (its last
    stable offset); returns whether it got there."""
    consumer = Consumer(
        {
            **COMMON,
            "bootstrap.servers": bootstrap,
            "client.id": history.process,
            "group.id": f"samsa-reliability-{history.process}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 100,
        }
    )
    deadline = time.monotonic() + timeout_s
    records: list[list[Any]] = []
    ends: dict[int, int] = {}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        history.write(INVOKE, READ_COMMITTED, [])
        while len(ends) < partitions:
            if time.monotonic() > deadline:
                missing = sorted(set(range(partitions)) - set(ends))
                history.write(
                    FAIL, READ_COMMITTED, records, error=f"timed out: no end of partitions {missing}"
                )
                return False
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                error = message.error()
                partition = message.partition() or 0
                if error is None:
                    records.append([topic, partition, decode_value(message.value()), message.offset()])
                    ends.pop(partition, None)
                elif error.code() == KafkaError._PARTITION_EOF:
                    ends[partition] = message.offset() or 0
                else:
                    history.write(INFO, ERROR, {"where": "read-committed"}, error=_describe(error))
        history.write(OK, READ_COMMITTED, records, hw=[[topic, p, ends[p]] for p in sorted(ends)])
        return True
    finally:
        consumer.close()


# ---------------------------------------------------------------------------------------------------
# read-raw


class RawReader:
    """Fetches one topic's partitions from whichever broker leads each, over raw connections."""

    def __init__(self, bootstrap: str, topic: str, deadline: float) -> None:
        self.brokers = bootstrap.split(",")
        self.topic = topic
        self.deadline = deadline
        self.clients: dict[str, Any] = {}
        self.last_error = "no attempt"

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    def fetch(self, partition: int, offset: int, isolation: int, max_bytes: int = 4 << 20) -> Any:
        """The partition's data of a Fetch at ``offset`` from its leader (retried across the brokers
        until one answers without error, or the deadline)."""
        from protocol.api import ApiKey
        from tests.support.raw_client import RawClient, fetch_request

        while time.monotonic() < self.deadline:
            for broker in self.brokers:
                try:
                    client = self.clients.get(broker)
                    if client is None:
                        client = self.clients[broker] = RawClient(broker, timeout=5.0)
                    request = fetch_request(
                        self.topic, partition, offset, max_bytes=max_bytes, log_start_offset=-1
                    )
                    request.isolation_level = isolation
                    request.session_id = 0
                    request.session_epoch = -1
                    response: Any = client.request(ApiKey.FETCH, FETCH_VERSION, request)
                except (OSError, ConnectionError) as e:
                    self.last_error = f"{broker}: {e}"
                    stale = self.clients.pop(broker, None)
                    if stale is not None:
                        stale.close()
                    continue
                (data,) = response.responses[0].partitions
                if data.error_code == 0:
                    return data
                self.last_error = f"{broker}: error {data.error_code}"
            time.sleep(0.2)
        raise TimeoutError(f"{self.topic}-{partition} at offset {offset}: {self.last_error}")

    def read_partition(self, partition: int) -> dict[str, Any]:
        from protocol import record_batch

        entries: dict[int, list[Any]] = {}
        offset, hw, log_start = 0, None, 0
        while hw is None or offset < hw:
            data = self.fetch(partition, offset, 0)
            hw, log_start = data.high_watermark, data.log_start_offset
            offset = max(offset, log_start)
            buf = bytes(data.records or b"")
            progressed = False
            for position, header in record_batch.iter_headers(buf):
                if header.last_offset < offset:
                    continue
                records = record_batch.decode_records(buf, position)
                pid, epoch = header.producer_id, header.producer_epoch
                if header.is_control:
                    _, kind = struct.unpack_from(">hh", records[0].key or b"\0\0\xff\xff")
                    name = {CONTROL_ABORT: "abort", CONTROL_COMMIT: "commit"}.get(kind, f"control-{kind}")
                    entries[header.base_offset] = [header.base_offset, pid, epoch, name, None]
                else:
                    kind = "t" if header.is_transactional else "d"
                    for r in records:
                        if r.offset >= offset:
                            entries[r.offset] = [r.offset, pid, epoch, kind, decode_value(r.value)]
                offset = header.last_offset + 1
                progressed = True
            if not progressed and offset < hw:
                time.sleep(0.1)  # nothing complete came back: ask again
        aborted: set[tuple[int, int]] = set()
        offset, lso = 0, None
        while lso is None or offset < lso:
            data = self.fetch(partition, offset, 1)
            lso = data.last_stable_offset
            offset = max(offset, data.log_start_offset)
            aborted |= {(t.producer_id, t.first_offset) for t in data.aborted_transactions or []}
            buf = bytes(data.records or b"")
            headers = list(record_batch.iter_headers(buf))
            if headers:
                offset = max(offset, headers[-1][1].last_offset + 1)
            elif offset < lso:
                time.sleep(0.1)
        return {
            "partition": partition,
            "hw": hw,
            "lso": lso,
            "log_start": log_start,
            "entries": [entries[o] for o in sorted(entries)],
            "aborted": sorted([pid, first] for pid, first in aborted),
        }


def read_raw(bootstrap: str, topic: str, partitions: int, history: HistoryWriter, timeout_s: float) -> bool:
    reader = RawReader(bootstrap, topic, time.monotonic() + timeout_s)
    history.write(INVOKE, READ_RAW, None)
    read: list[dict[str, Any]] = []
    try:
        for partition in range(partitions):
            read.append(reader.read_partition(partition))
    except Exception as e:
        history.write(FAIL, READ_RAW, {"topic": topic, "partitions": read}, error=_describe(e))
        return False
    finally:
        reader.close()
    history.write(OK, READ_RAW, {"topic": topic, "partitions": read})
    return True


# ---------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.txn_copier")
    roles = parser.add_subparsers(dest="role", required=True)
    copy = roles.add_parser("copy")
    for name in ("bootstrap", "input", "output"):
        copy.add_argument(name)
    copy.add_argument("output_partitions", type=int)
    for name in ("group", "txn_id", "name", "history"):
        copy.add_argument(name)
    copy.add_argument("--mode", choices=MODES, default="transactional")
    copy.add_argument("--batch", type=int, default=100)
    copy.add_argument("--hold", default=None)
    copy.add_argument("--transaction-timeout-ms", type=int, default=20000)
    copy.add_argument("--debug", default="", help="librdkafka debug contexts of the producer (eos, ...)")
    for role in (READ_COMMITTED, READ_RAW):
        sub = roles.add_parser(role)
        for name in ("bootstrap", "topic"):
            sub.add_argument(name)
        sub.add_argument("partitions", type=int)
        for name in ("name", "history"):
            sub.add_argument(name)
        sub.add_argument("timeout", type=float)
    args = parser.parse_args(argv)
    # SIGUSR1 dumps every thread's stack to the log: where a stuck copier waits (scenario.describe).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    history = HistoryWriter(args.history, args.name)
    try:
        if args.role == "copy":
            Copier(args, history).run()
            return 0
        read = read_committed if args.role == READ_COMMITTED else read_raw
        return 0 if read(args.bootstrap, args.topic, args.partitions, history, args.timeout) else 1
    finally:
        history.close()


if __name__ == "__main__":
    sys.exit(main())
