"""``samsa pipeline``: the command is registered, and ``generate`` produces the events it promises."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.support.cluster import Cluster
from tools import COMMANDS, main

pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[pipeline]')")


def test_pipeline_is_a_samsa_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert COMMANDS["pipeline"][0] == "pipeline.cli:main"
    with pytest.raises(SystemExit) as exited:
        main(["pipeline", "--help"])
    assert exited.value.code == 0
    assert "generate" in capsys.readouterr().out


@pytest.mark.integration
def test_generate_produces_count_events_to_the_topic(samsa: Cluster, new_topic: Callable[..., str]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = new_topic(2)
    args = ["pipeline", "generate", "--bootstrap", samsa.bootstrap, "--topic", topic]
    assert main([*args, "--rate", "5000", "--count", "300", "--seed", "4"]) == 0
    consumer = Consumer(
        {"bootstrap.servers": samsa.bootstrap, "group.id": "cli-test", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    events = []
    for _ in range(50):
        events += [json.loads(m.value()) for m in consumer.consume(300, 0.2) if m.error() is None]
        if len(events) >= 300:
            break
    consumer.close()
    assert len(events) == 300
    assert {e["type"] for e in events} <= {"page_view", "search", "click"}
    assert all(e["user"] and e["page"] and e["latency_ms"] > 0 for e in events)


def test_run_writes_the_topic_exactly_once_unless_told_at_least_once() -> None:
    from pipeline.cli import _parser

    assert _parser().parse_args(["run", "--checkpoint", "cp"]).at_least_once is False
    assert _parser().parse_args(["run", "--checkpoint", "cp", "--at-least-once"]).at_least_once is True
