"""The history checker: what a run's producers, consumers and final reads saw, against Kafka's promise.

Pure Python over a list of ``history.Op`` (``history.load``) and, optionally, every replica's log as
read from the brokers' log directories after the cluster stopped (``ReplicaLog``). Anomalies, named
after Jepsen's Kafka and Redpanda checkers and reliability.md §5:

- ``lost-write``: a value known to be committed (acknowledged to its producer, or returned by a
  consumer poll, which only reads below the high watermark) is missing from a later final read.
- ``phantom``: a value read was never sent, or its send failed definitively (nothing was appended).
- ``duplicate``: one value read at more than one position. Fatal only with the idempotent producer.
- ``inconsistent-offsets``: one partition offset holds two values across acks, polls and final reads.
- ``offset-mismatch``: a value was read, but never at the partition and offset its ack named.
- ``nonmonotonic-send``: one producer's later send to a partition was acknowledged at a lower offset.
- ``poll-skip`` / ``nonmonotonic-poll``: a consumer's next record in a partition is past, or before,
  the offset after its previous one, with no seek in between.
- ``replica-convergence``: a replica's log below the high watermark differs from the leader's (the
  final read) in values or in batch bytes (CRCs), or ends below it.
- ``liveness``: no complete final read; no write acknowledged within the recovery time after the
  faults were healed; a replica with data above the high watermark once the cluster was quiet.

``check`` returns a ``Report``: anomalies by kind with history excerpts, and the figures of the run.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.reliability.history import FAIL, FINAL_READ, INFO, INVOKE, OK, POLL, SEEK, SEND, Op

KINDS = (
    "lost-write",
    "phantom",
    "duplicate",
    "inconsistent-offsets",
    "offset-mismatch",
    "nonmonotonic-send",
    "poll-skip",
    "nonmonotonic-poll",
    "replica-convergence",
    "liveness",
)
Partition = tuple[str, int]
Position = tuple[str, int, int]  # topic, partition, offset
EXCERPT_OPS = 6
EXCERPT_RECORDS = 4


@dataclass(frozen=True)
class Anomaly:
    kind: str
    message: str
    ops: tuple[Op, ...] = ()

    def render(self) -> str:
        lines = [f"{self.kind}: {self.message}"]
        lines += [f"    #{op.index} {_compact(op)}" for op in self.ops[:EXCERPT_OPS]]
        if len(self.ops) > EXCERPT_OPS:
            lines.append(f"    ... {len(self.ops) - EXCERPT_OPS} more ops")
        return "\n".join(lines)


def _compact(op: Op) -> str:
    """An op's JSON line with long record lists cut short, for excerpts."""
    value = op.value
    if isinstance(value, list) and len(value) > EXCERPT_RECORDS:
        value = [*value[:EXCERPT_RECORDS], f"... {len(value)} records"]
    hw = op.hw if op.hw is None or len(op.hw) <= EXCERPT_RECORDS else [*op.hw[:EXCERPT_RECORDS], "..."]
    return Op(op.process, op.type, op.f, value, op.t, op.error, hw).to_json()


@dataclass(frozen=True)
class ReplicaLog:
    """One replica's log of one partition as stored on disk: (offset, value) per record (value None for
    a payload no workload wrote) and (base offset, last offset, partition leader epoch, CRC) per batch."""

    broker: int
    topic: str
    partition: int
    records: tuple[tuple[int, int | None], ...]
    batches: tuple[tuple[int, int, int, int], ...]
    log_end_offset: int


@dataclass
class Report:
    idempotent: bool
    anomalies: dict[str, list[Anomaly]] = field(default_factory=lambda: {k: [] for k in KINDS})
    stats: dict[str, Any] = field(default_factory=dict)

    def add(self, kind: str, message: str, ops: Iterable[Op] = ()) -> None:
        unique = {op.index: op for op in ops}  # an ack can be both the send's completion and the evidence
        self.anomalies[kind].append(Anomaly(kind, message, tuple(unique.values())))

    def count(self, kind: str) -> int:
        return len(self.anomalies[kind])

    def fatal_kinds(self) -> list[str]:
        """Kinds with anomalies that break the guarantee: all but duplicates without idempotence."""
        return [
            kind
            for kind, found in self.anomalies.items()
            if found and (kind != "duplicate" or self.idempotent)
        ]

    @property
    def valid(self) -> bool:
        return not self.fatal_kinds()

    def summary(self, per_kind: int = 5) -> str:
        counts = ", ".join(f"{k} x{len(v)}" for k, v in self.anomalies.items() if v) or "no anomalies"
        head = f"{'VALID' if self.valid else 'INVALID'}: {counts}"
        stats = ", ".join(f"{k}={v}" for k, v in self.stats.items())
        lines = [head, f"  {stats}"]
        for kind, found in self.anomalies.items():
            for anomaly in found[:per_kind]:
                lines.append("  " + anomaly.render().replace("\n", "\n  "))
            if len(found) > per_kind:
                lines.append(f"  ... {len(found) - per_kind} more {kind} anomalies")
        return "\n".join(lines)


@dataclass
class _Send:
    process: str
    topic: str
    partition: int
    value: int
    seq: int
    invoke: Op
    completion: Op | None = None

    @property
    def outcome(self) -> str:
        return self.completion.type if self.completion is not None else INFO

    @property
    def offset(self) -> int | None:
        if self.completion is None or self.completion.type != OK:
            return None
        return self.completion.records()[0][3]

    def position(self) -> Position | None:
        offset = self.offset
        return None if offset is None else (self.topic, self.partition, offset)


def check(
    history: Sequence[Op],
    *,
    idempotent: bool = False,
    replicas: Sequence[ReplicaLog] = (),
    healed_at: float | None = None,
    recovery_s: float = 30.0,
) -> Report:
    """Checks a merged history (ops numbered by ``history.index``). ``healed_at`` is the time the last
    fault was healed; a write must be acknowledged within ``recovery_s`` after it if any was tried."""
    analysis = _Analysis(history, Report(idempotent))
    analysis.run(replicas, healed_at, recovery_s)
    return analysis.report


class _Analysis:
    def __init__(self, history: Sequence[Op], report: Report) -> None:
        self.history = sorted(history, key=lambda op: op.index)
        self.report = report
        self.sends: dict[int, _Send] = {}
        # Where each value was read, and what each position held (reads and acks), with the ops.
        self.read_at: dict[int, dict[Position, list[Op]]] = defaultdict(lambda: defaultdict(list))
        self.held: dict[Position, dict[int, list[Op]]] = defaultdict(lambda: defaultdict(list))
        self.final_reads: list[tuple[Op | None, Op]] = []  # (invocation, completion)

    def run(self, replicas: Sequence[ReplicaLog], healed_at: float | None, recovery_s: float) -> None:
        self._collect()
        self._inconsistent_offsets()
        self._duplicates_phantoms_mismatches()
        self._nonmonotonic_sends()
        self._positions()
        self._lost_writes()
        self._replicas(replicas)
        self._liveness(healed_at, recovery_s)
        self._figures()

    # -- collecting ---------------------------------------------------------------------------------

    def _collect(self) -> None:
        per_process_seq: dict[str, int] = defaultdict(int)
        final_invocations: dict[str, Op] = {}
        for op in self.history:
            if op.f == SEND:
                self._collect_send(op, per_process_seq)
            elif op.f in (POLL, FINAL_READ) and op.type in (OK, FAIL):
                for topic, partition, value, offset in op.records():
                    if value is None or offset is None:
                        continue
                    position = (topic, partition, offset)
                    self.read_at[value][position].append(op)
                    self.held[position][value].append(op)
            if op.f == FINAL_READ:
                if op.type == INVOKE:
                    final_invocations[op.process] = op
                else:
                    self.final_reads.append((final_invocations.pop(op.process, None), op))

    def _collect_send(self, op: Op, per_process_seq: dict[str, int]) -> None:
        ((topic, partition, value, _),) = op.records()
        if value is None:
            raise ValueError(f"history: a send without a value: {op.to_json()}")
        if op.type == INVOKE:
            if value in self.sends:
                raise ValueError(f"history: value {value} sent twice: {op.to_json()}")
            self.sends[value] = _Send(op.process, topic, partition, value, per_process_seq[op.process], op)
            per_process_seq[op.process] += 1
            return
        send = self.sends.get(value)
        if send is None or send.completion is not None:
            raise ValueError(f"history: a completion without its invocation: {op.to_json()}")
        send.completion = op
        position = send.position()
        if position is not None:
            self.held[position][value].append(op)

    # -- per-position and per-value anomalies -------------------------------------------------------

    def _inconsistent_offsets(self) -> None:
        for (topic, partition, offset), values in sorted(self.held.items()):
            if len(values) > 1:
                described = "; ".join(f"{v} ({_sources(ops)})" for v, ops in sorted(values.items()))
                self.report.add(
                    "inconsistent-offsets",
                    f"{topic}-{partition} offset {offset} holds {len(values)} values: {described}",
                    _first_each(values.values()),
                )

    def _duplicates_phantoms_mismatches(self) -> None:
        for value, positions in sorted(self.read_at.items()):
            send = self.sends.get(value)
            send_ops = _send_ops(send)
            where = ", ".join(_where(p) for p in sorted(positions))
            if len(positions) > 1:
                self.report.add(
                    "duplicate",
                    f"value {value} was read at {len(positions)} positions: {where}",
                    [*send_ops, *_first_each(positions.values())],
                )
            if send is None:
                self.report.add(
                    "phantom",
                    f"value {value} was read at {where} but never sent",
                    _first_each(positions.values()),
                )
            elif send.outcome == FAIL:
                self.report.add(
                    "phantom",
                    f"value {value} was read at {where} but its send failed ({send.completion.error})",  # type: ignore[union-attr]
                    [*send_ops, *_first_each(positions.values())],
                )
            acked_at = send.position() if send is not None else None
            if acked_at is not None and acked_at not in positions:
                self.report.add(
                    "offset-mismatch",
                    f"value {value} was acknowledged at {_where(acked_at)} but read at {where}",
                    [*send_ops, *_first_each(positions.values())],
                )

    def _nonmonotonic_sends(self) -> None:
        acked: dict[tuple[str, str, int], list[_Send]] = defaultdict(list)
        for send in self.sends.values():
            if send.offset is not None:
                acked[(send.process, send.topic, send.partition)].append(send)
        for (process, topic, partition), sends in sorted(acked.items()):
            sends.sort(key=lambda s: s.seq)
            for before, after in itertools.pairwise(sends):
                if after.offset <= before.offset:  # type: ignore[operator]
                    self.report.add(
                        "nonmonotonic-send",
                        f"{process} sent {before.value} then {after.value} to {topic}-{partition}; they were "
                        f"acknowledged at offsets {before.offset} and {after.offset}",
                        [*_send_ops(before), *_send_ops(after)],
                    )

    # -- consumer positions -------------------------------------------------------------------------

    def _positions(self) -> None:
        by_process: dict[str, list[Op]] = defaultdict(list)
        for op in self.history:
            if op.f in (SEEK, POLL, FINAL_READ) and op.type != INVOKE:
                by_process[op.process].append(op)
        for ops in by_process.values():
            self._consumer_positions(ops)

    def _consumer_positions(self, ops: list[Op]) -> None:
        """One consumer's reads, in order: each record of a partition is at the offset after the
        previous one, unless a seek set the position in between."""
        expected: dict[Partition, int | None] = {}
        last: dict[Partition, Op] = {}
        for op in ops:
            if op.f == SEEK:
                for topic, partition, _, offset in op.records():
                    expected[(topic, partition)] = offset
                    last[(topic, partition)] = op
                continue
            if op.type not in (OK, FAIL):
                continue
            for topic, partition, value, offset in op.records():
                key = (topic, partition)
                want = expected.get(key)
                if offset is not None and want is not None and offset != want:
                    self.report.add(
                        "poll-skip" if offset > want else "nonmonotonic-poll",
                        f"{op.process} read {topic}-{partition} offset {offset} (value {value}) where "
                        f"offset {want} was next",
                        [o for o in (last.get(key), op) if o is not None],
                    )
                expected[key] = None if offset is None else offset + 1
                last[key] = op
            if op.f != FINAL_READ or op.type != OK:
                continue
            for topic, partition, hw in op.hw or []:
                reached = expected.get((topic, partition))
                if reached is not None and reached < hw:
                    self.report.add(
                        "poll-skip",
                        f"{op.process}'s final read of {topic}-{partition} ended at offset {reached}, "
                        f"below the high watermark {hw}",
                        [op],
                    )

    # -- lost writes --------------------------------------------------------------------------------

    def _lost_writes(self) -> None:
        """A final read must hold every value committed before it began: acknowledged values, values
        consumers polled (only committed data is served), and values an earlier final read saw."""
        evidence: list[tuple[int, int, Partition, str, Op]] = []  # (index, value, partition, why, op)
        for send in self.sends.values():
            if send.completion is not None and send.completion.type == OK:
                why = f"acknowledged at offset {send.offset}"
                partition = (send.topic, send.partition)
                evidence.append((send.completion.index, send.value, partition, why, send.completion))
        for value, positions in self.read_at.items():
            for (topic, partition, offset), ops in positions.items():
                for op in ops:
                    who = "final read" if op.f == FINAL_READ else "poll"
                    why = f"read by {op.process}'s {who} at offset {offset}"
                    evidence.append((op.index, value, (topic, partition), why, op))
        evidence.sort(key=lambda e: e[0])
        reported: set[int] = set()
        for invocation, final in self.final_reads:
            if final.type != OK:
                continue
            start = (invocation or final).index
            covered = {(t, p) for t, p, _ in final.hw or []}
            present = {v for _, _, v, _ in final.records()}
            for index, value, partition, why, op in evidence:
                if index >= start:
                    break
                if partition in covered and value not in present and value not in reported:
                    reported.add(value)
                    self.report.add(
                        "lost-write",
                        f"value {value} ({partition[0]}-{partition[1]}, {why}) is missing from "
                        f"{final.process}'s final read",
                        [*_send_ops(self.sends.get(value)), op, final],
                    )

    # -- replicas -----------------------------------------------------------------------------------

    def _replicas(self, replicas: Sequence[ReplicaLog]) -> None:
        if not replicas:
            return
        last_final: dict[Partition, tuple[int, dict[int, int | None], Op]] = {}
        for _, final in self.final_reads:
            if final.type != OK:
                continue
            for topic, partition, hw in final.hw or []:
                held = {o: v for t, p, v, o in final.records() if (t, p) == (topic, partition)}
                last_final[(topic, partition)] = (hw, held, final)
        by_partition: dict[Partition, list[ReplicaLog]] = defaultdict(list)
        for replica in replicas:
            by_partition[(replica.topic, replica.partition)].append(replica)
        for key, logs in sorted(by_partition.items()):
            name = f"{key[0]}-{key[1]}"
            if key not in last_final:
                self.report.add("liveness", f"no complete final read of {name} to compare its replicas with")
                continue
            hw, held, final = last_final[key]
            logs.sort(key=lambda r: r.broker)
            for replica in logs:
                self._compare_replica(name, replica, hw, held, final)
            self._compare_batches(name, logs, hw)

    def _compare_replica(
        self, name: str, replica: ReplicaLog, hw: int, held: dict[int, int | None], final: Op
    ) -> None:
        broker = f"broker {replica.broker}"
        if replica.log_end_offset < hw:
            self.report.add(
                "replica-convergence",
                f"{broker}'s {name} ends at offset {replica.log_end_offset}, below the high watermark {hw}",
                [final],
            )
        elif replica.log_end_offset > hw:
            self.report.add(
                "liveness",
                f"{broker}'s {name} ends at offset {replica.log_end_offset}, above the high watermark {hw} "
                "of the quiet cluster",
            )
        stored = {o: v for o, v in replica.records if o < hw}
        wrong = [
            f"offset {o}: {stored.get(o, 'nothing')} where the final read has {held.get(o, 'nothing')}"
            for o in sorted(stored.keys() | held.keys())
            if o < min(hw, replica.log_end_offset) and stored.get(o, -1) != held.get(o, -1)
        ]
        if wrong:
            shown = "; ".join(wrong[:5]) + (f"; ... {len(wrong) - 5} more" if len(wrong) > 5 else "")
            self.report.add(
                "replica-convergence",
                f"{broker}'s {name} differs from the leader's log below the high watermark {hw} at "
                f"{len(wrong)} offsets: {shown}",
                [final],
            )

    def _compare_batches(self, name: str, logs: list[ReplicaLog], hw: int) -> None:
        below = {r.broker: [b for b in r.batches if b[1] < hw] for r in logs}
        reference_broker, reference = next(iter(below.items()))
        for broker, batches in below.items():
            if batches == reference:
                continue
            at = next(
                (i for i, (a, b) in enumerate(zip(reference, batches, strict=False)) if a != b),
                min(len(reference), len(batches)),
            )
            mine = _batch(batches[at]) if at < len(batches) else "no batch"
            theirs = _batch(reference[at]) if at < len(reference) else "no batch"
            self.report.add(
                "replica-convergence",
                f"{name}: batch {at} below the high watermark {hw} is {mine} on broker {broker} and "
                f"{theirs} on broker {reference_broker}",
            )

    # -- liveness and figures -----------------------------------------------------------------------

    def _liveness(self, healed_at: float | None, recovery_s: float) -> None:
        if self.sends and not any(final.type == OK for _, final in self.final_reads):
            failed = [final for _, final in self.final_reads]
            reason = "; ".join(f"{op.process}: {op.error}" for op in failed) or "none was made"
            self.report.add("liveness", f"no complete final read ({reason})", failed)
        if healed_at is None:
            return
        tried = [s for s in self.sends.values() if s.invoke.t >= healed_at]
        acked = [t for t in self._ack_times() if t >= healed_at]
        if tried and (not acked or acked[0] > healed_at + recovery_s):
            first = f"the first {acked[0] - healed_at:.1f} s after" if acked else "none after"
            self.report.add(
                "liveness",
                f"{len(tried)} writes tried after the faults were healed; no acknowledgement within "
                f"{recovery_s:g} s ({first})",
                [tried[0].invoke],
            )

    def _ack_times(self) -> list[float]:
        return sorted(
            s.completion.t
            for s in self.sends.values()
            if s.completion is not None and s.completion.type == OK
        )

    def _figures(self) -> None:
        outcomes: dict[str, int] = defaultdict(int)
        for send in self.sends.values():
            outcomes[send.outcome] += 1
        gaps = [b - a for a, b in itertools.pairwise(self._ack_times())]
        polled = {
            value
            for value, positions in self.read_at.items()
            if any(op.f == POLL for ops in positions.values() for op in ops)
        }
        self.report.stats.update(
            sent=len(self.sends),
            acked=outcomes[OK],
            failed=outcomes[FAIL],
            indeterminate=outcomes[INFO],
            polled=len(polled),
            lost=self.report.count("lost-write"),
            duplicated=self.report.count("duplicate"),
            phantom=self.report.count("phantom"),
            longest_ack_gap_s=round(max(gaps, default=0.0), 2),
        )


def _send_ops(send: _Send | None) -> list[Op]:
    if send is None:
        return []
    return [send.invoke] if send.completion is None else [send.invoke, send.completion]


def _first_each(groups: Iterable[list[Op]]) -> list[Op]:
    return [ops[0] for ops in groups if ops]


def _sources(ops: list[Op]) -> str:
    return ", ".join(sorted({f"{'ack' if op.f == SEND else op.f} by {op.process}" for op in ops}))


def _where(position: Position) -> str:
    topic, partition, offset = position
    return f"{topic}-{partition}@{offset}"


def _batch(batch: tuple[int, int, int, int]) -> str:
    base, last, epoch, crc = batch
    return f"offsets {base}-{last} (leader epoch {epoch}, crc {crc:#010x})"
