"""Replica fetchers: how a follower copies its leader's log.

``ReplicaFetcherManager`` keeps, per leader broker, ``num.replica.fetchers`` fetcher tasks and spreads
the followed partitions over them. A fetcher first truncates each new partition by leader epoch
(KIP-101, KIP-279): it asks the leader where the follower's latest epoch ends (OffsetForLeaderEpoch)
and cuts its log there, never trusting its own high watermark. Then it sends Fetch requests carrying
this broker's id as the replica id, appends what comes back with the leader's offsets, and follows the
leader's high watermark and log start offset. The leader learns how far the follower got from the
next fetch's offsets, which is what moves its high watermark and ISR.

Each fetcher keeps an incremental fetch session with its leader (KIP-227, Kafka's FetchSessionHandler):
the first Fetch is full and opens the session; the next ones name only the partitions whose fetch
parameters changed (those that got data, a new leader epoch, ...) and forget those that left the
fetch (removed, truncating, backing off after an error), and the leader answers only the partitions
with something new. Fetch v17 names topics by id when every fetched partition knows its topic's id,
else v12 by name; a change between the two, a session error or a failed request starts a new session.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.partition import Partition, storage_error
from network.client import NetworkClient
from network.client_security import ClientSecurity
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import FetchRequest, FetchResponse, ListOffsetsRequest, OffsetForLeaderEpochRequest
from server_common.tasks import cancel_and_wait
from storage.errors import StorageError
from storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Log

if TYPE_CHECKING:
    from broker.quota_manager import ReplicationQuotaManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_FETCH_VERSION = 17  # topic ids (v13+), replica state (v15+); truncation goes through OffsetForLeaderEpoch
_FETCH_VERSION_BY_NAME = 12  # when a fetched partition's topic id is unknown
_EPOCH_VERSION = 3  # carries the replica id
_LIST_OFFSETS_VERSION = 4
_BACKOFF_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.INCONSISTENT_TOPIC_ID,
}
_INITIAL_EPOCH = 0
_INT32_MAX = 2**31 - 1
_ZERO_UUID = uuid.UUID(int=0)


@dataclass
class FetchSettings:
    """Kafka's replica.* settings."""

    broker_id: int
    max_wait_ms: int
    min_bytes: int
    response_max_bytes: int
    partition_max_bytes: int
    backoff_ms: int
    socket_timeout_ms: int
    # KIP-392: told of each followed partition whose high watermark moved, so that the consumers
    # fetching from this follower are answered then (Kafka's completeDelayedFetchRequests).
    on_high_watermark: Callable[[tuple[str, int]], object] | None = None
    # An I/O error appending a followed partition's records: its log dir goes offline (Kafka's
    # LogDirFailureChannel), at once rather than at the next checkpoint.
    on_io_error: Callable[[tuple[str, int], OSError], object] | None = None
    # How the leaders' inter-broker listener is reached (TLS, SASL): ClientSecurity.for_inter_broker.
    security: ClientSecurity | None = None
    # follower.replication.throttled.rate over follower.replication.throttled.replicas (KIP-73;
    # broker.quota_manager): a throttled partition not caught up is left out while over the rate.
    quota: ReplicationQuotaManager | None = None


class FetcherStats:
    """What a broker's replica fetchers copied: bytes of records appended (Kafka's
    ReplicationBytesInPerSec, as a running total: broker.broker_metrics)."""

    __slots__ = ("bytes_in",)

    def __init__(self) -> None:
        self.bytes_in = 0


@dataclass
class _PartitionState:
    partition: Partition
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0
    # Kafka's PartitionFetchState.isReplicaInSync: caught up to the leader's high watermark at the last
    # fetch (none yet: not in sync); a replication throttle spares it.
    in_sync: bool = False
    # Kafka's FetcherLagMetrics: the leader's high watermark less this log's end, at the last fetch.
    lag: int = 0

    @property
    def log(self) -> Log:
        lg = self.partition.log
        assert lg is not None  # a followed partition has its log: make_follower set it before adding it
        return lg


# What a fetch says of one partition: (topic id, fetch offset, log start offset, max bytes, leader epoch).
_PartitionData = tuple[uuid.UUID, int, int, int, int]


def _by_topic(
    partitions: dict[TopicPartition, _PartitionData],
) -> dict[str, list[tuple[TopicPartition, _PartitionData]]]:
    grouped: dict[str, list[tuple[TopicPartition, _PartitionData]]] = {}
    for key, data in partitions.items():
        grouped.setdefault(key[0], []).append((key, data))
    return grouped


def _forgotten(
    partitions: list[tuple[TopicPartition, uuid.UUID]],
) -> dict[tuple[str, uuid.UUID], list[int]]:
    grouped: dict[tuple[str, uuid.UUID], list[int]] = {}
    for (topic, partition), topic_id in partitions:
        grouped.setdefault((topic, topic_id), []).append(partition)
    return grouped


class FetchSessionHandler:
    """The follower's side of a fetch session with one leader (Kafka's FetchSessionHandler): which
    partitions the next Fetch must name and which it must forget, and the session's id and epoch."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = _INITIAL_EPOCH
        self.uses_topic_ids = False
        # The partitions the leader's session holds, with what it was last told of each.
        self.partitions: dict[TopicPartition, _PartitionData] = {}
        self.incremental_requests = 0  # how many incremental fetches were sent (tests, logs)

    def build(
        self, wanted: dict[TopicPartition, _PartitionData], uses_topic_ids: bool
    ) -> tuple[dict[TopicPartition, _PartitionData], list[tuple[TopicPartition, uuid.UUID]]]:
        """The partitions the next request names and those it forgets (topic, partition, topic id)."""
        if self.session_id != 0 and uses_topic_ids != self.uses_topic_ids:
            self.epoch = _INITIAL_EPOCH  # topic ids came or went: a full fetch closes the old session
        if self.epoch == _INITIAL_EPOCH:
            self.partitions = dict(wanted)
            self.uses_topic_ids = uses_topic_ids
            return dict(wanted), []
        to_send: dict[TopicPartition, _PartitionData] = {}
        to_forget: list[tuple[TopicPartition, uuid.UUID]] = []
        for key, previous in list(self.partitions.items()):
            current = wanted.get(key)
            if current is None:
                to_forget.append((key, previous[0]))
                del self.partitions[key]
            elif current != previous:
                if self.uses_topic_ids and current[0] != previous[0]:
                    to_forget.append((key, previous[0]))  # the topic was re-created under a new id
                to_send[key] = current
                self.partitions[key] = current
        for key, current in wanted.items():
            if key not in self.partitions:
                to_send[key] = current
                self.partitions[key] = current
        self.incremental_requests += 1
        return to_send, to_forget

    def handle_response(self, error: int, session_id: int) -> bool:
        """Moves the session on after a response; False when the response carries no partitions."""
        if error != ErrorCode.NONE:
            log.info("fetch session %d: %s", self.session_id, ErrorCode(error).name)
            if error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = 0
            self.epoch = _INITIAL_EPOCH
            return False
        if session_id == 0:
            self.session_id, self.epoch = 0, _INITIAL_EPOCH  # no session: every fetch is full
        elif self.epoch == _INITIAL_EPOCH or session_id == self.session_id:
            self.session_id = session_id
            self.epoch = 1 if self.epoch == _INT32_MAX else self.epoch + 1
        else:
            self.session_id, self.epoch = 0, _INITIAL_EPOCH  # an answer from another session
            return False
        return True

    def handle_error(self) -> None:
        """The request failed: the next fetch is full, closing the session if the leader kept it."""
        self.epoch = _INITIAL_EPOCH


class ReplicaFetcher:
    """Fetches a set of partitions from one leader broker."""

    def __init__(
        self,
        settings: FetchSettings,
        leader_id: int,
        host: str,
        port: int,
        name: str,
        stats: FetcherStats | None = None,
    ) -> None:
        self.settings = settings
        self.leader_id = leader_id
        self.name = name
        self.stats = stats if stats is not None else FetcherStats()
        self._client = NetworkClient(
            host,
            port,
            f"replica-fetcher-{settings.broker_id}",
            request_timeout=settings.socket_timeout_ms / 1000,
            security=settings.security,
        )
        self._partitions: dict[TopicPartition, _PartitionState] = {}
        self._session = FetchSessionHandler()
        self._changed = asyncio.Event()
        self._task: asyncio.Task | None = None

    @property
    def endpoint(self) -> tuple[str, int]:
        return self._client.host, self._client.port

    def add(self, partition: Partition) -> None:
        self._partitions[partition.key] = _PartitionState(partition, partition.leader_epoch)
        self._changed.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def remove(self, key: TopicPartition) -> None:
        self._partitions.pop(key, None)

    def partitions(self) -> list[Partition]:
        return [state.partition for state in self._partitions.values()]

    def lags(self) -> list[tuple[TopicPartition, int]]:
        """Each followed partition's lag behind its leader as of its last fetch (0 before one)."""
        return [(key, state.lag) for key, state in self._partitions.items()]

    def __len__(self) -> int:
        return len(self._partitions)

    async def _run(self) -> None:
        backoff = self.settings.backoff_ms / 1000
        while True:
            if not self._partitions:
                self._changed.clear()
                await self._changed.wait()
                continue
            try:
                await self._truncate()
                if not await self._fetch():
                    await asyncio.sleep(min(backoff, 0.1))  # everything is delayed or truncating
            except (OSError, TimeoutError, KafkaError) as e:
                self._session.handle_error()
                log.info("%s: fetch from broker %d failed (%s); retrying", self.name, self.leader_id, e)
                await asyncio.sleep(backoff)

    def _ready(self, *, truncating: bool) -> list[_PartitionState]:
        now = time.monotonic()
        return [s for s in self._partitions.values() if s.truncating == truncating and s.delayed_until <= now]

    def _delay(self, state: _PartitionState, reason: str) -> None:
        log.debug("%s: %s-%d delayed: %s", self.name, *state.partition.key, reason)
        state.delayed_until = time.monotonic() + self.settings.backoff_ms / 1000

    # -- truncation by leader epoch (KIP-101, KIP-279) -------------------------------------------

    async def _truncate(self) -> None:
        states = self._ready(truncating=True)
        asking: dict[str, list[tuple[_PartitionState, int]]] = {}  # by topic, with the latest epoch
        for state in states:
            lg = state.log
            latest_epoch = lg.latest_epoch
            if latest_epoch is None:
                # No epochs (an empty or pre-epoch log): only data above the high watermark is doubtful.
                self._truncate_to(state, lg.high_watermark)
            else:
                asking.setdefault(state.partition.topic, []).append((state, latest_epoch))
        if not asking:
            return
        request = OffsetForLeaderEpochRequest(
            replica_id=self.settings.broker_id,
            topics=[
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                    topic=topic,
                    partitions=[
                        OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                            partition=s.partition.partition,
                            current_leader_epoch=s.leader_epoch,
                            leader_epoch=latest_epoch,
                        )
                        for s, latest_epoch in group
                    ],
                )
                for topic, group in asking.items()
            ],
        )
        response = await self._client.send(api(ApiKey.OFFSET_FOR_LEADER_EPOCH), _EPOCH_VERSION, request)
        for topic in response.topics:
            for p in topic.partitions:
                found = self._partitions.get((topic.topic, p.partition))
                if found is None or not found.truncating:
                    continue
                if p.error_code != ErrorCode.NONE:
                    self._delay(found, ErrorCode(p.error_code).name)
                    continue
                lg = found.log
                if p.end_offset < 0:
                    target = lg.high_watermark
                elif p.leader_epoch == lg.latest_epoch:
                    target = min(p.end_offset, lg.log_end_offset)
                else:
                    # The leader lacks our latest epoch: keep what we hold of the epoch it knows.
                    _, own_end = lg.end_offset_for_epoch(p.leader_epoch)
                    target = min(p.end_offset, own_end if own_end >= 0 else lg.log_end_offset)
                self._truncate_to(found, target)

    def _truncate_to(self, state: _PartitionState, offset: int) -> None:
        lg = state.partition.log
        assert lg is not None
        if offset < lg.log_end_offset:
            log.info(
                "%s: truncating %s-%d from %d to %d (leader epoch %d)",
                self.name,
                *state.partition.key,
                lg.log_end_offset,
                offset,
                state.leader_epoch,
            )
            lg.truncate_to(offset)
        state.truncating = False

    # -- fetching -----------------------------------------------------------------------------

    async def _fetch(self) -> bool:
        states = self._ready(truncating=False)
        settings = self.settings
        quota = settings.quota
        if quota is not None and quota.throttled and quota.is_quota_exceeded():
            # Kafka's shouldFollowerThrottle: out of this fetch while the throttle's rate is over.
            states = [s for s in states if s.in_sync or not quota.is_throttled(*s.partition.key)]
        wanted: dict[TopicPartition, _PartitionData] = {
            s.partition.key: (
                s.partition.topic_id,
                s.log.log_end_offset,
                s.log.log_start_offset,
                settings.partition_max_bytes,
                s.leader_epoch,
            )
            for s in states
        }
        if not wanted:
            return False  # the leader's session, if any, idles until the next fetch or its eviction
        session = self._session
        uses_topic_ids = all(data[0].int for data in wanted.values())
        version = _FETCH_VERSION if uses_topic_ids else _FETCH_VERSION_BY_NAME
        to_send, to_forget = session.build(wanted, uses_topic_ids)
        names = {data[0]: key[0] for key, data in session.partitions.items() if data[0].int}
        names.update({topic_id: key[0] for key, topic_id in to_forget if topic_id.int})
        request = FetchRequest(
            replica_id=settings.broker_id,
            replica_state=FetchRequest.ReplicaState(replica_id=settings.broker_id, replica_epoch=-1),
            max_wait_ms=settings.max_wait_ms,
            min_bytes=settings.min_bytes,
            max_bytes=settings.response_max_bytes,
            isolation_level=0,
            session_id=session.session_id,
            session_epoch=session.epoch,
            topics=[
                FetchRequest.FetchTopic(
                    topic=topic,
                    topic_id=group[0][1][0],
                    partitions=[
                        FetchRequest.FetchPartition(
                            partition=key[1],
                            current_leader_epoch=data[4],
                            fetch_offset=data[1],
                            log_start_offset=data[2],
                            partition_max_bytes=data[3],
                        )
                        for key, data in group
                    ],
                )
                for topic, group in _by_topic(to_send).items()
            ],
            forgotten_topics_data=[
                FetchRequest.ForgottenTopic(topic=topic, topic_id=topic_id, partitions=partitions)
                for (topic, topic_id), partitions in _forgotten(to_forget).items()
            ],
        )
        try:
            response = await self._client.send(api(ApiKey.FETCH), version, request)
        except BaseException:
            session.handle_error()
            raise
        previous_session = session.session_id if session.epoch != _INITIAL_EPOCH else 0
        if not session.handle_response(response.error_code, response.session_id):
            return False
        if session.session_id not in (0, previous_session):
            log.info(
                "%s: fetch session %d with broker %d, %d partitions, Fetch v%d",
                self.name,
                session.session_id,
                self.leader_id,
                len(session.partitions),
                version,
            )
        for topic in response.responses:
            name = names.get(topic.topic_id) if version >= 13 else topic.topic
            if name is None:
                continue
            for p in topic.partitions:
                state = self._partitions.get((name, p.partition_index))
                if state is not None and not state.truncating and state.partition.key in wanted:
                    await self._process(state, p)
        return True

    async def _process(self, state: _PartitionState, p: FetchResponse.PartitionData) -> None:
        partition = state.partition
        lg = partition.log
        assert lg is not None
        if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            try:
                await self._handle_out_of_range(state)
            except KafkaError as e:
                self._delay(state, f"leader offsets: {e.code.name}")
            return
        if p.error_code != ErrorCode.NONE:
            if p.error_code in _BACKOFF_ERRORS:
                self._delay(state, ErrorCode(p.error_code).name)
            else:
                log.warning(
                    "%s: fetching %s-%d failed: %s", self.name, *partition.key, ErrorCode(p.error_code).name
                )
                self._delay(state, "error")
            return
        try:
            if p.records is not None and len(p.records):
                lg.append_as_follower(p.records)
                self.stats.bytes_in += len(p.records)
            state.lag = max(0, p.high_watermark - lg.log_end_offset)
            state.in_sync = state.lag == 0
            quota = self.settings.quota
            if quota is not None and p.records is not None and quota.is_throttled(*partition.key):
                quota.record(len(p.records))
            high_watermark = lg.high_watermark
            lg.update_high_watermark(min(p.high_watermark, lg.log_end_offset))
            start = min(p.log_start_offset, lg.high_watermark)
            if start > lg.log_start_offset:
                lg.delete_records_before(start)
            if lg.high_watermark != high_watermark and self.settings.on_high_watermark is not None:
                self.settings.on_high_watermark(partition.key)
        except StorageError as e:
            error = storage_error(e)
            log.error("%s: cannot append to %s-%d: %s", self.name, *partition.key, error.message)
            self._delay(state, "append failed")
        except OSError as e:
            self._delay(state, "I/O error")
            if self.settings.on_io_error is None:
                raise
            self.settings.on_io_error(partition.key, e)

    async def _handle_out_of_range(self, state: _PartitionState) -> None:
        """The follower's log end is outside the leader's log (Kafka's handleOffsetOutOfRange)."""
        lg = state.partition.log
        assert lg is not None
        leader_end = await self._leader_offset(state, LATEST_TIMESTAMP)
        if leader_end < lg.log_end_offset:
            # Only after an unclean election can the leader hold less than its follower.
            log.warning(
                "%s: %s-%d is ahead of its leader; truncating to %d",
                self.name,
                *state.partition.key,
                leader_end,
            )
            lg.truncate_to(leader_end)
            return
        leader_start = await self._leader_offset(state, EARLIEST_TIMESTAMP)
        if lg.log_end_offset < leader_start:
            log.info(
                "%s: %s-%d is behind its leader's log start; restarting at %d",
                self.name,
                *state.partition.key,
                leader_start,
            )
            lg.truncate_fully_and_start_at(leader_start)

    async def _leader_offset(self, state: _PartitionState, timestamp: int) -> int:
        request = ListOffsetsRequest(
            replica_id=self.settings.broker_id,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=state.partition.topic,
                    partitions=[
                        ListOffsetsRequest.ListOffsetsPartition(
                            partition_index=state.partition.partition,
                            current_leader_epoch=state.leader_epoch,
                            timestamp=timestamp,
                        )
                    ],
                )
            ],
        )
        response = await self._client.send(api(ApiKey.LIST_OFFSETS), _LIST_OFFSETS_VERSION, request)
        p = response.topics[0].partitions[0]
        if p.error_code != ErrorCode.NONE:
            raise KafkaError(p.error_code)
        return p.offset

    async def shutdown(self) -> None:
        await cancel_and_wait([self._task])
        await self._client.close()


class ReplicaFetcherManager:
    """The fetchers of this broker: per leader broker, ``num.replica.fetchers`` of them."""

    def __init__(self, settings: FetchSettings, num_fetchers: int) -> None:
        self.settings = settings
        self.num_fetchers = num_fetchers
        self._fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._owner: dict[TopicPartition, tuple[int, int]] = {}
        self._retiring: set[asyncio.Task] = set()
        self.stats = FetcherStats()  # shared by every fetcher, retired ones' counts kept

    def _index(self, key: TopicPartition) -> int:
        # Kafka's assignment of a partition to a fetcher: a stable hash of topic and partition.
        return (zlib.crc32(key[0].encode()) * 31 + key[1]) % self.num_fetchers

    def add_partition(self, partition: Partition, host: str, port: int) -> None:
        """Starts (or restarts, with truncation first) following ``partition.leader_id`` at host:port."""
        self.remove_partition(partition.key)
        fetcher_key = (partition.leader_id, self._index(partition.key))
        fetcher = self._fetchers.get(fetcher_key)
        if fetcher is not None and fetcher.endpoint != (host, port):
            self._retire(fetcher_key)  # the leader broker moved: a new connection
            fetcher = None
        if fetcher is None:
            name = f"ReplicaFetcher-{self.settings.broker_id}-{fetcher_key[1]}-leader-{partition.leader_id}"
            fetcher = self._fetchers[fetcher_key] = ReplicaFetcher(
                self.settings, partition.leader_id, host, port, name, self.stats
            )
        fetcher.add(partition)
        self._owner[partition.key] = fetcher_key

    def _retire(self, fetcher_key: tuple[int, int]) -> None:
        fetcher = self._fetchers.pop(fetcher_key)
        task = asyncio.get_running_loop().create_task(fetcher.shutdown())
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    def resize(self, num_fetchers: int) -> None:
        """``num.replica.fetchers`` changed at run time (Kafka's resizeThreadPool): each partition whose
        fetcher index changes moves to its new fetcher (truncating first, as any partition added does),
        and the fetchers beyond the new number stop."""
        if num_fetchers == self.num_fetchers:
            return
        log.info("replica fetchers per leader: %d -> %d", self.num_fetchers, num_fetchers)
        self.num_fetchers = num_fetchers
        for (_, index), fetcher in list(self._fetchers.items()):
            for partition in fetcher.partitions():
                if self._index(partition.key) != index:
                    self.add_partition(partition, *fetcher.endpoint)
        for fetcher_key in [k for k in self._fetchers if k[1] >= num_fetchers]:
            self._retire(fetcher_key)

    def lags(self) -> list[tuple[TopicPartition, int]]:
        """Every followed partition's lag behind its leader (Kafka's FetcherLagMetrics)."""
        return [lag for fetcher in list(self._fetchers.values()) for lag in fetcher.lags()]

    def remove_partition(self, key: TopicPartition) -> None:
        fetcher_key = self._owner.pop(key, None)
        if fetcher_key is not None and fetcher_key in self._fetchers:
            self._fetchers[fetcher_key].remove(key)

    async def shutdown(self) -> None:
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        await asyncio.gather(*(f.shutdown() for f in fetchers), return_exceptions=True)
