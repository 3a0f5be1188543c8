"""ReplicaManager: the partitions this broker hosts, their roles, and the produce and fetch paths.

It applies the controller's LeaderAndIsr and StopReplica once ``check_controller`` has confirmed,
through the ZooKeeper-backed ``ControllerFence``, that they come from the active controller for this
broker's current epoch (stale leader epochs it fences itself), one request at a time, in slices that
yield to the event loop, the logs of new partitions created on threads of their own, and logs a few
summary lines per request however many partitions it names. It appends producers' batches to the
leaders' logs (acks=all waits in the produce purgatory until the high watermark passes the records),
serves fetches (a fetch that finds too little data waits in the fetch purgatory until an append or a
high-watermark move brings enough, or its max wait ends), moves log start offsets for DeleteRecords
(which waits until the live followers have moved theirs), and checkpoints the high watermarks.

What may wait (``wait_for_acks``, ``fetch_messages``, ``delete_records``) returns an ``asyncio.Future``
of its results, done already when nothing had to wait (``server_common.futures``); the request
handler parks its response on it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.alter_partition_manager import AlterPartitionManager
from broker.broker_metrics import BrokerTopicStats
from broker.controller_fence import ControllerFence, Refusal
from broker.metadata_cache import BrokerInfo, MetadataCache
from broker.partition import READ_COMMITTED, IsrStats, Partition, storage_error
from broker.replica_fetcher import ReplicaFetcherManager
from broker.replica_selector import NO_PREFERRED_REPLICA, ReplicaSelector, preferred_read_replica
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from server_common.futures import completed, then
from server_common.purgatory import DelayedOperation, DelayedOperationPurgatory
from storage.errors import KafkaStorageError, StorageError
from storage.fetch import FetchDataInfo
from storage.log import Log
from storage.log_manager import LogManager
from storage.partition_metadata import InconsistentTopicIdError, topic_id_string
from storage.producer_state import SENTINEL, AppendOrigin, VerificationGuard

if TYPE_CHECKING:
    from broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager
    from broker.quota_manager import ReplicationQuotaManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
DELETE_WHATEVER_THE_EPOCH = -2  # StopReplica's leader epoch sentinel
DEBUGGING_CONSUMER_ID = -2  # Fetch's replica id of tools that read any replica (replica-verification)
FUTURE_LOCAL_REPLICA_ID = -3  # Fetch's replica id of a future replica's local fetcher (not a consumer)
# Partitions of a LeaderAndIsr whose new logs are prepared together before the loop applies them.
LOG_PREPARATION_BATCH = 200
# Threads preparing new logs: creating one is mostly metadata I/O under the log manager's lock, but a
# new leader's log also writes and fsyncs its leader-epoch checkpoint (as Kafka does), and fsyncs of
# different files proceed in parallel (the file system commits them together).
LOG_PREPARATION_THREADS = 4
# The longest a LeaderAndIsr or StopReplica holds the event loop before it lets other requests run.
LOOP_SLICE_S = 0.02
# The key of ``elect_leader_purgatory``: every applied UpdateMetadata checks the elections waiting there.
METADATA_UPDATE = "metadata-update"
# Transaction coordinator errors of a verification that older producers would not retry: answered as
# NOT_ENOUGH_REPLICAS, retriable and without a metadata refresh (Kafka's handleProduceAppend).
_RETRIABLE_VERIFICATION_ERRORS = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)


def verification_failure(code: int) -> ProducePartitionResult:
    """The produce result of a partition whose transactional batch could not be verified."""
    if code == ErrorCode.INVALID_TXN_STATE:
        return ProducePartitionResult(error=code, message="Partition was not added to the transaction")
    if code in _RETRIABLE_VERIFICATION_ERRORS:
        return ProducePartitionResult(
            error=ErrorCode.NOT_ENOUGH_REPLICAS,
            message="Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {ErrorCode(code).name}",
        )
    return ProducePartitionResult(error=code, message=None)


@dataclass(slots=True)
class ProducePartitionResult:
    error: int = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    required_offset: int = -1  # acks=all: the high watermark must reach this (last offset + 1)


@dataclass(slots=True)
class FetchPartitionRequest:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    last_fetched_epoch: int = -1


@dataclass(slots=True)
class FetchParams:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    # KIP-392: the consumer's client.rack (Fetch v11+, "" when it names none), for the replica
    # selector; None below v11 (Kafka's empty clientMetadata).
    client_rack: str | None = None

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def from_consumer(self) -> bool:
        """Kafka's FetchRequest.isConsumer: any negative replica id but a future local replica's (the
        debugging consumer of replica-verification included)."""
        return self.replica_id < 0 and self.replica_id != FUTURE_LOCAL_REPLICA_ID

    @property
    def fetch_only_from_leader(self) -> bool:
        """Kafka 3.9's fetchOnlyFromLeader: followers read the leader, and so do consumers without
        client metadata (below Fetch v11); a consumer at v11+ may read a follower, up to that replica's
        high watermark (KIP-392)."""
        return self.from_follower or (self.from_consumer and self.client_rack is None)


@dataclass(slots=True)
class FetchPartitionResult:
    error: int = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    info: FetchDataInfo | None = None
    aborted: list[Any] | None = field(default=None)
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset): the fetcher must truncate
    preferred_read_replica: int = -1  # KIP-392: the replica the consumer should fetch from instead


ProduceResults = dict[TopicPartition, ProducePartitionResult]
# ElectLeaders: each partition's (error, message).
ElectionResults = dict[TopicPartition, tuple[int, str | None]]
FetchResults = dict[TopicPartition, FetchPartitionResult]


class DelayedProduce(DelayedOperation[ProduceResults]):
    def __init__(self, timeout_ms: int, manager: ReplicaManager, results: ProduceResults) -> None:
        super().__init__(timeout_ms)
        self.manager = manager
        self.results = results
        self.pending = {tp for tp, r in results.items() if r.error == ErrorCode.NONE}

    def try_complete(self) -> bool:
        for tp in list(self.pending):
            partition = self.manager.get_partition(*tp)
            result = self.results[tp]
            if partition is None or not partition.is_leader or partition.log is None:
                result.error = ErrorCode.NOT_LEADER_OR_FOLLOWER
                self.pending.discard(tp)
            elif partition.log.high_watermark >= result.required_offset:
                if len(partition.isr) < partition.min_insync_replicas:
                    result.error = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                self.pending.discard(tp)
        return not self.pending and self.complete()

    def on_complete(self) -> ProduceResults:
        for tp in self.pending:
            self.results[tp].error = ErrorCode.REQUEST_TIMED_OUT
        return self.results


@dataclass(slots=True)
class DeleteRecordsPartitionResult:
    error: int = ErrorCode.NONE
    low_watermark: int = -1
    requested_offset: int = -1
    message: str | None = None


DeleteRecordsResults = dict[TopicPartition, DeleteRecordsPartitionResult]


class DelayedDeleteRecords(DelayedOperation[DeleteRecordsResults]):
    """DeleteRecords waits until the low watermark (the lowest log start offset of the live replicas)
    reaches the offset asked for, as Kafka's DelayedDeleteRecords."""

    def __init__(
        self,
        timeout_ms: int,
        manager: ReplicaManager,
        results: DeleteRecordsResults,
    ) -> None:
        super().__init__(timeout_ms)
        self.manager = manager
        self.results = results
        self.pending = {tp for tp, r in results.items() if r.error == ErrorCode.NONE}

    def try_complete(self) -> bool:
        for tp in list(self.pending):
            result = self.results[tp]
            partition = self.manager.get_partition(*tp)
            if partition is None:
                result.error, result.low_watermark = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
            elif not partition.is_leader or partition.log is None:
                result.error, result.low_watermark = ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
            else:
                low = partition.low_watermark(self.manager.metadata_cache.is_alive)
                if low < result.requested_offset:
                    continue
                result.low_watermark = low
            self.pending.discard(tp)
        return not self.pending and self.complete()

    def on_complete(self) -> DeleteRecordsResults:
        for tp in self.pending:
            self.results[tp].error = ErrorCode.REQUEST_TIMED_OUT
        return self.results


class DelayedFetch(DelayedOperation[FetchResults]):
    def __init__(
        self,
        manager: ReplicaManager,
        params: FetchParams,
        requests: list[FetchPartitionRequest],
        first: FetchResults,
    ) -> None:
        super().__init__(params.max_wait_ms)
        self.manager = manager
        self.params = params
        self.requests = requests
        self.first = first

    def try_complete(self) -> bool:
        accumulated = 0
        for request in self.requests:
            partition = self.manager.get_partition(request.topic, request.partition)
            result = self.first[(request.topic, request.partition)]
            if partition is None or partition.log is None or result.info is None:
                return self.complete()  # the partition went: answer now
            if not partition.is_leader and self.params.fetch_only_from_leader:
                return self.complete()  # leadership moved: answer now
            since = result.info.fetch_offset_metadata
            if self.params.from_follower:
                available = partition.log.log_end_offset > since.message_offset
                if available and not self.manager.should_leader_throttle(partition, self.params.replica_id):
                    accumulated += self.params.min_bytes
                continue
            found = partition.bytes_available(since, self.params.isolation_level)
            accumulated += self.params.min_bytes if found is None else found
        return accumulated >= self.params.min_bytes and self.complete()

    def on_complete(self) -> FetchResults:
        results = self.manager.read_from_local_logs(self.params, self.requests)
        self.manager.record_bytes_out(self.params, results)
        return results


def first_few(names: list[str], shown: int = 5) -> str:
    """The first ``shown`` names of a list that may hold thousands, and how many more there are."""
    text = ", ".join(names[:shown])
    return f"{text} and {len(names) - shown} more" if len(names) > shown else text


class _LoopSlice:
    """How long the application of a controller's request has held the event loop: ``pause`` yields
    to the loop's other work once LOOP_SLICE_S have passed since the last yield."""

    def __init__(self) -> None:
        self._since = time.monotonic()

    async def pause(self) -> None:
        if time.monotonic() - self._since >= LOOP_SLICE_S:
            await asyncio.sleep(0)
            self._since = time.monotonic()


@dataclass(slots=True)
class _LeaderAndIsrOutcome:
    """What one LeaderAndIsr did, per partition, logged as a few lines for the whole request (a
    controller's resend of thousands of partitions would otherwise log a line for each)."""

    errors: dict[TopicPartition, int] = field(default_factory=dict)
    stale: list[str] = field(default_factory=list)  # leader epoch not newer than ours
    not_replica: list[str] = field(default_factory=list)
    failed: list[tuple[str, StorageError]] = field(default_factory=list)
    # KIP-516: the log here belongs to another topic id (a deleted topic's): INCONSISTENT_TOPIC_ID
    inconsistent: list[str] = field(default_factory=list)
    leading: list[str] = field(default_factory=list)  # newly led
    following: list[str] = field(default_factory=list)  # following a new leader
    prepared: int = 0  # partitions new to this broker, their logs opened or created off the loop

    def log(self, broker_id: int, request: LeaderAndIsrRequest, seconds: float) -> None:
        if self.stale:
            log.info(
                "ignoring LeaderAndIsr for %d partitions: their leader epoch is not newer than ours: %s",
                len(self.stale),
                first_few(self.stale),
            )
        if self.not_replica:
            log.info(
                "ignoring LeaderAndIsr for %d partitions: broker %d is not a replica: %s",
                len(self.not_replica),
                broker_id,
                first_few(self.not_replica),
            )
        if self.inconsistent:
            log.error(
                "refusing LeaderAndIsr for %d partitions (INCONSISTENT_TOPIC_ID): the topic id of the "
                "request is not the one of the log here: %s",
                len(self.inconsistent),
                first_few(self.inconsistent),
            )
        if self.failed:
            log.error(
                "cannot open the logs of %d partitions (KAFKA_STORAGE_ERROR): %s; the first failure: %s",
                len(self.failed),
                first_few([name for name, _ in self.failed]),
                self.failed[0][1],
            )
        if not self.errors:
            return
        log.info(
            "applied LeaderAndIsr from controller %d (epoch %d) for %d partitions in %d ms: %d new to "
            "this broker; broker %d now leads %d (%s) and follows a new leader for %d (%s)",
            request.controller_id,
            request.controller_epoch,
            len(self.errors),
            seconds * 1000,
            self.prepared,
            broker_id,
            len(self.leading),
            first_few(self.leading),
            len(self.following),
            first_few(self.following),
        )


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        metadata_cache: MetadataCache,
        fetchers: ReplicaFetcherManager | None = None,
        replica_lag_time_max_ms: int = 30_000,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.fetchers = fetchers
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        # Set by the server once the controller channel exists: proposes ISR changes to the controller.
        self.alter_partition: AlterPartitionManager | None = None
        # Set by the server before it serves requests: tells the active controller from impostors.
        self.controller_fence: ControllerFence | None = None
        # Set by the server when transaction.partition.verification.enable is on (KIP-890): asks the
        # transaction coordinators whether a producer's transactional batches may be appended.
        self.add_partitions_to_txn: AddPartitionsToTxnManager | None = None
        # Set by the server from replica.selector.class (KIP-392): which replica a consumer should read
        # from; None: the leader.
        self.replica_selector: ReplicaSelector | None = None
        self.broker_epoch = -1
        self._partitions: dict[TopicPartition, Partition] = {}
        self.fetch_purgatory = DelayedOperationPurgatory[FetchResults]("Fetch")
        self.produce_purgatory = DelayedOperationPurgatory[ProduceResults]("Produce")
        self.delete_records_purgatory = DelayedOperationPurgatory[DeleteRecordsResults]("DeleteRecords")
        # ElectLeaders waiting for this broker's metadata to show the new leaders (broker.replica_admin).
        self.elect_leader_purgatory = DelayedOperationPurgatory[ElectionResults]("ElectLeader")
        # Told (topic, partition, leads?, leader epoch) whenever this broker becomes a partition's leader
        # or follower, or stops hosting it (epoch -1 if unknown): the group coordinator follows the
        # leadership of __consumer_offsets this way.
        self.role_listeners: list[Callable[[str, int, bool, int], None]] = []
        # Serializes the application of LeaderAndIsr and StopReplica, which yield to the event loop.
        self._state_change_lock = asyncio.Lock()
        self._log_preparation = ThreadPoolExecutor(LOG_PREPARATION_THREADS, "log-preparation")
        self._stopped = False  # set at shutdown: stops the preparation of logs
        # Set by the server: leader.replication.throttled.rate over leader.replication.throttled.replicas
        # (KIP-73; broker.quota_manager). None: no replication throttle.
        self.leader_quota: ReplicationQuotaManager | None = None
        # Kafka's BrokerTopicStats and ISR change meters, counted here as plain numbers and exposed by
        # broker.broker_metrics.
        self.topic_stats = BrokerTopicStats()
        self.isr_stats = IsrStats()

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def leader_partition(self, topic: str, partition: int) -> Partition:
        """This broker's leader replica of the partition, or the Kafka error a client should get."""
        found = self._partitions.get((topic, partition))
        if found is None:
            self._check_not_offline(topic, partition)
            if self.metadata_cache.partition(topic, partition) is not None:
                raise KafkaError(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic}-{partition} is led by another broker"
                )
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} does not exist")
        if not found.is_leader:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {self.broker_id} does not lead {topic}-{partition}"
            )
        return found

    def local_partition(self, topic: str, partition: int) -> Partition:
        """This broker's replica of the partition, leader or follower, or the Kafka error."""
        found = self._partitions.get((topic, partition))
        if found is None or found.log is None:
            self._check_not_offline(topic, partition)
            if self.metadata_cache.partition(topic, partition) is not None:
                raise KafkaError(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    f"broker {self.broker_id} has no replica of {topic}-{partition}",
                )
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} does not exist")
        return found

    # -- offline partitions (JBOD: a failed log dir, see broker.log_dir_failure) -----------------

    def _check_not_offline(self, topic: str, partition: int) -> None:
        if (topic, partition) in self.log_manager.offline_partitions:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"the log dir of {topic}-{partition} is offline")

    def report_io_error(self, tp: TopicPartition, error: OSError) -> int:
        """An I/O error on the partition's log: its log dir goes offline (at once when on the event loop,
        so that nothing more is served from it); returns KAFKA_STORAGE_ERROR for the request."""
        partition = self._partitions.get(tp)
        if partition is not None and partition.log is not None:
            self.log_manager.maybe_handle_io_error(
                partition.log.dir, f"I/O error on the log of {tp[0]}-{tp[1]}", error
            )
        return ErrorCode.KAFKA_STORAGE_ERROR

    def mark_partitions_offline(self, partitions: Iterable[TopicPartition]) -> None:
        """The partitions whose log dir failed: no longer hosted (Kafka's HostedPartition.Offline: the log
        manager remembers them), their fetchers stopped, what waits on them answered."""
        for tp in partitions:
            partition = self._partitions.pop(tp, None)
            if self.fetchers is not None:
                self.fetchers.remove_partition(tp)
            if partition is not None:
                partition.log = None
            self.produce_purgatory.check(tp)
            self.fetch_purgatory.check(tp)
            self.delete_records_purgatory.check(tp)
            for listener in self.role_listeners:
                listener(*tp, False, -1)

    # -- the controller's requests --------------------------------------------------------------

    async def check_controller(
        self, request: LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest
    ) -> Refusal | None:
        """None if a LeaderAndIsr, UpdateMetadata or StopReplica comes from the active controller and
        is meant for this broker's current epoch; else why it must change nothing (STALE_CONTROLLER_EPOCH
        or STALE_BROKER_EPOCH, or unanswered when ZooKeeper cannot say)."""
        if self.controller_fence is None:
            return Refusal(ErrorCode.STALE_CONTROLLER_EPOCH, "this broker cannot confirm any controller yet")
        return await self.controller_fence.check(
            request.controller_id, request.controller_epoch, request.broker_epoch, self.broker_epoch
        )

    async def become_leader_or_follower(
        self, request: LeaderAndIsrRequest, version: int, fenced: int = ErrorCode.NONE
    ) -> tuple[int, dict[TopicPartition, int], dict[str, uuid.UUID]]:
        """Applies LeaderAndIsr: (top-level error, per-partition errors, topic ids). ``fenced`` is the
        error ``check_controller`` refused the request with: then nothing changes, and every partition
        gets that error.

        The partitions are applied in the request's order, all of them before this returns, and never
        interleaved with another LeaderAndIsr or StopReplica (Kafka's replicaStateChangeLock). The logs
        of partitions new to this broker are prepared on LOG_PREPARATION_THREADS threads,
        LOG_PREPARATION_BATCH partitions at a time (creating a log is blocking I/O), and the rest yields
        to the event loop every LOOP_SLICE_S: a request of thousands of partitions never holds the loop
        long. Until its turn comes, a partition answers produces and fetches as before the request."""
        states: list[tuple[str, uuid.UUID, LeaderAndIsrRequest.LeaderAndIsrPartitionState]] = (
            [(s.topic_name, uuid.UUID(int=0), s) for s in request.ungrouped_partition_states]
            if version < 2
            else [(t.topic_name, t.topic_id, s) for t in request.topic_states for s in t.partition_states]
        )
        topic_ids = {topic: topic_id for topic, topic_id, _ in states}
        if fenced != ErrorCode.NONE:
            return fenced, {(t, s.partition_index): fenced for t, _, s in states}, topic_ids
        async with self._state_change_lock:
            started = time.monotonic()
            outcome = _LeaderAndIsrOutcome()
            # The leaders' inter-broker endpoints, which followers fetch from.
            leaders = {b.broker_id: (b.host_name, b.port) for b in request.live_leaders}
            loop = asyncio.get_running_loop()
            slice_ = _LoopSlice()
            for first in range(0, len(states), LOG_PREPARATION_BATCH):
                batch = states[first : first + LOG_PREPARATION_BATCH]
                new = [
                    ((topic, state.partition_index), topic_id, state)
                    for topic, topic_id, state in batch
                    if (topic, state.partition_index) not in self._partitions
                    and self.broker_id in state.replicas
                ]
                prepared: dict[TopicPartition, Log | StorageError] = {}
                for part in await asyncio.gather(
                    *(
                        loop.run_in_executor(
                            self._log_preparation, self._prepare_logs, new[i::LOG_PREPARATION_THREADS]
                        )
                        for i in range(min(len(new), LOG_PREPARATION_THREADS))
                    )
                ):
                    prepared.update(part)
                for topic, topic_id, state in batch:
                    tp = (topic, state.partition_index)
                    outcome.errors[tp] = self._become_leader_or_follower(
                        tp, topic_id, state, leaders, prepared.get(tp), outcome
                    )
                    await slice_.pause()
            outcome.log(self.broker_id, request, time.monotonic() - started)
        return ErrorCode.NONE, outcome.errors, topic_ids

    def _prepare_logs(
        self, new: list[tuple[TopicPartition, uuid.UUID, LeaderAndIsrRequest.LeaderAndIsrPartitionState]]
    ) -> dict[TopicPartition, Log | StorageError]:
        """On a log-preparation thread: the logs of partitions this broker does not host yet, created if
        missing; each learns its topic id first (partition.metadata written and fsynced before any
        other file, as Kafka does; a log on disk with another id, a deleted topic's, is left untouched:
        InconsistentTopicIdError), and a new leader's log gets its leader epoch's start offset (a
        checkpoint write with its fsyncs, which Kafka also makes). No Partition serves these logs yet,
        so nothing else appends to them meanwhile."""
        prepared: dict[TopicPartition, Log | StorageError] = {}
        for tp, topic_id, state in new:
            try:
                if self._stopped:  # the log manager is closing the logs
                    raise KafkaStorageError("the broker is shutting down")
                log_ = self.log_manager.get_or_create_log(*tp, is_new=state.is_new)
                Partition.check_or_set_topic_id(log_, topic_id)
                if state.leader == self.broker_id:
                    log_.maybe_assign_epoch_start_offset(state.leader_epoch, log_.log_end_offset)
            except StorageError as e:
                prepared[tp] = e
            except OSError as e:
                prepared[tp] = KafkaStorageError(f"Error while opening the log of {tp[0]}-{tp[1]}: {e}")
            else:
                prepared[tp] = log_
        return prepared

    def _become_leader_or_follower(
        self,
        tp: TopicPartition,
        topic_id: uuid.UUID,
        state: LeaderAndIsrRequest.LeaderAndIsrPartitionState,
        leaders: dict[int, tuple[str, int]],
        prepared: Log | StorageError | None,
        outcome: _LeaderAndIsrOutcome,
    ) -> int:
        """One partition's state of a LeaderAndIsr: its error code, its fate noted in ``outcome``. As
        Kafka's becomeLeaderOrFollower, the topic id is checked first: a log here that belongs to
        another id (a topic deleted and re-created under its name while this broker missed the
        deletion) gets INCONSISTENT_TOPIC_ID and is never served as the new topic's."""
        partition = self._partitions.get(tp)
        if partition is not None:
            known_id = partition.topic_id
        else:
            on_disk = self.log_manager.get_log(*tp)
            known_id = on_disk.topic_id if on_disk is not None and on_disk.topic_id else uuid.UUID(int=0)
        if topic_id.int and known_id.int and known_id != topic_id:
            outcome.inconsistent.append(
                f"{tp[0]}-{tp[1]} (log {topic_id_string(known_id)}, request {topic_id_string(topic_id)})"
            )
            if partition is not None:
                # Departs from Kafka (which keeps the old replica in its old role): this broker stops
                # serving the old topic's log under the name; it stays on disk until the controller's
                # deletion (StopReplica with delete) reaches it.
                self._unhost_partition(tp, partition.leader_epoch)
            return ErrorCode.INCONSISTENT_TOPIC_ID
        if partition is not None and state.leader_epoch <= partition.leader_epoch:
            if (
                state.leader_epoch == partition.leader_epoch
                and topic_id.int
                and partition.log is not None
                and partition.log.topic_id is None
            ):
                # Kafka: the controller names the id of a topic made before topic ids without
                # bumping the epoch: the log learns it.
                try:
                    Partition.check_or_set_topic_id(partition.log, topic_id)
                except StorageError as e:
                    outcome.failed.append((f"{tp[0]}-{tp[1]}", e))
                    return storage_error(e).code
                partition.topic_id = topic_id
                return ErrorCode.NONE
            outcome.stale.append(f"{tp[0]}-{tp[1]} (epoch {state.leader_epoch} <= {partition.leader_epoch})")
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if self.broker_id not in state.replicas:
            outcome.not_replica.append(f"{tp[0]}-{tp[1]}")
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if isinstance(prepared, InconsistentTopicIdError):  # the log's id changed meanwhile
            outcome.inconsistent.append(f"{tp[0]}-{tp[1]} ({prepared})")
            return ErrorCode.INCONSISTENT_TOPIC_ID
        if isinstance(prepared, StorageError):
            outcome.failed.append((f"{tp[0]}-{tp[1]}", prepared))
            return storage_error(prepared).code
        if prepared is None:  # hosted already: its log exists
            assert partition is not None and partition.log is not None
            prepared = partition.log
            try:  # a log made before topic ids learns its id now (a write, rare: on the loop)
                Partition.check_or_set_topic_id(prepared, topic_id)
            except StorageError as e:
                outcome.failed.append((f"{tp[0]}-{tp[1]}", e))
                return storage_error(e).code
        else:
            outcome.prepared += 1
        if partition is None:
            partition = self._partitions[tp] = Partition(tp[0], tp[1], self.broker_id)
            partition.isr_stats = self.isr_stats
        if state.leader == self.broker_id:
            if self.fetchers is not None:
                self.fetchers.remove_partition(tp)
            if partition.make_leader(state, prepared, topic_id):
                outcome.leading.append(f"{tp[0]}-{tp[1]}")
        else:
            if partition.make_follower(state, prepared, topic_id):
                outcome.following.append(f"{tp[0]}-{tp[1]}")
            endpoint = leaders.get(state.leader)
            if self.fetchers is not None and endpoint is not None:
                # A new leader epoch: truncate by epoch, then fetch (KIP-101).
                self.fetchers.add_partition(partition, *endpoint)
            elif self.fetchers is not None:
                self.fetchers.remove_partition(tp)  # the partition is offline: nobody to follow
        # Waiting produces and fetches on this partition re-check (they fail over to the new leader).
        self.produce_purgatory.check(tp)
        self.fetch_purgatory.check(tp)
        self.delete_records_purgatory.check(tp)
        for listener in self.role_listeners:
            listener(*tp, state.leader == self.broker_id, state.leader_epoch)
        return ErrorCode.NONE

    async def stop_replicas(
        self, request: StopReplicaRequest, version: int, fenced: int = ErrorCode.NONE
    ) -> tuple[int, dict[TopicPartition, int]]:
        """Applies StopReplica: (top-level error, per-partition errors). ``fenced`` is as for
        ``become_leader_or_follower``, and so are the serialization and the yields to the loop."""
        if version == 0:
            items = [
                (p.topic_name, p.partition_index, DELETE_WHATEVER_THE_EPOCH, request.delete_partitions)
                for p in request.ungrouped_partitions
            ]
        elif version < 3:
            items = [
                (t.name, i, DELETE_WHATEVER_THE_EPOCH, request.delete_partitions)
                for t in request.topics
                for i in t.partition_indexes
            ]
        else:
            items = [
                (t.topic_name, p.partition_index, p.leader_epoch, p.delete_partition)
                for t in request.topic_states
                for p in t.partition_states
            ]
        if fenced != ErrorCode.NONE:
            return fenced, {(t, p): fenced for t, p, _, _ in items}
        errors: dict[TopicPartition, int] = {}
        stopped: list[str] = []
        deleted: list[str] = []
        async with self._state_change_lock:
            slice_ = _LoopSlice()
            for topic, index, leader_epoch, delete in items:
                tp = (topic, index)
                errors[tp] = self._stop_replica(tp, leader_epoch, delete)
                if errors[tp] == ErrorCode.NONE:
                    (deleted if delete else stopped).append(f"{topic}-{index}")
                await slice_.pause()
        if stopped:
            log.info("broker %d stopped %d replicas: %s", self.broker_id, len(stopped), first_few(stopped))
        if deleted:
            log.info(
                "broker %d stopped and deleted %d replicas: %s",
                self.broker_id,
                len(deleted),
                first_few(deleted),
            )
        return ErrorCode.NONE, errors

    def _stop_replica(self, tp: TopicPartition, leader_epoch: int, delete: bool) -> int:
        partition = self._partitions.get(tp)
        if (
            partition is not None
            and leader_epoch not in (-1, DELETE_WHATEVER_THE_EPOCH)
            and leader_epoch < partition.leader_epoch
        ):
            return ErrorCode.FENCED_LEADER_EPOCH
        if tp in self.log_manager.offline_partitions:  # its log is on a failed dir (HostedPartition.Offline)
            return ErrorCode.KAFKA_STORAGE_ERROR
        # A log on disk that no Partition serves (a deleted topic's, left while this broker was down or
        # refused with INCONSISTENT_TOPIC_ID) is deleted too: the controller's deletion retry reaches it.
        self._unhost_partition(tp, leader_epoch, delete)
        return ErrorCode.NONE

    def _unhost_partition(self, tp: TopicPartition, leader_epoch: int, delete: bool = False) -> None:
        """Stops serving the partition (and deletes its log if ``delete``): no fetcher, waiting
        operations re-checked (they fail over), the role listeners told."""
        self._partitions.pop(tp, None)
        if self.fetchers is not None:
            self.fetchers.remove_partition(tp)
        if delete:
            self.log_manager.async_delete(*tp)
        self.produce_purgatory.check(tp)
        self.fetch_purgatory.check(tp)
        self.delete_records_purgatory.check(tp)
        for listener in self.role_listeners:
            listener(*tp, False, max(leader_epoch, -1))

    # -- produce --------------------------------------------------------------------------------

    def append_records(
        self,
        entries: Iterable[tuple[str, int, memoryview]],
        required_acks: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guards: Mapping[TopicPartition, VerificationGuard] | None = None,
    ) -> ProduceResults:
        """Appends to each partition's leader log; errors are per partition. ``verification_guards``:
        the guards of the partitions whose transactional batches the coordinator verified."""
        results: ProduceResults = {}
        stats = self.topic_stats
        all_topics = stats.all_topics
        for topic, index, records in entries:
            tp = (topic, index)
            all_topics.total_produce_requests += 1  # Kafka's BrokerTopicMetrics, as appendToLocalLog counts
            try:
                partition = self.leader_partition(topic, index)
                guard = verification_guards.get(tp, SENTINEL) if verification_guards else SENTINEL
                info = partition.append_records_to_leader(records, required_acks, origin, guard)
            except KafkaError as e:
                stats.produce_failed(topic, e.code, len(records))
                results[tp] = ProducePartitionResult(error=e.code, message=e.message)
                continue
            except OSError as e:  # the disk failed: the log dir goes offline (broker.log_dir_failure)
                results[tp] = ProducePartitionResult(error=self.report_io_error(tp, e), message=str(e))
                stats.produce_failed(topic, results[tp].error, len(records))
                continue
            topic_stats = stats.topic(topic)
            topic_stats.total_produce_requests += 1
            size = len(records)
            topic_stats.bytes_in += size
            all_topics.bytes_in += size
            topic_stats.messages_in += info.num_records
            all_topics.messages_in += info.num_records
            results[tp] = ProducePartitionResult(
                base_offset=info.first_offset,
                log_append_time=info.log_append_time,
                log_start_offset=info.log_start_offset,
                required_offset=info.last_offset + 1,
            )
            # New data below the high watermark (or for followers) may complete waiting fetches.
            self.fetch_purgatory.check(tp)
        return results

    def append_with_transaction_verification(
        self,
        entries: list[tuple[str, int, memoryview]],
        required_acks: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        sequences: Mapping[TopicPartition, int],
        generic_errors: bool = False,
    ) -> asyncio.Future[ProduceResults]:
        """A client's produce holding transactional batches (Kafka's handleProduceAppend): the
        partitions in ``sequences`` (each with its first batch's base sequence) where the producer has
        no ongoing transaction are verified with the transaction coordinator first, each under a guard
        made now, and appended with it once verified (a marker ending the transaction meanwhile voids the
        guard: INVALID_TXN_STATE); the other partitions of ``entries`` are appended with them. The
        future is done at once when nothing needed verifying."""
        failed: dict[TopicPartition, int] = {}
        guards: dict[TopicPartition, VerificationGuard] = {}
        for tp, sequence in sequences.items():
            try:
                guard = self.leader_partition(*tp).maybe_start_transaction_verification(
                    producer_id, sequence, producer_epoch
                )
            except KafkaError as e:
                failed[tp] = e.code
                continue
            if guard is not SENTINEL:
                guards[tp] = guard
        verifier = self.add_partitions_to_txn
        if not guards or verifier is None:
            return completed(self._append_verified(entries, required_acks, failed, guards))
        verification = verifier.verify_transaction(
            transactional_id, producer_id, producer_epoch, list(guards), generic_errors
        )
        return then(
            verification,
            lambda unverified: self._append_verified(
                entries, required_acks, {**failed, **unverified}, guards
            ),
        )

    def _append_verified(
        self,
        entries: list[tuple[str, int, memoryview]],
        required_acks: int,
        failed: Mapping[TopicPartition, int],
        guards: Mapping[TopicPartition, VerificationGuard],
    ) -> ProduceResults:
        results: ProduceResults = {tp: verification_failure(code) for tp, code in failed.items()}
        remaining = [e for e in entries if (e[0], e[1]) not in results] if results else entries
        results.update(self.append_records(remaining, required_acks, AppendOrigin.CLIENT, guards))
        return results

    def wait_for_acks(self, results: ProduceResults, timeout_ms: int) -> asyncio.Future[ProduceResults]:
        """acks=all: the results once every appended partition's high watermark has passed its records,
        or ``timeout_ms`` has (REQUEST_TIMED_OUT for those still waiting)."""
        operation = DelayedProduce(timeout_ms, self, results)
        return self.produce_purgatory.try_complete_else_watch(operation, results.keys())

    # -- fetch ----------------------------------------------------------------------------------

    def read_from_local_logs(
        self, params: FetchParams, requests: list[FetchPartitionRequest]
    ) -> FetchResults:
        results: FetchResults = {}
        budget = params.max_bytes
        min_one_message = True
        brokers: dict[int, BrokerInfo] | None = None  # the live brokers, looked up once for the selector
        for request in requests:
            tp = (request.topic, request.partition)
            try:
                if params.fetch_only_from_leader:
                    partition = self.leader_partition(*tp)
                else:
                    partition = self.local_partition(*tp)
                if (
                    self.replica_selector is not None
                    and params.client_rack is not None
                    and not params.from_follower
                    and partition.is_leader
                ):
                    if brokers is None:
                        brokers = {b.id: b for b in self.metadata_cache.alive_brokers()}
                    preferred = preferred_read_replica(
                        self.replica_selector,
                        partition,
                        params.client_rack,
                        request.fetch_offset,
                        brokers,
                        int(time.time() * 1000),
                    )
                    if preferred != NO_PREFERRED_REPLICA:
                        # KIP-392: no records, only where to read them (Kafka skips the read).
                        partition.check_leader_epoch(request.current_leader_epoch)
                        results[tp] = self._error_result(tp, ErrorCode.NONE)
                        results[tp].preferred_read_replica = preferred
                        continue
                if request.last_fetched_epoch >= 0:
                    diverging = partition.diverging_epoch(
                        request.fetch_offset, request.last_fetched_epoch, request.current_leader_epoch
                    )
                    if diverging is not None:
                        results[tp] = self._error_result(tp, ErrorCode.NONE)
                        results[tp].diverging_epoch = diverging
                        continue
                info = partition.read(
                    request.fetch_offset,
                    max(0, min(request.max_bytes, budget)),
                    params.isolation_level,
                    min_one_message,
                    request.current_leader_epoch,
                    params.from_follower,
                    params.fetch_only_from_leader,
                )
            except KafkaError as e:
                self.topic_stats.fetch_failed(request.topic, e.code)
                results[tp] = self._error_result(tp, e.code)
                continue
            except OSError as e:  # the disk failed: the log dir goes offline (broker.log_dir_failure)
                results[tp] = self._error_result(tp, self.report_io_error(tp, e))
                continue
            if params.from_follower:
                self.update_follower_fetch_state(
                    partition, params.replica_id, request.fetch_offset, request.log_start_offset
                )
                quota = self.leader_quota
                if (
                    info.length
                    and quota is not None
                    and quota.throttled
                    and self.should_leader_throttle(partition, params.replica_id)
                ):
                    # KIP-73: a throttled partition's records wait while the leader's rate is over.
                    info = FetchDataInfo(info.fetch_offset_metadata)
            budget -= info.length
            if info.length:
                min_one_message = False
            assert partition.log is not None
            results[tp] = FetchPartitionResult(
                high_watermark=partition.log.high_watermark,
                last_stable_offset=partition.log.last_stable_offset,
                log_start_offset=partition.log.log_start_offset,
                info=info,
                aborted=info.aborted_transactions if params.isolation_level == READ_COMMITTED else None,
            )
        return results

    def should_leader_throttle(self, partition: Partition, replica_id: int) -> bool:
        """Kafka's shouldLeaderThrottle: the follower is out of the ISR, the partition is throttled on
        this leader and the leader's replication rate is over its bound."""
        quota = self.leader_quota
        return (
            quota is not None
            and bool(quota.throttled)
            and replica_id not in partition.isr
            and quota.is_throttled(partition.topic, partition.partition)
            and quota.is_quota_exceeded()
        )

    def _error_result(self, tp: TopicPartition, code: int) -> FetchPartitionResult:
        partition = self._partitions.get(tp)
        if partition is not None and partition.log is not None:
            lg = partition.log
            return FetchPartitionResult(code, lg.high_watermark, lg.last_stable_offset, lg.log_start_offset)
        return FetchPartitionResult(code)

    def fetch_messages(
        self, params: FetchParams, requests: list[FetchPartitionRequest]
    ) -> asyncio.Future[FetchResults]:
        """The fetch results: at once when there is enough data (or an error, or no wait asked for),
        else once the fetch purgatory finds enough or the max wait ends (long poll)."""
        results = self.read_from_local_logs(params, requests)
        stats = self.topic_stats
        for topic, _ in results:  # Kafka's TotalFetchRequestsPerSec: each partition of the first read
            stats.topic(topic).total_fetch_requests += 1
        stats.all_topics.total_fetch_requests += len(results)
        total = sum(r.info.length for r in results.values() if r.info is not None)
        errors = any(
            r.error != ErrorCode.NONE or r.diverging_epoch or r.preferred_read_replica >= 0
            for r in results.values()
        )
        if params.max_wait_ms <= 0 or not requests or total >= params.min_bytes or errors:
            self.record_bytes_out(params, results)
            return completed(results)
        operation = DelayedFetch(self, params, requests, results)
        return self.fetch_purgatory.try_complete_else_watch(
            operation, [(r.topic, r.partition) for r in requests]
        )

    def record_bytes_out(self, params: FetchParams, results: FetchResults) -> None:
        """Counts the records a fetch answers with (Kafka's BrokerTopicStats.updateBytesOut): a
        follower's as ReplicationBytesOut over all topics, a consumer's as BytesOut per topic and in all."""
        stats = self.topic_stats
        if params.from_follower:
            stats.replication_bytes_out += sum(r.info.length for r in results.values() if r.info is not None)
        elif params.from_consumer:
            all_topics = stats.all_topics
            for (topic, _), r in results.items():
                info = r.info
                if info is not None and info.length:
                    stats.topic(topic).bytes_out += info.length
                    all_topics.bytes_out += info.length

    def update_follower_fetch_state(
        self, partition: Partition, replica_id: int, fetch_offset: int, log_start_offset: int = -1
    ) -> None:
        """A follower fetching from ``fetch_offset`` has everything before it: the high watermark may
        move, completing waiting acks=all produces; its log start offset may complete a DeleteRecords."""
        if replica_id not in partition.followers:
            return
        partition.update_follower(replica_id, fetch_offset, log_start_offset, int(time.time() * 1000))
        if log_start_offset >= 0:
            self.delete_records_purgatory.check(partition.key)
        expanded = partition.isr_to_expand(replica_id)
        if expanded is not None and self.alter_partition is not None:
            self.alter_partition.submit(partition, expanded)
        self.on_high_watermark_may_move(partition)

    def on_high_watermark_may_move(self, partition: Partition) -> None:
        """Completes the produces and fetches waiting on the partition if its high watermark moved."""
        if partition.maybe_increment_high_watermark():
            self.produce_purgatory.check(partition.key)
            self.fetch_purgatory.check(partition.key)

    def shrink_lagging_isrs(self) -> None:
        """Takes followers that have not caught up for replica.lag.time.max.ms out of the ISRs this
        broker leads (Kafka's isr-expiration task)."""
        if self.alter_partition is None:
            return
        now = int(time.time() * 1000)
        for partition in list(self._partitions.values()):
            shrunk = partition.isr_to_shrink(now, self.replica_lag_time_max_ms)
            if shrunk is not None:
                self.alter_partition.submit(partition, shrunk)

    def last_offset_for_leader_epoch(
        self, topic: str, index: int, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch on the leader: (epoch, end offset) of ``leader_epoch``."""
        partition = self.leader_partition(topic, index)
        partition.check_leader_epoch(current_leader_epoch)
        assert partition.log is not None
        return partition.log.end_offset_for_epoch(leader_epoch)

    # -- DeleteRecords --------------------------------------------------------------------------

    def delete_records(
        self, offsets: dict[TopicPartition, int], timeout_ms: int
    ) -> asyncio.Future[DeleteRecordsResults]:
        """Moves each led partition's log start offset; the results once every live replica has moved
        its own that far, or ``timeout_ms`` has passed (REQUEST_TIMED_OUT for the partitions late)."""
        results: DeleteRecordsResults = {}
        for tp, offset in offsets.items():
            try:
                partition = self.leader_partition(*tp)
                requested = partition.delete_records_on_leader(offset)
                low = partition.low_watermark(self.metadata_cache.is_alive)
            except KafkaError as e:
                results[tp] = DeleteRecordsPartitionResult(error=e.code, message=e.message)
                continue
            results[tp] = DeleteRecordsPartitionResult(low_watermark=low, requested_offset=requested)
        if not any(r.error == ErrorCode.NONE for r in results.values()):
            return completed(results)
        operation = DelayedDeleteRecords(timeout_ms, self, results)
        return self.delete_records_purgatory.try_complete_else_watch(operation, results.keys())

    # -- housekeeping ---------------------------------------------------------------------------

    def checkpoint_high_watermarks(self) -> None:
        self.log_manager.checkpoint_high_watermarks()

    def shutdown(self) -> None:
        self._stopped = True
        self._log_preparation.shutdown(wait=False, cancel_futures=True)
        self.fetch_purgatory.complete_all()
        self.produce_purgatory.complete_all()
        self.delete_records_purgatory.complete_all()
        self.elect_leader_purgatory.complete_all()
