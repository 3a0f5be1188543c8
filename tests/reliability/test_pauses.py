"""A follower paused past ``replica.lag.time.max.ms`` (the issue's ISR scenario) and J3, the zombie
leader paused past its ZooKeeper session. Broker 1 leads every partition, so the pauses are aimed.

While one follower is paused the leader shrinks the ISR by itself (AlterPartition) and acks=all writes
go on with 2 of 3 replicas (min.insync.replicas=2); with both paused the ISR is the leader alone and
writes are refused with NOT_ENOUGH_REPLICAS. A zombie leader resumed after its
successor was elected acknowledges nothing: its followers have moved on and the controller fences it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.reliability.scenario import FULL_TIER_ONLY, TIERS, Settings

pytestmark = pytest.mark.integration

REFUSED = "NOT_ENOUGH_REPLICAS"
BROKER_1_LEADS = {0: [1, 2, 3], 1: [1, 3, 2], 2: [1, 2, 3]}


def _isr_without(s: Any, broker_id: int) -> bool:
    return all(broker_id not in s.state(p).isr for p in range(s.settings.partitions))


@pytest.mark.parametrize("tier", TIERS)
def test_a_paused_follower_leaves_the_isr_and_acks_all_holds_to_min_insync_replicas(
    open_scenario: Callable[[Settings], Any], tier: str
) -> None:
    quick = tier == "quick"
    # A session long enough that ZooKeeper does not drop the paused brokers: the leader must notice.
    settings = Settings(
        "follower-pause", tier=tier, assignment=BROKER_1_LEADS, session_timeout_ms=12_000, rate=150
    )
    with open_scenario(settings) as s:
        s.start_workload()
        s.wait_for_acks(300)
        for _ in range(1 if quick else 3):
            s.broker(3).pause()
            s.wait(lambda: _isr_without(s, 3), "the leader to drop paused broker 3 from the ISR", 10)
            s.wait_for_acks(300)  # 2 of 3 in sync: acks=all goes on
            failed = s.count_errors(REFUSED)
            s.broker(2).pause()
            s.wait(lambda: _isr_without(s, 2), "the ISR to shrink to the leader alone", 10)
            refused = failed + 50
            s.wait(
                lambda n=refused: s.count_errors(REFUSED) >= n, "writes refused with NOT_ENOUGH_REPLICAS", 10
            )
            s.broker(2).resume()
            s.broker(3).resume()
            s.wait_in_isr(2)
            s.wait_in_isr(3)
            s.wait_for_acks(300)
        refusals = s.count_errors(REFUSED)
        report = s.finish()
    assert report.valid, report.summary()
    assert refusals >= 50, report.summary()


@pytest.mark.parametrize("tier", FULL_TIER_ONLY)
def test_a_zombie_leader_resumed_after_its_successor_took_over_acknowledges_nothing_lost(
    open_scenario: Callable[[Settings], Any], tier: str
) -> None:
    """J3: SIGSTOP the leader past its session, wait for the new leader, SIGCONT."""
    quick = tier == "quick"
    with open_scenario(Settings("zombie-leader", tier=tier, assignment=BROKER_1_LEADS)) as s:
        s.start_workload()
        s.wait_for_acks(300)
        for _ in range(1 if quick else 3):
            old = s.state(0)
            zombie = s.broker(old.leader)
            since = time.monotonic()
            zombie.pause()
            s.wait_deregistered(old.leader)
            s.wait_new_leader(0, old, since)
            s.wait_for_acks(300)
            zombie.resume()
            s.wait_in_isr(old.leader)
            assert s.state(0).leader_epoch > old.leader_epoch
            s.wait_for_acks(300)
        report = s.finish()
    assert report.valid, report.summary()
