"""Leader elections and partition reassignment on real clusters (ZooKeeper, controllers, three brokers):
preferred elections after a broker bounce (ElectLeaders, the znode, the auto-rebalance check), unclean
elections, reassignments with data flowing and with the controller SIGKILLed midway, and the round
trips of ``samsa reassign-partitions``, ``samsa leader-election`` and ``samsa replica-verification``
(and of kafka-python's admin client).

Tests that need followers to catch up (a bounced broker back in the ISR, a new replica joining it) are
skipped until the broker replicates (``broker/replica_fetcher.py``)."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from argparse import Namespace
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition, errors
from kafka.admin import KafkaAdminClient

from protocol import record_batch
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import MetadataRequest
from tests.integration.test_tools import eventually, samsa
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient, fetch_request
from tools.replica_verification import Fetched, OffsetMismatch, ReplicaVerifier
from zk import reassignment_json, znodes

pytestmark = pytest.mark.integration


@pytest.fixture
def make_cluster(tmp_path: Path, zookeeper: str) -> Iterator[Callable[..., Cluster]]:
    """``make_cluster(controllers=1, **controller settings)``: a started cluster, stopped after the test."""
    started: list[Cluster] = []

    def start(controllers: int = 1, **settings: str) -> Cluster:
        cluster = Cluster(tmp_path / f"c{len(started)}", zookeeper, brokers=3, controllers=controllers)
        for controller in cluster.controllers.values():
            controller.overrides.update({k.replace("_", "."): v for k, v in settings.items()})
        for broker in cluster.brokers.values():
            # The last broker of a replicated topic cannot hand its leaderships over: do not wait 3 x 5 s.
            broker.overrides["controlled.shutdown.retry.backoff.ms"] = "100"
        started.append(cluster)
        return cluster.start()

    try:
        yield start
    finally:
        for cluster in started:
            cluster.stop()


def _partitions(cluster: Cluster, topic: str) -> dict[int, Any]:
    """Partition index -> Metadata partition (leader_id, replica_nodes, isr_nodes), from a live broker."""
    client = RawClient(cluster.bootstrap.split(",")[0])
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
    )
    found = client.request(ApiKey.METADATA, 9, request).topics[0]
    client.close()
    return {p.partition_index: p for p in found.partitions}


def _leaders(cluster: Cluster, topic: str) -> dict[int, int]:
    return {i: p.leader_id for i, p in _partitions(cluster, topic).items()}


def _preferred(cluster: Cluster, topic: str) -> dict[int, int]:
    return {i: p.replica_nodes[0] for i, p in _partitions(cluster, topic).items()}


def _all_in_sync(cluster: Cluster, topic: str) -> bool:
    partitions = _partitions(cluster, topic).values()
    return bool(partitions) and all(sorted(p.isr_nodes) == sorted(p.replica_nodes) for p in partitions)


def _create(cluster: Cluster, topic: str, assignment: str) -> None:
    """A topic with an explicit replica assignment ("1:2,2:1"), through ``samsa topics``."""
    args = ["--bootstrap-server", cluster.bootstrap, "--create", "--topic", topic]
    result = samsa("topics", *args, "--replica-assignment", assignment)
    assert result.returncode == 0, result.stdout + result.stderr
    cluster.wait_for_leaders(topic, assignment.count(",") + 1)


def _bounce_a_preferred_leader(cluster: Cluster, topic: str) -> int:
    """Restarts the preferred leader of partition 0 (its leaderships move elsewhere on the way down) and
    waits until it is back in every ISR; returns its id. Only with auto.leader.rebalance.enable=false is
    partition 0 then sure to be led by another broker: the auto-rebalance check may already have given it
    back (a test that asserted it anyway failed in a clean-clone run)."""
    broker = cluster.broker(_preferred(cluster, topic)[0])
    partitions = len(_partitions(cluster, topic))
    broker.stop()
    assert eventually(lambda: broker.broker_id not in _leaders(cluster, topic).values())
    broker.start()
    # Counted before the restart: the restarted broker may be the first bootstrap one and know nothing yet.
    cluster.wait_for_leaders(topic, partitions)
    assert eventually(lambda: _all_in_sync(cluster, topic), timeout=30), _partitions(cluster, topic)
    return broker.broker_id


# -- preferred and unclean elections ----------------------------------------------------------------------


def test_preferred_elections_by_api_and_by_znode_restore_leaders_after_a_bounce(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(auto_leader_rebalance_enable="false")
    cluster.create_topic("p", 3, 3)
    bounced = _bounce_a_preferred_leader(cluster, "p")
    assert _leaders(cluster, "p")[0] != bounced
    args = ["--bootstrap-server", cluster.bootstrap, "--election-type", "preferred"]
    result = samsa("leader-election", *args, "--all-topic-partitions")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Successfully completed leader election (PREFERRED) for partitions p-0")
    assert _leaders(cluster, "p") == _preferred(cluster, "p")
    # Again, with the znode Kafka's old tool wrote.
    bounced = _bounce_a_preferred_leader(cluster, "p")
    assert _leaders(cluster, "p")[0] != bounced
    request = znodes.encode_partitions([("p", p) for p in range(3)])
    cluster.wait_for(lambda zk: zk.create(znodes.PREFERRED_REPLICA_ELECTION, request) or True, "the request")
    assert eventually(lambda: _leaders(cluster, "p") == _preferred(cluster, "p"))
    assert cluster.wait_for(lambda zk: not zk.exists(znodes.PREFERRED_REPLICA_ELECTION), "the znode deleted")


def test_the_auto_rebalance_check_restores_preferred_leaders_after_a_bounce(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(leader_imbalance_check_interval_seconds="1")
    cluster.create_topic("a", 3, 3)
    _bounce_a_preferred_leader(cluster, "a")
    assert eventually(lambda: _leaders(cluster, "a") == _preferred(cluster, "a"), timeout=10)
    assert "asked by the auto-rebalance check" in cluster.active_controller().log()


def test_unclean_election_by_the_tool_brings_back_a_partition_whose_isr_is_gone(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster()
    _create(cluster, "u", "1:2")
    cluster.broker(2).stop()
    assert eventually(lambda: list(cluster.partition_state("u", 0).isr) == [1])  # type: ignore[attr-defined]
    cluster.broker(1).stop()
    assert eventually(lambda: cluster.partition_state("u", 0).leader == -1)  # type: ignore[attr-defined]
    cluster.broker(2).start()
    assert cluster.partition_state("u", 0).leader == -1  # type: ignore[attr-defined]
    args = ["leader-election", "--bootstrap-server", cluster.bootstrap, "--topic", "u", "--partition", "0"]
    preferred = samsa(*args, "--election-type", "preferred")
    assert preferred.returncode == 1
    assert (
        "Error completing leader election (PREFERRED) for partition: u-0: "
        "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: " in preferred.stdout
    )
    assert preferred.stderr.strip() == "1 replica(s) could not be elected"
    unclean = samsa(*args, "--election-type", "UNCLEAN")
    assert (unclean.returncode, unclean.stdout) == (
        0,
        "Successfully completed leader election (UNCLEAN) for partitions u-0\n",
    )
    state = cluster.partition_state("u", 0)
    assert (state.leader, list(state.isr)) == (2, [2])  # type: ignore[attr-defined]
    assert eventually(lambda: _leaders(cluster, "u") == {0: 2})
    again = samsa(*args, "--election-type", "unclean")
    assert (again.returncode, again.stdout) == (0, "Valid replica already elected for partitions u-0\n")


def test_kafka_python_elect_leaders_and_the_tools_option_errors(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster()
    cluster.create_topic("e", 2, 3)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        results = admin.elect_leaders(0, {"e": [0, 1]}, raise_errors=False)
    finally:
        admin.close()
    codes = {
        (t.topic, p.partition_id): p.error_code
        for t in results.replica_election_results
        for p in t.partition_result
    }
    assert codes == {("e", 0): ErrorCode.ELECTION_NOT_NEEDED, ("e", 1): ErrorCode.ELECTION_NOT_NEEDED}
    base = ["leader-election", "--bootstrap-server", cluster.bootstrap]
    one_of = "topic, all-topic-partitions, path-to-json-file"
    for args, message in [
        (
            ["--election-type", "preferred"],
            f"One and only one of the following options is required: {one_of}",
        ),
        (["--election-type", "preferred", "--topic", "e"], "Missing required option(s): partition"),
        (
            ["--election-type", "preferred", "--partition", "0", "--all-topic-partitions"],
            "Option partition is only allowed if topic is used",
        ),
        (["--topic", "e", "--partition", "0"], "Missing required option(s): election-type"),
    ]:
        result = samsa(*base, *args)
        assert (result.returncode, result.stderr.strip()) == (1, message)


def test_leader_election_reads_kafkas_json_file(make_cluster: Callable[..., Cluster], tmp_path: Path) -> None:
    cluster = make_cluster()
    cluster.create_topic("j", 2, 2)
    path = tmp_path / "elect.json"
    path.write_text(
        json.dumps({"partitions": [{"topic": "j", "partition": 1}, {"topic": "j", "partition": 0}]})
    )
    args = ["leader-election", "--bootstrap-server", cluster.bootstrap, "--election-type", "preferred"]
    result = samsa(*args, "--path-to-json-file", str(path))
    assert (result.returncode, result.stdout) == (
        0,
        "Valid replica already elected for partitions j-0, j-1\n",
    )
    path.write_text(
        json.dumps({"partitions": [{"topic": "j", "partition": 1}, {"topic": "j", "partition": 1}]})
    )
    result = samsa(*args, "--path-to-json-file", str(path))
    assert (result.returncode, result.stderr.strip()) == (
        1,
        "Replica election data contains duplicate partitions: [j-1]",
    )


# -- reassignment -------------------------------------------------------------------------------------------


class Producer:
    """Produces numbered values with acks=all in a thread; records those acknowledged, in order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: list[bytes] = []
        self.failed = 0
        self._stop = threading.Event()
        self._producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20, linger_ms=5)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            value = f"v{i:06d}".encode()
            try:
                self._producer.send(self.topic, value, partition=0).get(timeout=30)
                self.acked.append(value)
            except Exception:
                self.failed += 1
            i += 1

    def stop(self) -> list[bytes]:
        self._stop.set()
        self._thread.join(60)
        self._producer.close()
        return self.acked


def _consume_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10_000
    )
    consumer.assign([TopicPartition(topic, 0)])
    values: list[bytes] = []
    try:
        for record in consumer:
            values.append(record.value)
            if len(values) >= expected:
                break
    finally:
        consumer.close()
    return values


def _topic_znode(cluster: Cluster, topic: str) -> znodes.TopicAssignment:
    data = cluster.wait_for(lambda zk: zk.get(znodes.topic_path(topic))[0], "the topic znode")
    return znodes.TopicAssignment.decode(data)


def _reassigned(cluster: Cluster, topic: str, replicas: dict[int, list[int]]) -> bool:
    record = _topic_znode(cluster, topic)
    return record.partitions == replicas and not record.adding_replicas and not record.removing_replicas


def test_a_reassignment_adds_and_removes_replicas_while_data_flows(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster()
    _create(cluster, "m", "1:2")
    producer = Producer(cluster.bootstrap, "m")
    assert eventually(lambda: len(producer.acked) >= 200)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        admin.alter_partition_reassignments({TopicPartition("m", 0): [2, 3]})
        assert eventually(lambda: _reassigned(cluster, "m", {0: [2, 3]}), timeout=30), _topic_znode(
            cluster, "m"
        )
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()
    time.sleep(0.5)  # writes go on against the new replica set
    acked = producer.stop()
    assert producer.failed == 0 and len(acked) > 200
    assert eventually(lambda: sorted(_partitions(cluster, "m")[0].isr_nodes) == [2, 3])
    assert _consume_all(cluster.bootstrap, "m", len(acked)) == acked
    # Broker 1's copy is gone; broker 3 has everything: it serves it once it leads.
    assert eventually(lambda: not list((cluster.broker(1).log_dir).glob("m-0")))
    cluster.broker(2).stop()
    assert eventually(lambda: _leaders(cluster, "m") == {0: 3})
    assert _consume_all(cluster.bootstrap, "m", len(acked)) == acked


@pytest.mark.slow
def test_a_reassignment_completes_when_the_controller_is_sigkilled_midway(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    cluster = make_cluster(controllers=2)
    _create(cluster, "k", "1:2")
    producer = Producer(cluster.bootstrap, "k")
    assert eventually(lambda: len(producer.acked) >= 200)
    plan = tmp_path / "plan.json"
    plan.write_text(reassignment_json.format_reassignment({("k", 0): [2, 3]}))
    tool = ["reassign-partitions", "--bootstrap-server", cluster.bootstrap]
    cluster.broker(3).signal(signal.SIGSTOP)  # the new replica cannot catch up yet: phase A
    try:
        result = samsa(*tool, "--execute", "--reassignment-json-file", str(plan))
        assert result.returncode == 0, result.stdout
        moving = _topic_znode(cluster, "k")
        assert (moving.partitions, moving.adding_replicas, moving.removing_replicas) == (
            {0: [2, 3, 1]},
            {0: [3]},
            {0: [1]},
        )
        active = cluster.active_controller()
        active.signal(signal.SIGKILL)
    finally:
        cluster.broker(3).signal(signal.SIGCONT)
    assert eventually(lambda: _reassigned(cluster, "k", {0: [2, 3]}), timeout=40), _topic_znode(cluster, "k")
    assert cluster.active_controller() is not active
    acked = producer.stop()
    assert producer.failed == 0
    assert eventually(lambda: sorted(_partitions(cluster, "k")[0].isr_nodes) == [2, 3])
    assert _consume_all(cluster.bootstrap, "k", len(acked)) == acked
    verify = samsa(*tool, "--verify", "--reassignment-json-file", str(plan))
    assert verify.stdout == (
        "Status of partition reassignment:\nReassignment of partition k-0 is completed.\n"
        # Nothing in progress: Kafka's tool clears the replication throttles.
        "Clearing broker-level throttles on brokers 1,2,3\n"
        "Clearing topic-level throttles on topic k\n"
    )


def test_the_reassignment_tool_round_trips(make_cluster: Callable[..., Cluster], tmp_path: Path) -> None:
    cluster = make_cluster()
    bootstrap = cluster.bootstrap
    _create(cluster, "c", "1:2,2:1")
    tool = ["reassign-partitions", "--bootstrap-server", bootstrap]

    # --generate: the current assignment, and a proposal over the brokers given with the same RF.
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": "c"}], "version": 1}))
    generated = samsa(
        *tool, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,2,3"
    )
    assert generated.returncode == 0, generated.stdout
    lines = generated.stdout.split("\n")
    assert (
        lines[0] == "Current partition replica assignment"
        and lines[3] == "Proposed partition reassignment configuration"
    )
    assert lines[1] == reassignment_json.format_reassignment({("c", 0): [1, 2], ("c", 1): [2, 1]})
    proposed = json.loads(lines[4])
    assert [
        (p["topic"], p["partition"], len(p["replicas"]), p["log_dirs"]) for p in proposed["partitions"]
    ] == [
        ("c", 0, 2, ["any", "any"]),
        ("c", 1, 2, ["any", "any"]),
    ]
    assert all(set(p["replicas"]) <= {1, 2, 3} for p in proposed["partitions"])
    duplicate = samsa(*tool, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,1")
    assert (duplicate.returncode, duplicate.stdout) == (
        1,
        "Error: Broker list contains duplicate entries: [1]\n",
    )

    # --execute, --list, --verify and --cancel of a reassignment that cannot complete (broker 3 paused).
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "c", "partition": 0, "replicas": [1, 3]}]})
    )
    cluster.broker(3).signal(signal.SIGSTOP)
    try:
        executed = samsa(*tool, "--execute", "--reassignment-json-file", str(plan))
        assert executed.returncode == 0, executed.stdout
        assert executed.stdout == (
            "Current partition replica assignment\n\n"
            '{"version":1,"partitions":[{"topic":"c","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}\n\n'
            "Save this to use as the --reassignment-json-file option during rollback\n"
            "Successfully started partition reassignment for c-0\n"
        )
        listed = samsa(*tool, "--list")
        assert (
            listed.stdout
            == "Current partition reassignments:\nc-0: replicas: 1,3,2. adding: 3. removing: 2.\n"
        )
        again = samsa(*tool, "--execute", "--reassignment-json-file", str(plan))
        assert again.returncode == 1 and again.stdout.startswith(
            "Cannot execute because there is an existing"
        )
        verified = samsa(*tool, "--verify", "--reassignment-json-file", str(plan))
        assert verified.stdout == (
            "Status of partition reassignment:\nReassignment of partition c-0 is still in progress.\n"
        )
        # --preserve-throttles: clearing them would wait for the paused broker 3.
        cancelled = samsa(*tool, "--cancel", "--reassignment-json-file", str(plan), "--preserve-throttles")
        assert (cancelled.returncode, cancelled.stdout) == (
            0,
            "Successfully cancelled partition reassignment for: c-0\n",
        )
    finally:
        cluster.broker(3).signal(signal.SIGCONT)
    assert samsa(*tool, "--list").stdout == "No partition reassignments found.\n"
    verified = samsa(*tool, "--verify", "--reassignment-json-file", str(plan))
    assert verified.stdout == (
        "Status of partition reassignment:\n"
        "There is no active reassignment of partition c-0, but replica set is 1,2 rather than 1,3.\n"
        # Nothing in progress: Kafka's tool clears the replication throttles.
        "Clearing broker-level throttles on brokers 1,2,3\n"
        "Clearing topic-level throttles on topic c\n"
    )

    # A reassignment within the ISR completes at once.
    plan.write_text(reassignment_json.format_reassignment({("c", 1): [1, 2]}))
    assert samsa(*tool, "--execute", "--reassignment-json-file", str(plan)).returncode == 0
    verify = ["--verify", "--reassignment-json-file", str(plan)]
    assert eventually(lambda: "partition c-1 is completed." in samsa(*tool, *verify).stdout)
    assert _topic_znode(cluster, "c").partitions == {0: [1, 2], 1: [1, 2]}

    # Kafka's checks of the plan.
    for partitions, message in [
        ([("c", 0, [1, 9])], "Error: Unknown broker id 9"),
        ([("c", 5, [1])], "Error: Unable to find partition: c-5"),
        (
            [("c", 0, [1, 1])],
            "Error: Partition replica lists may not contain duplicate entries: "
            "c-0 contains multiple entries for 1",
        ),
        ([], "Error: Partition reassignment list cannot be empty"),
    ]:
        items = [{"topic": t, "partition": p, "replicas": r} for t, p, r in partitions]
        plan.write_text(json.dumps({"version": 1, "partitions": items}))
        result = samsa(*tool, "--execute", "--reassignment-json-file", str(plan))
        assert (result.returncode, result.stdout.strip()) == (1, message)
    plan.write_text(json.dumps({"version": 2, "partitions": []}))
    result = samsa(*tool, "--execute", "--reassignment-json-file", str(plan))
    assert (result.returncode, result.stdout.strip()) == (1, "Error: Not supported version field value 2")
    usage = samsa(*tool, "--execute", "--reassignment-json-file", str(plan), "--broker-list", "1")
    assert usage.returncode == 1
    assert usage.stderr.startswith('Option "[broker-list]" can\'t be used with action "[execute]"')


def test_kafka_python_reassignment_apis_and_the_znode(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster()
    cluster.create_topic("z", 2, 2)
    replicas = {i: list(p.replica_nodes) for i, p in _partitions(cluster, "z").items()}
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        assert admin.list_partition_reassignments() == {}
        result = admin.alter_partition_reassignments(
            {TopicPartition("z", 9): [1], TopicPartition("z", 0): None}
        )
    finally:
        admin.close()
    assert result == {
        TopicPartition("z", 9): errors.UnknownTopicOrPartitionError,
        TopicPartition("z", 0): errors.NoReassignmentInProgressError,
    }
    # Through the znode, as Kafka's old tool did: a reorder completes at once and the znode goes.
    reordered = {("z", 0): list(reversed(replicas[0]))}
    cluster.wait_for(
        lambda zk: zk.create(znodes.REASSIGN_PARTITIONS, reassignment_json.encode_znode(reordered)) or True,
        "the request",
    )
    assert eventually(lambda: _topic_znode(cluster, "z").partitions[0] == reordered[("z", 0)])
    assert cluster.wait_for(lambda zk: not zk.exists(znodes.REASSIGN_PARTITIONS), "the znode deleted")


# -- replica verification -----------------------------------------------------------------------------------


def _produce_lines(cluster: Cluster, topic: str, count: int) -> None:
    lines = "".join(f"line {i}\n" for i in range(count))
    result = samsa("console-producer", "--bootstrap-server", cluster.bootstrap, "--topic", topic, stdin=lines)
    assert result.returncode == 0, result.stderr


def _followers_serve_debug_fetches(cluster: Cluster, topic: str) -> bool:
    """Whether a follower answers a Fetch with replica id -2 (Kafka's debugging consumer)."""
    partition = _partitions(cluster, topic)[0]
    follower = next(r for r in partition.replica_nodes if r != partition.leader_id)
    request = fetch_request(topic, max_bytes=1024, replica_id=-2)
    client = RawClient(cluster.broker(follower).bootstrap)
    answer = client.request(ApiKey.FETCH, 12, request)
    client.close()
    return answer.responses[0].partitions[0].error_code == ErrorCode.NONE


def test_replica_verification_checks_every_replica_up_to_the_high_watermark(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster()
    cluster.create_topic("v1", 2, 1)
    _produce_lines(cluster, "v1", 500)
    args = ["replica-verification", "--bootstrap-server", cluster.bootstrap, "--time", "-2", "--once"]
    result = samsa(*args, "--topic-white-list", "v1")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith(": verification process is started")
    assert re.search(r": max lag is 0 for partition v1-0 at offset \d+ among 2 partitions$", lines[-1]), lines
    nothing = samsa(*args, "--topic-white-list", "nope.*")
    assert nothing.returncode == 1 and "No topics found." in nothing.stderr
    cluster.create_topic("v3", 1, 3)
    _produce_lines(cluster, "v3", 500)
    assert _followers_serve_debug_fetches(cluster, "v3")
    result = samsa(*args, "--topic-white-list", "v3")
    assert result.returncode == 0, result.stdout
    assert result.stdout.splitlines()[-1].endswith(
        ": max lag is 0 for partition v3-0 at offset 500 among 1 partitions"
    )


def _batch(base_offset: int, values: list[bytes]) -> bytes:
    records = [record_batch.Record(base_offset + i, 1000, None, v) for i, v in enumerate(values)]
    return bytes(record_batch.encode_batch(records, base_offset=base_offset))


def test_replica_verification_reports_a_checksum_difference_and_stops_on_an_offset_difference() -> None:
    out: list[str] = []
    tp = ("t", 0)
    verifier = ReplicaVerifier(
        {tp: [1, 2]}, {}, 12, Namespace(fetch_size=1 << 20, max_wait_ms=10), out.append
    )
    verifier.positions = {tp: 0}
    same = _batch(0, [b"a", b"b"])
    answers = {
        1: Fetched(0, 4, same + _batch(2, [b"c", b"d"])),
        2: Fetched(0, 4, same + _batch(2, [b"c", b"X"])),
    }
    assert verifier.verify({tp: answers}) is True
    assert verifier.positions[tp] == 4 and verifier.mismatches == 1
    [line] = out
    assert ": partition t-0 has unmatched checksum at offset 3; replica 1's checksum " in line
    # Only what every replica has below its own high watermark is compared.
    verifier.positions = {tp: 0}
    out.clear()
    lagging = {1: Fetched(0, 4, same + _batch(2, [b"c", b"d"])), 2: Fetched(0, 2, same)}
    assert verifier.verify({tp: lagging}) is True
    assert verifier.positions[tp] == 2 and verifier.max_lag == 2 and out == []
    # A replica whose batches end elsewhere is a broken log: reported, and the tool stops.
    verifier.positions = {tp: 0}
    shifted = {1: Fetched(0, 4, same), 2: Fetched(0, 4, _batch(0, [b"a", b"b", b"c"]))}
    with pytest.raises(OffsetMismatch):
        verifier.verify({tp: shifted})
    assert "replica 1's offset 1 doesn't match replica 2's offset 2" in out[-1]
    # A replica that cannot be read is reported once.
    out.clear()
    refused = {1: Fetched(0, 4, same), 2: Fetched(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, None)}
    verifier.verify({tp: refused})
    verifier.verify({tp: refused})
    assert len(out) == 1 and out[0].endswith(
        ": partition t-0: replica 2 cannot be read: NOT_LEADER_OR_FOLLOWER"
    )
