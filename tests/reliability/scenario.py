"""One reliability scenario end to end: a cluster in a sandbox, the workload, faults, the final reads,
the check, the figures.

``Scenario`` is a context manager. Entering it creates the sandbox (faults.py), starts ZooKeeper, the
controllers and the brokers as nodes with addresses of their own, and creates the topic (3 partitions,
replication factor 3, min.insync.replicas=2, unclean election off unless the settings say otherwise).
A test then starts the workload, injects faults through the nodes and the sandbox, and calls
``finish()``, which

1. heals everything (network, paused and dead nodes) unless the test did, and keeps writing until
   writes are acknowledged again (or ``recovery_s`` passes),
2. stops the producers, waits until every partition has a leader and a full ISR,
3. makes two final reads, two seconds apart, and stops the consumers,
4. kills the cluster and reads every replica's log from disk,
5. checks the history (checker.py) and writes the run's figures as a JSON line.

Leaving the context stops every process by PID and removes the sandbox, whatever happened.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.reliability import checker
from tests.reliability.checker import Report
from tests.reliability.faults import Node, Sandbox
from tests.reliability.history import INFO, OK, SEND, HistoryWriter, Op, load
from tests.reliability.replicas import read_replicas
from tests.support.cluster import ROOT
from tools.local_cluster import LocalCluster
from zk import znodes

TOPIC = "reliability"
FIRST_VALUE_STRIDE = 1_000_000_000
FINAL_READ_TIMEOUT_S = 30.0
FINAL_READ_PAUSE_S = 2.0
WORKER_STOP_S = 20.0


@dataclass
class Settings:
    """What a scenario runs: the cluster, the topic and the workload. Times are in milliseconds where
    Kafka's settings are, in seconds otherwise."""

    name: str
    tier: str = "quick"
    seed: int = 0
    brokers: int = 3
    controllers: int = 1
    partitions: int = 3
    replication_factor: int = 3
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False
    assignment: dict[int, list[int]] | None = None  # partition -> replicas, preferred leader first
    producers: int = 2
    consumers: int = 1
    rate: float = 150.0  # sends per second per producer
    idempotent: bool = False
    compression: str = "none"
    session_timeout_ms: int = 3000
    replica_lag_time_max_ms: int = 2000
    broker_overrides: dict[str, str] = field(default_factory=dict)
    recovery_s: float = 30.0
    acks_after_healing: int = 200


class Scenario:
    def __init__(self, settings: Settings, workdir: Path, figures: Path) -> None:
        self.settings = settings
        self.workdir = workdir
        self.figures_path = figures
        self.history_dir = workdir / "history"
        self.figures: dict[str, Any] = {}  # a test's own figures, written with the run's
        self.figures_line: dict[str, Any] | None = None
        self.healed_at: float | None = None
        self.started = time.monotonic()
        self.sandbox = Sandbox()
        self.cluster: LocalCluster | None = None
        self.nodes: dict[str, Node] = {}
        self.producers: list[Worker] = []
        self.consumers: list[Worker] = []
        self._liveness: list[str] = []
        self._progress = _Progress(self.history_dir)
        self.nemesis: HistoryWriter | None = None
        self.report: Report | None = None

    # -- setting up ---------------------------------------------------------------------------------

    def __enter__(self) -> Scenario:
        self.history_dir.mkdir(parents=True)
        self.sandbox.__enter__()
        try:
            self.nemesis = HistoryWriter(self.history_dir / "nemesis.jsonl", "nemesis")
            self._start_cluster()
            self._create_topic()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start_cluster(self) -> None:
        """A LocalCluster in the sandbox (every node on an address of its own); each node is started as
        a fault would start it, and written to the history so."""
        s = self.settings
        self.cluster = LocalCluster(
            self.workdir / "cluster",
            brokers=s.brokers,
            controllers=s.controllers,
            sandbox=self.sandbox,
            session_timeout_ms=s.session_timeout_ms,
            # The controllers get the settings of these that a controller knows (unclean election).
            overrides={
                "replica.lag.time.max.ms": s.replica_lag_time_max_ms,
                "min.insync.replicas": s.min_insync_replicas,
                "unclean.leader.election.enable": s.unclean_leader_election,
                "auto.create.topics.enable": False,
                "controlled.shutdown.retry.backoff.ms": 500,
                **s.broker_overrides,
            },
        )
        self.cluster.claim_data_dir()
        assert self.nemesis is not None
        for process in self.cluster.nodes:
            node = Node(process.name, process, self.sandbox, self.nemesis)
            self.nodes[process.name] = node
            node.start()
        self.connect = self.cluster.zookeeper_connect
        self.cluster.wait_ready(30)

    def _create_topic(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        s = self.settings
        config = {
            "min.insync.replicas": str(s.min_insync_replicas),
            "unclean.leader.election.enable": str(s.unclean_leader_election).lower(),
        }
        if s.assignment is not None:
            replicas = [s.assignment[p] for p in range(s.partitions)]
            # confluent-kafka refuses an assignment without the matching partition count.
            topic = NewTopic(TOPIC, len(replicas), replica_assignment=replicas, config=config)
        else:
            topic = NewTopic(TOPIC, s.partitions, s.replication_factor, config=config)
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([topic], request_timeout=20)[TOPIC].result(timeout=30)
        self.cluster.wait_for_leaders(TOPIC, s.partitions, timeout=30)
        self.wait_healthy(30)

    # -- views of the cluster -----------------------------------------------------------------------

    def zk(self) -> Any:
        """The cluster's ZooKeeper client (LocalCluster.zk: it retries through a reconnection, so a look
        right after a ZooKeeper restart that outlasted its session does not fail)."""
        assert self.cluster is not None
        return self.cluster.zk()

    @property
    def broker_ids(self) -> list[int]:
        return list(self.cluster.brokers)

    def broker(self, broker_id: int) -> Node:
        return self.nodes[f"broker-{broker_id}"]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.cluster.brokers.values())

    def state(self, partition: int) -> znodes.PartitionState | None:
        path = znodes.partition_state_path(TOPIC, partition)
        found = self.zk().exists(path) and self.zk().get(path)
        return znodes.PartitionState.decode(found[0], found[1].version) if found else None

    def leader(self, partition: int) -> int:
        state = self.state(partition)
        return znodes.LEADER_NONE if state is None else state.leader

    def active_controller(self) -> Node:
        controller_id = self.wait(
            lambda: (
                (found := self.zk().exists(znodes.CONTROLLER) and self.zk().get(znodes.CONTROLLER))
                and znodes.decode_controller(found[0])
            ),
            "an active controller",
            30,
        )
        return self.nodes[f"controller-{controller_id}"]

    def controller_epoch(self) -> int:
        return int(self.zk().get(znodes.CONTROLLER_EPOCH)[0])

    def registered(self, broker_id: int) -> bool:
        return bool(self.zk().exists(znodes.broker_path(broker_id)))

    def watched_workloads(self) -> list[Any]:
        """The workloads whose exit fails a ``wait``: all of them, unless a scenario restarts some."""
        return [*self.producers, *self.consumers]

    def wait(self, condition: Callable[[], Any], what: str, timeout: float) -> Any:
        """Polls ``condition()`` until it returns something truthy; fails the test with the cluster's
        state after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = condition()
            if found:
                return found
            dead = [w for w in self.watched_workloads() if w.process.poll() is not None]
            if dead:
                raise AssertionError(
                    f"workload {dead[0].name} exited while waiting for {what}:\n{dead[0].tail()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout:g} s for {what}\n{self.describe()}")
            time.sleep(0.05)

    def wait_new_leader(
        self, partition: int, old: znodes.PartitionState, since: float, timeout: float = 30
    ) -> float:
        """Waits until ``partition`` has a leader other than ``old``'s, at a higher leader epoch; returns
        the seconds from ``since`` (a ``time.monotonic()``) and records them as a figure."""
        self.wait(
            lambda: (
                (s := self.state(partition)) is not None
                and s.leader not in (old.leader, znodes.LEADER_NONE)
                and s.leader_epoch > old.leader_epoch
            ),
            f"a new leader for partition {partition} (was {old.leader} at epoch {old.leader_epoch})",
            timeout,
        )
        elapsed = time.monotonic() - since
        self.figures.setdefault("new_leader_s", []).append(round(elapsed, 2))
        return elapsed

    def bounce_leader(self, partition: int, *, hard: bool) -> int:
        """Restarts the leader of ``partition``: a clean stop (SIGTERM: controlled shutdown) or SIGKILL,
        then, once ZooKeeper has dropped its registration, a start. Returns once the partition has a
        new leader and the restarted broker is back in the ISR; returns the old leader's id."""
        old = self.state(partition)
        assert old is not None and old.leader != znodes.LEADER_NONE, f"partition {partition} has no leader"
        node = self.broker(old.leader)
        since = time.monotonic()
        if hard:
            node.kill()
            self.wait_deregistered(old.leader)
        else:
            node.stop()
        self.wait_new_leader(partition, old, since)
        node.start()
        self.wait_in_isr(old.leader)
        return old.leader

    def wait_deregistered(self, broker_id: int) -> None:
        """Waits until the broker's ephemeral registration is gone (its session expired)."""
        timeout = self.settings.session_timeout_ms / 1000 + 5
        self.wait(lambda: not self.registered(broker_id), f"broker {broker_id} to be deregistered", timeout)

    def replicas(self) -> dict[int, list[int]]:
        """Partition -> replicas, as the topic's assignment in ZooKeeper has them."""
        return znodes.TopicAssignment.decode(self.zk().get(znodes.topic_path(TOPIC))[0]).partitions

    def wait_in_isr(self, broker_id: int, timeout: float = 30) -> None:
        """Waits until ``broker_id`` is back in the ISR of every partition it replicates."""

        def rejoined() -> bool:
            for p, replicas in self.replicas().items():
                state = self.state(p)
                if broker_id in replicas and (state is None or broker_id not in state.isr):
                    return False
            return True

        self.wait(rejoined, f"broker {broker_id} back in the ISR of its partitions", timeout)

    def healthy(self) -> bool:
        """Every partition has a leader and every replica in its ISR."""
        for p, replicas in self.replicas().items():
            state = self.state(p)
            if state is None or state.leader == znodes.LEADER_NONE or set(state.isr) != set(replicas):
                return False
        return True

    def wait_healthy(self, timeout: float) -> None:
        self.wait(self.healthy, "every partition led with a full ISR", timeout)

    def describe(self) -> str:
        """The cluster as the test sees it, for failure messages."""
        lines = [f"  acks so far: {self.count(OK, SEND)}, nodes alive: "
                 f"{[n for n, node in self.nodes.items() if node.alive()]}"]  # fmt: skip
        try:
            for p in range(self.settings.partitions):
                lines.append(f"  partition {p}: {self.state(p)}")
        except Exception as e:  # ZooKeeper itself may be what is down
            lines.append(f"  partition states unavailable: {e}")
        nemesis = self.history_dir / "nemesis.jsonl"
        if nemesis.exists():
            lines += ["  last faults:", *(f"    {line}" for line in nemesis.read_text().splitlines()[-5:])]
        return "\n".join(lines)

    # -- workload -----------------------------------------------------------------------------------

    def start_workload(self) -> None:
        s = self.settings
        for i in range(s.consumers):
            self.consumers.append(self._worker("consume", f"consumer-{i}"))
        for i in range(s.producers):
            extra = [str(i * FIRST_VALUE_STRIDE), str(s.rate), "--compression", s.compression]
            extra += ["--idempotent"] if s.idempotent else []
            self.producers.append(self._worker("produce", f"producer-{i}", extra))

    def _worker(self, role: str, name: str, extra: list[str] | None = None) -> Worker:
        history = self.history_dir / f"{name}.jsonl"
        argv = [
            role,
            self.bootstrap,
            TOPIC,
            str(self.settings.partitions),
            name,
            str(history),
            *(extra or []),
        ]
        with self.sandbox.as_node("clients"):
            return Worker(name, argv, self.workdir / f"{name}.log")

    def count(self, type: str, f: str) -> int:
        """How many ops of this type and function the workers have written so far."""
        return self._progress.update().counts[(type, f)]

    def count_errors(self, name: str) -> int:
        """How many sends or polls have completed with this error (its name, e.g. NOT_ENOUGH_REPLICAS)."""
        return self._progress.update().errors[name]

    def acked_since(self, t: float) -> int:
        """How many writes were acknowledged at or after ``t`` (a ``time.time()``)."""
        return sum(1 for acked in self._progress.update().ack_times if acked >= t)

    def wait_for_acks(self, more: int, timeout: float = 60) -> None:
        """Waits until ``more`` further writes have been acknowledged."""
        target = self.count(OK, SEND) + more
        self.wait(lambda: self.count(OK, SEND) >= target, f"{more} more acknowledged writes", timeout)

    def mark(self, f: str, value: Any = None) -> None:
        """Writes a nemesis op to the history (a fault that is not a node's own, e.g. a partition)."""
        assert self.nemesis is not None
        self.nemesis.write(INFO, f, value)

    def partition(self, side: list[str], other_side: list[str]) -> None:
        rules = self.sandbox.partition(side, other_side)
        self.mark("partition", {"side": side, "other_side": other_side, "rules": len(rules)})

    def heal(self) -> None:
        """Removes partitions, resumes paused nodes, restarts dead ones; writes are expected to be
        acknowledged again within ``recovery_s`` from now."""
        self.sandbox.heal()
        for node in self.nodes.values():
            if node.paused and node.alive():
                node.resume()
        for node in self.nodes.values():
            if not node.alive():
                node.start()
        self.mark("heal")
        self.healed_at = time.time()

    # -- finishing ----------------------------------------------------------------------------------

    def finish(self) -> Report:
        s = self.settings
        if self.healed_at is None:
            self.heal()
        assert self.healed_at is not None
        self._keep_writing_until_acknowledged()
        for worker in self.producers:
            worker.stop()
        try:
            self.wait_healthy(s.recovery_s)
        except AssertionError as e:
            self._liveness.append(str(e).splitlines()[0])
        for i in range(2):
            if i:
                time.sleep(FINAL_READ_PAUSE_S)
            self._final_read(f"final-{i}")
        for worker in self.consumers:
            worker.stop()
        self._close_zk()
        for node in self.nodes.values():
            node.terminate()
        log_dirs = {b.broker_id: b.log_dir for b in self.cluster.brokers.values()}
        replicas = read_replicas(log_dirs, TOPIC)
        report = checker.check(
            load(self.history_dir),
            idempotent=s.idempotent,
            replicas=replicas,
            healed_at=self.healed_at,
            recovery_s=s.recovery_s,
        )
        for message in self._liveness:
            report.add("liveness", message)
        self.report = report
        self._write_figures(report)
        return report

    def _keep_writing_until_acknowledged(self) -> None:
        assert self.healed_at is not None
        want = self.settings.acks_after_healing
        deadline = time.monotonic() + self.settings.recovery_s
        while self.acked_since(self.healed_at) < want and time.monotonic() < deadline:
            time.sleep(0.2)

    def _final_read(self, name: str) -> None:
        argv = ["final-read", self.bootstrap, TOPIC, str(self.settings.partitions), name,
                str(self.history_dir / f"{name}.jsonl"), str(FINAL_READ_TIMEOUT_S)]  # fmt: skip
        with self.sandbox.as_node("clients"):
            worker = Worker(name, argv, self.workdir / f"{name}.log")
        worker.wait(FINAL_READ_TIMEOUT_S + 15)

    def _write_figures(self, report: Report) -> None:
        s = self.settings
        line = {
            "scenario": s.name,
            "tier": s.tier,
            "seed": s.seed,
            "seconds": round(time.monotonic() - self.started, 1),
            **report.stats,
            "anomalies": {k: len(v) for k, v in report.anomalies.items() if v},
            "valid": report.valid,
            "faults": dict(Counter(op.f for op in load(self.history_dir) if op.process == "nemesis")),
            **self.figures,
        }
        with open(self.figures_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        print(f"figures: {json.dumps(line)}")
        self.figures_line = line

    # -- teardown -----------------------------------------------------------------------------------

    def __exit__(self, *_exc: Any) -> None:
        try:
            for worker in [*self.producers, *self.consumers]:
                worker.kill()
            for node in self.nodes.values():
                try:
                    node.terminate()
                except Exception:  # keep stopping the others
                    pass
            self._close_zk()
            if self.cluster is not None:
                self.cluster.stop(graceful=False)
            if self.nemesis is not None:
                self.nemesis.close()
        finally:
            self.sandbox.__exit__(None, None, None)

    def _close_zk(self) -> None:
        if self.cluster is not None:
            self.cluster.disconnect()


class _Progress:
    """Counts the ops in the history files as they grow, reading only what was added since."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.counts: Counter[tuple[str, str]] = Counter()
        self.errors: Counter[str] = Counter()  # completions by error name, e.g. "NOT_ENOUGH_REPLICAS"
        self.ack_times: list[float] = []
        self._read: dict[Path, int] = {}

    def update(self) -> _Progress:
        for path in self.directory.glob("*.jsonl"):
            with open(path, "rb") as f:
                f.seek(self._read.get(path, 0))
                data = f.read()
            complete = data.rfind(b"\n") + 1
            self._read[path] = self._read.get(path, 0) + complete
            for line in data[:complete].splitlines():
                op = Op.from_json(line.decode())
                self.counts[(op.type, op.f)] += 1
                if op.error:
                    self.errors[op.error.split()[0]] += 1
                if (op.type, op.f) == (OK, SEND):
                    self.ack_times.append(op.t)
        return self


class Worker:
    """A workload process (workload.py) with its own log file, stopped by PID."""

    def __init__(self, name: str, argv: list[str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.reliability.workload", *argv],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=os.environ.copy(),
                start_new_session=True,
            )

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.process.returncode

    def stop(self) -> None:
        """SIGTERM: producers wait for their outstanding acknowledgements first."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        self.wait(WORKER_STOP_S)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


QUICK = pytest.param("quick", id="quick")
# The full tier: longer runs, more faults; minutes each.
FULL = pytest.param("full", id="full", marks=[pytest.mark.slow, pytest.mark.timeout(1800)])
TIERS = (QUICK, FULL)
# Scenarios whose quick variant runs in the full tier too, first: the quick tier (< 20 min in all) keeps
# one scenario of each kind of fault, and these repeat a kind it has (bounces, restarts).
QUICK_IN_FULL_TIER = pytest.param("quick", id="quick", marks=pytest.mark.slow)
FULL_TIER_ONLY = (QUICK_IN_FULL_TIER, FULL)
