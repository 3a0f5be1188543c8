"""The __transaction_state record formats, byte for byte: TransactionLogKey v0, TransactionLogValue v0
(what Kafka 3.9 writes) and v1 (flexible, with tagged fields), tombstones, and what is refused."""

from __future__ import annotations

import struct

import pytest

from coordinator.transaction_records import (
    TransactionLogValue,
    UnknownRecordError,
    decode_key,
    decode_value,
    transaction_log_key,
    transaction_log_value,
)
from protocol.primitives import DecodeError


def test_key_is_version_0_then_the_transactional_id() -> None:
    assert transaction_log_key("my-txn") == b"\x00\x00\x00\x06my-txn"
    assert decode_key(transaction_log_key("tx-é")) == "tx-é"


def test_unknown_key_versions_are_refused() -> None:
    with pytest.raises(UnknownRecordError):
        decode_key(b"\x00\x01\x00\x01x")
    with pytest.raises(DecodeError):
        decode_key(b"\x00")


def _value() -> TransactionLogValue:
    return TransactionLogValue(
        producer_id=1234,
        producer_epoch=7,
        transaction_timeout_ms=60000,
        transaction_status=1,
        transaction_partitions=[("a", [0, 2]), ("b", [5])],
        transaction_last_update_timestamp_ms=1_700_000_000_123,
        transaction_start_timestamp_ms=1_700_000_000_000,
    )


def test_value_v0_bytes() -> None:
    expected = (
        struct.pack(">hqhib", 0, 1234, 7, 60000, 1)
        + struct.pack(">i", 2)
        + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 5)
        + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000)
    )  # fmt: skip
    assert transaction_log_value(_value()) == expected
    assert decode_value(expected) == _value()


def test_empty_transaction_has_null_partitions() -> None:
    value = TransactionLogValue(9, 0, 1000, 0, None, 5, -1)
    data = transaction_log_value(value)
    assert data[17:21] == b"\xff\xff\xff\xff"
    assert decode_value(data).transaction_partitions is None
    flexible = transaction_log_value(value, 1)
    assert flexible[17:18] == b"\x00"  # compact null array
    assert decode_value(flexible) == value


def test_value_v1_bytes_and_tagged_fields() -> None:
    value = _value()
    expected = (
        struct.pack(">hqhib", 1, 1234, 7, 60000, 1)
        + b"\x03"  # two topics, compact
        + b"\x02a" + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00"
        + b"\x02b" + b"\x02" + struct.pack(">i", 5) + b"\x00"
        + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000)
        + b"\x00"  # no tagged fields
    )  # fmt: skip
    assert transaction_log_value(value, 1) == expected
    assert decode_value(expected) == value
    # Later releases' tagged fields are read; unknown tags are kept and skipped.
    value.previous_producer_id = 77
    value.next_producer_id = 78
    value.client_transaction_version = 2
    value.unknown_tags[9] = b"xyz"
    data = transaction_log_value(value, 1)
    assert data.endswith(
        b"\x04"
        + b"\x00\x08" + struct.pack(">q", 77)
        + b"\x01\x08" + struct.pack(">q", 78)
        + b"\x02\x02" + struct.pack(">h", 2)
        + b"\x09\x03xyz"
    )  # fmt: skip
    assert decode_value(data) == value


def test_unknown_or_truncated_values_are_refused() -> None:
    with pytest.raises(UnknownRecordError):
        decode_value(b"\x00\x02" + bytes(40))
    with pytest.raises(DecodeError):
        decode_value(transaction_log_value(_value())[:-3])
    with pytest.raises(ValueError):
        transaction_log_value(_value(), 2)
