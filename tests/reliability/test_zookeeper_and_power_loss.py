"""J6, ZooKeeper restarted, and J8, the two KIP-101 scenarios.

J6: ZooKeeper is stopped for twice the session timeout and started again (its data kept). The data path
does not need it: leaders keep acknowledging while it is down, and the brokers' and controller's
sessions survive the outage (ZooKeeper restores them from its snapshot), so nothing is re-elected.
Afterwards the cluster still elects: a leader bounce completes.

J8, scenario 1: a follower is killed and restarted, and as soon as it is back in the ISR — its high
watermark a fetch behind the leader's — the leader is killed, so that a just-restarted replica may be
elected. Before KIP-101 it truncated to its high watermark on restart and lost acknowledged writes;
with leader epochs it keeps them. Scenario 2: every broker loses power at once (SIGKILL) and they
come back one by one, the old leader last: whichever replica is elected, the others truncate to it by
leader epoch and every replica ends identical (the checker compares them batch by batch)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.reliability.scenario import FULL_TIER_ONLY, TIERS, Settings

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("tier", FULL_TIER_ONLY)
def test_restarting_zookeeper_loses_no_acknowledged_write_and_elects_nothing(
    open_scenario: Callable[[Settings], Any], tier: str
) -> None:
    quick = tier == "quick"
    with open_scenario(Settings("zookeeper-restart", tier=tier)) as s:
        s.start_workload()
        s.wait_for_acks(300)
        for _ in range(1 if quick else 3):
            before = {p: s.state(p) for p in range(s.settings.partitions)}
            zookeeper = s.nodes["zookeeper"]
            zookeeper.stop()
            s.wait_for_acks(300)  # the leaders carry on without ZooKeeper
            time.sleep(2 * s.settings.session_timeout_ms / 1000)
            zookeeper.start()
            s.wait_for_acks(300)
            after = {p: s.state(p) for p in range(s.settings.partitions)}
            assert [(a.leader, a.leader_epoch) for a in after.values()] == [
                (b.leader, b.leader_epoch) for b in before.values()
            ], f"leaders changed across the ZooKeeper restart: {before} -> {after}"
        s.bounce_leader(0, hard=True)
        s.wait_for_acks(300)
        report = s.finish()
    assert report.valid, report.summary()


@pytest.mark.parametrize("tier", TIERS)
def test_a_just_restarted_follower_elected_leader_keeps_every_acknowledged_write(
    open_scenario: Callable[[Settings], Any], tier: str
) -> None:
    """KIP-101 scenario 1."""
    quick = tier == "quick"
    with open_scenario(Settings("kip-101-restarted-follower", tier=tier)) as s:
        s.start_workload()
        s.wait_for_acks(300)
        for _ in range(2 if quick else 6):
            old = s.state(0)
            follower = next(r for r in old.isr if r != old.leader)
            s.broker(follower).kill()
            s.wait_deregistered(follower)
            s.broker(follower).start()
            s.wait_in_isr(follower)
            since = time.monotonic()
            s.broker(old.leader).kill()
            s.wait_new_leader(0, old, since)
            s.broker(old.leader).start()
            s.wait_in_isr(old.leader)
            s.wait_for_acks(200)
        report = s.finish()
    assert report.valid, report.summary()


@pytest.mark.parametrize("tier", FULL_TIER_ONLY)
def test_every_broker_losing_power_at_once_leaves_identical_replicas(
    open_scenario: Callable[[Settings], Any], tier: str
) -> None:
    """KIP-101 scenario 2."""
    quick = tier == "quick"
    with open_scenario(Settings("kip-101-power-loss", tier=tier)) as s:
        s.start_workload()
        s.wait_for_acks(300)
        for _ in range(1 if quick else 4):
            leader = s.leader(0)
            for broker_id in s.broker_ids:
                s.broker(broker_id).kill()
            for broker_id in s.broker_ids:
                s.wait_deregistered(broker_id)
            for broker_id in sorted(s.broker_ids, key=lambda b: b == leader):
                s.broker(broker_id).start()
            s.wait_healthy(30)
            s.wait_for_acks(300)
        report = s.finish()
    assert report.valid, report.summary()
