"""FetchApis: the Fetch handler (Kafka's KafkaApis.handleFetchRequest), merged into KafkaApis.

A Fetch, from a consumer or a follower, first meets the fetch session cache (``broker.fetch_session``,
KIP-227), which says which partitions to read: those the request names, or every partition of its
incremental session. Fetch v13+ names topics by id, resolved with the metadata cache (an unknown id is
UNKNOWN_TOPIC_ID, an id that is not the local log's INCONSISTENT_TOPIC_ID). The reads become
ReplicaManager.fetch_messages (parked until min_bytes or max_wait_ms); when they complete, the session
context filters the results as the session then is (an incremental response names only partitions
with something new) and the response names each partition's file region, which the connection sends
with sendfile. Fetch v0-3 gets its records down-converted to magic 0 (v0-1) or 1 (v2-3) as bytes.
From v16 a NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries the current leader and its endpoint
on the request's listener (KIP-951).

With an authorizer (Kafka 3.9's handleFetchRequest): a follower needs CLUSTER_ACTION on the cluster,
else every partition it asks for is TOPIC_AUTHORIZATION_FAILED; a consumer needs READ on each topic,
whose partitions are TOPIC_AUTHORIZATION_FAILED without it (after UNKNOWN_TOPIC_ID, before
UNKNOWN_TOPIC_OR_PARTITION). The check is made on the partitions the fetch session says to read, so an
incremental session's partitions are checked on every Fetch, as Kafka does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

from broker.authorization import ALLOW_ALL, Authorization
from broker.fetch_session import (
    INVALID_SESSION_ID,
    ZERO_UUID,
    FetchContext,
    FetchManager,
    FetchSessionCache,
    IncrementalFetchContext,
    PartitionFetch,
    SessionErrorContext,
    SessionKey,
    key_of,
    next_epoch,
)
from broker.metadata_cache import MetadataCache
from broker.partition import READ_COMMITTED
from broker.quota_manager import QuotaManagers
from broker.replica_manager import FetchParams, FetchPartitionResult, FetchResults, ReplicaManager
from network.handler_pool import Parked, park
from network.request_channel import Request
from protocol import record_batch
from protocol.api import ApiKey
from protocol.compression import ZSTD, UnsupportedCompressionTypeError
from protocol.down_convert import down_convert
from protocol.errors import ErrorCode
from protocol.messages import FetchRequest, FetchResponse, Message
from protocol.record_batch import CorruptRecordError
from server_common.acls import CLUSTER_NAME, AclOperation, ResourceType

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
DEFAULT_FETCH_MAX_BYTES = 57671680  # Kafka's fetch.max.bytes
_EMPTY_RECORDS = b""
_LEADER_HINT_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


def _throttled_session(context: FetchContext) -> tuple[int, int]:
    """(error, session id) of the empty response to a throttled fetch (Kafka's getThrottledResponse):
    an incremental session keeps its id (and its partitions' state), others have none."""
    if isinstance(context, IncrementalFetchContext):
        session = context.session
        if session.epoch != next_epoch(context.request_epoch):
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id
        return ErrorCode.NONE, session.id
    if isinstance(context, SessionErrorContext):
        return context.error, INVALID_SESSION_ID
    return ErrorCode.NONE, INVALID_SESSION_ID


def _batches_use_zstd(records: Any) -> bool:
    return any(h.compression == ZSTD for _, h in record_batch.iter_headers(records))


@dataclass(slots=True)
class _Answer:
    """One partition's read result (or error), as the session cache looks at it."""

    fetch: PartitionFetch
    error_code: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    preferred_read_replica: int = -1
    result: FetchPartitionResult | None = None

    @property
    def records_size(self) -> int:
        info = self.result.info if self.result is not None else None
        return info.length if info is not None else 0

    @property
    def has_diverging_epoch(self) -> bool:
        return self.result is not None and self.result.diverging_epoch is not None


class FetchApis:
    def __init__(
        self,
        metadata_cache: MetadataCache,
        replica_manager: ReplicaManager,
        session_cache_slots: int = 1000,
        fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
        *,
        authorization: Authorization = ALLOW_ALL,
    ) -> None:
        self.metadata_cache = metadata_cache
        self.authorization = authorization
        self.replica_manager = replica_manager
        self.fetch_max_bytes = fetch_max_bytes
        self.sessions = FetchSessionCache(session_cache_slots)
        self.fetch_manager = FetchManager(self.sessions)
        # Set by the server: client quotas and the leader's replication throttle (None: none).
        self.quotas: QuotaManagers | None = None

    def handlers(self) -> dict[int, Any]:
        """api key -> handler, merged into KafkaApis."""
        return {ApiKey.FETCH: self.handle_fetch}

    # -- the request --------------------------------------------------------------------------------

    async def handle_fetch(self, request: Request) -> Message | Parked | None:
        body: FetchRequest = request.body
        version = request.version
        replica_id = body.replica_id
        if version >= 15:
            state = body.replica_state
            replica_id = state.replica_id if state is not None else -1
        fetch_data: dict[SessionKey, PartitionFetch] = {}
        for topic in body.topics:
            if version >= 13:
                topic_id = topic.topic_id
                name: str | None = self.metadata_cache.topic_name(topic_id)
            else:
                topic_id, name = ZERO_UUID, topic.topic
            for p in topic.partitions:
                data = PartitionFetch(
                    name,
                    topic_id,
                    p.partition,
                    p.fetch_offset,
                    p.log_start_offset,
                    p.partition_max_bytes,
                    p.current_leader_epoch,
                    p.last_fetched_epoch,
                )
                fetch_data[data.key] = data
        to_forget: list[SessionKey] = []
        if version >= 7:
            for forgotten in body.forgotten_topics_data:
                if version >= 13:
                    to_forget.extend(key_of(None, forgotten.topic_id, p) for p in forgotten.partitions)
                else:
                    to_forget.extend(key_of(forgotten.topic, ZERO_UUID, p) for p in forgotten.partitions)
        is_from_follower = replica_id >= 0
        context = self.fetch_manager.new_context(
            version,
            body.session_id if version >= 7 else 0,
            body.session_epoch if version >= 7 else -1,
            is_from_follower,
            fetch_data,
            to_forget,
            self.metadata_cache.topic_name,
        )

        erroneous: list[_Answer] = []
        interesting: list[PartitionFetch] = []
        known = self.metadata_cache.partition
        partitions = context.partitions()
        # With an authorizer: a follower without CLUSTER_ACTION is refused everything, a consumer the
        # topics it may not READ.
        refuse_all = False
        denied: set[str] | None = None
        if self.authorization.enabled:
            if is_from_follower:
                refuse_all = not self.authorization.authorize(
                    request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
                )
            else:
                denied = self._unreadable(request, partitions)
        for data in partitions:
            if refuse_all or (denied is not None and data.topic in denied):
                erroneous.append(_Answer(data, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif data.topic is None:
                erroneous.append(_Answer(data, ErrorCode.UNKNOWN_TOPIC_ID))
            elif known(data.topic, data.partition) is None:
                erroneous.append(_Answer(data, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            elif data.topic_id.int and self._inconsistent_topic_id(data):
                erroneous.append(_Answer(data, ErrorCode.INCONSISTENT_TOPIC_ID))
            else:
                interesting.append(data)

        max_bytes = min(body.max_bytes if version >= 3 else INT32_MAX, self.fetch_max_bytes)
        quotas = self.quotas
        if quotas is not None and quotas.enabled and not is_from_follower:
            # Kafka's maxQuotaWindowBytes: no more than one quota window's worth at once.
            window = quotas.fetch.max_value_in_quota_window(request.principal.name, request.client_id or "")
            if window < max_bytes:
                max_bytes = int(window)
        params = FetchParams(
            replica_id=replica_id,
            max_wait_ms=body.max_wait_ms,
            min_bytes=min(body.min_bytes, max_bytes),
            max_bytes=max_bytes,
            isolation_level=body.isolation_level if version >= 4 else 0,
            # KIP-392: Kafka gives the replica selector client metadata from v11 on, rack or not.
            client_rack=body.rack_id if version >= 11 else None,
        )
        respond = partial(
            self._fetch_response, context, interesting, erroneous, version, params, request.listener
        )
        if quotas is not None:
            respond = partial(self._after_quotas, quotas, request, context, is_from_follower, respond)
        if not interesting:
            return respond({})
        requests = [d.read_request() for d in interesting]
        return park(self.replica_manager.fetch_messages(params, requests), respond)

    def _unreadable(self, request: Request, partitions: list[PartitionFetch]) -> set[str] | None:
        """The topics among ``partitions``' the consumer may not READ (None: none)."""
        names = list(dict.fromkeys(d.topic for d in partitions if d.topic is not None))
        readable = self.authorization.filter_authorized(request, AclOperation.READ, ResourceType.TOPIC, names)
        return {n for n in names if n not in readable} or None

    def _inconsistent_topic_id(self, data: PartitionFetch) -> bool:
        """The request's topic id is not the local log's (Kafka's ReplicaManager.readFromLocalLog)."""
        assert data.topic is not None
        partition = self.replica_manager.get_partition(data.topic, data.partition)
        if partition is None:
            return False
        local = partition.topic_id
        return bool(local.int) and local != data.topic_id

    # -- quotas (Kafka's handleFetchRequest: processResponseCallback) --------------------------------

    @staticmethod
    def _after_quotas(
        quotas: QuotaManagers,
        request: Request,
        context: FetchContext,
        is_from_follower: bool,
        respond: Any,
        results: FetchResults,
    ) -> Message:
        """A follower's fetch counts the bytes of its throttled partitions against the leader's
        replication throttle and is exempt from client quotas; a consumer's is recorded against its
        request and fetch quotas and, when it violates one, gets an empty response carrying the throttle
        time (its bytes taken back, its fetch session untouched) and its connection is muted."""
        if is_from_follower:
            leader = quotas.leader
            if leader.throttled:
                size = sum(
                    r.info.length
                    for (topic, partition), r in results.items()
                    if r.info is not None and leader.is_throttled(topic, partition)
                )
                if size:
                    leader.record(size)
            if quotas.enabled:
                quotas.request.maybe_record_exempt(request)
            return respond(results)
        if not quotas.enabled:
            return respond(results)
        user, client_id = request.principal.name, request.client_id or ""
        size = sum(r.info.length for r in results.values() if r.info is not None)
        requested = quotas.request.maybe_record_request(request)
        fetch = quotas.fetch
        bandwidth = fetch.record_and_get_throttle_time_ms(user, client_id, size) if fetch.enabled else 0
        throttle_ms = max(bandwidth, requested)
        if throttle_ms <= 0:
            return respond(results)
        if fetch.enabled:
            fetch.unrecord(user, client_id, size)
        if bandwidth > requested:
            fetch.throttle(request, bandwidth)
        else:
            quotas.request.throttle(request, requested)
        error, session_id = _throttled_session(context)
        return FetchResponse(
            throttle_time_ms=throttle_ms,
            error_code=error,
            session_id=session_id,
            responses=[],
            node_endpoints=[],
        )

    # -- the response -------------------------------------------------------------------------------

    def _fetch_response(
        self,
        context: FetchContext,
        interesting: list[PartitionFetch],
        erroneous: list[_Answer],
        version: int,
        params: FetchParams,
        listener: str,
        results: FetchResults,
    ) -> Message:
        answers: dict[SessionKey, _Answer] = {}
        for data in interesting:
            r = results.get((data.topic or "", data.partition))
            if r is None:
                answers[data.key] = _Answer(data, ErrorCode.UNKNOWN_SERVER_ERROR)
                continue
            error = r.error
            if error == ErrorCode.KAFKA_STORAGE_ERROR and version <= 5:
                error = ErrorCode.NOT_LEADER_OR_FOLLOWER  # older clients would not retry it
            answers[data.key] = _Answer(
                data,
                error,
                r.high_watermark,
                r.last_stable_offset,
                r.log_start_offset,
                r.preferred_read_replica,
                r,
            )
        for answer in erroneous:
            answers[answer.fetch.key] = answer
        outcome = context.respond(answers)

        node_endpoints: dict[int, FetchResponse.NodeEndpoint] = {}
        topics: dict[SessionKey, FetchResponse.FetchableTopicResponse] = {}
        for key in outcome.keys:
            answer = answers[key]
            data = answer.fetch
            topic_key = key_of(data.topic, data.topic_id, 0)
            topic = topics.get(topic_key)
            if topic is None:
                topic = topics[topic_key] = FetchResponse.FetchableTopicResponse(
                    topic=data.topic or "", topic_id=data.topic_id, partitions=[]
                )
            topic.partitions.append(self._partition_data(answer, version, params, listener, node_endpoints))
        return FetchResponse(
            throttle_time_ms=0,
            error_code=outcome.error,
            session_id=outcome.session_id,
            responses=list(topics.values()),
            node_endpoints=list(node_endpoints.values()),
        )

    def _partition_data(
        self,
        answer: _Answer,
        version: int,
        params: FetchParams,
        listener: str,
        node_endpoints: dict[int, FetchResponse.NodeEndpoint],
    ) -> FetchResponse.PartitionData:
        data = answer.fetch
        r = answer.result
        error = answer.error_code
        records: Any = _EMPTY_RECORDS
        info = r.info if r is not None else None
        if info is not None and info.length:
            if version < 10 and _batches_use_zstd(info.records):
                error = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
            elif version < 4:
                records, error = self._down_convert(info.records, version, data.fetch_offset, error)
                if records and data.topic is not None:  # Kafka's FetchMessageConversionsPerSec
                    converted = sum(h.records_count for _, h in record_batch.iter_headers(info.records))
                    self.replica_manager.topic_stats.fetch_converted(data.topic, converted)
            else:
                records = info  # a file region: the connection sends it by sendfile
        if error == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE:
            return FetchResponse.PartitionData(
                partition_index=data.partition, error_code=error, high_watermark=-1, records=_EMPTY_RECORDS
            )
        aborted = None
        if r is not None and r.aborted is not None:
            aborted = [
                FetchResponse.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                for a in r.aborted
            ]
        partition = FetchResponse.PartitionData(
            partition_index=data.partition,
            error_code=error,
            high_watermark=answer.high_watermark,
            last_stable_offset=answer.last_stable_offset,
            log_start_offset=answer.log_start_offset,
            aborted_transactions=aborted if params.isolation_level == READ_COMMITTED else None,
            preferred_read_replica=answer.preferred_read_replica,
            records=records,
            diverging_epoch=None
            if r is None or r.diverging_epoch is None
            else FetchResponse.EpochEndOffset(epoch=r.diverging_epoch[0], end_offset=r.diverging_epoch[1]),
        )
        if version >= 16 and error in _LEADER_HINT_ERRORS and data.topic is not None:
            partition.current_leader = self._current_leader(
                data.topic, data.partition, listener, node_endpoints
            )
        return partition

    def _current_leader(
        self,
        topic: str,
        partition: int,
        listener: str,
        node_endpoints: dict[int, FetchResponse.NodeEndpoint],
    ) -> FetchResponse.LeaderIdAndEpoch:
        """KIP-951: the leader the metadata cache knows, with its endpoint for the response."""
        metadata = self.metadata_cache.partition(topic, partition)
        if metadata is None or metadata.leader < 0:
            return FetchResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
        endpoint = self.metadata_cache.endpoint(metadata.leader, listener)
        if endpoint is not None and metadata.leader not in node_endpoints:
            rack = next(
                (b.rack for b in self.metadata_cache.alive_brokers() if b.id == metadata.leader), None
            )
            node_endpoints[metadata.leader] = FetchResponse.NodeEndpoint(
                node_id=metadata.leader, host=endpoint.host, port=endpoint.port, rack=rack
            )
        return FetchResponse.LeaderIdAndEpoch(leader_id=metadata.leader, leader_epoch=metadata.leader_epoch)

    @staticmethod
    def _down_convert(records: Any, version: int, fetch_offset: int, error: int) -> tuple[bytes, int]:
        """Fetch v0-1 reads magic 0 message sets, v2-3 magic 1 (Kafka's down-conversion)."""
        try:
            return down_convert(records, 0 if version <= 1 else 1, fetch_offset), error
        except UnsupportedCompressionTypeError as e:
            log.debug("cannot down-convert records for Fetch v%d: %s", version, e)
            return _EMPTY_RECORDS, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        except CorruptRecordError as e:
            log.warning("cannot down-convert records for Fetch v%d: %s", version, e)
            return _EMPTY_RECORDS, ErrorCode.CORRUPT_MESSAGE
