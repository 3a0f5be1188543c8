"""DescribeProducers (KIP-664; Kafka's KafkaApis.handleDescribeProducersRequest): the producer state of
partitions this broker has a replica of, for ``samsa transactions describe-producers`` and
``find-hanging``.

Each producer the partition's producer state knows: its id and epoch, last sequence and timestamp, the
epoch of the coordinator that last wrote a marker for it, and the first offset of its ongoing
transaction (-1 if none). As in Kafka any replica answers (the admin client asks the leader unless told
a broker id); a topic that does not exist or a partition this broker holds no replica of gets
UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER. With an authorizer a topic needs READ (after the
check of its name): else its partitions are TOPIC_AUTHORIZATION_FAILED, as in Kafka.
"""

from __future__ import annotations

from broker.replica_apis import ReplicaApis
from network.request_channel import Request
from protocol.errors import ErrorCode, KafkaError, description
from protocol.messages import DescribeProducersRequest, DescribeProducersResponse
from protocol.topic import topic_name_error
from server_common.acls import AclOperation, ResourceType


class DescribeProducers(ReplicaApis):
    def partition_state(self, topic: str, index: int) -> DescribeProducersResponse.PartitionResponse:
        response = DescribeProducersResponse.PartitionResponse(
            partition_index=index, error_code=ErrorCode.NONE, active_producers=[]
        )
        try:
            producers = self.replica_manager.local_partition(topic, index).active_producers()
        except KafkaError as e:
            response.error_code, response.error_message = e.code, e.message
            return response
        response.active_producers = [
            DescribeProducersResponse.ProducerState(
                producer_id=pid,
                producer_epoch=epoch,
                last_sequence=last_sequence,
                last_timestamp=last_timestamp,
                coordinator_epoch=coordinator_epoch,
                current_txn_start_offset=txn_start,
            )
            for pid, epoch, last_sequence, last_timestamp, coordinator_epoch, txn_start in producers
        ]
        return response

    async def handle_describe_producers(self, request: Request) -> DescribeProducersResponse:
        body: DescribeProducersRequest = request.body
        topics = []
        for topic in body.topics:
            error: tuple[int, str | None] | None = None
            name_error = topic_name_error(topic.name)
            if name_error:
                error = (ErrorCode.INVALID_TOPIC_EXCEPTION, name_error)
            elif not self.authorization.authorize(request, AclOperation.READ, ResourceType.TOPIC, topic.name):
                error = (
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    description(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                )
            elif not self.metadata_cache.contains(topic.name):
                error = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
            partitions = [
                self.partition_state(topic.name, index)
                if error is None
                else DescribeProducersResponse.PartitionResponse(
                    partition_index=index, error_code=error[0], error_message=error[1], active_producers=[]
                )
                for index in topic.partition_indexes
            ]
            topics.append(DescribeProducersResponse.TopicResponse(name=topic.name, partitions=partitions))
        return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
