"""``samsa console-producer`` and ``samsa console-consumer``: kafka-console-producer.sh and
kafka-console-consumer.sh for Samsa, on aiokafka.

The producer sends each line of stdin as a record, parsed as Kafka's LineMessageReader does
(``--property parse.key=true``, ``key.separator``, ``parse.headers``, ``headers.delimiter``,
``headers.separator``, ``headers.key.separator``, ``ignore.error``, ``null.marker``). The consumer prints
records as Kafka's DefaultMessageFormatter does (``print.timestamp``, ``print.partition``,
``print.offset``, ``print.headers``, ``print.key``, ``print.value``, ``key.separator``,
``line.separator``, ``headers.separator``, ``null.literal``) and ends with ``Processed a total of N
messages`` on stderr. Flag names and defaults are the Kafka tools'.

Client settings from a file: ``--command-config FILE`` (Kafka 3.9's names ``--producer.config`` /
``--consumer.config`` are taken too): its security settings (TLS, SASL; tools/command_config.py) and
the producer or consumer properties listed below; ``--producer-property`` / ``--consumer-property``
take precedence over it, as in Kafka.

One difference: without ``--group`` Kafka's consumer joins a throwaway group ``console-consumer-NNNNN``
that commits nothing; this one consumes without a group (aiokafka assigns it every partition of the
subscribed topics), which prints the same records without needing the group coordinator.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, BinaryIO

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.errors import KafkaError

from server_common.log import setup_logging
from tools import command_config
from tools.admin_client import AdminError
from tools.usage import UsageError, UsageParser

log = logging.getLogger("samsa.console")

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# Kafka client property -> (aiokafka keyword, converter), for --producer-property / --consumer-property.
ClientProperties = dict[str, tuple[str, Callable[[str], Any]]]
_COMMON_PROPERTIES: ClientProperties = {
    "client.id": ("client_id", str),
    "request.timeout.ms": ("request_timeout_ms", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "metadata.max.age.ms": ("metadata_max_age_ms", int),
    "connections.max.idle.ms": ("connections_max_idle_ms", int),
}
PRODUCER_PROPERTIES: ClientProperties = {
    **_COMMON_PROPERTIES,
    "acks": ("acks", lambda v: "all" if v in ("all", "-1") else int(v)),
    "compression.type": ("compression_type", lambda v: None if v == "none" else v),
    "linger.ms": ("linger_ms", int),
    "batch.size": ("max_batch_size", int),
    "max.request.size": ("max_request_size", int),
    "enable.idempotence": ("enable_idempotence", lambda v: v.lower() == "true"),
}
CONSUMER_PROPERTIES: ClientProperties = {
    **_COMMON_PROPERTIES,
    "group.id": ("group_id", str),
    "auto.offset.reset": ("auto_offset_reset", str),
    "enable.auto.commit": ("enable_auto_commit", lambda v: v.lower() == "true"),
    "auto.commit.interval.ms": ("auto_commit_interval_ms", int),
    "isolation.level": ("isolation_level", str),
    "fetch.min.bytes": ("fetch_min_bytes", int),
    "fetch.max.bytes": ("fetch_max_bytes", int),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", int),
    "max.poll.records": ("max_poll_records", int),
    "session.timeout.ms": ("session_timeout_ms", int),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", int),
    "max.poll.interval.ms": ("max_poll_interval_ms", int),
}


class RecordParseError(Exception):
    """A line LineMessageReader cannot parse (Kafka's KafkaException)."""


def _key_values(items: list[str], option: str) -> dict[str, str]:
    """Kafka's CommandLineUtils.parseKeyValueArgs: ``key=value`` with the value taken after the first '='."""
    props = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"Invalid command line properties: {option} {item} is not of the form key=value")
        props[key] = value
    return props


def _client_kwarg(table: ClientProperties, name: str, value: str, where: str = "") -> tuple[str, Any]:
    """The aiokafka keyword and value of client property ``name`` of ``table`` (``where``: the file)."""
    keyword, convert = table[name]
    try:
        return keyword, convert(value)
    except ValueError:
        raise UsageError(f"invalid value {value!r} for {name}{where}") from None


def _client_kwargs(props: dict[str, str], table: ClientProperties) -> dict[str, Any]:
    kwargs = {}
    for name, value in props.items():
        if name not in table:
            raise UsageError(f"unsupported client property {name} (supported: {', '.join(sorted(table))})")
        keyword, converted = _client_kwarg(table, name, value)
        kwargs[keyword] = converted
    return kwargs


# What a client config file may hold that the console tools take from their command line instead.
_COMMAND_LINE_SETTINGS = frozenset({"bootstrap.servers", "key.serializer", "value.serializer"})
_COMMAND_LINE_SETTINGS |= {"key.deserializer", "value.deserializer"}


def _config_file_kwargs(path: str | None, table: ClientProperties) -> dict[str, Any]:
    """aiokafka's keywords from a --command-config (--producer.config, --consumer.config) file: its
    security settings, and the client properties of ``table``; others are ignored with Kafka's warning."""
    if path is None:
        return {}
    props = command_config.read_command_config(path)
    kwargs = command_config.aiokafka_security(command_config.security_from(props, path))
    for name, value in props.items():
        if command_config.is_security_setting(name) or name in _COMMAND_LINE_SETTINGS:
            continue
        if name not in table:
            log.warning("The configuration '%s' was supplied but isn't a known config.", name)
            continue
        keyword, converted = _client_kwarg(table, name, value, f" in {path}")
        kwargs[keyword] = converted
    return kwargs


def _add_config_file_argument(p: UsageParser, kafka_name: str, what: str) -> None:
    command_config.add_argument(
        p,
        "--command-config",
        kafka_name,
        help=f"{what} config properties file (security settings and {what.lower()} properties); "
        f"--{what.lower()}-property takes precedence over it",
    )


def _true(props: dict[str, str], name: str) -> bool:
    return props.get(name, "false").strip().lower() == "true"


async def _run_until_signal(main: Callable[[asyncio.Event], Any]) -> int:
    """Runs ``main(stopping)``; SIGINT and SIGTERM set ``stopping`` (Kafka's tools use shutdown hooks)."""
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    return await main(stopping)


def _run(parser: UsageParser, argv: list[str], command: Callable[[argparse.Namespace], Any]) -> int:
    setup_logging(os.environ.get("SAMSA_LOG_LEVEL") or "WARNING")  # Kafka's tools log at WARN
    try:
        args = parser.parse_args(argv)
        return asyncio.run(command(args))
    except UsageError as e:
        print(e, file=sys.stderr)
        parser.print_usage(sys.stderr)
        return 1
    except AdminError as e:  # a --command-config file that cannot be read or holds a bad setting
        log.error("%s", e)
        return 1


# -- console-producer ---------------------------------------------------------------------------------


class LineReader:
    """Kafka's LineMessageReader: one line -> (key, value, headers), per the reader properties."""

    def __init__(self, props: dict[str, str]) -> None:
        self.parse_key = _true(props, "parse.key")
        self.key_separator = props.get("key.separator", "\t")
        self.parse_headers = _true(props, "parse.headers")
        self.headers_delimiter = props.get("headers.delimiter", "\t")
        self.headers_separator = re.compile(props.get("headers.separator", ","))
        self.headers_key_separator = props.get("headers.key.separator", ":")
        self.ignore_error = _true(props, "ignore.error")
        self.null_marker = props.get("null.marker")
        self.line_number = 0
        separators = {
            "headers.delimiter": self.headers_delimiter,
            "headers.separator": props.get("headers.separator", ","),
            "headers.key.separator": self.headers_key_separator,
        }
        names = list(separators)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                if separators[a] == separators[b]:
                    raise UsageError(f"{a} and {b} may not be equal")
        for name, value in {"key.separator": self.key_separator, **separators}.items():
            if value == self.null_marker:
                raise UsageError(f"null.marker and {name} may not be equal")

    def _field(self, enabled: bool, line: str, start: int, separator: str, what: str) -> str | None:
        if not enabled:
            return None
        index = line.find(separator, start)
        if index == -1:
            if self.ignore_error:
                return None
            raise RecordParseError(f"No {what} found on line number {self.line_number}: '{line}'")
        return line[start:index]

    def _encode(self, text: str | None) -> bytes | None:
        if text is None or text == self.null_marker:
            return None
        return text.encode("utf-8", "surrogateescape")

    def parse(self, line: str) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        self.line_number += 1
        headers_text = self._field(self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter")
        start = 0 if headers_text is None else len(headers_text) + len(self.headers_delimiter)
        key = self._field(self.parse_key, line, start, self.key_separator, "key separator")
        value = line[start + (0 if key is None else len(key) + len(self.key_separator)) :]
        headers: list[tuple[str, bytes | None]] = []
        if headers_text is not None and headers_text != self.null_marker:
            pairs = self.headers_separator.split(headers_text)
            while pairs and not pairs[-1]:
                pairs.pop()  # Java's Pattern.split drops trailing empty strings
            for pair in pairs:
                i = pair.find(self.headers_key_separator)
                if i == -1:
                    if not self.ignore_error:
                        raise RecordParseError(
                            f"No header key separator found in pair '{pair}' "
                            f"on line number {self.line_number}"
                        )
                    headers.append((pair, None))
                    continue
                if pair[:i] == self.null_marker:
                    raise RecordParseError(
                        f"Header keys should not be equal to the null marker '{self.null_marker}' as they "
                        "can't be null"
                    )
                headers.append((pair[:i], self._encode(pair[i + len(self.headers_key_separator) :])))
        return self._encode(key), self._encode(value), headers


async def _stdin_lines(stream: BinaryIO, prompt: bool) -> AsyncIterator[str]:
    """Lines of stdin without their terminators. A daemon thread reads them, so that a signal can end the
    tool while a read blocks (an executor thread would hold up the exit)."""
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes] = asyncio.Queue(maxsize=16)  # bounded: a large file is not read ahead
    fd = stream.fileno()

    def read() -> None:
        chunk = b"."
        while chunk:
            if prompt:
                sys.stdout.write(">")
                sys.stdout.flush()
            try:
                chunk = os.read(fd, 1 << 16)
                asyncio.run_coroutine_threadsafe(chunks.put(chunk), loop).result()
            except (OSError, RuntimeError, asyncio.CancelledError):  # stdin failed, or the tool is ending
                return

    threading.Thread(target=read, name="stdin", daemon=True).start()
    pending = b""
    while chunk := await chunks.get():
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            yield line.removesuffix(b"\r").decode("utf-8", "surrogateescape")
    if pending:
        yield pending.removesuffix(b"\r").decode("utf-8", "surrogateescape")


def _producer_parser() -> UsageParser:
    p = UsageParser(
        prog="samsa console-producer", description="Read lines from stdin and send them to a topic."
    )
    p.add_argument("--bootstrap-server", required=True, metavar="SERVER", help="REQUIRED: the server(s)")
    p.add_argument("--topic", required=True, help="REQUIRED: the topic to produce messages to")
    p.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="PROP",
        help="line reader properties: parse.key, key.separator, parse.headers, headers.delimiter, "
        "headers.separator, headers.key.separator, ignore.error, null.marker",
    )
    p.add_argument(
        "--producer-property", action="append", default=[], metavar="PROP", help="a producer property k=v"
    )
    _add_config_file_argument(p, "--producer.config", "Producer")
    p.add_argument(
        "--compression-codec",
        nargs="?",
        const="gzip",
        default="none",
        choices=CODECS,
        help="none, gzip, snappy, lz4 or zstd; gzip if given without a value",
    )
    p.add_argument("--sync", action="store_true", help="send each record and wait for it before the next")
    p.add_argument("--request-required-acks", default="-1", help="the producer's acks (default -1)")
    p.add_argument("--timeout", type=int, default=1000, metavar="MS", help="linger.ms (default 1000)")
    p.add_argument("--batch-size", type=int, default=16384, help="batch.size in bytes (default 16384)")
    p.add_argument("--request-timeout-ms", type=int, metavar="MS", help="request.timeout.ms")
    p.add_argument("--retry-backoff-ms", type=int, default=100, metavar="MS", help="default 100")
    return p


async def _produce(args: argparse.Namespace) -> int:
    reader = LineReader(_key_values(args.property, "--property"))
    kwargs: dict[str, Any] = {
        "client_id": "console-producer",
        "acks": PRODUCER_PROPERTIES["acks"][1](args.request_required_acks),
        "compression_type": None if args.compression_codec == "none" else args.compression_codec,
        "linger_ms": args.timeout,
        "max_batch_size": args.batch_size,
        "retry_backoff_ms": args.retry_backoff_ms,
    }
    if args.request_timeout_ms is not None:
        kwargs["request_timeout_ms"] = args.request_timeout_ms
    kwargs.update(_config_file_kwargs(args.command_config, PRODUCER_PROPERTIES))
    kwargs.update(
        _client_kwargs(_key_values(args.producer_property, "--producer-property"), PRODUCER_PROPERTIES)
    )

    async def main(stopping: asyncio.Event) -> int:
        producer = AIOKafkaProducer(bootstrap_servers=args.bootstrap_server, **kwargs)
        try:
            await producer.start()
        except KafkaError as e:
            log.error("Cannot connect to %s: %s", args.bootstrap_server, e)
            return 1
        lines = _stdin_lines(sys.stdin.buffer, sys.stdin.isatty())
        stop = asyncio.ensure_future(stopping.wait())
        try:
            while True:
                next_line = asyncio.ensure_future(anext(lines, None))
                await asyncio.wait((next_line, stop), return_when=asyncio.FIRST_COMPLETED)
                if stop.done():
                    next_line.cancel()
                    break
                line = next_line.result()
                if line is None:
                    break
                key, value, headers = reader.parse(line)
                delivery = await producer.send(args.topic, value=value, key=key, headers=headers or None)
                if args.sync:
                    await delivery
                else:
                    delivery.add_done_callback(_error_logger(args.topic, key, value))
        except RecordParseError as e:
            log.error("%s", e)
            return 1
        except KafkaError as e:
            log.error("Error when sending message to topic %s: %s", args.topic, e)
            return 1
        finally:
            stop.cancel()
            await producer.stop()  # sends what is batched
        return 0

    return await _run_until_signal(main)


def _error_logger(topic: str, key: bytes | None, value: bytes | None) -> Callable[[Any], None]:
    """Kafka's ErrorLoggingCallback: an asynchronous send that failed is logged, and the tool goes on."""

    def done(delivery: Any) -> None:
        if delivery.cancelled() or delivery.exception() is None:
            return
        log.error(
            "Error when sending message to topic %s with key: %s, value: %s with error: %s",
            topic,
            "null" if key is None else f"{len(key)} bytes",
            "null" if value is None else f"{len(value)} bytes",
            delivery.exception(),
        )

    return done


def producer_main(argv: list[str]) -> int:
    return _run(_producer_parser(), argv, _produce)


# -- console-consumer ---------------------------------------------------------------------------------


class RecordFormatter:
    """Kafka's DefaultMessageFormatter."""

    def __init__(self, props: dict[str, str]) -> None:
        self.print_timestamp = _true(props, "print.timestamp")
        self.print_partition = _true(props, "print.partition")
        self.print_offset = _true(props, "print.offset")
        self.print_headers = _true(props, "print.headers")
        self.print_key = _true(props, "print.key")
        self.print_value = props.get("print.value", "true").strip().lower() == "true"
        self.key_separator = props.get("key.separator", "\t").encode()
        self.line_separator = props.get("line.separator", "\n").encode()
        self.headers_separator = props.get("headers.separator", ",").encode()
        self.null_literal = props.get("null.literal", "null").encode()

    def format(self, record: Any) -> bytes:
        out: list[bytes] = []
        columns = [
            (self.print_timestamp, self._timestamp),
            (self.print_partition, lambda r: b"Partition:%d" % r.partition),
            (self.print_offset, lambda r: b"Offset:%d" % r.offset),
            (self.print_headers, self._headers),
            (self.print_key, lambda r: self._bytes(r.key)),
        ]
        shown = [render for enabled, render in columns if enabled]
        for i, render in enumerate(shown):
            out.append(render(record))
            last = i == len(shown) - 1 and not self.print_value
            out.append(self.line_separator if last else self.key_separator)
        if self.print_value:
            out += [self._bytes(record.value), self.line_separator]
        return b"".join(out)

    def _bytes(self, data: bytes | None) -> bytes:
        return self.null_literal if data is None else data

    @staticmethod
    def _timestamp(record: Any) -> bytes:
        kind = {0: "CreateTime", 1: "LogAppendTime"}.get(record.timestamp_type)
        return b"NO_TIMESTAMP" if kind is None else f"{kind}:{record.timestamp}".encode()

    def _headers(self, record: Any) -> bytes:
        if not record.headers:
            return b"NO_HEADERS"
        return self.headers_separator.join(k.encode() + b":" + self._bytes(v) for k, v in record.headers)


def _consumer_parser() -> UsageParser:
    p = UsageParser(prog="samsa console-consumer", description="Print records of a topic to stdout.")
    p.add_argument("--bootstrap-server", required=True, metavar="SERVER", help="REQUIRED: the server(s)")
    p.add_argument("--topic", help="the topic to consume")
    p.add_argument("--include", metavar="REGEX", help="a regular expression naming the topics to consume")
    p.add_argument("--partition", type=int, help="the partition to consume (from the end unless --offset)")
    p.add_argument("--offset", help="with --partition: earliest, latest or a non-negative offset")
    p.add_argument("--group", help="the consumer group id")
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="start from the earliest message when the consumer has no committed offset",
    )
    p.add_argument("--max-messages", type=int, metavar="N", help="exit after N messages")
    p.add_argument("--timeout-ms", type=int, metavar="MS", help="exit when no message arrives for MS ms")
    p.add_argument(
        "--property",
        "--formatter-property",
        dest="property",
        action="append",
        default=[],
        metavar="PROP",
        help="formatter properties: print.timestamp, print.key, print.offset, print.partition, "
        "print.headers, print.value, key.separator, line.separator, headers.separator, null.literal",
    )
    p.add_argument(
        "--consumer-property", action="append", default=[], metavar="PROP", help="a consumer property k=v"
    )
    _add_config_file_argument(p, "--consumer.config", "Consumer")
    p.add_argument(
        "--isolation-level",
        choices=("read_committed", "read_uncommitted"),
        default="read_uncommitted",
        help="default read_uncommitted",
    )
    p.add_argument("--skip-message-on-error", action="store_true", help="accepted for compatibility")
    return p


def _start_offset(args: argparse.Namespace) -> str | int:
    """ConsoleConsumerOptions' checks; the start of an assigned partition: earliest, latest or an offset."""
    if (args.topic is None) == (args.include is None):
        raise UsageError("Exactly one of include/topic is required.")
    if args.partition is not None:
        if args.topic is None:
            raise UsageError("The topic is required when partition is specified.")
        if args.from_beginning and args.offset is not None:
            raise UsageError("Options from-beginning and offset cannot be specified together.")
    elif args.offset is not None:
        raise UsageError("The partition is required when offset is specified.")
    if args.offset is None:
        return "earliest" if args.from_beginning else "latest"
    offset = args.offset.lower()
    if offset in ("earliest", "latest"):
        return offset
    if not offset.isdigit():
        raise UsageError(
            f"The provided offset value '{args.offset}' is incorrect. Valid values are 'earliest', "
            "'latest', or a non-negative long."
        )
    return int(offset)


async def _consume(args: argparse.Namespace) -> int:
    start = _start_offset(args)
    formatter = RecordFormatter(_key_values(args.property, "--property"))
    props = _config_file_kwargs(args.command_config, CONSUMER_PROPERTIES)
    props.update(
        _client_kwargs(_key_values(args.consumer_property, "--consumer-property"), CONSUMER_PROPERTIES)
    )
    groups = {g for g in (args.group, props.pop("group_id", None)) if g is not None}
    if len(groups) > 1:
        raise UsageError(
            "The group ids provided in different places (directly using '--group', via "
            "'--consumer-property') do not match. Detected group ids: "
            + ", ".join(f"'{g}'" for g in sorted(groups))
        )
    group = groups.pop() if groups else None
    if group is not None and args.partition is not None:
        raise UsageError("Options group and partition cannot be specified together.")
    reset = props.pop("auto_offset_reset", None)
    if reset is not None and args.from_beginning and reset != "earliest":
        print(
            f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', "
            "please remove one option",
            file=sys.stderr,
        )
        return 1
    kwargs: dict[str, Any] = {
        "client_id": "console-consumer",
        "group_id": group,
        "auto_offset_reset": reset or ("earliest" if args.from_beginning else "latest"),
        "enable_auto_commit": group is not None,
        "isolation_level": args.isolation_level,
        # Java's default, so that a group shared with Java consumers agrees on an assignor.
        "partition_assignment_strategy": (RangePartitionAssignor, RoundRobinPartitionAssignor),
        **props,
    }
    max_messages = args.max_messages if args.max_messages is not None and args.max_messages >= 0 else None
    timeout = args.timeout_ms / 1000 if args.timeout_ms is not None and args.timeout_ms >= 0 else None
    out = sys.stdout.buffer
    count = 0

    async def main(stopping: asyncio.Event) -> int:
        nonlocal count
        consumer = AIOKafkaConsumer(bootstrap_servers=args.bootstrap_server, **kwargs)
        if args.partition is not None:
            partition = TopicPartition(args.topic, args.partition)
            consumer.assign([partition])
        elif args.include is not None:
            consumer.subscribe(pattern=args.include)
        else:
            consumer.subscribe([args.topic])
        try:
            await consumer.start()
        except KafkaError as e:
            log.error("Unknown error when running consumer: %s", e)
            await consumer.stop()
            return 1
        try:
            if args.partition is not None:
                if start == "earliest":
                    await consumer.seek_to_beginning(partition)
                elif start == "latest":
                    await consumer.seek_to_end(partition)
                else:
                    consumer.seek(partition, start)
            waiting_since = time.monotonic()
            while not stopping.is_set() and (max_messages is None or count < max_messages):
                wait = (
                    0.5 if timeout is None else max(0.0, min(0.5, waiting_since + timeout - time.monotonic()))
                )
                batches = await consumer.getmany(
                    timeout_ms=int(wait * 1000),
                    max_records=None if max_messages is None else max_messages - count,
                )
                records = [r for batch in batches.values() for r in batch]
                if not records:
                    if timeout is not None and time.monotonic() - waiting_since >= timeout:
                        log.error(
                            "Error processing message, terminating consumer process: TimeoutException: "
                            "no message for %d ms",
                            args.timeout_ms,
                        )
                        break
                    continue
                waiting_since = time.monotonic()
                try:
                    out.write(b"".join(formatter.format(r) for r in records))
                    out.flush()
                except BrokenPipeError:
                    print("Unable to write to standard out, closing consumer.", file=sys.stderr)
                    break
                count += len(records)
        except KafkaError as e:
            log.error("Error processing message, terminating consumer process: %s", e)
        finally:
            await consumer.stop()  # commits the consumed offsets when in a group
            print(f"Processed a total of {count} messages", file=sys.stderr)
        return 0

    return await _run_until_signal(main)


def consumer_main(argv: list[str]) -> int:
    return _run(_consumer_parser(), argv, _consume)
