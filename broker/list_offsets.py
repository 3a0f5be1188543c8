"""ListOffsetsApis: the ListOffsets handler (Kafka's KafkaApis.handleListOffsetRequest), merged into
KafkaApis: the offset of the earliest or latest record, or of the first record at or after a timestamp,
on each partition's leader.
"""

from __future__ import annotations

from typing import Any

from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from network.request_channel import Request
from protocol.api import ApiKey
from protocol.errors import KafkaError
from protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP


class ListOffsetsApis:
    def __init__(self, metadata_cache: MetadataCache, replica_manager: ReplicaManager) -> None:
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager

    def handlers(self) -> dict[int, Any]:
        """api key -> handler, merged into KafkaApis."""
        return {ApiKey.LIST_OFFSETS: self.handle_list_offsets}

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
