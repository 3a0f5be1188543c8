"""R1-R4 and R9 (ducktape's replication_test, reliability.md §4.4): the leader of partition 0 is
stopped cleanly (controlled shutdown) or killed with SIGKILL, and restarted, again and again, under
acks=all producers and assign-mode consumers. No acknowledged write may be lost; the leader epoch of
the partition strictly increases with every bounce; each restarted broker rejoins the ISR."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.reliability.scenario import TIERS, Settings

pytestmark = pytest.mark.integration


def _bounce_repeatedly(s: Any, bounces: int, kind: str, acks_between: int) -> list[int]:
    """Bounces partition 0's leader (``kind`` clean, hard, or alternating); returns the partition's
    leader epoch after each bounce."""
    epochs = []
    for i in range(bounces):
        s.bounce_leader(0, hard=kind == "hard" or (kind == "alternating" and i % 2 == 1))
        epochs.append(s.state(0).leader_epoch)
        s.wait_for_acks(acks_between)
    return epochs


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("kind", ["clean", "hard"])
def test_bouncing_the_leader_loses_no_acknowledged_write(
    open_scenario: Callable[[Settings], Any], kind: str, tier: str
) -> None:
    quick = tier == "quick"
    settings = Settings(f"leader-{kind}-bounce", tier=tier, rate=150 if quick else 250)
    with open_scenario(settings) as s:
        s.start_workload()
        s.wait_for_acks(300)
        epochs = _bounce_repeatedly(s, 2 if quick else 5, kind, 500 if quick else 1000)
        report = s.finish()
    assert report.valid, report.summary()
    assert report.stats["acked"] >= (1500 if quick else 5000), report.summary()
    assert epochs == sorted(set(epochs)), f"partition 0's leader epochs did not increase: {epochs}"


@pytest.mark.parametrize("tier", TIERS)
def test_the_idempotent_producer_duplicates_nothing_across_bounces(
    open_scenario: Callable[[Settings], Any], tier: str
) -> None:
    """R9: clean and hard bounces in turn, with enable.idempotence and gzip: duplicates are fatal. (A
    clean bounce is where a producer without idempotence writes duplicates: see workload.py.)"""
    quick = tier == "quick"
    settings = Settings(
        "leader-bounce-idempotent",
        tier=tier,
        idempotent=True,
        compression="gzip",
        rate=150 if quick else 250,
    )
    with open_scenario(settings) as s:
        s.start_workload()
        s.wait_for_acks(300)
        _bounce_repeatedly(s, 2 if quick else 6, "alternating", 500 if quick else 1000)
        report = s.finish()
    assert report.valid, report.summary()
    assert report.stats["duplicated"] == 0
    assert report.stats["acked"] >= (1500 if quick else 5000), report.summary()
