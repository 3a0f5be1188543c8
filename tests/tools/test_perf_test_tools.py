"""``samsa producer-perf-test`` and ``samsa consumer-perf-test`` without a cluster: Kafka 3.9's command
lines and checks, the Java client's properties on librdkafka, and the output lines computed as
ProducerPerformance.Stats and ConsumerPerformance compute them."""

from __future__ import annotations

import datetime as dt
import io
import re
from pathlib import Path
from typing import Any

import pytest

from server_common.config import ConfigError
from tools import COMMANDS
from tools import consumer_perf_test as cperf
from tools import producer_perf_test as pperf
from tools.usage import UsageError

# Kafka 3.9's printf formats of ProducerPerformance.Stats, as regular expressions.
WINDOW_LINE = re.compile(
    r"^\d+ records sent, \d+\.\d records/sec \(\d+\.\d\d MB/sec\), \d+\.\d ms avg latency, "
    r"\d+\.\d ms max latency\.$"
)
TOTAL_LINE = re.compile(
    r"^(\d+) records sent, \d+\.\d{6} records/sec \(\d+\.\d\d MB/sec\), \d+\.\d\d ms avg latency, "
    r"\d+\.\d\d ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$"
)


def producer_args(*argv: str) -> Any:
    args = pperf.parser().parse_args(list(argv))
    pperf.check_args(args)
    return args


def consumer_args(*argv: str) -> Any:
    args = cperf.parser().parse_args(list(argv))
    cperf.check_args(args)
    return args


BASE = ("--topic", "t", "--num-records", "10", "--throughput", "-1")


def test_samsa_registers_both_perf_tests() -> None:
    assert COMMANDS["producer-perf-test"][0] == "tools.producer_perf_test:main"
    assert COMMANDS["consumer-perf-test"][0] == "tools.consumer_perf_test:main"


# -- producer-perf-test: the command line ------------------------------------------------------------


def test_producer_takes_kafkas_flags() -> None:
    args = producer_args(
        *BASE,
        "--record-size",
        "100",
        "--producer-props",
        "bootstrap.servers=h:1",
        "acks=1",
        "--print-metrics",
    )
    assert (args.topic, args.num_records, args.record_size, args.throughput) == ("t", 10, 100, -1.0)
    assert args.producer_props == ["bootstrap.servers=h:1", "acks=1"]
    assert args.print_metrics
    # Kafka 3.9's transaction defaults: off (duration 0), and the fixed transactional id.
    assert (args.transaction_duration_ms, args.transactional_id) == (0, pperf.DEFAULT_TRANSACTIONAL_ID)
    args = producer_args(
        *BASE, "--payload-monotonic", "--producer.config", "f", "--transaction-duration-ms", "5"
    )
    assert args.payload_monotonic and args.producer_config_file == "f" and args.transaction_duration_ms == 5


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--topic", "t", "--num-records", "0", "--throughput", "1", "--record-size", "1", "--producer-props",
          "a=b"), "--num-records should be greater than zero"),
        ((*BASE, "--record-size", "0", "--producer-props", "a=b"),
         "--record-size should be greater than zero"),
        ((*BASE, "--record-size", "10"), "Either --producer-props or --producer.config must be specified."),
        ((*BASE, "--producer-props", "a=b"), "one of the arguments --record-size --payload-file"),
        ((*BASE, "--record-size", "1", "--payload-monotonic", "--producer-props", "a=b"), "not allowed with"),
        (("--num-records", "1", "--throughput", "1", "--record-size", "1", "--producer-props", "a=b"),
         "--topic"),
    ],
)  # fmt: skip
def test_producer_refuses_what_kafka_refuses(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        producer_args(*argv)


def test_producer_main_prints_help_without_arguments_and_usage_on_a_mistake(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert pperf.main([]) == 0
    assert "--num-records" in capsys.readouterr().out
    assert pperf.main([*BASE, "--record-size", "0", "--producer-props", "a=b"]) == 1
    err = capsys.readouterr().err
    assert "usage: samsa producer-perf-test" in err and "--record-size should be greater than zero" in err


def test_producer_props_override_the_config_file_and_default_the_client_id(tmp_path: Path) -> None:
    config = tmp_path / "producer.properties"
    config.write_text("acks=1\nlinger.ms=7\nclient.id=from-file\n")
    assert pperf.read_props(["acks=all"], str(config)) == {
        "acks": "all",
        "linger.ms": "7",
        "client.id": "from-file",
    }
    assert pperf.read_props(["acks=0"], None) == {"acks": "0", "client.id": "perf-producer-client"}
    with pytest.raises(ConfigError, match="Invalid property: a=b=c"):
        pperf.read_props(["a=b=c"], None)  # Kafka splits at every '=' and wants two pieces
    with pytest.raises(ConfigError, match=r"missing\.properties"):
        pperf.read_props(None, str(tmp_path / "missing.properties"))


def test_payload_file_is_split_at_the_delimiter_as_kafka_reports_it(tmp_path: Path) -> None:
    path = tmp_path / "payloads.txt"
    path.write_text("one\ntwo\nthree\n")
    out = io.StringIO()
    assert pperf.read_payload_file(str(path), "\n", out) == [b"one", b"two", b"three"]
    assert out.getvalue() == f"Reading payloads from: {path}\nNumber of messages read: 3\n"
    path.write_text("a|b")
    assert pperf.read_payload_file(str(path), "|", io.StringIO()) == [b"a", b"b"]
    path.write_text("")
    with pytest.raises(ConfigError, match=re.escape("File does not exist or empty file provided.")):
        pperf.read_payload_file(str(path), "\n", io.StringIO())
    assert pperf.read_payload_file(None, "\n", out) == []


def test_payloads_are_random_letters_of_the_size_a_file_pick_or_the_record_number() -> None:
    sized = pperf.Payloads(100, [], False)
    first, second = sized.next(0), sized.next(1)
    assert len(first) == len(second) == 100 and first != second
    assert set(first) <= set(range(65, 91))
    picked = pperf.Payloads(None, [b"x", b"y"], False)
    assert {picked.next(i) for i in range(50)} == {b"x", b"y"}
    monotonic = pperf.Payloads(None, [], True)
    assert [monotonic.next(i) for i in (0, 1, 42)] == [b"0", b"1", b"42"]


# -- producer-perf-test: the Java client's properties on librdkafka -----------------------------------


def test_java_producer_defaults_are_set_where_librdkafka_differs() -> None:
    conf, transactional, max_block_s = pperf.producer_config(
        producer_args(*BASE, "--record-size", "1", "--producer-props", "bootstrap.servers=h:1")
    )
    assert not transactional and max_block_s == 60.0
    assert conf["bootstrap.servers"] == "h:1" and conf["client.id"] == "perf-producer-client"
    assert conf["linger.ms"] == "0" and conf["batch.size"] == "16384" and conf["enable.idempotence"] == "true"
    assert conf["queue.buffering.max.kbytes"] == "32768" and conf["message.timeout.ms"] == "120000"


def test_idempotence_is_off_by_default_for_settings_kafka_turns_it_off_for() -> None:
    for props in (["acks=1"], ["acks=0"], ["retries=0"], ["max.in.flight.requests.per.connection=6"]):
        conf, _, _ = pperf.producer_config(
            producer_args(*BASE, "--record-size", "1", "--producer-props", *props)
        )
        assert conf["enable.idempotence"] == "false", props
    conf, _, _ = pperf.producer_config(
        producer_args(*BASE, "--record-size", "1", "--producer-props", "acks=1", "enable.idempotence=true")
    )
    assert conf["enable.idempotence"] == "true"  # set explicitly: librdkafka reports the conflict


def test_transactions_take_the_id_and_a_message_timeout_within_the_transaction_timeout() -> None:
    args = producer_args(
        *BASE, "--record-size", "1", "--producer-props", "a=b", "--transaction-duration-ms", "100",
        "--transactional-id", "tx-1",
    )  # fmt: skip
    conf, transactional, _ = pperf.producer_config(args)
    assert transactional and conf["transactional.id"] == "tx-1" and conf["message.timeout.ms"] == "60000"


def test_java_property_names_become_librdkafkas() -> None:
    conf = pperf.librdkafka_config(
        {
            "buffer.memory": "1048576",
            "max.request.size": "2000000",
            "send.buffer.bytes": "-1",
            "delivery.timeout.ms": "5000",
            "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
            "max.block.ms": "100",
            "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
            "compression.type": "lz4",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="u" password="p";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/ca.pem",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert conf == {
        "queue.buffering.max.kbytes": "1024",
        "message.max.bytes": "2000000",
        "socket.send.buffer.bytes": "0",
        "message.timeout.ms": "5000",
        "partition.assignment.strategy": "roundrobin",
        "compression.type": "lz4",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "p",
        "ssl.ca.location": "/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }
    with pytest.raises(ConfigError, match="librdkafka reads PEM trust stores only"):
        pperf.librdkafka_config({"ssl.truststore.location": "/t.jks"})
    with pytest.raises(ConfigError, match=re.escape("Invalid value x for configuration buffer.memory")):
        pperf.librdkafka_config({"buffer.memory": "x"})


def test_a_setting_librdkafka_does_not_know_is_dropped_with_kafkas_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    producer = pperf.create_client(
        confluent_kafka.Producer, {"bootstrap.servers": "127.0.0.1:1", "foo.bar": "1"}
    )
    assert producer is not None
    assert "The configuration 'foo.bar' was supplied but isn't a known config." in caplog.text
    with pytest.raises(confluent_kafka.KafkaException):
        pperf.create_client(confluent_kafka.Producer, {"linger.ms": "not a number"})


# -- producer-perf-test: Stats and the throttler -----------------------------------------------------


def test_stats_lines_are_kafkas(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(pperf, "_now_ms", lambda: clock[0])
    out = io.StringIO()
    stats = pperf.Stats(4, 5000, out)
    for latency, now in ((2.0, 1100.0), (4.0, 1200.0), (6.0, 1300.0)):
        clock[0] = now
        stats.record(latency, 1024 * 1024, now)
    assert out.getvalue() == ""
    clock[0] = 6000.0  # 5 s after the window started: the window line, at a delivery
    stats.record(8.0, 1024 * 1024, 6000.0)
    assert (
        out.getvalue()
        == "4 records sent, 0.8 records/sec (0.80 MB/sec), 5.0 ms avg latency, 8.0 ms max latency.\n"
    )
    assert WINDOW_LINE.match(out.getvalue().rstrip("\n"))
    clock[0] = 11000.0
    assert stats.total_line() == (
        "4 records sent, 0.400000 records/sec (0.40 MB/sec), 5.00 ms avg latency, 8.00 ms max latency, "
        "6 ms 50th, 8 ms 95th, 8 ms 99th, 8 ms 99.9th."
    )
    assert TOTAL_LINE.match(stats.total_line())


def test_printf_writes_non_finite_doubles_as_java() -> None:
    assert pperf.printf("%d, %.4f, %f, %.1f, %s%%", 3, 1 / 3, float("inf"), float("nan"), "x") == (
        "3, 0.3333, Infinity, NaN, x%"
    )
    assert pperf.printf("%.2f ms%n", float("-inf")) == "-Infinity ms\n"


def test_percentiles_are_taken_as_kafka_takes_them() -> None:
    latencies = [float(i) for i in range(1000, 0, -1)]  # 1..1000 ms, unsorted
    assert pperf.percentiles(latencies, 0.5, 0.95, 0.99, 0.999) == [501, 951, 991, 1000]
    assert pperf.percentiles([3.7], 0.5, 0.999) == [3, 3]  # whole milliseconds
    assert pperf.percentiles([], 0.5) == [0]


def test_stats_sample_at_most_500000_latencies() -> None:
    stats = pperf.Stats(1_500_000, 5000, io.StringIO())
    assert stats.sampling == 3
    for i in range(9):
        stats.record(float(i), 1, 0.0)
    assert stats.latencies == [0.0, 3.0, 6.0]
    assert pperf.Stats(10, 5000, io.StringIO()).sampling == 1


def test_throttler_sleeps_as_kafkas_throughput_throttler() -> None:
    throttler = pperf.Throttler(1000.0, start_ms=0.0)
    assert not throttler.should_throttle(500, 1000.0)  # 500/s: behind the target
    assert throttler.should_throttle(1500, 1000.0)  # 1500/s: ahead
    assert not throttler.should_throttle(10, 0.0)  # no time elapsed yet
    slept: list[float] = []
    throttler.throttle(slept.append)  # 1 ms of deficit: less than the 2 ms minimum
    assert slept == []
    throttler.throttle(lambda s: slept.append(s) or __import__("time").sleep(s))
    assert slept and abs(slept[0] - 0.002) < 1e-9 and throttler.sleep_deficit_ns == 0
    assert not pperf.Throttler(-1, 0.0).should_throttle(10**9, 1.0)


# -- --print-metrics ----------------------------------------------------------------------------------


def test_metrics_are_printed_in_kafkas_table_layout() -> None:
    stats = {
        "client_id": "c",
        "txmsgs": 10,
        "name": "c#producer-1",
        "brokers": {
            "h:1/1": {"nodeid": 1, "tx": 3, "rtt": {"min": 1, "max": 9, "avg": 5, "p50": 4, "p99": 9}},
            "h:1/bootstrap": {"nodeid": -1, "tx": 1},
        },
        "topics": {"t": {"partitions": {"0": {"txmsgs": 10}, "-1": {"txmsgs": 0}}}},
    }
    metrics = pperf.metrics_of(stats)
    assert metrics["librdkafka:txmsgs:{client-id=c}"] == 10
    assert metrics["librdkafka-broker:rtt-avg:{client-id=c, node-id=1}"] == 5
    assert metrics["librdkafka-partition:txmsgs:{client-id=c, topic=t, partition=0}"] == 10
    assert not any("bootstrap" in name or "partition=-1" in name for name in metrics)
    out = io.StringIO()
    pperf.print_metrics({"g:a:{}": 1.5, "g:bb:{}": 2}, out)
    # Kafka pads the names to the longest name, not to the header's "Metric Name".
    assert out.getvalue() == "\nMetric Name   Value\ng:a:{}  : 1.500\ng:bb:{} : 2\n"


# -- consumer-perf-test -------------------------------------------------------------------------------


def test_consumer_takes_kafkas_flags_and_defaults() -> None:
    args = consumer_args("--bootstrap-server", "h:1", "--topic", "t", "--messages", "5")
    assert (args.fetch_size, args.socket_buffer_size, args.timeout, args.reporting_interval) == (
        1048576,
        2097152,
        10000,
        5000,
    )
    assert re.fullmatch(r"perf-consumer-\d{1,5}", args.group)
    assert args.date_format == "yyyy-MM-dd HH:mm:ss:SSS" and not args.hide_header
    args = consumer_args(
        "--broker-list", "h:2", "--topic", "t", "--messages", "5", "--timeout", "--group", "g"
    )
    assert (args.broker_list, args.timeout, args.group) == (
        "h:2",
        10000,
        "g",
    )  # --timeout's value is optional


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--topic", "t", "--messages", "1"), 'Missing required argument "[bootstrap-server]"'),
        (("--bootstrap-server", "h:1", "--messages", "1"), 'Missing required argument "[topic]"'),
        (("--bootstrap-server", "h:1", "--topic", "t"), 'Missing required argument "[messages]"'),
        (("--bootstrap-server", "h:1", "--topic", "t", "--messages", "1", "--reporting-interval", "-5"),
         "did not match pattern"),
        (("--bootstrap-server", "h:1", "--topic", "t", "--messages", "1", "--reporting-interval", "0"),
         "Reporting interval must be greater than 0."),
        (("--bootstrap-server", "h:1", "--topic", "t", "--messages", "1", "--date-format", "yyyy-QQ"),
         "Illegal pattern character 'Q'"),
    ],
)  # fmt: skip
def test_consumer_refuses_what_kafka_refuses(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        consumer_args(*argv)


def test_consumer_warns_of_the_deprecated_thread_options(capsys: pytest.CaptureFixture[str]) -> None:
    consumer_args("--bootstrap-server", "h:1", "--topic", "t", "--messages", "1", "--threads", "3")
    assert "option [threads] and [num-fetch-threads] have been deprecated" in capsys.readouterr().out


def test_consumer_main_without_arguments_prints_the_help_and_fails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cperf.main([]) == 1
    err = capsys.readouterr().err
    assert "This tool is used to verify the consumer performance." in err and "--messages" in err


def test_consumer_props_are_the_files_then_the_tools_own(tmp_path: Path) -> None:
    config = tmp_path / "consumer.properties"
    config.write_text("group.id=ignored\nfetch.max.wait.ms=100\nclient.id=mine\n")
    args = consumer_args(
        "--bootstrap-server", "h:1", "--topic", "t", "--messages", "1", "--group", "g", "--from-latest",
        "--fetch-size", "4096", "--consumer.config", str(config),
    )  # fmt: skip
    assert cperf.consumer_props(args) == {
        "group.id": "g",
        "fetch.max.wait.ms": "100",
        "client.id": "mine",
        "bootstrap.servers": "h:1",
        "receive.buffer.bytes": "2097152",
        "max.partition.fetch.bytes": "4096",
        "auto.offset.reset": "latest",
        "check.crcs": "false",
    }
    conf = pperf.librdkafka_config(cperf.consumer_props(args))
    assert conf["socket.receive.buffer.bytes"] == "2097152" and "receive.buffer.bytes" not in conf


def test_headers_are_kafkas() -> None:
    out = io.StringIO()
    cperf.print_header(False, out)
    cperf.print_header(True, out)
    assert out.getvalue().splitlines() == [
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec",
        "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec",
    ]


def local_ms(*fields: int) -> float:
    return dt.datetime(*fields).timestamp() * 1000.0  # type: ignore[misc]


def test_final_line_is_computed_and_formatted_as_kafkas() -> None:
    fmt = cperf.SimpleDateFormat(cperf.DEFAULT_DATE_FORMAT)
    start = local_ms(2024, 3, 5, 7, 8, 9, 12000)
    # 2 MiB and 1000 records in 2 s, 500 ms of it joining the group.
    line = cperf.final_line(start, start + 2000, 2 * 1024 * 1024, 1000, 500, fmt)
    assert line == (
        "2024-03-05 07:08:09:012, 2024-03-05 07:08:11:012, 2.0000, 1.0000, 1000, 500.0000, 500, 1500, "
        "1.3333, 666.6667"
    )


def test_detailed_progress_line_is_kafkas() -> None:
    fmt = cperf.SimpleDateFormat(cperf.DEFAULT_DATE_FORMAT)
    start = local_ms(2024, 3, 5, 7, 8, 9)
    line = cperf.progress_line(3 * 1024 * 1024, 1024 * 1024, 3000, 1000, start, start + 1000, fmt, 200)
    assert line == "2024-03-05 07:08:10:000, 0, 3.0000, 2.0000, 3000, 2000.0000, 200, 800, 2.5000, 2500.0000"


def test_simple_date_format_patterns() -> None:
    t = local_ms(2024, 3, 5, 17, 8, 9, 45000)
    assert cperf.SimpleDateFormat("yyyy-MM-dd HH:mm:ss:SSS").format(t) == "2024-03-05 17:08:09:045"
    assert cperf.SimpleDateFormat("yy/M/d h:mm a").format(t) == "24/3/5 5:08 PM"
    assert (
        cperf.SimpleDateFormat("EEE, d MMM yyyy 'at' HH 'o''clock'").format(t)
        == "Tue, 5 Mar 2024 at 17 o'clock"
    )
    assert cperf.SimpleDateFormat("EEEE MMMM").format(t) == "Tuesday March"
    offset = dt.datetime.fromtimestamp(t / 1000).astimezone().strftime("%z")
    assert cperf.SimpleDateFormat("Z").format(t) == offset
    with pytest.raises(ValueError, match="Illegal pattern character 'q'"):
        cperf.SimpleDateFormat("q")


# -- the loops, over fake clients ---------------------------------------------------------------------


class FakeMessage:
    def __init__(self, value: bytes, key: bytes | None = None, latency: float = 0.002) -> None:
        self.value, self._key, self._latency = value, key, latency

    def latency(self) -> float:
        return self._latency

    def key(self) -> bytes | None:
        return self._key

    def error(self) -> None:
        return None

    def __len__(self) -> int:
        return len(self.value)


class FakeProducer:
    """confluent_kafka.Producer's calls the tool makes; the first produce finds the buffer full."""

    made: list[FakeProducer] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf
        self.pending: list[tuple[bytes, Any]] = []
        self.sent: list[bytes] = []
        self.calls: list[str] = []
        self.full_once = True
        FakeProducer.made.append(self)

    def produce(self, topic: str, value: bytes, on_delivery: Any) -> None:
        if self.full_once:
            self.full_once = False
            self.calls.append("buffer-full")
            raise BufferError("Local: Queue full")
        self.pending.append((value, on_delivery))
        self.calls.append("produce")

    def poll(self, timeout: float = 0) -> int:
        pending, self.pending = self.pending, []
        for value, on_delivery in pending:
            self.sent.append(value)
            on_delivery(None, FakeMessage(value))
        return len(pending)

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return 0

    def init_transactions(self) -> None:
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def commit_transaction(self) -> None:
        self.poll()
        self.calls.append("commit")


def test_producer_run_sends_each_record_once_and_commits_transactions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    monkeypatch.setattr(confluent_kafka, "Producer", FakeProducer)
    clock = [0.0]

    def now() -> float:
        clock[0] += 40.0  # 40 ms per call: a transaction of 100 ms holds a few records
        return clock[0]

    monkeypatch.setattr(pperf, "_now_ms", now)
    out = io.StringIO()
    args = producer_args(
        "--topic", "t", "--num-records", "10", "--throughput", "-1", "--payload-monotonic",
        "--producer-props", "bootstrap.servers=h:1", "--transaction-duration-ms", "100",
    )  # fmt: skip
    assert pperf.run(args, out) == 0
    (producer,) = FakeProducer.made[-1:]
    assert producer.sent == [str(i).encode() for i in range(10)]
    assert producer.conf["transactional.id"] == pperf.DEFAULT_TRANSACTIONAL_ID
    calls = producer.calls
    assert calls[:3] == ["init", "begin", "buffer-full"] and calls[-1] == "commit"
    assert calls.count("begin") == calls.count("commit") > 1
    window_lines, total_line = out.getvalue().splitlines()[:-1], out.getvalue().splitlines()[-1]
    assert all(WINDOW_LINE.match(line) for line in window_lines)
    assert TOTAL_LINE.match(total_line) and total_line.startswith("10 records sent, ")


class FakeConsumer:
    """confluent_kafka.Consumer's calls the tool makes: ``batches`` are returned by consume() in turn
    (an empty list: nothing arrived), the assignment callback at the first call."""

    def __init__(self, batches: list[list[FakeMessage]]) -> None:
        self.batches = batches
        self.on_assign: Any = None

    def subscribe(self, topics: list[str], on_assign: Any, on_revoke: Any) -> None:
        self.on_assign = on_assign

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        if self.on_assign is not None:
            self.on_assign(self, [])
            self.on_assign = None
        if not self.batches:
            __import__("time").sleep(timeout)
            return []
        return self.batches.pop(0)


def test_consumer_loop_counts_keys_and_values_until_enough_or_the_timeout() -> None:
    args = consumer_args(
        "--bootstrap-server", "h:1", "--topic", "t", "--messages", "3", "--reporting-interval", "1"
    )
    batches = [[FakeMessage(b"abc", b"k"), FakeMessage(b"de")], [FakeMessage(b"f"), FakeMessage(b"gh")]]
    out, err = io.StringIO(), io.StringIO()
    rebalance = cperf.RebalanceTimer(cperf._wall_ms())
    # The second batch is counted whole, as Kafka's loop counts every record of a poll.
    assert cperf.consume(FakeConsumer(batches), args, rebalance, 500, out, err) == (4, 9)
    assert out.getvalue() == ""
    assert rebalance.join_time_ms >= 0
    args = consumer_args(
        "--bootstrap-server", "h:1", "--topic", "t", "--messages", "10", "--timeout", "300",
        "--show-detailed-stats", "--reporting-interval", "1",
    )  # fmt: skip
    out = io.StringIO()
    result = cperf.consume(FakeConsumer([[FakeMessage(b"x" * 10)]]), args, rebalance, 500, out, err)
    assert result == (1, 10)
    assert out.getvalue().splitlines()[-1] == (
        "WARNING: Exiting before consuming the expected number of messages: timeout (300 ms) exceeded. "
        "You can use the --timeout option to increase the timeout."
    )


def test_without_confluent_kafka_both_tools_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "confluent_kafka", None)  # import fails
    assert pperf.main([*BASE, "--record-size", "1", "--producer-props", "bootstrap.servers=h:1"]) == 1
    assert cperf.main(["--bootstrap-server", "h:1", "--topic", "t", "--messages", "1", "--hide-header"]) == 1
    err = capsys.readouterr().err
    assert "samsa producer-perf-test runs on confluent-kafka (librdkafka), which is not installed" in err
    assert "samsa consumer-perf-test runs on confluent-kafka (librdkafka), which is not installed" in err


def test_the_clock_starts_once_the_idempotent_producer_holds_its_id() -> None:
    statistics = pperf.StatisticsCollector()
    states = iter(["Init", "WaitTransport", "WaitPID", "Assigned"])
    polls = []

    class Producer:
        def poll(self, timeout: float) -> None:
            polls.append(timeout)
            statistics(f'{{"eos": {{"idemp_state": "{next(states)}"}}}}')

    assert pperf.wait_for_producer_id(Producer(), statistics, 5.0)
    assert len(polls) == 4

    class Silent:
        def poll(self, timeout: float) -> None:
            pass

    assert not pperf.wait_for_producer_id(Silent(), pperf.StatisticsCollector(), 0.01)  # no statistics
