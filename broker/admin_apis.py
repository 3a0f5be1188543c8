"""AdminApis: the broker's handlers for administrative requests, answered by writing to ZooKeeper.

As in Kafka's ZooKeeper mode, a broker serves CreateTopics, DeleteTopics, CreatePartitions and config
changes by writing the znodes the controller acts on. The handlers are merged into KafkaApis.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from broker.config import KafkaConfig
from broker.metadata_cache import MetadataCache
from broker.network.request_channel import Request
from broker.replica_manager import ReplicaManager
from broker.zk.kafka_zk_client import KafkaZkClient
from protocol.messages import Message
from storage.log_manager import LogManager

Handler = Callable[[Request], Awaitable[Message | None]]


class AdminApis:
    def __init__(
        self,
        config: KafkaConfig,
        kafka_zk: KafkaZkClient,
        metadata_cache: MetadataCache,
        replica_manager: ReplicaManager,
        log_manager: LogManager,
    ) -> None:
        self.config = config
        self.kafka_zk = kafka_zk
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.log_manager = log_manager

    def handlers(self) -> dict[int, Handler]:
        """api key -> handler, merged into KafkaApis."""
        return {}

    async def auto_create_topic(self, topic: str) -> None:
        """Creates ``topic`` with the broker's defaults (Metadata auto-creation)."""

    async def start(self) -> None:
        """Starts what runs in the background (watching ZooKeeper for topic config changes)."""

    async def shutdown(self) -> None:
        pass
