"""GroupMetadata on its own: Kafka's state transitions, protocol support and selection, members
leaving, the consumer subscription parse and offset expiration rules."""

from __future__ import annotations

import pytest

from coordinator.group_metadata import (
    CommittedOffset,
    GroupMetadata,
    GroupState,
    MemberMetadata,
    OffsetAndMetadata,
    consumer_subscription_topics,
)
from tests.coordinator.conftest import subscription

NOW = 1_000_000


def member(member_id: str, *protocols: str, instance: str | None = None) -> MemberMetadata:
    return MemberMetadata(
        member_id, instance, "c", "/h", 1000, 1000, "consumer", [(p, subscription("t")) for p in protocols]
    )


def group(state: GroupState = GroupState.EMPTY) -> GroupMetadata:
    return GroupMetadata("g", state, lambda: NOW)


@pytest.mark.parametrize(
    ("start", "to", "allowed"),
    [
        (GroupState.EMPTY, GroupState.PREPARING_REBALANCE, True),
        (GroupState.EMPTY, GroupState.STABLE, False),
        (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, True),
        (GroupState.PREPARING_REBALANCE, GroupState.EMPTY, True),
        (GroupState.COMPLETING_REBALANCE, GroupState.STABLE, True),
        (GroupState.COMPLETING_REBALANCE, GroupState.PREPARING_REBALANCE, True),
        (GroupState.STABLE, GroupState.PREPARING_REBALANCE, True),
        (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, False),
        (GroupState.STABLE, GroupState.DEAD, True),
        (GroupState.DEAD, GroupState.DEAD, True),
        (GroupState.DEAD, GroupState.PREPARING_REBALANCE, False),
    ],
)
def test_transitions(start: GroupState, to: GroupState, allowed: bool) -> None:
    g = group(start)
    if allowed:
        g.transition_to(to)
        assert g.state is to
    else:
        with pytest.raises(AssertionError):
            g.transition_to(to)


def test_protocols_supported_by_every_member() -> None:
    g = group()
    assert not g.supports_protocols("", {"range"}) and not g.supports_protocols("consumer", set())
    g.add(member("a", "range", "roundrobin"))
    g.transition_to(GroupState.PREPARING_REBALANCE)
    assert g.supports_protocols("consumer", {"roundrobin"})
    assert not g.supports_protocols("connect", {"range"}) and not g.supports_protocols("consumer", {"sticky"})
    g.add(member("b", "roundrobin", "range"))
    g.add(member("c", "roundrobin", "range"))
    assert g.select_protocol() == "roundrobin"  # two of three prefer it
    g.remove("b")
    g.remove("c")
    g.add(member("d", "roundrobin"))
    assert g.supported_protocols == {"roundrobin": 2, "range": 1}
    assert g.select_protocol() == "roundrobin"


def test_leader_moves_when_it_leaves_and_static_members_are_tracked() -> None:
    g = group()
    g.add(member("a", "range", instance="i-a"))
    g.add(member("b", "range"))
    assert g.leader_id == "a" and g.current_static_member_id("i-a") == "a"
    g.remove("a")
    assert g.leader_id == "b" and g.current_static_member_id("i-a") is None
    g.remove("b")
    assert g.leader_id is None and len(g) == 0


def test_subscription_topics() -> None:
    assert consumer_subscription_topics(subscription("a", "b")) == {"a", "b"}
    # Later versions start with version 0's fields.
    assert consumer_subscription_topics(b"\x00\x03" + subscription("x")[2:] + b"\x00\x00\x00\x00") == {"x"}
    with pytest.raises(ValueError):
        consumer_subscription_topics(b"\x00\x00\x00\x00\x00\x05\x00")
    g = group()
    g.add(member("a", "range"))
    g.protocol_name = "range"
    assert g.compute_subscribed_topics() == {"t"}
    g.get("a").supported_protocols = [("range", b"junk")]
    assert g.compute_subscribed_topics() is None and g.is_subscribed_to_topic("anything")


def committed(commit_timestamp: int, expire_timestamp: int = -1) -> CommittedOffset:
    return CommittedOffset(OffsetAndMetadata(1, -1, "", commit_timestamp, expire_timestamp), 0)


def test_expiration_of_an_empty_consumer_group_counts_from_when_it_emptied() -> None:
    g = group()
    g.protocol_type = "consumer"
    g.current_state_timestamp = NOW
    g.initialize_offsets({("t", 0): committed(0)})
    assert g.remove_expired_offsets(NOW + 99, 100) == {}
    assert list(g.remove_expired_offsets(NOW + 100, 100)) == [("t", 0)]


def test_expiration_of_a_stable_group_spares_subscribed_topics() -> None:
    g = group(GroupState.STABLE)
    g.protocol_type = "consumer"
    g.subscribed_topics = {"t"}
    g.initialize_offsets({("t", 0): committed(0), ("old", 0): committed(0)})
    assert list(g.remove_expired_offsets(NOW, 100)) == [("old", 0)]


def test_expiration_of_a_simple_consumer_and_explicit_expiry() -> None:
    g = group()
    g.initialize_offsets({("t", 0): committed(NOW), ("t", 1): committed(0, expire_timestamp=NOW + 5)})
    assert list(g.remove_expired_offsets(NOW + 5, 100)) == [("t", 1)]
    assert list(g.remove_expired_offsets(NOW + 100, 100)) == [("t", 0)]
    # Pending commits do not expire.
    g.initialize_offsets({("t", 2): committed(0)})
    g.prepare_offset_commit({("t", 2): OffsetAndMetadata(5)})
    assert g.remove_expired_offsets(NOW + 1000, 100) == {}
