"""FetchApis: the Fetch handler (Kafka's KafkaApis.handleFetchRequest), merged into KafkaApis.

A Fetch, from a consumer or a follower, becomes ReplicaManager.fetch_messages (parked until min_bytes
or max_wait_ms); the response names each partition's file region, which the connection sends with
sendfile.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from broker.metadata_cache import MetadataCache
from broker.partition import READ_COMMITTED
from broker.replica_manager import FetchParams, FetchPartitionRequest, FetchResults, ReplicaManager
from network.handler_pool import Parked, park
from network.request_channel import Request
from protocol import record_batch
from protocol.api import ApiKey
from protocol.compression import ZSTD
from protocol.errors import ErrorCode
from protocol.messages import FetchRequest, FetchResponse, Message

INT32_MAX = 2**31 - 1
_EMPTY_RECORDS = b""


def _batches_use_zstd(records: Any) -> bool:
    return any(h.compression == ZSTD for _, h in record_batch.iter_headers(records))


class FetchApis:
    def __init__(self, metadata_cache: MetadataCache, replica_manager: ReplicaManager) -> None:
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager

    def handlers(self) -> dict[int, Any]:
        """api key -> handler, merged into KafkaApis."""
        return {ApiKey.FETCH: self.handle_fetch}

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
