"""A classic consumer group's state: its members, generation, protocol and committed offsets.

This is Kafka's ``GroupMetadata`` and ``MemberMetadata`` (the classic protocol): the state machine

    Empty ──> PreparingRebalance ──> CompletingRebalance ──> Stable
      ^              ^  │                    │                │
      └──────────────┼──┘ (no member left)   │                │
                     └───────────────────────┴────────────────┘ (a member joins, leaves or fails)
    any state ──> Dead (the group is deleted or its coordinator moves away)

the bookkeeping of who has rejoined, protocol selection across members, static members
(``group.instance.id``) and the group's offsets (committed, and pending while their records are
replicated), including transactional offsets (TxnOffsetCommit), kept pending per producer id until
the transaction's marker decides: a commit materialises them, an abort drops them. The coordinator
(``group_coordinator`` and its parts) drives it; nothing here waits or writes. A member waiting for
its JoinGroup or SyncGroup answer holds the ``asyncio.Future`` its request is parked on, which the
group completes with a ``JoinGroupResult`` or ``SyncGroupResult``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import struct
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from protocol.errors import ErrorCode
from server_common.futures import forward

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
T = TypeVar("T")

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
NO_LEADER = ""
CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.DEAD: frozenset(GroupState),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}


@dataclass(slots=True)
class OffsetAndMetadata:
    """A committed offset as OffsetCommitValue stores it; -1 stands for an absent leader epoch and
    expire timestamp (the latter is set only by OffsetCommit v2-v4 with a retention time)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass(slots=True)
class CommittedOffset:
    """An offset in the group's cache with the log offset of the record that holds it (None when it
    was loaded before that was tracked), so that commits completing out of order keep the newest."""

    value: OffsetAndMetadata
    record_offset: int | None

    def older_than(self, other: CommittedOffset) -> bool:
        return (
            self.record_offset is None
            or other.record_offset is None
            or self.record_offset < other.record_offset
        )


@dataclass(slots=True)
class JoinGroupResult:
    member_id: str
    error: int
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = NO_LEADER
    skip_assignment: bool = False
    # For the leader: every member as (member id, group instance id, its metadata for the protocol).
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncGroupResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary]


class MemberMetadata:
    """One member: its identity, timeouts, the protocols it supports (in its order of preference) and
    its current assignment."""

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        supported_protocols: list[tuple[str, bytes]],
        assignment: bytes = b"",
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = supported_protocols
        self.assignment = assignment
        self.awaiting_join: asyncio.Future[JoinGroupResult] | None = None
        self.awaiting_sync: asyncio.Future[SyncGroupResult] | None = None
        # A member added by this rebalance: its session does not count until its JoinGroup is answered.
        self.is_new = False
        # Set while the member's session deadline is renewed: the deadline it had is met.
        self.heartbeat_satisfied = False

    def __repr__(self) -> str:
        return (
            f"MemberMetadata(member_id={self.member_id!r}, group_instance_id={self.group_instance_id!r}, "
            f"client_id={self.client_id!r}, client_host={self.client_host!r}, "
            f"session_timeout_ms={self.session_timeout_ms}, "
            f"rebalance_timeout_ms={self.rebalance_timeout_ms}, "
            f"protocols={[name for name, _ in self.supported_protocols]})"
        )

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    @property
    def has_satisfied_heartbeat(self) -> bool:
        """Whether the member's session may not end now: members waiting in a rebalance need no
        heartbeat (new ones excepted, which cannot heartbeat yet and are not waited for forever)."""
        if self.is_new:
            return self.heartbeat_satisfied
        return self.is_awaiting_join or self.is_awaiting_sync or self.heartbeat_satisfied

    def await_join(self, join: asyncio.Future[JoinGroupResult] | None) -> None:
        self.awaiting_join = _also_answer(self.awaiting_join, join)

    def await_sync(self, sync: asyncio.Future[SyncGroupResult]) -> None:
        self.awaiting_sync = _also_answer(self.awaiting_sync, sync)

    @property
    def protocols(self) -> set[str]:
        return {name for name, _ in self.supported_protocols}

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """True if ``protocols`` are this member's, in the same order with the same metadata."""
        return protocols == self.supported_protocols

    def vote(self, candidates: set[str]) -> str:
        """The first protocol in this member's order of preference that every member supports."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} does not support any of {sorted(candidates)}")

    def summary(self, protocol: str | None) -> MemberSummary:
        """DescribeGroups' view; metadata and assignment only when the group is stable (``protocol``)."""
        metadata = self.metadata(protocol) if protocol is not None else b""
        assignment = self.assignment if protocol is not None else b""
        return MemberSummary(
            self.member_id, self.group_instance_id, self.client_id, self.client_host, metadata, assignment
        )


def _also_answer(
    previous: asyncio.Future[T] | None, new: asyncio.Future[T] | None
) -> asyncio.Future[T] | None:
    """The member's new waiting request: ``new``. When it sends JoinGroup or SyncGroup again while the
    first still waits, the first gets the same answer as the second (Kafka drops it, and its request
    is never answered; a connection here answers in request order, so the second would wait too)."""
    if previous is not None and new is not None and previous is not new and not previous.done():
        forward(new, previous)
    return new


def consumer_subscription_topics(metadata: bytes) -> set[str]:
    """The topics of a ConsumerProtocolSubscription, read with its version 0 prefix (every later
    version starts with it, as Kafka relies on). Raises ValueError if it does not parse."""
    try:
        pos = 2  # int16 version
        (count,) = struct.unpack_from(">i", metadata, pos)
        pos += 4
        topics = set()
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            if length < 0 or pos + length > len(metadata):
                raise ValueError("bad topic name length")
            topics.add(metadata[pos : pos + length].decode("utf-8"))
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError) as e:
        raise ValueError(str(e)) from None


class GroupMetadata:
    """A group and its committed offsets. ``time_ms`` gives the wall clock in milliseconds."""

    def __init__(self, group_id: str, state: GroupState, time_ms: Callable[[], int]) -> None:
        self.group_id = group_id
        self.state = state
        self._time_ms = time_ms
        self.current_state_timestamp: int | None = time_ms()
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: set[str] = set()  # told MEMBER_ID_REQUIRED, not joined yet
        self.pending_sync_members: set[str] = set()  # joined this generation, no SyncGroup yet
        self.supported_protocols: Counter[str] = Counter()
        # The initial rebalance of a new group waits longer while members keep arriving.
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        self.offsets: dict[TopicPartition, CommittedOffset] = {}
        self.pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = {}
        # Transactional offsets per producer id, written and waiting for the transaction's marker;
        # and those whose records are being written.
        self.pending_txn_offset_commits: dict[int, dict[TopicPartition, CommittedOffset]] = {}
        self.txn_offset_commits_in_flight: dict[int, list[tuple[TopicPartition, OffsetAndMetadata]]] = {}
        # Kafka warns when one group gets both kinds of commit: they do not mix well.
        self.received_consumer_offset_commits = False
        self.received_txn_offset_commits = False

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, state={self.state}, generation={self.generation_id}, "
            f"protocol_type={self.protocol_type!r}, protocol={self.protocol_name!r}, "
            f"leader={self.leader_id!r}, members={list(self.members)})"
        )

    # -- state ------------------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS_STATES[state]:
            raise AssertionError(
                f"group {self.group_id} should be in {state}'s previous states, is {self.state}"
            )
        self.state = state
        self.current_state_timestamp = self._time_ms()

    @property
    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    # -- members ----------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.members)

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def current_static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    @property
    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"

    def add(self, member: MemberMetadata, join: asyncio.Future[JoinGroupResult] | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocols)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        member.awaiting_join = join
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocols)
            self.supported_protocols += Counter()  # drops the protocols no member supports any more
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(
        self,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join: asyncio.Future[JoinGroupResult] | None,
    ) -> None:
        self.supported_protocols.subtract(member.protocols)
        member.supported_protocols = protocols
        self.supported_protocols.update(member.protocols)
        self.supported_protocols += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.await_join(join)

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """The static member rejoined with a new member id; whoever still waits under the old id is fenced."""
        member = self.members.pop(old_member_id)
        self.maybe_invoke_join(member, JoinGroupResult(old_member_id, ErrorCode.FENCED_INSTANCE_ID))
        self.maybe_invoke_sync(member, SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member

    def maybe_invoke_join(self, member: MemberMetadata, result: JoinGroupResult) -> None:
        if member.awaiting_join is not None:
            if not member.awaiting_join.done():
                member.awaiting_join.set_result(result)
            member.awaiting_join = None

    def maybe_invoke_sync(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        if member.awaiting_sync is None:
            return False
        if not member.awaiting_sync.done():
            member.awaiting_sync.set_result(result)
        member.awaiting_sync = None
        return True

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keeps the leader if it rejoined, else picks a member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    # -- protocols --------------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        """Whether a member with these protocols may join: the first needs a type and a protocol; later
        ones the group's type and one protocol every current member supports."""
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[p] == len(self.members) for p in protocols
        )

    def select_protocol(self) -> str:
        """The protocol most members prefer among those all support (ties: the first one voted)."""
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = {p for p, count in self.supported_protocols.items() if count == len(self.members)}
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return votes.most_common(1)[0][0]

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """What the leader's JoinGroup answer lists: each member's metadata for the chosen protocol."""
        if (
            self.is_(GroupState.DEAD)
            or self.is_(GroupState.PREPARING_REBALANCE)
            or self.protocol_name is None
        ):
            raise AssertionError(f"group {self.group_id} has no member metadata in state {self.state}")
        return [
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
        ]

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.received_consumer_offset_commits = False
        self.received_txn_offset_commits = False
        self.pending_sync_members.clear()

    def compute_subscribed_topics(self) -> set[str] | None:
        """The topics a consumer group's members subscribe to; None when unknown (another protocol
        type, or a subscription that does not parse), which keeps every offset."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        try:
            topics: set[str] = set()
            for member in self.members.values():
                topics |= consumer_subscription_topics(member.metadata(self.protocol_name))
            return topics
        except ValueError:
            return None

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # -- views ------------------------------------------------------------------------------------

    def summary(self) -> GroupSummary:
        if self.is_(GroupState.STABLE):
            assert self.protocol_name is not None
            return GroupSummary(
                str(self.state),
                self.protocol_type or "",
                self.protocol_name,
                [m.summary(self.protocol_name) for m in self.members.values()],
            )
        return GroupSummary(
            str(self.state),
            self.protocol_type or "",
            self.protocol_name or "",
            [m.summary(None) for m in self.members.values()],
        )

    # -- offsets ----------------------------------------------------------------------------------

    @property
    def has_offsets(self) -> bool:
        """Committed or pending offsets, transactional ones included: such a group is not removed."""
        return (
            bool(self.offsets)
            or bool(self.pending_offset_commits)
            or bool(self.pending_txn_offset_commits)
            or bool(self.txn_offset_commits_in_flight)
        )

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        found = self.offsets.get(tp)
        return None if found is None else found.value

    def initialize_offsets(
        self,
        offsets: dict[TopicPartition, CommittedOffset],
        pending_txn_offsets: dict[int, dict[TopicPartition, CommittedOffset]] | None = None,
    ) -> None:
        self.offsets.update(offsets)
        for producer_id, pending in (pending_txn_offsets or {}).items():
            self.pending_txn_offset_commits.setdefault(producer_id, {}).update(pending)

    @property
    def has_received_consistent_offset_commits(self) -> bool:
        return not (self.received_consumer_offset_commits and self.received_txn_offset_commits)

    def prepare_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.received_consumer_offset_commits = True
        self.pending_offset_commits.update(offsets)

    def on_offset_commit_append(self, tp: TopicPartition, committed: CommittedOffset) -> None:
        """The commit's record is replicated: it becomes the committed offset unless a newer record
        already did, or the offset was deleted meanwhile."""
        if tp in self.pending_offset_commits:
            current = self.offsets.get(tp)
            if current is None or current.older_than(committed):
                self.offsets[tp] = committed
        if self.pending_offset_commits.get(tp) is committed.value:
            del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: TopicPartition, offset: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) is offset:
            del self.pending_offset_commits[tp]

    # -- transactional offsets (TxnOffsetCommit) ----------------------------------------------------
    #
    # Unlike Kafka, a commit whose record is still being written is kept apart from the producer's
    # written ones (``txn_offset_commits_in_flight``): a commit refused by the log (a zombie's, with an
    # older epoch) then cannot erase the pending offset its producer wrote before.

    def prepare_txn_offset_commit(
        self, producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """The producer's transactional commits are being written."""
        self.received_txn_offset_commits = True
        self.txn_offset_commits_in_flight.setdefault(producer_id, []).extend(offsets.items())

    def _take_in_flight(self, producer_id: int, tp: TopicPartition, offset: OffsetAndMetadata) -> bool:
        in_flight = self.txn_offset_commits_in_flight.get(producer_id)
        if in_flight is None:
            return False
        for i, (found_tp, found) in enumerate(in_flight):
            if found_tp == tp and found is offset:
                del in_flight[i]
                if not in_flight:
                    del self.txn_offset_commits_in_flight[producer_id]
                return True
        return False

    def on_txn_offset_commit_append(
        self, producer_id: int, tp: TopicPartition, committed: CommittedOffset
    ) -> None:
        """The commit's record is replicated: it is pending until the transaction's marker, with its
        place in the log (the newest of the producer's records for the partition is the one a commit
        marker materialises, unless the group's offset then comes from a newer record still)."""
        if not self._take_in_flight(producer_id, tp, committed.value):
            return  # the partition's offsets were deleted, or the transaction ended, meanwhile
        pending = self.pending_txn_offset_commits.setdefault(producer_id, {})
        current = pending.get(tp)
        if current is None or current.older_than(committed):
            pending[tp] = committed

    def fail_pending_txn_offset_commit(
        self, producer_id: int, tp: TopicPartition, offset: OffsetAndMetadata
    ) -> None:
        """The commit's record was not written: forget it (the producer retries, perhaps elsewhere)."""
        self._take_in_flight(producer_id, tp, offset)

    def complete_pending_txn_offset_commit(self, producer_id: int, is_commit: bool) -> None:
        """The producer's transaction ended (its marker is written): committed offsets become the
        group's unless a newer record in the log already holds the partition's offset; aborted ones go."""
        pending = self.pending_txn_offset_commits.pop(producer_id, None)
        in_flight = self.txn_offset_commits_in_flight.pop(producer_id, None)
        if not is_commit:
            return
        if in_flight:
            # Kafka refuses this (IllegalStateException): the transaction was committed before the
            # commit's record was acknowledged. The record is in the log ahead of the marker, so the
            # next load materialises it; this broker does not.
            log.warning(
                "group %s: the transaction of producer %d committed before its offsets of %s were written",
                self.group_id,
                producer_id,
                sorted({tp for tp, _ in in_flight}),
            )
        for tp, committed in (pending or {}).items():
            current = self.offsets.get(tp)
            if current is None or current.older_than(committed):
                self.offsets[tp] = committed

    @property
    def active_producers(self) -> set[int]:
        return set(self.pending_txn_offset_commits) | set(self.txn_offset_commits_in_flight)

    def has_pending_offset_commits_from_producer(self, producer_id: int) -> bool:
        return (
            producer_id in self.pending_txn_offset_commits or producer_id in self.txn_offset_commits_in_flight
        )

    def has_pending_offset_commits_for_partition(self, tp: TopicPartition) -> bool:
        """A commit of the partition is being written or in an open transaction: OffsetFetch with
        require_stable answers UNSTABLE_OFFSET_COMMIT for it."""
        return (
            tp in self.pending_offset_commits
            or any(tp in pending for pending in self.pending_txn_offset_commits.values())
            or any(
                tp == found
                for in_flight in self.txn_offset_commits_in_flight.values()
                for found, _ in in_flight
            )
        )

    def remove_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        removed = {}
        for tp in partitions:
            self.pending_offset_commits.pop(tp, None)
            # A producer's emptied offsets stay until its marker: its transaction is still open.
            for pending in self.pending_txn_offset_commits.values():
                pending.pop(tp, None)
            for in_flight in self.txn_offset_commits_in_flight.values():
                in_flight[:] = [(found, o) for found, o in in_flight if found != tp]
            found = self.offsets.pop(tp, None)
            if found is not None:
                removed[tp] = found.value
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.remove_offsets(list(self.offsets))

    def remove_expired_offsets(
        self, now_ms: int, retention_ms: int
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Kafka's offset expiration (KIP-211): an empty group's offsets expire ``retention_ms`` after it
        became empty; a stable consumer group's offsets of topics no member subscribes to, and a
        simple consumer's (no protocol type) offsets, that long after their commit. An explicit
        expire timestamp (OffsetCommit v2-v4 retention time) wins."""

        def expired(base: Callable[[CommittedOffset], int], subscribed: set[str]) -> list[TopicPartition]:
            return [
                tp
                for tp, committed in self.offsets.items()
                if tp[0] not in subscribed
                and tp not in self.pending_offset_commits
                and (
                    now_ms >= committed.value.expire_timestamp
                    if committed.value.expire_timestamp >= 0
                    else now_ms - base(committed) >= retention_ms
                )
            ]

        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            became_empty = self.current_state_timestamp
            doomed = expired(
                lambda c: became_empty if became_empty is not None else c.value.commit_timestamp, set()
            )
        elif (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.is_(GroupState.STABLE)
        ):
            doomed = expired(lambda c: c.value.commit_timestamp, self.subscribed_topics)
        elif self.protocol_type is None:
            doomed = expired(lambda c: c.value.commit_timestamp, set())
        else:
            doomed = []
        return self.remove_offsets(doomed)
