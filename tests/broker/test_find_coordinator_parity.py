"""FindCoordinator v0-6 as Kafka 3.9 answers it (KafkaApis.handleFindCoordinatorRequest): error messages
by version, share-group keys (KIP-932, v6), unknown key types."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from broker.find_coordinator import FindCoordinator, InternalTopic
from protocol.errors import ErrorCode, description
from protocol.messages import FindCoordinatorRequest


class FakeCache:
    def __init__(self) -> None:
        self.topics = {"__consumer_offsets"}

    def contains(self, topic: str) -> bool:
        return topic in self.topics

    def partition(self, topic: str, partition: int) -> Any:
        return SimpleNamespace(leader=2)

    def is_alive(self, broker: int) -> bool:
        return True

    def endpoint(self, broker: int, listener: str) -> Any:
        return SimpleNamespace(host="h2", port=9092)


async def _never_create(*_: Any) -> None:
    raise AssertionError("not expected")


@pytest.fixture
def finder() -> FindCoordinator:
    topic = InternalTopic("__consumer_offsets", 50, 1, {}, lambda key: 0)
    return FindCoordinator(FakeCache(), _never_create, {0: topic, 1: topic})  # type: ignore[arg-type]


def find(finder: FindCoordinator, version: int, key_type: int, *keys: str) -> Any:
    if version < 4:
        body = FindCoordinatorRequest(key=keys[0], key_type=key_type)
    else:
        body = FindCoordinatorRequest(key_type=key_type, coordinator_keys=list(keys))
    request = SimpleNamespace(body=body, version=version, listener="PLAINTEXT")
    return asyncio.run(finder.handle_find_coordinator(request))  # type: ignore[arg-type]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_single_key_success_carries_the_message_none(finder: FindCoordinator, version: int) -> None:
    r = find(finder, version, 0, "g")
    assert (r.error_code, r.error_message, r.node_id, r.host, r.port) == (0, "NONE", 2, "h2", 9092)


@pytest.mark.parametrize("version", [4, 5, 6])
def test_batched_keys_carry_no_message(finder: FindCoordinator, version: int) -> None:
    r = find(finder, version, 0, "g1", "g2")
    assert [(c.key, c.error_code, c.error_message, c.node_id) for c in r.coordinators] == [
        ("g1", 0, None, 2),
        ("g2", 0, None, 2),
    ]


@pytest.mark.parametrize("version", [1, 4, 5])
def test_share_key_type_before_v6_is_an_invalid_request(finder: FindCoordinator, version: int) -> None:
    r = find(finder, version, 2, "s")
    if version < 4:
        assert (r.error_code, r.error_message, r.node_id, r.host, r.port) == (
            ErrorCode.INVALID_REQUEST,
            description(ErrorCode.INVALID_REQUEST),
            -1,
            "",
            -1,
        )
    else:
        [c] = r.coordinators
        assert (c.error_code, c.error_message, c.node_id) == (ErrorCode.INVALID_REQUEST, None, -1)


def test_share_key_type_at_v6_has_no_coordinator(finder: FindCoordinator) -> None:
    [c] = find(finder, 6, 2, "s").coordinators
    assert (c.key, c.error_code, c.error_message, c.node_id, c.host, c.port) == (
        "s",
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        None,
        -1,
        "",
        -1,
    )


def test_unknown_key_type_fails_every_key_with_a_message(finder: FindCoordinator) -> None:
    r = find(finder, 6, 7, "a", "b")
    assert [(c.key, c.error_code, c.error_message) for c in r.coordinators] == [
        ("a", ErrorCode.INVALID_REQUEST, description(ErrorCode.INVALID_REQUEST)),
        ("b", ErrorCode.INVALID_REQUEST, description(ErrorCode.INVALID_REQUEST)),
    ]
    old = find(finder, 2, 7, "a")
    assert (old.error_code, old.node_id) == (ErrorCode.INVALID_REQUEST, -1)
