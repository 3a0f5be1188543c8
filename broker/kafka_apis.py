"""KafkaApis: the request handlers, dispatched by api key.

Each handler takes a decoded ``Request`` and returns the response message (None when the request gets
no response, as an acks=0 Produce). This module holds the cluster and data-plane handlers; the admin
handlers (topics, configs) live in ``broker.admin_apis``, the group coordinator's in
``broker.group_apis``, FindCoordinator in ``broker.find_coordinator`` and the transaction
coordinator's (with InitProducerId) in ``broker.txn_apis``, and are merged in. The
ApiVersions response advertises exactly the APIs that have a handler, at the ranges of
``protocol.api_versions``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from broker.metadata_cache import MetadataCache
from broker.partition import READ_COMMITTED
from broker.refusals import log_partition_refusals, log_refusal
from broker.replica_manager import (
    METADATA_UPDATE,
    FetchParams,
    FetchPartitionRequest,
    FetchResults,
    ProduceResults,
    ReplicaManager,
)
from network.handler_pool import Parked, park
from network.request_channel import Request
from protocol import record_batch
from protocol.api import Api, ApiKey, api
from protocol.api_versions import ADVERTISED_MINIMUM, ADVERTISED_VERSIONS
from protocol.compression import ZSTD
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeClusterResponse,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    Message,
    MetadataRequest,
    MetadataResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    ProduceRequest,
    ProduceResponse,
    StopReplicaResponse,
    UpdateMetadataResponse,
)
from protocol.record_batch import ATTR_TRANSACTIONAL
from protocol.topic import INTERNAL_TOPICS, is_internal, topic_name_error
from server_common.futures import after, completed, compose
from storage.errors import StorageError
from storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from storage.log_validator import LogValidator

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Message | Parked | None]]

# Kafka leaves authorized-operation fields at INT_MIN when the client did not ask for them.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
INT32_MAX = 2**31 - 1
# KIP-511: what a client may call itself (Kafka answers INVALID_REQUEST otherwise; Samsa only logs).
_SOFTWARE_NAME = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")
_EMPTY_RECORDS = b""
# The low byte of a v2 batch's attributes (offset 21, big-endian int16), where the transactional flag is.
_ATTRIBUTES_LOW_BYTE = 22
# Produce from this version on: producers understand TRANSACTION_ABORTABLE (Kafka's genericError).
_GENERIC_TXN_ERRORS_VERSION = 11


def _batches_use_zstd(records: Any) -> bool:
    return any(h.compression == ZSTD for _, h in record_batch.iter_headers(records))


def _validate_compressed(
    entries: list[tuple[str, int, Any]],
) -> dict[tuple[str, int], tuple[int, str | None]]:
    """The partitions whose compressed batches the log validator refuses, with the error for each."""
    refused: dict[tuple[str, int], tuple[int, str | None]] = {}
    for topic, partition, records in entries:
        try:
            LogValidator.validate_compressed(records, f"{topic}-{partition}")
        except StorageError as e:
            refused[(topic, partition)] = (e.error_code, str(e))
    return refused


class KafkaApis:
    def __init__(
        self,
        broker_id: int,
        metadata_cache: MetadataCache,
        replica_manager: ReplicaManager,
        extra_handlers: dict[int, Handler] | None = None,
        auto_create_topic: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self._auto_create_topic = auto_create_topic
        # Per connection, the append of a Produce still waiting for transaction verification: the
        # connection's later Produces append after it, as a Kafka connection's requests are handled in
        # order (Samsa reads a connection's next request while a response is parked).
        self._deferred_appends: dict[object, asyncio.Future[ProduceResults]] = {}
        self._handlers: dict[int, Handler] = {
            ApiKey.API_VERSIONS: self.handle_api_versions,
            ApiKey.METADATA: self.handle_metadata,
            ApiKey.DESCRIBE_CLUSTER: self.handle_describe_cluster,
            ApiKey.PRODUCE: self.handle_produce,
            ApiKey.FETCH: self.handle_fetch,
            ApiKey.LIST_OFFSETS: self.handle_list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.handle_offset_for_leader_epoch,
            ApiKey.LEADER_AND_ISR: self.handle_leader_and_isr,
            ApiKey.UPDATE_METADATA: self.handle_update_metadata,
            ApiKey.STOP_REPLICA: self.handle_stop_replica,
            **(extra_handlers or {}),
        }
        self._supported: dict[int, tuple[Api, int, int]] = {}
        for key in self._handlers:
            low, high = ADVERTISED_VERSIONS[key]
            definition = api(key)
            assert (
                definition is not None
                and low in definition.valid_versions
                and high in definition.valid_versions
            )
            self._supported[key] = (definition, low, high)
        self._api_versions = [
            ApiVersionsResponse.ApiVersion(
                api_key=key, min_version=ADVERTISED_MINIMUM.get(key, low), max_version=high
            )
            for key, (_, low, high) in sorted(self._supported.items())
        ]

    def supported(self, api_key: int) -> tuple[Api, int, int] | None:
        """(api, lowest, highest version) for an API this broker serves, else None."""
        return self._supported.get(api_key)

    async def handle(self, request: Request) -> Message | Parked | None:
        return await self._handlers[request.api.key](request)

    # -- ApiVersions ------------------------------------------------------------------------------

    async def handle_api_versions(self, request: Request) -> ApiVersionsResponse:
        if request.body is None:
            log.info(
                "ApiVersions v%d from %s is newer than this broker's; answering UNSUPPORTED_VERSION in v0",
                request.requested_version,
                request.peer,
            )
            _, low, high = self._supported[ApiKey.API_VERSIONS]
            return ApiVersionsResponse(
                error_code=ErrorCode.UNSUPPORTED_VERSION,
                api_keys=[
                    ApiVersionsResponse.ApiVersion(
                        api_key=ApiKey.API_VERSIONS, min_version=low, max_version=high
                    )
                ],
            )
        if request.version >= 3:
            body: ApiVersionsRequest = request.body
            for value in (body.client_software_name, body.client_software_version):
                if not _SOFTWARE_NAME.match(value or ""):
                    log.debug(
                        "client %s at %s sent an unusual software name/version %r",
                        request.client_id,
                        request.peer,
                        value,
                    )
        return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=self._api_versions, throttle_time_ms=0)

    # -- Metadata ---------------------------------------------------------------------------------

    def _broker_list(self, listener: str) -> list[MetadataResponse.MetadataResponseBroker]:
        return [
            MetadataResponse.MetadataResponseBroker(node_id=b.id, host=e.host, port=e.port, rack=b.rack)
            for b, e in self.metadata_cache.alive_endpoints(listener)
        ]

    def _topic_metadata(self, name: str) -> MetadataResponse.MetadataResponseTopic:
        cache = self.metadata_cache
        partitions = []
        for p in sorted(cache.partitions(name).values(), key=lambda p: p.partition):
            leader_alive = p.leader >= 0 and cache.is_alive(p.leader)
            partitions.append(
                MetadataResponse.MetadataResponsePartition(
                    error_code=ErrorCode.NONE if leader_alive else ErrorCode.LEADER_NOT_AVAILABLE,
                    partition_index=p.partition,
                    leader_id=p.leader if leader_alive else -1,
                    leader_epoch=p.leader_epoch,
                    replica_nodes=list(p.replicas),
                    isr_nodes=list(p.isr),
                    offline_replicas=list(p.offline_replicas),
                )
            )
        return MetadataResponse.MetadataResponseTopic(
            error_code=ErrorCode.NONE,
            name=name,
            topic_id=cache.topic_id(name),
            is_internal=is_internal(name),
            partitions=partitions,
            topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )

    async def handle_metadata(self, request: Request) -> MetadataResponse:
        body: MetadataRequest = request.body
        requested = body.topics
        if requested is not None and not requested and request.version == 0:
            requested = None  # in v0 an empty list means every topic
        # Before v4 every Metadata request may create topics; from v4 the client says.
        allow_auto_create = request.version < 4 or body.allow_auto_topic_creation
        names = self.metadata_cache.topic_names() if requested is None else [t.name for t in requested]
        topics = []
        for name in names:
            if name is not None and self.metadata_cache.contains(name):
                topics.append(self._topic_metadata(name))
                continue
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            name_error = topic_name_error(name)
            if name_error:
                error = ErrorCode.INVALID_TOPIC_EXCEPTION
                log_refusal(request, error, f"topic {name!r}: {name_error}")
            elif (
                name is not None  # (None has a name_error: this only tells the type checker)
                and allow_auto_create
                and self._auto_create_topic is not None
                and name not in INTERNAL_TOPICS
            ):
                try:
                    await self._auto_create_topic(name)
                    error = ErrorCode.LEADER_NOT_AVAILABLE  # the client retries until leaders are elected
                except KafkaError as e:
                    error = e.code
            topics.append(
                MetadataResponse.MetadataResponseTopic(
                    error_code=error,
                    name=name,
                    is_internal=name is not None and is_internal(name),
                    partitions=[],
                    topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
                )
            )
        return MetadataResponse(
            throttle_time_ms=0,
            brokers=self._broker_list(request.listener),
            cluster_id=self.metadata_cache.cluster_id,
            # Clients send admin requests to the "controller"; any broker serves them, so name ourselves.
            controller_id=self.broker_id,
            topics=topics,
            cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )

    # -- DescribeCluster --------------------------------------------------------------------------

    async def handle_describe_cluster(self, request: Request) -> DescribeClusterResponse:
        return DescribeClusterResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            endpoint_type=1,  # brokers
            cluster_id=self.metadata_cache.cluster_id,
            controller_id=self.broker_id,
            brokers=[
                DescribeClusterResponse.DescribeClusterBroker(
                    broker_id=b.id, host=e.host, port=e.port, rack=b.rack
                )
                for b, e in self.metadata_cache.alive_endpoints(request.listener)
            ],
            cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )

    # -- Produce ----------------------------------------------------------------------------------

    async def handle_produce(self, request: Request) -> Message | Parked | None:
        body: ProduceRequest = request.body
        version = request.version
        acks = body.acks
        errors: dict[tuple[str, int], tuple[int, str | None]] = {}
        entries = []
        compressed = []
        transactional = None
        for topic in body.topic_data:
            for p in topic.partition_data:
                tp = (topic.name, p.index)
                records = p.records
                if acks not in (-1, 0, 1):
                    errors[tp] = (ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} is not -1, 0 or 1")
                    continue
                try:
                    has_compressed = LogValidator.validate_produce(topic.name, records, version)
                except StorageError as e:
                    errors[tp] = (e.error_code, str(e))
                    continue
                if records is None or len(records) == 0:
                    errors[tp] = (ErrorCode.NONE, None)
                    continue
                entries.append((topic.name, p.index, records))
                # Transactional batches need their transactional id and may need verification (KIP-890);
                # one byte of the first batch's header tells, so other produces pay nothing more.
                if len(records) > _ATTRIBUTES_LOW_BYTE and records[_ATTRIBUTES_LOW_BYTE] & ATTR_TRANSACTIONAL:
                    if transactional is None:
                        transactional = []
                    transactional.append((topic.name, p.index, records))
                if has_compressed:
                    compressed.append((topic.name, p.index, records))
        if compressed:
            # Decompressing is CPU work the event loop must not wait for (the GIL is released in it).
            refused = await asyncio.get_running_loop().run_in_executor(None, _validate_compressed, compressed)
            if refused:
                errors.update(refused)
                entries = [e for e in entries if (e[0], e[1]) not in refused]
            compressed.clear()
        if transactional is not None or (
            self._deferred_appends and request.connection in self._deferred_appends
        ):
            return self._produce_in_order(request, body, errors, entries, transactional or [])
        results = self.replica_manager.append_records(entries, acks)
        entries.clear()
        records = None
        self._appended(request, body, errors, results)
        if acks == -1:
            return park(
                self.replica_manager.wait_for_acks(results, body.timeout_ms),
                partial(self._produce_response, body, errors),
            )
        if acks == 0:
            return None
        return self._produce_response(body, errors, results)

    def _produce_in_order(
        self,
        request: Request,
        body: ProduceRequest,
        errors: dict[tuple[str, int], tuple[int, str | None]],
        entries: list[tuple[str, int, Any]],
        transactional: list[tuple[str, int, Any]],
    ) -> Message | Parked | None:
        """A Produce holding transactional batches, or one behind such a Produce of its connection.
        As Kafka: transactional batches without a transactional id refuse the whole request
        (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as do transactional batches of more than one producer
        (INVALID_PRODUCER_ID_MAPPING); partitions where the producer has no ongoing transaction are
        verified with the transaction coordinator before anything is appended."""
        acks = body.acks
        refusal: tuple[int, str | None] | None = None
        producers: set[tuple[int, int]] = set()
        sequences: dict[tuple[str, int], int] = {}
        if transactional and body.transactional_id is None:
            refusal = (
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "transactional records need the Produce's transactional id",
            )
        else:
            appending = {(topic, index) for topic, index, _ in entries}
            for topic, index, records in transactional:
                if (topic, index) not in appending:
                    continue  # refused already (its compressed batches)
                try:
                    headers = list(record_batch.iter_headers(records))
                except record_batch.CorruptRecordError:
                    continue  # the log refuses the framing with its own message
                found = [h for _, h in headers if h.producer_id >= 0 and h.is_transactional]
                producers.update((h.producer_id, h.producer_epoch) for h in found)
                if found:
                    sequences[(topic, index)] = headers[0][1].base_sequence
            if len(producers) > 1:
                refusal = (
                    ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                    "Transactional records contained more than one producer ID",
                )
        if refusal is not None:
            refused: dict[tuple[str, int], tuple[int, str | None]] = {
                (t.name, p.index): refusal for t in body.topic_data for p in t.partition_data
            }
            log_partition_refusals(request, [(f"{t}-{p}", c, m) for (t, p), (c, m) in refused.items()])
            if acks == 0:
                request.connection.close()
                return None
            return self._produce_response(body, refused, {})
        manager = self.replica_manager
        verify = bool(sequences) and manager.add_partitions_to_txn is not None
        producer_id, producer_epoch = next(iter(producers)) if producers else (-1, -1)
        transactional_id = body.transactional_id or ""
        generic = request.version >= _GENERIC_TXN_ERRORS_VERSION

        def append() -> asyncio.Future[ProduceResults]:
            if not verify:
                return completed(manager.append_records(entries, acks))
            return manager.append_with_transaction_verification(
                entries, acks, transactional_id, producer_id, producer_epoch, sequences, generic
            )

        connection = request.connection
        previous = self._deferred_appends.get(connection)
        appended = append() if previous is None else after(previous, append)
        if not appended.done():
            self._deferred_appends[connection] = appended

            def forget(done: asyncio.Future[ProduceResults]) -> None:
                if self._deferred_appends.get(connection) is done:
                    del self._deferred_appends[connection]

            appended.add_done_callback(forget)

        def appended_now(results: ProduceResults) -> asyncio.Future[ProduceResults]:
            entries.clear()
            transactional.clear()
            self._appended(request, body, errors, results)
            if acks == -1:
                return manager.wait_for_acks(results, body.timeout_ms)
            return completed(results)

        answered = compose(appended, appended_now)
        if acks == 0:
            return None
        return park(answered, partial(self._produce_response, body, errors))

    @staticmethod
    def _appended(
        request: Request,
        body: ProduceRequest,
        errors: dict[tuple[str, int], tuple[int, str | None]],
        results: ProduceResults,
    ) -> None:
        """A Produce's records are in the logs: its views of the receive buffer are dropped (the
        connection may reuse that buffer while an acks=all response waits for the followers), refusals
        are logged, and an acks=0 producer whose records were refused is disconnected."""
        for topic in body.topic_data:
            for p in topic.partition_data:
                p.records = None
        log_partition_refusals(
            request,
            [(f"{t}-{p}", code, message) for (t, p), (code, message) in errors.items()]
            + [(f"{t}-{p}", r.error, r.message) for (t, p), r in results.items()],
        )
        if body.acks == 0:
            failed = [tp for tp, r in results.items() if r.error != ErrorCode.NONE] + [
                tp for tp, (code, _) in errors.items() if code != ErrorCode.NONE
            ]
            if failed:
                # acks=0 producers read no response; closing the connection is how they learn (Kafka).
                log.info("closing connection from %s: acks=0 produce to %s failed", request.peer, failed)
                request.connection.close()

    @staticmethod
    def _produce_response(
        body: ProduceRequest, errors: dict[tuple[str, int], tuple[int, str | None]], results: ProduceResults
    ) -> ProduceResponse:
        responses = []
        for topic in body.topic_data:
            partitions = []
            for p in topic.partition_data:
                tp = (topic.name, p.index)
                if tp in errors:
                    code, message = errors[tp]
                    partitions.append(
                        ProduceResponse.PartitionProduceResponse(
                            index=p.index,
                            error_code=code,
                            base_offset=-1 if code else 0,  # Kafka's INVALID_OFFSET for a refusal
                            error_message=message,
                        )
                    )
                    continue
                r = results[tp]
                partitions.append(
                    ProduceResponse.PartitionProduceResponse(
                        index=p.index,
                        error_code=r.error,
                        base_offset=r.base_offset,
                        log_append_time_ms=r.log_append_time,
                        log_start_offset=r.log_start_offset,
                        error_message=r.message if r.error else None,
                    )
                )
            responses.append(
                ProduceResponse.TopicProduceResponse(name=topic.name, partition_responses=partitions)
            )
        return ProduceResponse(responses=responses, throttle_time_ms=0)

    # -- Fetch ------------------------------------------------------------------------------------

    async def handle_fetch(self, request: Request) -> Message | Parked | None:
        body: FetchRequest = request.body
        version = request.version
        if version >= 7 and body.session_id != 0:
            # Samsa hands out no incremental fetch sessions (KIP-227 allows that: every fetch is full).
            return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
        params = FetchParams(
            replica_id=body.replica_id,
            max_wait_ms=body.max_wait_ms,
            min_bytes=body.min_bytes,
            max_bytes=body.max_bytes if version >= 3 else INT32_MAX,
            isolation_level=body.isolation_level,
        )
        requests = [
            FetchPartitionRequest(
                topic.topic,
                p.partition,
                p.fetch_offset,
                p.partition_max_bytes,
                p.current_leader_epoch,
                p.log_start_offset,
                p.last_fetched_epoch,
            )
            for topic in body.topics
            for p in topic.partitions
        ]
        return park(
            self.replica_manager.fetch_messages(params, requests),
            partial(self._fetch_response, body, version, params),
        )

    @staticmethod
    def _fetch_response(
        body: FetchRequest, version: int, params: FetchParams, results: FetchResults
    ) -> Message:
        responses = []
        for topic in body.topics:
            partitions = []
            for p in topic.partitions:
                r = results[(topic.topic, p.partition)]
                records: Any = _EMPTY_RECORDS
                error = r.error
                info = r.info
                if info is not None and info.length:
                    if version < 10 and _batches_use_zstd(info.records):
                        error = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
                    else:
                        records = info  # a file region: the connection sends it by sendfile
                aborted = None
                if r.aborted is not None:
                    aborted = [
                        FetchResponse.AbortedTransaction(
                            producer_id=a.producer_id, first_offset=a.first_offset
                        )
                        for a in r.aborted
                    ]
                partitions.append(
                    FetchResponse.PartitionData(
                        partition_index=p.partition,
                        error_code=error,
                        high_watermark=r.high_watermark,
                        last_stable_offset=r.last_stable_offset,
                        log_start_offset=r.log_start_offset,
                        aborted_transactions=aborted if params.isolation_level == READ_COMMITTED else None,
                        preferred_read_replica=-1,
                        records=records,
                        diverging_epoch=None
                        if r.diverging_epoch is None
                        else FetchResponse.EpochEndOffset(
                            epoch=r.diverging_epoch[0], end_offset=r.diverging_epoch[1]
                        ),
                    )
                )
            responses.append(FetchResponse.FetchableTopicResponse(topic=topic.topic, partitions=partitions))
        return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=responses)

    # -- ListOffsets ------------------------------------------------------------------------------

    def _list_offset(
        self, body: ListOffsetsRequest, topic: str, p: ListOffsetsRequest.ListOffsetsPartition
    ) -> ListOffsetsResponse.ListOffsetsPartitionResponse:
        response = ListOffsetsResponse.ListOffsetsPartitionResponse(partition_index=p.partition_index)
        try:
            partition = self.replica_manager.leader_partition(topic, p.partition_index)
            partition.check_leader_epoch(p.current_leader_epoch)
        except KafkaError as e:
            response.error_code, response.offset, response.timestamp = e.code, -1, -1
            return response
        lg = partition.log
        assert lg is not None
        from_consumer = body.replica_id < 0
        bound = partition.upper_bound(body.isolation_level) if from_consumer else lg.log_end_offset
        if p.timestamp == LATEST_TIMESTAMP:
            found_offset, found_ts, epoch = bound, -1, lg.latest_epoch
        elif p.timestamp == EARLIEST_TIMESTAMP:
            found_offset, found_ts, epoch = lg.log_start_offset, -1, None
        else:
            found = lg.offset_for_timestamp(p.timestamp)
            if found is None or found.offset >= bound:
                found_offset, found_ts, epoch = -1, -1, None
            else:
                found_offset, found_ts, epoch = found.offset, found.timestamp, found.leader_epoch
        response.offset, response.timestamp = found_offset, found_ts
        response.leader_epoch = -1 if epoch is None else epoch
        response.old_style_offsets = [found_offset] if found_offset >= 0 else []
        return response

    async def handle_list_offsets(self, request: Request) -> ListOffsetsResponse:
        body: ListOffsetsRequest = request.body
        return ListOffsetsResponse(
            throttle_time_ms=0,
            topics=[
                ListOffsetsResponse.ListOffsetsTopicResponse(
                    name=t.name, partitions=[self._list_offset(body, t.name, p) for p in t.partitions]
                )
                for t in body.topics
            ],
        )

    # -- OffsetForLeaderEpoch ----------------------------------------------------------------------

    def _epoch_end_offset(
        self, topic: str, p: OffsetForLeaderEpochRequest.OffsetForLeaderPartition
    ) -> OffsetForLeaderEpochResponse.EpochEndOffset:
        result = OffsetForLeaderEpochResponse.EpochEndOffset(partition=p.partition)
        try:
            result.leader_epoch, result.end_offset = self.replica_manager.last_offset_for_leader_epoch(
                topic, p.partition, p.current_leader_epoch, p.leader_epoch
            )
        except KafkaError as e:
            result.error_code, result.leader_epoch, result.end_offset = e.code, -1, -1
        return result

    async def handle_offset_for_leader_epoch(self, request: Request) -> OffsetForLeaderEpochResponse:
        """Where a leader epoch ends on this leader: followers truncate to it (KIP-101, KIP-279), and
        consumers check they did not read past a truncation (KIP-320)."""
        body: OffsetForLeaderEpochRequest = request.body
        return OffsetForLeaderEpochResponse(
            throttle_time_ms=0,
            topics=[
                OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(
                    topic=t.topic, partitions=[self._epoch_end_offset(t.topic, p) for p in t.partitions]
                )
                for t in body.topics
            ],
        )

    # -- the controller's requests ----------------------------------------------------------------

    async def _fenced(self, request: Request) -> int | None:
        """NONE if ``request`` comes from the active controller for this broker's current epoch; else
        the error it is refused with, logged with its peer; None when ZooKeeper cannot say: the
        connection is closed unanswered (a controller resends on a new connection, not after an error)."""
        refusal = await self.replica_manager.check_controller(request.body)
        if refusal is None:
            return ErrorCode.NONE
        log_refusal(request, refusal.error, refusal.detail)
        if refusal.unanswered:
            request.connection.close()
            return None
        return refusal.error

    async def handle_leader_and_isr(self, request: Request) -> LeaderAndIsrResponse | None:
        fenced = await self._fenced(request)
        if fenced is None:
            return None
        error, errors, topic_ids = await self.replica_manager.become_leader_or_follower(
            request.body, request.version, fenced
        )
        if request.version < 5:
            return LeaderAndIsrResponse(
                error_code=error,
                partition_errors=[
                    LeaderAndIsrResponse.LeaderAndIsrPartitionError(
                        topic_name=t, partition_index=p, error_code=code
                    )
                    for (t, p), code in errors.items()
                ],
            )
        by_topic: dict[str, list[LeaderAndIsrResponse.LeaderAndIsrPartitionError]] = {}
        for (t, p), code in errors.items():
            by_topic.setdefault(t, []).append(
                LeaderAndIsrResponse.LeaderAndIsrPartitionError(partition_index=p, error_code=code)
            )
        return LeaderAndIsrResponse(
            error_code=error,
            topics=[
                LeaderAndIsrResponse.LeaderAndIsrTopicError(topic_id=topic_ids[t], partition_errors=errs)
                for t, errs in by_topic.items()
            ],
        )

    async def handle_update_metadata(self, request: Request) -> UpdateMetadataResponse | None:
        fenced = await self._fenced(request)
        if fenced is None:
            return None
        if fenced == ErrorCode.NONE:
            for tp in self.metadata_cache.update(request.body, request.version):
                self.replica_manager.fetch_purgatory.check(tp)
                self.replica_manager.produce_purgatory.check(tp)
            self.replica_manager.elect_leader_purgatory.check(METADATA_UPDATE)
        return UpdateMetadataResponse(error_code=fenced)

    async def handle_stop_replica(self, request: Request) -> StopReplicaResponse | None:
        fenced = await self._fenced(request)
        if fenced is None:
            return None
        error, errors = await self.replica_manager.stop_replicas(request.body, request.version, fenced)
        return StopReplicaResponse(
            error_code=error,
            partition_errors=[
                StopReplicaResponse.StopReplicaPartitionError(
                    topic_name=t, partition_index=p, error_code=code
                )
                for (t, p), code in errors.items()
            ],
        )
