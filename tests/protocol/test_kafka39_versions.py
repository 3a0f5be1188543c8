"""The API versions Kafka 3.9 serves below the Kafka 4 schemas' floors (KIP-896 removed them), decoded and
encoded by Samsa's codecs byte for byte as Kafka 3.9 and kafka-python write them.

The oracles: kafka-python's hand-written classes for the old versions (``kafka.protocol.old``), Kafka
3.9's own generated message classes (the kafka-clients jar, through ``java/SchemaOracle.java``), and,
for the two APIs neither client library has at v0, bytes laid out by hand from Kafka's protocol guide.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import kafka.protocol.old as kafka_python_old
import pytest
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from kafka.protocol.old.api import Request as KafkaPythonRequest
from kafka.protocol.old.api import RequestHeader as KafkaPythonRequestHeader
from kafka.protocol.old.api import Response as KafkaPythonResponse
from kafka.record.memory_records import MemoryRecords as KafkaPythonRecords

from protocol.api import ApiKey, api
from protocol.down_convert import down_convert
from protocol.frame import decode_request, decode_response, encode_request, encode_response
from protocol.messages import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
    message_class,
)
from protocol.record_batch import Record, encode_batch
from protocol.schema import KAFKA39_FLOORS, load_message, parse_message, schema_paths
from tests.protocol.generated_values import random_message

ROOT = Path(__file__).resolve().parents[2]
JARS = ROOT / ".cache" / "clients" / "java"
ORACLE = Path(__file__).parent / "java" / "SchemaOracle.java"

# What KAFKA39_FLOORS adds, written out: API -> the versions below the Kafka 4 schema's validVersions.
ADDED: dict[str, range] = {
    "Produce": range(0, 3),
    "Fetch": range(0, 4),
    "ListOffsets": range(0, 1),
    "OffsetCommit": range(0, 2),
    "OffsetFetch": range(0, 1),
    "CreateTopics": range(0, 2),
    "DeleteTopics": range(0, 1),
    "OffsetForLeaderEpoch": range(0, 2),
    "WriteTxnMarkers": range(0, 1),
    "DescribeAcls": range(0, 1),
    "CreateAcls": range(0, 1),
    "DeleteAcls": range(0, 1),
    "DescribeConfigs": range(0, 1),
    "AlterReplicaLogDirs": range(0, 1),
    "DescribeLogDirs": range(0, 1),
}
OLD = [
    (f"{base}{kind}", v)
    for base, versions in ADDED.items()
    for kind in ("Request", "Response")
    for v in versions
]


def _kafka4_low(name: str) -> int:
    return parse_message(schema_paths()[name].read_text(encoding="utf-8")).valid_versions.low


def _kafka_python_classes() -> dict[tuple[int, int, bool], Any]:
    """(api key, version, is request) -> kafka-python's class for that old version."""
    found: dict[tuple[int, int, bool], Any] = {}
    for module_info in pkgutil.iter_modules(kafka_python_old.__path__):
        module = importlib.import_module(f"kafka.protocol.old.{module_info.name}")
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, (KafkaPythonRequest, KafkaPythonResponse))
                and value.__module__ == module.__name__
                and isinstance(getattr(value, "API_VERSION", None), int)
            ):
                found[(value.API_KEY, value.API_VERSION, issubclass(value, KafkaPythonRequest))] = value
    return found


KAFKA_PYTHON = _kafka_python_classes()
# kafka-python's DescribeLogDirsRequest v0 types Partitions as int32 where Kafka has []int32 (a bug in its
# table); SchemaOracle checks that version against Kafka's own class instead.
KAFKA_PYTHON_WRONG = {("DescribeLogDirsRequest", 0)}


def _kafka_python_class(name: str, version: int) -> Any:
    spec = load_message(name)
    assert spec.api_key is not None
    return KAFKA_PYTHON.get((spec.api_key, version, spec.type == "request"))


def test_floors_add_exactly_these_versions() -> None:
    assert set(KAFKA39_FLOORS) == set(ADDED)
    for base, versions in ADDED.items():
        for kind in ("Request", "Response"):
            name = base + kind
            assert load_message(name).valid_versions.low == versions.start == 0
            assert _kafka4_low(name) == versions.stop, name


def test_every_api_reaches_kafka_39s_range() -> None:
    for key, (low, high) in BROKER_API_VERSIONS[(3, 9)].items():
        definition = api(key)
        if definition is None:
            continue  # the delegation-token and KRaft-only APIs Samsa has no schema for
        assert low in definition.valid_versions, definition.name
        assert high in definition.valid_versions, definition.name


@pytest.mark.parametrize(("name", "version"), OLD)
def test_old_versions_use_non_flexible_headers(name: str, version: int) -> None:
    definition = api(load_message(name).api_key or 0)
    assert definition is not None
    assert definition.request_header_version(version) == 1
    assert definition.response_header_version(version) == 0


@pytest.mark.parametrize(("name", "version"), OLD)
def test_round_trip_at_old_version(name: str, version: int) -> None:
    cls = message_class(name)
    for seed in range(4):
        message = random_message(cls, version, seed)
        encoded = message.encode(version)
        decoded, end = cls.decode_from(encoded, version)
        assert end == len(encoded)
        assert decoded == message
        assert decoded.encode(version) == encoded


KAFKA_PYTHON_OLD = [
    (n, v) for n, v in OLD if _kafka_python_class(n, v) is not None and (n, v) not in KAFKA_PYTHON_WRONG
]


def test_kafka_python_covers_all_but_two_apis() -> None:
    missing = {n for n, v in OLD if _kafka_python_class(n, v) is None}
    assert missing == {
        "WriteTxnMarkersRequest",
        "WriteTxnMarkersResponse",
        "AlterReplicaLogDirsRequest",
        "AlterReplicaLogDirsResponse",
    }


@pytest.mark.parametrize(("name", "version"), KAFKA_PYTHON_OLD)
def test_kafka_python_reads_and_writes_the_same_bytes(name: str, version: int) -> None:
    kafka_python = _kafka_python_class(name, version)
    assert kafka_python is not None
    cls = message_class(name)
    for seed in range(6):
        ours = random_message(cls, version, seed).encode(version)
        theirs = kafka_python.decode(ours).encode()
        assert theirs == ours, f"seed {seed}"
        assert cls.decode(theirs, version).encode(version) == ours


# -- whole frames, with values ---------------------------------------------------------------------------


def _kafka_python_frame(request: Any, correlation_id: int = 42, client_id: str = "old-client") -> bytes:
    header = KafkaPythonRequestHeader(request.API_KEY, request.API_VERSION, correlation_id, client_id)
    return bytes(header.encode() + request.encode())


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_request_from_kafka_python(version: int) -> None:
    kafka_python = KAFKA_PYTHON[(ApiKey.FETCH, version, True)]
    fields = [-1, 500, 1]
    if version == 3:
        fields.append(1 << 20)  # max_bytes, KIP-74
    request = kafka_python(*fields, [("events", [(0, 123, 4096), (2, 7, 1024)])])
    header, body = decode_request(_kafka_python_frame(request), api(ApiKey.FETCH), version)
    assert (header.request_api_version, header.correlation_id, header.client_id) == (
        version,
        42,
        "old-client",
    )
    assert isinstance(body, FetchRequest)
    assert (body.replica_id, body.max_wait_ms, body.min_bytes) == (-1, 500, 1)
    assert body.max_bytes == (1 << 20 if version == 3 else 0x7FFFFFFF)
    [topic] = body.topics
    assert topic.topic == "events"
    assert [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in topic.partitions] == [
        (0, 123, 4096),
        (2, 7, 1024),
    ]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_fetch_response_with_down_converted_records_reads_in_kafka_python(version: int) -> None:
    magic = 0 if version < 2 else 1
    stored = [Record(10 + i, 1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i) for i in range(3)]
    records = down_convert(encode_batch(stored, base_offset=10), magic)
    response = FetchResponse(
        throttle_time_ms=5,
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic="events",
                partitions=[
                    FetchResponse.PartitionData(partition_index=0, high_watermark=13, records=records)
                ],
            )
        ],
    )
    frame = b"".join(bytes(p) for p in encode_response(api(ApiKey.FETCH), version, 42, response))
    assert struct.unpack_from(">ii", frame) == (len(frame) - 4, 42)
    kafka_python = KAFKA_PYTHON[(ApiKey.FETCH, version, False)].decode(frame[8:])
    if version >= 1:
        assert kafka_python.throttle_time_ms == 5
    [(topic, [(partition, error, high_watermark, raw)])] = kafka_python.responses
    assert (topic, partition, error, high_watermark) == ("events", 0, 0, 13)
    memory = KafkaPythonRecords(raw)
    read = []
    while (batch := memory.next_batch()) is not None:  # one message per record: uncompressed
        read += [(r.offset, r.key, r.value, r.timestamp) for r in batch]
    assert read == [
        (10 + i, b"k%d" % i, b"v%d" % i, None if magic == 0 else 1_700_000_000_000 + i) for i in range(3)
    ]


def test_list_offsets_v0_max_num_offsets_and_old_style_offsets() -> None:
    request = KAFKA_PYTHON[(ApiKey.LIST_OFFSETS, 0, True)](-1, [("events", [(0, -1, 3)])])
    _, body = decode_request(_kafka_python_frame(request), api(ApiKey.LIST_OFFSETS), 0)
    assert isinstance(body, ListOffsetsRequest)
    [partition] = body.topics[0].partitions
    assert (partition.partition_index, partition.timestamp, partition.max_num_offsets) == (0, -1, 3)

    response = ListOffsetsResponse(
        topics=[
            ListOffsetsResponse.ListOffsetsTopicResponse(
                name="events",
                partitions=[
                    ListOffsetsResponse.ListOffsetsPartitionResponse(
                        partition_index=0, old_style_offsets=[42, 17, 0]
                    )
                ],
            )
        ]
    )
    encoded = response.encode(0)
    decoded = KAFKA_PYTHON[(ApiKey.LIST_OFFSETS, 0, False)].decode(encoded)
    assert decoded.topics == [("events", [(0, 0, [42, 17, 0])])]


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_v0_v1_fields(version: int) -> None:
    kafka_python = KAFKA_PYTHON[(ApiKey.OFFSET_COMMIT, version, True)]
    if version == 0:
        request = kafka_python("group", [("events", [(3, 99, "meta")])])
    else:
        request = kafka_python("group", 5, "member-1", [("events", [(3, 99, 1_700_000_000_000, "meta")])])
    _, body = decode_request(_kafka_python_frame(request), api(ApiKey.OFFSET_COMMIT), version)
    assert isinstance(body, OffsetCommitRequest)
    assert body.group_id == "group"
    [partition] = body.topics[0].partitions
    assert (partition.partition_index, partition.committed_offset, partition.committed_metadata) == (
        3,
        99,
        "meta",
    )
    if version == 1:
        assert (body.generation_id_or_member_epoch, body.member_id) == (5, "member-1")
        assert partition.commit_timestamp == 1_700_000_000_000
    else:
        assert (body.generation_id_or_member_epoch, body.member_id) == (-1, "")


# -- the two v0s no client library has: bytes from the protocol guide's layout ---------------------------


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_write_txn_markers_v0() -> None:
    wire = (
        struct.pack(">i", 1)  # markers
        + struct.pack(">qh?", 4000, 2, True)  # producer id, epoch, transaction result
        + struct.pack(">i", 1)  # topics
        + _string("events")
        + struct.pack(">iii", 2, 0, 5)  # partition indexes
        + struct.pack(">i", 9)  # coordinator epoch
    )
    request = WriteTxnMarkersRequest.decode(wire, 0)
    [marker] = request.markers
    assert (marker.producer_id, marker.producer_epoch, marker.transaction_result) == (4000, 2, True)
    assert marker.coordinator_epoch == 9
    assert [(t.name, t.partition_indexes) for t in marker.topics] == [("events", [0, 5])]
    assert request.encode(0) == wire

    response = WriteTxnMarkersResponse(
        markers=[
            WriteTxnMarkersResponse.WritableTxnMarkerResult(
                producer_id=4000,
                topics=[
                    WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(
                        name="events",
                        partitions=[
                            WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                                partition_index=5, error_code=47
                            )
                        ],
                    )
                ],
            )
        ]
    )
    assert response.encode(0) == (
        struct.pack(">iqi", 1, 4000, 1) + _string("events") + struct.pack(">iih", 1, 5, 47)
    )


def test_alter_replica_log_dirs_v0() -> None:
    wire = (
        struct.pack(">i", 1)  # dirs
        + _string("/data/2")
        + struct.pack(">i", 1)  # topics
        + _string("events")
        + struct.pack(">iii", 2, 1, 3)
    )
    request = AlterReplicaLogDirsRequest.decode(wire, 0)
    [log_dir] = request.dirs
    assert log_dir.path == "/data/2"
    assert [(t.name, t.partitions) for t in log_dir.topics] == [("events", [1, 3])]
    assert request.encode(0) == wire

    response = AlterReplicaLogDirsResponse(
        throttle_time_ms=0,
        results=[
            AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult(
                topic_name="events",
                partitions=[
                    AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult(
                        partition_index=1, error_code=57
                    )
                ],
            )
        ],
    )
    encoded = b"".join(bytes(p) for p in encode_response(api(ApiKey.ALTER_REPLICA_LOG_DIRS), 0, 7, response))
    assert encoded[8:] == struct.pack(">ii", 0, 1) + _string("events") + struct.pack(">iih", 1, 1, 57)
    assert decode_response(encoded[4:], api(ApiKey.ALTER_REPLICA_LOG_DIRS), 0)[1] == response


def test_samsas_own_client_frames_old_versions() -> None:
    body = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name="t",
                partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-2)],
            )
        ],
    )
    frame = encode_request(api(ApiKey.LIST_OFFSETS), 0, 3, "samsa", body)
    header, decoded = decode_request(frame[4:], api(ApiKey.LIST_OFFSETS), 0)
    assert header.client_id == "samsa"
    assert decoded == body
    assert decoded.topics[0].partitions[0].max_num_offsets == 1  # the schema's default


# -- Kafka 3.9's own classes --------------------------------------------------------------------------------


@pytest.mark.integration
def test_kafka_39_reads_and_writes_back_the_same_bytes() -> None:
    if shutil.which("java") is None or not (JARS / "kafka-clients.jar").exists():
        pytest.skip(f"needs java and {JARS}/kafka-clients.jar (installed by `make clientdeps`)")
    cases = []
    for name, version in OLD:
        spec = load_message(name)
        for seed in range(6):
            encoded = random_message(message_class(name), version, seed).encode(version)
            cases.append((name, version, seed, f"{spec.type} {spec.api_key} {version} {encoded.hex()}"))
    classpath = ":".join(str(p) for p in sorted(JARS.glob("*.jar")))  # records fields need slf4j
    result = subprocess.run(
        ["java", "-cp", classpath, str(ORACLE)],
        input="\n".join(c[3] for c in cases) + "\n",
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    answers = result.stdout.splitlines()
    assert len(answers) == len(cases), result.stderr
    failures = [
        f"{name} v{version} seed {seed}: {answer[:200]}"
        for (name, version, seed, line), answer in zip(cases, answers, strict=True)
        if answer != f"OK {line.split(' ')[3]}"
    ]
    assert not failures, "\n".join(failures[:10])
