"""R5-R8: the active controller is stopped cleanly or killed, and restarted, repeatedly, with a standby
controller to take over. In the hard variant the leader of partition 0 is killed right after the
controller, so the election happens across the controller failover. No acknowledged write may be
lost; /controller_epoch increases with every failover."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.reliability.scenario import FULL_TIER_ONLY, Settings

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("tier", FULL_TIER_ONLY)
@pytest.mark.parametrize("kind", ["clean", "hard"])
def test_bouncing_the_active_controller_loses_no_acknowledged_write(
    open_scenario: Callable[[Settings], Any], kind: str, tier: str
) -> None:
    quick = tier == "quick"
    settings = Settings(f"controller-{kind}-bounce", tier=tier, controllers=2, rate=150 if quick else 250)
    with open_scenario(settings) as s:
        s.start_workload()
        s.wait_for_acks(300)
        epochs = [s.controller_epoch()]
        for _ in range(2 if quick else 5):
            controller = s.active_controller()
            since = time.monotonic()
            if kind == "hard":
                old = s.state(0)
                controller.kill()
                leader = s.broker(old.leader)
                leader.kill()
                s.wait_deregistered(old.leader)
            else:
                controller.stop()
            s.wait(
                lambda c=controller: s.active_controller() is not c, "the standby controller to take over", 30
            )
            s.figures.setdefault("controller_failover_s", []).append(round(time.monotonic() - since, 2))
            epochs.append(s.controller_epoch())
            if kind == "hard":
                s.wait_new_leader(0, old, since)
                leader.start()
                s.wait_in_isr(old.leader)
            controller.start()
            s.wait_for_acks(500 if quick else 1000)
        report = s.finish()
    assert report.valid, report.summary()
    assert report.stats["acked"] >= (1500 if quick else 5000), report.summary()
    assert epochs == sorted(set(epochs)), f"/controller_epoch did not increase with every failover: {epochs}"
