"""Replica assignment as Kafka's AdminUtils and AdminZkClient do it, for new topics and new partitions.

Without racks: the first replica of partition ``i`` goes to broker ``(i + start) mod n`` (``start``
random), the others follow it with a shift that grows by one after every ``n`` partitions, so that the
followers of one broker's partitions spread over the other brokers. With racks (every broker has one)
the same walk runs over a rack-alternated broker list, and a follower is skipped while its rack (or
the broker itself) already holds a replica of the partition and some rack (or broker) holds none.

Also here: Kafka's checks of an explicit assignment, for CreateTopics and for CreatePartitions. Every
failure is a ``KafkaError`` with Kafka's error code and message.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True)
class BrokerMetadata:
    id: int
    rack: str | None = None


def ignore_partial_racks(brokers: Sequence[BrokerMetadata]) -> list[BrokerMetadata]:
    """Kafka's RackAwareMode.Safe (topic auto-creation): racks count only when every broker has one."""
    if all(b.rack is not None for b in brokers):
        return list(brokers)
    return [BrokerMetadata(b.id) for b in brokers]


def check_racks_enforced(brokers: Sequence[BrokerMetadata]) -> None:
    """Kafka's RackAwareMode.Enforced (AdminZkClient.getBrokerMetadatas, which CreatePartitions uses,
    a manual assignment included): some brokers with a rack and some without is refused."""
    with_rack = sum(1 for b in brokers if b.rack is not None)
    if 0 < with_rack < len(brokers):
        # Kafka's AdminOperationException, which reaches the client as UNKNOWN_SERVER_ERROR.
        raise KafkaError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "Not all brokers have rack information. Add --disable-rack-aware in command line to make "
            "replica assignment without rack information.",
        )


def assign_replicas(
    brokers: Sequence[BrokerMetadata],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """partition -> replicas (the first is the preferred leader), numbered from ``start_partition_id``
    (0 when negative). A negative ``fixed_start_index`` draws the start and the first shift at random."""
    if num_partitions <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
        )
    rng = rng or random.Random()
    racks = {b.id: b.rack for b in brokers if b.rack is not None}
    if not racks:
        return _assign(
            [b.id for b in brokers],
            None,
            num_partitions,
            replication_factor,
            fixed_start_index,
            start_partition_id,
            rng,
        )
    if len(racks) < len(brokers):
        # Kafka's AdminOperationException, which reaches the client as UNKNOWN_SERVER_ERROR.
        raise KafkaError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "Not all brokers have rack information for replica rack aware assignment.",
        )
    return _assign(
        rack_alternated_broker_list(racks),
        racks,
        num_partitions,
        replication_factor,
        fixed_start_index,
        start_partition_id,
        rng,
    )


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """The brokers taken one rack at a time, racks in name order and brokers in id order within a rack:
    {0: r1, 1: r3, 2: r3, 3: r2, 4: r2, 5: r1} -> [0, 3, 1, 5, 4, 2]."""
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in sorted(broker_racks.items()):
        by_rack.setdefault(rack, []).append(broker_id)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(broker_racks):
        result.extend(queue[depth] for queue in queues if depth < len(queue))
        depth += 1
    return result


def _replica_index(first_index: int, shift: int, j: int, n: int) -> int:
    return (first_index + 1 + (shift + j) % (n - 1)) % n


def _assign(
    arranged: list[int],
    racks: Mapping[int, str] | None,
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    n = len(arranged)
    num_racks = len(set(racks.values())) if racks else 0
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition = max(0, start_partition_id)
    assignment: dict[int, list[int]] = {}
    for _ in range(num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first_index = (partition + start_index) % n
        leader = arranged[first_index]
        replicas = [leader]
        if racks is None:
            replicas += [
                arranged[_replica_index(first_index, shift, j, n)] for j in range(replication_factor - 1)
            ]
        else:
            racks_used, k = {racks[leader]}, 0
            for _ in range(replication_factor - 1):
                while True:
                    broker = arranged[_replica_index(first_index, shift * num_racks, k, n)]
                    k += 1
                    rack = racks[broker]
                    # Prefer a rack without a replica, then a broker without one; once every rack (or
                    # broker) has one, anything goes.
                    if (rack not in racks_used or len(racks_used) == num_racks) and (
                        broker not in replicas or len(replicas) == n
                    ):
                        replicas.append(broker)
                        racks_used.add(rack)
                        break
        assignment[partition] = replicas
        partition += 1
    return assignment


def validate_topic_assignment(assignment: Mapping[int, Sequence[int]], registered: set[int]) -> None:
    """CreateTopics' checks of an explicit assignment (AdminZkClient.validateTopicCreate), plus the
    check Kafka's KRaft controller makes that every broker named is registered."""
    if not assignment:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The replica assignment is empty.")
    sizes = {len(replicas) for replicas in assignment.values()}
    if len(sizes) != 1:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas"
        )
    if sizes == {0}:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Cannot have replication factor of 0.")
    for partition, replicas in sorted(assignment.items()):
        if len(set(replicas)) != len(replicas):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Duplicate replica assignment found: partition {partition} has replicas {list(replicas)}",
            )
    if sorted(assignment) != list(range(len(assignment))):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        )
    unknown = sorted({b for replicas in assignment.values() for b in replicas} - registered)
    if unknown:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes brokers {unknown}, which are not registered.",
        )


def new_partitions_assignment(
    topic: str,
    existing: Mapping[int, Sequence[int]],
    brokers: Sequence[BrokerMetadata],
    new_count: int,
    manual: Sequence[Sequence[int]] | None = None,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """CreatePartitions: the replicas of partitions ``len(existing)`` .. ``new_count - 1``, either
    ``manual`` (checked as Kafka checks it) or continuing the pattern of partition 0: the walk starts at
    partition 0's first replica and keeps its replication factor."""
    check_racks_enforced(brokers)  # before anything else, as Kafka reads the brokers first
    old_count = len(existing)
    if new_count < old_count:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {old_count} partitions, which is higher than the requested {new_count}.",
        )
    if new_count == old_count:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {old_count} partitions.")
    if 0 not in existing:
        raise KafkaError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is missing.",
        )
    replication_factor = len(existing[0])
    broker_ids = {b.id for b in brokers}
    to_add = new_count - old_count
    if manual is not None:
        unknown = sorted({b for replicas in manual for b in replicas} - broker_ids)
        if unknown:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.",
            )
        if len(manual) != to_add:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {to_add} but {len(manual)} assignments provided.",
            )
        proposed = {old_count + i: list(replicas) for i, replicas in enumerate(manual)}
        _validate_added(proposed, replication_factor)
        return proposed
    first = existing[0][0]
    start_index = next((i for i, b in enumerate(brokers) if b.id >= first), 0)
    return assign_replicas(brokers, to_add, replication_factor, start_index, old_count, rng)


def _validate_added(proposed: Mapping[int, list[int]], replication_factor: int) -> None:
    for partition, replicas in sorted(proposed.items()):
        if not replicas:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Cannot have replication factor of 0 for partition id {partition}.",
            )
        if len(set(replicas)) != len(replicas):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, replicas))} for partition id {partition}.",
            )
    bad = sorted((p, len(r)) for p, r in proposed.items() if len(r) != replication_factor)
    if bad:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Inconsistent replication factor between partitions, partition 0 has {replication_factor} "
            f"while partitions [{', '.join(str(p) for p, _ in bad)}] have replication factors "
            f"[{', '.join(str(n) for _, n in bad)}], respectively.",
        )
