"""Every message of every schema version round-trips, and matches kio byte for byte where kio has it."""

from __future__ import annotations

import io
import uuid

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from protocol.api import ApiKey, api
from protocol.frame import decode_request, decode_response, encode_request, encode_response
from protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchResponse,
    MetadataRequest,
    ProduceRequest,
    RequestHeader,
    message_class,
)
from protocol.primitives import DecodeError, uvarint
from protocol.schema import load_message, schema_paths
from tests.protocol.generated_values import random_message

SEEDS = range(4)


def _all_versions() -> list[tuple[str, int]]:
    pairs = []
    for name in sorted(schema_paths()):
        spec = load_message(name)
        pairs += [(name, v) for v in range(spec.valid_versions.low, spec.valid_versions.high + 1)]
    return pairs


ALL_VERSIONS = _all_versions()


def _kio_class(name: str, version: int) -> type | None:
    spec = load_message(name)
    try:
        if spec.type == "request":
            return load_request_schema(spec.api_key, version)
        if spec.type == "response":
            return load_response_schema(spec.api_key, version)
        if name == "RequestHeader":  # kio attaches headers to messages: v1 to ApiVersions v0, v2 to v3
            return load_request_schema(18, 0 if version == 1 else 3).__header_schema__
        if name == "ResponseHeader":
            return load_response_schema(
                18 if version == 0 else 22, 0 if version == 0 else 2
            ).__header_schema__
    except Exception:
        return None
    return None


def test_every_schema_version_is_covered() -> None:
    # 108 Kafka 4 schemas and the legacy ones; a schema that fails to load would vanish silently.
    assert len(schema_paths()) >= 120
    assert len(ALL_VERSIONS) > 540


@pytest.mark.parametrize(("name", "version"), ALL_VERSIONS)
def test_round_trip(name: str, version: int) -> None:
    cls = message_class(name)
    for seed in SEEDS:
        message = random_message(cls, version, seed)
        encoded = message.encode(version)
        decoded, end = cls.decode_from(encoded, version)
        assert end == len(encoded)
        assert decoded == message
        assert decoded.encode(version) == encoded


KIO_VERSIONS = [(n, v) for n, v in ALL_VERSIONS if _kio_class(n, v) is not None]


def test_kio_covers_the_kafka4_schemas() -> None:
    assert len(KIO_VERSIONS) > 480


@pytest.mark.parametrize(("name", "version"), KIO_VERSIONS)
def test_bytes_match_kio(name: str, version: int) -> None:
    kio_cls = _kio_class(name, version)
    read, write = entity_reader(kio_cls), entity_writer(kio_cls)
    for seed in SEEDS:
        ours = random_message(message_class(name), version, seed).encode(version)
        parsed, end = read(memoryview(ours), 0)
        assert end == len(ours), "kio stopped before the end of our encoding"
        out = io.BytesIO()
        write(out, parsed)
        assert out.getvalue() == ours


def test_unknown_tagged_fields_are_skipped() -> None:
    body = ApiVersionsRequest(client_software_name="x", client_software_version="1").encode(3)
    assert body.endswith(b"\x00")
    # Two tags Kafka never defined here (7 and 40), with payloads, in place of the empty tag buffer.
    tagged = body[:-1] + uvarint(2) + uvarint(7) + uvarint(3) + b"abc" + uvarint(40) + uvarint(1) + b"z"
    decoded = ApiVersionsRequest.decode(tagged, 3)
    assert decoded.client_software_name == "x"


def test_a_tagged_field_running_past_the_end_is_an_error() -> None:
    body = ApiVersionsRequest(client_software_name="x", client_software_version="1").encode(3)
    with pytest.raises(DecodeError):
        ApiVersionsRequest.decode(body[:-1] + uvarint(1) + uvarint(7) + uvarint(50) + b"abc", 3)


def test_tagged_fields_are_written_only_when_not_default() -> None:
    plain = ApiVersionsResponse(api_keys=[]).encode(3)
    assert plain == b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + b"\x00"
    with_epoch = ApiVersionsResponse(api_keys=[], finalized_features_epoch=5).encode(3)
    assert with_epoch == plain[:-1] + uvarint(1) + uvarint(1) + uvarint(8) + (5).to_bytes(8, "big")
    assert ApiVersionsResponse.decode(with_epoch, 3).finalized_features_epoch == 5


def test_request_header_client_id_stays_a_classic_string_in_v2() -> None:
    # ClientId has "flexibleVersions": "none": an int16 length even in the flexible header v2.
    encoded = RequestHeader(
        request_api_key=3, request_api_version=12, correlation_id=7, client_id="ab"
    ).encode(2)
    assert encoded == b"\x00\x03\x00\x0c\x00\x00\x00\x07" + b"\x00\x02ab" + b"\x00"


def test_request_header_v0_has_no_client_id() -> None:
    encoded = RequestHeader(request_api_key=7, request_api_version=0, correlation_id=1, client_id="x").encode(
        0
    )
    assert encoded == b"\x00\x07\x00\x00\x00\x00\x00\x01"
    assert api(ApiKey.CONTROLLED_SHUTDOWN).request_header_version(0) == 0


def test_api_versions_response_header_is_always_v0() -> None:
    versions = api(ApiKey.API_VERSIONS)
    frame = b"".join(encode_response(versions, 3, 42, ApiVersionsResponse(api_keys=[])))
    assert frame[4:8] == (42).to_bytes(4, "big")
    assert frame[8:10] == b"\x00\x00"  # straight into the body: no tag buffer after the correlation id
    assert ApiVersionsResponse.decode(frame[8:], 3).api_keys == []


def test_flexible_response_header_has_a_tag_buffer() -> None:
    metadata = api(ApiKey.METADATA)
    frame = b"".join(encode_response(metadata, 12, 5, message_class("MetadataResponse")()))
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert frame[8] == 0
    correlation_id, body = decode_response(frame[4:], metadata, 12)
    assert correlation_id == 5 and body.brokers == []


def test_request_frame_round_trip() -> None:
    metadata = api(ApiKey.METADATA)
    body = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t", topic_id=uuid.uuid4())])
    frame = encode_request(metadata, 12, 9, "client-1", body)
    header, decoded = decode_request(frame[4:], metadata, 12)
    assert (header.correlation_id, header.client_id) == (9, "client-1")
    assert decoded == body


def test_produce_records_are_views_into_the_request_not_copies() -> None:
    records = b"r" * 100_000
    request = ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)]
            )
        ],
    )
    frame = bytearray(request.encode(9))
    decoded = ProduceRequest.decode(frame, 9)
    view = decoded.topic_data[0].partition_data[0].records
    assert isinstance(view, memoryview) and view.obj is frame and bytes(view) == records


def test_large_fetch_records_stay_separate_buffers() -> None:
    records = memoryview(b"x" * 65536)
    response = FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic="t", partitions=[FetchResponse.PartitionData(partition_index=0, records=records)]
            )
        ]
    )
    parts = response.encode_parts(12)
    assert any(p is records for p in parts)
    assert FetchResponse.decode(b"".join(parts), 12) == response


@pytest.mark.parametrize("keep", [0.0, 0.1, 0.5, 0.9, 0.99])
def test_truncated_input_is_a_decode_error(keep: float) -> None:
    encoded = random_message(message_class("MetadataResponse"), 12, 3).encode(12)
    assert len(encoded) > 100
    with pytest.raises(DecodeError):
        message_class("MetadataResponse").decode(encoded[: int(len(encoded) * keep)], 12)


def test_huge_array_count_is_rejected_without_allocating() -> None:
    with pytest.raises(DecodeError):
        MetadataRequest.decode(b"\x7f\xff\xff\xff", 1)


def test_null_in_non_nullable_field_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        MetadataRequest.decode(b"\x00\x00\x00\x01\xff\xff", 1)  # one topic whose name is null
