"""Each real client's transactional API end to end against a real cluster (ZooKeeper, a controller, three
brokers): aiokafka, kafka-python, confluent-kafka, kafkajs and the Java client.

Every client runs one scenario (tests/support/clients/py/transactions.py describes it; js/transactions.js
and java/Transactions.java are its twins), through runners.TRANSACTIONS, against topics replicated three
times: a transaction committed, one aborted, two committed back to back, an empty one; a consumer's
offsets sent to an aborted and then to a committed transaction; a second producer with the same
transactional.id fencing the first; a restarted producer re-acquiring the id, and another aborting the
transaction a "crashed" one left open; a read_committed and a read_uncommitted consumer read the data
topic from the beginning while that transaction is open and again at the end. The tests below check that
one run's result, each for one behaviour.

Where a record lands is known in advance: record i of a transaction goes to partition i % PARTITIONS, and
every transaction that touched a partition ends with one control batch (its marker) there, so the offset
of every record and of every marker follows from the order of the transactions (`layout`).

A client that cannot do something says so in its result's notes (kafkajs has no consumer position, for
instance); the checks it cannot take are named in CLIENT_LIMITS with the reason, never skipped silently.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import pytest

from tests.support.clients import runners
from tests.support.cluster import Cluster
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

PARTITIONS = 3
REPLICATION = 3
TOPIC_CONFIG = {"min.insync.replicas": 2}
INPUT_COUNT = 6  # the scenario's input records, read in the group and committed with the transaction

# The client's error when a newer producer with its transactional.id has fenced it.
FENCED_ERRORS = {
    "java": r"ProducerFencedException",
    "confluent-kafka": r"_FENCED|PRODUCER_FENCED",
    "aiokafka": r"ProducerFenced",
    "kafka-python": r"ProducerFencedError",
    # kafkajs speaks AddPartitionsToTxn v1, where PRODUCER_FENCED is sent as INVALID_PRODUCER_EPOCH.
    "kafkajs": r"INVALID_PRODUCER_EPOCH|PRODUCER_FENCED",
}
# Checks a client cannot take, with the reason (the test says so where it leaves one out).
CLIENT_LIMITS: dict[str, dict[str, str]] = {
    "kafkajs": {
        "positions": "kafkajs consumers expose no position (and exist only in a group): the records, "
        "their offsets and the end offsets are checked, the consumer's position is not",
    },
}

# Transactions whose records a read_committed consumer must not see, and the others.
ABORTED = ("abort-1", "offsets-abort", "crashed")
COMMITTED = (
    "commit-1",
    "back-1",
    "back-2",
    "empty",
    "offsets-commit",
    "fencer-1",
    "restart-1",
    "recovered-1",
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer) -> Iterator[Cluster]:
    """conftest's `cluster` (one controller, three brokers), started once for the module."""
    chroot = f"{zookeeper_server.connect_string}/samsa-transactions-clients"
    running = Cluster(tmp_path_factory.mktemp("transactions-clients"), chroot).start()
    try:
        yield running
    finally:
        running.stop()


_runs = itertools.count()


# The quick tier runs librdkafka's and the Java client's scenario; the full tier every client's.
QUICK_TIER_CLIENTS = ("confluent-kafka", "java")


@pytest.fixture(
    scope="module",
    params=[
        c if c in QUICK_TIER_CLIENTS else pytest.param(c, marks=pytest.mark.slow)
        for c in runners.TRANSACTIONS
    ],
)
def scenario(request: pytest.FixtureRequest, cluster: Cluster) -> runners.TransactionsResult:
    """The client's scenario, run once on topics of its own; a client not installed here skips."""
    client: str = request.param
    label = f"{client}-{next(_runs)}"
    data, source = f"txn-data-{label}", f"txn-input-{label}"
    cluster.create_topic(data, PARTITIONS, REPLICATION, TOPIC_CONFIG)
    cluster.create_topic(source, 1, REPLICATION, TOPIC_CONFIG)
    try:
        return runners.TRANSACTIONS[client](
            cluster.bootstrap, data, source, f"txn-group-{label}", f"txn-id-{label}", PARTITIONS
        )
    except runners.ClientNotInstalled as e:
        pytest.skip(str(e))


class Placed(NamedTuple):
    offset: int
    value: str
    outcome: str
    txn: str


@dataclass(frozen=True)
class Layout:
    """Where the scenario's records and markers must be: per partition, each record in offset order, the
    markers' offsets, and the log end offset."""

    records: dict[int, list[Placed]]
    markers: dict[int, list[int]]
    end: dict[int, int]

    def values(
        self, partition: int, outcomes: tuple[str, ...], before: str | None = None
    ) -> list[tuple[int, str]]:
        """(offset, value) of the partition's records of these outcomes, of the transactions before
        `before` only when given."""
        out = []
        for r in self.records[partition]:
            if r.txn == before:
                break
            if r.outcome in outcomes:
                out.append((r.offset, r.value))
        return out

    def first_of(self, partition: int, txn: str) -> Placed:
        return next(r for r in self.records[partition] if r.txn == txn)

    def last_of(self, partition: int, txn: str) -> Placed:
        return [r for r in self.records[partition] if r.txn == txn][-1]


def layout(result: runners.TransactionsResult) -> Layout:
    """Each transaction appends its records to the partitions it touches, then one marker to each."""
    nxt = dict.fromkeys(range(PARTITIONS), 0)
    records: dict[int, list[Placed]] = defaultdict(list)
    markers: dict[int, list[int]] = defaultdict(list)
    for txn in result.txns:
        touched = []
        for r in txn.records:
            records[r.partition].append(Placed(nxt[r.partition], r.value, txn.outcome, txn.name))
            nxt[r.partition] += 1
            if r.partition not in touched:
                touched.append(r.partition)
        for p in touched:
            markers[p].append(nxt[p])
            nxt[p] += 1
    return Layout(dict(records), dict(markers), nxt)


def read_by_partition(read: runners.TxnRead) -> dict[int, list[tuple[int, str]]]:
    out: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for partition, offset, value in read.records:
        out[partition].append((offset, value))
    return out


def txn(result: runners.TransactionsResult, name: str) -> runners.Transaction:
    (found,) = [t for t in result.txns if t.name == name]
    return found


def values_read(read: runners.TxnRead) -> set[str]:
    return {value for _, _, value in read.records}


def test_the_scenario_ran_every_transaction(scenario: runners.TransactionsResult) -> None:
    names = [t.name for t in scenario.txns]
    assert sorted(names) == sorted(ABORTED + COMMITTED), names
    for t in scenario.txns:
        assert t.outcome == ("abort" if t.name in ABORTED else "commit"), t


def test_read_committed_sees_exactly_the_committed_records_at_their_offsets(
    scenario: runners.TransactionsResult,
) -> None:
    expected = layout(scenario)
    read = read_by_partition(scenario.read_committed)
    for p in range(PARTITIONS):
        assert read[p] == expected.values(p, ("commit",)), f"partition {p}"
    assert len(scenario.read_committed.records) == sum(
        len(t.records) for t in scenario.txns if t.outcome == "commit"
    )


def test_read_uncommitted_sees_every_record_written_aborted_ones_included(
    scenario: runners.TransactionsResult,
) -> None:
    expected = layout(scenario)
    read = read_by_partition(scenario.read_uncommitted)
    for p in range(PARTITIONS):
        assert read[p] == expected.values(p, ("commit", "abort")), f"partition {p}"
    aborted = {r.value for name in ABORTED for r in txn(scenario, name).records}
    assert aborted <= values_read(scenario.read_uncommitted)
    assert not aborted & values_read(scenario.read_committed)


def test_offsets_leave_a_gap_at_every_marker(scenario: runners.TransactionsResult) -> None:
    """No record is read at a marker's offset, read_committed or not; the offsets the producers were
    acknowledged are where the records are; the end offsets and a consumer's position end past the
    last marker."""
    expected = layout(scenario)
    for side in (scenario.read_committed, scenario.read_uncommitted):
        for partition, offset, value in side.records:
            assert offset not in expected.markers[partition], f"{value} read at marker offset {offset}"
    for side in (scenario.read_committed, scenario.read_uncommitted):
        # ListOffsets: with no transaction open, the last stable offset is the log end at either level.
        assert side.end_offsets == expected.end
    at = {(p, r.value): r.offset for p in expected.records for r in expected.records[p]}
    acked = [(r.partition, r.value, r.offset) for t in scenario.txns for r in t.records]
    acked = [a for a in acked if a[2] is not None]
    assert [(p, v, at[p, v]) for p, v, _ in acked] == acked
    if "positions" in CLIENT_LIMITS.get(scenario.client, {}):
        assert scenario.read_committed.positions is None, "the client reports positions after all"
        pytest.xfail(CLIENT_LIMITS[scenario.client]["positions"])  # the checks above ran
    for side in (scenario.read_committed, scenario.read_uncommitted):
        assert side.positions == expected.end


def test_read_committed_stops_at_the_first_record_of_an_open_transaction(
    scenario: runners.TransactionsResult,
) -> None:
    """Read while "crashed" was open: read_committed gets the committed records before it, and both its
    position and its end offset stay at the open transaction's first offset (the last stable offset);
    read_uncommitted gets the open transaction's records too and ends at the high watermark."""
    expected = layout(scenario)
    committed = read_by_partition(scenario.read_committed_open)
    uncommitted = read_by_partition(scenario.read_uncommitted_open)
    for p in range(PARTITIONS):
        assert committed[p] == expected.values(p, ("commit",), before="crashed"), f"partition {p}"
        assert uncommitted[p] == [
            *expected.values(p, ("commit", "abort"), before="crashed"),
            *[(r.offset, r.value) for r in expected.records[p] if r.txn == "crashed"],
        ], f"partition {p}"
    stable = {p: expected.first_of(p, "crashed").offset for p in range(PARTITIONS)}
    end = {p: expected.last_of(p, "crashed").offset + 1 for p in range(PARTITIONS)}
    # ListOffsets: read_committed's end is the last stable offset, read_uncommitted's the high watermark.
    assert scenario.read_committed_open.end_offsets == stable
    assert scenario.read_uncommitted_open.end_offsets == end
    if "positions" in CLIENT_LIMITS.get(scenario.client, {}):
        assert scenario.read_committed_open.positions is None, "the client reports positions after all"
        pytest.xfail(CLIENT_LIMITS[scenario.client]["positions"])  # the checks above ran
    assert scenario.read_committed_open.positions == stable
    assert scenario.read_uncommitted_open.positions == end


def test_back_to_back_and_empty_transactions_commit(scenario: runners.TransactionsResult) -> None:
    """back-2 begins as soon as back-1's commit returns; the empty transaction writes nothing (no
    marker either: `layout` gives it none and the offsets test holds the log to that)."""
    assert txn(scenario, "empty").records == ()
    read = values_read(scenario.read_committed)
    for name in ("commit-1", "back-1", "back-2"):
        assert {r.value for r in txn(scenario, name).records} <= read, name


def test_send_offsets_to_transaction_commits_the_group_offset_only_with_the_transaction(
    scenario: runners.TransactionsResult,
) -> None:
    assert scenario.input_read == tuple(range(INPUT_COUNT))
    assert scenario.offset_after_abort is None, "an aborted transaction's offsets were committed"
    assert scenario.offset_after_commit == INPUT_COUNT
    assert {r.value for r in txn(scenario, "offsets-commit").records} <= values_read(scenario.read_committed)


def test_a_second_producer_with_the_same_id_fences_the_first(scenario: runners.TransactionsResult) -> None:
    assert scenario.fenced_error is not None, "the first producer carried on after it was fenced"
    assert re.search(FENCED_ERRORS[scenario.client], scenario.fenced_error), (
        f"fenced at {scenario.fenced_step} with {scenario.fenced_error}"
    )
    # Nothing the fenced producer sent was written, even uncommitted.
    assert not {v for v in values_read(scenario.read_uncommitted) if v.startswith("fenced-")}
    assert {r.value for r in txn(scenario, "fencer-1").records} <= values_read(scenario.read_committed)


def test_a_restarted_producer_reacquires_its_id_and_a_crashed_transaction_is_aborted(
    scenario: runners.TransactionsResult,
) -> None:
    committed, uncommitted = values_read(scenario.read_committed), values_read(scenario.read_uncommitted)
    assert {r.value for r in txn(scenario, "restart-1").records} <= committed
    crashed = {r.value for r in txn(scenario, "crashed").records}
    assert crashed <= uncommitted and not crashed & committed
    assert {r.value for r in txn(scenario, "recovered-1").records} <= committed
