"""``samsa transactions`` (kafka-transactions.sh) against real clusters, each subcommand run as the
``samsa`` process a user runs.

- An open transaction of a confluent-kafka producer (produced, not committed) on a three-broker cluster:
  ``list`` and ``describe`` show it Ongoing with its partition, ``describe-producers`` (on the leader,
  and on a broker asked by id) shows where it starts, ``find-hanging`` does not report it (its
  coordinator still includes the partition), and ``abort --start-offset`` writes the ABORT marker:
  ``samsa console-consumer --isolation-level read_committed``, stuck before the transaction until then,
  sees the partition move past it; the producer can still abort its transaction afterwards.
- The wedge of issue 17 made on purpose (``transaction.partition.verification.enable=false``, a raw
  transactional Produce of a producer no coordinator knows): ``find-hanging`` reports both wedged
  partitions with their start offsets and age, ``abort`` by start offset and by producer id/epoch
  unsticks them, after which find-hanging reports nothing and read_committed consumers read on.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import ProduceRequest
from protocol.record_batch import Record, encode_batch
from tests.support.cluster import ROOT, Cluster
from tools.admin_client import AdminClient
from tools.transactions.commands import HANGING_HEADERS, format_table

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")

# find-hanging's table when there is nothing to report: its header alone.
(HANGING_HEADER,) = format_table(HANGING_HEADERS, [])


@dataclass
class Result:
    code: int
    out: str
    err: str

    def rows(self) -> list[dict[str, str]]:
        """The table printed, as dicts keyed by its header's columns."""
        lines = [[cell.strip() for cell in line.split("\t")[:-1]] for line in self.out.splitlines() if line]
        assert lines, f"no table printed; stderr: {self.err}"
        return [dict(zip(lines[0], cells, strict=True)) for cells in lines[1:]]


def samsa(bootstrap: str, *args: str) -> Result:
    done = subprocess.run(
        [sys.executable, "-m", "tools", "transactions", "--bootstrap-server", bootstrap, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    return Result(done.returncode, done.stdout, done.stderr)


def ok(bootstrap: str, *args: str) -> Result:
    result = samsa(bootstrap, *args)
    assert result.code == 0, f"samsa transactions {' '.join(args)}: exit {result.code}\n{result.err}"
    return result


def consume(bootstrap: str, topic: str, partition: int, isolation: str, timeout_ms: int = 4000) -> list[str]:
    """Every value ``samsa console-consumer`` reads from the partition's beginning at this isolation."""
    done = subprocess.run(
        [
            sys.executable, "-m", "tools", "console-consumer", "--bootstrap-server", bootstrap,
            "--topic", topic, "--partition", str(partition), "--offset", "earliest",
            "--isolation-level", isolation, "--timeout-ms", str(timeout_ms),
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert "Processed a total of" in done.stderr, done.stderr
    return done.stdout.splitlines()


def wait_until(check: object, what: str, timeout: float = 30.0) -> object:
    deadline = time.monotonic() + timeout
    while True:
        found = check()  # type: ignore[operator]
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen in {timeout} s (last: {found!r})")
        time.sleep(0.5)


def produce_plain(bootstrap: str, topic: str, partition: int, values: list[str]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value.encode(), partition=partition)
    assert producer.flush(30) == 0


def test_an_open_transaction_is_listed_described_and_aborted_by_its_start_offset(cluster: Cluster) -> None:
    bootstrap = cluster.bootstrap
    topic = "txn-cli"
    cluster.create_topic(topic, 1, 3)
    produce_plain(bootstrap, topic, 0, ["before-0", "before-1"])  # offsets 0, 1

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "cli-txn", "transaction.timeout.ms": 300_000}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):  # offsets 2, 3, 4
        producer.produce(topic, f"txn-{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    produce_plain(bootstrap, topic, 0, ["after-0"])  # offset 5, behind the open transaction

    assert consume(bootstrap, topic, 0, "read_committed") == ["before-0", "before-1"]
    assert consume(bootstrap, topic, 0, "read_uncommitted") == [
        "before-0", "before-1", "txn-0", "txn-1", "txn-2", "after-0"
    ]  # fmt: skip

    listed = [r for r in ok(bootstrap, "list").rows() if r["TransactionalId"] == "cli-txn"]
    assert len(listed) == 1 and listed[0]["TransactionState"] == "Ongoing", listed
    producer_id, coordinator = listed[0]["ProducerId"], listed[0]["Coordinator"]
    assert int(coordinator) in cluster.brokers
    # Running for less than an hour: not listed with a duration filter of an hour.
    hour = ok(bootstrap, "list", "--duration-filter", "3600000").rows()
    assert not [r for r in hour if r["TransactionalId"] == "cli-txn"]

    (described,) = ok(bootstrap, "describe", "--transactional-id", "cli-txn").rows()
    assert described["CoordinatorId"] == coordinator
    assert described["ProducerId"] == producer_id
    assert described["TransactionState"] == "Ongoing"
    assert described["TransactionTimeoutMs"] == "300000"
    assert described["TopicPartitions"] == f"{topic}-0"
    assert int(described["TransactionDurationMs"]) >= 0
    unknown = samsa(bootstrap, "describe", "--transactional-id", "no-such-id")
    assert unknown.code == 1
    assert "Failed to describe transaction state of transactional-id `no-such-id`" in unknown.err

    leader = cluster.leader(topic, 0)
    for extra in ([], ["--broker-id", str(leader)]):
        rows = ok(bootstrap, "describe-producers", "--topic", topic, "--partition", "0", *extra).rows()
        mine = [r for r in rows if r["ProducerId"] == producer_id]
        assert len(mine) == 1 and mine[0]["CurrentTransactionStartOffset"] == "2", rows

    # Open longer than 0 minutes, but its coordinator still includes the partition: not hanging.
    for scope in (["--topic", topic], ["--broker-id", str(leader)]):
        hanging = ok(bootstrap, "find-hanging", *scope, "--max-transaction-timeout", "0")
        assert hanging.out.splitlines() == [HANGING_HEADER]

    missing = samsa(bootstrap, "abort", "--topic", topic, "--partition", "0", "--start-offset", "3")
    assert missing.code == 1
    assert "Could not find any open transactions starting at offset 3 on partition txn-cli-0" in missing.err

    aborted = ok(bootstrap, "abort", "--topic", topic, "--partition", "0", "--start-offset", "2")
    assert aborted.out == ""
    rows = ok(bootstrap, "describe-producers", "--topic", topic, "--partition", "0").rows()
    assert [r["CurrentTransactionStartOffset"] for r in rows if r["ProducerId"] == producer_id] == ["None"]
    assert consume(bootstrap, topic, 0, "read_committed") == ["before-0", "before-1", "after-0"]

    # The producer's own abort (the coordinator's markers) still goes through, and changes nothing more.
    producer.abort_transaction(30)
    assert consume(bootstrap, topic, 0, "read_committed") == ["before-0", "before-1", "after-0"]
    wait_until(
        lambda: [
            r for r in ok(bootstrap, "list").rows()
            if r["TransactionalId"] == "cli-txn" and r["TransactionState"] == "CompleteAbort"
        ],
        "the coordinator completing the abort",
    )  # fmt: skip


@pytest.fixture
def unverified_cluster(tmp_path: Path, zookeeper: str) -> Iterator[Cluster]:
    """One broker that appends transactional batches without asking a coordinator (KIP-890 off)."""
    with Cluster(
        tmp_path / "cluster",
        zookeeper,
        brokers=1,
        broker_overrides={"transaction.partition.verification.enable": "false"},
    ) as running:
        yield running


async def wedge(
    bootstrap: str, topic: str, partition: int, producer_id: int, epoch: int, age_ms: int
) -> None:
    """A raw transactional Produce of two records by a producer no coordinator knows: an open
    transaction no marker will ever close."""
    timestamp = time.time_ns() // 1_000_000 - age_ms
    batch = encode_batch(
        [Record(0, timestamp, None, b"wedge-0"), Record(1, timestamp, None, b"wedge-1")],
        base_offset=0,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=0,
        is_transactional=True,
    )
    request = ProduceRequest(
        transactional_id="made-up",
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=batch)],
            )
        ],
    )
    async with AdminClient(bootstrap, "wedge-test") as admin:
        response = await admin.send(ApiKey.PRODUCE, request)
    (result,) = response.responses[0].partition_responses
    assert result.error_code == ErrorCode.NONE, ErrorCode(result.error_code).name


@pytest.mark.slow  # ~20 s; the quick tier keeps the open transaction listed, described and aborted
def test_a_wedged_partition_is_found_hanging_and_unstuck_by_abort(unverified_cluster: Cluster) -> None:
    bootstrap = unverified_cluster.bootstrap
    topic = "wedged"
    unverified_cluster.create_topic(topic, 2, 1)
    first, second = 7_000_000_001, 7_000_000_002
    asyncio.run(wedge(bootstrap, topic, 0, first, 0, age_ms=150_000))
    asyncio.run(wedge(bootstrap, topic, 1, second, 3, age_ms=150_000))
    produce_plain(bootstrap, topic, 0, ["after-0"])
    produce_plain(bootstrap, topic, 1, ["after-1"])
    assert consume(bootstrap, topic, 0, "read_committed") == []

    rows = ok(bootstrap, "find-hanging", "--topic", topic, "--max-transaction-timeout", "1").rows()
    found = sorted((r["Partition"], r["ProducerId"], r["ProducerEpoch"], r["StartOffset"]) for r in rows)
    assert found == [("0", str(first), "0", "0"), ("1", str(second), "3", "0")]
    assert {r["Duration(min)"] for r in rows} == {"2"}
    assert {r["CoordinatorEpoch"] for r in rows} == {"-1"}
    # The same through the broker's replicas, and not at all within the default 15 minutes.
    assert (
        len(ok(bootstrap, "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "1").rows()) == 2
    )
    assert ok(bootstrap, "find-hanging", "--topic", topic).out.splitlines() == [HANGING_HEADER]

    ok(bootstrap, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    ok(
        bootstrap, "abort", "--topic", topic, "--partition", "1",
        "--producer-id", str(second), "--producer-epoch", "3", "--coordinator-epoch", "-1",
    )  # fmt: skip

    hanging = ok(bootstrap, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0")
    assert hanging.out.splitlines() == [HANGING_HEADER]
    assert consume(bootstrap, topic, 0, "read_committed") == ["after-0"]
    assert consume(bootstrap, topic, 1, "read_committed") == ["after-1"]
    assert consume(bootstrap, topic, 1, "read_uncommitted") == ["wedge-0", "wedge-1", "after-1"]
