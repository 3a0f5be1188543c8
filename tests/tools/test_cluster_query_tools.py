"""``samsa log-dirs``, ``get-offsets``, ``delete-records`` and ``broker-api-versions`` against one real
cluster (ZooKeeper, a controller, three brokers) shared by the module, their output checked line by line
against Kafka 3.9's tools' format. The tools run in-process (``main(argv)``), as the ``samsa`` command
runs them.

Records come from confluent-kafka with known timestamps: topic ``offsets`` (3 partitions, 2 replicas)
holds ``COUNTS[p]`` records in partition p, record i stamped ``BASE_TS + 1000 * i``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.api import ApiKey, api
from protocol.api_versions import ADVERTISED_MINIMUM, ADVERTISED_VERSIONS
from tests.support.cluster import Cluster
from tools import broker_api_versions, delete_records, get_offsets, log_dirs
from tools.admin_client import AdminClient
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "offsets"
COUNTS = {0: 5, 1: 3, 2: 0}
BASE_TS = 1_600_000_000_000


def _produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for partition, count in counts.items():
        for i in range(count):
            producer.produce(topic, value=b"v" * 10, partition=partition, timestamp=BASE_TS + 1000 * i)
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer) -> Iterator[Cluster]:
    chroot = f"{zookeeper_server.connect_string}/samsa-cluster-query-tools"
    running = Cluster(tmp_path_factory.mktemp("cluster-query-tools"), chroot).start()
    try:
        running.create_topic(TOPIC, partitions=3, replication_factor=2)
        _produce(running.bootstrap, TOPIC, COUNTS)
        yield running
    finally:
        running.stop()


def run(capsys: pytest.CaptureFixture[str], tool: Any, *argv: str) -> tuple[int, list[str], str]:
    capsys.readouterr()
    code = tool.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


# -- log-dirs ---------------------------------------------------------------------------------------


def test_log_dirs_describe_prints_kafkas_header_lines_and_json(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, log_dirs, "--describe", "--bootstrap-server", cluster.bootstrap)
    assert code == 0, err
    assert out[:2] == [
        "Querying brokers for log directories information",
        "Received log directory information from brokers 1,2,3",
    ]
    assert len(out) == 3
    # Jackson's order of Kafka's HashMaps' keys, compact separators.
    assert out[2].startswith('{"brokers":[{"broker":1,"logDirs":[{"partitions":[')
    assert out[2].endswith('}],"version":1}')
    body = json.loads(out[2])
    assert [b["broker"] for b in body["brokers"]] == [1, 2, 3]
    replicas: dict[str, list[int]] = {}
    for broker in body["brokers"]:
        (log_dir,) = broker["logDirs"]
        assert list(log_dir) == ["partitions", "error", "logDir"]
        assert log_dir["error"] is None
        assert Path(log_dir["logDir"]).is_dir()
        for replica in log_dir["partitions"]:
            assert list(replica) == ["partition", "size", "offsetLag", "isFuture"]
            assert replica["isFuture"] is False
            assert replica["offsetLag"] == 0
            replicas.setdefault(replica["partition"], []).append(broker["broker"])
            if replica["partition"] == f"{TOPIC}-0":
                assert replica["size"] > 0
            if replica["partition"] == f"{TOPIC}-2":
                assert replica["size"] == 0
    # Every replica of the topic (2 of each partition), on the brokers that lead or follow it.
    assert sorted(p for p in replicas if p.startswith(f"{TOPIC}-")) == [f"{TOPIC}-{p}" for p in range(3)]
    for partition in range(3):
        holders = replicas[f"{TOPIC}-{partition}"]
        assert len(holders) == 2
        assert cluster.leader(TOPIC, partition) in holders


def test_log_dirs_topic_list_and_broker_list_narrow_the_answer(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.create_topic("other", partitions=1, replication_factor=3)
    code, out, err = run(
        capsys,
        log_dirs,
        "--describe",
        "--bootstrap-server",
        cluster.bootstrap,
        "--broker-list",
        "2,3",
        "--topic-list",
        "other",
    )
    assert code == 0, err
    assert out[1] == "Received log directory information from brokers 2,3"
    body = json.loads(out[2])
    assert [b["broker"] for b in body["brokers"]] == [2, 3]
    for broker in body["brokers"]:
        assert [p["partition"] for d in broker["logDirs"] for p in d["partitions"]] == ["other-0"]


def test_log_dirs_refuses_brokers_not_in_the_cluster(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, log_dirs, "--describe", "--bootstrap-server", cluster.bootstrap, "--broker-list", "1,9"
    )
    assert code == 1
    assert out == []
    assert err.strip() == (
        "ERROR: The given brokers do not exist from --broker-list: 9. Current existent brokers: 1,2,3"
    )


# -- get-offsets ------------------------------------------------------------------------------------


def test_get_offsets_latest_earliest_and_by_timestamp(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = ["--bootstrap-server", cluster.bootstrap, "--topic", TOPIC]
    code, out, err = run(capsys, get_offsets, *bootstrap)
    assert (code, err) == (0, "")
    assert out == [f"{TOPIC}:{p}:{n}" for p, n in COUNTS.items()]
    for spec in ("-2", "earliest"):
        assert run(capsys, get_offsets, *bootstrap, "--time", spec)[1] == [f"{TOPIC}:{p}:0" for p in COUNTS]
    # The first record at or after the timestamp; none (no line) after the newest.
    out = run(capsys, get_offsets, *bootstrap, "--time", str(BASE_TS + 2500))[1]
    assert out == [f"{TOPIC}:0:3"]
    # max-timestamp: the offset of the record with the newest timestamp (none in an empty partition).
    out = run(capsys, get_offsets, *bootstrap, "--time", "max-timestamp")[1]
    assert out == [f"{TOPIC}:0:4", f"{TOPIC}:1:2"]


def test_get_offsets_topic_partition_patterns(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    def offsets(*argv: str) -> list[str]:
        code, out, err = run(capsys, get_offsets, "--bootstrap-server", cluster.bootstrap, *argv)
        assert (code, err) == (0, "")
        return out

    assert offsets("--topic-partitions", f"{TOPIC}:1") == [f"{TOPIC}:1:3"]
    assert offsets("--topic-partitions", f"{TOPIC}:1-") == [f"{TOPIC}:1:3", f"{TOPIC}:2:0"]
    assert offsets("--topic-partitions", f"{TOPIC}:-2") == [f"{TOPIC}:0:5", f"{TOPIC}:1:3"]
    assert offsets("--topic-partitions", f"off.*:0-1,{TOPIC}:2") == [f"{TOPIC}:0:5", f"{TOPIC}:2:0"]
    assert offsets("--topic", "off.*", "--partitions", "0,2") == [f"{TOPIC}:0:5", f"{TOPIC}:2:0"]
    # No filter: every topic, internal ones too unless excluded.
    everything = offsets()
    assert {line.rsplit(":", 2)[0] for line in everything} >= {TOPIC}
    assert all(not line.startswith("__") for line in offsets("--exclude-internal-topics"))


def test_get_offsets_errors_as_kafka(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    bootstrap = ["--bootstrap-server", cluster.bootstrap]
    code, out, err = run(capsys, get_offsets, *bootstrap, "--topic", "no-such-topic")
    assert (code, out) == (1, [])
    assert err == "Error occurred: Could not match any topic-partitions with the specified filters\n"
    code, _, err = run(capsys, get_offsets, *bootstrap, "--topic-partitions", "t:1", "--topic", "t")
    assert (code, err) == (
        1,
        "Error occurred: --topic-partitions cannot be used with --topic or --partitions\n",
    )
    code, _, err = run(capsys, get_offsets, *bootstrap, "--time", "yesterday")
    assert code == 1
    assert err.startswith("Error occurred: Malformed time argument yesterday. Please use -1 or latest")
    code, _, err = run(capsys, get_offsets, "--topic", TOPIC)
    assert code == 1
    assert err.startswith('Missing required argument "[bootstrap-server]"\n')


# -- delete-records ---------------------------------------------------------------------------------


def test_delete_records_prints_low_watermarks_and_errors(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cluster.create_topic("trim", partitions=2, replication_factor=2)
    _produce(cluster.bootstrap, "trim", {0: 6, 1: 2})
    plan = tmp_path / "offsets.json"
    plan.write_text(
        json.dumps(
            {
                "partitions": [
                    {"topic": "trim", "partition": 0, "offset": 4},
                    {"topic": "trim", "partition": 1, "offset": 9},
                    {"topic": "gone", "partition": 0, "offset": 1},
                ],
                "version": 1,
            }
        )
    )
    code, out, err = run(
        capsys, delete_records, "--bootstrap-server", cluster.bootstrap, "--offset-json-file", str(plan)
    )
    assert (code, err) == (0, "")
    assert out == [
        "Executing records delete operation",
        "Records delete operation completed:",
        "partition: gone-0\terror: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
        "Failed to fetch metadata for partition gone-0 because metadata for topic `gone` could not be found",
        "partition: trim-0\tlow_watermark: 4",
        "partition: trim-1\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: The requested "
        "offset is not within the range of offsets maintained by the server.",
    ]
    # The log start moved: what get-offsets reads as the earliest offset.
    earliest = run(
        capsys, get_offsets, "--bootstrap-server", cluster.bootstrap, "--topic", "trim", "--time", "-2"
    )
    assert earliest[1] == ["trim:0:4", "trim:1:0"]

    # -1: below the high watermark.
    plan.write_text('{"partitions":[{"topic":"trim","partition":1,"offset":-1}]}')
    code, out, err = run(
        capsys, delete_records, "--bootstrap-server", cluster.bootstrap, "--offset-json-file", str(plan)
    )
    assert (code, out[-1]) == (0, "partition: trim-1\tlow_watermark: 2")


def test_delete_records_refuses_duplicates_before_sending(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plan = tmp_path / "offsets.json"
    entry = {"topic": TOPIC, "partition": 0, "offset": 1}
    plan.write_text(json.dumps({"partitions": [entry, entry], "version": 1}))
    code, out, err = run(
        capsys, delete_records, "--bootstrap-server", cluster.bootstrap, "--offset-json-file", str(plan)
    )
    assert (code, out) == (1, [])
    assert err == f"Offset json file contains duplicate topic partitions: {TOPIC}-0\n"
    assert run(
        capsys, get_offsets, "--bootstrap-server", cluster.bootstrap, "--topic", TOPIC, "--time", "-2"
    )[1] == [f"{TOPIC}:{p}:0" for p in COUNTS]


# -- broker-api-versions ----------------------------------------------------------------------------


async def _advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    async with AdminClient(bootstrap) as admin:
        return dict(admin.versions)


_API_LINE = re.compile(r"\t(\w+)\((\d+)\): (?:(\d+)(?: to (\d+))? \[usable: (\d+)\]|UNSUPPORTED),?")


def test_broker_api_versions_prints_one_block_per_broker_as_kafka(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, broker_api_versions, "--bootstrap-server", cluster.bootstrap)
    assert (code, err) == (0, "")
    broker_says = asyncio.run(_advertised(cluster.bootstrap))
    assert broker_says[ApiKey.PRODUCE] == (
        ADVERTISED_MINIMUM[ApiKey.PRODUCE],
        ADVERTISED_VERSIONS[ApiKey.PRODUCE][1],
    )
    headers = [i for i, line in enumerate(out) if " -> (" in line]
    assert len(headers) == 3
    for broker_id, start in zip((1, 2, 3), headers, strict=True):
        host, port = cluster.broker(broker_id).host, cluster.broker(broker_id).port
        assert out[start] == f"{host}:{port} (id: {broker_id} rack: null) -> ("
        block = out[start + 1 : start + 1 + out[start + 1 :].index(")")]
        advertised = {}
        for line in block:
            match = _API_LINE.fullmatch(line)
            assert match, line
            name, key = match.group(1), int(match.group(2))
            spec = api(key)
            assert spec is not None and spec.name == name
            if match.group(3) is None:
                assert key not in broker_says
                continue
            low, high = int(match.group(3)), int(match.group(4) or match.group(3))
            advertised[key] = (low, high)
            assert int(match.group(5)) == min(high, spec.valid_versions.high)
        assert advertised == broker_says
        assert block[0] == "\tProduce(0): 0 to 11 [usable: 11],"
        assert not block[-1].endswith(",")
