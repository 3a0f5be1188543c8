"""The transactional reliability scenario: a consume-transform-produce copier (txn_copier.py) moving
records from an input topic to an output topic while brokers and the copier itself are killed.

``TxnScenario`` is a ``Scenario`` (scenario.py: the sandbox, the cluster, nodes, the nemesis history)
with two topics instead of one: INPUT and OUTPUT, replication factor 3, min.insync.replicas 2. Its
workload is a seeding producer (workload.py ``produce``, idempotent, on INPUT at a steady rate, so
the copier has work whenever a fault strikes) and one copier process at a time (a new incarnation after
the copier is killed, with the same transactional id and group). Its faults:

- ``kill_broker(role)``: SIGKILL of the broker that holds a role now, the transaction coordinator of
  the copier's transactional id (FindCoordinator key type 1, checked against ZooKeeper's leader of
  its ``__transaction_state`` partition), the leader of an output partition, or the group coordinator
  of the copier's group (FindCoordinator key type 0); then waits until the role moved, restarts the
  broker, waits for a full ISR everywhere and for the copier to commit more records;
- ``kill_copier()``: the copier SIGKILLed between producing a batch and committing it (its hold
  point): a transaction open with records in the log, or, for the negative controls, records
  produced with their offsets not committed (or the reverse), then a new copier.

``finish()`` stops the seeder, waits until the copier has committed the whole input, stops it, reads
the input (workload.py ``final-read``), the output with a read_committed consumer and raw (txn_copier.py
``read-committed``, ``read-raw``), and runs txn_checker.py over the history.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coordinator.group_metadata_manager import partition_for
from protocol.topic import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from tests.reliability import txn_checker
from tests.reliability.checker import Report
from tests.reliability.history import INFO, OK, Op, load, read_ops
from tests.reliability.scenario import Scenario, Settings, Worker
from tests.reliability.txn_copier import COMMIT, HOLD, REWIND, TXN
from tests.support.cluster import ROOT
from zk import znodes

INPUT, OUTPUT = "txn-input", "txn-output"
GROUP, TRANSACTIONAL_ID = "txn-copier-group", "txn-copier"
TRANSACTION_COORDINATOR, OUTPUT_LEADER, GROUP_COORDINATOR = (
    "transaction-coordinator",
    "output-leader",
    ("group-coordinator"),
)
FIND_COORDINATOR_VERSION = 4
READ_TIMEOUT_S = 60.0


@dataclass
class TxnSettings(Settings):
    input_partitions: int = 3
    output_partitions: int = 4
    mode: str = "transactional"  # txn_copier.MODES
    seed_rate: float = 200.0  # input records a second
    batch: int = 100  # records a copier transaction takes at most
    internal_partitions: int = 10  # of __transaction_state and __consumer_offsets
    transaction_timeout_ms: int = 20000
    progress_per_fault: int = 300  # records the copier commits after each fault before the next
    progress_timeout_s: float = 90.0
    drain_timeout_s: float = 120.0
    copier_debug: str = "eos,protocol"  # librdkafka's transaction and request log in the copier's log


class Process(Worker):
    """A client process of this scenario (any module's ``main``), stopped by PID."""

    def __init__(self, name: str, module: str, argv: list[str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", module, *argv],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=os.environ.copy(),
                start_new_session=True,
            )


class TxnScenario(Scenario):
    settings: TxnSettings

    def __init__(self, settings: TxnSettings, workdir: Path, figures: Path) -> None:
        n = str(settings.internal_partitions)
        overrides = {
            "transaction.state.log.num.partitions": n,
            "offsets.topic.num.partitions": n,
            # Transactions left open by a fault are aborted within seconds of their timeout.
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "2000",
            **settings.broker_overrides,
        }
        super().__init__(dataclasses.replace(settings, broker_overrides=overrides), workdir, figures)
        self.copier: Process | None = None
        self.incarnations = 0
        self.hold_path = workdir / "hold"

    # -- setting up ---------------------------------------------------------------------------------

    def _create_topic(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        s = self.settings
        config = {
            "min.insync.replicas": str(s.min_insync_replicas),
            "unclean.leader.election.enable": "false",
        }
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        topics = [
            NewTopic(INPUT, s.input_partitions, s.replication_factor, config=config),
            NewTopic(OUTPUT, s.output_partitions, s.replication_factor, config=config),
        ]
        for future in admin.create_topics(topics, request_timeout=20).values():
            future.result(timeout=30)
        assert self.cluster is not None
        self.cluster.wait_for_leaders(INPUT, s.input_partitions, timeout=30)
        self.cluster.wait_for_leaders(OUTPUT, s.output_partitions, timeout=30)
        # The internal topics are created on first use; create them now, not during the first fault.
        self.find_coordinator(0, GROUP)
        self.find_coordinator(1, TRANSACTIONAL_ID)
        self.wait_healthy(60)

    # -- views of the cluster -----------------------------------------------------------------------

    def topic_replicas(self) -> dict[tuple[str, int], list[int]]:
        """(topic, partition) -> replicas of the scenario's topics and the internal ones that exist."""
        found = {}
        for topic in (INPUT, OUTPUT, GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC):
            path = znodes.topic_path(topic)
            if not self.zk().exists(path):
                continue
            for p, replicas in znodes.TopicAssignment.decode(self.zk().get(path)[0]).partitions.items():
                found[(topic, p)] = replicas
        return found

    def topic_state(self, topic: str, partition: int) -> znodes.PartitionState | None:
        assert self.cluster is not None
        return self.cluster.partition_state(topic, partition)

    def healthy(self) -> bool:
        for (topic, p), replicas in self.topic_replicas().items():
            state = self.topic_state(topic, p)
            if state is None or state.leader == znodes.LEADER_NONE or set(state.isr) != set(replicas):
                return False
        return True

    def find_coordinator(
        self, key_type: int, key: str, exclude: int | None = None, timeout: float = 30
    ) -> int:
        """The coordinator a live broker names for ``key`` (0 a group, 1 a transactional id), once it
        is a live broker other than ``exclude``."""
        from protocol.api import ApiKey
        from protocol.messages import FindCoordinatorRequest
        from tests.support.raw_client import RawClient

        assert self.cluster is not None
        deadline = time.monotonic() + timeout
        last = "no answer"
        while True:
            for broker_id, broker in self.cluster.brokers.items():
                if not self.broker(broker_id).alive():
                    continue
                try:
                    client = RawClient(broker.address, 5.0)
                    try:
                        request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
                        response: Any = client.request(
                            ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_VERSION, request
                        )
                    finally:
                        client.close()
                except OSError as e:
                    last = f"broker {broker_id}: {e}"
                    continue
                (found,) = response.coordinators
                last = f"broker {broker_id}: node {found.node_id}, error {found.error_code}"
                if found.error_code == 0 and found.node_id != exclude and self.broker(found.node_id).alive():
                    return int(found.node_id)
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no coordinator for key type {key_type} {key!r} in {timeout:g} s ({last})"
                )
            time.sleep(0.2)

    def transaction_coordinator(self, exclude: int | None = None) -> int:
        """The copier's transaction coordinator, once FindCoordinator names the leader ZooKeeper has
        for the transactional id's ``__transaction_state`` partition."""
        partition = partition_for(TRANSACTIONAL_ID, self.settings.internal_partitions)
        return int(
            self.wait(
                lambda: (
                    (found := self.find_coordinator(1, TRANSACTIONAL_ID, exclude))
                    == self.leader_of(TRANSACTION_STATE_TOPIC, partition)
                    and found
                ),
                f"FindCoordinator to name the leader of {TRANSACTION_STATE_TOPIC}-{partition}",
                30,
            )
        )

    def group_coordinator(self, exclude: int | None = None) -> int:
        partition = partition_for(GROUP, self.settings.internal_partitions)
        return int(
            self.wait(
                lambda: (
                    (found := self.find_coordinator(0, GROUP, exclude))
                    == self.leader_of(GROUP_METADATA_TOPIC, partition)
                    and found
                ),
                f"FindCoordinator to name the leader of {GROUP_METADATA_TOPIC}-{partition}",
                30,
            )
        )

    def leader_of(self, topic: str, partition: int) -> int:
        state = self.topic_state(topic, partition)
        return znodes.LEADER_NONE if state is None else state.leader

    def roles(self) -> dict[str, Any]:
        return {
            TRANSACTION_COORDINATOR: self.transaction_coordinator(),
            GROUP_COORDINATOR: self.group_coordinator(),
            "output-leaders": {p: self.leader_of(OUTPUT, p) for p in range(self.settings.output_partitions)},
        }

    def describe(self) -> str:
        lines = [f"  copied so far: {self.copied()}, nodes alive: "
                 f"{[n for n, node in self.nodes.items() if node.alive()]}"]  # fmt: skip
        try:
            for topic, count in (
                (INPUT, self.settings.input_partitions),
                (OUTPUT, self.settings.output_partitions),
            ):
                for p in range(count):
                    lines.append(f"  {topic}-{p}: {self.topic_state(topic, p)}")
        except Exception as e:
            lines.append(f"  partition states unavailable: {e}")
        for name in ("nemesis", f"copier-{self.incarnations - 1}"):
            path = self.history_dir / f"{name}.jsonl"
            if path.exists():
                lines += [
                    f"  last ops of {name}:",
                    *(f"    {line[:300]}" for line in path.read_text().splitlines()[-6:]),
                ]
        if self.copier is not None:
            if self.copier.process.poll() is None:
                os.kill(self.copier.process.pid, signal.SIGUSR1)  # its stacks, to its log
                time.sleep(0.5)
            lines += ["  copier log:", *(f"    {line}" for line in self.copier.tail(40).splitlines())]
        return "\n".join(lines)

    # -- workload -----------------------------------------------------------------------------------

    def start_copying(self) -> None:
        """The seeding producer and the first copier."""
        s = self.settings
        name = "seeder"
        argv = ["produce", self.bootstrap, INPUT, str(s.input_partitions), name,
                str(self.history_dir / f"{name}.jsonl"), "0", str(s.seed_rate), "--idempotent"]  # fmt: skip
        with self.sandbox.as_node("clients"):
            self.producers.append(
                Process(name, "tests.reliability.workload", argv, self.workdir / f"{name}.log")
            )
        self._start_copier()

    def _start_copier(self) -> None:
        s = self.settings
        name = f"copier-{self.incarnations}"
        self.incarnations += 1
        argv = [
            *("copy", self.bootstrap, INPUT, OUTPUT, str(s.output_partitions), GROUP, TRANSACTIONAL_ID, name),
            str(self.history_dir / f"{name}.jsonl"),
            *("--mode", s.mode, "--batch", str(s.batch), "--hold", str(self.hold_path)),
            *("--transaction-timeout-ms", str(s.transaction_timeout_ms), "--debug", s.copier_debug),
        ]
        with self.sandbox.as_node("clients"):
            self.copier = Process(name, "tests.reliability.txn_copier", argv, self.workdir / f"{name}.log")
        self.consumers[:] = [self.copier]

    def _copier_ops(self) -> list[Op]:
        ops: list[Op] = []
        for path in sorted(self.history_dir.glob("copier-*.jsonl")):
            ops.extend(read_ops(path))
        return ops

    def committed_offsets(self) -> dict[int, int]:
        """Input partition -> the furthest offset the copier's history shows committed: its committed
        transactions and offset commits, and the offsets it found committed when it rewound."""
        offsets: dict[int, int] = {}
        for op in self._copier_ops():
            if op.type != OK or op.f not in (TXN, COMMIT, REWIND) or not isinstance(op.value, dict):
                continue
            for partition, offset in op.value.get("offsets", []):
                if offset >= 0:
                    offsets[partition] = max(offsets.get(partition, 0), offset)
        return offsets

    def copied(self) -> int:
        """Input records the copier has committed (offsets start at 0 and the input has no markers)."""
        return sum(self.committed_offsets().values())

    def watched_workloads(self) -> list[Any]:
        # A copier that exits by itself (its watchdog) is restarted by revive_copier, not a failure; it
        # may exit between the wait's revive and its check of the workloads.
        return [w for w in super().watched_workloads() if w is not self.copier]

    def revive_copier(self) -> None:
        """Starts a new copier if the running one exited by itself (its watchdog: a transactional call
        that never returned), as Kafka's test restarts a copier that died."""
        if self.copier is not None and self.copier.process.poll() is not None:
            self.mark("copier-exit", {"copier": self.copier.name, "code": self.copier.process.returncode})
            self.figures["copier_exits"] = self.figures.get("copier_exits", 0) + 1
            self._start_copier()

    def wait_progress(self, more: int, timeout: float | None = None) -> None:
        target = self.copied() + more

        def progressed() -> bool:
            self.revive_copier()
            return self.copied() >= target

        self.wait(
            progressed,
            f"the copier to commit {more} more records",
            self.settings.progress_timeout_s if timeout is None else timeout,
        )

    # -- faults -------------------------------------------------------------------------------------

    def kill_broker(self, role: str) -> int:
        """SIGKILLs the broker holding ``role`` now; waits until the role moved, restarts the broker,
        waits for a full ISR and for the copier to go on. Returns the broker's id."""
        roles = self.roles()
        if role == OUTPUT_LEADER:
            # An output leader that holds no coordinator role, where there is one: a fault of its own.
            coordinators = {roles[TRANSACTION_COORDINATOR], roles[GROUP_COORDINATOR]}
            leaders = roles["output-leaders"]
            partition = next((p for p, b in sorted(leaders.items()) if b not in coordinators), 0)
            target = leaders[partition]
        else:
            partition, target = -1, roles[role]
        held = [r for r in (TRANSACTION_COORDINATOR, GROUP_COORDINATOR) if roles[r] == target]
        held += [f"leader of {OUTPUT}-{p}" for p, b in sorted(roles["output-leaders"].items()) if b == target]
        self.mark("roles", {"target": target, "for": role, "holds": held, **roles})
        node = self.broker(target)
        since = time.monotonic()
        node.kill()
        self.wait_deregistered(target)
        if roles[TRANSACTION_COORDINATOR] == target:
            self.transaction_coordinator(exclude=target)
        if roles[GROUP_COORDINATOR] == target:
            self.group_coordinator(exclude=target)
        led = [p for p, leader in roles["output-leaders"].items() if leader == target]
        self.wait(
            lambda: all(self.leader_of(OUTPUT, p) not in (target, znodes.LEADER_NONE) for p in led),
            f"new leaders of {OUTPUT} partitions {led}",
            30,
        )
        self.figures.setdefault("failover_s", []).append(round(time.monotonic() - since, 2))
        self.figures.setdefault("killed", []).append({"broker": target, "for": role, "held": held})
        node.start()
        self.wait_healthy(60)
        self.wait_progress(self.settings.progress_per_fault)
        return target

    def kill_copier(self) -> None:
        """SIGKILLs the copier at its hold point (a batch produced, its offsets not yet sent or
        committed), starts a new incarnation, and waits for it to go on."""
        assert self.copier is not None
        name = self.copier.name
        path = self.history_dir / f"{name}.jsonl"

        def holds() -> int:
            return sum(1 for op in read_ops(path) if op.f == HOLD) if path.exists() else 0

        before = holds()
        self.hold_path.touch()
        try:
            self.wait(
                lambda: holds() > before, f"{name} to hold a produced batch", self.settings.progress_timeout_s
            )
            self.copier.kill()
            self.mark("kill", name)
        finally:
            self.hold_path.unlink()
        self._start_copier()
        self.wait_progress(self.settings.progress_per_fault)

    # -- finishing ----------------------------------------------------------------------------------

    def input_ends(self) -> dict[int, int]:
        """Each input partition's high watermark (the seeder stopped, so final)."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "txn-scenario-ends"})
        try:
            ends = {}
            for p in range(self.settings.input_partitions):
                deadline = time.monotonic() + 30
                while True:
                    try:
                        ends[p] = consumer.get_watermark_offsets(
                            TopicPartition(INPUT, p), timeout=5, cached=False
                        )[1]
                        break
                    except Exception:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.5)
            return ends
        finally:
            consumer.close()

    def wait_stable(self, timeout: float) -> None:
        """Waits until every output partition's last stable offset reaches its high watermark: the
        coordinator writes a transaction's markers after it has answered EndTxn, so the copier's last
        commit may still be settling. One that never settles is the checker's to report."""
        from tests.reliability.txn_copier import RawReader

        since = time.monotonic()
        reader = RawReader(self.bootstrap, OUTPUT, since + timeout)
        try:
            while time.monotonic() < since + timeout:
                fetched = [reader.fetch(p, 0, 1, max_bytes=1) for p in range(self.settings.output_partitions)]
                if all(data.last_stable_offset >= data.high_watermark for data in fetched):
                    break
                time.sleep(0.2)
        except TimeoutError:
            pass
        finally:
            reader.close()
        self.figures["stable_s"] = round(time.monotonic() - since, 2)

    def finish(self) -> Report:
        s = self.settings
        if self.healed_at is None:
            self.heal()
        try:
            self.wait_healthy(s.recovery_s)
        except AssertionError as e:
            self._liveness.append(str(e).splitlines()[0])
        for worker in self.producers:
            worker.stop()
        ends = self.input_ends()
        self.figures["input_ends"] = ends
        deadline = time.monotonic() + s.drain_timeout_s
        while any(self.committed_offsets().get(p, 0) < end for p, end in ends.items()):
            if time.monotonic() > deadline:
                self._liveness.append(
                    f"the copier committed {self.committed_offsets()} of the input {ends} in "
                    f"{s.drain_timeout_s:g} s after the faults"
                )
                break
            self.revive_copier()
            time.sleep(0.2)
        self.figures["drain_s"] = round(s.drain_timeout_s - (deadline - time.monotonic()), 2)
        if self.copier is not None:
            self.copier.stop()
        self.wait_stable(s.transaction_timeout_ms / 1000 + 15)
        self._read("input-read", "tests.reliability.workload",
                   ["final-read", self.bootstrap, INPUT, str(s.input_partitions)])  # fmt: skip
        for role in ("read-committed", "read-raw"):
            self._read(role, "tests.reliability.txn_copier",
                       [role, self.bootstrap, OUTPUT, str(s.output_partitions)])  # fmt: skip
        self._close_zk()
        for node in self.nodes.values():
            node.terminate()
        report = txn_checker.check(load(self.history_dir), input_topic=INPUT, output_topic=OUTPUT)
        for message in self._liveness:
            report.add("liveness", message)
        self.report = report
        # The columns tests/reliability/results.md has for every scenario.
        self.figures.update(
            acked=report.stats["input"],
            failed=report.stats["txns_aborted"],
            indeterminate=report.stats["txns_unknown"],
            copier_incarnations=self.incarnations,
            copier_errors=sum(1 for op in self._copier_ops() if op.f == "error" and op.type == INFO),
        )
        self._write_figures(report)
        return report

    def _read(self, name: str, module: str, argv: list[str]) -> None:
        argv = [*argv, name, str(self.history_dir / f"{name}.jsonl"), str(READ_TIMEOUT_S)]
        with self.sandbox.as_node("clients"):
            worker = Process(name, module, argv, self.workdir / f"{name}.log")
        worker.wait(READ_TIMEOUT_S + 15)
