"""AdminApis: the broker's handlers for administrative requests, answered by writing to ZooKeeper.

As in Kafka's ZooKeeper mode, a broker serves CreateTopics, DeleteTopics, CreatePartitions and config
changes by writing the znodes the controller acts on. This module wires the parts together and merges
their handlers into KafkaApis:

- topics (CreateTopics, DeleteTopics, CreatePartitions, Metadata auto-creation): ``topic_admin``;
- configs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs): ``config_admin``, with the dynamic
  broker settings in ``dynamic_config`` and the watch that applies changes in ``config_listener``;
- DeleteRecords (here, over the ReplicaManager: its answer, which waits for the followers, is parked);
- UpdateFeatures and the finalized features ApiVersions reports: ``features`` (the ``/feature`` znode);
- ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments: ``replica_admin``, which
  forwards them to the active controller.

Each part asks the server's ``Authorization`` what the request's principal may do, as Kafka 3.9's
KafkaApis does; DeleteRecords needs DELETE on each topic.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial

from broker.admin_zk import AdminZkClient
from broker.authorization import ALLOW_ALL, Authorization
from broker.config import KafkaConfig
from broker.config_admin import ConfigAdmin
from broker.config_listener import ConfigChangeListener
from broker.controller_channel import ControllerChannel
from broker.dynamic_config import DynamicBrokerConfig
from broker.features import FinalizedFeatures
from broker.metadata_cache import MetadataCache
from broker.replica_admin import ReplicaAdmin
from broker.replica_manager import DeleteRecordsPartitionResult, DeleteRecordsResults, ReplicaManager
from broker.topic_admin import TopicAdmin
from broker.txn_marker_transport import inter_broker_listener
from network.client_security import ClientSecurity
from network.handler_pool import Parked, park
from network.request_channel import Request
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    Message,
)
from protocol.topic import is_internal
from server_common.acls import AclOperation, ResourceType
from storage.log_manager import LogManager
from zk.kafka_zk_client import KafkaZkClient

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Message | Parked | None]]


class AdminApis:
    def __init__(
        self,
        config: KafkaConfig,
        kafka_zk: KafkaZkClient,
        metadata_cache: MetadataCache,
        replica_manager: ReplicaManager,
        log_manager: LogManager,
        *,
        authorization: Authorization = ALLOW_ALL,
        security: ClientSecurity | None = None,
    ) -> None:
        """``authorization``: what each request may do (``ALLOW_ALL``: no authorizer); ``security``: how
        to reach the controller's listener (the inter-broker client settings; None: plaintext)."""
        self.config = config
        self.authorization = authorization
        self.kafka_zk = kafka_zk
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        admin_zk = AdminZkClient(kafka_zk.zk)
        self.dynamic = DynamicBrokerConfig(config)
        self.listener = ConfigChangeListener(config.broker_id, admin_zk, self.dynamic, log_manager)
        self.topics = TopicAdmin(
            config, admin_zk, metadata_cache, self.dynamic, self.listener, authorization=authorization
        )
        self.configs = ConfigAdmin(
            config.broker_id,
            self._config_value,
            admin_zk,
            metadata_cache,
            self.dynamic,
            self.listener,
            authorization=authorization,
        )
        self.features = FinalizedFeatures(kafka_zk.zk, authorization=authorization)
        self.replicas = ReplicaAdmin(
            metadata_cache,
            ControllerChannel(
                kafka_zk.zk,
                config.broker_id,
                config["controller.socket.timeout.ms"] / 1000,
                security=security,
                listener=inter_broker_listener(config),
            ),
            replica_manager,
            authorization=authorization,
        )

    def _config_value(self, name: str) -> object:
        return self.config[name]

    def handlers(self) -> dict[int, Handler]:
        """api key -> handler, merged into KafkaApis."""
        return {
            ApiKey.CREATE_TOPICS: self.topics.handle_create_topics,
            ApiKey.DELETE_TOPICS: self.topics.handle_delete_topics,
            ApiKey.CREATE_PARTITIONS: self.topics.handle_create_partitions,
            ApiKey.DESCRIBE_CONFIGS: self.configs.handle_describe_configs,
            ApiKey.ALTER_CONFIGS: self.configs.handle_alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.configs.handle_incremental_alter_configs,
            ApiKey.DELETE_RECORDS: self.handle_delete_records,
            ApiKey.ELECT_LEADERS: self.replicas.handle_elect_leaders,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self.replicas.handle_alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self.replicas.handle_list_partition_reassignments,
            ApiKey.UPDATE_FEATURES: self.features.handle_update_features,
        }

    async def auto_create_topic(self, topic: str) -> None:
        """Creates ``topic`` with the broker's defaults (Metadata auto-creation)."""
        await self.topics.auto_create_topic(topic)

    async def start(self) -> None:
        """Loads the dynamic configs and starts watching ZooKeeper for config changes and for the
        finalized features."""
        await self.listener.start()
        await self.features.start()

    async def shutdown(self) -> None:
        await self.listener.shutdown()
        await self.replicas.close()

    # -- DeleteRecords ----------------------------------------------------------------------------

    async def handle_delete_records(self, request: Request) -> Message | Parked | None:
        body: DeleteRecordsRequest = request.body
        refused: DeleteRecordsResults = {}
        offsets: dict[tuple[str, int], int] = {}
        deletable = self.authorization.filter_authorized(
            request, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in body.topics)
        )
        for topic in body.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if topic.name not in deletable:
                    # Kafka's answer: no low watermark (INVALID_LOW_WATERMARK).
                    refused[tp] = DeleteRecordsPartitionResult(error=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                elif self.metadata_cache.partition(*tp) is None:
                    refused[tp] = DeleteRecordsPartitionResult(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                elif is_internal(topic.name):
                    refused[tp] = DeleteRecordsPartitionResult(error=ErrorCode.INVALID_TOPIC_EXCEPTION)
                else:
                    offsets[tp] = p.offset
        return park(
            self.replica_manager.delete_records(offsets, body.timeout_ms),
            partial(self._delete_records_response, body, refused),
        )

    @staticmethod
    def _delete_records_response(
        body: DeleteRecordsRequest, refused: DeleteRecordsResults, deleted: DeleteRecordsResults
    ) -> DeleteRecordsResponse:
        results = {**refused, **deleted}
        return DeleteRecordsResponse(
            throttle_time_ms=0,
            topics=[
                DeleteRecordsResponse.DeleteRecordsTopicResult(
                    name=topic.name,
                    partitions=[
                        DeleteRecordsResponse.DeleteRecordsPartitionResult(
                            partition_index=p.partition_index,
                            low_watermark=r.low_watermark,
                            error_code=r.error,
                        )
                        for p in topic.partitions
                        for r in (results[(topic.name, p.partition_index)],)
                    ],
                )
                for topic in body.topics
            ],
        )
