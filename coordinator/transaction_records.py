"""The records of ``__transaction_state``, in Kafka's formats, so that Kafka's tools could read them.

Every key and value starts with an int16 schema version (Kafka's ``MessageUtil.toVersionPrefixedBytes``):

- ``TransactionLogKey`` v0: transactionalId string.
- ``TransactionLogValue`` v0: producerId int64, producerEpoch int16, transactionTimeoutMs int32,
  transactionStatus int8 (the state's id), transactionPartitions nullable array of (topic string,
  partitionIds int32 array), transactionLastUpdateTimestampMs int64, transactionStartTimestampMs int64.
  The partitions are null for an Empty transaction.
- ``TransactionLogValue`` v1: the same fields in the flexible encoding (compact strings and arrays,
  a tagged-field section after each struct). Later Kafka releases put tagged fields there
  (0: PreviousProducerId, 1: NextProducerId, 2: ClientTransactionVersion); they are read when present
  and other tags are skipped.

Kafka 3.9 writes v0 unless the ``transaction.version`` feature is enabled, and so does Samsa; both are
read. A null value is a tombstone: the transactional id expired (compaction then drops the key).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from coordinator.offsets_records import UnknownRecordError
from protocol.primitives import (
    DecodeError,
    read_compact_array_length,
    read_compact_string,
    read_string,
    read_uvarint,
    skip_tagged_field,
    uvarint,
    write_compact_string,
    write_string,
)

__all__ = [
    "TRANSACTION_LOG_KEY_VERSION",
    "TRANSACTION_LOG_VALUE_VERSION",
    "TransactionLogValue",
    "UnknownRecordError",
    "decode_key",
    "decode_value",
    "transaction_log_key",
    "transaction_log_value",
]

TRANSACTION_LOG_KEY_VERSION = 0
TRANSACTION_LOG_VALUE_VERSION = 0  # what Kafka 3.9 writes without transaction.version
_FLEXIBLE_VALUE_VERSION = 1

_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    # (topic, partition ids) in the order written; None for an Empty transaction
    transaction_partitions: list[tuple[str, list[int]]] | None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    # tagged fields of the flexible version (defaults when absent, as in Kafka)
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    unknown_tags: dict[int, bytes] = field(default_factory=dict)


# -- keys -----------------------------------------------------------------------------------------


def transaction_log_key(transactional_id: str) -> bytes:
    out = bytearray(_I16.pack(TRANSACTION_LOG_KEY_VERSION))
    write_string(out, transactional_id)
    return bytes(out)


def decode_key(buf: bytes) -> str:
    """The transactional id of a key; UnknownRecordError for a key version Kafka does not write."""
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version == TRANSACTION_LOG_KEY_VERSION:
            transactional_id, _ = read_string(buf, 2)
            if transactional_id is None:
                raise DecodeError("null transactional id")
            return transactional_id
    except (struct.error, UnicodeDecodeError) as e:
        raise DecodeError(f"unreadable __transaction_state key: {e}") from None
    raise UnknownRecordError(f"unknown __transaction_state key version {version}")


# -- values ---------------------------------------------------------------------------------------


def transaction_log_value(value: TransactionLogValue, version: int = TRANSACTION_LOG_VALUE_VERSION) -> bytes:
    if version not in (0, _FLEXIBLE_VALUE_VERSION):
        raise ValueError(f"TransactionLogValue has no version {version}")
    flexible = version == _FLEXIBLE_VALUE_VERSION
    out = bytearray(_I16.pack(version))
    out += _I64.pack(value.producer_id)
    out += _I16.pack(value.producer_epoch)
    out += _I32.pack(value.transaction_timeout_ms)
    out += _I8.pack(value.transaction_status)
    partitions = value.transaction_partitions
    if flexible:
        out += uvarint(0 if partitions is None else len(partitions) + 1)
    else:
        out += _I32.pack(-1 if partitions is None else len(partitions))
    for topic, ids in partitions or []:
        if flexible:
            write_compact_string(out, topic)
            out += uvarint(len(ids) + 1)
        else:
            write_string(out, topic)
            out += _I32.pack(len(ids))
        for partition in ids:
            out += _I32.pack(partition)
        if flexible:
            out += b"\x00"  # no tagged fields in a PartitionsSchema
    out += _I64.pack(value.transaction_last_update_timestamp_ms)
    out += _I64.pack(value.transaction_start_timestamp_ms)
    if flexible:
        tags: list[tuple[int, bytes]] = []
        if value.previous_producer_id != -1:
            tags.append((_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(value.previous_producer_id)))
        if value.next_producer_id != -1:
            tags.append((_TAG_NEXT_PRODUCER_ID, _I64.pack(value.next_producer_id)))
        if value.client_transaction_version != 0:
            tags.append((_TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(value.client_transaction_version)))
        tags.extend(value.unknown_tags.items())
        tags.sort()
        out += uvarint(len(tags))
        for tag, data in tags:
            out += uvarint(tag) + uvarint(len(data)) + data
    return bytes(out)


def _skip_tagged_fields(buf: bytes, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        pos = skip_tagged_field(buf, pos)
    return pos


def decode_value(buf: bytes) -> TransactionLogValue:
    """Reads v0 and v1 values; UnknownRecordError for other versions."""
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version not in (0, _FLEXIBLE_VALUE_VERSION):
            raise UnknownRecordError(f"unknown TransactionLogValue version {version}")
        flexible = version == _FLEXIBLE_VALUE_VERSION
        (producer_id,) = _I64.unpack_from(buf, 2)
        (producer_epoch,) = _I16.unpack_from(buf, 10)
        (timeout_ms,) = _I32.unpack_from(buf, 12)
        (status,) = _I8.unpack_from(buf, 16)
        pos = 17
        if flexible:
            count, pos = read_compact_array_length(buf, pos)
        else:
            (count,) = _I32.unpack_from(buf, pos)
            pos += 4
        partitions: list[tuple[str, list[int]]] | None = None if count < 0 else []
        for _ in range(max(count, 0)):
            if flexible:
                topic, pos = read_compact_string(buf, pos)
                n, pos = read_compact_array_length(buf, pos)
            else:
                topic, pos = read_string(buf, pos)
                (n,) = _I32.unpack_from(buf, pos)
                pos += 4
            if topic is None:
                raise DecodeError("null topic in TransactionLogValue")
            ids = list(struct.unpack_from(f">{max(n, 0)}i", buf, pos))
            pos += 4 * max(n, 0)
            if flexible:
                pos = _skip_tagged_fields(buf, pos)
            assert partitions is not None
            partitions.append((topic, ids))
        (last_update,) = _I64.unpack_from(buf, pos)
        (start,) = _I64.unpack_from(buf, pos + 8)
        pos += 16
        value = TransactionLogValue(
            producer_id, producer_epoch, timeout_ms, status, partitions, last_update, start
        )
        if flexible:
            tags, pos = read_uvarint(buf, pos)
            for _ in range(tags):
                tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                data = bytes(buf[pos : pos + size])
                if len(data) != size:
                    raise DecodeError("truncated tagged field")
                pos += size
                if tag == _TAG_PREVIOUS_PRODUCER_ID:
                    (value.previous_producer_id,) = _I64.unpack(data)
                elif tag == _TAG_NEXT_PRODUCER_ID:
                    (value.next_producer_id,) = _I64.unpack(data)
                elif tag == _TAG_CLIENT_TRANSACTION_VERSION:
                    (value.client_transaction_version,) = _I16.unpack(data)
                else:
                    value.unknown_tags[tag] = data
    except (struct.error, UnicodeDecodeError, IndexError) as e:
        raise DecodeError(f"unreadable TransactionLogValue: {e}") from None
    return value
