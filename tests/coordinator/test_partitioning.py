"""The group -> __consumer_offsets partition mapping matches Kafka's (values printed by Java 17's
String.hashCode and Kafka's Utils.abs semantics)."""

from __future__ import annotations

import pytest

from coordinator.group_metadata_manager import java_string_hash, kafka_abs, partition_for

# (group id, Java's "".hashCode(), Kafka's partition among 50)
JAVA_VALUES = [
    ("", 0, 0),
    ("hello", 99162322, 22),
    ("polygenelubricants", -(2**31), 0),  # hashCode is Integer.MIN_VALUE: Utils.abs gives 0
    ("\U0001f600", 1772899, 49),  # outside the BMP: two UTF-16 code units
    ("my-group", -1906497762, 12),
    ("consumer-group-1", 147483020, 20),
    ("Ünïcödé-group", 1187475847, 47),
    ("GROUP_ID_with.dots", 2113983534, 34),
    ("zz", 3904, 4),
    ("console-consumer-12345", 158455506, 6),
]


@pytest.mark.parametrize(("group", "hash_code", "partition"), JAVA_VALUES)
def test_matches_java_and_kafka(group: str, hash_code: int, partition: int) -> None:
    assert java_string_hash(group) == hash_code
    assert partition_for(group, 50) == partition


def test_kafka_abs_of_int_min_is_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-(2**31) + 1) == 2**31 - 1
    assert kafka_abs(-5) == 5


def test_partition_count_is_honoured() -> None:
    assert {partition_for(f"g{i}", 3) for i in range(100)} == {0, 1, 2}
