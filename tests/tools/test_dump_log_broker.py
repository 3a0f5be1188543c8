"""``samsa dump-log`` on the files a real broker wrote: records produced by confluent-kafka (idempotent,
with keys and headers, and in a committed transaction), a consumer group's committed offsets, the
transaction's coordinator state; the broker is stopped, then its files are dumped and every line has
Kafka 3.9's DumpLogSegments format (one module-scoped broker for the module)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import ROOT, Cluster
from tools import dump_log
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "dumped"
GROUP = "dump-group"
TRANSACTIONAL_ID = "dump-tx"
KEYED = 5  # idempotent records with keys and headers
IN_TRANSACTION = 2

BOOL = "(?:true|false)"
# Kafka 3.9's DumpLogSegments.printBatchLevel and the record line of dumpLog.
BATCH_LINE = re.compile(
    r"^baseOffset: (?P<base>\d+) lastOffset: (?P<last>\d+) count: (?P<count>\d+) "
    r"baseSequence: -?\d+ lastSequence: -?\d+ producerId: (?P<pid>-?\d+) producerEpoch: -?\d+ "
    rf"partitionLeaderEpoch: \d+ isTransactional: (?P<txn>{BOOL}) isControl: (?P<control>{BOOL}) "
    r"deleteHorizonMs: OptionalLong\.empty position: (?P<position>\d+) CreateTime: \d+ size: (?P<size>\d+) "
    rf"magic: 2 compresscodec: (?:none|gzip|snappy|lz4|zstd) crc: \d+ isvalid: true$"
)
RECORD_LINE = re.compile(
    r"^\| offset: (?P<offset>\d+) CreateTime: \d+ keySize: -?\d+ valueSize: -?\d+ sequence: -?\d+ "
    r"headerKeys: \[(?P<headers>[^\]]*)\](?P<rest>.*)$"
)


@pytest.fixture(scope="module")
def stopped_broker(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer
) -> Iterator[Path]:
    """A one-broker cluster that took the records, offsets and transaction, then stopped: its log dir."""
    chroot = f"{zookeeper_server.connect_string}/samsa-dump-log"
    cluster = Cluster(
        tmp_path_factory.mktemp("dump-log"),
        chroot,
        brokers=1,
        broker_overrides={"group.initial.rebalance.delay.ms": 0},
    ).start()
    try:
        cluster.create_topic(TOPIC, 1, configs={"index.interval.bytes": 1})  # an index entry per batch
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True}
        )
        for i in range(KEYED):
            producer.produce(TOPIC, key=f"k{i}", value=f"value-{i}", headers=[("h", b"1"), ("trace", b"x")])
        assert producer.flush(30) == 0
        transactional = confluent_kafka.Producer(
            {"bootstrap.servers": cluster.bootstrap, "transactional.id": TRANSACTIONAL_ID}
        )
        transactional.init_transactions(60)
        transactional.begin_transaction()
        for i in range(IN_TRANSACTION):
            transactional.produce(TOPIC, value=f"in-txn-{i}")
        transactional.commit_transaction(60)
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest"}
        )
        consumer.subscribe([TOPIC])
        seen = 0
        while seen < KEYED:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen += 1
        consumer.commit(asynchronous=False)
        consumer.close()
        broker = cluster.broker(1)
        broker.stop()
        yield broker.log_dir
    finally:
        cluster.stop()


def dump(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[list[str], str]:
    assert dump_log.main(list(argv)) == 0
    captured = capsys.readouterr()
    return captured.out.splitlines(), captured.err


def test_the_topic_segment_dumps_in_kafkas_format(stopped_broker: Path) -> None:
    """Through ``samsa dump-log`` itself, as an operator runs it."""
    segment = stopped_broker / f"{TOPIC}-0" / "00000000000000000000.log"
    done = subprocess.run(
        [sys.executable, "-m", "tools", "dump-log", "--files", str(segment), "--print-data-log"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stderr == ""
    out = done.stdout.splitlines()
    assert out[:2] == [f"Dumping {segment}", "Log starting offset: 0"]
    batches = [BATCH_LINE.match(line) for line in out if line.startswith("baseOffset:")]
    records = [RECORD_LINE.match(line) for line in out if line.startswith("|")]
    assert all(batches) and all(records), [
        line for line in out[2:] if not (BATCH_LINE.match(line) or RECORD_LINE.match(line))
    ]
    assert len(batches) + len(records) == len(out) - 2
    # Batches follow each other: positions add up, offsets continue.
    position, offset = 0, 0
    for m in batches:
        assert m is not None and int(m["position"]) == position and int(m["base"]) == offset
        position += int(m["size"])
        offset = int(m["last"]) + 1
    assert position == segment.stat().st_size
    keyed = [m for m in records if m is not None and m["headers"] == "h,trace"]
    assert [m["rest"] for m in keyed] == [f" key: k{i} payload: value-{i}" for i in range(KEYED)]
    assert all(int(m["pid"]) >= 0 for m in batches if m is not None)  # idempotent and transactional
    control = [m for m in batches if m is not None and m["control"] == "true"]
    assert len(control) == 1 and control[0]["txn"] == "true"
    assert [m["rest"] for m in records if m is not None and "endTxnMarker" in m["rest"]] == [
        " endTxnMarker: COMMIT coordinatorEpoch: 0"
    ]
    assert [m["rest"] for m in records if m is not None and "in-txn" in m["rest"]] == [
        f" payload: in-txn-{i}" for i in range(IN_TRANSACTION)
    ]


def test_the_indexes_match_the_segment(stopped_broker: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = stopped_broker / f"{TOPIC}-0" / "00000000000000000000"
    out, err = dump(capsys, "--files", f"{base}.index,{base}.timeindex")
    assert err == ""  # no entry misses its batch
    time_at = out.index(f"Dumping {base}.timeindex")
    offsets, times = out[1:time_at], out[time_at + 1 :]
    assert offsets and all(re.match(r"^offset: \d+ position: \d+$", line) for line in offsets), offsets
    assert times and all(re.match(r"^timestamp: \d+ offset: \d+$", line) for line in times), times
    out, err = dump(capsys, "--files", f"{base}.index,{base}.timeindex", "--verify-index-only")
    assert (out, err) == ([f"Dumping {base}.index", f"Dumping {base}.timeindex"], "")
    out, err = dump(capsys, "--files", f"{base}.index,{base}.timeindex", "--index-sanity-check")
    assert out[1] == f"{base}.index passed sanity check."
    assert out[3] == f"{base}.timeindex passed sanity check." and err == ""


def test_the_producer_snapshot_names_both_producers(
    stopped_broker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshots = sorted((stopped_broker / f"{TOPIC}-0").glob("*.snapshot"))
    assert snapshots, "a clean shutdown writes a producer snapshot"
    out, err = dump(capsys, "--files", str(snapshots[-1]))
    entries = out[1:]
    assert len(entries) == 2 and err == ""
    line = re.compile(
        r"^producerId: \d+ producerEpoch: \d+ coordinatorEpoch: -?\d+ "
        r"currentTxnFirstOffset: OptionalLong\.empty lastTimestamp: \d+ firstSequence: \d+ "
        r"lastSequence: \d+ lastOffset: \d+ offsetDelta: \d+ timestamp: \d+$"
    )
    assert all(line.match(entry) for entry in entries), entries


def test_offsets_decoder_shows_the_groups_commit(
    stopped_broker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = sorted(stopped_broker.glob("__consumer_offsets-*/*.log"))
    out, err = dump(capsys, "--files", ",".join(map(str, logs)), "--offsets-decoder")
    assert err == ""
    commit_key = f'key: {{"type":"1","data":{{"group":"{GROUP}","topic":"{TOPIC}","partition":0}}}}'
    commits = [line for line in out if commit_key in line]
    assert commits and re.search(
        r' payload: \{"version":"3","data":\{"offset":\d+,"leaderEpoch":-?\d+,"metadata":"",'
        r'"commitTimestamp":\d+\}\}$',
        commits[-1],
    ), commits
    assert int(re.search(r'"offset":(\d+)', commits[-1])[1]) >= KEYED  # type: ignore[index]
    groups = [line for line in out if f'key: {{"type":"2","data":{{"group":"{GROUP}"}}}}' in line]
    assert groups and '"protocolType":"consumer"' in groups[-1]
    # The member's subscription is decoded (the consumer protocol), not left in base64.
    assert any(f'"subscription":{{"topics":["{TOPIC}"]' in line for line in groups), groups


def test_transaction_log_decoder_shows_the_committed_transaction(
    stopped_broker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = sorted(stopped_broker.glob("__transaction_state-*/*.log"))
    out, err = dump(capsys, "--files", ",".join(map(str, logs)), "--transaction-log-decoder")
    assert err == ""
    ours = [line for line in out if f"key: transaction_metadata::transactionalId={TRANSACTIONAL_ID} " in line]
    states = [re.search(r"state=(\w+),partitions=\[([^\]]*)\]", line) for line in ours]
    assert [(m[1], m[2]) for m in states if m is not None][-3:] == [
        ("Ongoing", f"{TOPIC}-0"),
        ("PrepareCommit", f"{TOPIC}-0"),
        ("CompleteCommit", ""),
    ]
