"""GroupConfig: the broker's group.* settings that the group coordinator follows."""

from __future__ import annotations

from dataclasses import dataclass

INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class GroupConfig:
    """Kafka's group.* broker settings, with its defaults."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = INT32_MAX
    initial_rebalance_delay_ms: int = 3000
