"""Exactly-once through faults (issue 17), as Kafka's tests/kafkatest/tests/core/transactions_test.py:
a consume-transform-produce copier moves an input topic to an output topic in transactions while
the broker that is its transaction coordinator, the leader of an output partition and the broker that
is its group coordinator are SIGKILLed in turn (and restarted), and the copier itself is SIGKILLed
with a transaction open. Afterwards a read_committed read of the output holds every input record
exactly once and no record of an aborted transaction, and the log's extra records are all in aborted
transactions (txn_checker.py).

The negative controls run the same copier and the same kills without transactions: offsets committed
after the produce (duplicates) or before it (loss). The checker must find them invalid."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.reliability.scenario import FULL, FULL_TIER_ONLY
from tests.reliability.txn_scenario import (
    GROUP_COORDINATOR,
    OUTPUT_LEADER,
    TRANSACTION_COORDINATOR,
    TxnScenario,
    TxnSettings,
)

pytestmark = pytest.mark.integration

BROKER_ROLES = (TRANSACTION_COORDINATOR, OUTPUT_LEADER, GROUP_COORDINATOR)


def _run(s: TxnScenario, rounds: int, copier_kills: int) -> None:
    """The faults: ``rounds`` times each broker role in turn, then the copier killed mid-transaction
    ``copier_kills`` times."""
    s.start_copying()
    s.wait_progress(s.settings.progress_per_fault)
    for _ in range(rounds):
        for role in BROKER_ROLES:
            s.kill_broker(role)
    for _ in range(copier_kills):
        s.kill_copier()


# Fault runs belong to the full tier; the quick variant (about a minute) runs there too, first.
@pytest.mark.parametrize("tier", FULL_TIER_ONLY)
def test_the_copier_is_exactly_once_through_coordinator_leader_and_copier_kills(
    open_scenario: Callable[..., Any], tier: str
) -> None:
    quick = tier == "quick"
    settings = TxnSettings("txn-copier", tier=tier, seed_rate=200 if quick else 300)
    with open_scenario(settings, TxnScenario) as s:
        _run(s, rounds=1 if quick else 3, copier_kills=1 if quick else 3)
        report = s.finish()
    assert report.valid, report.summary()
    assert report.stats["input"] >= (1500 if quick else 5000), report.summary()
    # The copier's killed transaction was aborted: its records are in the log, behind an ABORT marker.
    assert report.stats["abort_markers"] >= 1, report.summary()
    assert [k["for"] for k in s.figures["killed"]] == list(BROKER_ROLES) * (1 if quick else 3)


@pytest.mark.parametrize(
    ("mode", "anomaly"), [("at-least-once", "duplicate"), ("at-most-once", "lost")], ids=["dup", "loss"]
)
@pytest.mark.parametrize("tier", [FULL])
def test_the_copier_without_transactions_is_caught(
    open_scenario: Callable[..., Any], tier: str, mode: str, anomaly: str
) -> None:
    """The negative controls: the same kills, an idempotent producer and offsets committed after the
    produce (at-least-once: the killed copier's batch is copied twice) or before it (at-most-once:
    the killed copier's batch is never copied)."""
    settings = TxnSettings(f"txn-copier-{mode} (negative control)", tier=tier, mode=mode)
    with open_scenario(settings, TxnScenario) as s:
        _run(s, rounds=1, copier_kills=2)
        report = s.finish()
    assert not report.valid, report.summary()
    assert report.count(anomaly) >= 1, report.summary()
