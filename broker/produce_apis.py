"""ProduceApis: the Produce handler (Kafka's KafkaApis.handleProduceRequest), merged into KafkaApis.

Checks each partition's records (``LogValidator``; compressed batches on an executor thread), appends
through the ReplicaManager, and answers at once (acks=1), after the followers (acks=all, parked), or
not at all (acks=0). Transactional batches are verified with their coordinator first (KIP-890), and a
connection's later Produces append after such a Produce.

Where the topic's config asks more of the records than their batches (``LogValidator.record_checks``:
a compression.type other than producer, compaction, timestamp bounds), the records are checked one by
one and refused with the index of each record at fault (KIP-467 ``record_errors``, Produce v8+), and
batches are recompressed to the topic's codec (KIP-390 levels) before the append, off the event loop
when it decompresses or compresses. From Produce v10 a NOT_LEADER_OR_FOLLOWER partition carries the
leader this broker knows of and the response that leader's endpoint on the request's listener (KIP-951).

With an authorizer (Kafka 3.9's handleProduceRequest): a Produce holding transactional batches needs
WRITE on its transactional id, else the whole request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED (an
acks=0 producer is disconnected); the partitions of topics without WRITE are TOPIC_AUTHORIZATION_FAILED,
before anything else is looked at, and the rest are appended. Idempotent producers are checked when
they get their producer id (InitProducerId), not here, as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
import time
from functools import partial
from typing import Any, NamedTuple

from broker.authorization import ALLOW_ALL, Authorization
from broker.metadata_cache import MetadataCache
from broker.refusals import log_partition_refusals
from broker.replica_apis import ReplicaApis
from broker.replica_manager import ProduceResults, ReplicaManager
from network.handler_pool import Parked, park
from network.request_channel import Request
from protocol import record_batch
from protocol.api import ApiKey
from protocol.errors import ErrorCode, description
from protocol.messages import Message, ProduceRequest, ProduceResponse
from protocol.record_batch import ATTR_TRANSACTIONAL
from server_common.acls import AclOperation, ResourceType
from server_common.futures import after, completed, compose
from storage.config import LogConfig
from storage.errors import StorageError
from storage.log_validator import LogValidator, RecordChecks

log = logging.getLogger(__name__)

# The low byte of a v2 batch's attributes (offset 21, big-endian int16), where the transactional flag is.
_ATTRIBUTES_LOW_BYTE = 22
# Where every record format keeps its magic byte (v2 batch: after base offset, length, leader epoch).
_MAGIC_BYTE = 16
# Produce from this version on: producers understand TRANSACTION_ABORTABLE (Kafka's genericError).
_GENERIC_TXN_ERRORS_VERSION = 11
# Produce from this version on: NOT_LEADER_OR_FOLLOWER comes with the current leader (KIP-951).
_CURRENT_LEADER_VERSION = 10

TopicPartition = tuple[str, int]


class Refusal(NamedTuple):
    """A partition's records refused before the append: the error, its message and, when particular
    records are at fault, their (index in the batch, message) (KIP-467)."""

    code: int
    message: str | None
    record_errors: tuple[tuple[int, str | None], ...] = ()


def _refusal(e: StorageError) -> Refusal:
    return Refusal(e.error_code, str(e), e.record_errors)


_TOPIC_AUTHORIZATION_FAILED = Refusal(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)


def _has_transactional_records(body: ProduceRequest) -> bool:
    """Kafka's RequestUtils.hasTransactionalRecords: the first batch of some partition is a
    transactional v2 batch."""
    for topic in body.topic_data:
        for p in topic.partition_data:
            records = p.records
            if (
                records is not None
                and len(records) > _ATTRIBUTES_LOW_BYTE
                and records[_MAGIC_BYTE] == 2
                and records[_ATTRIBUTES_LOW_BYTE] & ATTR_TRANSACTIONAL
            ):
                return True
    return False


def _validate_off_loop(
    compressed: list[tuple[str, int, Any]], checked: list[tuple[str, int, Any, RecordChecks]]
) -> tuple[dict[TopicPartition, Refusal], dict[TopicPartition, bytearray]]:
    """On a worker thread: the partitions whose records the log validator refuses, and the records
    rebuilt for their topic's compression.type."""
    refused: dict[TopicPartition, Refusal] = {}
    rebuilt: dict[TopicPartition, bytearray] = {}
    for topic, partition, records in compressed:
        try:
            LogValidator.validate_compressed(records, f"{topic}-{partition}")
        except StorageError as e:
            refused[(topic, partition)] = _refusal(e)
    for topic, partition, records, checks in checked:
        try:
            converted = LogValidator.validate_records(records, f"{topic}-{partition}", checks)
        except StorageError as e:
            refused[(topic, partition)] = _refusal(e)
            continue
        if converted is not None:
            rebuilt[(topic, partition)] = converted
    return refused, rebuilt


class ProduceApis(ReplicaApis):
    def __init__(
        self,
        metadata_cache: MetadataCache,
        replica_manager: ReplicaManager,
        *,
        authorization: Authorization = ALLOW_ALL,
    ) -> None:
        super().__init__(metadata_cache, replica_manager, authorization=authorization)
        # Per connection, the append of a Produce still waiting for transaction verification: the
        # connection's later Produces append after it, as a Kafka connection's requests are handled in
        # order (Samsa reads a connection's next request while a response is parked).
        self._deferred_appends: dict[object, asyncio.Future[ProduceResults]] = {}

    def handlers(self) -> dict[int, Any]:
        """api key -> handler, merged into KafkaApis."""
        return {ApiKey.PRODUCE: self.handle_produce}

    async def handle_produce(self, request: Request) -> Message | Parked | None:
        body: ProduceRequest = request.body
        version = request.version
        acks = body.acks
        errors: dict[TopicPartition, Refusal] = {}
        entries = []
        compressed = []
        checked: list[tuple[str, int, Any, RecordChecks]] = []
        transactional = None
        get_partition = self.replica_manager.get_partition
        denied: set[str] | None = None
        if self.authorization.enabled:
            authorized = self._authorize(request, body)
            if isinstance(authorized, Refusal):
                return self._refuse_all(request, body, authorized)
            denied = authorized
        for topic in body.topic_data:
            if denied and topic.name in denied:
                for p in topic.partition_data:
                    errors[(topic.name, p.index)] = _TOPIC_AUTHORIZATION_FAILED
                continue
            for p in topic.partition_data:
                tp = (topic.name, p.index)
                records = p.records
                if acks not in (-1, 0, 1):
                    errors[tp] = Refusal(ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} is not -1, 0 or 1")
                    continue
                checks = None
                try:
                    has_compressed = LogValidator.validate_produce(topic.name, records, version, True)
                    # What the topic asks of the records beyond their batches: nothing by default. A
                    # partition led elsewhere is left to the append, which answers the error.
                    partition = get_partition(*tp)
                    if partition is not None:
                        log_ = partition.log
                        if log_ is not None and log_.config.checks_records and partition.is_leader:
                            checks = self._check_records(tp, records, log_.config, has_compressed)
                except StorageError as e:
                    errors[tp] = self._unknown(tp) or _refusal(e)
                    continue
                entries.append((topic.name, p.index, records))
                # Transactional batches need their transactional id and may need verification (KIP-890);
                # one byte of the first batch's header tells, so other produces pay nothing more.
                if len(records) > _ATTRIBUTES_LOW_BYTE and records[_ATTRIBUTES_LOW_BYTE] & ATTR_TRANSACTIONAL:
                    if transactional is None:
                        transactional = []
                    transactional.append((topic.name, p.index, records))
                if checks is not None:
                    checked.append((topic.name, p.index, records, checks))
                elif has_compressed:
                    compressed.append((topic.name, p.index, records))
        if compressed or checked:
            # Decompressing and compressing are CPU work the event loop must not wait for (cramjam
            # releases the GIL).
            refused, rebuilt = await asyncio.get_running_loop().run_in_executor(
                None, _validate_off_loop, compressed, checked
            )
            if refused:
                errors.update(refused)
                entries = [e for e in entries if (e[0], e[1]) not in refused]
            if rebuilt:
                # The appended records are the rebuilt batches, not the request's.
                entries = [
                    (t, i, memoryview(rebuilt[(t, i)])) if (t, i) in rebuilt else (t, i, r)
                    for t, i, r in entries
                ]
                stats = self.replica_manager.topic_stats
                for (t, _), batches in rebuilt.items():  # Kafka's ProduceMessageConversionsPerSec
                    stats.produce_converted(
                        t, sum(h.records_count for _, h in record_batch.iter_headers(batches))
                    )
            compressed.clear()
            checked.clear()
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
                partial(self._produce_response, request, body, errors),
            )
        if acks == 0:
            return None
        return self._produce_response(request, body, errors, results)

    def _authorize(self, request: Request, body: ProduceRequest) -> Refusal | set[str]:
        """With an authorizer: the refusal of the whole request (transactional batches without WRITE on
        the Produce's transactional id), else the topics the principal may not WRITE to."""
        authorization = self.authorization
        if _has_transactional_records(body) and (
            body.transactional_id is None
            or not authorization.authorize(
                request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id
            )
        ):
            return Refusal(
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                description(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            )
        return authorization.filter_unauthorized(
            request, AclOperation.WRITE, ResourceType.TOPIC, (t.name for t in body.topic_data)
        )

    def _refuse_all(self, request: Request, body: ProduceRequest, refusal: Refusal) -> Message | None:
        """Every partition refused with ``refusal`` (Kafka's ProduceRequest.getErrorResponse), logged; an
        acks=0 producer, which reads no response, is disconnected instead."""
        refused: dict[TopicPartition, Refusal] = {
            (t.name, p.index): refusal for t in body.topic_data for p in t.partition_data
        }
        log_partition_refusals(request, [(f"{t}-{p}", r.code, r.message) for (t, p), r in refused.items()])
        if body.acks == 0:
            request.connection.close()
            return None
        return self._produce_response(request, body, refused, {})

    def _unknown(self, tp: TopicPartition) -> Refusal | None:
        """UNKNOWN_TOPIC_OR_PARTITION for a partition neither this broker nor its metadata knows: Kafka
        answers it before looking at the records (asked only once the records are refused, so that
        the produce path pays nothing for it)."""
        if self.replica_manager.get_partition(*tp) is None and self.metadata_cache.partition(*tp) is None:
            return Refusal(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp[0]}-{tp[1]} does not exist")
        return None

    @staticmethod
    def _check_records(
        tp: TopicPartition, records: Any, config: LogConfig, has_compressed: bool
    ) -> RecordChecks | None:
        """For a topic that asks more of the records than their batches: the checks to run off the
        event loop (None when done here: uncompressed records that stay so need only their keys and
        timestamps read). Raises the refusal."""
        checks = LogValidator.record_checks(config, int(time.time() * 1000))
        if checks is not None and not has_compressed and not checks.codec:
            LogValidator.validate_records(records, f"{tp[0]}-{tp[1]}", checks)
            return None
        return checks

    def _produce_in_order(
        self,
        request: Request,
        body: ProduceRequest,
        errors: dict[TopicPartition, Refusal],
        entries: list[tuple[str, int, Any]],
        transactional: list[tuple[str, int, Any]],
    ) -> Message | Parked | None:
        """A Produce holding transactional batches, or one behind such a Produce of its connection.
        As Kafka: transactional batches without a transactional id refuse the whole request
        (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as do transactional batches of more than one producer
        (INVALID_PRODUCER_ID_MAPPING); partitions where the producer has no ongoing transaction are
        verified with the transaction coordinator before anything is appended."""
        acks = body.acks
        refusal: Refusal | None = None
        producers: set[tuple[int, int]] = set()
        sequences: dict[tuple[str, int], int] = {}
        if transactional and body.transactional_id is None:
            refusal = Refusal(
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
                refusal = Refusal(
                    ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                    "Transactional records contained more than one producer ID",
                )
        if refusal is not None:
            return self._refuse_all(request, body, refusal)
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
        return park(answered, partial(self._produce_response, request, body, errors))

    @staticmethod
    def _appended(
        request: Request,
        body: ProduceRequest,
        errors: dict[TopicPartition, Refusal],
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
            [(f"{t}-{p}", r.code, r.message) for (t, p), r in errors.items()]
            + [(f"{t}-{p}", r.error, r.message) for (t, p), r in results.items()],
        )
        if body.acks == 0:
            failed = [tp for tp, r in results.items() if r.error != ErrorCode.NONE] + [
                tp for tp, refusal in errors.items() if refusal.code != ErrorCode.NONE
            ]
            if failed:
                # acks=0 producers read no response; closing the connection is how they learn (Kafka).
                log.info("closing connection from %s: acks=0 produce to %s failed", request.peer, failed)
                request.connection.close()

    def _produce_response(
        self,
        request: Request,
        body: ProduceRequest,
        errors: dict[TopicPartition, Refusal],
        results: ProduceResults,
    ) -> ProduceResponse:
        current_leader = request.version >= _CURRENT_LEADER_VERSION
        endpoints: dict[int, ProduceResponse.NodeEndpoint] = {}
        responses = []
        for topic in body.topic_data:
            partitions = []
            for p in topic.partition_data:
                tp = (topic.name, p.index)
                refusal = errors.get(tp)
                if refusal is not None:
                    code = refusal.code
                    response = ProduceResponse.PartitionProduceResponse(
                        index=p.index,
                        error_code=code,
                        base_offset=-1 if code else 0,  # Kafka's INVALID_OFFSET for a refusal
                        error_message=refusal.message,
                    )
                    if refusal.record_errors:
                        response.record_errors = [
                            ProduceResponse.BatchIndexAndErrorMessage(
                                batch_index=index, batch_index_error_message=message
                            )
                            for index, message in refusal.record_errors
                        ]
                        # As Kafka's RecordValidationException answer: the log start offset too.
                        response.log_start_offset = self._log_start_offset(*tp)
                else:
                    r = results[tp]
                    response = ProduceResponse.PartitionProduceResponse(
                        index=p.index,
                        error_code=r.error,
                        base_offset=r.base_offset,
                        log_append_time_ms=r.log_append_time,
                        log_start_offset=r.log_start_offset,
                        error_message=r.message if r.error else None,
                    )
                if current_leader and response.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    response.current_leader = self._current_leader(*tp, request.listener, endpoints)
                partitions.append(response)
            responses.append(
                ProduceResponse.TopicProduceResponse(name=topic.name, partition_responses=partitions)
            )
        answer = ProduceResponse(responses=responses, throttle_time_ms=0)
        if endpoints:
            answer.node_endpoints = list(endpoints.values())
        return answer

    def _log_start_offset(self, topic: str, index: int) -> int:
        partition = self.replica_manager.get_partition(topic, index)
        return partition.log.log_start_offset if partition is not None and partition.log is not None else -1

    def _current_leader(
        self, topic: str, index: int, listener: str, endpoints: dict[int, ProduceResponse.NodeEndpoint]
    ) -> ProduceResponse.LeaderIdAndEpoch:
        """KIP-951, as Kafka's KafkaApis.getCurrentLeader: the leader and epoch this broker's replica of
        the partition knows, else the metadata cache's; the leader's endpoint on ``listener`` is added
        to ``endpoints`` when it is alive and has that listener."""
        partition = self.replica_manager.get_partition(topic, index)
        if partition is not None:
            leader, epoch = partition.leader_id, partition.leader_epoch
        else:
            metadata = self.metadata_cache.partition(topic, index)
            leader, epoch = (metadata.leader, metadata.leader_epoch) if metadata is not None else (-1, -1)
        if leader >= 0 and leader not in endpoints:
            for broker, endpoint in self.metadata_cache.alive_endpoints(listener):
                if broker.id == leader:
                    endpoints[leader] = ProduceResponse.NodeEndpoint(
                        node_id=leader, host=endpoint.host, port=endpoint.port, rack=broker.rack or None
                    )
        return ProduceResponse.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
