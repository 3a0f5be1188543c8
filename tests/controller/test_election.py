"""The leader election algorithms, as pure functions."""

from __future__ import annotations

from controller.election import (
    Election,
    controlled_shutdown_election,
    new_partition_election,
    offline_partition_election,
    remove_from_isr,
)


def test_a_new_partition_is_led_by_its_first_live_replica_with_every_live_replica_in_sync() -> None:
    assert new_partition_election([3, 1, 2], {1, 2, 3}) == Election(3, (3, 1, 2))
    assert new_partition_election([3, 1, 2], {1, 2}) == Election(1, (1, 2))
    assert new_partition_election([3], {1, 2}) is None


def test_offline_election_takes_the_first_live_isr_member_in_assignment_order() -> None:
    # The assignment order decides, not the ISR order; dead members leave the ISR.
    assert offline_partition_election([1, 2, 3], [3, 2, 1], {2, 3}, False) == Election(2, (3, 2))
    assert offline_partition_election([1, 2, 3], [1, 3], {1, 2, 3}, False) == Election(1, (1, 3))
    # A live replica outside the ISR is never picked while an ISR member lives, even when unclean is on.
    assert offline_partition_election([2, 3], [3], {2, 3}, True) == Election(3, (3,))


def test_offline_election_without_a_live_isr_member_needs_unclean_election() -> None:
    assert offline_partition_election([1, 2, 3], [1], {2, 3}, False) is None
    assert offline_partition_election([1, 2, 3], [1], {2, 3}, True) == Election(2, (2,), unclean=True)
    assert offline_partition_election([1, 2], [1], set(), True) is None


def test_controlled_shutdown_moves_leadership_to_an_isr_member_not_shutting_down() -> None:
    assert controlled_shutdown_election([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}) == Election(2, (2, 3))
    assert controlled_shutdown_election([1, 2, 3], [1, 3], {1, 2, 3}, {1}) == Election(3, (3,))
    # The only other ISR member is dead or also shutting down: nowhere to move.
    assert controlled_shutdown_election([1, 2], [1, 2], {1}, {1}) is None
    assert controlled_shutdown_election([1, 2], [1, 2], {1, 2}, {1, 2}) is None


def test_removing_a_replica_from_the_isr() -> None:
    assert remove_from_isr(1, [1, 2, 3], 1) == (-1, (2, 3))
    assert remove_from_isr(1, [1, 2, 3], 3) == (1, (1, 2))
    # The last ISR member stays, so that it can lead cleanly when it returns.
    assert remove_from_isr(1, [1], 1) == (-1, (1,))
    assert remove_from_isr(2, [2], 3) == (2, (2,))
