"""bench/consume_backoff.py: how it reads rdkafka_performance's output, and one short run against a real
broker with the real load generator (complete results; no figure is judged here, benchmarks judge speed)."""

from __future__ import annotations

import json

import pytest

from bench import consume_backoff
from tests.support.cluster import Cluster


def _stats(rxmsgs: int) -> str:
    return "% Stats: " + json.dumps({"name": "rdkafka#consumer-1", "rxmsgs": rxmsgs}).replace("{", "{ ", 1)


def test_the_rate_is_the_last_nonzero_consumed_line() -> None:
    output = "\n".join(
        [
            "% 0 messages (0 bytes) consumed in 0ms: 0 msgs/s (0.00 MB/s)",
            "% 5000000 messages (500000000 bytes) consumed in 2500ms: 2000000 msgs/s (200.00 MB/s)",
        ]
    )
    assert consume_backoff.consumed_rate(output) == 2_000_000
    assert consume_backoff.consumed_rate("% 0 messages (0 bytes) consumed in 0ms") is None


def test_idle_share_counts_intervals_without_messages_between_the_first_and_the_last() -> None:
    # From the interval in which the first message arrives to the one in which the last does: 6, two idle.
    # Before (the group join) and after do not count.
    received = [0, 0, 100, 200, 200, 200, 300, 400, 400]
    output = "\n".join(_stats(n) for n in received)
    assert consume_backoff.idle_share(output, total=400) == pytest.approx(2 / 6)
    assert consume_backoff.idle_share(_stats(0), total=400) is None
    assert consume_backoff.idle_share('% Stats: { "name": "rdkafka#consumer-1", broken', total=1) is None


@pytest.mark.integration
def test_a_run_against_a_broker_consumes_every_message(one_broker: Cluster) -> None:
    pytest.importorskip(
        "confluent_kafka", reason="the probe creates its topic with confluent-kafka's admin client"
    )
    if not consume_backoff.perf_binary().exists():
        pytest.skip(f"{consume_backoff.perf_binary()} is not built (../shared/bench/run-bench builds it)")
    result = consume_backoff.measure(one_broker.bootstrap, messages=20_000, reps=1, timeout=30)
    assert result["rate"] > 0 and result["short_backoff_rate"] > 0
    assert len(result["runs"]["default"]) == len(result["runs"]["short_backoff"]) == 1
