"""R0: no faults. The control for the harness itself: everything acknowledged is read, in order, and
the three replicas of each partition are identical."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.reliability.scenario import Settings

pytestmark = pytest.mark.integration


def test_without_faults_every_acknowledged_write_is_read_and_replicas_agree(
    open_scenario: Callable[[Settings], Any],
) -> None:
    with open_scenario(Settings("baseline")) as s:
        s.start_workload()
        s.wait_for_acks(1500)
        report = s.finish()
    assert report.valid, report.summary()
    assert report.stats["acked"] >= 1500
    assert report.stats["indeterminate"] == 0 and report.stats["failed"] == 0, report.summary()
