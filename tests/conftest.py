"""Test tiers and shared fixtures.

The quick tier runs by default. Tests marked ``slow`` (soaks, fault injection, exhaustive sweeps) run
only with ``pytest --full`` (``make test FULL=1``); otherwise they are skipped with that reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import BrokerProcess


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true", help="also run the slow tier (soak and fault tests)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--full"):
        return
    skip = pytest.mark.skip(reason="slow tier: run with `make test FULL=1` (pytest --full)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A real ``samsa broker`` process on a free port, stopped by PID after the test."""
    process = BrokerProcess(tmp_path / "broker")
    process.start()
    try:
        yield process
    finally:
        process.stop()
