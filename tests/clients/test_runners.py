"""Checks the runner plumbing without a broker: missing tools are reported as ClientNotInstalled,
a hung client is killed at its timeout, and a refused connection is a ClientFailed carrying stderr; and
check_round_trip catches every kind of damage it is meant to."""

import dataclasses
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.clients import runners


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("client", ["kafkajs", "java"])
def test_missing_cached_tool_is_not_installed(
    client: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAMSA_CLIENTS_DIR", str(tmp_path))
    with pytest.raises(runners.ClientNotInstalled, match="make clientdeps"):
        runners.BOOTSTRAP[client]("127.0.0.1:1", 5)


def test_missing_program_is_not_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(runners.ClientNotInstalled, match="kcat"):
        runners.bootstrap_kcat("127.0.0.1:1", 5)


@pytest.mark.integration
def test_hung_client_is_killed_at_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(runners.ClientFailed, match="timed out"):
        runners._run("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], 0.5)
    assert time.monotonic() - started < 10


@pytest.mark.integration
def test_refused_connection_is_client_failed_with_stderr() -> None:
    with pytest.raises(runners.ClientFailed) as failure:
        runners.bootstrap_aiokafka(f"127.0.0.1:{_closed_port()}", 10)
    assert "stderr" in str(failure.value)
    assert failure.value.stderr


def test_kcat_broker_names_split_into_host_and_port() -> None:
    assert runners._split_host_port("127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert runners._split_host_port("[::1]:9093") == ("::1", 9093)


# ---------------------------------------------------------------------------------------------------
# check_round_trip

WINDOW = (1_000_000, 2_000_000)
Damage = Callable[[list[runners.ConsumedRecord]], list[runners.ConsumedRecord]]


def _round_trip(count: int = 12, partitions: int = 3) -> tuple[runners.ProduceResult, runners.ConsumeResult]:
    """A clean round trip: record i goes to partition i % partitions, at the next offset there."""
    produced, consumed = [], []
    for i in range(count):
        partition, offset = i % partitions, i // partitions
        key, value, headers = f"key-{i}".encode(), f"value-{i}".encode(), (("seq", str(i).encode()),)
        produced.append(runners.ProducedRecord(key, value, headers, 500 + i, partition, offset))
        consumed.append(runners.ConsumedRecord(partition, offset, key, value, headers, 500 + i))
    return (
        runners.ProduceResult("p", "t", "none", -1, False, tuple(produced), 0.1, WINDOW),
        runners.ConsumeResult("c", "t", tuple(consumed), 0.1),
    )


def _consumed(
    consumed: runners.ConsumeResult, records: list[runners.ConsumedRecord]
) -> runners.ConsumeResult:
    return dataclasses.replace(consumed, records=tuple(records))


def test_a_clean_round_trip_passes() -> None:
    runners.check_round_trip(*_round_trip())


def test_records_read_in_another_partition_order_pass() -> None:
    produced, consumed = _round_trip()
    by_partition = sorted(consumed.records, key=lambda c: (c.partition, c.offset))
    runners.check_round_trip(produced, _consumed(consumed, by_partition))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda rs: rs[:-3], "4 records sent, 3 read"),
        (lambda rs: [*rs, rs[-3]], "4 records sent, 5 read"),
        (lambda rs: [rs[3], rs[0], *rs[1:3], *rs[4:]], "offsets read are not 0, 1, 2"),
        (lambda rs: [dataclasses.replace(rs[3], value=b"bad"), *rs[1:3], rs[0], *rs[4:]], "read key"),
        (lambda rs: [dataclasses.replace(rs[0], headers=()), *rs[1:]], r"headers \(\) read"),
        (lambda rs: [dataclasses.replace(rs[0], timestamp=7), *rs[1:]], "timestamp 7 read, 500 sent"),
        (lambda rs: [dataclasses.replace(rs[0], key=b"other"), *rs[1:]], "read key b'other'"),
    ],
    ids=["lost", "duplicated", "reordered", "value", "headers", "timestamp", "key"],
)
def test_damage_is_reported(damage: Damage, message: str) -> None:
    produced, consumed = _round_trip()
    with pytest.raises(AssertionError, match=message):
        runners.check_round_trip(produced, _consumed(consumed, damage(list(consumed.records))))


def test_an_offset_other_than_acknowledged_is_reported() -> None:
    produced, consumed = _round_trip()
    records = list(produced.records)
    records[0] = dataclasses.replace(records[0], offset=9)
    with pytest.raises(AssertionError, match="acknowledged at offset 9, read at 0"):
        runners.check_round_trip(dataclasses.replace(produced, records=tuple(records)), consumed)


def test_a_client_stamped_timestamp_must_fall_in_the_run() -> None:
    produced, consumed = _round_trip()
    unstamped = tuple(dataclasses.replace(r, timestamp=None) for r in produced.records)
    produced = dataclasses.replace(produced, records=unstamped)
    in_run = [dataclasses.replace(c, timestamp=1_500_000) for c in consumed.records]
    runners.check_round_trip(produced, _consumed(consumed, in_run))
    with pytest.raises(AssertionError, match="outside the run's window"):
        runners.check_round_trip(produced, consumed)


def test_records_of_unknown_partition_are_placed_by_key() -> None:
    produced, consumed = _round_trip()
    unplaced = tuple(dataclasses.replace(r, partition=None, offset=None) for r in produced.records)
    produced = dataclasses.replace(produced, records=unplaced)
    runners.check_round_trip(produced, consumed)
    with pytest.raises(AssertionError, match=r"key b'key-11' \(partition not reported\) was not read"):
        runners.check_round_trip(produced, _consumed(consumed, list(consumed.records[:-1])))


def test_kcat_delivery_reports_are_matched_per_partition_in_order() -> None:
    keys = [f"key-{i}".encode() for i in range(4)]  # librdkafka's CRC32 partitioner, 6 partitions: 0, 2, 0, 2
    stderr = "\n".join(
        [
            "% Message delivered to partition 0 (offset 7) on broker 1",
            "% Message delivered to partition 2 (offset 3) on broker 1",
            "% Message delivered to partition 0 (offset 8) on broker 1",
            "% Message delivered to partition 2 (offset -1001) on broker 1",
        ]
    )
    assert runners._kcat_placements(keys, 6, stderr) == {0: (0, 7), 1: (2, 3), 2: (0, 8), 3: (2, None)}
    with pytest.raises(runners.ClientFailed, match="more delivery reports for partition 2"):
        runners._kcat_placements(keys[:1], 6, stderr)


def test_unacknowledged_records_fail_the_producer() -> None:
    records = runners._outgoing("x", 3, per_record=True)
    with pytest.raises(runners.ClientFailed, match="acknowledgements for 2 of 3 records"):
        runners._produced("x", records, {0: (0, 0), 2: (0, 1)}, acks=-1)


def test_generated_records() -> None:
    records = runners._outgoing("aiokafka", 200, per_record=True)
    assert records[7].key == b"key-7" and records[7].value.startswith(b"value-7 ")
    assert records[7].headers == (("seq", b"7"), ("client", b"aiokafka"))
    assert records[7].timestamp == records[0].timestamp + 7
    assert all(100 <= len(r.value) <= 200 for r in records)
    kcat = runners._outgoing("kcat", 2, per_record=False)[1]
    assert (kcat.headers, kcat.timestamp) == ((("client", b"kcat"),), None)
