"""The group coordinator's metrics in a broker (``register_group_metrics``).

Kafka's GroupMetadataManager gauges (``kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups``,
``NumGroupsPreparingRebalance``, ..., ``NumOffsets``), the GroupCoordinator's
``group-coordinator-metrics`` sensors (``group-completed-rebalance-count``, ``offset-expiration-count``),
and the committed-offset lag of each group and partition that Burrow, kafka-lag-exporter and
kafka_exporter compute from outside (``kafka_consumergroup_lag``), computed here from the inside: for the
groups this broker coordinates, lag = the partition's high watermark on this broker - the committed
offset, for the partitions this broker hosts (a leader's high watermark is the one consumers see; a
follower's trails it by at most its fetch lag). A partition hosted elsewhere has no lag series here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from coordinator.group_metadata import GroupState
from server_common.metrics import LabelValues, Metrics

if TYPE_CHECKING:
    from coordinator.group_coordinator import GroupCoordinator


class HostedPartitions(Protocol):
    """Where a partition's high watermark is read: the broker's ReplicaManager."""

    def get_partition(self, topic: str, partition: int) -> Any:
        """The partition hosted here (``.log.high_watermark``), or None."""


# Kafka's per-state gauge names, by state.
STATE_GAUGES: dict[GroupState, str] = {
    GroupState.PREPARING_REBALANCE: "numgroupspreparingrebalance",
    GroupState.COMPLETING_REBALANCE: "numgroupscompletingrebalance",
    GroupState.STABLE: "numgroupsstable",
    GroupState.DEAD: "numgroupsdead",
    GroupState.EMPTY: "numgroupsempty",
}
PREFIX = "kafka_coordinator_group_groupmetadatamanager_"


def high_watermark(replicas: HostedPartitions, topic: str, partition: int) -> int | None:
    hosted = replicas.get_partition(topic, partition)
    log = getattr(hosted, "log", None) if hosted is not None else None
    return None if log is None else int(log.high_watermark)


def register_group_metrics(
    metrics: Metrics, coordinator: GroupCoordinator, replicas: HostedPartitions
) -> None:
    """Defines the group coordinator's metrics in ``metrics``, read from ``coordinator``'s groups and
    ``replicas``' high watermarks when scraped."""
    manager = coordinator.manager

    def states() -> dict[GroupState, int]:
        counts = dict.fromkeys(GroupState, 0)
        for group in manager.groups.values():
            counts[group.state] += 1
        return counts

    def num_groups() -> list[tuple[LabelValues, int]]:
        counts = states()
        return [((), sum(counts.values()))] + [((state.value,), n) for state, n in counts.items()]

    metrics.gauge(
        PREFIX + "numgroups",
        "Groups this broker coordinates: all of them (no label), and by state",
        num_groups,
        ("state",),
    )
    for state, name in STATE_GAUGES.items():
        metrics.gauge(
            PREFIX + name,
            f"Groups this broker coordinates in state {state.value}",
            lambda state=state: states()[state],  # type: ignore[misc]
        )
    metrics.gauge(
        PREFIX + "numoffsets",
        "Committed offsets of the groups this broker coordinates",
        lambda: sum(len(group.offsets) for group in manager.groups.values()),
    )
    coordinator.syncs.completed_rebalances = metrics.counter(
        "kafka_server_group_coordinator_metrics_group_completed_rebalance",
        "Rebalances completed (the leader's assignment received), Kafka's group-completed-rebalance-count",
    ).labels()
    coordinator.expired_offsets = metrics.counter(
        "kafka_server_group_coordinator_metrics_offset_expiration",
        "Committed offsets removed as expired (offsets.retention.minutes), Kafka's offset-expiration-count",
    ).labels()

    def committed() -> Iterator[tuple[str, str, int, int, int | None]]:
        """(group, topic, partition, committed offset, high watermark here or None)."""
        hws: dict[tuple[str, int], int | None] = {}
        for group in list(manager.groups.values()):
            if group.state is GroupState.DEAD:
                continue
            for (topic, partition), offset in group.offsets.items():
                key = (topic, partition)
                if key not in hws:
                    hws[key] = high_watermark(replicas, topic, partition)
                yield group.group_id, topic, partition, offset.value.offset, hws[key]

    def lag() -> list[tuple[LabelValues, int]]:
        return [
            ((group, topic, str(partition)), max(hw - offset, 0))
            for group, topic, partition, offset, hw in committed()
            if hw is not None and offset >= 0
        ]

    def current_offset() -> list[tuple[LabelValues, int]]:
        return [
            ((group, topic, str(partition)), offset) for group, topic, partition, offset, _ in committed()
        ]

    metrics.gauge(
        "kafka_consumergroup_lag",
        "A group's committed-offset lag on a partition: its high watermark here minus the committed offset",
        lag,
        ("group", "topic", "partition"),
    )
    metrics.gauge(
        "kafka_consumergroup_current_offset",
        "A group's committed offset on a partition",
        current_offset,
        ("group", "topic", "partition"),
    )
