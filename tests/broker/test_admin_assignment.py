"""Replica assignment (Kafka's AdminUtils and AdminZkClient): Kafka's own worked examples, the
properties the algorithm promises, and the checks of explicit assignments."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from broker.topic_admin import MAX_PARTITIONS_PER_BATCH
from protocol.errors import ErrorCode, KafkaError
from server_common.replica_assignment import (
    BrokerMetadata,
    assign_replicas,
    ignore_partial_racks,
    new_partitions_assignment,
    rack_alternated_broker_list,
    validate_topic_assignment,
)
from zk import znodes
from zk.client import JUTE_MAX_BUFFER

FIVE = [BrokerMetadata(i) for i in range(5)]
RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def racked(racks: dict[int, str]) -> list[BrokerMetadata]:
    return [BrokerMetadata(b, r) for b, r in sorted(racks.items())]


def test_kafka_example_five_brokers_ten_partitions_three_replicas() -> None:
    assert assign_replicas(FIVE, 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_kafka_example_rack_alternated_list() -> None:
    assert rack_alternated_broker_list(RACKS) == [0, 3, 1, 5, 4, 2]
    without_5 = {b: r for b, r in RACKS.items() if b != 5}
    assert rack_alternated_broker_list(without_5) == [0, 3, 1, 4, 2]


def test_kafka_example_rack_aware_assignment() -> None:
    assert assign_replicas(racked(RACKS), 7, 3, fixed_start_index=0, start_partition_id=0) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],  # after one round the followers shift rather than repeat partition 0
    }


@pytest.mark.parametrize("seed", range(20))
def test_random_start_spreads_leaders_and_replicas_evenly(seed: int) -> None:
    assignment = assign_replicas(FIVE, 10, 3, rng=random.Random(seed))
    assert sorted(assignment) == list(range(10))
    assert all(len(set(replicas)) == 3 for replicas in assignment.values())
    assert Counter(replicas[0] for replicas in assignment.values()) == {b: 2 for b in range(5)}
    assert Counter(b for replicas in assignment.values() for b in replicas) == {b: 6 for b in range(5)}


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_puts_each_replica_on_another_rack(seed: int) -> None:
    # 3 racks of 2 brokers, RF 3: every partition covers every rack, load stays even.
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    assignment = assign_replicas(racked(racks), 12, 3, rng=random.Random(seed))
    assert all({racks[b] for b in replicas} == {"a", "b", "c"} for replicas in assignment.values())
    assert Counter(replicas[0] for replicas in assignment.values()) == {b: 2 for b in range(6)}
    assert Counter(b for replicas in assignment.values() for b in replicas) == {b: 6 for b in range(6)}


def test_rack_aware_with_fewer_racks_than_replicas_uses_every_rack() -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "b"}
    for replicas in assign_replicas(racked(racks), 8, 3, rng=random.Random(1)).values():
        assert len(set(replicas)) == 3 and {racks[b] for b in replicas} == {"a", "b"}


@pytest.mark.parametrize(
    ("partitions", "replication_factor", "code"),
    [
        (0, 1, ErrorCode.INVALID_PARTITIONS),
        (-2, 1, ErrorCode.INVALID_PARTITIONS),
        (3, 0, ErrorCode.INVALID_REPLICATION_FACTOR),
        (3, 6, ErrorCode.INVALID_REPLICATION_FACTOR),
    ],
)
def test_impossible_requests(partitions: int, replication_factor: int, code: ErrorCode) -> None:
    with pytest.raises(KafkaError) as e:
        assign_replicas(FIVE, partitions, replication_factor)
    assert e.value.code == code


def test_partial_rack_information_is_refused_unless_ignored() -> None:
    brokers = [BrokerMetadata(0, "a"), BrokerMetadata(1), BrokerMetadata(2, "b")]
    with pytest.raises(KafkaError, match="Not all brokers have rack information"):
        assign_replicas(brokers, 3, 2)
    assert ignore_partial_racks(brokers) == [BrokerMetadata(0), BrokerMetadata(1), BrokerMetadata(2)]
    assert ignore_partial_racks(racked(RACKS)) == racked(RACKS)
    assert len(assign_replicas(ignore_partial_racks(brokers), 3, 2)) == 3


def test_added_partitions_continue_the_existing_pattern() -> None:
    # A topic created with 5 partitions then grown to 10 gets what a 10-partition topic would have had.
    whole = assign_replicas(FIVE, 10, 3, fixed_start_index=0)
    existing = {p: whole[p] for p in range(5)}
    assert new_partitions_assignment("t", existing, FIVE, 10) == {p: whole[p] for p in range(5, 10)}
    # The walk starts at partition 0's first replica, whatever the brokers' order.
    shifted = assign_replicas(FIVE, 10, 2, fixed_start_index=3)
    grown = new_partitions_assignment("t", {p: shifted[p] for p in range(4)}, FIVE, 10)
    assert grown == {p: shifted[p] for p in range(4, 10)}


@pytest.mark.parametrize(
    ("count", "manual", "code", "message"),
    [
        (2, None, ErrorCode.INVALID_PARTITIONS, "Topic currently has 3 partitions, which is higher than"),
        (3, None, ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partitions."),
        (
            5,
            [[1, 2], [9, 2]],
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Unknown broker(s) in replica assignment: 9.",
        ),
        (5, [[1, 2]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "by 2 but 1 assignments provided"),
        (4, [[1, 1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Duplicate brokers not allowed"),
        (4, [[]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Cannot have replication factor of 0"),
        (4, [[1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partition 0 has 2 while partitions [3] have"),
    ],
)
def test_added_partitions_are_checked(
    count: int, manual: list[list[int]] | None, code: int, message: str
) -> None:
    existing = {0: [0, 1], 1: [1, 2], 2: [2, 3]}
    with pytest.raises(KafkaError) as e:
        new_partitions_assignment("t", existing, FIVE, count, manual)
    assert e.value.code == code and message in e.value.message


def test_manual_added_partitions_are_taken_as_given() -> None:
    existing = {0: [0, 1], 1: [1, 2]}
    assert new_partitions_assignment("t", existing, FIVE, 4, [[4, 3], [3, 0]]) == {2: [4, 3], 3: [3, 0]}


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ({0: [1, 2], 1: [1]}, "All partitions should have the same number of replicas"),
        ({0: [1, 1]}, "Duplicate replica assignment found"),
        ({0: [1], 2: [2]}, "partitions should be a consecutive 0-based integer sequence"),
        ({0: [1], 1: [7]}, "includes brokers [7], which are not registered"),
        ({0: []}, "replication factor of 0"),
    ],
)
def test_explicit_topic_assignment_is_checked(assignment: dict[int, list[int]], message: str) -> None:
    with pytest.raises(KafkaError) as e:
        validate_topic_assignment(assignment, {0, 1, 2})
    assert e.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and message in e.value.message


def test_valid_explicit_topic_assignment_passes() -> None:
    validate_topic_assignment({1: [2, 0], 0: [0, 1]}, {0, 1, 2})


def test_the_largest_topic_one_request_may_create_fits_in_its_znode() -> None:
    # Replication factor 3 and ten-digit broker ids: ZooKeeper refuses a write over jute.maxbuffer.
    brokers = [BrokerMetadata(2**31 - 1 - i) for i in range(3)]
    largest = znodes.TopicAssignment(assign_replicas(brokers, MAX_PARTITIONS_PER_BATCH, 3)).encode()
    assert len(largest) < JUTE_MAX_BUFFER // 2
