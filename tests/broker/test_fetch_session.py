"""The fetch session cache (KIP-227) alone, as Kafka's FetchSessionCache keeps it: epochs, session
errors, full and incremental contexts, forgotten partitions, and which session a new one may evict."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from broker.fetch_session import (
    EVICTION_MS,
    FINAL_EPOCH,
    INT32_MAX,
    CachedPartition,
    FetchManager,
    FetchSessionCache,
    FullFetchContext,
    IncrementalFetchContext,
    PartitionFetch,
    SessionErrorContext,
    SessionKey,
    SessionlessFetchContext,
    next_epoch,
)
from protocol.errors import ErrorCode

TOPIC_ID = uuid.uuid4()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


@dataclass
class Resp:
    error_code: int = ErrorCode.NONE
    high_watermark: int = 10
    log_start_offset: int = 0
    preferred_read_replica: int = -1
    records_size: int = 0
    has_diverging_epoch: bool = False


def data(partition: int, offset: int = 0, topic_id: uuid.UUID = TOPIC_ID) -> PartitionFetch:
    return PartitionFetch("t", topic_id, partition, offset, -1, 1024)


def request(*parts: PartitionFetch) -> dict[SessionKey, PartitionFetch]:
    return {p.key: p for p in parts}


def names(topic_id: uuid.UUID) -> str | None:
    return "t" if topic_id == TOPIC_ID else None


def open_session(manager: FetchManager, n: int = 3, version: int = 17, follower: bool = False) -> int:
    fetch = request(*(data(p) for p in range(n)))
    context = manager.new_context(version, 0, 0, follower, fetch, [], names)
    assert isinstance(context, FullFetchContext)
    outcome = context.respond({k: Resp() for k in fetch})
    assert outcome.error == ErrorCode.NONE and outcome.session_id != 0
    return outcome.session_id


def test_next_epoch_wraps_to_one_and_final_stays_final() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(INT32_MAX) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_full_fetch_creates_a_session_at_epoch_one() -> None:
    cache = FetchSessionCache(10, clock=Clock())
    session_id = open_session(FetchManager(cache))
    session = cache.get(session_id)
    assert session is not None and session.epoch == 1 and len(session) == 3 and session.uses_topic_ids
    assert cache.num_partitions == 3


def test_sessionless_fetches_create_no_session() -> None:
    cache = FetchSessionCache(10, clock=Clock())
    manager = FetchManager(cache)
    fetch = request(data(0))
    for version, epoch in ((6, 0), (17, FINAL_EPOCH)):
        context = manager.new_context(version, 0, epoch, False, fetch, [], names)
        assert isinstance(context, SessionlessFetchContext) and not isinstance(context, FullFetchContext)
        assert context.respond({k: Resp() for k in fetch}).session_id == 0
    assert len(cache) == 0


def test_session_errors() -> None:
    cache = FetchSessionCache(10, clock=Clock())
    manager = FetchManager(cache)
    session_id = open_session(manager)

    def error(version: int, sid: int, epoch: int) -> int:
        context = manager.new_context(version, sid, epoch, False, {}, [], names)
        assert isinstance(context, SessionErrorContext)
        outcome = context.respond({})
        assert outcome.session_id == 0 and outcome.keys == []
        return outcome.error

    assert error(17, session_id + 1, 1) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert error(17, session_id, 2) == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert error(12, session_id, 1) == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # None of these moved the session on.
    assert isinstance(manager.new_context(17, session_id, 1, False, {}, [], names), IncrementalFetchContext)


def test_incremental_fetch_reads_the_whole_session_and_answers_only_changes() -> None:
    cache = FetchSessionCache(10, clock=Clock())
    manager = FetchManager(cache)
    session_id = open_session(manager)
    context = manager.new_context(17, session_id, 1, False, request(data(1, offset=5)), [], names)
    assert isinstance(context, IncrementalFetchContext)
    assert [(p.partition, p.fetch_offset) for p in context.partitions()] == [(0, 0), (1, 5), (2, 0)]
    keys = [p.key for p in context.partitions()]
    updates = {
        keys[0]: Resp(),  # nothing new
        keys[1]: Resp(records_size=100),  # new records
        keys[2]: Resp(high_watermark=11),  # the high watermark moved
    }
    outcome = context.respond(updates)
    assert (outcome.error, outcome.session_id, outcome.keys) == (ErrorCode.NONE, session_id, keys[1:])
    # The partition that returned data goes to the end of the session (round robin).
    session = cache.get(session_id)
    assert session is not None and list(session.partitions) == [keys[0], keys[2], keys[1]]
    # The next epoch: the high watermark seen is cached, so nothing is answered again.
    context = manager.new_context(17, session_id, 2, False, {}, [], names)
    assert context.respond({k: Resp(high_watermark=11) for k in keys}).keys == [keys[0], keys[1]]
    context = manager.new_context(17, session_id, 3, False, {}, [], names)
    assert context.respond({k: Resp(high_watermark=11) for k in keys}).keys == []


def test_errors_are_always_answered_and_answered_again_once_gone() -> None:
    cache = FetchSessionCache(10, clock=Clock())
    manager = FetchManager(cache)
    session_id = open_session(manager, n=1)
    key = data(0).key
    context = manager.new_context(17, session_id, 1, False, {}, [], names)
    assert context.respond({key: Resp(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)}).keys == [key]
    context = manager.new_context(17, session_id, 2, False, {}, [], names)
    assert context.respond({key: Resp()}).keys == [key]  # the cached high watermark was forgotten
    context = manager.new_context(17, session_id, 3, False, {}, [], names)
    assert context.respond({key: Resp(preferred_read_replica=2)}).keys == [key]
    context = manager.new_context(17, session_id, 4, False, {}, [], names)
    assert context.respond({key: Resp(has_diverging_epoch=True)}).keys == [key]


def test_a_completion_after_the_session_moved_on_is_an_epoch_error() -> None:
    cache = FetchSessionCache(10, clock=Clock())
    manager = FetchManager(cache)
    session_id = open_session(manager)
    parked = manager.new_context(17, session_id, 1, False, {}, [], names)
    manager.new_context(17, session_id, 2, False, {}, [], names)  # the client retried meanwhile
    outcome = parked.respond({data(0).key: Resp(records_size=5)})
    assert (outcome.error, outcome.session_id, outcome.keys) == (
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        session_id,
        [],
    )


def test_forgotten_partitions_leave_and_an_empty_session_closes() -> None:
    cache = FetchSessionCache(10, clock=Clock())
    manager = FetchManager(cache)
    session_id = open_session(manager, n=2)
    k0, k1 = data(0).key, data(1).key
    context = manager.new_context(17, session_id, 1, False, {}, [k0], names)
    assert [p.partition for p in context.partitions()] == [1]
    context = manager.new_context(17, session_id, 2, False, {}, [k1], names)
    assert isinstance(context, SessionlessFetchContext)
    assert cache.get(session_id) is None and cache.num_partitions == 0


def test_a_full_fetch_naming_its_session_closes_it() -> None:
    cache = FetchSessionCache(10, clock=Clock())
    manager = FetchManager(cache)
    session_id = open_session(manager)
    context = manager.new_context(17, session_id, FINAL_EPOCH, False, request(data(0)), [], names)
    assert isinstance(context, SessionlessFetchContext)
    assert cache.get(session_id) is None
    new_id = open_session(manager)
    assert manager.new_context(17, new_id, 0, False, request(data(0)), [], names) is not None
    assert cache.get(new_id) is None  # closed by the full fetch that named it


def test_a_topic_id_unknown_at_first_is_resolved_later() -> None:
    cache = FetchSessionCache(10, clock=Clock())
    manager = FetchManager(cache)
    later = uuid.uuid4()
    known: dict[uuid.UUID, str] = {}
    fetch = request(PartitionFetch(None, later, 0, 0, -1, 1024))
    context = manager.new_context(17, 0, 0, False, fetch, [], known.get)
    session_id = context.respond({k: Resp(error_code=ErrorCode.UNKNOWN_TOPIC_ID) for k in fetch}).session_id
    known[later] = "created"
    context = manager.new_context(17, session_id, 1, False, {}, [], known.get)
    assert [p.topic for p in context.partitions()] == ["created"]


def test_a_full_cache_refuses_new_sessions_until_one_is_evictable() -> None:
    clock = Clock()
    cache = FetchSessionCache(2, clock=clock)
    manager = FetchManager(cache)
    first, second = open_session(manager), open_session(manager)
    # Young sessions are not evictable: the new full fetch gets no session.
    context = manager.new_context(17, 0, 0, False, request(data(0)), [], names)
    assert context.respond({data(0).key: Resp()}).session_id == 0
    # Two minutes idle: the least recently used goes.
    clock.now += EVICTION_MS + 1
    manager.new_context(17, second, 1, False, {}, [], names)  # touches the second
    third = open_session(manager, n=1)
    assert cache.get(first) is None and cache.get(second) is not None and cache.get(third) is not None
    assert cache.evictions == 1


def test_eviction_prefers_consumers_and_small_sessions() -> None:
    clock = Clock()
    cache = FetchSessionCache(2, clock=clock)
    manager = FetchManager(cache)
    follower = open_session(manager, n=3, follower=True)
    consumer = open_session(manager, n=3)
    # A follower's young session may take a consumer's slot; a consumer's may not.
    context = manager.new_context(17, 0, 0, False, request(data(0)), [], names)
    assert context.respond({data(0).key: Resp()}).session_id == 0
    clock.now += 1000
    new_follower = open_session(manager, n=3, follower=True)
    assert cache.get(consumer) is None and cache.get(follower) is not None
    assert cache.get(new_follower) is not None
    # Old enough and touched, sessions are evictable by all, the smaller and consumer ones first.
    clock.now += EVICTION_MS + 1
    manager.new_context(17, follower, 1, True, {}, [], names)
    manager.new_context(17, new_follower, 1, True, {}, [], names)
    context = manager.new_context(17, 0, 0, False, request(data(0)), [], names)
    assert context.respond({data(0).key: Resp()}).session_id == 0  # a consumer is worth less
    bigger = open_session(manager, n=4, follower=True)
    assert cache.get(bigger) is not None and len(cache) == 2


def test_no_slots_no_sessions() -> None:
    cache = FetchSessionCache(0, clock=Clock())
    context = FetchManager(cache).new_context(17, 0, 0, False, request(data(0)), [], names)
    assert context.respond({data(0).key: Resp()}).session_id == 0


def test_cached_partition_records_what_it_answered() -> None:
    cached = CachedPartition(data(0), high_watermark=10, local_log_start_offset=0)
    assert not cached.must_respond(Resp(), True)
    assert cached.must_respond(Resp(log_start_offset=3), False)
    assert cached.local_log_start_offset == 0  # not updated when only sizing
    assert cached.must_respond(Resp(log_start_offset=3), True)
    assert not cached.must_respond(Resp(log_start_offset=3), True)


def test_the_followers_session_handler_sends_only_changes_and_forgets_what_left() -> None:
    from broker.replica_fetcher import FetchSessionHandler

    handler = FetchSessionHandler()
    a, b = ("t", 0), ("t", 1)
    wanted = {a: (TOPIC_ID, 0, 0, 1024, 1), b: (TOPIC_ID, 5, 0, 1024, 1)}
    assert handler.build(wanted, True) == (wanted, [])  # full: everything
    assert handler.handle_response(ErrorCode.NONE, 42) and (handler.session_id, handler.epoch) == (42, 1)
    # Only b moved on; nothing is forgotten.
    moved = {a: wanted[a], b: (TOPIC_ID, 9, 0, 1024, 1)}
    assert handler.build(moved, True) == ({b: moved[b]}, [])
    assert handler.handle_response(ErrorCode.NONE, 42) and handler.epoch == 2
    # a leaves the fetch (a new leader, truncation, a backoff); b's topic is re-created with a new id.
    new_id = uuid.uuid4()
    again = {b: (new_id, 0, 0, 1024, 0)}
    assert handler.build(again, True) == (again, [(a, TOPIC_ID), (b, TOPIC_ID)])
    # A session error: a full fetch follows, closing the session unless the leader lost it.
    assert not handler.handle_response(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
    assert (handler.session_id, handler.epoch) == (42, 0)
    assert handler.build(again, True) == (again, [])
    assert not handler.handle_response(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert (handler.session_id, handler.epoch) == (0, 0)
    # Topic ids appear where they were missing: a full fetch by id replaces the name-based session.
    handler.build({a: (uuid.UUID(int=0), 0, 0, 1024, 1)}, False)
    handler.handle_response(ErrorCode.NONE, 7)
    assert handler.build({a: (TOPIC_ID, 0, 0, 1024, 1)}, True) == ({a: (TOPIC_ID, 0, 0, 1024, 1)}, [])
    assert handler.epoch == 0 and handler.session_id == 7
