"""Network partitions (reliability.md J1, J2 and the negative control). Broker 1 leads every partition.

J1: the leader is cut off from the other brokers, ZooKeeper and the controllers (clients still reach
it). It cannot acknowledge an acks=all write — its followers cannot fetch, and it cannot shrink the ISR
without the controller — so its sends time out; the controller elects a leader from the ISR once the
leader's session expires; after healing the old leader truncates to the new leader epoch and writes
are acknowledged again.

J2 (Jepsen 2013): the followers are cut off from the leader, the ISR shrinks to the leader alone, the
leader is killed, the followers are healed. With min.insync.replicas=2 the writes of that window are
refused (NOT_ENOUGH_REPLICAS) and the partition waits, offline, for its last in-sync replica: nothing
acknowledged is lost. The negative control runs it with min.insync.replicas=1 and unclean leader
election on, where Kafka acknowledges writes that an unclean election then throws away: the checker
must report them lost."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.reliability.scenario import FULL_TIER_ONLY, TIERS, Settings

pytestmark = pytest.mark.integration

REFUSED = "NOT_ENOUGH_REPLICAS"
BROKER_1_LEADS = {0: [1, 2, 3], 1: [1, 3, 2], 2: [1, 2, 3]}


def _needs_partitions(s: Any) -> None:
    if s.sandbox.partition_unavailable is not None:
        pytest.skip(f"network partitions unavailable: {s.sandbox.partition_unavailable}")


@pytest.mark.parametrize("tier", TIERS)
def test_an_isolated_leader_is_replaced_and_fenced_without_losing_an_acknowledged_write(
    open_scenario: Callable[[Settings], Any], tier: str
) -> None:
    quick = tier == "quick"
    with open_scenario(Settings("isolated-leader", tier=tier, assignment=BROKER_1_LEADS)) as s:
        _needs_partitions(s)
        s.start_workload()
        s.wait_for_acks(300)
        for _ in range(1 if quick else 3):
            old = s.state(0)
            since = time.monotonic()
            s.partition([f"broker-{old.leader}"], [n for n in s.nodes if n != f"broker-{old.leader}"])
            s.wait_new_leader(0, old, since)
            # Clients still reach the isolated broker, which still answers Metadata with its old view
            # (as Kafka's would), so they may keep sending to it until the network heals: what it
            # appends meanwhile must never be acknowledged, which the checker verifies.
            time.sleep(5 if quick else 15)
            s.heal()
            s.wait_in_isr(old.leader)
            s.wait_for_acks(300)
        report = s.finish()
    assert report.valid, report.summary()


def _isolate_followers_then_kill_the_leader(s: Any, min_insync: int) -> None:
    """Cuts brokers 2 and 3 off broker 1 (not from ZooKeeper), waits until broker 1 leads alone, lets
    writes meet the shrunken ISR, kills broker 1 and heals the network."""
    s.partition(["broker-1"], ["broker-2", "broker-3"])
    s.wait(
        lambda: all(list(s.state(p).isr) == [1] for p in range(s.settings.partitions)),
        "the ISR to shrink to the leader",
        15,
    )
    if min_insync > 1:
        refused = s.count_errors(REFUSED) + 50
        s.wait(lambda: s.count_errors(REFUSED) >= refused, "writes refused with NOT_ENOUGH_REPLICAS", 10)
    else:
        s.wait_for_acks(300)  # acknowledged by broker 1 alone
    s.broker(1).kill()
    s.wait_deregistered(1)
    s.sandbox.heal()
    s.mark("heal-network")


@pytest.mark.parametrize("tier", FULL_TIER_ONLY)
def test_a_leader_cut_off_from_its_followers_then_killed_loses_nothing_with_min_insync_2(
    open_scenario: Callable[[Settings], Any], tier: str
) -> None:
    quick = tier == "quick"
    settings = Settings("jepsen-2013", tier=tier, assignment=BROKER_1_LEADS, rate=150 if quick else 250)
    with open_scenario(settings) as s:
        _needs_partitions(s)
        s.start_workload()
        s.wait_for_acks(300)
        for _ in range(1 if quick else 3):
            _isolate_followers_then_kill_the_leader(s, min_insync=2)
            time.sleep(3)  # no clean leader: the partitions stay offline until broker 1 is back
            assert all(s.state(p).leader == -1 for p in range(s.settings.partitions)), s.describe()
            s.broker(1).start()
            s.wait_healthy(30)
            s.wait_for_acks(300)
        refusals = s.count_errors(REFUSED)
        report = s.finish()
    assert report.valid, report.summary()
    assert refusals >= 50, report.summary()


@pytest.mark.slow  # the checker's negative control; the quick tier keeps the scenarios themselves
def test_the_checker_catches_the_loss_of_an_unclean_election_negative_control(
    open_scenario: Callable[[Settings], Any],
) -> None:
    settings = Settings(
        "jepsen-2013-unclean",
        assignment=BROKER_1_LEADS,
        min_insync_replicas=1,
        unclean_leader_election=True,
    )
    with open_scenario(settings) as s:
        _needs_partitions(s)
        s.start_workload()
        s.wait_for_acks(300)
        _isolate_followers_then_kill_the_leader(s, min_insync=1)
        s.wait(lambda: s.state(0).leader in (2, 3), "an unclean election", 30)
        s.wait_for_acks(200)
        report = s.finish()
    assert not report.valid and report.count("lost-write") > 0, report.summary()
