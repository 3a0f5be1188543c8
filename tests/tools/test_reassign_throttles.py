"""``samsa reassign-partitions --throttle``: the throttled-replica lists as Kafka's
ReassignPartitionsCommand computes them (ReassignPartitionsUnitTest.testCalculateProposedMoveMap and
testCalculateLeader/FollowerThrottles), and the options each action takes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tools.reassign_partitions import (
    Move,
    _check_args,
    _parser,
    follower_throttles,
    leader_throttles,
    move_map,
)
from tools.usage import UsageError


def test_move_map_sources_are_the_current_replicas_destinations_the_new_ones() -> None:
    moves = move_map(
        {},
        {("foo", 0): [1, 2, 3], ("foo", 1): [4, 5, 6], ("bar", 0): [2, 3, 4]},
        {("foo", 0): [1, 2, 3], ("foo", 1): [1, 2, 3], ("bar", 0): [2, 3, 1]},
    )
    assert moves == {
        "foo": {
            0: Move(frozenset({1, 2, 3}), frozenset()),
            1: Move(frozenset({1, 2, 3}), frozenset({4, 5, 6})),
        },
        "bar": {0: Move(frozenset({1, 2, 3}), frozenset({4}))},
    }
    assert leader_throttles(moves["foo"]) == "0:1,0:2,0:3,1:1,1:2,1:3"
    assert follower_throttles(moves["foo"]) == "1:4,1:5,1:6"
    assert follower_throttles(moves["bar"]) == "0:4"


def test_move_map_of_a_reassignment_in_progress_keeps_its_original_sources() -> None:
    ongoing = {("foo", 0): SimpleNamespace(replicas=[1, 2, 3, 4], adding_replicas=[4], removing_replicas=[3])}
    moves = move_map(ongoing, {("foo", 0): [1, 2, 5]}, {("foo", 0): [1, 2, 3, 4]})
    assert moves["foo"][0] == Move(frozenset({1, 2, 3}), frozenset({5}))


@pytest.mark.parametrize(
    ("argv", "allowed"),
    [
        (["--execute", "--reassignment-json-file", "f", "--throttle", "1000"], True),
        (["--execute", "--reassignment-json-file", "f", "--replica-alter-log-dirs-throttle", "1000"], True),
        (["--verify", "--reassignment-json-file", "f", "--preserve-throttles"], True),
        (["--cancel", "--reassignment-json-file", "f", "--preserve-throttles"], True),
        (["--verify", "--reassignment-json-file", "f", "--throttle", "1000"], False),
        (["--list", "--preserve-throttles"], False),
    ],
)
def test_throttle_options_belong_to_their_actions(argv: list[str], allowed: bool) -> None:
    parser = _parser()
    args = parser.parse_args(["--bootstrap-server", "localhost:9092", *argv])
    if allowed:
        _check_args(parser, args)
    else:
        with pytest.raises(UsageError, match="can't be used with action"):
            _check_args(parser, args)
