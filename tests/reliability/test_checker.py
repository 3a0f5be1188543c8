"""The checker against hand-made histories, one per anomaly, as Jepsen tests its checkers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.checker import ReplicaLog, Report, check
from tests.reliability.history import (
    FAIL,
    FINAL_READ,
    INFO,
    INVOKE,
    OK,
    POLL,
    SEEK,
    SEND,
    HistoryWriter,
    Op,
    decode_value,
    encode_value,
    index,
    load,
)

TOPIC = "t"


class History:
    """Builds a history one op at a time, each a second after the previous one."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def op(self, process: str, type: str, f: str, value: Any = None, **extra: Any) -> History:
        self.ops.append(Op(process, type, f, value, float(len(self.ops)), **extra))
        return self

    def invoke(self, process: str, partition: int, value: int) -> History:
        return self.op(process, INVOKE, SEND, [[TOPIC, partition, value, None]])

    def complete(
        self, process: str, partition: int, value: int, outcome: str = OK, offset: int | None = None
    ) -> History:
        error = None if outcome == OK else "NOT_ENOUGH_REPLICAS (19)"
        return self.op(process, outcome, SEND, [[TOPIC, partition, value, offset]], error=error)

    def send(
        self, process: str, partition: int, value: int, outcome: str = OK, offset: int | None = None
    ) -> History:
        return self.invoke(process, partition, value).complete(process, partition, value, outcome, offset)

    def seek(self, process: str, partition: int, offset: int | None) -> History:
        return self.op(process, OK, SEEK, [[TOPIC, partition, None, offset]])

    def poll(self, process: str, records: list[tuple[int, int, int]]) -> History:
        """records: (partition, value, offset)."""
        value = [[TOPIC, p, v, o] for p, v, o in records]
        return self.op(process, INVOKE, POLL, []).op(process, OK, POLL, value)

    def final(self, process: str, logs: dict[int, list[int]], outcome: str = OK) -> History:
        """A final read of whole partitions: logs maps a partition to its values at offsets 0, 1, ..."""
        self.op(process, OK, SEEK, [[TOPIC, p, None, 0] for p in logs])
        records = [[TOPIC, p, v, o] for p, values in logs.items() for o, v in enumerate(values)]
        hw = [[TOPIC, p, len(values)] for p, values in logs.items()]
        return self.op(process, INVOKE, FINAL_READ, []).op(process, outcome, FINAL_READ, records, hw=hw)

    def check(self, **kwargs: Any) -> Report:
        return check(index(self.ops), **kwargs)


def _healthy() -> History:
    """Two producers, one consumer, two final reads; partitions 0 and 1."""
    h = History()
    h.send("p0", 0, 1, offset=0).send("p1", 1, 2, offset=0).send("p0", 0, 3, offset=1)
    h.seek("c0", 0, 0).seek("c0", 1, 0).poll("c0", [(0, 1, 0), (1, 2, 0), (0, 3, 1)])
    h.send("p1", 1, 4, INFO)  # indeterminate, and in fact written
    h.send("p1", 1, 5, FAIL)  # definitely not written
    h.invoke("p0", 0, 6)  # never completed, never written
    return h.final("final-0", {0: [1, 3], 1: [2, 4]}).final("final-1", {0: [1, 3], 1: [2, 4]})


def _kinds(report: Report) -> dict[str, int]:
    return {kind: len(found) for kind, found in report.anomalies.items() if found}


def test_a_healthy_history_is_valid_and_counted() -> None:
    report = _healthy().check()
    assert report.valid, report.summary()
    assert _kinds(report) == {}
    assert report.stats["sent"] == 6
    assert (report.stats["acked"], report.stats["failed"], report.stats["indeterminate"]) == (3, 1, 2)
    assert report.stats["polled"] == 3
    assert report.summary().startswith("VALID: no anomalies")


def test_an_acknowledged_value_missing_from_the_final_read_is_a_lost_write() -> None:
    h = History().send("p0", 0, 1, offset=0).send("p0", 0, 2, offset=1).final("final-0", {0: [1]})
    report = h.check()
    assert _kinds(report) == {"lost-write": 1}
    (lost,) = report.anomalies["lost-write"]
    assert "value 2" in lost.message and "acknowledged at offset 1" in lost.message
    # The excerpt names the send's invocation and acknowledgement and the final read.
    assert [op.f for op in lost.ops] == [SEND, SEND, FINAL_READ]
    assert not report.valid and report.stats["lost"] == 1


def test_a_value_a_consumer_read_must_survive_even_if_its_send_was_indeterminate() -> None:
    h = History().send("p0", 0, 1, INFO).poll("c0", [(0, 1, 0)]).final("final-0", {0: []})
    report = h.check()
    assert _kinds(report) == {"lost-write": 1}
    assert "read by c0's poll at offset 0" in report.anomalies["lost-write"][0].message


def test_a_value_seen_by_one_final_read_must_be_in_the_next() -> None:
    h = History().send("p0", 0, 1, INFO).final("final-0", {0: [1]}).final("final-1", {0: []})
    assert _kinds(h.check()) == {"lost-write": 1}


def test_writes_acknowledged_after_a_final_read_began_are_not_required_in_it() -> None:
    h = History().invoke("p0", 0, 1)
    h.op("final-0", INVOKE, FINAL_READ, [])
    h.complete("p0", 0, 1, OK, 0)
    h.op("final-0", OK, FINAL_READ, [], hw=[[TOPIC, 0, 0]])
    assert _kinds(h.check()) == {}


def test_a_final_read_that_does_not_cover_a_partition_cannot_lose_its_values() -> None:
    h = History().send("p0", 1, 1, offset=0).final("final-0", {0: []})
    assert _kinds(h.check()) == {}


def test_values_never_sent_or_whose_send_failed_are_phantoms() -> None:
    h = History().send("p0", 0, 1, FAIL).poll("c0", [(0, 1, 0), (0, 99, 1)]).final("final-0", {0: [1, 99]})
    report = h.check()
    assert _kinds(report) == {"phantom": 2}
    messages = sorted(a.message for a in report.anomalies["phantom"])
    assert "its send failed (NOT_ENOUGH_REPLICAS (19))" in messages[0]
    assert "value 99" in messages[1] and "never sent" in messages[1]


def test_duplicates_are_reported_and_fatal_only_with_idempotence() -> None:
    h = History().send("p0", 0, 1, offset=0).final("final-0", {0: [1, 1]})
    plain = h.check()
    assert _kinds(plain) == {"duplicate": 1}
    assert plain.valid and plain.stats["duplicated"] == 1
    assert "t-0@0, t-0@1" in plain.anomalies["duplicate"][0].message
    idempotent = h.check(idempotent=True)
    assert not idempotent.valid and idempotent.fatal_kinds() == ["duplicate"]


def test_two_values_at_one_offset_are_inconsistent_offsets() -> None:
    h = History().send("p0", 0, 1, INFO).send("p0", 0, 2, INFO)
    h.poll("c0", [(0, 1, 0)]).poll("c1", [(0, 2, 0)])
    report = h.check()
    assert report.count("inconsistent-offsets") == 1
    message = report.anomalies["inconsistent-offsets"][0].message
    assert message.startswith("t-0 offset 0 holds 2 values: 1 (poll by c0); 2 (poll by c1)")


def test_an_ack_at_one_offset_and_a_read_at_another_is_an_offset_mismatch() -> None:
    h = History().send("p0", 0, 1, offset=3).final("final-0", {0: [7, 7, 7, 8, 1]})
    report = h.check()
    assert report.count("offset-mismatch") == 1
    assert "acknowledged at t-0@3 but read at t-0@4" in report.anomalies["offset-mismatch"][0].message
    # The ack and the read disagree about offset 3 as well.
    assert report.count("inconsistent-offsets") == 1


def test_a_later_send_acknowledged_at_a_lower_offset_is_nonmonotonic() -> None:
    h = History().invoke("p0", 0, 1).invoke("p0", 0, 2).invoke("p1", 0, 3)
    h.complete("p0", 0, 2, OK, 4).complete("p0", 0, 1, OK, 5).complete("p1", 0, 3, OK, 3)
    report = h.check()
    assert report.count("nonmonotonic-send") == 1
    assert "p0 sent 1 then 2 to t-0; they were acknowledged at offsets 5 and 4" in (
        report.anomalies["nonmonotonic-send"][0].message
    )


def test_a_consumer_that_jumps_over_or_back_across_offsets_is_flagged() -> None:
    h = History().seek("c0", 0, 0).poll("c0", [(0, 10, 0), (0, 11, 1)]).poll("c0", [(0, 13, 3)])
    h.poll("c0", [(0, 11, 1)])
    report = h.check()
    assert report.count("poll-skip") == 1 and report.count("nonmonotonic-poll") == 1
    assert (
        "c0 read t-0 offset 3 (value 13) where offset 2 was next" in report.anomalies["poll-skip"][0].message
    )
    assert "offset 1 (value 11) where offset 4 was next" in report.anomalies["nonmonotonic-poll"][0].message


def test_a_seek_resets_the_expected_position() -> None:
    h = History().seek("c0", 0, 0).poll("c0", [(0, 10, 0)]).seek("c0", 0, 5).poll("c0", [(0, 15, 5)])
    h.seek("c0", 0, None).poll("c0", [(0, 12, 2), (0, 13, 3)]).poll("c1", [(0, 11, 1)])
    report = h.check()
    assert report.count("poll-skip") == 0 and report.count("nonmonotonic-poll") == 0


def test_a_final_read_ending_below_its_high_watermark_is_a_poll_skip() -> None:
    h = History().seek("final-0", 0, 0).op("final-0", INVOKE, FINAL_READ, [])
    h.op("final-0", OK, FINAL_READ, [[TOPIC, 0, 1, 0]], hw=[[TOPIC, 0, 3]])
    report = h.check()
    assert report.count("poll-skip") == 1
    assert "ended at offset 1, below the high watermark 3" in report.anomalies["poll-skip"][0].message


def _replica(broker: int, values: list[int], *, crc: int = 7, end: int | None = None) -> ReplicaLog:
    records = tuple(enumerate(values))
    batches = tuple((o, o, 1, crc + o) for o in range(len(values)))
    return ReplicaLog(broker, TOPIC, 0, records, batches, len(values) if end is None else end)


def _replicated() -> History:
    return History().send("p0", 0, 1, offset=0).send("p0", 0, 2, offset=1).final("final-0", {0: [1, 2]})


def test_identical_replicas_converge() -> None:
    replicas = [_replica(b, [1, 2]) for b in (1, 2, 3)]
    assert _kinds(_replicated().check(replicas=replicas)) == {}


def test_a_replica_that_differs_below_the_high_watermark_does_not_converge() -> None:
    replicas = [_replica(1, [1, 2]), _replica(2, [1, 9]), _replica(3, [1])]
    report = _replicated().check(replicas=replicas)
    messages = [a.message for a in report.anomalies["replica-convergence"]]
    assert any(
        "broker 2's t-0 differs" in m and "offset 1: 9 where the final read has 2" in m for m in messages
    )
    assert any("broker 3's t-0 ends at offset 1, below the high watermark 2" in m for m in messages)
    assert any("batch 1" in m and "on broker 3" in m for m in messages)


def test_replicas_with_the_same_values_in_different_batches_do_not_converge() -> None:
    replicas = [_replica(1, [1, 2]), _replica(2, [1, 2], crc=100)]
    report = _replicated().check(replicas=replicas)
    assert report.count("replica-convergence") == 1
    assert "crc 0x00000064" in report.anomalies["replica-convergence"][0].message


def test_a_replica_with_data_above_the_quiet_high_watermark_is_a_liveness_failure() -> None:
    replicas = [_replica(1, [1, 2, 3]), _replica(2, [1, 2])]
    report = _replicated().check(replicas=replicas)
    assert _kinds(report) == {"liveness": 1}
    assert "ends at offset 3, above the high watermark 2" in report.anomalies["liveness"][0].message


def test_no_complete_final_read_is_a_liveness_failure() -> None:
    h = History().send("p0", 0, 1, offset=0).final("final-0", {0: [1]}, outcome=FAIL)
    assert _kinds(h.check()) == {"liveness": 1}


def test_writes_must_be_acknowledged_again_soon_after_healing() -> None:
    h = History().send("p0", 0, 1, offset=0)  # t=0, 1
    h.send("p0", 0, 2, INFO).send("p0", 0, 3, INFO).send("p0", 0, 4, offset=1)  # acked at t=7
    h.final("final-0", {0: [1, 4]})
    assert _kinds(h.check(healed_at=2.0, recovery_s=10)) == {}
    slow = h.check(healed_at=2.0, recovery_s=3)
    assert _kinds(slow) == {"liveness": 1}
    assert "the first 5.0 s after" in slow.anomalies["liveness"][0].message


def test_the_jepsen_2013_loss_shows_as_lost_writes_and_inconsistent_offsets() -> None:
    """Leader 1 acks 3 and 4 alone (ISR {1}), dies; unclean election makes 2 leader, which takes 5 and
    6 at the same offsets; 1 comes back and truncates."""
    h = History().send("p0", 0, 1, offset=0).send("p0", 0, 2, offset=1)
    h.send("p0", 0, 3, offset=2).send("p0", 0, 4, offset=3)
    h.op("nemesis", INFO, "kill", "broker-1")
    h.send("p0", 0, 5, offset=2).send("p0", 0, 6, offset=3)
    h.final("final-0", {0: [1, 2, 5, 6]})
    report = h.check()
    assert report.count("lost-write") == 2 and report.count("inconsistent-offsets") == 2
    assert not report.valid
    summary = report.summary()
    assert "lost-write x2" in summary and '"f":"kill"' not in summary
    assert '"process":"p0","type":"ok","f":"send","value":[["t",0,3,2]]' in summary


def test_malformed_histories_are_refused() -> None:
    with pytest.raises(ValueError, match="without its invocation"):
        History().complete("p0", 0, 1, OK, 0).check()
    with pytest.raises(ValueError, match="sent twice"):
        History().invoke("p0", 0, 1).invoke("p1", 0, 1).check()


def test_histories_round_trip_through_files_in_written_order(tmp_path: Path) -> None:
    producer = HistoryWriter(tmp_path / "p0.jsonl", "p0")
    producer.write(INVOKE, SEND, [[TOPIC, 0, 1, None]])
    producer.write(OK, SEND, [[TOPIC, 0, 1, 0]])
    producer.close()
    # A consumer whose clock stepped back between its two lines, and a torn last line.
    lines = [
        Op("c0", OK, SEEK, [[TOPIC, 0, None, 0]], t=2e9).to_json(),
        Op("c0", OK, POLL, [[TOPIC, 0, 1, 0]], t=1.0).to_json(),
    ]
    (tmp_path / "c0.jsonl").write_text("\n".join(lines) + "\n" + '{"t": 3, "proc')
    ops = load(tmp_path)
    assert [(op.process, op.f) for op in ops if op.process == "c0"] == [("c0", SEEK), ("c0", POLL)]
    assert [op.index for op in ops] == [0, 1, 2, 3]
    assert json.loads(ops[0].to_json())["value"] == [[TOPIC, 0, 1, None]]
    assert check(ops).count("poll-skip") == 0


def test_values_round_trip_through_record_payloads() -> None:
    payload = encode_value(123456789)
    assert len(payload) == 100 and decode_value(payload) == 123456789
    assert decode_value(b"hello") is None and decode_value(None) is None
