"""Fixtures of the broker's in-process tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.config import LogConfig
from storage.log_manager import LogManager


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    """A LogManager over one log dir in this test's tmp dir, shut down after the test."""
    manager = LogManager([str(tmp_path / "logs")], LogConfig())
    try:
        yield manager
    finally:
        manager.shutdown()
