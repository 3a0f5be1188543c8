"""Replica fetchers: how a follower copies its leader's log.

``ReplicaFetcherManager`` keeps, per leader broker, ``num.replica.fetchers`` fetcher tasks and spreads
the followed partitions over them. A fetcher first truncates each new partition by leader epoch
(KIP-101, KIP-279): it asks the leader where the follower's latest epoch ends (OffsetForLeaderEpoch)
and cuts its log there, never trusting its own high watermark. Then it sends Fetch requests carrying
this broker's id as the replica id, appends what comes back with the leader's offsets, and follows the
leader's high watermark and log start offset. The leader learns how far the follower got from the
next fetch's offsets, which is what moves its high watermark and ISR.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from dataclasses import dataclass

from broker.partition import Partition, storage_error
from network.client import NetworkClient
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import FetchRequest, FetchResponse, ListOffsetsRequest, OffsetForLeaderEpochRequest
from server_common.tasks import cancel_and_wait
from storage.errors import StorageError
from storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Log

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_FETCH_VERSION = 11  # the last before topic ids; truncation goes through OffsetForLeaderEpoch
_EPOCH_VERSION = 3  # carries the replica id
_LIST_OFFSETS_VERSION = 4
_BACKOFF_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.REPLICA_NOT_AVAILABLE,
}


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


@dataclass
class _PartitionState:
    partition: Partition
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0

    @property
    def log(self) -> Log:
        lg = self.partition.log
        assert lg is not None  # a followed partition has its log: make_follower set it before adding it
        return lg


def _by_topic(states: list[_PartitionState]) -> dict[str, list[_PartitionState]]:
    grouped: dict[str, list[_PartitionState]] = {}
    for state in states:
        grouped.setdefault(state.partition.topic, []).append(state)
    return grouped


class ReplicaFetcher:
    """Fetches a set of partitions from one leader broker."""

    def __init__(self, settings: FetchSettings, leader_id: int, host: str, port: int, name: str) -> None:
        self.settings = settings
        self.leader_id = leader_id
        self.name = name
        self._client = NetworkClient(
            host,
            port,
            f"replica-fetcher-{settings.broker_id}",
            request_timeout=settings.socket_timeout_ms / 1000,
        )
        self._partitions: dict[TopicPartition, _PartitionState] = {}
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
        if not states:
            return False
        settings = self.settings
        request = FetchRequest(
            replica_id=settings.broker_id,
            max_wait_ms=settings.max_wait_ms,
            min_bytes=settings.min_bytes,
            max_bytes=settings.response_max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,  # no incremental fetch session
            topics=[
                FetchRequest.FetchTopic(
                    topic=topic,
                    partitions=[
                        FetchRequest.FetchPartition(
                            partition=s.partition.partition,
                            current_leader_epoch=s.leader_epoch,
                            fetch_offset=s.log.log_end_offset,
                            log_start_offset=s.log.log_start_offset,
                            partition_max_bytes=settings.partition_max_bytes,
                        )
                        for s in group
                    ],
                )
                for topic, group in _by_topic(states).items()
            ],
        )
        response = await self._client.send(api(ApiKey.FETCH), _FETCH_VERSION, request)
        if response.error_code != ErrorCode.NONE:
            raise ConnectionError(f"fetch refused: {ErrorCode(response.error_code).name}")
        for topic in response.responses:
            for p in topic.partitions:
                state = self._partitions.get((topic.topic, p.partition_index))
                if state is not None and not state.truncating:
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
            lg.update_high_watermark(min(p.high_watermark, lg.log_end_offset))
            start = min(p.log_start_offset, lg.high_watermark)
            if start > lg.log_start_offset:
                lg.delete_records_before(start)
        except StorageError as e:
            error = storage_error(e)
            log.error("%s: cannot append to %s-%d: %s", self.name, *partition.key, error.message)
            self._delay(state, "append failed")

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

    def _index(self, key: TopicPartition) -> int:
        # Kafka's assignment of a partition to a fetcher: a stable hash of topic and partition.
        return (zlib.crc32(key[0].encode()) * 31 + key[1]) % self.num_fetchers

    def add_partition(self, partition: Partition, host: str, port: int) -> None:
        """Starts (or restarts, with truncation first) following ``partition.leader_id`` at host:port."""
        self.remove_partition(partition.key)
        fetcher_key = (partition.leader_id, self._index(partition.key))
        fetcher = self._fetchers.get(fetcher_key)
        if fetcher is not None and fetcher.endpoint != (host, port):
            self._fetchers.pop(fetcher_key)  # the leader broker moved: a new connection
            task = asyncio.get_running_loop().create_task(fetcher.shutdown())
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)
            fetcher = None
        if fetcher is None:
            name = f"ReplicaFetcher-{self.settings.broker_id}-{fetcher_key[1]}-leader-{partition.leader_id}"
            fetcher = self._fetchers[fetcher_key] = ReplicaFetcher(
                self.settings, partition.leader_id, host, port, name
            )
        fetcher.add(partition)
        self._owner[partition.key] = fetcher_key

    def remove_partition(self, key: TopicPartition) -> None:
        fetcher_key = self._owner.pop(key, None)
        if fetcher_key is not None and fetcher_key in self._fetchers:
            self._fetchers[fetcher_key].remove(key)

    async def shutdown(self) -> None:
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        await asyncio.gather(*(f.shutdown() for f in fetchers), return_exceptions=True)
