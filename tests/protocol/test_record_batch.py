"""RecordBatch v2: byte-for-byte against kafka-python, aiokafka and kio, plus property tests."""

import datetime
import io
import struct

import pytest
from aiokafka.record.control_record import ABORT_MARKER, COMMIT_MARKER
from aiokafka.record.control_record import ControlRecord as AioControlRecord
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import ControlRecord as KafkaControlRecord
from kafka.record.default_records import DefaultRecordBatch as KafkaBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaBuilder
from kafka.record.util import encode_varint as kafka_encode_varint
from kio.records.readers import read_batch as kio_read_batch
from kio.records.schema import NewRecordBatch as KioNewBatch
from kio.records.schema import Record as KioRecord
from kio.records.schema import RecordHeader as KioHeader
from kio.records.writers import write_new_batch as kio_write_new_batch
from kio.serial.readers import read_signed_varint as kio_read_varint
from kio.serial.readers import read_signed_varlong as kio_read_varlong
from kio.serial.writers import write_signed_varint as kio_write_varint
from kio.serial.writers import write_signed_varlong as kio_write_varlong

from protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, UnsupportedCompressionTypeError
from protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    Record,
    check_records,
    crc_ok,
    decode_records,
    encode_batch,
    encode_control_batch,
    iter_headers,
    read_header,
    read_varint,
    read_varlong,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    write_varint,
    write_varlong,
)

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- strategies ---------------------------------------------------------------------------------------

nullable_bytes = st.none() | st.binary(max_size=40)
headers = st.lists(st.tuples(st.text(max_size=12), nullable_bytes), max_size=3)
timestamps = st.integers(-1, 2**45)


@st.composite
def record_lists(draw: st.DrawFn, min_size: int = 0, max_delta: int = INT32_MAX) -> tuple[int, list[Record]]:
    """(base_offset, records with strictly increasing absolute offsets, gaps included)."""
    base_offset = draw(st.integers(0, 2**62))
    deltas = sorted(draw(st.sets(st.integers(0, max_delta), min_size=min_size, max_size=12)))
    records = [
        Record(
            base_offset + delta, draw(timestamps), draw(nullable_bytes), draw(nullable_bytes), draw(headers)
        )
        for delta in deltas
    ]
    return base_offset, records


producer_states = st.one_of(
    st.just((-1, -1, -1)),
    st.tuples(st.integers(0, INT64_MAX), st.integers(0, 2**15 - 1), st.integers(0, INT32_MAX)),
)


def sample_records(base_offset: int = 0, n: int = 5) -> list[Record]:
    return [
        Record(
            base_offset + i,
            1_700_000_000_000 + 7 * i,
            None if i == 1 else b"key-%d" % i,
            None if i == 2 else b"value-%d " % i * 20,
            [("trace", b"%d" % i), ("empty", None)] if i % 2 else [],
        )
        for i in range(n)
    ]


def recompute_crc(buf: bytearray, pos: int = 0) -> None:
    (length,) = struct.unpack_from(">i", buf, pos + 8)
    struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : pos + 12 + length])))


# -- zig-zag varints ----------------------------------------------------------------------------------


def _encoded(writer: object, value: int) -> bytes:
    out = bytearray()
    writer(out, value)  # type: ignore[operator]
    return bytes(out)


@given(st.integers(INT32_MIN, INT32_MAX) | st.sampled_from([INT32_MIN, INT32_MAX, 0, -1, 63, -64, 64]))
def test_varint_round_trip(value: int) -> None:
    encoded = _encoded(write_varint, value)
    assert len(encoded) <= 5
    assert read_varint(encoded + b"\xff", 0) == (value, len(encoded))
    kio_out = io.BytesIO()
    kio_write_varint(kio_out, value)
    assert encoded == kio_out.getvalue()
    assert kio_read_varint(encoded, 0) == (value, len(encoded))
    kafka_out = bytearray()
    kafka_encode_varint(value, kafka_out.append)
    assert encoded == bytes(kafka_out)


@given(
    st.integers(INT64_MIN, INT64_MAX) | st.sampled_from([INT64_MIN, INT64_MAX, INT32_MIN - 1, INT32_MAX + 1])
)
def test_varlong_round_trip(value: int) -> None:
    encoded = _encoded(write_varlong, value)
    assert len(encoded) <= 10
    assert read_varlong(b"\x00" + encoded, 1) == (value, 1 + len(encoded))
    kio_out = io.BytesIO()
    kio_write_varlong(kio_out, value)
    assert encoded == kio_out.getvalue()
    assert kio_read_varlong(encoded, 0) == (value, len(encoded))


def test_varint_bounds() -> None:
    assert len(_encoded(write_varint, INT32_MIN)) == len(_encoded(write_varint, INT32_MAX)) == 5
    assert len(_encoded(write_varlong, INT64_MIN)) == len(_encoded(write_varlong, INT64_MAX)) == 10
    assert _encoded(write_varint, -1) == b"\x01"
    assert _encoded(write_varint, 1) == b"\x02"
    for bad in (INT32_MIN - 1, INT32_MAX + 1):
        with pytest.raises(ValueError):
            write_varint(bytearray(), bad)
    for bad in (INT64_MIN - 1, INT64_MAX + 1):
        with pytest.raises(ValueError):
            write_varlong(bytearray(), bad)


def test_overlong_varints_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        read_varint(b"\xff" * 5 + b"\x01", 0)
    with pytest.raises(CorruptRecordError):
        read_varlong(b"\xff" * 10 + b"\x01", 0)


# -- header -------------------------------------------------------------------------------------------


def test_constants() -> None:
    assert LOG_OVERHEAD == 12
    assert HEADER_SIZE == 61
    assert len(encode_batch([], base_offset=0)) == HEADER_SIZE


def test_header_fields() -> None:
    records = sample_records(1000)
    batch = encode_batch(
        records,
        base_offset=1000,
        compression=GZIP,
        producer_id=42,
        producer_epoch=3,
        base_sequence=10,
        is_transactional=True,
        partition_leader_epoch=7,
    )
    header = read_header(batch)
    assert isinstance(header, BatchHeader)
    assert header.base_offset == 1000
    assert header.size == len(batch) == header.batch_length + 12
    assert header.partition_leader_epoch == 7
    assert header.magic == 2
    assert header.compression == GZIP
    assert header.timestamp_type == 0
    assert header.is_transactional and not header.is_control and not header.has_delete_horizon
    assert header.last_offset_delta == 4 and header.last_offset == 1004
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 10)
    assert header.last_sequence == 14
    assert header.records_count == 5
    assert crc_ok(batch, 0, header)


@pytest.mark.parametrize(
    ("base_sequence", "last_offset_delta", "expected"),
    [
        (-1, 5, -1),
        (0, 0, 0),
        (10, 4, 14),
        (INT32_MAX, 0, INT32_MAX),
        (INT32_MAX, 1, 0),
        (INT32_MAX - 1, 3, 1),
    ],
)
def test_last_sequence_wraps_like_kafka(base_sequence: int, last_offset_delta: int, expected: int) -> None:
    batch = encode_batch(
        [],
        base_offset=0,
        producer_id=1,
        producer_epoch=0,
        base_sequence=base_sequence,
        last_offset_delta=last_offset_delta,
    )
    assert read_header(batch).last_sequence == expected


def test_read_header_rejects() -> None:
    batch = bytearray(encode_batch(sample_records(), base_offset=0))
    with pytest.raises(CorruptRecordError):
        read_header(batch[:60])
    with pytest.raises(CorruptRecordError):
        read_header(batch, 1)
    for magic in (0, 1, 3):
        bad = bytearray(batch)
        bad[16] = magic
        with pytest.raises(CorruptRecordError):
            read_header(bad)
    bad = bytearray(batch)
    struct.pack_into(">i", bad, 8, 48)
    with pytest.raises(CorruptRecordError):
        read_header(bad)


def test_read_header_does_not_need_the_whole_batch() -> None:
    batch = encode_batch(sample_records(), base_offset=0)
    assert read_header(memoryview(batch)[:HEADER_SIZE]) == read_header(batch)


def test_iter_headers() -> None:
    batches = [encode_batch(sample_records(i * 10, n=i + 1), base_offset=i * 10) for i in range(3)]
    buf = b"".join(batches)
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    found = list(iter_headers(buf))
    assert [pos for pos, _ in found] == positions
    assert [h.base_offset for _, h in found] == [0, 10, 20]
    assert [h.records_count for _, h in found] == [1, 2, 3]
    # An incomplete trailing batch (as at the end of a fetch response) ends the iteration silently.
    for cut in (1, 11, 12, 60, 61, len(batches[2]) - 1):
        assert [pos for pos, _ in iter_headers(buf[:-cut])] == positions[:2]
    # pos/end bound the scan, and memoryview/bytearray inputs work alike.
    assert [pos for pos, _ in iter_headers(memoryview(buf), positions[1])] == positions[1:]
    assert [pos for pos, _ in iter_headers(bytearray(buf), 0, positions[2])] == positions[:2]
    assert list(iter_headers(b"")) == []


def test_iter_headers_rejects_bad_length_and_magic() -> None:
    batch = bytearray(encode_batch(sample_records(), base_offset=0))
    bad = bytearray(batch)
    struct.pack_into(">i", bad, 8, -1)
    with pytest.raises(CorruptRecordError):
        list(iter_headers(bad))
    bad = bytearray(batch)
    bad[16] = 1
    with pytest.raises(CorruptRecordError):
        list(iter_headers(bad))


# -- interoperability: kafka-python, aiokafka, kio ----------------------------------------------------


def _kafka_python_batch(records: list[Record], producer: tuple[int, int, int], transactional: bool) -> bytes:
    builder = KafkaBuilder(2, 0, transactional, *producer, batch_size=1 << 30)
    for r in records:
        builder.append(r.offset, r.timestamp, r.key, r.value, r.headers)
    return bytes(builder.build())


@PROPERTY
@given(data=record_lists(min_size=1), producer=producer_states, transactional=st.booleans())
def test_same_bytes_as_kafka_python(
    data: tuple[int, list[Record]], producer: tuple, transactional: bool
) -> None:
    _, records = data
    # kafka-python's builder writes base offset 0 and leader epoch 0, as a producer does.
    records = [
        Record(r.offset - records[0].offset, max(r.timestamp, 0), r.key, r.value, r.headers) for r in records
    ]
    transactional = transactional and producer[0] >= 0
    ours = encode_batch(
        records,
        base_offset=0,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        is_transactional=transactional,
        partition_leader_epoch=0,
    )
    assert ours == _kafka_python_batch(records, producer, transactional)


def _check_foreign_batch(batch: object, header: BatchHeader, records: list[Record]) -> None:
    assert batch.base_offset == header.base_offset
    assert batch.compression_type == header.compression
    assert batch.timestamp_type == header.timestamp_type
    assert batch.max_timestamp == header.max_timestamp
    assert batch.producer_id == header.producer_id
    assert batch.base_sequence == header.base_sequence
    assert batch.is_transactional == header.is_transactional
    assert batch.is_control_batch == header.is_control
    assert batch.validate_crc()
    theirs = [Record(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert theirs == records


@pytest.mark.parametrize("codec", CODECS)
def test_other_clients_read_ours(codec: int) -> None:
    records = sample_records(500)
    batch = encode_batch(
        records, base_offset=500, compression=codec, producer_id=9, producer_epoch=1, base_sequence=0
    )
    header = read_header(batch)
    _check_foreign_batch(AioBatch(batch), header, records)
    if codec in (NONE, GZIP):  # kafka-python's other codecs need libraries this venv lacks
        _check_foreign_batch(KafkaBatch(batch), header, records)


@pytest.mark.parametrize("codec", CODECS)
def test_we_read_other_clients(codec: int) -> None:
    records = sample_records(0, n=20)  # compressible, so the builders do compress
    builders = [AioBuilder(2, codec, 0, 7, 2, 100, 1 << 30)]
    if codec in (NONE, GZIP):
        builders.append(KafkaBuilder(2, codec, False, 7, 2, 100, batch_size=1 << 30))
    for builder in builders:
        for r in records:
            builder.append(r.offset, r.timestamp, r.key, r.value, r.headers)
        batch = bytes(builder.build())
        header = read_header(batch)
        assert header.compression == codec
        assert crc_ok(batch, 0, header)
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 100)
        assert header.last_sequence == 119
        assert decode_records(batch) == records


def _kio_records(records: list[Record]) -> tuple[KioRecord, ...]:
    return tuple(
        KioRecord(
            attributes=0,
            timestamp=datetime.datetime.fromtimestamp(r.timestamp / 1000, datetime.UTC),
            offset=r.offset,
            key=r.key,
            value=r.value,
            headers=tuple(KioHeader(key=k.encode(), value=v) for k, v in r.headers),
        )
        for r in records
    )


@PROPERTY
@given(data=record_lists(min_size=1), producer=producer_states)
def test_same_bytes_as_kio(data: tuple[int, list[Record]], producer: tuple) -> None:
    _, records = data
    # kio carries timestamps as datetimes (its reader drops sub-second precision): whole seconds only.
    records = [
        Record(r.offset, max(r.timestamp, 0) // 1000 * 1000, r.key, r.value, r.headers) for r in records
    ]
    out = io.BytesIO()
    kio_write_new_batch(
        out,
        KioNewBatch(
            producer_id=producer[0],
            producer_epoch=producer[1],
            base_sequence=producer[2],
            records=_kio_records(records),
            attributes=0,
        ),
    )
    ours = encode_batch(
        records,
        base_offset=records[0].offset,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        partition_leader_epoch=0,
    )
    assert ours == out.getvalue()

    parsed, size = kio_read_batch(ours, 0)
    assert size == len(ours)
    assert parsed.base_offset == records[0].offset
    assert parsed.max_timestamp == max(r.timestamp for r in records)
    assert [(r.offset, int(r.timestamp.timestamp() * 1000), r.key, r.value) for r in parsed.records] == [
        (r.offset, r.timestamp, r.key, r.value) for r in records
    ]


def test_non_utf8_header_keys_survive_a_round_trip() -> None:
    out = io.BytesIO()
    record = KioRecord(
        attributes=0,
        timestamp=datetime.datetime.fromtimestamp(1000, datetime.UTC),
        offset=0,
        key=None,
        value=b"v",
        headers=(KioHeader(key=b"\xff\xfe-raw", value=b"x"),),
    )
    kio_write_new_batch(
        out, KioNewBatch(producer_id=-1, producer_epoch=-1, base_sequence=-1, records=(record,), attributes=0)
    )
    batch = out.getvalue()
    (decoded,) = decode_records(batch)
    assert encode_batch([decoded], base_offset=0, partition_leader_epoch=0) == batch


# -- property tests: identity, patches, corruption ----------------------------------------------------


@PROPERTY
@given(
    data=record_lists(),
    codec=st.sampled_from(CODECS),
    producer=producer_states,
    flags=st.tuples(st.booleans(), st.booleans()),
    epoch=st.integers(-1, INT32_MAX),
)
def test_encode_decode_identity(
    data: tuple[int, list[Record]], codec: int, producer: tuple, flags: tuple, epoch: int
) -> None:
    base_offset, records = data
    batch = encode_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        is_transactional=flags[0],
        is_control=flags[1],
        partition_leader_epoch=epoch,
    )
    header = read_header(batch)
    assert header.size == len(batch)
    assert crc_ok(batch, 0, header)
    assert header.compression == codec
    assert (header.is_transactional, header.is_control) == flags
    assert header.partition_leader_epoch == epoch
    assert header.records_count == len(records)
    if records:
        assert header.last_offset == records[-1].offset
    assert decode_records(batch) == records
    # The same batch inside a larger writable buffer, at an offset.
    assert decode_records(memoryview(bytearray(b"\x00" * 3 + batch)), 3) == records


@PROPERTY
@given(
    data=record_lists(min_size=1),
    codec=st.sampled_from(CODECS),
    new_base=st.integers(0, 2**62),
    epoch=st.integers(INT32_MIN, INT32_MAX),
    append_time=st.integers(0, 2**45),
)
def test_header_patches_keep_the_crc_valid(
    data: tuple[int, list[Record]], codec: int, new_base: int, epoch: int, append_time: int
) -> None:
    base_offset, records = data
    buf = bytearray(
        b"\xee" * 5 + encode_batch(records, base_offset=base_offset, compression=codec, is_transactional=True)
    )
    set_base_offset(buf, 5, new_base)
    set_partition_leader_epoch(buf, 5, epoch)
    header = read_header(buf, 5)
    assert (header.base_offset, header.partition_leader_epoch) == (new_base, epoch)
    assert crc_ok(buf, 5, header)
    shifted = [
        Record(r.offset - base_offset + new_base, r.timestamp, r.key, r.value, r.headers) for r in records
    ]
    assert decode_records(buf, 5) == shifted

    view = memoryview(buf)
    set_log_append_time(view, 5, append_time)
    header = read_header(buf, 5)
    assert crc_ok(buf, 5, header)
    assert header.timestamp_type == 1
    assert header.max_timestamp == append_time
    assert header.base_timestamp == records[0].timestamp
    assert header.compression == codec and header.is_transactional and not header.is_control
    assert [r.timestamp for r in decode_records(buf, 5)] == [append_time] * len(records)

    # A CRC-covered field rewritten without recomputing the CRC must be caught.
    struct.pack_into(">q", buf, 5 + 35, append_time + 1)
    assert not crc_ok(buf, 5, read_header(buf, 5))


@PROPERTY
@given(
    data=record_lists(min_size=1),
    codec=st.sampled_from(CODECS),
    where=st.floats(0, 1),
    mask=st.integers(1, 255),
)
def test_any_corrupted_byte_in_crc_range_fails(
    data: tuple[int, list[Record]], codec: int, where: float, mask: int
) -> None:
    base_offset, records = data
    buf = bytearray(encode_batch(records, base_offset=base_offset, compression=codec))
    index = 21 + int(where * (len(buf) - 22))
    buf[index] ^= mask
    header = read_header(buf)
    assert not crc_ok(buf, 0, header)
    with pytest.raises(CorruptRecordError):
        decode_records(buf)


@pytest.mark.parametrize("index", [*range(0, 8), *range(12, 16)])
def test_bytes_outside_the_crc_do_not_matter(index: int) -> None:
    buf = bytearray(encode_batch(sample_records(), base_offset=0))
    buf[index] ^= 0x5A
    assert crc_ok(buf, 0, read_header(buf))


@pytest.mark.parametrize("index", range(17, 21))
def test_corrupted_crc_field_fails(index: int) -> None:
    buf = bytearray(encode_batch(sample_records(), base_offset=0))
    buf[index] ^= 0x01
    assert not crc_ok(buf, 0, read_header(buf))


def test_crc_ok_on_a_truncated_buffer_is_false() -> None:
    batch = encode_batch(sample_records(), base_offset=0)
    assert not crc_ok(batch[:-1], 0, read_header(batch))


# -- LogAppendTime, control batches, compaction shapes ------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time_read_by_other_clients(codec: int) -> None:
    records = sample_records(40)
    buf = bytearray(encode_batch(records, base_offset=40, compression=codec))
    set_log_append_time(buf, 0, 1_800_000_000_000)
    batch = bytes(buf)
    aio = AioBatch(batch)
    assert aio.timestamp_type == 1
    assert aio.validate_crc()
    assert [r.timestamp for r in aio] == [1_800_000_000_000] * len(records)
    if codec in (NONE, GZIP):
        kp = KafkaBatch(batch)
        assert kp.validate_crc()
        assert [r.timestamp for r in kp] == [1_800_000_000_000] * len(records)


def test_set_log_append_time_clears_undefined_attribute_bits() -> None:
    buf = bytearray(encode_batch(sample_records(), base_offset=0))
    struct.pack_into(">h", buf, 21, 0x0180 | GZIP)  # bits Kafka does not define
    recompute_crc(buf)
    set_log_append_time(buf, 0, 5)
    assert read_header(buf).attributes == GZIP | 0x08
    assert crc_ok(buf, 0, read_header(buf))


def test_set_log_append_time_rejects_truncated_batch() -> None:
    buf = bytearray(encode_batch(sample_records(), base_offset=0))[:-1]
    with pytest.raises(CorruptRecordError):
        set_log_append_time(buf, 0, 5)


def test_log_append_time_encoded_directly() -> None:
    records = [Record(i, 99, b"k", b"v") for i in range(3)]
    batch = encode_batch(records, base_offset=0, timestamp_type=1)
    assert read_header(batch).timestamp_type == 1
    assert decode_records(batch) == records
    assert [r.timestamp for r in AioBatch(batch)] == [99, 99, 99]


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch(commit: bool) -> None:
    batch = encode_control_batch(
        base_offset=77,
        producer_id=1234,
        producer_epoch=5,
        commit=commit,
        coordinator_epoch=9,
        timestamp=1_700_000_000_123,
        partition_leader_epoch=3,
    )
    header = read_header(batch)
    assert header.is_control and header.is_transactional
    assert header.timestamp_type == 0 and header.compression == 0
    assert (header.base_offset, header.last_offset, header.records_count) == (77, 77, 1)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1234, 5, -1)
    assert header.partition_leader_epoch == 3
    assert header.base_timestamp == header.max_timestamp == 1_700_000_000_123
    assert crc_ok(batch, 0, header)
    (marker,) = decode_records(batch)
    assert marker.offset == 77 and marker.timestamp == 1_700_000_000_123
    assert marker.key == struct.pack(">hh", 0, 1 if commit else 0)
    assert marker.value == struct.pack(">hi", 0, 9)
    assert marker.headers == []

    (kp_marker,) = list(KafkaBatch(batch))
    assert isinstance(kp_marker, KafkaControlRecord)
    assert (kp_marker.commit, kp_marker.abort, kp_marker.version) == (commit, not commit, 0)
    aio = AioBatch(batch)
    assert aio.is_control_batch and aio.validate_crc()
    (aio_marker,) = list(aio)
    assert AioControlRecord.parse(aio_marker.key) == (COMMIT_MARKER if commit else ABORT_MARKER)


def test_delete_horizon() -> None:
    records = [Record(10, 5_000, b"k", None), Record(12, 4_000, b"k2", b"v")]
    batch = encode_batch(records, base_offset=10, delete_horizon_ms=9_000)
    header = read_header(batch)
    assert header.has_delete_horizon
    assert header.base_timestamp == 9_000
    assert header.max_timestamp == 5_000
    assert decode_records(batch) == records
    assert [r.timestamp for r in AioBatch(batch)] == [5_000, 4_000]


def test_empty_batch_keeps_its_last_offset() -> None:
    batch = encode_batch(
        [],
        base_offset=100,
        last_offset_delta=9,
        producer_id=3,
        producer_epoch=0,
        base_sequence=50,
        is_transactional=True,
    )
    header = read_header(batch)
    assert (header.records_count, header.last_offset, header.last_sequence) == (0, 109, 59)
    assert header.base_timestamp == header.max_timestamp == -1
    assert decode_records(batch) == []
    assert list(AioBatch(batch)) == []
    assert list(KafkaBatch(batch)) == []


def test_last_offset_delta_override_with_records() -> None:
    records = [Record(100, 1, b"a", b"b"), Record(103, 2, b"c", b"d")]
    batch = encode_batch(records, base_offset=100, last_offset_delta=7)
    assert read_header(batch).last_offset == 107
    assert decode_records(batch) == records


def test_encode_rejects_bad_offsets() -> None:
    with pytest.raises(ValueError):
        encode_batch([Record(5, 0, None, None)], base_offset=6)
    with pytest.raises(ValueError):
        encode_batch([Record(5, 0, None, None), Record(5, 0, None, None)], base_offset=0)
    with pytest.raises(ValueError):
        encode_batch([Record(2**31, 0, None, None)], base_offset=0)
    with pytest.raises(UnsupportedCompressionTypeError):
        encode_batch([Record(0, 0, None, None)], base_offset=0, compression=5)


# -- decode_records framing checks --------------------------------------------------------------------


def test_decode_rejects_truncated_batch() -> None:
    batch = encode_batch(sample_records(), base_offset=0)
    with pytest.raises(CorruptRecordError):
        decode_records(batch[:-1])


@pytest.mark.parametrize("count_change", [-1, 1, 100])
def test_decode_rejects_wrong_record_count(count_change: int) -> None:
    buf = bytearray(encode_batch(sample_records(), base_offset=0))
    struct.pack_into(">i", buf, 57, 5 + count_change)
    recompute_crc(buf)
    with pytest.raises(CorruptRecordError):
        decode_records(buf)
    struct.pack_into(">i", buf, 57, -1)
    recompute_crc(buf)
    with pytest.raises(CorruptRecordError):
        decode_records(buf)


def test_decode_rejects_inconsistent_record_length() -> None:
    buf = bytearray(encode_batch([Record(0, 0, b"key", b"value")], base_offset=0))
    assert buf[HEADER_SIZE] == 2 * 14  # the record's length varint (zig-zag)
    for length in (13, 15):
        buf[HEADER_SIZE] = 2 * length
        recompute_crc(buf)
        with pytest.raises(CorruptRecordError):
            decode_records(buf)


def test_decode_rejects_null_header_key() -> None:
    buf = bytearray(encode_batch([Record(0, 0, None, None, [("", b"")])], base_offset=0))
    # record: length, attrs, ts delta, offset delta, key -1, value -1, 1 header, key length 0 -> -1
    assert buf[HEADER_SIZE + 7] == 0
    buf[HEADER_SIZE + 7] = 1
    recompute_crc(buf)
    with pytest.raises(CorruptRecordError):
        decode_records(buf)


def test_decode_rejects_corrupt_compressed_payload() -> None:
    buf = bytearray(encode_batch(sample_records(), base_offset=0))
    struct.pack_into(">h", buf, 21, LZ4)  # claims LZ4 but holds plain records
    recompute_crc(buf)
    with pytest.raises(CorruptRecordError):
        decode_records(buf)


def test_decode_unknown_codec() -> None:
    buf = bytearray(encode_batch(sample_records(), base_offset=0))
    struct.pack_into(">h", buf, 21, 6)
    recompute_crc(buf)
    with pytest.raises(UnsupportedCompressionTypeError):
        decode_records(buf)


def test_decode_rejects_bad_crc() -> None:
    buf = bytearray(encode_batch(sample_records(), base_offset=0))
    buf[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_records(buf)


def test_record_equality_and_repr() -> None:
    record = Record(1, 2, b"k", None)
    assert record == Record(1, 2, b"k", None, [])
    assert record != Record(1, 2, b"k", b"")
    assert record != (1, 2, b"k", None, [])
    assert "offset=1" in repr(record)


def _payload_of(records: list[Record], codec: int = 0, **kw: object) -> bytearray:
    return bytearray(encode_batch(records, base_offset=0, compression=codec, **kw))


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_check_records_accepts_a_batch_whose_payload_holds_its_records(codec: int) -> None:
    records = [Record(i, 1000 + i, b"k", b"v" * (i * 50), [("h", b"x")]) for i in range(200)]
    buf = _payload_of(records, codec)
    check_records(buf, 0, read_header(buf), memoryview(bytearray(1 << 20)))


def _patched(buf: bytearray, fmt: str, offset: int, value: int) -> bytearray:
    """The batch with one header field changed and its CRC made right again."""
    struct.pack_into(fmt, buf, offset, value)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return buf


def test_check_records_refuses_a_compression_flag_on_an_uncompressed_payload() -> None:
    buf = _patched(_payload_of([Record(0, 0, None, b"v" * 100, [])]), ">h", 21, GZIP)  # attributes
    with pytest.raises(CorruptRecordError, match="gzip"):
        check_records(buf, 0, read_header(buf), memoryview(bytearray(4096)))


def test_check_records_refuses_a_payload_that_frames_other_records_than_declared() -> None:
    records = [Record(i, 0, None, b"v" * 10, []) for i in range(3)]
    short = _patched(_payload_of(records, LZ4), ">i", 57, 4)  # the records count
    header = read_header(short)
    with pytest.raises(CorruptRecordError, match="declares 4 records"):
        check_records(short, 0, header, memoryview(bytearray(4096)))


def test_check_records_bounds_what_a_payload_may_decompress_to() -> None:
    buf = _payload_of([Record(0, 0, None, b"\0" * 100_000, [])], ZSTD)
    assert len(buf) < 1000
    with pytest.raises(CorruptRecordError, match="more than 4096 bytes"):
        check_records(buf, 0, read_header(buf), memoryview(bytearray(4096)))
