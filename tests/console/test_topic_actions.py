"""The Topics pages' form parsing and reassignment progress (console/topic_actions.py), without a cluster."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from console.topic_actions import ActionError, parse_configs, parse_replicas, progress


def test_config_lines_are_parsed_as_kafka_topics_config_items_ignoring_blank_lines() -> None:
    assert parse_configs("retention.ms=1000\n\n cleanup.policy = compact \n") == {
        "retention.ms": "1000",
        "cleanup.policy": "compact",
    }
    assert parse_configs("") == {}


def test_a_config_line_without_a_value_is_refused_with_kafkas_message() -> None:
    with pytest.raises(ActionError, match='must be in the format "key=val"'):
        parse_configs("retention.ms")


def test_replicas_are_broker_ids_separated_by_commas_or_spaces() -> None:
    assert parse_replicas("1,2, 3", 0) == [1, 2, 3]
    assert parse_replicas(" 3 1 ", 0) == [3, 1]
    with pytest.raises(ActionError, match="Partition 4: '1,x' is not a list of broker ids"):
        parse_replicas("1,x", 4)


def _listed(replicas: list[int], adding: list[int], removing: list[int]) -> SimpleNamespace:
    return SimpleNamespace(replicas=replicas, adding_replicas=adding, removing_replicas=removing)


def test_a_reassignment_is_in_progress_while_listed_and_complete_when_the_replicas_match() -> None:
    running = progress({0: [3, 1]}, {0: _listed([1, 2, 3], [3], [2])}, {0: [1, 2]})
    assert running.in_progress and not running.complete
    assert (running.moves[0].adding, running.moves[0].removing, running.moves[0].state) == (
        [3],
        [2],
        "in progress",
    )
    done = progress({0: [3, 1]}, {}, {0: [3, 1]})
    assert done.complete and done.moves[0].state == "done"


def test_a_reassignment_no_longer_listed_with_other_replicas_is_not_complete() -> None:
    ended = progress({0: [3, 1]}, {}, {0: [1, 2]})
    assert not ended.complete and not ended.in_progress
    assert ended.moves[0].state == "not as asked"


def test_reassignments_started_elsewhere_show_too_and_nothing_shows_without_any() -> None:
    elsewhere = progress({}, {1: _listed([1, 2], [2], [])}, {1: [1]})
    assert [m.partition for m in elsewhere.moves] == [1] and elsewhere.moves[0].target is None
    assert progress({}, {}, {0: [1]}).moves == []
