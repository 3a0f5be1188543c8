"""ListOffsetsApis: the ListOffsets handler (Kafka 3.9's KafkaApis.handleListOffsetRequest), merged into
KafkaApis: the offset of the earliest or latest record, or of the first record at or after a timestamp,
on each partition's leader.

v1+ (Kafka's handleListOffsetRequestV1AndAbove): one offset per partition; a special timestamp is
served only from the version that introduced it (MAX_TIMESTAMP -3 from v7, EARLIEST_LOCAL_TIMESTAMP -4
from v8, LATEST_TIERED_TIMESTAMP -5 from v9; else UNSUPPORTED_VERSION for that partition); a partition
named twice is INVALID_REQUEST. Without tiered storage (Samsa has none, like a Kafka 3.9 broker without
``remote.log.storage.system.enable``) -4 answers as -2 (the log start offset), and -5 answers offset -1
with leader epoch -1 (UnifiedLog.fetchOffsetByTimestamp). MAX_TIMESTAMP is the offset of the record
holding the newest timestamp (KAFKA-16310).

v0 (handleListOffsetRequestV0, ``legacyFetchOffsetsBefore``): up to ``max_num_offsets`` offsets, newest
first, from the segments' base offsets and their files' modification times.

With an authorizer every version needs DESCRIBE on each topic; a topic without it has all its
partitions TOPIC_AUTHORIZATION_FAILED (before any other check, a partition named twice too), as
Kafka's partitionSeqByAuthorized.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from broker.partition import READ_COMMITTED, Partition
from broker.replica_apis import ReplicaApis
from network.request_channel import Request
from protocol.api import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from server_common.acls import AclOperation, ResourceType
from storage.errors import StorageError
from storage.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Log,
    TimestampAndOffset,
)

log = logging.getLogger(__name__)

LATEST_TIERED_TIMESTAMP = -5
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2
# The first version serving each special timestamp (Kafka's timestampMinSupportedVersion).
TIMESTAMP_MIN_VERSION = {
    EARLIEST_TIMESTAMP: 1,
    LATEST_TIMESTAMP: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL_TIMESTAMP: 8,
    LATEST_TIERED_TIMESTAMP: 9,
}

PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse


def _error_response(partition_index: int, error: int) -> PartitionResponse:
    return PartitionResponse(
        partition_index=partition_index, error_code=error, timestamp=-1, offset=-1, leader_epoch=-1
    )


def legacy_offsets_before(lg: Log, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
    """Kafka's UnifiedLog.legacyFetchOffsetsBefore: each segment's base offset (not below the log start)
    with its file's modification time, and the log end offset with ``now_ms`` when the last segment is
    not empty; the offsets of the newest entry at or before ``timestamp`` (LATEST: the last entry,
    EARLIEST: the first) and of those before it, at most ``max_num_offsets``, newest first."""
    segments = lg.segments
    start = lg.log_start_offset
    entries = [(max(s.base_offset, start), s.last_modified_ms) for s in segments]
    if segments and segments[-1].size > 0:
        entries.append((lg.log_end_offset, now_ms))
    if timestamp == LATEST_TIMESTAMP:
        index = len(entries) - 1
    elif timestamp == EARLIEST_TIMESTAMP:
        index = 0
    else:
        index = len(entries) - 1
        while index >= 0 and entries[index][1] > timestamp:
            index -= 1
    count = min(max_num_offsets, index + 1)
    return sorted((entries[index - j][0] for j in range(count)), reverse=True)


class ListOffsetsApis(ReplicaApis):
    def handlers(self) -> dict[int, Any]:
        """api key -> handler, merged into KafkaApis."""
        return {ApiKey.LIST_OFFSETS: self.handle_list_offsets}

    def _partition(self, topic: str, index: int, current_leader_epoch: int, leader_only: bool) -> Partition:
        """Kafka's getPartitionOrException + localLogWithEpochOrThrow: the local replica, its leader epoch
        checked (FENCED/UNKNOWN_LEADER_EPOCH) before whether it leads (NOT_LEADER_OR_FOLLOWER)."""
        partition = self.replica_manager.local_partition(topic, index)
        partition.check_leader_epoch(current_leader_epoch)
        if leader_only and not partition.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this broker does not lead {topic}-{index}")
        return partition

    def _lookup(
        self, body: ListOffsetsRequest, version: int, topic: str, p: ListOffsetsRequest.ListOffsetsPartition
    ) -> PartitionResponse:
        """Kafka's Partition.fetchOffsetForTimestamp for one partition of a v1+ request."""
        partition = self._partition(
            topic, p.partition_index, p.current_leader_epoch, body.replica_id != DEBUGGING_REPLICA_ID
        )
        lg = partition.log
        assert lg is not None
        from_client = body.replica_id == CONSUMER_REPLICA_ID
        if not from_client:
            bound = lg.log_end_offset
        elif body.isolation_level == READ_COMMITTED:
            bound = lg.last_stable_offset
        else:
            bound = lg.high_watermark
        # After an election, until the high watermark reaches the new epoch's start, "latest" (and a
        # lookup past the last fetchable offset) is not known yet: OFFSET_NOT_AVAILABLE, retriable.
        lagging = (
            from_client and partition.is_leader and partition.leader_epoch_start_offset > lg.high_watermark
        )
        not_available = KafkaError(
            ErrorCode.OFFSET_NOT_AVAILABLE,
            f"the high watermark ({lg.high_watermark}) of {topic}-{p.partition_index} is behind the start "
            f"of its leader epoch ({partition.leader_epoch_start_offset})",
        )
        ts = p.timestamp
        found: TimestampAndOffset | None
        if ts == LATEST_TIMESTAMP:
            if lagging:
                raise not_available
            found = TimestampAndOffset(-1, bound, partition.leader_epoch)
        elif ts in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            found = lg.offset_for_timestamp(EARLIEST_TIMESTAMP)
        else:
            if ts == LATEST_TIERED_TIMESTAMP:
                found = TimestampAndOffset(-1, -1, -1)  # no tiered storage
            else:
                found = lg.offset_for_timestamp(ts)
            if found is not None and found.offset >= bound:
                found = None
            if found is None and lagging:
                raise not_available
        if found is None:
            return _error_response(p.partition_index, ErrorCode.NONE)
        return PartitionResponse(
            partition_index=p.partition_index,
            error_code=ErrorCode.NONE,
            timestamp=found.timestamp,
            offset=found.offset,
            leader_epoch=-1 if found.leader_epoch is None or version < 4 else found.leader_epoch,
        )

    def _list_offset(
        self,
        body: ListOffsetsRequest,
        version: int,
        topic: str,
        p: ListOffsetsRequest.ListOffsetsPartition,
        duplicates: set[tuple[str, int]],
    ) -> PartitionResponse:
        if (topic, p.partition_index) in duplicates:
            return _error_response(p.partition_index, ErrorCode.INVALID_REQUEST)
        if p.timestamp < 0 and version < TIMESTAMP_MIN_VERSION.get(p.timestamp, 1 << 15):
            return _error_response(p.partition_index, ErrorCode.UNSUPPORTED_VERSION)
        try:
            return self._lookup(body, version, topic, p)
        except KafkaError as e:
            code = e.code
            if code == ErrorCode.OFFSET_NOT_AVAILABLE and version < 5:
                code = ErrorCode.LEADER_NOT_AVAILABLE  # v5 introduced OFFSET_NOT_AVAILABLE here
            log.debug("ListOffsets of %s-%d failed: %s", topic, p.partition_index, e.message)
            return _error_response(p.partition_index, code)
        except StorageError as e:
            log.warning("ListOffsets of %s-%d failed: %s", topic, p.partition_index, e)
            return _error_response(p.partition_index, e.error_code)
        except Exception:
            log.exception("ListOffsets of %s-%d failed", topic, p.partition_index)
            return _error_response(p.partition_index, ErrorCode.UNKNOWN_SERVER_ERROR)

    def _list_offsets_v0(
        self, body: ListOffsetsRequest, topic: str, p: ListOffsetsRequest.ListOffsetsPartition
    ) -> PartitionResponse:
        """Kafka's handleListOffsetRequestV0 and Partition.legacyFetchOffsetsForTimestamp."""
        response = PartitionResponse(partition_index=p.partition_index, error_code=ErrorCode.NONE)
        if p.timestamp < EARLIEST_TIMESTAMP:  # only -1 and -2 among the special values
            response.error_code = ErrorCode.UNSUPPORTED_VERSION
            return response
        try:
            partition = self._partition(topic, p.partition_index, -1, body.replica_id != DEBUGGING_REPLICA_ID)
            lg = partition.log
            assert lg is not None
            offsets = legacy_offsets_before(lg, p.timestamp, p.max_num_offsets, int(time.time() * 1000))
            if body.replica_id == CONSUMER_REPLICA_ID:
                hw = lg.high_watermark
                if any(o > hw for o in offsets):
                    offsets = [hw, *(o for o in offsets if o <= hw)]
            response.old_style_offsets = offsets
        except KafkaError as e:
            log.debug("ListOffsets v0 of %s-%d failed: %s", topic, p.partition_index, e.message)
            response.error_code = e.code
        except StorageError as e:
            response.error_code = e.error_code
        except Exception:
            log.exception("ListOffsets v0 of %s-%d failed", topic, p.partition_index)
            response.error_code = ErrorCode.UNKNOWN_SERVER_ERROR
        return response

    async def handle_list_offsets(self, request: Request) -> ListOffsetsResponse:
        body: ListOffsetsRequest = request.body
        version = request.version
        topics = []
        topic_response = ListOffsetsResponse.ListOffsetsTopicResponse
        denied = self.authorization.filter_unauthorized(
            request, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in body.topics)
        )
        if version == 0:
            for t in body.topics:
                if t.name in denied:
                    partitions = [
                        PartitionResponse(
                            partition_index=p.partition_index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
                        )
                        for p in t.partitions
                    ]
                else:
                    partitions = [self._list_offsets_v0(body, t.name, p) for p in t.partitions]
                topics.append(topic_response(name=t.name, partitions=partitions))
            return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
        seen: set[tuple[str, int]] = set()
        duplicates: set[tuple[str, int]] = set()
        for t in body.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                (duplicates if tp in seen else seen).add(tp)
        for t in body.topics:
            if t.name in denied:
                partitions = [
                    _error_response(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    for p in t.partitions
                ]
            else:
                partitions = [self._list_offset(body, version, t.name, p, duplicates) for p in t.partitions]
            topics.append(topic_response(name=t.name, partitions=partitions))
        return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
