"""``samsa dump-log`` on files written by Samsa's storage code in a temporary directory (no cluster): the
lines of kafka-dump-log.sh (Kafka 3.9's DumpLogSegments) for log segments, indexes, producer snapshots,
transaction indexes, the offsets and transaction log decoders, the problems it reports on stderr, and its
command line."""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from crc32c import crc32c

from coordinator import offsets_records, transaction_records
from coordinator.group_metadata import OffsetAndMetadata
from protocol import compression
from protocol import record_batch as rb
from protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from storage.config import LogConfig
from storage.log import Log
from storage.producer_state import AppendOrigin
from tests.storage.helpers import Clock, batch, marker
from tools import COMMANDS, dump_log
from tools.dump_log import Options, dump, parse_options
from tools.dump_log_parsers import (
    DumpError,
    OffsetsParser,
    TransactionLogParser,
    java_string_hash,
    json_string,
    topic_partition_hash,
    transaction_partitions_order,
)

T0 = 1_700_000_000_000
SEGMENT = "00000000000000000000"


def run(*argv: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    dump(parse_options(list(argv)), out, err)
    return out.getvalue(), err.getvalue()


def lines(*argv: str) -> list[str]:
    return run(*argv)[0].splitlines()


@pytest.fixture
def log_dir(tmp_path: Path) -> Iterator[Callable[..., Log]]:
    """Opens the partition directory ``t-0`` under tmp_path (index entry per batch by default)."""
    opened: list[Log] = []

    def make(props: dict | None = None, name: str = "t-0") -> Log:
        config = LogConfig.from_props({"index.interval.bytes": 1, **(props or {})})
        log = Log(str(tmp_path / name), config, time_ms=Clock(T0))
        opened.append(log)
        return log

    yield make
    for log in opened:
        if not log.closed:
            log.close()


def headers(path: Path) -> list[tuple[int, rb.BatchHeader]]:
    """(position, header) of every batch of a log file."""
    return list(rb.iter_headers(path.read_bytes()))


def write_batches(path: Path, *batches: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(batches))
    return path


# -- log segments --------------------------------------------------------------------------------------


def test_registered_as_samsa_dump_log() -> None:
    assert COMMANDS["dump-log"][0] == "tools.dump_log:main"


def test_a_segment_prints_kafkas_batch_and_record_lines(tmp_path: Path, log_dir: Callable[..., Log]) -> None:
    log = log_dir()
    records = [
        rb.Record(0, T0, b"k1", b"hello", [("h1", b"x"), ("h2", None)]),
        rb.Record(1, T0 + 5, None, None),
    ]
    log.append_as_leader(bytearray(rb.encode_batch(records, base_offset=0)), 0)
    log.append_as_leader(batch(2, producer_id=7, producer_epoch=3, base_sequence=10), 2)
    log.close()
    path = tmp_path / "t-0" / f"{SEGMENT}.log"
    (_, first), (second_at, second) = headers(path)
    out = lines("--files", str(path), "--print-data-log")
    assert out == [
        f"Dumping {path}",
        "Log starting offset: 0",
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        f"deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: {T0 + 5} size: {first.size} magic: 2 "
        f"compresscodec: none crc: {first.crc} isvalid: true",
        f"| offset: 0 CreateTime: {T0} keySize: 2 valueSize: 5 sequence: -1 headerKeys: [h1,h2] "
        "key: k1 payload: hello",
        f"| offset: 1 CreateTime: {T0 + 5} keySize: -1 valueSize: -1 sequence: -1 headerKeys: []",
        "baseOffset: 2 lastOffset: 3 count: 2 baseSequence: 10 lastSequence: 11 producerId: 7 "
        "producerEpoch: 3 partitionLeaderEpoch: 2 isTransactional: false isControl: false "
        f"deleteHorizonMs: OptionalLong.empty position: {second_at} CreateTime: {T0 + 1} "
        f"size: {second.size} magic: 2 compresscodec: none crc: {second.crc} isvalid: true",
        f"| offset: 2 CreateTime: {T0} keySize: -1 valueSize: 10 sequence: 10 headerKeys: [] "
        "payload: vvvvvvvvvv",
        f"| offset: 3 CreateTime: {T0 + 1} keySize: -1 valueSize: 10 sequence: 11 headerKeys: [] "
        "payload: vvvvvvvvvv",
    ]


def test_shallow_by_default_deep_iteration_without_payloads(
    tmp_path: Path, log_dir: Callable[..., Log]
) -> None:
    log = log_dir()
    log.append_as_leader(batch(3), 0)
    log.close()
    path = str(tmp_path / "t-0" / f"{SEGMENT}.log")
    shallow = lines("--files", path)
    assert len(shallow) == 3 and shallow[2].startswith("baseOffset: 0 lastOffset: 2 count: 3 ")
    deep = lines("--files", path, "--deep-iteration")
    assert deep[3:] == [
        f"| offset: {i} CreateTime: {T0 + i} keySize: -1 valueSize: 10 sequence: -1 headerKeys: []"
        for i in range(3)
    ]


def test_skip_record_metadata_keeps_kafkas_spacing(tmp_path: Path, log_dir: Callable[..., Log]) -> None:
    """Kafka's quirks: the payload's own leading space, no "|" without a key, an empty line for a record
    with neither key nor value."""
    log = log_dir()
    log.append_as_leader(batch([b"a", b"b", None], keys=[b"k", None, None]), 0)
    log.close()
    path = str(tmp_path / "t-0" / f"{SEGMENT}.log")
    assert lines("--files", path, "--print-data-log", "--skip-record-metadata")[3:] == [
        "| key: k payload: a",
        " payload: b",
        "",
    ]


def test_compressed_batches_are_decompressed(tmp_path: Path) -> None:
    records = [rb.Record(i, T0, None, b"x" * 50) for i in range(4)]
    path = write_batches(
        tmp_path / "c-0" / f"{SEGMENT}.log",
        rb.encode_batch(records, base_offset=0, compression=compression.ZSTD),
        rb.encode_batch(
            [rb.Record(4 + i, T0, None, b"y") for i in range(2)], base_offset=4, compression=compression.GZIP
        ),
    )
    out = lines("--files", str(path), "--print-data-log")
    assert " compresscodec: zstd " in out[2] and " compresscodec: gzip " in out[7]
    assert [line.rsplit(" ", 1)[1] for line in out if line.startswith("|")] == ["x" * 50] * 4 + ["y"] * 2


def test_transaction_markers_print_the_marker_not_a_payload(
    tmp_path: Path, log_dir: Callable[..., Log]
) -> None:
    log = log_dir()
    log.append_as_leader(batch(1, producer_id=9, producer_epoch=1, base_sequence=0, transactional=True), 0)
    log.append_as_leader(marker(9, 1, commit=True, coordinator_epoch=4), 0, origin=AppendOrigin.COORDINATOR)
    log.close()
    out = lines("--files", str(tmp_path / "t-0" / f"{SEGMENT}.log"), "--print-data-log")
    assert "isTransactional: true isControl: true" in out[4]
    assert out[5] == (
        f"| offset: 1 CreateTime: {T0} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 4"
    )


def test_log_append_time_and_delete_horizon(tmp_path: Path) -> None:
    horizon = rb.encode_batch(
        [rb.Record(0, T0, b"k", None)], base_offset=0, delete_horizon_ms=T0 + 86_400_000
    )
    append_time = bytearray(rb.encode_batch([rb.Record(1, T0, None, b"v")], base_offset=1))
    rb.set_log_append_time(append_time, 0, T0 + 7)
    path = write_batches(tmp_path / "t-0" / f"{SEGMENT}.log", horizon, bytes(append_time))
    out = lines("--files", str(path), "--deep-iteration")
    assert f"deleteHorizonMs: OptionalLong[{T0 + 86_400_000}] position: 0 CreateTime: {T0}" in out[2]
    assert f" LogAppendTime: {T0 + 7} " in out[4]
    assert out[5].startswith(f"| offset: 1 LogAppendTime: {T0 + 7} ")


def test_max_bytes_reads_only_whole_batches_within_it(tmp_path: Path, log_dir: Callable[..., Log]) -> None:
    log = log_dir()
    for _ in range(3):
        log.append_as_leader(batch(1), 0)
    log.close()
    path = tmp_path / "t-0" / f"{SEGMENT}.log"
    size = rb.read_header(path.read_bytes(), 0).size
    out, _ = run("--files", str(path), "--max-bytes", str(2 * size + 10))
    assert out.count("baseOffset:") == 2 and "invalid bytes" not in out


def test_a_partial_last_batch_is_reported_as_invalid_bytes(
    tmp_path: Path, log_dir: Callable[..., Log]
) -> None:
    log = log_dir()
    log.append_as_leader(batch(2), 0)
    log.close()
    full = (tmp_path / "t-0" / f"{SEGMENT}.log").read_bytes()
    path = write_batches(tmp_path / "u-0" / f"{SEGMENT}.log", full + full[:30])
    assert lines("--files", str(path))[-1] == f"Found 30 invalid bytes at the end of {SEGMENT}.log"


def test_a_bad_crc_prints_isvalid_false_and_still_the_records(tmp_path: Path) -> None:
    data = bytearray(rb.encode_batch([rb.Record(0, T0, None, b"abc")], base_offset=0))
    data[17] ^= 0xFF  # the stored CRC
    path = write_batches(tmp_path / "t-0" / f"{SEGMENT}.log", bytes(data))
    out = lines("--files", str(path), "--print-data-log")
    assert out[2].endswith("isvalid: false")
    assert out[3].endswith("payload: abc")


def test_a_corrupt_batch_length_stops_with_kafkas_message(tmp_path: Path) -> None:
    good = rb.encode_batch([rb.Record(0, T0, None, b"abc")], base_offset=0)
    bad = struct.pack(">qi", 1, 5) + bytes(20)
    path = write_batches(tmp_path / "t-0" / f"{SEGMENT}.log", good + bad)
    out = io.StringIO()
    with pytest.raises(DumpError, match=r"Found record size 5 smaller than minimum record overhead \(14\)"):
        dump(parse_options(["--files", str(path)]), out, io.StringIO())
    assert out.getvalue().count("baseOffset: 0 ") == 1  # what came before is printed


def test_gaps_in_offsets_are_listed_on_stderr(tmp_path: Path) -> None:
    """A compacted log: DumpLogSegments lists non-consecutive offsets, the latest pair first."""
    path = write_batches(
        tmp_path / "t-0" / f"{SEGMENT}.log",
        rb.encode_batch([rb.Record(0, T0, b"a", b"1"), rb.Record(3, T0, b"b", b"2")], base_offset=0),
        rb.encode_batch([rb.Record(7, T0, b"c", b"3")], base_offset=7),
    )
    _, err = run("--files", str(path), "--deep-iteration")
    assert err.splitlines() == [
        f"Non-consecutive offsets in {path}",
        "  3 is followed by 7",
        "  0 is followed by 3",
    ]


def test_legacy_magic_1_messages(tmp_path: Path) -> None:
    def message(offset: int, key: bytes | None, value: bytes) -> tuple[bytes, int]:
        body = struct.pack(">bbq", 1, 0, T0 + offset)
        body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
        body += struct.pack(">i", len(value)) + value
        crc = zlib.crc32(body)
        return struct.pack(">qiI", offset, len(body) + 4, crc) + body, crc

    first, crc0 = message(0, b"k", b"v0")
    second, crc1 = message(1, None, b"v1")
    path = write_batches(tmp_path / "old-0" / f"{SEGMENT}.log", first, second)
    out = lines("--files", str(path), "--print-data-log")
    assert out[2] == (
        f"offset: 0 position: 0 CreateTime: {T0} size: {len(first)} magic: 1 compresscodec: none "
        f"crc: {crc0} isvalid: true"
    )
    assert (
        out[3] == f"| offset: 0 CreateTime: {T0} keySize: 1 valueSize: 2 isValid: true crc: {crc0}}} "
        "key: k payload: v0"
    )
    assert (
        out[5] == f"| offset: 1 CreateTime: {T0 + 1} keySize: -1 valueSize: 2 isValid: true crc: {crc1}}} "
        "payload: v1"
    )


def legacy_message(offset: int, value: bytes, attributes: int = 0, timestamp: int = T0) -> tuple[bytes, int]:
    """A magic 1 message (log overhead included) and its CRC."""
    body = struct.pack(">bbqi", 1, attributes, timestamp, -1) + struct.pack(">i", len(value)) + value
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body, crc


def test_legacy_compressed_wrappers_are_unpacked_with_absolute_offsets(tmp_path: Path) -> None:
    inner = b"".join(legacy_message(i, f"in-{i}".encode(), timestamp=T0 + i)[0] for i in range(3))
    wrapper, crc = legacy_message(
        11, compression.compress(compression.GZIP, inner), attributes=1, timestamp=T0 + 2
    )
    path = write_batches(tmp_path / "old-0" / "00000000000000000009.log", wrapper)
    out = lines("--files", str(path), "--print-data-log")
    assert out[1:3] == [
        "Log starting offset: 9",
        f"offset: 11 position: 0 CreateTime: {T0 + 2} size: {len(wrapper)} magic: 1 compresscodec: gzip "
        f"crc: {crc} isvalid: true",
    ]
    assert [line.split(" isValid")[0] + line.split("}", 1)[1] for line in out[3:]] == [
        f"| offset: {9 + i} CreateTime: {T0 + i} keySize: -1 valueSize: 4 payload: in-{i}" for i in range(3)
    ]


# -- decoders ------------------------------------------------------------------------------------------


def test_integer_and_long_decoders_and_the_deprecated_names(tmp_path: Path) -> None:
    path = write_batches(
        tmp_path / "t-0" / f"{SEGMENT}.log",
        rb.encode_batch([rb.Record(0, T0, struct.pack(">i", -7), struct.pack(">q", 2**40))], base_offset=0),
    )
    out = lines(
        "--files",
        str(path),
        "--key-decoder-class",
        "kafka.serializer.IntegerDecoder",
        "--value-decoder-class",
        "org.apache.kafka.tools.api.LongDecoder",
    )
    assert out[1] == (
        "kafka.serializer.IntegerDecoder is deprecated. Please use org.apache.kafka.tools.api.IntegerDecoder "
        "instead"
    )
    assert out[2] == "Log starting offset: 0"
    assert out[4].endswith(f"key: -7 payload: {2**40}")


def test_an_unknown_decoder_class_is_refused() -> None:
    with pytest.raises(dump_log.UsageError, match=r"ClassNotFoundException: com\.example\.MyDecoder"):
        parse_options(["--files", "x.log", "--value-decoder-class", "com.example.MyDecoder"])


def test_offsets_decoder_prints_kafkas_json(tmp_path: Path) -> None:
    subscription = b"\x00\x01" + ConsumerProtocolSubscription(
        topics=["t"],
        user_data=None,
        owned_partitions=[ConsumerProtocolSubscription.TopicPartition(topic="t", partitions=[0, 1])],
    ).encode(1)
    assignment = b"\x00\x00" + ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic="t", partitions=[0])],
        user_data=b"\x01\x02",
    ).encode(0)
    group = offsets_records.GroupMetadataValue(
        "consumer",
        3,
        "range",
        "m-1",
        T0,
        [
            offsets_records.MemberMetadataValue(
                "m-1", None, "c", "/127.0.0.1", 30000, 10000, subscription, assignment
            )
        ],
    )
    records = [
        rb.Record(
            0,
            T0,
            offsets_records.offset_commit_key("g", "t", 0),
            offsets_records.offset_commit_value(OffsetAndMetadata(12, 3, 'a"b', T0)),
        ),
        rb.Record(
            1, T0, offsets_records.group_metadata_key("g"), offsets_records.group_metadata_value(group)
        ),
        rb.Record(2, T0, offsets_records.offset_commit_key("g", "t", 1), None),
        rb.Record(3, T0, struct.pack(">h", 12) + b"zz", b"\x00\x00"),
    ]
    path = write_batches(
        tmp_path / "__consumer_offsets-0" / f"{SEGMENT}.log", rb.encode_batch(records, base_offset=0)
    )
    payloads = [
        line.split(" headerKeys: [] ", 1)[1] for line in lines("--files", str(path), "--offsets-decoder")[3:]
    ]
    assert payloads == [
        'key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} '
        'payload: {"version":"3","data":{"offset":12,"leaderEpoch":3,"metadata":"a\\"b","commitTimestamp":'
        f"{T0}}}}}",
        'key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":"consumer",'
        f'"generation":3,"protocol":"range","leader":"m-1","currentStateTimestamp":{T0},"members":[{{'
        '"memberId":"m-1","groupInstanceId":null,"clientId":"c","clientHost":"/127.0.0.1",'
        '"rebalanceTimeout":30000,"sessionTimeout":10000,"subscription":{"topics":["t"],"userData":null,'
        '"ownedPartitions":[{"topic":"t","partitions":[0,1]}]},"assignment":{"assignedPartitions":'
        '[{"topic":"t","partitions":[0]}],"userData":"AQI="}}]}}',
        'key: {"type":"1","data":{"group":"g","topic":"t","partition":1}} payload: <DELETE>',
        "key: Unknown record type 12 at offset 3, skipping.",
    ]


def test_offsets_decoder_versions_and_errors() -> None:
    parser = OffsetsParser()
    key = offsets_records.offset_commit_key("g", "t", 0)
    expiring = offsets_records.offset_commit_value(OffsetAndMetadata(5, -1, "", T0, T0 + 1))
    assert parser.parse(0, key, expiring)[1] == (
        f'{{"version":"1","data":{{"offset":5,"metadata":"","commitTimestamp":{T0},'
        f'"expireTimestamp":{T0 + 1}}}}}'
    )
    assert parser.parse(4, key, b"\x00\x07") == (
        "Error at offset 4, skipping. Could not read record with version 7 from value's buffer due to: "
        "Can't read version 7 of OffsetCommitValue.",
        None,
    )
    assert parser.parse(4, b"\x00", None) == (
        "Error at offset 4, skipping. Could not read version from key's buffer.",
        None,
    )
    with pytest.raises(DumpError, match="message had a missing key"):
        parser.parse(9, None, b"x")


def test_non_consumer_groups_keep_their_member_bytes_in_base64() -> None:
    group = offsets_records.GroupMetadataValue(
        "connect",
        1,
        "p",
        "m",
        T0,
        [offsets_records.MemberMetadataValue("m", "i", "c", "h", 1, 2, b"\x01", b"")],
    )
    payload = OffsetsParser().parse(
        0, offsets_records.group_metadata_key("g"), offsets_records.group_metadata_value(group)
    )[1]
    assert payload is not None and '"groupInstanceId":"i"' in payload
    assert payload.endswith('"subscription":"AQ==","assignment":""}]}}')


def test_transaction_log_decoder(tmp_path: Path) -> None:
    value = transaction_records.TransactionLogValue(
        1000, 2, 60000, 2, [("t", [0, 1, 2]), ("u", [5])], T0 + 1, T0
    )
    records = [
        rb.Record(
            0,
            T0,
            transaction_records.transaction_log_key("tx"),
            transaction_records.transaction_log_value(value),
        ),
        rb.Record(1, T0, transaction_records.transaction_log_key("tx"), None),
        rb.Record(2, T0, struct.pack(">h", 3) + b"zz", b"\x00\x00"),
    ]
    path = write_batches(
        tmp_path / "__transaction_state-0" / f"{SEGMENT}.log", rb.encode_batch(records, base_offset=0)
    )
    payloads = [
        line.split(" headerKeys: [] ", 1)[1]
        for line in lines("--files", str(path), "--transaction-log-decoder")[3:]
    ]
    assert payloads == [
        "key: transaction_metadata::transactionalId=tx payload: producerId:1000,producerEpoch:2,"
        "state=PrepareCommit,partitions=[u-5,t-2,t-1,t-0],"
        f"txnLastUpdateTimestamp={T0 + 1},txnTimeoutMs=60000",
        "key: transaction_metadata::transactionalId=tx payload: <DELETE>",
        "key: unknown::version=3",
    ]
    empty = transaction_records.TransactionLogValue(1, 0, 100, 0, [("t", [0])], T0, -1)
    text = TransactionLogParser().parse(
        0, transaction_records.transaction_log_key("x"), transaction_records.transaction_log_value(empty)
    )[1]
    assert text is not None and "state=Empty,partitions=[]," in text


def test_transaction_partitions_come_in_scala_hash_set_order() -> None:
    """Kafka prints a transaction's partitions from a Scala mutable.HashSet of TopicPartitions."""
    assert java_string_hash("hello") == 99162322 and java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert topic_partition_hash("t", 0) == 31 * 31 + 116
    assert transaction_partitions_order([("t", [0, 1, 2]), ("u", [5])]) == ["u-5", "t-2", "t-1", "t-0"]
    # 16 partitions grow the table to 32 slots: the buckets then follow the hash's low five bits.
    order = transaction_partitions_order([("foo", list(range(16)))])
    hashes = [topic_partition_hash("foo", int(p.split("-")[1])) for p in order]
    buckets = [(h ^ (h >> 16)) & 31 for h in hashes]
    assert buckets == sorted(buckets) and len(order) == 16


def test_json_strings_are_escaped_as_jackson_does() -> None:
    assert json_string('a"b\\c\n\x01é/') == '"a\\"b\\\\c\\n\\u0001é/"'


# -- indexes -------------------------------------------------------------------------------------------


def test_offset_and_time_index_entries(tmp_path: Path, log_dir: Callable[..., Log]) -> None:
    log = log_dir()
    for i in range(3):
        log.append_as_leader(batch(2, timestamp=T0 + 10 * i), 0)
    log.close()
    base = tmp_path / "t-0" / SEGMENT
    out, err = run("--files", f"{base}.index,{base}.timeindex")
    sizes = rb.read_header((tmp_path / "t-0" / f"{SEGMENT}.log").read_bytes(), 0).size
    assert out.splitlines() == [
        f"Dumping {base}.index",
        f"offset: 3 position: {sizes}",
        f"offset: 5 position: {2 * sizes}",
        f"Dumping {base}.timeindex",
        f"timestamp: {T0 + 11} offset: 3",
        f"timestamp: {T0 + 21} offset: 5",
    ]
    assert err == ""
    assert run("--files", f"{base}.index,{base}.timeindex", "--verify-index-only") == (
        f"Dumping {base}.index\nDumping {base}.timeindex\n",
        "",
    )
    assert lines("--files", f"{base}.index,{base}.timeindex", "--index-sanity-check") == [
        f"Dumping {base}.index",
        f"{base}.index passed sanity check.",
        f"Dumping {base}.timeindex",
        f"{base}.timeindex passed sanity check.",
    ]


def test_index_entries_that_miss_the_log_are_listed_on_stderr(
    tmp_path: Path, log_dir: Callable[..., Log]
) -> None:
    log = log_dir()
    for i in range(3):
        log.append_as_leader(batch(2, timestamp=T0 + 10 * i), 0)
    log.close()
    base = tmp_path / "t-0" / SEGMENT
    size = rb.read_header((tmp_path / "t-0" / f"{SEGMENT}.log").read_bytes(), 0).size
    # The offset index says offset 4 is at the second batch (which ends at 3), then offset 6 at the third.
    Path(f"{base}.index").write_bytes(struct.pack(">iiii", 4, size, 6, 2 * size))
    # The time index claims a timestamp the batch does not have, then one going backwards.
    Path(f"{base}.timeindex").write_bytes(struct.pack(">qiqi", T0 + 12, 3, T0 + 5, 5))
    out, err = run("--files", f"{base}.index,{base}.timeindex", "--verify-index-only")
    assert out == f"Dumping {base}.index\nDumping {base}.timeindex\n"
    assert err.splitlines() == [
        f"Mismatches in :{base}.index",
        "  Index offset: 6, log offset: 5",
        "  Index offset: 4, log offset: 3",
        f"Found timestamp mismatch in :{base}.timeindex",
        f"  Index timestamp: {T0 + 12}, log timestamp: {T0 + 11}",
        f"  Index timestamp: {T0 + 5}, log timestamp: {T0 + 21}",
        f"Found out of order timestamp in :{base}.timeindex",
        f"  Index timestamp: {T0 + 5}, Previously indexed timestamp: {T0 + 12}",
    ]


def test_a_preallocated_index_stops_at_its_zero_slots(tmp_path: Path, log_dir: Callable[..., Log]) -> None:
    log = log_dir()
    for _ in range(2):
        log.append_as_leader(batch(1), 0)
    log.close()
    base = tmp_path / "t-0" / SEGMENT
    index = Path(f"{base}.index")
    index.write_bytes(index.read_bytes() + bytes(8 * 100))  # as a crashed broker leaves it
    assert lines("--files", str(index)) == [
        f"Dumping {index}",
        "offset: 1 position: "
        + str(rb.read_header((tmp_path / "t-0" / f"{SEGMENT}.log").read_bytes(), 0).size),
    ]
    Path(f"{base}.timeindex").write_bytes(b"")
    empty = Path(f"{base}.index")
    empty.write_bytes(b"")
    assert lines("--files", str(empty)) == [f"Dumping {empty}", f"{empty} is empty."]


def test_index_sanity_check_failures_stop_the_dump(tmp_path: Path, log_dir: Callable[..., Log]) -> None:
    log = log_dir()
    log.append_as_leader(batch(1), 0)
    log.close()
    base = tmp_path / "t-0" / SEGMENT
    Path(f"{base}.index").write_bytes(struct.pack(">ii", 0, 0) + b"\x00\x00\x00")
    with pytest.raises(DumpError, match=r"found 11 bytes which is neither positive nor a multiple of 8"):
        run("--files", f"{base}.index", "--index-sanity-check")
    Path(f"{base}.timeindex").write_bytes(struct.pack(">qiqi", T0 + 5, 0, T0, 0))
    with pytest.raises(DumpError, match=r"last timestamp is 1700000000000 which is less than the first"):
        run("--files", f"{base}.timeindex", "--index-sanity-check")


# -- snapshots, transaction indexes, leader epochs, other files -------------------------------------------


def test_producer_snapshot_and_transaction_index(tmp_path: Path, log_dir: Callable[..., Log]) -> None:
    log = log_dir()
    log.append_as_leader(batch(3, producer_id=7, producer_epoch=0, base_sequence=0), 0)
    log.append_as_leader(batch(2, producer_id=9, producer_epoch=1, base_sequence=0, transactional=True), 0)
    log.append_as_leader(marker(9, 1, commit=False, coordinator_epoch=3), 0, origin=AppendOrigin.COORDINATOR)
    log.append_as_leader(batch(1, producer_id=11, producer_epoch=0, base_sequence=0, transactional=True), 0)
    log.producer_state.take_snapshot()
    log.close()
    directory = tmp_path / "t-0"
    snapshot = sorted(directory.glob("*.snapshot"))[-1]
    out = lines("--files", f"{snapshot},{directory / SEGMENT}.txnindex")
    assert out == [
        f"Dumping {snapshot}",
        "producerId: 7 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        f"lastTimestamp: {T0 + 2} firstSequence: 0 lastSequence: 2 lastOffset: 2 offsetDelta: 2 "
        f"timestamp: {T0 + 2}",
        "producerId: 9 producerEpoch: 1 coordinatorEpoch: 3 currentTxnFirstOffset: OptionalLong.empty "
        f"lastTimestamp: {T0} firstSequence: 0 lastSequence: 1 lastOffset: 4 offsetDelta: 1 timestamp: {T0}",
        "producerId: 11 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong[6] "
        f"lastTimestamp: {T0} firstSequence: 0 lastSequence: 0 lastOffset: 6 offsetDelta: 0 timestamp: {T0}",
        f"Dumping {directory / SEGMENT}.txnindex",
        "version: 0 producerId: 9 firstOffset: 3 lastOffset: 5 lastStableOffset: 6",
    ]


def test_a_corrupt_snapshot_is_reported_and_the_dump_goes_on(tmp_path: Path) -> None:
    body = struct.pack(">i", 0)
    snapshot = tmp_path / "00000000000000000005.snapshot"
    snapshot.write_bytes(struct.pack(">hI", 1, crc32c(body) ^ 1) + body)
    old = tmp_path / "00000000000000000006.snapshot"
    old.write_bytes(struct.pack(">hI", 2, crc32c(body)) + body)
    out, err = run("--files", f"{snapshot},{old},{tmp_path / 'partition.metadata'}")
    assert out.splitlines() == [
        f"Dumping {snapshot}",
        f"Dumping {old}",
        f"Dumping {tmp_path / 'partition.metadata'}",
    ]
    assert err.splitlines() == [
        f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc32c(body) ^ 1}. "
        f"Computed crc: {crc32c(body)}",
        "Snapshot contained an unknown file version 2",
        f"Ignoring unknown file {tmp_path / 'partition.metadata'}",
    ]


def test_leader_epoch_checkpoint_is_dumped(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n2\n0 0\n3 120\n")
    assert lines("--files", str(path)) == [
        f"Dumping {path}",
        "epoch: 0 startOffset: 0",
        "epoch: 3 startOffset: 120",
    ]


def test_paths_are_shown_as_given(
    tmp_path: Path, log_dir: Callable[..., Log], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = log_dir()
    log.close()
    monkeypatch.chdir(tmp_path)
    assert lines("--files", f"t-0//{SEGMENT}.log") == [f"Dumping t-0/{SEGMENT}.log", "Log starting offset: 0"]


# -- the command line ----------------------------------------------------------------------------------


def test_no_arguments_print_the_help_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert dump_log.main([]) == 1
    assert capsys.readouterr().err.startswith(dump_log.DESCRIPTION)


def test_files_are_required(capsys: pytest.CaptureFixture[str]) -> None:
    assert dump_log.main(["--print-data-log"]) == 1
    assert capsys.readouterr().err.startswith('Missing required argument "[files]"\n')


def test_decoder_options_imply_print_data_log_and_deep_iteration() -> None:
    for flag in (
        "--offsets-decoder",
        "--transaction-log-decoder",
        "--value-decoder-class",
        "--key-decoder-class",
    ):
        options = parse_options(["--files", "a.log", flag])
        assert options.print_data_log and options.deep_iteration, flag
    assert parse_options(["--files", "a.log,b.index,"]).files == ["a.log", "b.index"]
    plain = parse_options(["--files", "a.log"])
    assert plain == Options(files=["a.log"])


def test_kraft_only_decoders_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert dump_log.main(["--files", "a.log", "--cluster-metadata-decoder"]) == 1
    assert "has no such log" in capsys.readouterr().err


def test_a_missing_file_exits_1_with_the_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / f"{SEGMENT}.log"
    assert dump_log.main(["--files", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == f"Dumping {path}\nLog starting offset: 0\n"
    assert captured.err == f"java.nio.file.NoSuchFileException: {path}\n"


def test_group_metadata_json_is_kafkas_own_test_expectation() -> None:
    """DumpLogSegmentsTest.testOffsetsMessageParser's expected strings (Kafka writes that value as v4, its
    flexible version; Samsa writes and reads v3, whose JSON has the same fields)."""
    subscription = b"\x00\x03" + ConsumerProtocolSubscription(
        topics=["foo"],
        user_data=None,
        owned_partitions=[ConsumerProtocolSubscription.TopicPartition(topic="foo", partitions=[0])],
        generation_id=0,
        rack_id="rack",
    ).encode(3)
    assignment = b"\x00\x03" + ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic="foo", partitions=[0])],
        user_data=None,
    ).encode(3)

    def group(sub: bytes, assign: bytes) -> bytes:
        member = offsets_records.MemberMetadataValue(
            "member", "instance", "client", "host", 1000, 100, sub, assign
        )
        return offsets_records.group_metadata_value(
            offsets_records.GroupMetadataValue("consumer", 10, "range", "member", -1, [member])
        )

    head = (
        '{"version":"3","data":{"protocolType":"consumer","generation":10,"protocol":"range",'
        '"leader":"member","currentStateTimestamp":-1,"members":[{"memberId":"member",'
        '"groupInstanceId":"instance","clientId":"client","clientHost":"host",'
        '"rebalanceTimeout":1000,"sessionTimeout":100,'
    )
    key = offsets_records.group_metadata_key("group")
    assert OffsetsParser().parse(0, key, group(subscription, assignment)) == (
        '{"type":"2","data":{"group":"group"}}',
        head + '"subscription":{"topics":["foo"],"userData":null,"ownedPartitions":[{"topic":"foo",'
        '"partitions":[0]}],"generationId":0,"rackId":"rack"},"assignment":{"assignedPartitions":'
        '[{"topic":"foo","partitions":[0]}],"userData":null}}]}}',
    )
    # Malformed embedded protocols stay bytes.
    assert OffsetsParser().parse(0, key, group(b"Subscription", b"Assignment"))[1] == (
        head + '"subscription":"U3Vic2NyaXB0aW9u","assignment":"QXNzaWdubWVudA=="}]}}'
    )
