"""The transactional history checker: a consume-transform-produce copier's output against its input,
as Kafka's transactions_test.py checks it, and against the transaction markers in the log.

Pure Python over a merged history (``history.load``) holding

- the input: a ``final-read`` of the input topic (workload.py, read_uncommitted up to the high
  watermark; the input is written without transactions) and the seeding producer's ``send`` ops;
- the output as a read_committed consumer sees it: a ``read-committed`` op (txn_copier.py);
- the output as the log holds it: a ``read-raw`` op (txn_copier.py: every record with its producer
  id and whether it is transactional, the COMMIT/ABORT markers, each partition's high watermark and
  last stable offset, and the aborted transactions a read_committed Fetch reported);
- the copier's ``txn`` ops: the output positions of each transaction it saw committed (``ok``) or
  aborted (``fail``).

A record of the raw log is *committed* when it is not transactional or the next marker of its
producer in its partition is COMMIT, *aborted* when that marker is ABORT, *open* when none follows.
Anomalies:

- ``lost``: an input value is missing from the read_committed output.
- ``duplicate``: an input value is in the read_committed output more than once.
- ``phantom``: an output record (either read) holds a value that is not an input value.
- ``aborted-read``: read_committed returned a record of an aborted transaction (its producer's next
  marker is ABORT, or the copier saw its transaction aborted).
- ``uncommitted-read``: read_committed returned a record of a transaction that has no marker.
- ``committed-unread``: the log holds a committed record below the end of the read_committed read
  that the read did not return.
- ``inconsistent-offsets``: the read_committed read and the raw log disagree on an offset's record.
- ``lost-commit``: the copier's commit succeeded, but a record of that transaction is not at its
  offset in the read_committed output.
- ``aborted-index``: the aborted transactions a read_committed Fetch reported are not those the ABORT
  markers imply.
- ``hanging-transaction``: once the copier stopped, a partition's last stable offset is below its
  high watermark, or transactional records have no marker.
- ``input``: the input topic lost a value its producer had acknowledged, or holds one twice.
- ``liveness``: a read did not complete.

So a read_uncommitted read may hold more than the read_committed one only where markers say so: every
extra record must be an input value (else phantom) of an aborted transaction (else committed-unread
or hanging-transaction).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.reliability.checker import Report
from tests.reliability.history import FAIL, FINAL_READ, INFO, INVOKE, OK, SEND, Op
from tests.reliability.txn_copier import READ_COMMITTED, READ_RAW, TXN

KINDS = (
    "lost",
    "duplicate",
    "phantom",
    "aborted-read",
    "uncommitted-read",
    "committed-unread",
    "inconsistent-offsets",
    "lost-commit",
    "aborted-index",
    "hanging-transaction",
    "input",
    "liveness",
)
COMMITTED, ABORTED, OPEN = "committed", "aborted", "open"
Position = tuple[int, int]  # partition, offset


@dataclass(frozen=True)
class RawRecord:
    """One data record of the raw read, with the outcome its producer's next marker gives it."""

    partition: int
    offset: int
    producer_id: int
    transactional: bool
    value: int | None
    outcome: str


def check(history: Sequence[Op], *, input_topic: str, output_topic: str) -> Report:
    analysis = _Analysis(sorted(history, key=lambda op: op.index), input_topic, output_topic)
    analysis.run()
    return analysis.report


def classify(
    entries: Sequence[Sequence[Any]], partition: int = 0
) -> tuple[list[RawRecord], set[tuple[int, int]]]:
    """The data records of one partition's raw entries ([offset, producer id, epoch, kind, value], in
    offset order) with their outcomes, and the aborted transactions the ABORT markers imply:
    (producer id, offset of the transaction's first record in the partition)."""
    records: list[RawRecord] = []
    pending: dict[int, list[tuple[int, int | None]]] = defaultdict(list)  # producer id -> (offset, value)
    implied_aborts: set[tuple[int, int]] = set()
    for offset, producer_id, _epoch, kind, value in entries:
        if kind == "d":
            records.append(RawRecord(partition, offset, producer_id, False, value, COMMITTED))
        elif kind == "t":
            pending[producer_id].append((offset, value))
        elif kind in ("commit", "abort"):
            outcome = COMMITTED if kind == "commit" else ABORTED
            txn = pending.pop(producer_id, [])
            if txn and outcome == ABORTED:
                implied_aborts.add((producer_id, txn[0][0]))
            records += [RawRecord(partition, o, producer_id, True, v, outcome) for o, v in txn]
    for producer_id, txn in pending.items():
        records += [RawRecord(partition, o, producer_id, True, v, OPEN) for o, v in txn]
    records.sort(key=lambda r: r.offset)
    return records, implied_aborts


class _Analysis:
    def __init__(self, history: Sequence[Op], input_topic: str, output_topic: str) -> None:
        self.history = history
        self.input_topic = input_topic
        self.output_topic = output_topic
        self.report = Report(idempotent=True, anomalies={k: [] for k in KINDS})
        self.input: dict[int, list[Position]] = defaultdict(list)  # value -> positions in the input
        self.input_read: Op | None = None
        self.committed_read: Op | None = None
        self.raw_read: Op | None = None
        self.committed_positions: dict[Position, int | None] | None = None  # what read_committed read
        self.stats: Counter[str] = Counter()

    def run(self) -> None:
        self._collect_reads()
        self._input()
        if self.committed_read is not None:
            self._committed_read()
        if self.raw_read is not None:
            self._raw_read()
        self._copier_transactions()
        self._figures()

    # -- the reads ----------------------------------------------------------------------------------

    def _collect_reads(self) -> None:
        """The last complete read of each kind; a failed one is a liveness anomaly when none completed."""
        failed: dict[str, list[Op]] = defaultdict(list)
        for op in self.history:
            if op.type not in (OK, FAIL):
                continue
            if op.f == FINAL_READ and any(t == self.input_topic for t, _, _, _ in op.records()):
                target = "input_read"
            elif op.f == FINAL_READ and op.hw and all(t == self.input_topic for t, _, _ in op.hw):
                target = "input_read"  # an empty input
            elif op.f == READ_COMMITTED:
                target = "committed_read"
            elif op.f == READ_RAW:
                target = "raw_read"
            else:
                continue
            if op.type == OK:
                setattr(self, target, op)
            else:
                failed[target].append(op)
        for target, what in (
            ("input_read", "read of the input"),
            ("committed_read", "read_committed read of the output"),
            ("raw_read", "raw read of the output"),
        ):
            if getattr(self, target) is None:
                why = "; ".join(f"{op.process}: {op.error}" for op in failed[target]) or "none was made"
                self.report.add("liveness", f"no complete {what} ({why})", failed[target])

    def _input(self) -> None:
        if self.input_read is None:
            return
        for _, partition, value, offset in self.input_read.records():
            if value is not None and offset is not None:
                self.input[value].append((partition, offset))
        for value, positions in sorted(self.input.items()):
            if len(positions) > 1:
                self.report.add("input", f"input value {value} is at {len(positions)} positions: "
                                f"{_where_all(self.input_topic, positions)}", [self.input_read])  # fmt: skip
        for op in self.history:
            if op.f != SEND or op.type != OK:
                continue
            for topic, partition, value, offset in op.records():
                if topic == self.input_topic and value not in self.input:
                    self.report.add(
                        "input",
                        f"input value {value}, acknowledged at {topic}-{partition}@{offset}, is missing "
                        "from the read of the input",
                        _ops(op, self.input_read),
                    )

    def _committed_read(self) -> None:
        op = self.committed_read
        assert op is not None
        read_at: dict[int | None, list[Position]] = defaultdict(list)
        for _, partition, value, offset in op.records():
            if offset is not None:
                read_at[value].append((partition, offset))
        self.committed_positions = {pos: v for v, positions in read_at.items() for pos in positions}
        for value, positions in sorted(read_at.items(), key=lambda item: (item[0] is None, item[0] or 0)):
            where = _where_all(self.output_topic, positions)
            if value is None or value not in self.input:
                self.report.add("phantom", f"the read_committed output holds value {value}, not an input "
                                f"value, at {where}", [op])  # fmt: skip
            if len(positions) > 1:
                self.report.add("duplicate", f"value {value} is in the read_committed output "
                                f"{len(positions)} times: {where}", [op])  # fmt: skip
        if self.input_read is not None:
            for value, positions in sorted(self.input.items()):
                if value not in read_at:
                    self.report.add(
                        "lost",
                        f"input value {value} ({_where_all(self.input_topic, positions)}) is missing from "
                        "the read_committed output",
                        _ops(self.input_read, op),
                    )
        self.stats["output_committed"] = sum(len(p) for p in read_at.values())

    def _raw_read(self) -> None:
        op = self.raw_read
        assert op is not None
        committed = self.committed_positions
        ends = {p: end for _, p, end in (self.committed_read.hw or [])} if self.committed_read else {}
        for data in op.value["partitions"]:
            partition = data["partition"]
            name = f"{self.output_topic}-{partition}"
            records, implied = classify(data["entries"], partition)
            markers = Counter(e[3] for e in data["entries"] if e[3] in ("commit", "abort"))
            self.stats["commit_markers"] += markers["commit"]
            self.stats["abort_markers"] += markers["abort"]
            self.stats["output_raw"] += len(records)
            raw_at = {r.offset: r for r in records}
            marker_offsets = {e[0] for e in data["entries"] if e[3] not in ("t", "d")}
            for r in records:
                self.stats[f"raw_{r.outcome}"] += 1
                where = f"{name}@{r.offset}"
                if r.value is None or r.value not in self.input:
                    self.report.add("phantom", f"the log holds value {r.value}, not an input value, at "
                                    f"{where} ({r.outcome}, producer {r.producer_id})", [op])  # fmt: skip
                if committed is None:
                    continue
                read = (partition, r.offset) in committed
                if r.outcome == ABORTED and read:
                    self.report.add("aborted-read", f"the read_committed output holds value {r.value} at "
                                    f"{where}, a record of an aborted transaction of producer "
                                    f"{r.producer_id}", _ops(op, self.committed_read))  # fmt: skip
                elif r.outcome == OPEN and read:
                    self.report.add("uncommitted-read", f"the read_committed output holds value {r.value} at "
                                    f"{where}, a record of producer {r.producer_id}'s transaction that has "
                                    "no marker", _ops(op, self.committed_read))  # fmt: skip
                elif r.outcome == COMMITTED and not read and r.offset < ends.get(partition, -1):
                    self.report.add("committed-unread", f"the log holds committed value {r.value} at "
                                    f"{where} (producer {r.producer_id}), below the end {ends[partition]} of "
                                    "the read_committed read, which lacks it",
                                    _ops(op, self.committed_read))  # fmt: skip
            if committed is not None:
                for (p, offset), value in sorted(committed.items()):
                    if p != partition:
                        continue
                    raw = raw_at.get(offset)
                    if raw is None or raw.value != value:
                        held = (
                            "a marker"
                            if offset in marker_offsets
                            else ("nothing" if raw is None else f"value {raw.value}")
                        )
                        self.report.add("inconsistent-offsets", f"{name}@{offset} holds value {value} in the "
                                        f"read_committed read and {held} in the raw log",
                                        _ops(op, self.committed_read))  # fmt: skip
            self._aborted_index(name, data, implied)
            open_records = [r for r in records if r.outcome == OPEN]
            if open_records or data["lso"] < data["hw"]:
                producers = sorted({r.producer_id for r in open_records})
                self.report.add(
                    "hanging-transaction",
                    f"{name}: last stable offset {data['lso']}, high watermark {data['hw']}; "
                    f"{len(open_records)} transactional records without a marker (producers {producers})",
                    [op],
                )

    def _aborted_index(self, name: str, data: dict[str, Any], implied: set[tuple[int, int]]) -> None:
        """The aborted transactions below the last stable offset a read_committed Fetch reports must be
        those the ABORT markers imply (a missing one lets its records through to read_committed
        consumers; an extra one hides committed records of that producer)."""
        reported = {(pid, first) for pid, first in data["aborted"]}
        expected = {(pid, first) for pid, first in implied if first < data["lso"]}
        for pid, first in sorted(expected - reported):
            self.report.add("aborted-index", f"{name}: producer {pid}'s transaction from offset {first} was "
                            "aborted (ABORT marker) but a read_committed Fetch does not report it",
                            _ops(self.raw_read))  # fmt: skip
        for pid, first in sorted(reported - expected):
            self.report.add("aborted-index", f"{name}: a read_committed Fetch reports producer {pid}'s "
                            f"transaction from offset {first} as aborted, but no aborted transaction of its "
                            "starts there in the log", _ops(self.raw_read))  # fmt: skip

    # -- the copier's own view ----------------------------------------------------------------------

    def _copier_transactions(self) -> None:
        committed = self.committed_positions
        invoked = 0
        for op in self.history:
            if op.f != TXN:
                continue
            if op.type == INVOKE:
                invoked += 1
                continue
            self.stats[f"txn_{op.type}"] += 1
            if committed is None or not isinstance(op.value, dict):
                continue
            for partition, offset, value in op.value.get("out", []):
                where = f"{self.output_topic}-{partition}@{offset}"
                if op.type == OK and committed.get((partition, offset)) != value:
                    held = committed.get((partition, offset), "nothing")
                    self.report.add("lost-commit", f"{op.process} committed value {value} at {where}; the "
                                    f"read_committed output holds {held} there",
                                    _ops(op, self.committed_read))  # fmt: skip
                elif op.type == FAIL and (partition, offset) in committed:
                    self.report.add("aborted-read", f"{op.process} aborted its transaction of value {value} "
                                    f"at {where}; the read_committed output holds "
                                    f"{committed[(partition, offset)]} there",
                                    _ops(op, self.committed_read))  # fmt: skip
        completed = self.stats[f"txn_{OK}"] + self.stats[f"txn_{FAIL}"] + self.stats[f"txn_{INFO}"]
        self.stats["txn_unfinished"] = invoked - completed

    def _figures(self) -> None:
        s = self.stats
        self.report.stats.update(
            input=sum(len(p) for p in self.input.values()),
            output_committed=s["output_committed"],
            output_raw=s["output_raw"],
            aborted_records=s[f"raw_{ABORTED}"],
            open_records=s[f"raw_{OPEN}"],
            commit_markers=s["commit_markers"],
            abort_markers=s["abort_markers"],
            txns_committed=s[f"txn_{OK}"],
            txns_aborted=s[f"txn_{FAIL}"],
            txns_unknown=s[f"txn_{INFO}"] + s["txn_unfinished"],
            lost=self.report.count("lost"),
            duplicated=self.report.count("duplicate"),
            phantom=self.report.count("phantom"),
        )


def _ops(*ops: Op | None) -> list[Op]:
    return [op for op in ops if op is not None]


def _where_all(topic: str, positions: Sequence[Position]) -> str:
    shown = ", ".join(f"{topic}-{p}@{o}" for p, o in sorted(positions)[:5])
    return shown + (f", ... {len(positions) - 5} more" if len(positions) > 5 else "")
