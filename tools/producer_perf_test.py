"""``samsa producer-perf-test``: Kafka 3.9's kafka-producer-perf-test.sh (``ProducerPerformance``) for
Samsa, on confluent-kafka (librdkafka).

The flags, the checks and the output are Kafka's: ``--topic``, ``--num-records``, one of
``--record-size`` / ``--payload-file`` (``--payload-delimiter``) / ``--payload-monotonic``,
``--throughput`` (records/s, -1 unthrottled), ``--producer-props k=v ...`` and/or ``--producer.config
FILE`` (the command-line ones win), ``--print-metrics``, ``--transactional-id`` and
``--transaction-duration-ms`` (transactions when > 0). Every 5 s, at a delivery, a window line::

    N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency.

and at the end the total (3.9's ``%f`` records/sec)::

    N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency, P ms 50th, P ms 95th,
    P ms 99th, P ms 99.9th.

Latency is a record's time from ``produce()`` to its delivery report (librdkafka's
``rd_kafka_message_latency``, Kafka's send-to-callback time); percentiles come from at most 500,000
sampled latencies, as Kafka's Stats keeps them. Average and maximum are kept to the microsecond (Kafka
truncates each latency to a whole millisecond; its percentiles stay whole milliseconds here too).

The client is librdkafka, not Kafka's Java producer: a Python client would measure itself, not the
broker. The Java client's property names are translated where librdkafka's differ (``buffer.memory``,
``max.request.size``, ``send.buffer.bytes``, ``sasl.jaas.config``, ``ssl.truststore.*`` of PEM files,
...), and where the Java producer's defaults differ from librdkafka's they are set, so that a run
compares with a Kafka run of the same flags: ``linger.ms=0``, ``batch.size=16384``,
``enable.idempotence=true``, ``buffer.memory`` 32 MiB, ``delivery.timeout.ms=120000``, and
``client.id=perf-producer-client``. A setting neither client knows is dropped with the Java client's
warning ("The configuration 'x' was supplied but isn't a known config."). ``--print-metrics`` prints
librdkafka's statistics (its counters per client, broker and partition) in Kafka's table layout.

Shared with ``samsa consumer-perf-test``: ``librdkafka_config`` (the property translation),
``create_client`` and ``print_metrics``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from server_common.config import ConfigError, read_properties
from server_common.log import setup_logging
from tools.usage import UsageError, UsageParser

log = logging.getLogger("samsa.perf")

DEFAULT_TRANSACTIONAL_ID = "performance-producer-default-transactional-id"
REPORTING_INTERVAL_MS = 5000
MAX_SAMPLED_LATENCIES = 500_000
MISSING_CLIENT = (
    "{tool} runs on confluent-kafka (librdkafka), which is not installed: "
    "pip install 'confluent-kafka>=2.3' (or the samsa-broker[test] extra)"
)

# -- client properties: the Java client's names and defaults on librdkafka -----------------------------

# What the tools take from their own flags, or what librdkafka has no use for (byte arrays are sent as
# they are; the Java client's classes do not exist here).
IGNORED_PROPERTIES = frozenset(
    {
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
        "interceptor.classes",
        "metric.reporters",
        "partitioner.class",
        "sasl.jaas.config",  # turned into sasl.username / sasl.password
        "max.block.ms",  # the tool's own wait for room in the buffer
    }
)
# The Java producer's defaults where librdkafka's differ (Kafka 3.9's ProducerConfig).
JAVA_PRODUCER_DEFAULTS = {
    "linger.ms": "0",
    "batch.size": "16384",
    "enable.idempotence": "true",
    "queue.buffering.max.kbytes": "32768",  # buffer.memory = 32 MiB
    "queue.buffering.max.messages": "2147483647",  # the Java producer bounds bytes only
    "message.timeout.ms": "120000",  # delivery.timeout.ms
}
_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def _kbytes(value: str) -> str:
    return str(max(1, int(value) // 1024))


def _buffer_bytes(value: str) -> str:
    return "0" if int(value) < 0 else value  # Java: -1 = the OS default; librdkafka: 0


def _assignors(value: str) -> str:
    names = []
    for name in (n.strip() for n in value.split(",") if n.strip()):
        names.append(_ASSIGNORS.get(name, name))
    return ",".join(names)


# Java name -> (librdkafka name, value converter).
RENAMED_PROPERTIES: dict[str, tuple[str, Callable[[str], str]]] = {
    "buffer.memory": ("queue.buffering.max.kbytes", _kbytes),
    "max.request.size": ("message.max.bytes", str),
    "send.buffer.bytes": ("socket.send.buffer.bytes", _buffer_bytes),
    "receive.buffer.bytes": ("socket.receive.buffer.bytes", _buffer_bytes),
    "delivery.timeout.ms": ("message.timeout.ms", str),
    "partition.assignment.strategy": ("partition.assignment.strategy", _assignors),
}


def _java_security(props: Mapping[str, str]) -> dict[str, str]:
    """librdkafka's settings for the Java client's security settings that librdkafka does not share:
    the JAAS login module's credentials, PEM trust and key stores, the endpoint check's empty value.
    ConfigError for what librdkafka cannot read (JKS and PKCS#12 trust stores)."""
    from network.client_security import jaas_options

    conf: dict[str, str] = {}
    if props.get("sasl.jaas.config"):
        _, options = jaas_options(props["sasl.jaas.config"])
        for option in ("username", "password"):
            if option in options:
                conf[f"sasl.{option}"] = options[option]
    truststore = props.get("ssl.truststore.location")
    if truststore:
        kind = props.get("ssl.truststore.type", "JKS").upper()
        if kind != "PEM":
            raise ConfigError(
                f"ssl.truststore.type={kind}: librdkafka reads PEM trust stores only "
                "(ssl.truststore.type=PEM, or ssl.ca.location=<PEM file>)"
            )
        conf["ssl.ca.location"] = truststore
    if props.get("ssl.truststore.certificates"):
        conf["ssl.ca.pem"] = props["ssl.truststore.certificates"]
    keystore_type = props.get("ssl.keystore.type", "").upper()
    if keystore_type == "JKS" or (props.get("ssl.keystore.location") and keystore_type not in ("", "PKCS12")):
        raise ConfigError(f"ssl.keystore.type={keystore_type}: librdkafka reads PKCS12 key stores only")
    if props.get("ssl.keystore.certificate.chain"):
        conf["ssl.certificate.pem"] = props["ssl.keystore.certificate.chain"]
    if props.get("ssl.keystore.key"):
        conf["ssl.key.pem"] = props["ssl.keystore.key"]
    algorithm = props.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None and algorithm.strip() == "":
        conf["ssl.endpoint.identification.algorithm"] = "none"
    return conf


_SECURITY_HANDLED = frozenset(
    {
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.truststore.certificates",
        "ssl.truststore.password",
        "ssl.keystore.type",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
    }
)


def librdkafka_config(props: Mapping[str, str], defaults: Mapping[str, str] = {}) -> dict[str, str]:
    """librdkafka's configuration for a Kafka client's properties (Java names or librdkafka's), over
    ``defaults``. A setting of a given name replaces the default it translates to."""
    conf = dict(defaults)
    for name, value in props.items():
        if name in IGNORED_PROPERTIES or name in _SECURITY_HANDLED:
            continue
        if name in RENAMED_PROPERTIES:
            target, convert = RENAMED_PROPERTIES[name]
            try:
                conf[target] = convert(value)
            except ValueError:
                raise ConfigError(f"Invalid value {value} for configuration {name}") from None
        else:
            conf[name] = value
    conf.update(_java_security(props))
    return conf


def create_client(factory: Callable[[dict[str, Any]], Any], conf: dict[str, Any]) -> Any:
    """``factory(conf)`` (a confluent_kafka Producer or Consumer); a setting librdkafka does not know is
    dropped with the Java client's warning, as Kafka's clients ignore unknown configs. KafkaException for
    a bad value."""
    from confluent_kafka import KafkaException

    conf = dict(conf)
    while True:
        try:
            return factory(conf)
        except KafkaException as e:
            message = str(e.args[0].str() if e.args and hasattr(e.args[0], "str") else e)
            prefix = 'No such configuration property: "'
            if prefix not in message:
                raise
            name = message.split(prefix, 1)[1].split('"', 1)[0]
            if name not in conf:
                raise
            log.warning("The configuration '%s' was supplied but isn't a known config.", name)
            del conf[name]


class StatisticsCollector:
    """librdkafka's statistics (``stats_cb``, called from ``poll``): the latest JSON document, parsed
    when asked for (``--print-metrics``, the wait for the producer id)."""

    def __init__(self) -> None:
        self.text: str | None = None
        self.received = threading.Event()

    def __call__(self, text: str) -> None:
        self.text = text
        self.received.set()

    @property
    def latest(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.text) if self.text is not None else None
        except ValueError:
            return None


def metrics_of(stats: Mapping[str, Any]) -> dict[str, object]:
    """Kafka's ``group:name:{tags}`` metric names for librdkafka's statistics: the client's counters
    (group ``librdkafka``), each broker's (``librdkafka-broker``, tag ``node-id``) and each partition's
    (``librdkafka-partition``, tags ``topic``, ``partition``); window statistics (rtt, latencies,
    batch sizes) give their ``-avg``, ``-max``, ``-p99`` ... values."""
    client_id = stats.get("client_id", "")
    metrics: dict[str, object] = {}

    def put(group: str, name: str, tags: Mapping[str, object], value: object) -> None:
        tag_text = "{" + ", ".join(f"{k}={v}" for k, v in tags.items()) + "}"
        metrics[f"{group}:{name}:{tag_text}"] = value

    def scalars(group: str, values: Mapping[str, Any], tags: Mapping[str, object]) -> None:
        for name, value in values.items():
            if isinstance(value, bool):
                continue
            if isinstance(value, int | float):
                put(group, name, tags, value)
            elif isinstance(value, dict) and "avg" in value and "max" in value:  # a window statistic
                for field in ("min", "max", "avg", "p50", "p95", "p99", "p99_99", "cnt"):
                    if isinstance(value.get(field), int | float):
                        put(group, f"{name}-{field.replace('_', '.')}", tags, value[field])

    scalars("librdkafka", stats, {"client-id": client_id})
    for broker in stats.get("brokers", {}).values():
        if broker.get("nodeid", -1) < 0:
            continue  # bootstrap and internal connections
        scalars("librdkafka-broker", broker, {"client-id": client_id, "node-id": broker["nodeid"]})
    for topic, topic_stats in stats.get("topics", {}).items():
        for partition, partition_stats in topic_stats.get("partitions", {}).items():
            if int(partition) < 0:
                continue  # librdkafka's UA (unassigned) partition
            tags = {"client-id": client_id, "topic": topic, "partition": partition}
            scalars("librdkafka-partition", partition_stats, tags)
    return metrics


def print_metrics(metrics: Mapping[str, object], out: TextIO | None = None) -> None:
    """Kafka's ToolsUtils.printMetrics: a blank line, the header, then ``name : value`` sorted by name,
    names padded to the longest, floats with three decimals."""
    out = out or sys.stdout
    if not metrics:
        return
    width = max(len(name) for name in metrics)
    print(f"\n{'Metric Name':<{width}}   Value", file=out)
    for name in sorted(metrics):
        value = metrics[name]
        text = f"{value:.3f}" if isinstance(value, float) else str(value)
        print(f"{name:<{width}} : {text}", file=out)


# -- the command line ---------------------------------------------------------------------------------


def parser() -> UsageParser:
    p = UsageParser(
        prog="samsa producer-perf-test",
        description="This tool is used to verify the producer performance.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    payload = p.add_mutually_exclusive_group(required=True)
    p.add_argument("--topic", required=True, metavar="TOPIC", help="produce messages to this topic")
    p.add_argument(
        "--num-records",
        required=True,
        type=int,
        metavar="NUM-RECORDS",
        dest="num_records",
        help="number of messages to produce",
    )
    payload.add_argument(
        "--record-size",
        type=int,
        metavar="RECORD-SIZE",
        dest="record_size",
        help="message size in bytes. Note that you must provide exactly one of --record-size or "
        "--payload-file or --payload-monotonic.",
    )
    payload.add_argument(
        "--payload-file",
        metavar="PAYLOAD-FILE",
        dest="payload_file",
        help="file to read the message payloads from. This works only for UTF-8 encoded text files. "
        "Payloads will be read from this file and a payload will be randomly selected when sending "
        "messages.",
    )
    payload.add_argument(
        "--payload-monotonic",
        action="store_true",
        dest="payload_monotonic",
        help="payload is monotonically increasing integer.",
    )
    p.add_argument(
        "--payload-delimiter",
        default="\\n",
        metavar="PAYLOAD-DELIMITER",
        dest="payload_delimiter",
        help="provides delimiter to be used when --payload-file is provided. Defaults to new line. Note "
        "that this parameter will be ignored if --payload-file is not provided.",
    )
    p.add_argument(
        "--throughput",
        required=True,
        type=float,
        metavar="THROUGHPUT",
        help="throttle maximum message throughput to *approximately* THROUGHPUT messages/sec. Set this "
        "to -1 to disable throttling.",
    )
    p.add_argument(
        "--producer-props",
        nargs="+",
        metavar="PROP-NAME=PROP-VALUE",
        dest="producer_props",
        help="kafka producer related configuration properties like bootstrap.servers,client.id etc. "
        "These configs take precedence over those passed via --producer.config.",
    )
    p.add_argument(
        "--producer.config",
        metavar="CONFIG-FILE",
        dest="producer_config_file",
        help="producer config properties file.",
    )
    p.add_argument(
        "--print-metrics",
        action="store_true",
        dest="print_metrics",
        help="print out metrics at the end of the test.",
    )
    p.add_argument(
        "--transactional-id",
        default=DEFAULT_TRANSACTIONAL_ID,
        metavar="TRANSACTIONAL-ID",
        dest="transactional_id",
        help="The transactionalId to use if transaction-duration-ms is > 0. Useful when testing the "
        "performance of concurrent transactions.",
    )
    p.add_argument(
        "--transaction-duration-ms",
        type=int,
        default=0,
        metavar="TRANSACTION-DURATION",
        dest="transaction_duration_ms",
        help="The max age of each transaction. The commitTransaction will be called after this time has "
        "elapsed. Transactions are only enabled if this value is positive.",
    )
    return p


def check_args(args: argparse.Namespace) -> None:
    """Kafka 3.9's checks after parsing."""
    if args.num_records <= 0:
        raise UsageError("--num-records should be greater than zero")
    if args.record_size is not None and args.record_size <= 0:
        raise UsageError("--record-size should be greater than zero")
    if args.producer_props is None and args.producer_config_file is None:
        raise UsageError("Either --producer-props or --producer.config must be specified.")


def read_props(producer_props: Sequence[str] | None, config_file: str | None) -> dict[str, str]:
    """Kafka's readProps: the file's properties, then ``--producer-props`` (``name=value``, exactly one
    '='), and ``client.id`` perf-producer-client unless set."""
    props: dict[str, str] = {}
    if config_file is not None:
        try:
            props.update(read_properties(Path(config_file).read_text(encoding="utf-8")))
        except OSError as e:
            raise ConfigError(f"{config_file}: {e.strerror or e}") from None
    for prop in producer_props or ():
        pieces = prop.split("=")
        if len(pieces) != 2:
            raise ConfigError(f"Invalid property: {prop}")
        props[pieces[0]] = pieces[1]
    props.setdefault("client.id", "perf-producer-client")
    return props


def read_payload_file(path: str | None, delimiter: str, out: TextIO) -> list[bytes]:
    """Kafka's readPayloadFile: the file's UTF-8 text split at ``delimiter`` (a Java regular expression in
    Kafka; the plain string here), trailing empty payloads dropped as Java's String.split drops them."""
    if path is None:
        return []
    resolved = Path(path).absolute()
    print(f"Reading payloads from: {resolved}", file=out)
    if not resolved.is_file() or resolved.stat().st_size == 0:
        raise ConfigError("File does not exist or empty file provided.")
    pieces = resolved.read_text(encoding="utf-8").split(delimiter)
    while len(pieces) > 1 and pieces[-1] == "":
        pieces.pop()
    print(f"Number of messages read: {len(pieces)}", file=out)
    return [piece.encode("utf-8") for piece in pieces]


# -- what is sent ---------------------------------------------------------------------------------------


class Payloads:
    """The records' values, as Kafka's generateRandomPayload picks them: a random one of the file's
    (``random(0)``), the record's number (``--payload-monotonic``), or ``record_size`` random upper-case
    letters. Kafka draws new letters for every record; drawing them is not free in Python, so the
    letters here are slices at moving offsets of one random block: each record differs from the last,
    and compresses as Kafka's do."""

    POOL_EXTRA = 1 << 16

    def __init__(self, record_size: int | None, from_file: list[bytes], monotonic: bool) -> None:
        self.random = random.Random(0)
        self.record_size = record_size
        self.from_file = from_file
        self.monotonic = monotonic
        self.pool = b""
        self.offset = 0
        if not from_file and record_size is not None:
            letters = self.random.choices(range(65, 91), k=record_size + self.POOL_EXTRA)
            self.pool = bytes(letters)

    def next(self, i: int) -> bytes:
        if self.from_file:
            return self.from_file[self.random.randrange(len(self.from_file))]
        if self.record_size is not None:
            self.offset = (self.offset + 7919) % self.POOL_EXTRA
            return self.pool[self.offset : self.offset + self.record_size]
        return str(i).encode()


class Throttler:
    """Kafka's ThroughputThrottler: sleeps, on average, 1/throughput s per record when ahead of the
    target, at least 2 ms at a time; -1 (any negative) never throttles."""

    MIN_SLEEP_NS = 2_000_000

    def __init__(self, target: float, start_ms: float) -> None:
        self.target = target
        self.start_ms = start_ms
        self.sleep_time_ns = int(1e9 / target) if target > 0 else sys.maxsize
        self.sleep_deficit_ns = 0

    def should_throttle(self, amount_so_far: int, send_start_ms: float) -> bool:
        if self.target < 0:
            return False
        elapsed_sec = (send_start_ms - self.start_ms) / 1000.0
        return elapsed_sec > 0 and amount_so_far / elapsed_sec > self.target

    def throttle(self, sleep: Callable[[float], object]) -> None:
        """``sleep(seconds)`` serves the producer's delivery reports meanwhile."""
        if self.target == 0:
            while True:  # Kafka waits forever for a wakeup that never comes
                sleep(1.0)
        self.sleep_deficit_ns += self.sleep_time_ns
        if self.sleep_deficit_ns >= self.MIN_SLEEP_NS:
            start = time.monotonic_ns()
            remaining = self.sleep_deficit_ns
            while remaining > 0:
                sleep(remaining / 1e9)
                remaining = self.sleep_deficit_ns - (time.monotonic_ns() - start)
            self.sleep_deficit_ns = 0


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class Stats:
    """Kafka's ProducerPerformance.Stats: totals, the current window (a line every ``reporting_interval``
    ms, printed at a delivery), and a sample of at most 500,000 latencies for the percentiles."""

    def __init__(self, num_records: int, reporting_interval: int, out: TextIO) -> None:
        self.out = out
        self.start = self.window_start = _now_ms()
        self.iteration = 0
        self.sampling = num_records // min(num_records, MAX_SAMPLED_LATENCIES)
        self.latencies: list[float] = []
        self.reporting_interval = reporting_interval
        self.count = self.bytes = 0
        self.max_latency = self.total_latency = 0.0
        self.window_count = self.window_bytes = 0
        self.window_max_latency = self.window_total_latency = 0.0

    def record(self, latency: float, nbytes: int, now: float) -> None:
        self.count += 1
        self.bytes += nbytes
        self.total_latency += latency
        if latency > self.max_latency:
            self.max_latency = latency
        self.window_count += 1
        self.window_bytes += nbytes
        self.window_total_latency += latency
        if latency > self.window_max_latency:
            self.window_max_latency = latency
        if self.iteration % self.sampling == 0:
            self.latencies.append(latency)
        self.iteration += 1
        if now - self.window_start >= self.reporting_interval:
            self.print_window()
            self.new_window()

    def print_window(self) -> None:
        elapsed = _now_ms() - self.window_start
        line = printf(
            "%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.",
            self.window_count,
            _per_sec(self.window_count, elapsed),
            _per_sec(self.window_bytes, elapsed) / (1024.0 * 1024.0),
            _ratio(self.window_total_latency, self.window_count),
            self.window_max_latency,
        )
        print(line, file=self.out, flush=True)

    def new_window(self) -> None:
        self.window_start = _now_ms()
        self.window_count = self.window_bytes = 0
        self.window_max_latency = self.window_total_latency = 0.0

    def total_line(self) -> str:
        elapsed = _now_ms() - self.start
        return printf(
            "%d records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, "
            "%d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th.",
            self.count,
            _per_sec(self.count, elapsed),
            _per_sec(self.bytes, elapsed) / (1024.0 * 1024.0),
            _ratio(self.total_latency, self.count),
            self.max_latency,
            *percentiles(self.latencies, 0.5, 0.95, 0.99, 0.999),
        )

    def print_total(self) -> None:
        print(self.total_line(), file=self.out, flush=True)


def _per_sec(amount: float, elapsed_ms: float) -> float:
    """Java's ``1000.0 * amount / elapsed``: Infinity, or NaN for 0/0, when no time has passed."""
    if elapsed_ms <= 0:
        return float("nan") if amount == 0 else float("inf")
    return 1000.0 * amount / elapsed_ms


_CONVERSION = re.compile(r"%[-#+ 0,(]*\d*(?:\.\d+)?[a-zA-Z%]")


def printf(template: str, *args: object) -> str:
    """Java's String.format for the conversions the tools use (%d, %s, %f, %.Nf): Python's, but a
    non-finite double prints as Java prints it (NaN, Infinity, -Infinity)."""
    values = iter(args)
    out = []
    for piece in re.split(f"({_CONVERSION.pattern})", template):
        if not _CONVERSION.fullmatch(piece):
            out.append(piece)
        elif piece == "%%":
            out.append("%")
        elif piece == "%n":
            out.append("\n")
        else:
            value = next(values)
            if isinstance(value, float) and not math.isfinite(value):
                out.append("NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity")
            else:
                out.append(piece % value)
    return "".join(out)


def _ratio(total: float, count: int) -> float:
    return total / count if count else float("nan")


def percentiles(latencies: list[float], *ps: float) -> list[int]:
    """Kafka's Stats.percentiles: the sorted sample's element at ``int(p * size)``, in whole ms (0 for
    an empty sample, where Kafka would fail)."""
    ordered = sorted(latencies)
    if not ordered:
        return [0 for _ in ps]
    return [int(ordered[min(int(p * len(ordered)), len(ordered) - 1)]) for p in ps]


# -- the run --------------------------------------------------------------------------------------------


def producer_config(args: argparse.Namespace) -> tuple[dict[str, str], bool, float]:
    """librdkafka's configuration of the run, whether it is transactional (3.9: duration > 0), and
    max.block.ms in seconds (Kafka's default 60 s)."""
    props = read_props(args.producer_props, args.producer_config_file)
    transactional = args.transaction_duration_ms > 0
    if transactional:
        props["transactional.id"] = args.transactional_id
    try:
        max_block_s = int(props.get("max.block.ms", "60000")) / 1000.0
    except ValueError:
        raise ConfigError(f"Invalid value {props['max.block.ms']} for configuration max.block.ms") from None
    defaults = dict(JAVA_PRODUCER_DEFAULTS)
    if "enable.idempotence" not in props and not _idempotence_compatible(props):
        defaults["enable.idempotence"] = "false"
    conf = librdkafka_config(props, defaults)
    if transactional and not {"delivery.timeout.ms", "message.timeout.ms"} & props.keys():
        # librdkafka insists on message.timeout.ms <= transaction.timeout.ms (60 s); Java does not.
        transaction_timeout = conf.get("transaction.timeout.ms", "60000")
        if transaction_timeout.isdigit() and int(transaction_timeout) < int(conf["message.timeout.ms"]):
            conf["message.timeout.ms"] = transaction_timeout
    return conf, transactional, max_block_s


def _idempotence_compatible(props: Mapping[str, str]) -> bool:
    """Whether the settings allow the Java producer's default idempotence: Kafka 3.9 turns it off, when
    not set explicitly, for acks other than all, retries=0 or more than 5 requests in flight."""
    acks = props.get("acks", props.get("request.required.acks", "all")).strip().lower()
    in_flight = props.get("max.in.flight.requests.per.connection", props.get("max.in.flight", "5"))
    try:
        return acks in ("all", "-1") and int(props.get("retries", "1")) != 0 and int(in_flight) <= 5
    except ValueError:
        return True  # the bad value is librdkafka's to report


def run(args: argparse.Namespace, out: TextIO) -> int:
    conf, transactional, max_block_s = producer_config(args)
    payloads = Payloads(
        args.record_size,
        read_payload_file(
            args.payload_file, "\n" if args.payload_delimiter == "\\n" else args.payload_delimiter, out
        ),
        args.payload_monotonic,
    )
    try:
        from confluent_kafka import Producer
    except ImportError:
        print(MISSING_CLIENT.format(tool="samsa producer-perf-test"), file=sys.stderr)
        return 1
    statistics = StatisticsCollector()
    idempotent = conf.get("enable.idempotence", "false").strip().lower() == "true" and not transactional
    if args.print_metrics or idempotent:
        conf.setdefault("statistics.interval.ms", "100" if idempotent else "500")
        conf["stats_cb"] = statistics  # type: ignore[assignment]
    conf["error_cb"] = _log_client_error  # type: ignore[assignment]
    producer = create_client(Producer, conf)
    if transactional:
        producer.init_transactions()
    elif idempotent:
        wait_for_producer_id(producer, statistics, max_block_s)

    stats = Stats(args.num_records, REPORTING_INTERVAL_MS, out)
    record = stats.record

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            print(f"org.apache.kafka.common.KafkaException: {err.str()}", file=sys.stderr)
            return
        record(msg.latency() * 1000.0, len(msg), _now_ms())

    start_ms = _now_ms()
    throttler = Throttler(args.throughput, start_ms)
    topic, produce, poll, next_payload = args.topic, producer.produce, producer.poll, payloads.next
    transaction_size = 0
    transaction_start = 0.0
    for i in range(args.num_records):
        payload = next_payload(i)
        if transactional and transaction_size == 0:
            producer.begin_transaction()
            transaction_start = _now_ms()
        send_start = _now_ms()
        try:
            produce(topic, payload, on_delivery=on_delivery)
        except BufferError:  # buffer.memory is full: Kafka's send blocks up to max.block.ms
            _produce_when_room(producer, topic, payload, on_delivery, max_block_s)
        if not i & 63:  # serve delivery reports: librdkafka measures a latency when its report is served
            poll(0)
        transaction_size += 1
        if transactional and args.transaction_duration_ms <= send_start - transaction_start:
            producer.commit_transaction()
            transaction_size = 0
        if throttler.should_throttle(i, send_start):
            throttler.throttle(poll)
    if transactional and transaction_size:
        producer.commit_transaction()

    remaining = producer.flush(max(0.0, int(conf["message.timeout.ms"]) / 1000.0 + 5))
    if remaining:
        print(f"{remaining} records were not delivered", file=sys.stderr)
    stats.print_total()
    if args.print_metrics:
        statistics.received.clear()
        deadline = time.monotonic() + 2.0
        while not statistics.received.is_set() and time.monotonic() < deadline:
            producer.poll(0.1)
        if statistics.latest is not None:
            print_metrics(metrics_of(statistics.latest), out)
    return 0


def wait_for_producer_id(producer: Any, statistics: StatisticsCollector, timeout_s: float) -> bool:
    """Waits, before the clock starts, until the idempotent producer holds its producer id (librdkafka's
    statistics say ``eos.idemp_state`` Assigned); False after ``timeout_s``. librdkafka asks for the id
    on a 500 ms retry timer when no broker connection is up yet, which is always the case at start: the
    first half second of records would wait for it, which the Java producer's figures do not show."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        statistics.received.clear()
        producer.poll(0.05)
        if statistics.received.is_set():
            latest = statistics.latest or {}
            if latest.get("eos", {}).get("idemp_state") == "Assigned":
                return True
    return False


def _produce_when_room(
    producer: Any, topic: str, payload: bytes, on_delivery: Any, max_block_s: float
) -> None:
    deadline = time.monotonic() + max_block_s
    while True:
        producer.poll(0.005)
        try:
            producer.produce(topic, payload, on_delivery=on_delivery)
            return
        except BufferError:
            if time.monotonic() >= deadline:
                raise ConfigError(
                    f"org.apache.kafka.common.errors.TimeoutException: the producer's buffer stayed full "
                    f"for max.block.ms ({int(max_block_s * 1000)} ms)"
                ) from None


def _log_client_error(err: Any) -> None:
    log.warning("%s", err.str())


def main(argv: list[str]) -> int:
    setup_logging(os.environ.get("SAMSA_LOG_LEVEL") or "WARNING")  # Kafka's tools log at WARN
    p = parser()
    if not argv:  # Kafka prints the help and exits 0
        p.print_help()
        return 0
    try:
        args = p.parse_args(argv)
        check_args(args)
    except UsageError as e:
        p.print_usage(sys.stderr)
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return 1
    try:
        return run(args, sys.stdout)
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `| head`: the reader has gone; Python would complain again at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as e:  # the client's KafkaException: a bad setting, a failed transaction
        if type(e).__name__ != "KafkaException":
            raise
        print(f"org.apache.kafka.common.KafkaException: {e.args[0].str() if e.args else e}", file=sys.stderr)
        return 1
