"""FindCoordinator: which broker coordinates a group or a transactional id, merged into KafkaApis.

A key's coordinator is the leader of one partition of an internal topic: a group's that of
``__consumer_offsets`` (key type 0), a transactional id's that of ``__transaction_state`` (key type 1),
each partition chosen by its coordinator's ``partition_for``. Both keys take one path, as in Kafka's
``getCoordinator``: while the topic does not exist, the first request creates it with the broker's
settings for it (``internal_topics``) and, like every request until a live leader is known, gets
COORDINATOR_NOT_AVAILABLE, which clients retry. Creation fails while fewer brokers are registered than
the topic's replication factor (Kafka's rule; a local cluster sets the factor to its size).

With an authorizer (Kafka's getCoordinator, before anything else): a group's key needs DESCRIBE on the
group (GROUP_AUTHORIZATION_FAILED), a transactional id's DESCRIBE on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); a share group's key (v6+) CLUSTER_ACTION on the cluster, else
the whole request is CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from broker.authorization import ALLOW_ALL, Authorization
from broker.config import KafkaConfig
from broker.metadata_cache import MetadataCache
from broker.refusals import log_refusal
from network.handler_pool import Parked
from network.request_channel import Request
from protocol.api import ApiKey
from protocol.errors import ErrorCode, KafkaError, description
from protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse, Message
from protocol.topic import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from server_common.acls import CLUSTER_NAME, AclOperation, ResourceType
from server_common.tasks import cancel_and_wait

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Message | Parked | None]]
# (name, partitions, replication factor, topic configs): TopicAdmin.create_internal_topic.
CreateTopic = Callable[[str, int, int, dict[str, str]], Awaitable[None]]

GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE, SHARE_KEY_TYPE = 0, 1, 2


@dataclass(frozen=True)
class InternalTopic:
    """A coordinator's topic: how to create it, and which of its partitions holds a key."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str]
    partition_for: Callable[[str], int]


def offsets_topic(config: KafkaConfig, partition_for: Callable[[str], int]) -> InternalTopic:
    """``__consumer_offsets`` as Kafka's group coordinator creates it."""
    return InternalTopic(
        GROUP_METADATA_TOPIC,
        config["offsets.topic.num.partitions"],
        config["offsets.topic.replication.factor"],
        {
            "cleanup.policy": "compact",
            "segment.bytes": str(config["offsets.topic.segment.bytes"]),
            "compression.type": "producer",
        },
        partition_for,
    )


def transaction_topic(config: KafkaConfig, partition_for: Callable[[str], int]) -> InternalTopic:
    """``__transaction_state`` as Kafka's transaction coordinator creates it (transactionTopicConfigs):
    compacted, uncompressed, no unclean elections, ``min.insync.replicas`` from
    ``transaction.state.log.min.isr``."""
    return InternalTopic(
        TRANSACTION_STATE_TOPIC,
        config["transaction.state.log.num.partitions"],
        int(config["transaction.state.log.replication.factor"]),
        {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "unclean.leader.election.enable": "false",
            "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
            "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
        },
        partition_for,
    )


class FindCoordinator:
    def __init__(
        self,
        metadata_cache: MetadataCache,
        create_topic: CreateTopic,
        topics: dict[int, InternalTopic],
        *,
        authorization: Authorization = ALLOW_ALL,
    ) -> None:
        """``topics``: key type -> the internal topic whose partition leaders coordinate its keys."""
        self.authorization = authorization
        self.metadata_cache = metadata_cache
        self._create_topic = create_topic
        self.topics = topics
        self._creating: dict[str, asyncio.Task[None]] = {}

    def handlers(self) -> dict[int, Handler]:
        """api key -> handler, merged into KafkaApis."""
        return {ApiKey.FIND_COORDINATOR: self.handle_find_coordinator}

    async def shutdown(self) -> None:
        await cancel_and_wait(list(self._creating.values()))

    def _maybe_create(self, topic: InternalTopic) -> None:
        running = self._creating.get(topic.name)
        if running is not None and not running.done():
            return

        async def create() -> None:
            try:
                await self._create_topic(
                    topic.name, topic.num_partitions, topic.replication_factor, dict(topic.configs)
                )
            except KafkaError as e:
                log.warning("cannot create %s yet: %s", topic.name, e)
            except Exception:  # ZooKeeper trouble: the next FindCoordinator tries again
                log.exception("creating %s failed", topic.name)

        self._creating[topic.name] = asyncio.get_running_loop().create_task(
            create(), name=f"create-{topic.name}"
        )

    def coordinator(
        self, key: str, key_type: int, listener: str, version: int = 6
    ) -> tuple[int, int, str, int]:
        """(error, node id, host, port) of the coordinator of ``key`` for clients of ``listener``
        (Kafka's getCoordinator). A share group's key (type 2, KIP-932) is INVALID_REQUEST before v6 and
        COORDINATOR_NOT_AVAILABLE from v6: Kafka 3.9 has no share coordinator either."""
        no_node = (-1, "", -1)
        if key_type == SHARE_KEY_TYPE:
            error = ErrorCode.INVALID_REQUEST if version < 6 else ErrorCode.COORDINATOR_NOT_AVAILABLE
            return (error, *no_node)
        topic = self.topics.get(key_type)
        if topic is None:
            return (ErrorCode.INVALID_REQUEST, *no_node)
        cache = self.metadata_cache
        if not cache.contains(topic.name):
            self._maybe_create(topic)
            return (ErrorCode.COORDINATOR_NOT_AVAILABLE, *no_node)
        found = cache.partition(topic.name, topic.partition_for(key))
        if found is None or found.leader < 0 or not cache.is_alive(found.leader):
            return (ErrorCode.COORDINATOR_NOT_AVAILABLE, *no_node)
        endpoint = cache.endpoint(found.leader, listener)
        if endpoint is None:
            return (ErrorCode.COORDINATOR_NOT_AVAILABLE, *no_node)
        return ErrorCode.NONE, found.leader, endpoint.host, endpoint.port

    def _refusal(self, request: Request, key: str, key_type: int, version: int) -> int | None:
        """With an authorizer, the error ``key`` is refused with (Kafka's getCoordinator), else None."""
        authorization = self.authorization
        if key_type == GROUP_KEY_TYPE:
            if not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.GROUP, key):
                return ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif key_type == TRANSACTION_KEY_TYPE:
            if not authorization.authorize(
                request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
            ):
                return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif key_type == SHARE_KEY_TYPE and version >= 6:
            if not authorization.authorize(
                request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
            ):
                return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return None

    def _authorized_coordinator(
        self, request: Request, key: str, key_type: int, version: int
    ) -> tuple[int, int, str, int]:
        """``coordinator``, each key first authorized when there is an authorizer."""
        if self.authorization.enabled:
            refusal = self._refusal(request, key, key_type, version)
            if refusal is not None:
                log_refusal(request, refusal, f"{request.principal} may not find the coordinator of {key!r}")
                return refusal, -1, "", -1
        return self.coordinator(key, key_type, request.listener, version)

    async def handle_find_coordinator(self, request: Request) -> Message:
        """Kafka 3.9's handleFindCoordinatorRequest. Before v4 one key, its error message Kafka's
        ``Errors.message()`` (``"NONE"`` on success); from v4 a batch of keys, each without a message
        unless the whole request failed (an unknown key type: INVALID_REQUEST for every key, as
        Kafka's ``getErrorResponse``)."""
        body: FindCoordinatorRequest = request.body
        version = request.version
        key_type = body.key_type  # v0 has none: it decodes as 0, a group
        known_type = key_type in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE, SHARE_KEY_TYPE)
        if version < 4:
            if known_type:
                error, node, host, port = self._authorized_coordinator(request, body.key, key_type, version)
            else:
                error, node, host, port = ErrorCode.INVALID_REQUEST, -1, "", -1
            return FindCoordinatorResponse(
                throttle_time_ms=0,
                error_code=error,
                error_message=description(error) if error else "NONE",
                node_id=node,
                host=host,
                port=port,
            )
        coordinators = []
        for key in body.coordinator_keys:
            if known_type:
                error, node, host, port = self._authorized_coordinator(request, key, key_type, version)
                message = None
                if error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
                    # Kafka throws: the whole request fails (getErrorResponse: every key, with the message).
                    return FindCoordinatorResponse(
                        throttle_time_ms=0,
                        coordinators=[
                            FindCoordinatorResponse.Coordinator(
                                key=k,
                                node_id=-1,
                                host="",
                                port=-1,
                                error_code=error,
                                error_message=description(error),
                            )
                            for k in body.coordinator_keys
                        ],
                    )
            else:
                error, node, host, port = ErrorCode.INVALID_REQUEST, -1, "", -1
                message = description(error)
            coordinators.append(
                FindCoordinatorResponse.Coordinator(
                    key=key, node_id=node, host=host, port=port, error_code=error, error_message=message
                )
            )
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
