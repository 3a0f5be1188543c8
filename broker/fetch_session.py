"""Incremental fetch sessions (KIP-227), as Kafka's FetchSession.scala keeps them.

A client that fetches many partitions opens a session with a full Fetch (session id 0, epoch 0): the
broker caches each partition's request parameters and the high watermark and log start offset it last
answered, and names the session in its response. Later Fetches of the session (its id and the next
epoch) send only the partitions whose parameters changed, and forget those the client dropped; the
broker reads every partition of the session and answers only those with something new: records, a
new high watermark or log start offset, an error, a diverging epoch, a preferred read replica.

``FetchManager.new_context`` turns a request's session fields into a ``FetchContext``: a session error
(FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR), a sessionless
fetch (epoch -1, or before v7), a full fetch that may create a session, or an incremental one. The
context says which partitions to read and, once the reads are done (maybe after a long poll in the
fetch purgatory), filters the results against the session as it is then: a session that moved on to
another epoch meanwhile (a duplicate request) answers INVALID_FETCH_SESSION_EPOCH.

``FetchSessionCache`` holds at most ``max.incremental.fetch.session.cache.slots`` sessions. A new
session takes the slot of one idle for more than two minutes, else of an evictable one that is worth
less (followers' sessions are worth more than consumers', larger more than smaller); a session becomes
evictable two minutes after its creation (a follower's only by another follower's before then), and
when none can go the new full fetch gets no session (session id 0) and the client fetches sessionless.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from broker.replica_manager import FetchPartitionRequest
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1
# Kafka's FetchSessionCache eviction time: a session is evictable this long after its creation, and
# one idle for longer is evicted first.
EVICTION_MS = 120_000
ZERO_UUID = uuid.UUID(int=0)

# A partition in a session: (topic id, partition) when the session uses topic ids (Fetch v13+), else
# (topic name, partition), as Kafka's CachedPartition compares.
SessionKey = tuple[uuid.UUID | str, int]


def next_epoch(epoch: int) -> int:
    """The epoch that follows ``epoch`` (Kafka's FetchMetadata.nextEpoch)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


@dataclass(slots=True)
class PartitionFetch:
    """One partition of a Fetch request (Kafka's FetchRequest.PartitionData); ``topic`` is None when
    the request names a topic id this broker does not know."""

    topic: str | None
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    log_start_offset: int = -1
    max_bytes: int = 0
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    # The session key, computed once (a topic resolved later has an id, which the key holds instead).
    key: SessionKey = field(init=False, repr=False, compare=False)
    # The replica manager's form of it, built once per session partition and request parameters.
    _read: FetchPartitionRequest | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.key = key_of(self.topic, self.topic_id, self.partition)

    def read_request(self) -> FetchPartitionRequest:
        """What to read for this partition (its topic resolved)."""
        read = self._read
        if read is None:
            read = self._read = FetchPartitionRequest(
                self.topic or "",
                self.partition,
                self.fetch_offset,
                self.max_bytes,
                self.current_leader_epoch,
                self.log_start_offset,
                self.last_fetched_epoch,
            )
        return read


def key_of(topic: str | None, topic_id: uuid.UUID, partition: int) -> SessionKey:
    return (topic_id if topic_id.int else (topic or ""), partition)


class PartitionResponse(Protocol):
    """What the session looks at in one partition's response."""

    error_code: int
    high_watermark: int
    log_start_offset: int
    preferred_read_replica: int

    @property
    def records_size(self) -> int: ...

    @property
    def has_diverging_epoch(self) -> bool: ...


@dataclass(slots=True)
class CachedPartition:
    """A session's partition: its last request parameters and what the broker last answered."""

    fetch: PartitionFetch
    high_watermark: int = -1
    local_log_start_offset: int = -1

    def must_respond(self, response: PartitionResponse, update: bool) -> bool:
        """Whether the response must carry this partition; ``update`` records what it says."""
        must = response.records_size > 0
        if self.high_watermark != response.high_watermark:
            must = True
            if update:
                self.high_watermark = response.high_watermark
        if self.local_log_start_offset != response.log_start_offset:
            must = True
            if update:
                self.local_log_start_offset = response.log_start_offset
        if response.preferred_read_replica >= 0:
            must = True
        if response.error_code != ErrorCode.NONE:
            # Forget the high watermark so that the partition is sent again once the error goes.
            if update:
                self.high_watermark = -1
            must = True
        if response.has_diverging_epoch:
            must = True
        return must


@dataclass(slots=True, eq=False)
class FetchSession:
    id: int
    privileged: bool  # a follower's
    partitions: dict[SessionKey, CachedPartition]  # in fetch order: partitions that sent data go last
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    cached_size: int = -1  # the size the cache last accounted for; -1 when not in the cache
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def __len__(self) -> int:
        return len(self.partitions)

    @property
    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def update(
        self, fetch_data: Iterable[PartitionFetch], to_forget: Iterable[SessionKey]
    ) -> tuple[int, int, int]:
        """Applies an incremental request: (added, updated, removed) counts."""
        added = updated = removed = 0
        partitions = self.partitions
        for data in fetch_data:
            cached = partitions.get(data.key)
            if cached is None:
                partitions[data.key] = CachedPartition(data)
                added += 1
            else:
                if cached.fetch.topic is not None and data.topic is None:
                    data.topic = cached.fetch.topic
                cached.fetch = data
                updated += 1
        for key in to_forget:
            if partitions.pop(key, None) is not None:
                removed += 1
        return added, updated, removed


class FetchSessionCache:
    """The broker's fetch sessions (Kafka's FetchSessionCacheShard, one shard)."""

    def __init__(
        self,
        max_entries: int = 1000,
        eviction_ms: int = EVICTION_MS,
        clock: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.clock = clock
        self._sessions: dict[int, FetchSession] = {}
        self.num_partitions = 0
        self.evictions = 0
        # Counters for tests and benchmarks: requests served by kind.
        self.full_fetches = 0
        self.incremental_fetches = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[FetchSession]:
        return iter(list(self._sessions.values()))

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def _new_session_id(self) -> int:
        while True:
            session_id = random.randint(1, INT32_MAX - 1)
            if session_id not in self._sessions:
                return session_id

    def maybe_create_session(
        self,
        now: int,
        privileged: bool,
        size: int,
        uses_topic_ids: bool,
        partitions: Callable[[], dict[SessionKey, CachedPartition]],
    ) -> int:
        """A new session's id, or 0 when the cache is full and no session may be evicted for it."""
        if len(self._sessions) >= self.max_entries and not self._try_evict(privileged, size, now):
            log.debug("no fetch session created for privileged=%s, size=%d", privileged, size)
            return INVALID_SESSION_ID
        if self.max_entries <= 0:
            return INVALID_SESSION_ID
        session = FetchSession(
            self._new_session_id(),
            privileged,
            partitions(),
            uses_topic_ids,
            now,
            now,
            next_epoch(INITIAL_EPOCH),
        )
        self._sessions[session.id] = session
        self.touch(session, now)
        log.debug("created fetch session %d (%d partitions, privileged=%s)", session.id, size, privileged)
        return session.id

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        if not self._sessions:
            return False
        stale = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stale.last_used_ms > self.eviction_ms:
            log.debug("evicting stale fetch session %d", stale.id)
            self.remove(stale)
            self.evictions += 1
            return True
        candidates = [
            s
            for s in self._sessions.values()
            if (s.evictable_by_privileged if privileged else s.evictable_by_all)
        ]
        if not candidates:
            return False
        cheapest = min(candidates, key=lambda s: s.evictable_key)
        # Kafka compares (privileged, size, id) with the new session's id as 0: evict only what is worth
        # no more than the newcomer.
        if (privileged, size, 0) < cheapest.evictable_key:
            return False
        log.debug("evicting fetch session %d for a new one of %d partitions", cheapest.id, size)
        self.remove(cheapest)
        self.evictions += 1
        return True

    def remove(self, session: FetchSession | int) -> FetchSession | None:
        if isinstance(session, int):
            found = self._sessions.get(session)
            if found is None:
                return None
            session = found
        removed = self._sessions.pop(session.id, None)
        if removed is not None:
            self.num_partitions -= max(0, removed.cached_size)
            removed.cached_size = -1
        return removed

    def touch(self, session: FetchSession, now: int) -> None:
        session.last_used_ms = now
        if session.cached_size != -1:
            self.num_partitions -= session.cached_size
        session.cached_size = len(session)
        old_enough = now - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = (not session.privileged) or old_enough
        session.evictable_by_all = old_enough
        self.num_partitions += session.cached_size


@dataclass(slots=True)
class SessionResponse:
    """What a context makes of the read results: the top-level error, the session id, and the
    partitions to answer (a subset of the keys given, in their order)."""

    error: int
    session_id: int
    keys: list[SessionKey] = field(default_factory=list)


class FetchContext:
    """How one Fetch request relates to the session cache (Kafka's FetchContext)."""

    def partitions(self) -> list[PartitionFetch]:
        """The partitions to read, with their parameters."""
        return []

    def fetch_offset(self, key: SessionKey) -> int | None:
        return None

    def respond(self, updates: Mapping[SessionKey, PartitionResponse]) -> SessionResponse:
        raise NotImplementedError


class SessionErrorContext(FetchContext):
    def __init__(self, error: int) -> None:
        self.error = error

    def respond(self, updates: Mapping[SessionKey, PartitionResponse]) -> SessionResponse:
        return SessionResponse(self.error, INVALID_SESSION_ID)


class SessionlessFetchContext(FetchContext):
    def __init__(self, fetch_data: dict[SessionKey, PartitionFetch]) -> None:
        self.fetch_data = fetch_data

    def partitions(self) -> list[PartitionFetch]:
        return list(self.fetch_data.values())

    def fetch_offset(self, key: SessionKey) -> int | None:
        data = self.fetch_data.get(key)
        return None if data is None else data.fetch_offset

    def respond(self, updates: Mapping[SessionKey, PartitionResponse]) -> SessionResponse:
        return SessionResponse(ErrorCode.NONE, INVALID_SESSION_ID, list(updates))


class FullFetchContext(SessionlessFetchContext):
    """A full fetch: every partition answered; a new session caches them all, if the cache has room."""

    def __init__(
        self,
        cache: FetchSessionCache,
        fetch_data: dict[SessionKey, PartitionFetch],
        uses_topic_ids: bool,
        is_from_follower: bool,
    ) -> None:
        super().__init__(fetch_data)
        self.cache = cache
        self.uses_topic_ids = uses_topic_ids
        self.is_from_follower = is_from_follower

    def respond(self, updates: Mapping[SessionKey, PartitionResponse]) -> SessionResponse:
        def cached() -> dict[SessionKey, CachedPartition]:
            partitions: dict[SessionKey, CachedPartition] = {}
            for key, response in updates.items():
                data = self.fetch_data.get(key)
                if data is not None:
                    partitions[key] = CachedPartition(
                        data, response.high_watermark, response.log_start_offset
                    )
            return partitions

        session_id = self.cache.maybe_create_session(
            self.cache.clock(), self.is_from_follower, len(updates), self.uses_topic_ids, cached
        )
        return SessionResponse(ErrorCode.NONE, session_id, list(updates))


class IncrementalFetchContext(FetchContext):
    """A fetch in an existing session: every partition of the session is read; only those with
    something new are answered."""

    def __init__(
        self, session: FetchSession, request_epoch: int, topic_names: Callable[[uuid.UUID], str | None]
    ) -> None:
        self.session = session
        self.request_epoch = request_epoch
        self.topic_names = topic_names

    def partitions(self) -> list[PartitionFetch]:
        result = []
        for cached in self.session.partitions.values():
            data = cached.fetch
            if data.topic is None and self.session.uses_topic_ids:
                data.topic = self.topic_names(data.topic_id)  # a topic id unknown until now
            result.append(data)
        return result

    def fetch_offset(self, key: SessionKey) -> int | None:
        cached = self.session.partitions.get(key)
        return None if cached is None else cached.fetch.fetch_offset

    def respond(self, updates: Mapping[SessionKey, PartitionResponse]) -> SessionResponse:
        session = self.session
        expected = next_epoch(self.request_epoch)
        if session.epoch != expected:
            log.info(
                "incremental fetch session %d expected epoch %d, but got %d: possible duplicate request",
                session.id,
                expected,
                session.epoch,
            )
            return SessionResponse(ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id)
        keys = []
        partitions = session.partitions
        for key, response in updates.items():
            cached = partitions.get(key)
            if cached is None:  # forgotten by a later request of the session: nothing to say
                continue
            if cached.must_respond(response, True):
                keys.append(key)
                if response.records_size > 0:
                    # Round robin: a partition that returned data goes to the end of the session.
                    del partitions[key]
                    partitions[key] = cached
        return SessionResponse(ErrorCode.NONE, session.id, keys)


class FetchManager:
    """Gives each Fetch its context (Kafka's FetchManager)."""

    def __init__(self, cache: FetchSessionCache) -> None:
        self.cache = cache

    def new_context(
        self,
        version: int,
        session_id: int,
        epoch: int,
        is_from_follower: bool,
        fetch_data: dict[SessionKey, PartitionFetch],
        to_forget: list[SessionKey],
        topic_names: Callable[[uuid.UUID], str | None],
    ) -> FetchContext:
        cache = self.cache
        if version < 7:
            return SessionlessFetchContext(fetch_data)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full fetch
            if session_id != INVALID_SESSION_ID and cache.remove(session_id) is not None:
                log.debug("full fetch closed fetch session %d", session_id)
            cache.full_fetches += 1
            if epoch == FINAL_EPOCH:
                return SessionlessFetchContext(fetch_data)
            return FullFetchContext(cache, fetch_data, version >= 13, is_from_follower)
        session = cache.get(session_id)
        if session is None:
            log.debug("fetch session %d not found", session_id)
            return SessionErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            log.debug("fetch session %d: expected epoch %d, got %d", session_id, session.epoch, epoch)
            return SessionErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != (version >= 13):
            log.debug(
                "fetch session %d: topic ids %s, but Fetch v%d", session_id, session.uses_topic_ids, version
            )
            return SessionErrorContext(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(fetch_data.values(), to_forget)
        if not session.partitions:
            log.debug("fetch session %d has no partitions left: closed", session_id)
            cache.remove(session)
            return SessionlessFetchContext(fetch_data)
        cache.touch(session, cache.clock())
        session.epoch = next_epoch(session.epoch)
        cache.incremental_fetches += 1
        return IncrementalFetchContext(session, epoch, topic_names)
