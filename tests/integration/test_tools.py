"""The command-line tools against real clusters: ``samsa up`` (processes, readiness, busy ports, a child
that dies, shutdown by SIGTERM, a re-run on the same data dir, overrides for every broker or one, the
node commands on a running cluster, saved overrides, a data dir of more brokers), ``samsa topics``
(kafka-topics.sh's outputs, messages and exit codes) and the console producer and consumer (round trips
with keys)."""

from __future__ import annotations

import asyncio
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.cluster import ROOT, free_port
from tools.console import LineReader, RecordFormatter, RecordParseError
from tools.probe import answers_api_versions

pytestmark = pytest.mark.integration

STARTED = re.compile(r"^started (zookeeper|controller|broker) (\d+) pid=(\d+)$")


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports that were free a moment ago."""
    while True:
        base = free_port()
        if base + count > 65535:
            continue
        sockets = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class Up:
    """``samsa up`` as a child process; its stdout lines are collected by a thread."""

    def __init__(
        self, data_dir: Path, brokers: int = 3, controllers: int = 2, extra: tuple[str, ...] = ()
    ) -> None:
        self.data_dir = data_dir
        self.brokers = brokers
        self.controllers = controllers
        self.extra = list(extra)
        self._stderr: str | None = None
        self.zookeeper_port = free_port()
        self.base_port = free_ports(brokers)
        self.lines: list[str] = []
        self._new_lines: queue.Queue[str | None] = queue.Queue()
        self.process: subprocess.Popen | None = None
        self.pids: dict[tuple[str, int], int] = {}

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "tools", "up",
            "--data-dir", str(self.data_dir),
            "--brokers", str(self.brokers),
            "--controllers", str(self.controllers),
            "--zookeeper-port", str(self.zookeeper_port),
            "--base-port", str(self.base_port),
            *self.extra,
        ]  # fmt: skip

    def start(self, timeout: float = 60.0) -> str:
        """Starts it and returns the bootstrap servers it prints."""
        self.process = subprocess.Popen(
            self.command(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        threading.Thread(target=self._read, daemon=True).start()
        line = self.wait_for_line(lambda text: text.startswith("bootstrap.servers="), timeout)
        return line.partition("=")[2]

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            if m := STARTED.match(line):
                self.pids[(m.group(1), int(m.group(2)))] = int(m.group(3))
            self._new_lines.put(line)
        self._new_lines.put(None)

    def wait_for_line(self, matches: Callable[[str], bool], timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._new_lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"no such line after {timeout} s; output so far: {self.lines}") from None
            if line is None:
                raise RuntimeError(f"samsa up ended; output: {self.lines}; stderr: {self.stderr()}")
            if matches(line):
                return line

    def stderr(self) -> str:
        assert self.process is not None and self.process.stderr is not None
        if self.process.poll() is None:
            return "(still running)"
        if self._stderr is None:
            self._stderr = self.process.stderr.read()
        return self._stderr

    def stop(self, timeout: float = 90.0) -> int:
        """SIGTERM by PID; waits for it; then makes sure no child is left (killing any by PID)."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for pid in self.pids.values():
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        return self.process.returncode


def samsa(*args: str, stdin: str | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def eventually(check: Callable[[], object], timeout: float = 15.0) -> object:
    """Retries ``check`` until it returns something truthy (metadata reaches brokers asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ``samsa up`` cluster (3 brokers, 2 controllers) shared by this module's tool tests."""
    up = Up(tmp_path_factory.mktemp("cluster") / "run")
    try:
        yield up.start()
    finally:
        up.stop()


# -- samsa up -------------------------------------------------------------------------------------------


def test_up_starts_every_process_reports_a_death_and_stops_them_all(tmp_path: Path) -> None:
    up = Up(tmp_path / "run", brokers=2, controllers=2)
    try:
        bootstrap = up.start()
        assert bootstrap == f"127.0.0.1:{up.base_port},127.0.0.1:{up.base_port + 1}"
        assert list(up.pids) == [
            ("zookeeper", 1), ("controller", 9001), ("controller", 9002), ("broker", 1), ("broker", 2),
        ]  # fmt: skip
        assert all(pid_alive(pid) for pid in up.pids.values())
        for port in (up.base_port, up.base_port + 1):
            assert answers_api_versions("127.0.0.1", port)
        for name in ("broker-1/server.properties", "broker-1/broker.log", "controller-9001/controller.log"):
            assert (up.data_dir / name).is_file(), name
        assert (
            f"log.dirs={up.data_dir / 'broker-1' / 'data'}"
            in (up.data_dir / "broker-1" / "server.properties").read_text()
        )

        os.kill(up.pids[("broker", 2)], signal.SIGKILL)
        up.wait_for_line(lambda line: line == "exited broker 2 code=-9")
        time.sleep(0.5)
        assert up.process is not None and up.process.poll() is None
        assert all(pid_alive(pid) for key, pid in up.pids.items() if key != ("broker", 2))
    finally:
        code = up.stop()
    assert code == 0, up.stderr()
    assert not [key for key, pid in up.pids.items() if pid_alive(pid)]
    # The console (a client) first, then the controllers: the brokers then skip a controlled shutdown
    # nothing could take over from.
    stopped = [line.split()[1] for line in up.lines if line.startswith("stopped ")]
    assert stopped == ["console", "controller", "controller", "broker", "zookeeper"], up.lines
    assert "waiting for broker 1 to flush its logs" in up.stderr(), up.stderr()


@pytest.mark.parametrize("busy", ["zookeeper", "broker"])
def test_up_refuses_a_busy_port_naming_the_flag(tmp_path: Path, busy: str) -> None:
    up = Up(tmp_path / "run", brokers=2)
    port = up.zookeeper_port if busy == "zookeeper" else up.base_port + 1
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        result = subprocess.run(up.command(), cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert result.stdout == ""  # nothing was started
    flag = "--zookeeper-port" if busy == "zookeeper" else "--base-port"
    assert f"port {port} on 127.0.0.1" in result.stderr and flag in result.stderr, result.stderr


def test_up_again_on_the_same_data_dir_keeps_topics_and_data(tmp_path: Path) -> None:
    data_dir = tmp_path / "run"
    first = Up(data_dir, brokers=1, controllers=1)
    try:
        bootstrap = first.start()
        created = samsa(
            "topics", "--bootstrap-server", bootstrap, "--create", "--topic", "kept", "--partitions", "2"
        )
        assert created.returncode == 0, created
        produced = samsa(
            "console-producer", "--bootstrap-server", bootstrap, "--topic", "kept",
            "--property", "parse.key=true", "--property", "key.separator=:",
            stdin="".join(f"k{i}:v{i}\n" for i in range(10)),
        )  # fmt: skip
        assert produced.returncode == 0, produced
    finally:
        assert first.stop() == 0

    second = Up(data_dir, brokers=1, controllers=1)  # other ports, same data
    try:
        bootstrap = second.start()
        assert "PartitionCount: 2" in describe_until(bootstrap, "kept", lambda out: "PartitionCount" in out)
        consumed = samsa(
            "console-consumer", "--bootstrap-server", bootstrap, "--topic", "kept", "--from-beginning",
            "--max-messages", "10", "--timeout-ms", "20000", "--property", "print.key=true",
        )  # fmt: skip
        assert sorted(consumed.stdout.splitlines()) == sorted(f"k{i}\tv{i}" for i in range(10)), consumed
    finally:
        assert second.stop() == 0


def test_up_overrides_reach_every_broker_or_the_one_named(tmp_path: Path) -> None:
    up = Up(tmp_path / "run", brokers=2, controllers=1, extra=(
        "--override", "num.partitions=2", "--override", "log.retention.ms=600000",
        "--broker-override", "2:broker.rack=rack-b",
    ))  # fmt: skip
    try:
        bootstrap = up.start()
        produced = samsa("console-producer", "--bootstrap-server", bootstrap, "--topic", "auto", stdin="x\n")
        assert produced.returncode == 0, produced
        out = describe_until(bootstrap, "auto", lambda out: "PartitionCount" in out)
        assert "PartitionCount: 2\tReplicationFactor: 2" in out, out  # auto-created: num.partitions=2
        racks = asyncio.run(broker_racks(bootstrap))
        assert racks == {1: None, 2: "rack-b"}
        one = (up.data_dir / "broker-1" / "server.properties").read_text()
        two = (up.data_dir / "broker-2" / "server.properties").read_text()
        assert "num.partitions=2" in one and "log.retention.ms=600000" in two
        assert "broker.rack" not in one and "broker.rack=rack-b" in two
    finally:
        assert up.stop() == 0


async def broker_racks(bootstrap: str) -> dict[int, str | None]:
    from tools.admin_client import AdminClient

    async with AdminClient(bootstrap) as admin:
        response = await admin.metadata([])
    return {b.node_id: b.rack for b in response.brokers}


def up_command(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return samsa("up", *args, "--data-dir", str(data_dir), timeout=150)


def test_up_node_commands_act_on_the_running_cluster(tmp_path: Path) -> None:
    up = Up(tmp_path / "run", brokers=2, controllers=1)
    try:
        up.start()
        status = up_command(up.data_dir, "status")
        assert "supervised by samsa up" in status.stdout, status
        assert re.search(r"^broker +2 +\d+ +running, registered ", status.stdout, re.M), status.stdout
        assert re.search(r"^controller +9001 +\d+ +running, active ", status.stdout, re.M), status.stdout

        old_pid = up.pids[("broker", 2)]
        killed = up_command(up.data_dir, "kill", "broker", "2")
        assert killed.returncode == 0 and f"killed broker 2 (pid {old_pid})" in killed.stdout, killed
        up.wait_for_line(lambda line: line == "exited broker 2 code=-9")
        status = up_command(up.data_dir, "status")
        assert re.search(r"^broker +2 +- +not running ", status.stdout, re.M), status.stdout

        # The running samsa up starts it, so it supervises it (and stops it at the end) like the others.
        restarted = up_command(up.data_dir, "start", "broker", "2")
        assert restarted.returncode == 0, restarted
        line = up.wait_for_line(lambda line: line.startswith("started broker 2 pid="))
        new_pid = int(line.rpartition("=")[2])
        assert new_pid != old_pid and pid_alive(new_pid)
        assert f"started broker 2 serves on 127.0.0.1:{up.base_port + 1} (pid {new_pid})" in restarted.stdout
        again = up_command(up.data_dir, "start", "broker", "2")
        assert again.returncode == 1 and "already running" in again.stderr, again

        restarted = up_command(up.data_dir, "restart", "broker", "2")
        assert restarted.returncode == 0, restarted
        up.wait_for_line(lambda line: line == "stopped broker 2 code=0")
        line = up.wait_for_line(lambda line: line.startswith("started broker 2 pid="))
        assert int(line.rpartition("=")[2]) != new_pid and not pid_alive(new_pid)
        status = up_command(up.data_dir, "status")
        assert re.search(r"^broker +2 +\d+ +running, registered ", status.stdout, re.M), status.stdout
    finally:
        assert up.stop() == 0
    assert not [key for key, pid in up.pids.items() if pid_alive(pid)]
    status = up_command(up.data_dir, "status")
    assert "no samsa up is running" in status.stdout and "running," not in status.stdout, status.stdout


def test_up_keeps_its_overrides_and_refuses_a_data_dir_of_more_brokers(tmp_path: Path) -> None:
    data_dir = tmp_path / "run"
    first = Up(data_dir, brokers=2, controllers=1, extra=("--override", "num.partitions=2"))
    try:
        first.start()
    finally:
        assert first.stop() == 0

    smaller = Up(data_dir, brokers=1, controllers=1)
    refused = subprocess.run(smaller.command(), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and refused.stdout == "", refused
    assert "holds the data of a 2-broker cluster" in refused.stderr and "--fresh" in refused.stderr

    second = Up(data_dir, brokers=2, controllers=1)  # no overrides given: the saved ones stay
    try:
        second.start()
        assert "num.partitions=2" in (data_dir / "broker-2" / "server.properties").read_text()
    finally:
        assert second.stop() == 0
    assert "keeping the settings of the last run" in second.stderr() and "--override num.partitions=2" in (
        second.stderr()
    )


# -- samsa topics ---------------------------------------------------------------------------------------


def describe(bootstrap: str, topic: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return samsa("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic, *extra)


def describe_until(bootstrap: str, topic: str, ready: Callable[[str], bool], timeout: float = 15.0) -> str:
    """The describe output once ``ready`` accepts it, or the last one (metadata reaches the brokers
    asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        out = describe(bootstrap, topic).stdout
        if ready(out) or time.monotonic() > deadline:
            return out
        time.sleep(0.1)


def test_topics_create_describe_list_alter_delete(cluster: str) -> None:
    topics = ("topics", "--bootstrap-server", cluster)
    created = samsa(
        *topics, "--create", "--topic", "orders", "--partitions", "3", "--replication-factor", "2",
        "--config", "retention.ms=3600000",
    )  # fmt: skip
    assert (created.returncode, created.stdout) == (0, "Created topic orders.\n"), created

    described = describe_until(cluster, "orders", lambda out: out.count("\tPartition: ") == 3)
    header, *partitions = described.splitlines()
    assert re.fullmatch(
        r"Topic: orders\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 2"
        r"\tConfigs: retention\.ms=3600000",
        header,
    ), header
    for i, line in enumerate(partitions):
        m = re.fullmatch(
            rf"\tTopic: orders\tPartition: {i}\tLeader: (\d)\tReplicas: (\d),(\d)\tIsr: ([\d,]+)", line
        )
        assert m, line
        assert m.group(1) in (m.group(2), m.group(3)) and m.group(2) != m.group(3)

    listed = samsa(*topics, "--list")
    assert "orders" in listed.stdout.splitlines() and listed.returncode == 0

    altered = samsa(*topics, "--alter", "--topic", "orders", "--partitions", "5")
    assert (altered.returncode, altered.stdout) == (0, ""), altered
    assert "PartitionCount: 5" in describe_until(cluster, "orders", lambda out: "PartitionCount: 5" in out)

    configured = samsa(*topics, "--alter", "--topic", "orders", "--config", "segment.ms=600000",
                       "--delete-config", "retention.ms")  # fmt: skip
    assert configured.returncode == 0 and "Updated config for topic orders." in configured.stdout, configured
    updated = describe_until(cluster, "orders", lambda out: "retention" not in out)
    assert "\tConfigs: segment.ms=600000\n" in updated

    deleted = samsa(*topics, "--delete", "--topic", "orders")
    assert (deleted.returncode, deleted.stdout) == (0, ""), deleted
    assert eventually(lambda: "orders" not in samsa(*topics, "--list").stdout.splitlines())


def test_topics_errors_as_kafka_topics_reports_them(cluster: str) -> None:
    topics = ("topics", "--bootstrap-server", cluster)
    assert samsa(*topics, "--create", "--topic", "dup", "--partitions", "2").returncode == 0
    again = samsa(*topics, "--create", "--topic", "dup")
    assert again.returncode == 1
    assert again.stdout == "Error while executing topic command : Topic 'dup' already exists.\n"
    assert samsa(*topics, "--create", "--topic", "dup", "--if-not-exists").returncode == 0

    assert "PartitionCount: 2" in describe_until(cluster, "dup", lambda out: "PartitionCount" in out)
    shrink = samsa(*topics, "--alter", "--topic", "dup", "--partitions", "1")
    assert shrink.returncode == 1 and shrink.stdout.startswith("Error while executing topic command : ")

    missing = describe(cluster, "no-such-topic")
    assert (missing.returncode, missing.stderr) == (1, "Topic 'no-such-topic' does not exist as expected\n")
    assert describe(cluster, "no-such-topic", "--if-exists").returncode == 0

    no_action = samsa(*topics)
    assert no_action.returncode == 1
    assert no_action.stderr.startswith(
        "Command must include exactly one action: --list, --describe, --create, --alter or --delete"
    )
    wrong = samsa(*topics, "--alter", "--topic", "dup", "--partitions", "3", "--replication-factor", "2")
    assert wrong.returncode == 1
    assert wrong.stderr.startswith('Option "[replication-factor]" can\'t be used with option "[alter]"')
    unreachable = samsa("topics", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--list")
    assert unreachable.returncode == 1 and unreachable.stdout.startswith(
        "Error while executing topic command"
    )


# -- console producer and consumer ----------------------------------------------------------------------


def test_console_round_trip_with_keys(cluster: str) -> None:
    from aiokafka.partitioner import murmur2

    create = samsa(
        "topics", "--bootstrap-server", cluster, "--create", "--topic", "keyed", "--partitions", "3"
    )
    assert create.returncode == 0, create
    lines = [f"key-{i % 7}:value-{i}" for i in range(50)]
    produced = samsa(
        "console-producer", "--bootstrap-server", cluster, "--topic", "keyed",
        "--property", "parse.key=true", "--property", "key.separator=:",
        stdin="\n".join(lines) + "\n",
    )  # fmt: skip
    assert produced.returncode == 0, produced
    consumed = samsa(
        "console-consumer", "--bootstrap-server", cluster, "--topic", "keyed", "--from-beginning",
        "--max-messages", "50", "--timeout-ms", "20000",
        "--property", "print.key=true", "--property", "key.separator=:",
        "--property", "print.offset=true", "--property", "print.partition=true",
    )  # fmt: skip
    assert consumed.returncode == 0, consumed
    assert consumed.stderr.endswith("Processed a total of 50 messages\n"), consumed.stderr
    seen: dict[int, list[tuple[int, str, str]]] = {}
    for line in consumed.stdout.splitlines():
        m = re.fullmatch(r"Partition:(\d+):Offset:(\d+):(key-\d):(value-\d+)", line)
        assert m, line
        seen.setdefault(int(m.group(1)), []).append((int(m.group(2)), m.group(3), m.group(4)))
    assert sorted(f"{k}:{v}" for records in seen.values() for _, k, v in records) == sorted(lines)
    for partition, records in seen.items():
        assert [offset for offset, _, _ in records] == list(range(len(records)))
        for _, key, _ in records:  # the Java client's partitioner: murmur2 of the key
            assert (murmur2(key.encode()) & 0x7FFFFFFF) % 3 == partition
        values = [int(v.split("-")[1]) for _, _, v in records]
        assert values == sorted(values)  # the order of stdin, per partition


def test_console_consumer_group_commits_its_offsets(cluster: str) -> None:
    assert samsa("topics", "--bootstrap-server", cluster, "--create", "--topic", "grouped").returncode == 0
    samsa("console-producer", "--bootstrap-server", cluster, "--topic", "grouped", stdin="a\nb\nc\n")
    group = ("console-consumer", "--bootstrap-server", cluster, "--topic", "grouped", "--group", "g1")
    first = samsa(*group, "--from-beginning", "--max-messages", "3", "--timeout-ms", "30000")
    assert first.stdout.splitlines() == ["a", "b", "c"], first
    again = samsa(*group, "--from-beginning", "--timeout-ms", "3000")
    assert again.stdout == "" and "Processed a total of 0 messages" in again.stderr, again


def test_console_consumer_times_out_and_producer_rejects_a_line_without_key(cluster: str) -> None:
    assert samsa("topics", "--bootstrap-server", cluster, "--create", "--topic", "quiet").returncode == 0
    started = time.monotonic()
    idle = samsa(
        "console-consumer", "--bootstrap-server", cluster, "--topic", "quiet", "--timeout-ms", "1000"
    )
    assert idle.returncode == 0 and idle.stdout == ""
    assert "Processed a total of 0 messages" in idle.stderr
    assert time.monotonic() - started < 15

    bad = samsa(
        "console-producer", "--bootstrap-server", cluster, "--topic", "quiet", "--property", "parse.key=true",
        stdin="k\tgood\nno separator here\n",
    )  # fmt: skip
    assert bad.returncode == 1
    assert "No key separator found on line number 2: 'no separator here'" in bad.stderr
    consumed = samsa(
        "console-consumer", "--bootstrap-server", cluster, "--topic", "quiet", "--from-beginning",
        "--max-messages", "1", "--timeout-ms", "20000", "--property", "print.key=true",
    )  # fmt: skip
    assert consumed.stdout == "k\tgood\n"  # the line before the bad one was sent


# -- formats, without a cluster -------------------------------------------------------------------------


def test_line_reader_parses_as_kafkas_line_message_reader() -> None:
    reader = LineReader({"parse.key": "true", "parse.headers": "true", "null.marker": "NULL"})
    assert reader.parse("h1:v1,h2:NULL\tk\tv\tw") == (b"k", b"v\tw", [("h1", b"v1"), ("h2", None)])
    assert reader.parse("NULL\tNULL\tx") == (None, b"x", [])
    with pytest.raises(RecordParseError, match="No key separator found on line number 3: 'h:1\tnokey'"):
        reader.parse("h:1\tnokey")
    lenient = LineReader({"parse.key": "true", "ignore.error": "true"})
    assert lenient.parse("no key") == (None, b"no key", [])
    assert LineReader({}).parse("a\tb") == (None, b"a\tb", [])


def test_record_formatter_prints_as_kafkas_default_message_formatter() -> None:
    record = SimpleNamespace(
        timestamp=1700000000000, timestamp_type=0, partition=2, offset=7, key=None, value=b"v",
        headers=[("h", b"1"), ("g", None)],
    )  # fmt: skip
    every = RecordFormatter({
        "print.timestamp": "true", "print.partition": "true", "print.offset": "true",
        "print.headers": "true", "print.key": "true",
    })  # fmt: skip
    assert every.format(record) == b"CreateTime:1700000000000\tPartition:2\tOffset:7\th:1,g:null\tnull\tv\n"
    no_value = RecordFormatter({"print.key": "true", "print.value": "false", "null.literal": "-"})
    assert no_value.format(record) == b"-\n"
    record.headers = []
    record.timestamp_type = 1
    assert RecordFormatter({"print.timestamp": "true", "print.headers": "true"}).format(record) == (
        b"LogAppendTime:1700000000000\tNO_HEADERS\tv\n"
    )
    assert RecordFormatter({}).format(record) == b"v\n"
