"""The records of ``__consumer_offsets``, in Kafka's formats, so that Kafka's tools could read them.

Every key starts with an int16 that says what the record is (Kafka's ``GroupCoordinatorRecordSerde``):
0 or 1 is an offset commit (``OffsetCommitKey``: group, topic, partition; Kafka writes 1), 2 is a
group's metadata (``GroupMetadataKey``: group). Every value starts with its own int16 schema version:

- ``OffsetCommitValue``: offset int64, leaderEpoch int32 (v3+), metadata string, commitTimestamp int64,
  expireTimestamp int64 (v1 only). Written as v3, or v1 when the commit carried a retention time.
- ``GroupMetadataValue``: protocolType string, generation int32, protocol and leader nullable strings,
  currentStateTimestamp int64 (v2+), then the members: memberId, groupInstanceId (v3+, nullable),
  clientId, clientHost, rebalanceTimeout int32 (v1+), sessionTimeout int32, subscription bytes,
  assignment bytes. Written as v3.

A null value is a tombstone: the offset, or the group, is gone (compaction then drops the key).
Versions 0-3 are read; the flexible version 4 of later Kafka releases is not (Samsa never writes it).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from coordinator.group_metadata import OffsetAndMetadata
from protocol.primitives import (
    DecodeError,
    read_bytes,
    read_string,
    write_bytes,
    write_nullable_string,
    write_string,
)

OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class UnknownRecordError(ValueError):
    """A key or value of a type or version this coordinator does not read."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(slots=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadataValue] = field(default_factory=list)


# -- keys -----------------------------------------------------------------------------------------


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    out = bytearray(_I16.pack(OFFSET_COMMIT_KEY_VERSION))
    write_string(out, group)
    write_string(out, topic)
    out += _I32.pack(partition)
    return bytes(out)


def group_metadata_key(group: str) -> bytes:
    out = bytearray(_I16.pack(GROUP_METADATA_KEY_VERSION))
    write_string(out, group)
    return bytes(out)


def _string(buf: bytes, pos: int) -> tuple[str, int]:
    value, pos = read_string(buf, pos)
    if value is None:
        raise DecodeError(f"null string at byte {pos - 2}")
    return value, pos


def decode_key(buf: bytes) -> OffsetCommitKey | GroupMetadataKey:
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version in OFFSET_COMMIT_KEY_VERSIONS:
            group, pos = _string(buf, 2)
            topic, pos = _string(buf, pos)
            (partition,) = _I32.unpack_from(buf, pos)
            return OffsetCommitKey(group, topic, partition)
        if version == GROUP_METADATA_KEY_VERSION:
            return GroupMetadataKey(_string(buf, 2)[0])
    except (struct.error, UnicodeDecodeError) as e:
        raise DecodeError(f"unreadable __consumer_offsets key: {e}") from None
    raise UnknownRecordError(f"unknown __consumer_offsets key version {version}")


# -- offset commit values -------------------------------------------------------------------------


def offset_commit_value(value: OffsetAndMetadata) -> bytes:
    """Version 1 when the commit has an expire timestamp (Kafka's choice), else version 3."""
    with_expiry = value.expire_timestamp >= 0
    version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY if with_expiry else OFFSET_COMMIT_VALUE_VERSION
    out = bytearray(_I16.pack(version))
    out += _I64.pack(value.offset)
    if version >= 3:
        out += _I32.pack(value.leader_epoch)
    write_string(out, value.metadata)
    out += _I64.pack(value.commit_timestamp)
    if version == 1:
        out += _I64.pack(value.expire_timestamp)
    return bytes(out)


def decode_offset_commit_value(buf: bytes) -> OffsetAndMetadata:
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if not 0 <= version <= 3:
            raise UnknownRecordError(f"unknown OffsetCommitValue version {version}")
        (offset,) = _I64.unpack_from(buf, 2)
        pos = 10
        leader_epoch = -1
        if version >= 3:
            (leader_epoch,) = _I32.unpack_from(buf, pos)
            pos += 4
        metadata, pos = _string(buf, pos)
        (commit_timestamp,) = _I64.unpack_from(buf, pos)
        pos += 8
        expire_timestamp = -1
        if version == 1:
            (expire_timestamp,) = _I64.unpack_from(buf, pos)
    except (struct.error, UnicodeDecodeError) as e:
        raise DecodeError(f"unreadable OffsetCommitValue: {e}") from None
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


# -- group metadata values ------------------------------------------------------------------------


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    out = bytearray(_I16.pack(GROUP_METADATA_VALUE_VERSION))
    write_string(out, value.protocol_type)
    out += _I32.pack(value.generation)
    write_nullable_string(out, value.protocol)
    write_nullable_string(out, value.leader)
    out += _I64.pack(value.current_state_timestamp)
    out += _I32.pack(len(value.members))
    for m in value.members:
        write_string(out, m.member_id)
        write_nullable_string(out, m.group_instance_id)
        write_string(out, m.client_id)
        write_string(out, m.client_host)
        out += _I32.pack(m.rebalance_timeout)
        out += _I32.pack(m.session_timeout)
        write_bytes(out, m.subscription)
        write_bytes(out, m.assignment)
    return bytes(out)


def _bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    value, pos = read_bytes(buf, pos)
    return (b"" if value is None else value), pos


def decode_group_metadata_value(buf: bytes) -> GroupMetadataValue:
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if not 0 <= version <= 3:
            raise UnknownRecordError(f"unknown GroupMetadataValue version {version}")
        protocol_type, pos = _string(buf, 2)
        (generation,) = _I32.unpack_from(buf, pos)
        protocol, pos = read_string(buf, pos + 4)
        leader, pos = read_string(buf, pos)
        current_state_timestamp = -1
        if version >= 2:
            (current_state_timestamp,) = _I64.unpack_from(buf, pos)
            pos += 8
        (count,) = _I32.unpack_from(buf, pos)
        pos += 4
        members = []
        for _ in range(max(count, 0)):
            member_id, pos = _string(buf, pos)
            group_instance_id = None
            if version >= 3:
                group_instance_id, pos = read_string(buf, pos)
            client_id, pos = _string(buf, pos)
            client_host, pos = _string(buf, pos)
            rebalance_timeout = -1
            if version >= 1:
                (rebalance_timeout,) = _I32.unpack_from(buf, pos)
                pos += 4
            (session_timeout,) = _I32.unpack_from(buf, pos)
            pos += 4
            if version == 0:
                rebalance_timeout = session_timeout  # v0 had one timeout for both
            subscription, pos = _bytes(buf, pos)
            assignment, pos = _bytes(buf, pos)
            members.append(
                MemberMetadataValue(
                    member_id,
                    group_instance_id,
                    client_id,
                    client_host,
                    rebalance_timeout,
                    session_timeout,
                    subscription,
                    assignment,
                )
            )
    except (struct.error, UnicodeDecodeError) as e:
        raise DecodeError(f"unreadable GroupMetadataValue: {e}") from None
    return GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_timestamp, members)
