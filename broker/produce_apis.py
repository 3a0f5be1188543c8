"""ProduceApis: the Produce handler (Kafka's KafkaApis.handleProduceRequest), merged into KafkaApis.

Checks each partition's records (``LogValidator``; compressed batches on an executor thread), appends
through the ReplicaManager, and answers at once (acks=1), after the followers (acks=all, parked), or
not at all (acks=0). Transactional batches are verified with their coordinator first (KIP-890), and a
connection's later Produces append after such a Produce.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any

from broker.metadata_cache import MetadataCache
from broker.refusals import log_partition_refusals
from broker.replica_manager import ProduceResults, ReplicaManager
from network.handler_pool import Parked, park
from network.request_channel import Request
from protocol import record_batch
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import Message, ProduceRequest, ProduceResponse
from protocol.record_batch import ATTR_TRANSACTIONAL
from server_common.futures import after, completed, compose
from storage.errors import StorageError
from storage.log_validator import LogValidator

log = logging.getLogger(__name__)

# The low byte of a v2 batch's attributes (offset 21, big-endian int16), where the transactional flag is.
_ATTRIBUTES_LOW_BYTE = 22
# Produce from this version on: producers understand TRANSACTION_ABORTABLE (Kafka's genericError).
_GENERIC_TXN_ERRORS_VERSION = 11


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


class ProduceApis:
    def __init__(self, metadata_cache: MetadataCache, replica_manager: ReplicaManager) -> None:
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
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
