"""Fixtures of the reliability scenarios: a Scenario factory, the run's figures file, and the summary
appended to tests/reliability/results.md when SAMSA_RECORD_RESULTS=1."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.scenario import Scenario, Settings
from tests.support.cluster import ROOT
from zk.server import ZooKeeperNotInstalled

RESULTS = Path(__file__).parent / "results.md"
RESULTS_HEADER = """# Reliability test results

Appended by `SAMSA_RECORD_RESULTS=1 make test [FULL=1]`; docs/reliability.md explains the columns.

| date | commit | scenario | tier | seed | s | acked | failed | info | lost | dup | new leader s | result |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
"""


def figures_path(config: pytest.Config) -> Path:
    return Path(str(config._tmp_path_factory.getbasetemp())) / "reliability-figures.jsonl"  # type: ignore[attr-defined]


@pytest.fixture
def open_scenario(tmp_path: Path, request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``with open_scenario(Settings(...)) as s:`` runs a scenario in this test's tmp dir;
    ``open_scenario(settings, kind)`` one of a Scenario subclass (``TxnScenario``)."""

    @contextmanager
    def open_(settings: Settings, kind: type[Scenario] = Scenario) -> Iterator[Scenario]:
        scenario = kind(settings, tmp_path / "scenario", figures_path(request.config))
        try:
            scenario.__enter__()
        except ZooKeeperNotInstalled as e:
            pytest.skip(str(e))
        try:
            yield scenario
        finally:
            scenario.__exit__(None, None, None)
            if os.environ.get("SAMSA_RECORD_RESULTS") == "1" and scenario.figures_line is not None:
                _record(scenario.figures_line)

    return open_


def _record(line: dict[str, Any]) -> None:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    leaders = line.get("new_leader_s") or []
    cells = [
        datetime.date.today().isoformat(),
        commit or "?",
        line["scenario"],
        line["tier"],
        str(line["seed"]),
        str(line["seconds"]),
        str(line["acked"]),
        str(line["failed"]),
        str(line["indeterminate"]),
        str(line["lost"]),
        str(line["duplicated"]),
        f"{min(leaders)}-{max(leaders)}" if leaders else "",
        "valid" if line["valid"] else "INVALID: " + json.dumps(line["anomalies"]),
    ]
    if not RESULTS.exists():
        RESULTS.write_text(RESULTS_HEADER)
    with open(RESULTS, "a", encoding="utf-8") as f:
        f.write("| " + " | ".join(cells) + " |\n")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    path = figures_path(config)
    if path.exists():
        terminalreporter.write_line(f"reliability figures: {path}")
