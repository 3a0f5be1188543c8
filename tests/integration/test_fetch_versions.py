"""Fetch at Kafka 3.9's versions on real brokers: librdkafka and the Java client at their newest Fetch,
a 1,000-partition consumer over an incremental fetch session (KIP-227), replica fetchers keeping
sessions with their leaders, and Fetch v0-3 with down-converted message sets."""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from protocol import record_batch
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import MetadataRequest
from tests.support.clients import runners
from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient, fetch_request, produce_request
from tools.local_cluster_nodes import LocalClusterError, free_port

pytestmark = pytest.mark.integration

WIDE = 1000


class FetchRecorder:
    """A TCP proxy in front of one broker that decodes the Fetch requests and responses through it:
    (version, session id, epoch, partitions named, partitions forgotten) and partitions answered."""

    def __init__(self, port: int, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.requests: list[tuple[int, int, int, int, int]] = []
        self.responses: list[tuple[int, int, int]] = []  # (error, session id, partitions)
        self._listener = socket.create_server(("127.0.0.1", port))
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self._sockets += [client, server]
            pending: dict[int, int] = {}  # correlation id -> Fetch version
            threading.Thread(target=self._pump, args=(client, server, pending, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, pending, False), daemon=True).start()

    def _pump(
        self, source: socket.socket, sink: socket.socket, pending: dict[int, int], requests: bool
    ) -> None:
        from protocol.api import api
        from protocol.frame import decode_request, decode_response, peek_request

        fetch = api(ApiKey.FETCH)
        buffer = b""
        try:
            while chunk := source.recv(1 << 16):
                sink.sendall(chunk)
                buffer += chunk
                while len(buffer) >= 4 and len(buffer) >= 4 + struct.unpack_from(">i", buffer)[0]:
                    size = struct.unpack_from(">i", buffer)[0]
                    frame, buffer = buffer[4 : 4 + size], buffer[4 + size :]
                    if requests:
                        key, version, correlation = peek_request(frame)
                        if key == ApiKey.FETCH:
                            pending[correlation] = version
                            _, body = decode_request(frame, fetch, version)
                            self.requests.append(
                                (
                                    version,
                                    body.session_id,
                                    body.session_epoch,
                                    sum(len(t.partitions) for t in body.topics),
                                    sum(len(t.partitions) for t in body.forgotten_topics_data),
                                )
                            )
                    else:
                        (correlation,) = struct.unpack_from(">i", frame)
                        version = pending.pop(correlation, -1)
                        if version >= 0:
                            _, response = decode_response(frame, fetch, version)
                            answered = sum(len(t.partitions) for t in response.responses)
                            self.responses.append((response.error_code, response.session_id, answered))
        except OSError:
            pass


def _produce(bootstrap: str, topic: str, partition: int, count: int) -> None:
    now = int(time.time() * 1000)
    batch = record_batch.encode_batch(
        [record_batch.Record(i, now, b"k", b"value-%d" % i) for i in range(count)], base_offset=0
    )
    client = RawClient(bootstrap, timeout=10)
    try:
        response = client.request(ApiKey.PRODUCE, 9, produce_request(topic, batch, partition, acks=-1))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    finally:
        client.close()


def test_librdkafka_consumes_at_its_newest_fetch_version(one_broker: Cluster) -> None:
    from confluent_kafka import Consumer, TopicPartition

    one_broker.create_topic("rdk", partitions=2)
    for p in range(2):
        _produce(one_broker.bootstrap, "rdk", p, 5)
    sent: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if "Sent FetchRequest" in message:
                sent.append(message)

    logger = logging.getLogger("h1.librdkafka")
    logger.addHandler(Capture())
    logger.setLevel(logging.DEBUG)
    consumer = Consumer(
        {
            "bootstrap.servers": one_broker.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "debug": "protocol",
            "logger": logger,
        }
    )
    try:
        consumer.assign([TopicPartition("rdk", p, 0) for p in range(2)])
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < 10 and time.monotonic() < deadline:
            got.extend(m for m in consumer.consume(10, 0.5) if m.error() is None)
        assert sorted((m.partition(), m.offset()) for m in got) == [
            (p, o) for p in range(2) for o in range(5)
        ]
        consumer.poll(0.1)  # drains the log queue
    finally:
        consumer.close()
    versions = {int(m.split("(v", 1)[1].split(",", 1)[0]) for m in sent if "(v" in m}
    # librdkafka 2.16 asks for the newest Fetch it knows that the broker advertises.
    assert versions and max(versions) >= 16, sent[:3]


def test_the_java_client_fetches_incrementally_over_a_v17_session(tmp_path: Path, zookeeper: str) -> None:
    jar_dir = runners.clients_dir() / "java"
    if not all((jar_dir / jar).is_file() for jar in runners.JAVA_JARS):
        pytest.skip("the Java client is not installed (make clientdeps)")
    proxy_port = free_port()
    overrides = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"}
    with Cluster(tmp_path / "c", zookeeper, brokers=1, broker_overrides=overrides) as cluster:
        broker = cluster.broker(1)
        recorder = FetchRecorder(proxy_port, (broker.host, broker.port))
        try:
            cluster.create_topic("javasession", partitions=50)
            bootstrap = f"127.0.0.1:{proxy_port}"
            consumed: list[Any] = []
            reader = threading.Thread(
                target=lambda: consumed.append(
                    runners.consume_java(bootstrap, "javasession", 50, 9, timeout=60)
                )
            )
            reader.start()
            deadline = time.monotonic() + 45
            while not recorder.requests and time.monotonic() < deadline:
                time.sleep(0.1)
            for p in (1, 20, 40):  # records arrive while the consumer polls its session
                time.sleep(0.5)
                _produce(broker.bootstrap, "javasession", p, 3)
            reader.join(60)
            assert consumed and len(consumed[0].records) == 9
        finally:
            recorder.close()
    versions = {r[0] for r in recorder.requests}
    assert versions == {17}, recorder.requests
    assert recorder.requests[0][2:4] == (0, 50)  # a full fetch opens the session with every partition
    incremental = [r for r in recorder.requests if r[2] > 0]
    assert len(incremental) >= 3 and max(r[3] for r in incremental) <= 3, recorder.requests
    for (_, _, epoch, _, _), (error, session, _) in zip(recorder.requests, recorder.responses, strict=False):
        # Every fetch is answered in the session; the consumer's close ends it (epoch -1, sessionless).
        assert error == ErrorCode.NONE and (session == 0) == (epoch == -1), recorder.responses
    assert recorder.responses[0][2] == 50 and max(r[2] for r in recorder.responses[1:]) <= 3


def test_a_thousand_partition_consumer_sends_and_receives_only_what_changed(one_broker: Cluster) -> None:
    from kafka import KafkaConsumer, TopicPartition

    one_broker.create_topic("wide", partitions=WIDE, timeout=60)
    for p in (3, 500, 999):
        _produce(one_broker.bootstrap, "wide", p, 2)
    consumer = KafkaConsumer(
        bootstrap_servers=one_broker.bootstrap,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
    )
    requests: list[tuple[int, int, int, int]] = []  # (session id, epoch, partitions sent, forgotten)
    responses: list[int] = []  # partitions answered
    fetcher = consumer._fetcher
    create, handle = fetcher._create_fetch_requests, fetcher._handle_fetch_response

    def recording_create() -> Any:
        built = create()
        for request, _ in built.values():
            sent = sum(len(t.partitions) for t in request.topics)
            forgotten = sum(len(t.partitions) for t in request.forgotten_topics_data)
            requests.append((request.session_id, request.session_epoch, sent, forgotten))
        return built

    def recording_handle(node_id: Any, offsets: Any, send_time: Any, response: Any) -> Any:
        responses.append(sum(len(t.partitions) for t in response.responses))
        return handle(node_id, offsets, send_time, response)

    fetcher._create_fetch_requests = recording_create
    fetcher._handle_fetch_response = recording_handle
    try:
        consumer.assign([TopicPartition("wide", p) for p in range(WIDE)])
        consumer.seek_to_beginning()
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 6 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(records)
        assert sorted((r.partition, r.offset) for r in got) == [(p, o) for p in (3, 500, 999) for o in (0, 1)]
        idle_until = time.monotonic() + 1.0  # long polls of 100 ms on the session, nothing new
        while time.monotonic() < idle_until:
            consumer.poll(timeout_ms=100)
        _produce(one_broker.bootstrap, "wide", 42, 1)
        deadline = time.monotonic() + 10
        while not any(r.partition == 42 for r in got) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(records)
        assert any(r.partition == 42 for r in got)
    finally:
        consumer.close()
    full = [r for r in requests if r[1] == 0]
    incremental = [r for r in requests if r[1] > 0]
    assert full and full[0][2] == WIDE  # the session opens with every partition
    assert len(incremental) >= 5 and all(r[0] != 0 for r in incremental)
    assert max(r[2] for r in incremental) <= 3  # then only the partitions that moved
    assert responses[0] == WIDE and max(responses[1:]) <= 3 and responses.count(0) >= 3


def _replicas_agree(cluster: Cluster, topic: str, partitions: int, records: int) -> None:
    """Every replica of every partition holds ``records`` records, one batch, all below its high watermark;
    every ISR is complete."""
    client = RawClient(cluster.broker(1).bootstrap)
    try:
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
        )
        metadata = client.request(ApiKey.METADATA, 9, request).topics[0]
    finally:
        client.close()
    assert len(metadata.partitions) == partitions
    assert all(len(p.isr_nodes) == 3 for p in metadata.partitions), metadata
    for p in range(partitions):
        for broker_id in (1, 2, 3):
            client = RawClient(cluster.broker(broker_id).bootstrap)
            try:
                request = fetch_request(topic, p, 0, replica_id=-2)  # the debugging consumer
                data = client.request(ApiKey.FETCH, 12, request).responses[0].partitions[0]
            finally:
                client.close()
            assert data.error_code == ErrorCode.NONE and data.high_watermark == records, (p, broker_id, data)
            assert sum(1 for _ in record_batch.iter_headers(data.records)) == 1


def test_replica_fetchers_keep_sessions_with_their_leaders_across_a_topic_recreation(
    cluster: Cluster,
) -> None:
    cluster.create_topic("replicated", partitions=12, replication_factor=3)
    for p in range(12):
        _produce(cluster.broker(cluster.leader("replicated", p)).bootstrap, "replicated", p, 3)
    cluster.wait(lambda: _try(_replicas_agree, cluster, "replicated", 12, 3), "replication", timeout=20)
    sessions = [
        line
        for broker_id in (1, 2, 3)
        for line in cluster.broker(broker_id).log_path.read_text().splitlines()
        if "fetch session" in line and "Fetch v17" in line
    ]
    assert len(sessions) >= 3, sessions  # every broker follows the other two over v17 sessions

    # Deleted and re-created under the same name (a new topic id): the fetchers forget the old
    # partitions and fetch the new ones, which hold only the new records.
    cluster.delete_topic("replicated")
    cluster.wait(lambda: _try(cluster.create_topic, "replicated", 12, 3), "re-creation", timeout=30)
    for p in range(12):
        _produce(cluster.broker(cluster.leader("replicated", p)).bootstrap, "replicated", p, 2)
    cluster.wait(lambda: _try(_replicas_agree, cluster, "replicated", 12, 2), "re-replication", timeout=20)


def _try(check: Any, *args: Any) -> bool:
    try:
        check(*args)
    except (AssertionError, OSError, LocalClusterError) as e:
        logging.getLogger(__name__).info("not yet: %s", str(e)[:200])
        return False
    return True


def test_fetch_v0_to_v3_reads_magic_0_and_1_message_sets(one_broker: Cluster) -> None:
    from protocol.message_set import decode_message_set

    one_broker.create_topic("old", partitions=1)
    _produce(one_broker.bootstrap, "old", 0, 300)  # > 4 KiB: sent as a buffer of its own
    client = RawClient(one_broker.bootstrap)
    try:
        for version, magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
            response = client.request(ApiKey.FETCH, version, fetch_request("old", 0, 0))
            partition = response.responses[0].partitions[0]
            assert partition.error_code == ErrorCode.NONE and partition.high_watermark == 300
            messages = decode_message_set(partition.records)
            assert [(m.offset, m.magic, m.value) for m in messages] == [
                (o, magic, b"value-%d" % o) for o in range(300)
            ]
    finally:
        client.close()
