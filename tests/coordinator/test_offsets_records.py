"""Kafka's __consumer_offsets key and value formats, byte for byte (the layouts of OffsetCommitKey,
OffsetCommitValue v1/v3, GroupMetadataKey and GroupMetadataValue v0-v3 in Kafka's schemas)."""

from __future__ import annotations

import struct

import pytest

from coordinator.group_metadata import OffsetAndMetadata
from coordinator.offsets_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    UnknownRecordError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)
from protocol.primitives import DecodeError


def s16(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def b32(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def test_offset_commit_key_is_version_1() -> None:
    key = offset_commit_key("g", "topic", 7)
    assert key == struct.pack(">h", 1) + s16("g") + s16("topic") + struct.pack(">i", 7)
    assert decode_key(key) == OffsetCommitKey("g", "topic", 7)
    # Version 0 keys (older Kafka) read the same.
    assert decode_key(struct.pack(">h", 0) + key[2:]) == OffsetCommitKey("g", "topic", 7)


def test_group_metadata_key_is_version_2() -> None:
    key = group_metadata_key("grp")
    assert key == struct.pack(">h", 2) + s16("grp")
    assert decode_key(key) == GroupMetadataKey("grp")


def test_unknown_key_version() -> None:
    with pytest.raises(UnknownRecordError):
        decode_key(struct.pack(">h", 3) + s16("g"))
    with pytest.raises(DecodeError):
        decode_key(struct.pack(">h", 1) + b"\x00")


def test_offset_commit_value_v3() -> None:
    value = OffsetAndMetadata(offset=42, leader_epoch=5, metadata="meta", commit_timestamp=1234)
    raw = offset_commit_value(value)
    assert raw == struct.pack(">hqi", 3, 42, 5) + s16("meta") + struct.pack(">q", 1234)
    assert decode_offset_commit_value(raw) == value


def test_offset_commit_value_v1_when_it_expires() -> None:
    value = OffsetAndMetadata(offset=1, metadata="", commit_timestamp=10, expire_timestamp=99)
    raw = offset_commit_value(value)
    assert raw == struct.pack(">hq", 1, 1) + s16("") + struct.pack(">qq", 10, 99)
    assert decode_offset_commit_value(raw) == value


@pytest.mark.parametrize("version", [0, 2])
def test_old_offset_commit_values(version: int) -> None:
    raw = struct.pack(">hq", version, 17) + s16("m") + struct.pack(">q", 5)
    assert decode_offset_commit_value(raw) == OffsetAndMetadata(17, -1, "m", 5, -1)


def test_offset_commit_value_v4_is_not_read() -> None:
    with pytest.raises(UnknownRecordError):
        decode_offset_commit_value(struct.pack(">hq", 4, 1))


MEMBERS = [
    MemberMetadataValue("m-1", "instance-1", "client", "/127.0.0.1", 60000, 10000, b"sub", b"assign"),
    MemberMetadataValue("m-2", None, "client", "/127.0.0.2", 30000, 6000, b"", b""),
]


def test_group_metadata_value_v3() -> None:
    value = GroupMetadataValue("consumer", 3, "range", "m-1", 777, MEMBERS)
    raw = group_metadata_value(value)
    expected = struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 3) + s16("range") + s16("m-1")
    expected += struct.pack(">q", 777) + struct.pack(">i", 2)
    for m in MEMBERS:
        expected += s16(m.member_id) + s16(m.group_instance_id) + s16(m.client_id) + s16(m.client_host)
        expected += struct.pack(">ii", m.rebalance_timeout, m.session_timeout)
        expected += b32(m.subscription) + b32(m.assignment)
    assert raw == expected
    assert decode_group_metadata_value(raw) == value


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    value = GroupMetadataValue("consumer", 4, None, None, 5, [])
    assert decode_group_metadata_value(group_metadata_value(value)) == value


def test_group_metadata_value_v0_and_v1() -> None:
    member_v0 = s16("m") + s16("c") + s16("/h") + struct.pack(">i", 6000) + b32(b"s") + b32(b"a")
    raw = struct.pack(">h", 0) + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m")
    raw += struct.pack(">i", 1) + member_v0
    decoded = decode_group_metadata_value(raw)
    assert decoded.members == [MemberMetadataValue("m", None, "c", "/h", 6000, 6000, b"s", b"a")]
    assert decoded.current_state_timestamp == -1
    member_v1 = s16("m") + s16("c") + s16("/h") + struct.pack(">ii", 9000, 6000) + b32(b"s") + b32(b"a")
    raw = struct.pack(">h", 1) + raw[2 : -len(member_v0)] + member_v1
    assert decode_group_metadata_value(raw).members[0].rebalance_timeout == 9000


def test_truncated_value() -> None:
    raw = group_metadata_value(GroupMetadataValue("consumer", 3, "range", "m-1", 777, MEMBERS))
    with pytest.raises(DecodeError):
        decode_group_metadata_value(raw[:-3])
