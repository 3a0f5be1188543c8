"""The transactional checker against hand-made histories: a healthy copy, then one history per
anomaly, and the two negative controls (a copier without transactions duplicates, one that commits
its offsets first loses)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.reliability.checker import Report
from tests.reliability.history import FAIL, FINAL_READ, INFO, INVOKE, OK, SEND, Op, index
from tests.reliability.txn_checker import ABORTED, COMMITTED, OPEN, check, classify
from tests.reliability.txn_copier import READ_COMMITTED, READ_RAW, TXN, transform

IN, OUT = "in", "out"
Entry = tuple[Any, ...]  # ("t" | "d", producer id, value) or ("commit" | "abort", producer id)


class TxnHistory:
    """Builds a history: the input, the output log partition by partition, the copier's transactions,
    and the three reads (derived from the log as a correct broker serves them unless overridden)."""

    def __init__(self, inputs: dict[int, list[int]]) -> None:
        self.ops: list[Op] = []
        self.inputs = inputs
        self.logs: dict[int, list[list[Any]]] = {}

    def op(self, process: str, type: str, f: str, value: Any = None, **extra: Any) -> TxnHistory:
        self.ops.append(Op(process, type, f, value, float(len(self.ops)), **extra))
        return self

    def seeded(self, acked: dict[int, list[int]] | None = None) -> TxnHistory:
        """The seeding producer's acknowledgements (by default, every input value)."""
        for partition, values in (self.inputs if acked is None else acked).items():
            for offset, value in enumerate(values):
                self.op("seeder", INVOKE, SEND, [[IN, partition, value, None]])
                self.op("seeder", OK, SEND, [[IN, partition, value, offset]])
        return self

    def log(self, partition: int, *entries: Entry) -> TxnHistory:
        """Appends entries to an output partition's log, at the next offsets."""
        log = self.logs.setdefault(partition, [])
        for entry in entries:
            kind, pid = entry[0], entry[1]
            value = entry[2] if kind in ("t", "d") else None
            log.append([len(log), pid, 0, kind, value])
        return self

    def txn(self, outcome: str, out: list[tuple[int, int, int]], process: str = "copier-0") -> TxnHistory:
        """A copier transaction of the records out = (partition, offset, value) and its outcome."""
        inputs = [[0, 0, v] for _, _, v in out]
        self.op(process, INVOKE, TXN, {"in": inputs})
        return self.op(process, outcome, TXN, {"in": inputs, "out": [list(r) for r in out], "offsets": []})

    def reads(
        self,
        *,
        committed: dict[int, list[tuple[int, int]]] | None = None,
        aborted: dict[int, list[tuple[int, int]]] | None = None,
        lso: dict[int, int] | None = None,
        input_outcome: str = OK,
    ) -> TxnHistory:
        """The input read, the read_committed read (``committed``: partition -> (offset, value); by
        default what the log's committed records below the last stable offset are) and the raw read
        (``aborted``: partition -> (producer id, first offset); by default those the markers imply)."""
        records = [[IN, p, v, o] for p, values in self.inputs.items() for o, v in enumerate(values)]
        hw = [[IN, p, len(values)] for p, values in self.inputs.items()]
        self.op("input-read", INVOKE, FINAL_READ, []).op(
            "input-read", input_outcome, FINAL_READ, records, hw=hw
        )
        partitions, read, ends = [], [], []
        for p, log in sorted(self.logs.items()):
            classified, implied = classify(log, p)
            first_open = min((r.offset for r in classified if r.outcome == OPEN), default=len(log))
            stable = first_open if lso is None or p not in lso else lso[p]
            if committed is None:
                read += [
                    [OUT, p, r.value, r.offset]
                    for r in classified
                    if r.outcome == COMMITTED and r.offset < stable
                ]
            elif p in committed:
                read += [[OUT, p, v, o] for o, v in committed[p]]
            ends.append([OUT, p, stable])
            reported = sorted(implied) if aborted is None else aborted.get(p, [])
            partitions.append(
                {
                    "partition": p,
                    "hw": len(log),
                    "lso": stable,
                    "log_start": 0,
                    "entries": log,
                    "aborted": [list(a) for a in reported if a[1] < stable],
                }
            )
        self.op("committed-read", INVOKE, READ_COMMITTED, []).op(
            "committed-read", OK, READ_COMMITTED, read, hw=ends
        )
        self.op("raw-read", INVOKE, READ_RAW, None)
        return self.op("raw-read", OK, READ_RAW, {"topic": OUT, "partitions": partitions})

    def check(self) -> Report:
        return check(index(self.ops), input_topic=IN, output_topic=OUT)


def _kinds(report: Report) -> dict[str, int]:
    return {kind: len(found) for kind, found in report.anomalies.items() if found}


def _copied() -> TxnHistory:
    """Input 10..15 in two partitions; producer 7 copies them in three transactions, the second
    aborted (the copier saw it fail) and its records copied again by the third."""
    h = TxnHistory({0: [10, 11, 12], 1: [13, 14, 15]}).seeded()
    h.log(0, ("t", 7, 10), ("t", 7, 13)).log(1, ("t", 7, 11)).log(0, ("commit", 7)).log(1, ("commit", 7))
    h.txn(OK, [(0, 0, 10), (0, 1, 13), (1, 0, 11)])
    h.log(0, ("t", 7, 12), ("t", 7, 14)).log(1, ("t", 7, 15))
    h.log(0, ("abort", 7)).log(1, ("abort", 7))
    h.txn(FAIL, [(0, 3, 12), (0, 4, 14), (1, 2, 15)])
    h.log(0, ("t", 7, 12)).log(1, ("t", 7, 14), ("t", 7, 15)).log(0, ("commit", 7)).log(1, ("commit", 7))
    return h


def test_a_copy_with_an_aborted_transaction_copied_again_is_valid() -> None:
    report = _copied().reads().check()
    assert report.valid, report.summary()
    assert report.stats["input"] == 6
    assert report.stats["output_committed"] == 6
    assert report.stats["aborted_records"] == 3
    assert report.stats["abort_markers"] == 2
    assert report.stats["txns_committed"] == 1 and report.stats["txns_aborted"] == 1


def test_a_record_is_judged_by_its_own_producers_next_marker() -> None:
    """Producer 1's transaction aborts after producer 2's commits in between: 1's record is aborted,
    2's committed, and the aborted transaction starts at 1's first record."""
    log = [[0, 1, 0, "t", 100], [1, 2, 0, "t", 101], [2, 2, 0, "commit", None], [3, 1, 1, "abort", None]]
    records, aborted = classify(log, 0)
    assert [(r.offset, r.outcome) for r in records] == [(0, ABORTED), (1, COMMITTED)]
    assert aborted == {(1, 0)}
    open_, none = classify([[0, 1, 0, "t", 5], [1, 3, 0, "d", 6]], 0)
    assert [(r.offset, r.outcome) for r in open_] == [(0, OPEN), (1, COMMITTED)] and none == set()


def test_an_input_value_never_copied_is_lost() -> None:
    h = TxnHistory({0: [1, 2]}).seeded().log(0, ("t", 7, 1), ("commit", 7))
    report = h.reads().check()
    assert _kinds(report) == {"lost": 1}
    assert "input value 2" in report.anomalies["lost"][0].message


def test_the_copier_without_transactions_duplicates_and_is_caught() -> None:
    """The negative control: an idempotent producer and offsets committed after the produce; killed
    between the two, the next copier copies the batch again, and nothing marks the first copy."""
    h = TxnHistory({0: [1, 2, 3]}).seeded()
    h.log(0, ("d", 5, 1), ("d", 5, 2), ("d", 6, 2), ("d", 6, 3))
    report = h.reads().check()
    assert not report.valid
    assert _kinds(report) == {"duplicate": 1}
    assert "value 2 is in the read_committed output 2 times" in report.anomalies["duplicate"][0].message


def test_the_copier_committing_offsets_first_loses_and_is_caught() -> None:
    h = TxnHistory({0: [1, 2, 3]}).seeded().log(0, ("d", 5, 1), ("d", 6, 3))
    report = h.reads().check()
    assert _kinds(report) == {"lost": 1}


def test_a_read_committed_read_of_an_aborted_record_is_caught() -> None:
    """A broker that forgets the aborted transaction serves its records to read_committed: the
    record is read twice and the markers say the first copy was aborted."""
    h = _copied()
    committed = {
        0: [(0, 10), (1, 13), (3, 12), (4, 14), (6, 12)],
        1: [(0, 11), (2, 15), (4, 14), (5, 15)],
    }
    report = h.reads(committed=committed).check()
    kinds = _kinds(report)
    # 12, 14, 15 read twice; three aborted records read; the copier saw those three aborted.
    assert kinds["duplicate"] == 3
    assert kinds["aborted-read"] == 6
    assert kinds.get("aborted-index") is None


def test_a_read_committed_read_past_an_open_transaction_is_caught() -> None:
    h = TxnHistory({0: [1, 2]}).seeded().log(0, ("t", 7, 1), ("commit", 7), ("t", 7, 2))
    report = h.reads(committed={0: [(0, 1), (2, 2)]}, lso={0: 3}).check()
    assert _kinds(report) == {"uncommitted-read": 1, "hanging-transaction": 1}


def test_a_transaction_left_open_hangs() -> None:
    h = TxnHistory({0: [1, 2]}).seeded().log(0, ("t", 7, 1), ("commit", 7), ("t", 8, 2))
    report = h.reads().check()
    assert _kinds(report) == {"lost": 1, "hanging-transaction": 1}
    assert "last stable offset 2, high watermark 3" in report.anomalies["hanging-transaction"][0].message


def test_a_committed_record_missing_from_read_committed_is_caught() -> None:
    h = TxnHistory({0: [1, 2]}).seeded().log(0, ("t", 7, 1), ("t", 7, 2), ("commit", 7))
    report = h.reads(committed={0: [(0, 1)]}).check()
    assert _kinds(report) == {"lost": 1, "committed-unread": 1}


def test_an_aborted_record_that_is_no_input_value_is_a_phantom() -> None:
    h = TxnHistory({0: [1]}).seeded().log(0, ("t", 7, 99), ("abort", 7), ("t", 7, 1), ("commit", 7))
    report = h.reads().check()
    assert _kinds(report) == {"phantom": 1}
    assert "value 99" in report.anomalies["phantom"][0].message


def test_extra_uncommitted_records_need_an_abort_marker() -> None:
    """A read_uncommitted record that read_committed lacks, with no ABORT marker after it: the
    broker's read_committed view dropped a committed record."""
    h = TxnHistory({0: [1, 2]}).seeded().log(0, ("t", 7, 1), ("commit", 7), ("d", 4, 2))
    report = h.reads(committed={0: [(0, 1)]}).check()
    assert _kinds(report) == {"lost": 1, "committed-unread": 1}


def test_the_aborted_transactions_a_fetch_reports_must_match_the_markers() -> None:
    missing = _copied().reads(aborted={0: [], 1: [(7, 2)]}).check()
    assert _kinds(missing) == {"aborted-index": 1}
    assert "from offset 3 was aborted" in missing.anomalies["aborted-index"][0].message
    extra = _copied().reads(aborted={0: [(7, 3), (7, 0)], 1: [(7, 2)]}).check()
    assert _kinds(extra) == {"aborted-index": 1}
    assert "from offset 0 as aborted" in extra.anomalies["aborted-index"][0].message


def test_the_read_committed_read_must_agree_with_the_log() -> None:
    h = TxnHistory({0: [1, 2]}).seeded().log(0, ("t", 7, 1), ("t", 7, 2), ("commit", 7))
    report = h.reads(committed={0: [(0, 1), (1, 2), (2, 2)]}).check()
    assert _kinds(report) == {"duplicate": 1, "inconsistent-offsets": 1}
    assert "holds value 2 in the read_committed read and a marker" in (
        report.anomalies["inconsistent-offsets"][0].message
    )


def test_a_transaction_the_copier_saw_committed_must_be_read() -> None:
    """The copier's commit returned, yet the log's marker says abort (a coordinator that lost the
    commit decision): the records are not read, and the copier's view says they must be."""
    h = TxnHistory({0: [1]}).seeded().log(0, ("t", 7, 1), ("abort", 7))
    h.txn(OK, [(0, 0, 1)])
    report = h.reads().check()
    assert _kinds(report) == {"lost": 1, "lost-commit": 1}


def test_a_transaction_the_copier_saw_aborted_must_not_be_read() -> None:
    h = TxnHistory({0: [1]}).seeded().log(0, ("t", 7, 1), ("commit", 7))
    h.txn(FAIL, [(0, 0, 1)])
    report = h.reads().check()
    assert _kinds(report) == {"aborted-read": 1}


def test_transactions_of_unknown_outcome_constrain_nothing() -> None:
    h = TxnHistory({0: [1]}).seeded().log(0, ("t", 7, 1), ("abort", 7), ("t", 8, 1), ("commit", 8))
    h.txn(INFO, [(0, 0, 1)]).op("copier-1", INVOKE, TXN, {"in": [[0, 0, 1]]})
    report = h.reads().check()
    assert report.valid, report.summary()
    assert report.stats["txns_unknown"] == 2


def test_an_input_that_lost_an_acknowledged_value_is_reported() -> None:
    h = TxnHistory({0: [1]}).seeded({0: [1, 2]}).log(0, ("t", 7, 1), ("commit", 7))
    report = h.reads().check()
    assert _kinds(report) == {"input": 1}


@pytest.mark.parametrize("missing", [READ_COMMITTED, READ_RAW, FINAL_READ])
def test_a_missing_read_is_a_liveness_anomaly(missing: str) -> None:
    h = TxnHistory({0: [1]}).seeded().log(0, ("t", 7, 1), ("commit", 7)).reads()
    h.ops = [op for op in h.ops if op.f != missing or op.type == INVOKE]
    report = h.check()
    assert report.count("liveness") == 1
    assert not report.valid


def test_the_output_payload_reads_back_as_its_value() -> None:
    from tests.reliability.history import decode_value

    payload = transform(1234, 2, 99)
    assert decode_value(payload) == 1234
    assert b"copied-from 2/99" in payload
