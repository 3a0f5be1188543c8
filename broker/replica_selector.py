"""Fetch from followers (KIP-392): which replica a consumer should read from.

``replica.selector.class`` names the selector, as in Kafka: unset (Samsa's and Kafka's default) or
``org.apache.kafka.common.replica.LeaderSelector`` keeps every consumer on the leader;
``org.apache.kafka.common.replica.RackAwareReplicaSelector`` sends a consumer whose ``client.rack``
matches the ``broker.rack`` of an in-sync replica to that replica (the leader itself when it is in the
consumer's rack; else the most caught-up such replica). Any other name stops the broker at startup:
Samsa cannot load Java classes.

Only the leader chooses (Kafka's ``ReplicaManager.findPreferredReadReplica``), only for consumers with
client metadata (Fetch v11+), and only among the replicas that can serve the fetch offset: the leader
and the ISR followers whose log end is at or past it and whose log start is not after it. A choice
other than the leader goes back in the Fetch response's ``preferred_read_replica``, without records;
the consumer then fetches from that replica, which serves it up to its own high watermark.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from server_common.config import ConfigError

if TYPE_CHECKING:
    from broker.metadata_cache import BrokerInfo
    from broker.partition import Partition

LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
NO_PREFERRED_REPLICA = -1


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """What a selector knows of one replica (Kafka's ReplicaView)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int  # 0 for the leader

    def most_caught_up_key(self) -> tuple[int, int, int]:
        """Kafka's ReplicaView.comparator: the larger log end, then the more recently caught up, then
        the larger broker id."""
        return self.log_end_offset, -self.time_since_last_caught_up_ms, self.broker_id


class ReplicaSelector(Protocol):
    def select(
        self,
        topic: str,
        partition: int,
        client_rack: str,
        leader: ReplicaView,
        replicas: Collection[ReplicaView],
    ) -> ReplicaView | None:
        """The replica the consumer should read from (``replicas`` includes the leader); None: no
        preference (the leader)."""
        ...


class LeaderSelector:
    """Kafka's LeaderSelector: always the leader."""

    def select(
        self,
        topic: str,
        partition: int,
        client_rack: str,
        leader: ReplicaView,
        replicas: Collection[ReplicaView],
    ) -> ReplicaView | None:
        return leader


class RackAwareReplicaSelector:
    """Kafka's RackAwareReplicaSelector: a replica in the consumer's rack, the leader when it is there
    or when no replica is (or when the consumer names no rack), else the most caught-up one there."""

    def select(
        self,
        topic: str,
        partition: int,
        client_rack: str,
        leader: ReplicaView,
        replicas: Collection[ReplicaView],
    ) -> ReplicaView | None:
        if not client_rack:
            return leader
        same_rack = [r for r in replicas if r.rack == client_rack]
        if not same_rack or leader in same_rack:
            return leader
        return max(same_rack, key=ReplicaView.most_caught_up_key)


SELECTORS: dict[str, type[LeaderSelector] | type[RackAwareReplicaSelector]] = {
    LEADER_SELECTOR: LeaderSelector,
    RACK_AWARE_SELECTOR: RackAwareReplicaSelector,
}


def replica_selector_from_config(class_name: str | None) -> ReplicaSelector | None:
    """The selector ``replica.selector.class`` names; None when unset (consumers read the leader).
    A class Samsa does not provide is a ConfigError: the broker refuses to start."""
    if class_name is None or not class_name.strip():
        return None
    selector = SELECTORS.get(class_name.strip())
    if selector is None:
        raise ConfigError(
            f"replica.selector.class={class_name!r} is not supported: Samsa cannot load Java classes; "
            f"use {RACK_AWARE_SELECTOR} or {LEADER_SELECTOR} (or leave it unset)"
        )
    return selector()


def preferred_read_replica(
    selector: ReplicaSelector | None,
    partition: Partition,
    client_rack: str,
    fetch_offset: int,
    brokers: Mapping[int, BrokerInfo],
    now_ms: int,
) -> int:
    """Kafka's findPreferredReadReplica on the leader of ``partition``: the broker id the consumer
    should fetch from instead, or NO_PREFERRED_REPLICA (no selector, not the leader, or the leader is
    the choice). ``brokers``: the live brokers by id (a replica on a broker not alive is no candidate)."""
    if selector is None or not partition.is_leader or partition.log is None:
        return NO_PREFERRED_REPLICA
    leader_info = brokers.get(partition.broker_id)
    leader = ReplicaView(
        partition.broker_id,
        leader_info.rack if leader_info else None,
        partition.log.log_end_offset,
        0,
    )
    candidates = [leader]
    for replica, state in partition.followers.items():
        info = brokers.get(replica)
        # Out-of-sync followers may lag forever: a consumer sent there would fall behind for good.
        if (
            info is not None
            and replica in partition.isr
            and state.log_end_offset >= fetch_offset
            and state.log_start_offset <= fetch_offset
        ):
            candidates.append(
                ReplicaView(
                    replica, info.rack, state.log_end_offset, max(0, now_ms - state.last_caught_up_ms)
                )
            )
    chosen = selector.select(partition.topic, partition.partition, client_rack, leader, candidates)
    if chosen is None or chosen.broker_id == leader.broker_id:
        return NO_PREFERRED_REPLICA
    return chosen.broker_id
