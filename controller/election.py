"""Leader election algorithms (Kafka's PartitionLeaderElectionAlgorithms): pure functions of a partition's
replica assignment, ISR and the live brokers.

The assignment order is the preference order: the first eligible replica in it wins, so the preferred
replica (the first) leads whenever it may.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import Enum

from zk.znodes import LEADER_NONE


class ElectionStrategy(Enum):
    OFFLINE = "offline"  # the leader is gone (or never was): pick from the live ISR
    UNCLEAN = "unclean"  # as offline, with unclean election allowed whatever the config (ElectLeaders)
    PREFERRED = "preferred replica"  # move leadership back to the first replica of the assignment
    REASSIGN = "reassignment"  # move leadership into the target replicas of a reassignment
    CONTROLLED_SHUTDOWN = "controlled shutdown"  # move leadership off brokers shutting down


@dataclass(frozen=True)
class Election:
    leader: int
    isr: tuple[int, ...]
    unclean: bool = False  # the leader came from outside the ISR: data may have been lost


def new_partition_election(assignment: Sequence[int], live: Collection[int]) -> Election | None:
    """A partition's first leader: the first live replica, with every live replica in the ISR."""
    live_replicas = tuple(r for r in assignment if r in live)
    return Election(live_replicas[0], live_replicas) if live_replicas else None


def offline_partition_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], unclean_allowed: bool
) -> Election | None:
    """The first live ISR member; the ISR keeps its live members. With none left, only an unclean
    election may pick any live replica, which becomes the whole ISR. None: the partition stays offline."""
    for replica in assignment:
        if replica in live and replica in isr:
            return Election(replica, tuple(r for r in isr if r in live))
    if unclean_allowed:
        for replica in assignment:
            if replica in live:
                return Election(replica, (replica,), unclean=True)
    return None


def preferred_replica_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Election | None:
    """The first replica of the assignment, if it is live and in the ISR; the ISR stays as it is."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return Election(assignment[0], tuple(isr))
    return None


def reassign_partition_election(
    target: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> Election | None:
    """The first target replica of a reassignment that is live and in the ISR; the ISR stays as it is
    (the replicas being removed leave it when they go offline)."""
    for replica in target:
        if replica in live and replica in isr:
            return Election(replica, tuple(isr))
    return None


def controlled_shutdown_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_or_shutting_down: Collection[int],
    shutting_down: Collection[int],
) -> Election | None:
    """The first ISR member that is alive and not shutting down; those shutting down leave the ISR."""
    for replica in assignment:
        if replica in live_or_shutting_down and replica in isr and replica not in shutting_down:
            return Election(replica, tuple(r for r in isr if r not in shutting_down))
    return None


def remove_from_isr(leader: int, isr: Sequence[int], replica: int) -> tuple[int, tuple[int, ...]]:
    """(leader, ISR) once ``replica`` is gone: it stops leading (leader -1) and leaves the ISR, except
    that the last ISR member stays, so that the partition can come back cleanly when it does."""
    new_leader = LEADER_NONE if replica == leader else leader
    new_isr = tuple(isr) if len(isr) == 1 else tuple(r for r in isr if r != replica)
    return new_leader, new_isr
