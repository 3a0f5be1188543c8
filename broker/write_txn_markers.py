"""The partition side of transactions: WriteTxnMarkers, DescribeProducers, and the produce path's
verification of transactional batches (KIP-890 part 1), merged into KafkaApis.

WriteTxnMarkers (Kafka's KafkaApis.handleWriteTxnMarkersRequest): a transaction coordinator asks the
leaders of a transaction's partitions to end it. For each marker, each partition gets one control batch
(COMMIT or ABORT, with the coordinator's epoch) appended as AppendOrigin.COORDINATOR with acks=-1; the
response waits, parked, until every marker's appends are replicated or request.timeout.ms has passed.
A partition without a local log answers UNKNOWN_TOPIC_OR_PARTITION, one this broker does not lead
NOT_LEADER_OR_FOLLOWER (the coordinator retries both once metadata moves); a marker from a coordinator
older than the one that last wrote for the producer is refused by the log (TRANSACTION_COORDINATOR_FENCED),
a stale producer epoch too (INVALID_PRODUCER_EPOCH). Once a marker is in a ``__consumer_offsets``
partition, the group coordinator is told (``on_offsets_marker``: Kafka's onTransactionCompleted) so the
transaction's pending offsets become visible or are dropped.

With an authorizer, WriteTxnMarkers needs ALTER on the cluster (its denial not logged) or else
CLUSTER_ACTION on it (Kafka's check); without either every partition of every marker is
CLUSTER_AUTHORIZATION_FAILED (WriteTxnMarkersRequest.getErrorResponse) and nothing is written.

DescribeProducers is ``broker.describe_producers``. The verification manager
(``broker.add_partitions_to_txn_manager``) is made here when ``transaction.partition.verification.enable``
is on and handed to the ReplicaManager, whose produce path uses it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from broker.authorization import ALLOW_ALL, Authorization
from broker.config import KafkaConfig
from broker.describe_producers import DescribeProducers
from broker.metadata_cache import MetadataCache
from broker.refusals import log_refusal
from broker.replica_manager import ProduceResults, ReplicaManager
from broker.txn_marker_transport import inter_broker_listener
from coordinator.group_metadata_manager import partition_for
from network.client_security import ClientSecurity
from network.handler_pool import Parked, park
from network.request_channel import Request
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import Message, WriteTxnMarkersRequest, WriteTxnMarkersResponse
from protocol.record_batch import encode_control_batch
from protocol.topic import GROUP_METADATA_TOPIC
from server_common.acls import CLUSTER_NAME, AclOperation, ResourceType
from server_common.futures import all_of, completed, then
from storage.producer_state import AppendOrigin

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Message | Parked | None]]
TopicPartition = tuple[str, int]
# (offsets partition, producer id, commit?): the group coordinator's GroupApis.on_txn_marker_written.
OffsetsMarkerListener = Callable[[int, int, bool], None]
# One marker's outcome: its producer id and each partition's error.
MarkerResult = tuple[int, dict[TopicPartition, int]]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class WriteTxnMarkers:
    """WriteTxnMarkers over the ReplicaManager."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        on_offsets_marker: OffsetsMarkerListener | None,
        timeout_ms: int,
        time_ms: Callable[[], int] = _now_ms,
        *,
        authorization: Authorization = ALLOW_ALL,
    ) -> None:
        self.authorization = authorization
        self.replica_manager = replica_manager
        self.on_offsets_marker = on_offsets_marker
        self.timeout_ms = timeout_ms
        self._time_ms = time_ms

    async def handle_write_txn_markers(self, request: Request) -> Message | Parked | None:
        body: WriteTxnMarkersRequest = request.body
        if self.authorization.enabled and not self._authorized(request):
            return _response(
                [
                    (
                        m.producer_id,
                        {
                            (t.name, i): ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                            for t in m.topics
                            for i in t.partition_indexes
                        },
                    )
                    for m in body.markers
                ]
            )
        if not body.markers:
            return WriteTxnMarkersResponse(markers=[])
        return park(all_of([self.write_marker(m) for m in body.markers]), _response)

    def _authorized(self, request: Request) -> bool:
        """ALTER on the cluster, else CLUSTER_ACTION on it (the refusal logged with the peer)."""
        authorization = self.authorization
        if authorization.authorize(
            request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False
        ) or authorization.authorize(
            request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            return True
        log_refusal(
            request,
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"{request.principal} may neither ALTER nor CLUSTER_ACTION on the cluster",
        )
        return False

    def write_marker(self, marker: WriteTxnMarkersRequest.WritableTxnMarker) -> asyncio.Future[MarkerResult]:
        """Appends one marker to each of its partitions; its outcome once they are replicated (or
        timed out)."""
        manager = self.replica_manager
        pid, commit = marker.producer_id, marker.transaction_result
        errors: dict[TopicPartition, int] = {}
        entries = []
        now = self._time_ms()
        for topic in marker.topics:
            for index in topic.partition_indexes:
                found = manager.get_partition(topic.name, index)
                if found is None or found.log is None:
                    # Kafka's getMagic: no local replica at all.
                    errors[(topic.name, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                batch = encode_control_batch(
                    base_offset=0,
                    producer_id=pid,
                    producer_epoch=marker.producer_epoch,
                    commit=commit,
                    coordinator_epoch=marker.coordinator_epoch,
                    timestamp=now,
                )
                entries.append((topic.name, index, memoryview(bytearray(batch))))
        if not entries:
            return completed((pid, errors))
        appended = manager.append_records(entries, -1, AppendOrigin.COORDINATOR)
        for (topic_name, index), result in appended.items():
            if result.error != ErrorCode.NONE:
                log.info(
                    "%s marker of producer %d (coordinator epoch %d) refused by %s-%d: %s",
                    "COMMIT" if commit else "ABORT",
                    pid,
                    marker.coordinator_epoch,
                    topic_name,
                    index,
                    result.message or ErrorCode(result.error).name,
                )
        return then(
            manager.wait_for_acks(appended, self.timeout_ms),
            lambda results: self._written(pid, commit, errors, results),
        )

    def _written(
        self, producer_id: int, commit: bool, errors: dict[TopicPartition, int], results: ProduceResults
    ) -> MarkerResult:
        for tp, result in results.items():
            errors[tp] = result.error
        offsets = [
            p for (t, p), code in errors.items() if t == GROUP_METADATA_TOPIC and code == ErrorCode.NONE
        ]
        if offsets and self.on_offsets_marker is not None:
            for partition in offsets:
                try:
                    self.on_offsets_marker(partition, producer_id, commit)
                except Exception:
                    # As Kafka: the coordinator learns the offsets were not materialised, and retries.
                    log.exception(
                        "the group coordinator failed to complete producer %d's offsets in partition %d",
                        producer_id,
                        partition,
                    )
                    errors[(GROUP_METADATA_TOPIC, partition)] = ErrorCode.UNKNOWN_SERVER_ERROR
        return producer_id, errors


def _response(outcomes: list[MarkerResult]) -> WriteTxnMarkersResponse:
    # Kafka answers per producer id: markers of the same producer share an entry.
    by_producer: dict[int, dict[TopicPartition, int]] = {}
    for producer_id, errors in outcomes:
        by_producer.setdefault(producer_id, {}).update(errors)
    markers = []
    for producer_id, errors in by_producer.items():
        by_topic: dict[str, list[WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult]] = {}
        for (topic, index), code in errors.items():
            by_topic.setdefault(topic, []).append(
                WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                    partition_index=index, error_code=code
                )
            )
        markers.append(
            WriteTxnMarkersResponse.WritableTxnMarkerResult(
                producer_id=producer_id,
                topics=[
                    WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(name=topic, partitions=partitions)
                    for topic, partitions in by_topic.items()
                ],
            )
        )
    return WriteTxnMarkersResponse(markers=markers)


class TxnPartitionApis:
    """WriteTxnMarkers and DescribeProducers, and the produce verification's manager (set on the
    ReplicaManager when ``transaction.partition.verification.enable``)."""

    def __init__(
        self,
        config: KafkaConfig,
        metadata_cache: MetadataCache,
        replica_manager: ReplicaManager,
        on_offsets_marker: OffsetsMarkerListener | None,
        *,
        authorization: Authorization = ALLOW_ALL,
    ) -> None:
        self.markers = WriteTxnMarkers(
            replica_manager, on_offsets_marker, config["request.timeout.ms"], authorization=authorization
        )
        self.producers = DescribeProducers(metadata_cache, replica_manager, authorization=authorization)
        self.verification: AddPartitionsToTxnManager | None = None
        if config["transaction.partition.verification.enable"]:
            num_partitions = config["transaction.state.log.num.partitions"]
            self.verification = AddPartitionsToTxnManager(
                config.broker_id,
                metadata_cache,
                inter_broker_listener(config),
                lambda transactional_id: partition_for(transactional_id, num_partitions),
                config["request.timeout.ms"],
                security=ClientSecurity.for_inter_broker(config),
            )
        replica_manager.add_partitions_to_txn = self.verification

    def handlers(self) -> dict[int, Handler]:
        """api key -> handler, merged into KafkaApis."""
        return {
            ApiKey.WRITE_TXN_MARKERS: self.markers.handle_write_txn_markers,
            ApiKey.DESCRIBE_PRODUCERS: self.producers.handle_describe_producers,
        }

    async def shutdown(self) -> None:
        if self.verification is not None:
            await self.verification.shutdown()
