"""The group coordinator's metrics (coordinator/coordinator_metrics.py) over a coordinator with fake
``__consumer_offsets`` replicas: groups by state, offsets, completed rebalances and committed-offset lag."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from coordinator.coordinator_metrics import register_group_metrics
from coordinator.group_metadata import OffsetAndMetadata
from protocol.errors import ErrorCode
from server_common.metrics import Metrics
from tests.coordinator.conftest import Env

PREFIX = "kafka_coordinator_group_groupmetadatamanager_"


class Replicas:
    """What ReplicaManager gives the lag: a hosted partition's log and its high watermark."""

    def __init__(self, high_watermarks: dict[tuple[str, int], int]) -> None:
        self.high_watermarks = high_watermarks

    def get_partition(self, topic: str, partition: int) -> Any:
        hw = self.high_watermarks.get((topic, partition))
        return None if hw is None else SimpleNamespace(log=SimpleNamespace(high_watermark=hw))


async def commit(env: Env, group: str, offsets: dict[tuple[str, int], int]) -> None:
    result = await env.coordinator.handle_commit_offsets(
        group, "", None, -1, {tp: OffsetAndMetadata(o, -1, "", 1) for tp, o in offsets.items()}
    )
    assert set(result.values()) == {ErrorCode.NONE}


def registered(env: Env, replicas: Replicas | None = None) -> Metrics:
    metrics = Metrics(process=False)
    register_group_metrics(metrics, env.coordinator, replicas or Replicas({}))
    return metrics


async def test_groups_are_counted_by_state_and_in_total(env: Env) -> None:
    metrics = registered(env)
    assert metrics.sample(PREFIX + "numgroups") == 0
    await env.stable_group("stable", 2)
    await commit(env, "empty", {("t", 0): 3})
    assert metrics.sample(PREFIX + "numgroups") == 2
    assert metrics.sample(PREFIX + "numgroups", {"state": "Stable"}) == 1
    assert metrics.sample(PREFIX + "numgroups", {"state": "Empty"}) == 1
    assert metrics.sample(PREFIX + "numgroups", {"state": "PreparingRebalance"}) == 0
    assert metrics.sample(PREFIX + "numgroupsstable") == 1
    assert metrics.sample(PREFIX + "numgroupsempty") == 1
    assert metrics.sample(PREFIX + "numgroupspreparingrebalance") == 0
    assert metrics.sample(PREFIX + "numgroupscompletingrebalance") == 0
    assert metrics.sample(PREFIX + "numgroupsdead") == 0
    assert metrics.sample(PREFIX + "numoffsets") == 1


async def test_completed_rebalances_count_each_leader_assignment(env: Env) -> None:
    metrics = registered(env)
    name = "kafka_server_group_coordinator_metrics_group_completed_rebalance_total"
    assert metrics.sample(name) == 0
    await env.stable_group("a", 3)  # one rebalance, whatever the number of members
    assert metrics.sample(name) == 1
    await env.stable_group("b", 1)
    assert metrics.sample(name) == 2


async def test_lag_is_the_high_watermark_here_minus_the_committed_offset(env: Env) -> None:
    replicas = Replicas({("t", 0): 10, ("t", 1): 4})
    metrics = registered(env, replicas)
    await commit(env, "g", {("t", 0): 7, ("t", 1): 4, ("elsewhere", 0): 5})
    await commit(env, "h", {("t", 0): 10})

    def lag(group: str, topic: str, partition: int) -> float | None:
        labels = {"group": group, "topic": topic, "partition": str(partition)}
        return metrics.sample("kafka_consumergroup_lag", labels)

    assert lag("g", "t", 0) == 3
    assert lag("g", "t", 1) == 0
    assert lag("h", "t", 0) == 0
    # A partition not hosted here has no lag series, but its committed offset is known.
    assert lag("g", "elsewhere", 0) is None
    current = {"group": "g", "topic": "elsewhere", "partition": "0"}
    assert metrics.sample("kafka_consumergroup_current_offset", current) == 5
    # Read when scraped: the high watermark moves, the lag follows.
    replicas.high_watermarks[("t", 0)] = 25
    assert lag("g", "t", 0) == 18
