"""Fixtures for storage tests: a controllable clock and a log factory."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from storage.config import LogConfig
from storage.log import Log
from tests.storage.helpers import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_log(tmp_path, clock) -> Callable[..., Log]:
    """Opens (or reopens) the log `topic-0` under tmp_path; keyword args are LogConfig overrides by
    Kafka name, plus Log constructor arguments."""
    opened: list[Log] = []

    def make(props: dict | None = None, name: str = "topic-0", **kwargs) -> Log:
        config = LogConfig.from_props(props or {})
        kwargs.setdefault("time_ms", clock)
        log = Log(str(tmp_path / name), config, **kwargs)
        opened.append(log)
        return log

    yield make
    for log in opened:
        if not log.closed:
            log.close_handlers()
