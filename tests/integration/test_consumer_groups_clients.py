"""Consumer groups of aiokafka, kafka-python, confluent-kafka, kafkajs and the Java client on a real cluster
(ZooKeeper, a controller, three brokers).

For each client, while a producer keeps writing to a 12-partition topic:
- three consumers in one group get disjoint shares that cover the topic, all in one generation;
- a fourth joins, then one leaves cleanly, then one is SIGKILLed and its session expires: each time the
  group settles in a new generation whose shares again cover the topic;
- the consumers commit after processing (each record, or each polled batch); in the end every record
  produced was processed at least once, the group's commits reach the log end, and no record was
  delivered again after a commit past it had succeeded (what a rebalance must guarantee).

Each member runs as a subprocess (group_member.py, group_member.js or GroupMember.java of
tests/support/clients/) printing the same JSON events; all members of a group are of one client; every
process a test starts is killed by its process group at the end.
"""

from __future__ import annotations

import bisect
import importlib.util
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import runners
from tests.support.cluster import Cluster
from tests.support.events import JsonEvents
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

kafka = pytest.importorskip("kafka")

PARTITIONS = 12
SESSION_MS = 6000  # group.min.session.timeout.ms: a SIGKILLed member is dropped as soon as Kafka allows
CLIENT_TIMEOUT_MS = 20_000
ROUND_SECONDS = 0.1  # the producer writes one record to every partition this often
SETTLE_TIMEOUT = 45.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer) -> Iterator[Cluster]:
    chroot = f"{zookeeper_server.connect_string}/samsa-consumer-groups-clients"
    running = Cluster(tmp_path_factory.mktemp("consumer-groups-clients"), chroot).start()
    try:
        yield running
    finally:
        running.stop()


def member_command(client: str) -> tuple[list[str], dict[str, str]]:
    """The argv (before BOOTSTRAP TIMEOUT_MS TOPIC GROUP SESSION_MS) and environment of a group member;
    skips the test when the client is not installed (`make clientdeps`, or the Python test extras)."""
    if client in runners.PYTHON_MODULES:
        module = runners.PYTHON_MODULES[client]
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{client}: Python package {module!r} is missing (pip install -e '.[test]')")
        return [sys.executable, str(runners.HERE / "py" / "group_member.py"), client], {}
    if client == "kafkajs":
        node = shutil.which("node")
        modules = runners.clients_dir() / "node" / "node_modules"
        if node is None or not (modules / "kafkajs" / "package.json").is_file():
            pytest.skip(f"kafkajs: node or {modules}/kafkajs missing (run `make clientdeps`)")
        return [node, str(runners.HERE / "js" / "group_member.js")], {"NODE_PATH": str(modules)}
    java = shutil.which("java")
    jars = [runners.clients_dir() / "java" / jar for jar in runners.JAVA_JARS]
    if java is None or not all(jar.is_file() for jar in jars):
        pytest.skip("java: a JDK or the kafka-clients jars are missing (run `make clientdeps`)")
    classpath = os.pathsep.join(map(str, jars))
    return [java, "-cp", classpath, str(runners.HERE / "java" / "GroupMember.java")], {}


_ids = itertools.count()


class Member:
    """One consumer in a subprocess; its JSON events are collected by a thread."""

    def __init__(self, client: str, cluster: Cluster, topic: str, group: str, workdir: Path) -> None:
        argv, env = member_command(client)
        self.name = f"{client}-{next(_ids)}"
        self.stderr_path = workdir / f"{self.name}.stderr"
        self._stderr = open(self.stderr_path, "w")  # closed in stop()
        self.process = subprocess.Popen(
            [*argv, cluster.bootstrap, str(CLIENT_TIMEOUT_MS), topic, group, str(SESSION_MS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env={**os.environ, **env},
            start_new_session=True,
        )
        assert self.process.stdout is not None
        self._events = JsonEvents(self.process.stdout)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return self._events.of(kind)

    def assignment(self) -> tuple[int, frozenset[int]] | None:
        """(generation, partitions) of the last rebalance it took part in."""
        assigned = self.of("assigned")
        return (assigned[-1]["generation"], frozenset(assigned[-1]["partitions"])) if assigned else None

    def alive(self) -> bool:
        return self.process.poll() is None

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-3000:]

    def close(self, timeout: float = 30.0) -> None:
        """Asks the consumer to close (leaving the group) and waits for it to exit."""
        assert self.process.stdin is not None
        self.process.stdin.write("close\n")
        self.process.stdin.flush()
        self.process.wait(timeout)
        self._events.reader.join(5)
        assert self.of("closed"), f"{self.name} did not close cleanly:\n{self.stderr()}"

    def kill(self) -> None:
        if self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        self.kill()
        self._events.reader.join(5)
        self._stderr.close()


@pytest.fixture
def start_member(tmp_path: Path) -> Iterator[Callable[..., Member]]:
    started: list[Member] = []

    def start(*args: Any) -> Member:
        member = Member(*args, tmp_path)
        started.append(member)
        return member

    yield start
    for member in started:
        member.stop()


class Producer(threading.Thread):
    """Writes a record to every partition each round until stopped; keeps where each one went."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.topic = topic
        self.produced: set[tuple[int, int]] = set()
        self.error: BaseException | None = None
        self._stopping = threading.Event()

    def run(self) -> None:
        try:
            producer = kafka.KafkaProducer(bootstrap_servers=self.cluster.bootstrap, acks="all", linger_ms=5)
            try:
                for n in itertools.count():
                    if self._stopping.wait(ROUND_SECONDS):
                        break
                    futures = [
                        producer.send(self.topic, b"%d-%d" % (n, p), partition=p) for p in range(PARTITIONS)
                    ]
                    for future in futures:
                        metadata = future.get(timeout=30)
                        self.produced.add((metadata.partition, metadata.offset))
            finally:
                producer.close()
        except BaseException as e:  # reported by finish()
            self.error = e

    def finish(self) -> set[tuple[int, int]]:
        self._stopping.set()
        self.join(60)
        assert self.error is None, f"the producer failed: {self.error!r}"
        return self.produced


def settled(members: list[Member], after: int) -> int | None:
    """The generation in which every member's share is known, they are disjoint and cover the topic,
    once it is newer than ``after``."""
    latest = [m.assignment() for m in members]
    if any(a is None for a in latest):
        return None
    generations = {a[0] for a in latest}  # type: ignore[index]
    shares = [a[1] for a in latest]  # type: ignore[index]
    if len(generations) != 1 or not all(shares):
        return None
    generation = generations.pop()
    covered = frozenset().union(*shares)
    if generation <= after or covered != frozenset(range(PARTITIONS)) or sum(map(len, shares)) != PARTITIONS:
        return None
    return generation


def wait_settled(members: list[Member], after: int, what: str) -> int:
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while time.monotonic() < deadline:
        generation = settled(members, after)
        if generation is not None:
            return generation
        dead = [m for m in members if not m.alive()]
        assert not dead, f"{dead[0].name} exited:\n{dead[0].stderr()}"
        time.sleep(0.1)
    report = "\n".join(f"{m.name}: {m.of('assigned')[-3:]}\n{m.stderr()[-1500:]}" for m in members)
    raise AssertionError(f"the group did not settle after {what}:\n{report}")


def described_shares(cluster: Cluster, group: str) -> dict[str, frozenset[int]]:
    """Member id -> partitions, as ``samsa consumer-groups --describe --members --verbose`` shows them."""
    result = subprocess.run(
        [
            *(sys.executable, "-m", "tools", "consumer-groups", "--bootstrap-server", cluster.bootstrap),
            *("--describe", "--group", group, "--members", "--verbose"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=runners.REPO,
    )
    assert result.returncode == 0, result
    rows = [line.split() for line in result.stdout.splitlines()[2:] if line.strip()]
    # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT, the assignment as topic(0,1,2)
    return {row[1]: frozenset(int(p) for p in re.findall(r"\d+", row[5].split("(", 1)[1])) for row in rows}


def group_offsets(reader: Any, topic: str) -> dict[int, int | None]:
    """The group's committed offsets, through a kafka-python consumer of the group that never joins it."""
    return {p: reader.committed(kafka.TopicPartition(topic, p)) for p in range(PARTITIONS)}


def redeliveries_after_commit(events: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Records delivered although a commit past them had already succeeded, from each member's events
    (their "ts" are ms clocks of one host)."""
    commits: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for member_events in events.values():
        for e in member_events:
            if e["event"] == "committed":
                commits[e["partition"]].append((e["ts"], e["offset"]))
    highest: dict[int, tuple[list[int], list[int]]] = {}
    for partition, entries in commits.items():
        entries.sort()
        times, running, top = [], [], -1
        for ts, offset in entries:
            top = max(top, offset)
            times.append(ts)
            running.append(top)
        highest[partition] = (times, running)
    problems = []
    for name, member_events in events.items():
        for e in member_events:
            if e["event"] != "record":
                continue
            times, running = highest.get(e["partition"], ([], []))
            i = bisect.bisect_left(times, e["ts"])  # commits strictly before the delivery
            if i and running[i - 1] > e["offset"]:
                problems.append(
                    f"{name} got {e['partition']}:{e['offset']} at {e['ts']} after offset {running[i - 1]} "
                    "was committed"
                )
    return problems


def test_the_redelivery_check_sees_a_repeat_after_a_commit() -> None:
    """A negative control for redeliveries_after_commit: a record delivered again after the commit past
    it is reported, and one delivered again before any such commit (at least once) is not."""

    def record(ts: int, offset: int) -> dict[str, Any]:
        return {"event": "record", "ts": ts, "partition": 0, "offset": offset}

    first = [record(1, 0), record(2, 1), {"event": "committed", "ts": 3, "partition": 0, "offset": 1}]
    assert redeliveries_after_commit({"a": first, "b": [record(4, 1), record(5, 2)]}) == []
    assert len(redeliveries_after_commit({"a": first, "b": [record(4, 0)]})) == 1
    assert redeliveries_after_commit({"a": first, "b": [record(3, 0)]}) == []  # not strictly after


@pytest.mark.parametrize(
    "client",
    # The quick tier rebalances librdkafka's and the Java client's groups; the full tier every client's.
    [
        pytest.param("aiokafka", marks=pytest.mark.slow),
        pytest.param("kafka-python", marks=pytest.mark.slow),
        "confluent-kafka",
        pytest.param("kafkajs", marks=pytest.mark.slow),
        "java",
    ],
)
def test_group_rebalances_without_losing_or_repeating_committed_records(
    client: str, cluster: Cluster, start_member: Callable[..., Member]
) -> None:
    topic = f"{client}-group-{next(_ids)}"
    group = f"{topic}-consumers"
    cluster.create_topic(topic, PARTITIONS, replication_factor=3)
    producer = Producer(cluster, topic)
    producer.start()
    try:
        members = [start_member(client, cluster, topic, group) for _ in range(3)]
        generation = wait_settled(members, 0, "three members joined")

        members.append(start_member(client, cluster, topic, group))
        generation = wait_settled(members, generation, "a fourth member joined")
        seen = {m.of("assigned")[-1]["member"]: m.assignment()[1] for m in members}  # type: ignore[index]
        assert described_shares(cluster, group) == seen

        leaving = members.pop(0)
        leaving.close()
        generation = wait_settled(members, generation, "a clean leave")

        killed = members.pop(0)
        killed.kill()
        wait_settled(members, generation, "a SIGKILL and the session's expiry")
    finally:
        produced = producer.finish()
    everyone = [leaving, killed, *members]

    # Every record produced is processed, and the group's commits reach the log end.
    ends = {p: 1 + max(o for q, o in produced if q == p) for p in range(PARTITIONS)}
    reader = kafka.KafkaConsumer(
        bootstrap_servers=cluster.bootstrap, group_id=group, enable_auto_commit=False
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            processed = {(e["partition"], e["offset"]) for m in everyone for e in m.of("record")}
            offsets = group_offsets(reader, topic)
            if produced <= processed and offsets == ends:
                break
            missing = sorted(produced - processed)
            assert time.monotonic() < deadline, (
                f"{len(missing)} records never processed (e.g. {missing[:5]}); commits {offsets}, ends {ends}"
            )
            time.sleep(0.2)
    finally:
        reader.close()

    problems = redeliveries_after_commit({m.name: m.of("record") + m.of("committed") for m in everyone})
    assert not problems, f"{len(problems)} committed records delivered again: {problems[:10]}"
    # The check had hand-overs to look at: at least the shares of the member that left and of the one killed
    # (three partitions or more each) went on to other members while records kept coming.
    owners = {
        p: {m.name for m in everyone for e in m.of("record") if e["partition"] == p}
        for p in range(PARTITIONS)
    }
    assert sum(len(names) > 1 for names in owners.values()) >= 3, owners
    for m in members:
        m.close()
