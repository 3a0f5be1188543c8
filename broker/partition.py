"""Partition: one partition's replica on this broker: its role, leader epoch, ISR and high watermark.

The controller decides the role (LeaderAndIsr); the partition applies it, appends as leader, serves
reads bounded by the high watermark (or the last stable offset for read_committed), and tracks each
follower's log end offset to advance the high watermark (HW = min LEO over the ISR). Requests that
name a leader epoch are fenced as KIP-320 says: older than ours is FENCED_LEADER_EPOCH, newer is
UNKNOWN_LEADER_EPOCH.

The leader also proposes ISR changes (a follower that caught up joins; one that fell behind for
replica.lag.time.max.ms leaves), which the controller commits (AlterPartition). While a change is in
flight the high watermark counts the "maximal ISR" (KIP-497): a joining follower at once, a leaving
one until the shrink is committed, so the high watermark never moves on an ISR not yet durable.

A replica belongs to one topic id (KIP-516): its log's, kept in partition.metadata
(``storage.partition_metadata``) from the first LeaderAndIsr that names it; ``topic_id`` is that id,
which the replica manager checks LeaderAndIsr against and the fetch path Fetch v13+ topic ids against.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode, KafkaError
from storage.errors import StorageError
from storage.fetch import FetchDataInfo, LogOffsetMetadata
from storage.log import Log, LogAppendInfo
from storage.producer_state import SENTINEL, AppendOrigin, VerificationGuard

if TYPE_CHECKING:
    from protocol.messages import LeaderAndIsrRequest

log = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
DELETE_TO_HIGH_WATERMARK = -1  # DeleteRecords' offset meaning "up to the high watermark"


def storage_error(e: StorageError) -> KafkaError:
    """The Kafka error a storage exception stands for."""
    return KafkaError(e.error_code, str(e))


@dataclass
class FollowerState:
    """What the leader knows of a follower: its log end offset and when it last caught up, and its log
    start offset (DeleteRecords waits for followers to move theirs)."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    log_start_offset: int = -1
    # Kafka's rule for "caught up": fetching from at least where the leader's log ended at the
    # previous fetch means the follower was caught up as of that fetch.
    last_fetch_leader_end: int = -1
    last_fetch_ms: int = 0

    def on_fetch(self, fetch_offset: int, leader_end: int, now_ms: int) -> None:
        if fetch_offset >= leader_end:
            self.last_caught_up_ms = now_ms
        elif fetch_offset >= self.last_fetch_leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_end = leader_end
        self.last_fetch_ms = now_ms


class IsrStats:
    """Committed ISR changes of the partitions a broker leads (Kafka's IsrExpandsPerSec and
    IsrShrinksPerSec meters, as running totals: broker.broker_metrics)."""

    __slots__ = ("expands", "shrinks")

    def __init__(self) -> None:
        self.expands = 0
        self.shrinks = 0


class Partition:
    def __init__(self, topic: str, partition: int, broker_id: int) -> None:
        self.topic = topic
        self.partition = partition
        self.broker_id = broker_id
        self._topic_id = ZERO_UUID
        self.log: Log | None = None
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.controller_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.followers: dict[int, FollowerState] = {}
        self.pending_isr: tuple[int, ...] | None = None  # an ISR change sent to the controller
        self.leader_epoch_start_offset = 0
        self.isr_stats: IsrStats | None = None  # the replica manager's: committed ISR changes counted

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.partition} leader={self.leader_id} epoch={self.leader_epoch})"

    @property
    def topic_id(self) -> uuid.UUID:
        """KIP-516: the id of the topic this replica belongs to (the zero uuid when unknown). The log's
        own, from its partition.metadata, is authoritative; before the log knows one, the id the
        controller named (Kafka's Partition.topicId)."""
        if self.log is not None and self.log.topic_id is not None:
            return self.log.topic_id
        return self._topic_id

    @topic_id.setter
    def topic_id(self, topic_id: uuid.UUID) -> None:
        self._topic_id = topic_id

    def has_consistent_topic_id(self, request_topic_id: uuid.UUID) -> bool:
        """Kafka's hasConsistentTopicId: a request naming no id (zero) is consistent with anything, and
        so is any id while this replica knows none; otherwise the ids must be equal."""
        return not request_topic_id.int or not self.topic_id.int or self.topic_id == request_topic_id

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.partition

    @property
    def min_insync_replicas(self) -> int:
        return self.log.config.min_insync_replicas if self.log is not None else 1

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    # -- role changes ---------------------------------------------------------------------------

    def _apply_state(
        self, state: LeaderAndIsrRequest.LeaderAndIsrPartitionState, log_: Log, topic_id: uuid.UUID
    ) -> None:
        self.log = log_
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.replicas = tuple(state.replicas)
        self.isr = tuple(state.isr)
        if topic_id.int:
            # The log learnt (or already had) this id when it was prepared: check_or_set_topic_id.
            self._topic_id = topic_id

    @staticmethod
    def check_or_set_topic_id(log_: Log, topic_id: uuid.UUID) -> bool:
        """Kafka's Partition.checkOrSetTopicId / UnifiedLog.assignTopicId: a log that knows no topic id
        learns ``topic_id`` (written to its partition.metadata, fsynced) before it serves or takes any
        data; one that knows another raises InconsistentTopicIdError. A zero ``topic_id`` (a
        LeaderAndIsr before v5) checks nothing. True when the log newly learnt the id."""
        if not topic_id.int:
            return False
        return log_.assign_topic_id(topic_id)

    def make_leader(
        self, state: LeaderAndIsrRequest.LeaderAndIsrPartitionState, log_: Log, topic_id: uuid.UUID
    ) -> bool:
        """Becomes (or stays) leader; True if this broker was not leading this epoch before."""
        was_leader = self.is_leader
        self._apply_state(state, log_, topic_id)
        self.pending_isr = None
        self.leader_epoch_start_offset = log_.log_end_offset
        log_.maybe_assign_epoch_start_offset(self.leader_epoch, log_.log_end_offset)
        now = _now_ms()
        self.followers = {
            r: FollowerState(last_caught_up_ms=now if r in self.isr else 0)
            for r in self.replicas
            if r != self.broker_id
        }
        self.maybe_increment_high_watermark()
        return not was_leader

    def make_follower(
        self, state: LeaderAndIsrRequest.LeaderAndIsrPartitionState, log_: Log, topic_id: uuid.UUID
    ) -> bool:
        """Becomes a follower of ``state.leader``; True if the leader changed."""
        previous = self.leader_id
        self._apply_state(state, log_, topic_id)
        self.followers = {}
        self.pending_isr = None
        return previous != self.leader_id

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320 fencing of a client's or follower's view of the leader epoch (-1: not given)."""
        if current_leader_epoch == -1 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
        raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    def diverging_epoch(
        self, fetch_offset: int, last_fetched_epoch: int, current_leader_epoch: int = -1
    ) -> tuple[int, int] | None:
        """KIP-320/595: when the fetcher's last fetched epoch ends before ``fetch_offset`` here, or is
        unknown here, the largest epoch not after it and where that ends; None when the logs agree."""
        self.check_leader_epoch(current_leader_epoch)
        assert self.log is not None
        epoch, end_offset = self.log.end_offset_for_epoch(last_fetched_epoch)
        if epoch < last_fetched_epoch or end_offset < fetch_offset:
            return epoch, end_offset
        return None

    def _leader_log(self, current_leader_epoch: int = -1) -> Log:
        if not self.is_leader or self.log is None:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {self.broker_id} does not lead {self.key}"
            )
        self.check_leader_epoch(current_leader_epoch)
        return self.log

    # -- appends --------------------------------------------------------------------------------

    def maybe_start_transaction_verification(
        self, producer_id: int, sequence: int, epoch: int
    ) -> VerificationGuard:
        """KIP-890 on the leader: the guard a verified transactional append of this producer must carry,
        SENTINEL when its transaction here is ongoing already."""
        return self._leader_log().maybe_start_transaction_verification(producer_id, sequence, epoch)

    def active_producers(self) -> list[tuple[int, int, int, int, int, int]]:
        """DescribeProducers on any replica with a log, as Kafka: (producer id, epoch, last sequence,
        last timestamp, coordinator epoch, current transaction's first offset or -1) of each producer."""
        if self.log is None:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {self.broker_id} has no log of {self.key}"
            )
        return self.log.active_producers()

    def append_records_to_leader(
        self,
        records: memoryview,
        required_acks: int,
        origin: AppendOrigin,
        verification_guard: VerificationGuard = SENTINEL,
    ) -> LogAppendInfo:
        leader_log = self._leader_log()
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"the ISR of {self.topic}-{self.partition} is {list(self.isr)}, "
                f"below min.insync.replicas={self.min_insync_replicas}",
            )
        try:
            info = leader_log.append_as_leader(records, self.leader_epoch, origin, verification_guard)
        except StorageError as e:
            raise storage_error(e) from None
        self.maybe_increment_high_watermark()
        return info

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark waits for: the committed one plus any member being added."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(r for r in self.pending_isr if r not in self.isr)

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the maximal ISR (the leader's own included); True if it moved."""
        assert self.log is not None
        new_hw = self.log.log_end_offset
        for replica in self.maximal_isr:
            if replica != self.broker_id:
                state = self.followers.get(replica)
                new_hw = min(new_hw, state.log_end_offset if state else -1)
        return new_hw >= 0 and self.log.maybe_increment_high_watermark(new_hw)

    # -- ISR changes (leader) -------------------------------------------------------------------

    def update_follower(self, replica: int, fetch_offset: int, log_start_offset: int, now_ms: int) -> None:
        """A follower fetched from ``fetch_offset``: it holds everything before it."""
        state = self.followers.get(replica)
        if state is None or self.log is None:
            return
        state.on_fetch(fetch_offset, self.log.log_end_offset, now_ms)
        if log_start_offset >= 0:
            state.log_start_offset = log_start_offset

    def isr_to_expand(self, replica: int) -> tuple[int, ...] | None:
        """The ISR with ``replica`` added, if it has caught up and may join (Kafka: its log end reaches
        the high watermark and the start of the current leader epoch)."""
        state = self.followers.get(replica)
        if (
            self.pending_isr is not None
            or state is None
            or self.log is None
            or replica in self.isr
            or replica not in self.replicas
        ):
            return None
        if (
            state.log_end_offset >= self.log.high_watermark
            and state.log_end_offset >= self.leader_epoch_start_offset
        ):
            return (*self.isr, replica)
        return None

    def isr_to_shrink(self, now_ms: int, max_lag_ms: int) -> tuple[int, ...] | None:
        """The ISR without the followers that have not caught up for ``max_lag_ms``, if any."""
        if self.pending_isr is not None or not self.is_leader:
            return None
        lagging = {
            r
            for r in self.isr
            if r != self.broker_id
            and now_ms - self.followers.get(r, FollowerState()).last_caught_up_ms > max_lag_ms
        }
        return tuple(r for r in self.isr if r not in lagging) if lagging else None

    def on_isr_committed(self, leader_epoch: int, isr: tuple[int, ...], partition_epoch: int) -> bool:
        """The controller's answer to a proposed ISR change; ignored if leadership moved meanwhile. True
        when applied: the caller then moves the high watermark (a smaller ISR may let it move) and
        completes what waited for it (``ReplicaManager.on_high_watermark_may_move``)."""
        self.pending_isr = None
        if leader_epoch != self.leader_epoch or not self.is_leader:
            return False
        stats = self.isr_stats
        if stats is not None:  # Kafka's IsrExpandsPerSec / IsrShrinksPerSec
            if any(r not in self.isr for r in isr):
                stats.expands += 1
            elif len(isr) < len(self.isr):
                stats.shrinks += 1
        self.isr, self.partition_epoch = isr, partition_epoch
        return True

    # -- DeleteRecords --------------------------------------------------------------------------

    def delete_records_on_leader(self, offset: int) -> int:
        """Moves the leader's log start offset to ``offset`` (DELETE_TO_HIGH_WATERMARK: the high
        watermark); returns the offset requested. Kafka's errors: POLICY_VIOLATION when the topic's
        cleanup.policy lacks delete, OFFSET_OUT_OF_RANGE beyond the high watermark."""
        leader_log = self._leader_log()
        if not leader_log.config.delete:
            raise KafkaError(
                ErrorCode.POLICY_VIOLATION,
                f"Records of partition {self.topic}-{self.partition} can not be deleted "
                "due to the configured policy",
            )
        requested = leader_log.high_watermark if offset == DELETE_TO_HIGH_WATERMARK else offset
        if requested < 0:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"The offset {requested} for partition {self.topic}-{self.partition} is not valid",
            )
        try:
            leader_log.delete_records_before(requested)
        except StorageError as e:
            raise storage_error(e) from None
        return requested

    def low_watermark(self, is_alive: Callable[[int], bool]) -> int:
        """The lowest log start offset among the leader and its live followers (Kafka's
        lowWatermarkIfLeader); a follower that has not fetched yet counts as -1."""
        low = self._leader_log().log_start_offset
        for replica, state in self.followers.items():
            if is_alive(replica):
                low = min(low, state.log_start_offset)
        return low

    # -- reads ----------------------------------------------------------------------------------

    def upper_bound(self, isolation_level: int) -> int:
        assert self.log is not None
        return self.log.last_stable_offset if isolation_level == READ_COMMITTED else self.log.high_watermark

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation_level: int,
        min_one_message: bool,
        current_leader_epoch: int = -1,
        from_follower: bool = False,
        leader_only: bool = True,
    ) -> FetchDataInfo:
        if leader_only:
            leader_log = self._leader_log(current_leader_epoch)
        else:
            assert self.log is not None
            self.check_leader_epoch(current_leader_epoch)
            leader_log = self.log
        # A follower may read up to the log end; consumers only what is committed.
        upper = None if from_follower else self.upper_bound(isolation_level)
        try:
            return leader_log.read(
                fetch_offset,
                max_bytes,
                upper,
                min_one_message,
                include_aborted_transactions=isolation_level == READ_COMMITTED and not from_follower,
            )
        except StorageError as e:
            raise storage_error(e) from None

    def bytes_available(self, since: LogOffsetMetadata, isolation_level: int) -> int | None:
        """Bytes between a fetch's position and what it may now read; None when it cannot be told
        cheaply (another segment), which a waiting fetch treats as enough."""
        assert self.log is not None
        bound = self.upper_bound(isolation_level)
        if bound <= since.message_offset:
            return 0
        end = self.log.log_end_offset_metadata
        if end.message_offset == bound and end.on_same_segment(since):
            return end.position_diff(since)
        return None


def _now_ms() -> int:
    return int(time.time() * 1000)
