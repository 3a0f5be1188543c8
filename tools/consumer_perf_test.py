"""``samsa consumer-perf-test``: Kafka 3.9's kafka-consumer-perf-test.sh (``ConsumerPerformance``) for
Samsa, on confluent-kafka (librdkafka).

Kafka's flags: ``--bootstrap-server`` (``--broker-list``, deprecated), ``--topic``, ``--messages``,
``--group`` (default ``perf-consumer-NNNNN``), ``--fetch-size`` (max.partition.fetch.bytes, 1 MiB),
``--socket-buffer-size``, ``--from-latest``, ``--timeout`` (ms allowed between records, 10 s),
``--consumer.config FILE``, ``--print-metrics``, ``--show-detailed-stats``, ``--reporting-interval``,
``--hide-header``, ``--date-format`` (a java.text.SimpleDateFormat pattern); ``--threads`` and
``--num-fetch-threads`` are accepted and ignored with Kafka's warning. The output is Kafka's: the
header (one line)::

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec

and one line of values at the end, or with ``--show-detailed-stats`` the ``time, threadId, ...`` header
and a line per reporting interval (and no final line), as Kafka prints them. The bytes counted are the
records' keys and values; rebalance time is the time from the subscription (or a revocation) to an
assignment.

Without ``--show-detailed-stats`` Kafka prints nothing until the end; this tool also writes a progress
line on stderr every reporting interval (``N messages consumed, X MB, Y nMsg.sec in the last interval``),
which leaves stdout as Kafka's.

The consumer is librdkafka's, configured with the Java consumer's property names where they differ
(tools/producer_perf_test.py ``librdkafka_config``), ``client.id=perf-consumer-client`` unless set, and
``check.crcs=false`` as Kafka's tool sets it. It polls batches of up to ``max.poll.records`` (500).
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import operator
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from server_common.config import ConfigError, read_properties
from server_common.log import setup_logging
from tools.producer_perf_test import (
    MISSING_CLIENT,
    StatisticsCollector,
    create_client,
    librdkafka_config,
    metrics_of,
    print_metrics,
    printf,
)
from tools.usage import UsageError, UsageParser

log = logging.getLogger("samsa.perf")

HEADER_FIELDS = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
DEFAULT_DATE_FORMAT = "yyyy-MM-dd HH:mm:ss:SSS"
MB = 1024 * 1024
# librdkafka prefetches up to queued.min.messages (100,000) records and, when its queue is that full,
# stops fetching for fetch.queue.backoff.ms (1 s by default) even if the tool empties the queue in a
# millisecond: runs stalled for a second every few hundred thousand records. The Java consumer fetches as
# soon as its buffered records are taken.
CONSUMER_DEFAULTS = {"fetch.queue.backoff.ms": "5"}


# -- java.text.SimpleDateFormat ------------------------------------------------------------------------

_MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]  # fmt: skip
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _zone(t: dt.datetime, count: int, letter: str) -> str:
    offset = t.utcoffset() or dt.timedelta(0)
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    hours, mins = divmod(abs(minutes), 60)
    if letter == "z":
        return t.tzname() or f"GMT{sign}{hours:02d}:{mins:02d}"
    if letter == "X" and minutes == 0:
        return "Z"
    if letter == "X" and count == 1:
        return f"{sign}{hours:02d}"
    if letter == "X" and count >= 3:
        return f"{sign}{hours:02d}:{mins:02d}"
    return f"{sign}{hours:02d}{mins:02d}"


def _field(t: dt.datetime, letter: str, count: int) -> str:
    def number(value: int) -> str:
        return str(value).zfill(count)

    if letter == "y":
        return str(t.year % 100).zfill(2) if count == 2 else number(t.year)
    if letter == "M":
        if count >= 4:
            return _MONTHS[t.month - 1]
        return _MONTHS[t.month - 1][:3] if count == 3 else number(t.month)
    if letter == "d":
        return number(t.day)
    if letter == "D":
        return number(t.timetuple().tm_yday)
    if letter == "E":
        day = _DAYS[t.weekday()]
        return day if count >= 4 else day[:3]
    if letter == "u":
        return number(t.isoweekday())
    if letter == "a":
        return "AM" if t.hour < 12 else "PM"
    if letter == "H":
        return number(t.hour)
    if letter == "k":
        return number(t.hour or 24)
    if letter == "K":
        return number(t.hour % 12)
    if letter == "h":
        return number(t.hour % 12 or 12)
    if letter == "m":
        return number(t.minute)
    if letter == "s":
        return number(t.second)
    if letter == "S":
        return number(t.microsecond // 1000)
    if letter in "zZX":
        return _zone(t, count, letter)
    raise ValueError(f"Illegal pattern character '{letter}'")


class SimpleDateFormat:
    """A java.text.SimpleDateFormat pattern applied to epoch milliseconds in the local time zone:
    letters y M d D E u a H k K h m s S z Z X, ``'quoted text'`` and ``''`` for a quote. ValueError
    ("Illegal pattern character") for other letters, as Java's constructor."""

    def __init__(self, pattern: str) -> None:
        self.parts: list[tuple[str, int] | str] = []
        i = 0
        while i < len(pattern):
            c = pattern[i]
            if c == "'":
                if pattern.startswith("''", i):
                    self.parts.append("'")
                    i += 2
                    continue
                text, i = [], i + 1
                while True:  # quoted text, in which '' is a quote
                    if i >= len(pattern):
                        raise ValueError("Unterminated quote")
                    if pattern.startswith("''", i):
                        text.append("'")
                        i += 2
                    elif pattern[i] == "'":
                        i += 1
                        break
                    else:
                        text.append(pattern[i])
                        i += 1
                self.parts.append("".join(text))
            elif c.isascii() and c.isalpha():
                j = i
                while j < len(pattern) and pattern[j] == c:
                    j += 1
                _field(dt.datetime(2000, 1, 1).astimezone(), c, j - i)  # rejects unknown letters
                self.parts.append((c, j - i))
                i = j
            else:
                self.parts.append(c)
                i += 1

    def format(self, epoch_ms: float) -> str:
        t = dt.datetime.fromtimestamp(epoch_ms / 1000.0).astimezone()
        return "".join(part if isinstance(part, str) else _field(t, *part) for part in self.parts)


# -- the command line ---------------------------------------------------------------------------------


def parser() -> UsageParser:
    p = UsageParser(
        prog="samsa consumer-perf-test",
        description="This tool is used to verify the consumer performance.",
    )
    p.add_argument(
        "--bootstrap-server",
        metavar="server to connect to",
        help="REQUIRED unless --broker-list(deprecated) is specified. The server(s) to connect to.",
    )
    p.add_argument(
        "--broker-list",
        metavar="broker-list",
        help="DEPRECATED, use --bootstrap-server instead; ignored if --bootstrap-server is specified. The "
        "broker list string in the form HOST1:PORT1,HOST2:PORT2.",
    )
    p.add_argument("--topic", metavar="topic", help="REQUIRED: The topic to consume from.")
    p.add_argument(
        "--group", metavar="gid", help="The group id to consume on. (default: perf-consumer-NNNNN)"
    )
    p.add_argument(
        "--fetch-size",
        type=int,
        default=1024 * 1024,
        metavar="size",
        help="The amount of data to fetch in a single request. (default: 1048576)",
    )
    p.add_argument(
        "--from-latest",
        action="store_true",
        help="If the consumer does not already have an established offset to consume from, start with the "
        "latest message present in the log rather than the earliest message.",
    )
    p.add_argument(
        "--socket-buffer-size",
        type=int,
        default=2 * 1024 * 1024,
        metavar="size",
        help="The size of the tcp RECV size. (default: 2097152)",
    )
    p.add_argument(
        "--threads", type=int, metavar="count", help="DEPRECATED AND IGNORED: Number of processing threads."
    )
    p.add_argument(
        "--num-fetch-threads",
        type=int,
        metavar="count",
        help="DEPRECATED AND IGNORED: Number of fetcher threads.",
    )
    p.add_argument(
        "--consumer.config",
        dest="consumer_config",
        metavar="config file",
        help="Consumer config properties file.",
    )
    p.add_argument("--print-metrics", action="store_true", help="Print out the metrics.")
    p.add_argument(
        "--show-detailed-stats",
        action="store_true",
        help="If set, stats are reported for each reporting interval as configured by reporting-interval",
    )
    p.add_argument(
        "--timeout",
        type=int,
        nargs="?",
        const=10_000,
        default=10_000,
        metavar="milliseconds",
        help="The maximum allowed time in milliseconds between returned records. (default: 10000)",
    )
    p.add_argument(
        "--messages", type=int, metavar="count", help="REQUIRED: The number of messages to send or consume"
    )
    p.add_argument(
        "--reporting-interval",
        type=_digits,
        default=5_000,
        metavar="interval_ms",
        help="Interval in milliseconds at which to print progress info. (default: 5000)",
    )
    p.add_argument(
        "--date-format",
        default=DEFAULT_DATE_FORMAT,
        metavar="date format",
        help="The date format to use for formatting the time field. See java.text.SimpleDateFormat for "
        f"options. (default: {DEFAULT_DATE_FORMAT})",
    )
    p.add_argument(
        "--hide-header", action="store_true", help="If set, skips printing the header for the stats"
    )
    return p


def _digits(value: str) -> int:
    """Kafka's ``regex("^\\d+$")`` converter of --reporting-interval."""
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"Value [{value}] did not match pattern [^\\d+$]")
    return int(value)


def check_args(args: argparse.Namespace) -> None:
    """Kafka 3.9's checks: the required options, the deprecated ones' warning, the interval and the date
    format."""
    if args.bootstrap_server is None and args.broker_list is None:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    for name in ("topic", "messages"):
        if getattr(args, name) is None:
            raise UsageError(f'Missing required argument "[{name}]"')
    if args.threads is not None or args.num_fetch_threads is not None:
        print(
            "WARNING: option [threads] and [num-fetch-threads] have been deprecated and will be ignored by "
            "the test"
        )
    if args.reporting_interval <= 0:
        raise UsageError("Reporting interval must be greater than 0.")
    try:
        args.date_formatter = SimpleDateFormat(args.date_format)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.group is None:
        args.group = f"perf-consumer-{random.randrange(100_000)}"


def consumer_props(args: argparse.Namespace) -> dict[str, str]:
    """Kafka's ConsumerPerfOptions.props: the --consumer.config file, then the tool's own settings."""
    props: dict[str, str] = {}
    if args.consumer_config is not None:
        try:
            props.update(read_properties(Path(args.consumer_config).read_text(encoding="utf-8")))
        except OSError as e:
            raise ConfigError(f"{args.consumer_config}: {e.strerror or e}") from None
    props["bootstrap.servers"] = args.bootstrap_server or args.broker_list
    props["group.id"] = args.group
    props["receive.buffer.bytes"] = str(args.socket_buffer_size)
    props["max.partition.fetch.bytes"] = str(args.fetch_size)
    props["auto.offset.reset"] = "latest" if args.from_latest else "earliest"
    props["check.crcs"] = "false"
    props.setdefault("client.id", "perf-consumer-client")
    return props


def print_header(show_detailed_stats: bool, out: TextIO) -> None:
    if show_detailed_stats:
        first = "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec"
    else:
        first = "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec"
    print(first + HEADER_FIELDS, file=out, flush=True)


def progress_line(
    bytes_read: int,
    last_bytes_read: int,
    messages_read: int,
    last_messages_read: int,
    start_ms: float,
    end_ms: float,
    date_format: SimpleDateFormat,
    join_time_ms_in_single_round: int,
) -> str:
    """Kafka's printConsumerProgress (thread id 0): the basic figures of the interval, then the extended
    ones (its rebalance time, fetch time and the rates over the fetch time)."""
    elapsed_ms = end_ms - start_ms
    total_mb = bytes_read / MB
    interval_mb = (bytes_read - last_bytes_read) / MB
    interval_messages = messages_read - last_messages_read
    mb_per_sec = _div(1000.0 * interval_mb, elapsed_ms)
    messages_per_sec = _div(interval_messages, elapsed_ms) * 1000.0
    fetch_time_ms = int(elapsed_ms) - join_time_ms_in_single_round
    fetch_mb_per_sec = 0.0 if fetch_time_ms <= 0 else 1000.0 * interval_mb / fetch_time_ms
    fetch_messages_per_sec = 0.0 if fetch_time_ms <= 0 else 1000.0 * interval_messages / fetch_time_ms
    basic = printf(
        "%s, %d, %.4f, %.4f, %d, %.4f",
        date_format.format(end_ms),
        0,
        total_mb,
        mb_per_sec,
        messages_read,
        messages_per_sec,
    )
    extended = printf(
        ", %d, %d, %.4f, %.4f",
        join_time_ms_in_single_round,
        fetch_time_ms,
        fetch_mb_per_sec,
        fetch_messages_per_sec,
    )
    return basic + extended


def final_line(
    start_ms: float,
    end_ms: float,
    total_bytes: int,
    total_messages: int,
    join_time_ms: int,
    date_format: SimpleDateFormat,
) -> str:
    """Kafka's final values line (without --show-detailed-stats)."""
    elapsed_sec = (end_ms - start_ms) / 1000.0
    fetch_time_ms = int(end_ms - start_ms) - join_time_ms
    total_mb = total_bytes / MB
    return printf(
        "%s, %s, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f",
        date_format.format(start_ms),
        date_format.format(end_ms),
        total_mb,
        _div(total_mb, elapsed_sec),
        total_messages,
        _div(total_messages, elapsed_sec),
        join_time_ms,
        fetch_time_ms,
        _div(total_mb, fetch_time_ms / 1000.0),
        _div(total_messages, fetch_time_ms / 1000.0),
    )


def _div(a: float, b: float) -> float:
    """Java's double division: Infinity (or NaN for 0/0) by zero."""
    if b == 0:
        return float("nan") if a == 0 else float("inf") if a > 0 else float("-inf")
    return a / b


def _wall_ms() -> float:
    return time.time() * 1000.0


class RebalanceTimer:
    """Kafka's ConsumerPerfRebListener: the time from the subscription, or from a revocation, to the next
    assignment, in total and since the last progress line."""

    def __init__(self, join_start_ms: float) -> None:
        self.join_start_ms = join_start_ms
        self.join_time_ms = 0
        self.in_single_round = 0

    def on_revoke(self, consumer: Any, partitions: Any) -> None:
        self.join_start_ms = _wall_ms()

    def on_assign(self, consumer: Any, partitions: Any) -> None:
        elapsed = int(_wall_ms() - self.join_start_ms)
        self.join_time_ms += elapsed
        self.in_single_round += elapsed


# -- the run --------------------------------------------------------------------------------------------


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    props = consumer_props(args)
    try:
        max_poll_records = int(props.pop("max.poll.records", "500"))
    except ValueError:
        raise ConfigError("Invalid value for configuration max.poll.records") from None
    conf: dict[str, Any] = librdkafka_config(props, CONSUMER_DEFAULTS)
    try:
        from confluent_kafka import Consumer
    except ImportError:
        print(MISSING_CLIENT.format(tool="samsa consumer-perf-test"), file=sys.stderr)
        return 1
    if not args.hide_header:
        print_header(args.show_detailed_stats, out)
    statistics = StatisticsCollector()
    if args.print_metrics:
        conf.setdefault("statistics.interval.ms", "500")
        conf["stats_cb"] = statistics
    conf["error_cb"] = lambda e: log.warning("%s", e.str())
    consumer = create_client(Consumer, conf)
    start_ms = _wall_ms()
    rebalance = RebalanceTimer(start_ms)
    messages_read, bytes_read = consume(consumer, args, rebalance, max_poll_records, out, err)
    end_ms = _wall_ms()
    metrics = None
    if args.print_metrics:
        statistics.received.clear()
        consumer.pause(consumer.assignment())
        deadline = time.monotonic() + 2.0
        while not statistics.received.is_set() and time.monotonic() < deadline:
            consumer.poll(0.1)
        metrics = statistics.latest
    consumer.close()
    if not args.show_detailed_stats:
        line = final_line(
            start_ms, end_ms, bytes_read, messages_read, rebalance.join_time_ms, args.date_formatter
        )
        print(line, file=out, flush=True)
    if metrics is not None:
        print_metrics(metrics_of(metrics), out)
    return 0


def consume(
    consumer: Any, args: argparse.Namespace, rebalance: RebalanceTimer, batch: int, out: TextIO, err: TextIO
) -> tuple[int, int]:
    """Kafka's consume loop: poll (100 ms) until ``--messages`` are read or no record came for
    ``--timeout`` ms, counting each polled batch whole; a progress line every reporting interval (on
    stdout with --show-detailed-stats, else on stderr). Returns (messages, bytes)."""
    num_messages, timeout_ms, interval = args.messages, args.timeout, args.reporting_interval
    consumer.subscribe([args.topic], on_assign=rebalance.on_assign, on_revoke=rebalance.on_revoke)
    messages_read = bytes_read = last_messages_read = last_bytes_read = 0
    now = last_report = last_consumed = _wall_ms()
    poll: Callable[..., list[Any]] = consumer.consume
    errors_seen: set[str] = set()
    error_of, key_of = operator.methodcaller("error"), operator.methodcaller("key")
    while messages_read < num_messages and now - last_consumed <= timeout_ms:
        records = poll(batch, 0.1)
        now = _wall_ms()
        if records:
            last_consumed = now
            if any(map(error_of, records)):
                records = _without_errors(records, errors_seen)
            # Every record's key and value bytes, counted in C (len(message) is its value's length).
            messages_read += len(records)
            bytes_read += sum(map(len, records)) + sum(map(len, filter(None, map(key_of, records))))
        if records and now - last_report >= interval:
            if args.show_detailed_stats:
                line = progress_line(
                    bytes_read,
                    last_bytes_read,
                    messages_read,
                    last_messages_read,
                    last_report,
                    now,
                    args.date_formatter,
                    rebalance.in_single_round,
                )
                print(line, file=out, flush=True)
            else:
                rate = (messages_read - last_messages_read) * 1000.0 / (now - last_report)
                print(
                    f"{messages_read} messages consumed, {bytes_read / MB:.4f} MB, "
                    f"{rate:.4f} nMsg.sec in the last interval",
                    file=err,
                    flush=True,
                )
            rebalance.in_single_round = 0
            last_report, last_messages_read, last_bytes_read = now, messages_read, bytes_read
    if messages_read < num_messages:
        print(
            f"WARNING: Exiting before consuming the expected number of messages: timeout ({timeout_ms} ms) "
            "exceeded. You can use the --timeout option to increase the timeout.",
            file=out,
        )
    return messages_read, bytes_read


def _without_errors(records: list[Any], errors_seen: set[str]) -> list[Any]:
    """The records of a batch, without the errors it holds (each error logged once: it may come at every
    poll)."""
    kept = []
    for record in records:
        error = record.error()
        if error is None:
            kept.append(record)
        elif error.str() not in errors_seen:
            errors_seen.add(error.str())
            log.warning("%s", error.str())
    return kept


def main(argv: list[str]) -> int:
    setup_logging(os.environ.get("SAMSA_LOG_LEVEL") or "WARNING")  # Kafka's tools log at WARN
    p = parser()
    if not argv:  # Kafka: the help and exit 1
        print("This tool is used to verify the consumer performance.", file=sys.stderr)
        p.print_help(sys.stderr)
        return 1
    try:
        args = p.parse_args(argv)
        check_args(args)
    except UsageError as e:
        print(e, file=sys.stderr)
        p.print_usage(sys.stderr)
        return 1
    try:
        return run(args, sys.stdout, sys.stderr)
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `| head`: the reader has gone; Python would complain again at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as e:  # the client's KafkaException: a bad setting
        if type(e).__name__ != "KafkaException":
            raise
        print(f"org.apache.kafka.common.KafkaException: {e.args[0].str() if e.args else e}", file=sys.stderr)
        return 1
