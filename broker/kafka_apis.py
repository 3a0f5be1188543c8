"""KafkaApis: the request handlers, dispatched by api key.

Each handler takes a decoded ``Request`` and returns the response message (None when the request gets
no response, as an acks=0 Produce). This module holds the cluster handlers (ApiVersions, Metadata,
DescribeCluster, OffsetForLeaderEpoch and the controller's requests). The others are merged in:
Produce from ``broker.produce_apis``, Fetch from ``broker.fetch_apis``, ListOffsets from
``broker.list_offsets`` (these three built here), and, given by the server, the admin handlers
(``broker.admin_apis``), the group coordinator's (``broker.group_apis``), FindCoordinator
(``broker.find_coordinator``) and the transaction coordinator's (``broker.txn_apis``). The ApiVersions
response advertises exactly the APIs that have a handler, at the ranges of ``protocol.api_versions``,
and from v3 the finalized features (``broker.features``). With no authorizer, Metadata and
DescribeCluster report every operation valid for a topic or the cluster when asked, as Kafka does.

Authorization (``broker.authorization``, Kafka 3.9's KafkaApis checks): Metadata answers only the
topics the principal may DESCRIBE (a topic named but not describable is TOPIC_AUTHORIZATION_FAILED,
its existence not disclosed; in an all-topics request it is left out) and auto-creates a topic only
with CREATE on the cluster or on the topic; the authorized operations of Metadata and DescribeCluster
are the principal's (0 for the cluster without DESCRIBE on it). OffsetForLeaderEpoch needs
CLUSTER_ACTION on the cluster (replicas) or DESCRIBE on each topic (consumers, KIP-320); the
controller's LeaderAndIsr, UpdateMetadata and StopReplica need CLUSTER_ACTION
(CLUSTER_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Awaitable, Callable

from broker.authorization import ALLOW_ALL, Authorization
from broker.features import FinalizedFeatures
from broker.fetch_apis import FetchApis
from broker.list_offsets import ListOffsetsApis
from broker.metadata_cache import MetadataCache
from broker.produce_apis import ProduceApis
from broker.quota_manager import QuotaManagers
from broker.refusals import log_refusal
from broker.replica_manager import (
    METADATA_UPDATE,
    ReplicaManager,
)
from network.handler_pool import Parked
from network.request_channel import Request
from protocol.api import Api, ApiKey, api
from protocol.api_versions import ADVERTISED_MINIMUM, ADVERTISED_VERSIONS
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeClusterResponse,
    LeaderAndIsrResponse,
    Message,
    MetadataRequest,
    MetadataResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    StopReplicaResponse,
    UpdateMetadataResponse,
)
from protocol.topic import INTERNAL_TOPICS, is_internal, topic_name_error
from server_common.acls import CLUSTER_NAME, AclOperation, ResourceType

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Message | Parked | None]]

# Kafka leaves authorized-operation fields at INT_MIN when the client did not ask for them.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# AclOperation codes (org.apache.kafka.common.acl.AclOperation).
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12


def operations_bitfield(*operations: int) -> int:
    """Kafka's Utils.to32BitField: bit ``code`` set for each operation."""
    return sum(1 << op for op in set(operations))


# With no authorizer Kafka reports every operation valid for the resource type (AclEntry.supportedOperations).
TOPIC_OPERATIONS = operations_bitfield(
    READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS
)
CLUSTER_OPERATIONS = operations_bitfield(
    CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE
)
# DescribeCluster's endpoint types (EndpointType): a broker serves BROKER.
ENDPOINT_BROKER, ENDPOINT_CONTROLLER = 1, 2
_ZERO_UUID = uuid.UUID(int=0)
# KIP-511: what a client may call itself (Kafka answers INVALID_REQUEST otherwise; Samsa only logs).
_SOFTWARE_NAME = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def _topic_id_of(topic: MetadataRequest.MetadataRequestTopic) -> uuid.UUID:
    return getattr(topic, "topic_id", None) or _ZERO_UUID


def _metadata_request_problem(topics: list[MetadataRequest.MetadataRequestTopic], version: int) -> str | None:
    """Kafka's check of the topics a Metadata request names: ids only from v12, a name otherwise."""
    for t in topics:
        if _topic_id_of(t) != _ZERO_UUID:
            if version < 12:
                return f"Topic IDs are not supported in requests for version {version}"
        elif t.name is None and version < 12:
            return f"Topic name can not be null for version {version}"
    return None


def _mis_skips_tags(body: ApiVersionsRequest) -> bool:
    """librdkafka before 2.2.0 (Debian's kcat has 2.0.2) skips one byte too few per tagged field and
    fails the connection ("Read underflow") on an ApiVersions response carrying the feature tags; such
    clients get the response without them (the research notes on client versions, trap 1)."""
    if body.client_software_name != "librdkafka":
        return False
    parts = (body.client_software_version or "").split("-")[0].split(".")
    try:
        return tuple(int(p) for p in parts[:2]) < (2, 2)
    except ValueError:
        return False


class KafkaApis:
    def __init__(
        self,
        broker_id: int,
        metadata_cache: MetadataCache,
        replica_manager: ReplicaManager,
        extra_handlers: dict[int, Handler] | None = None,
        auto_create_topic: Callable[[str], Awaitable[None]] | None = None,
        features: FinalizedFeatures | None = None,
        fetch_apis: FetchApis | None = None,
        *,
        authorization: Authorization = ALLOW_ALL,
    ) -> None:
        """``authorization``: the server's (``ALLOW_ALL`` without an authorizer); it is handed on to
        the Produce, ListOffsets and (when not given) Fetch handlers built here."""
        self.broker_id = broker_id
        self.authorization = authorization
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self._auto_create_topic = auto_create_topic
        self.features = features
        # Set by the server: the client quotas every response goes through (None: no quotas).
        self.quotas: QuotaManagers | None = None
        self._handlers: dict[int, Handler] = {
            ApiKey.API_VERSIONS: self.handle_api_versions,
            ApiKey.METADATA: self.handle_metadata,
            ApiKey.DESCRIBE_CLUSTER: self.handle_describe_cluster,
            **ProduceApis(metadata_cache, replica_manager, authorization=authorization).handlers(),
            # The server's has the fetch-session cache and fetch.max.bytes of its config.
            **(
                fetch_apis or FetchApis(metadata_cache, replica_manager, authorization=authorization)
            ).handlers(),
            **ListOffsetsApis(metadata_cache, replica_manager, authorization=authorization).handlers(),
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.handle_offset_for_leader_epoch,
            ApiKey.LEADER_AND_ISR: self.handle_leader_and_isr,
            ApiKey.UPDATE_METADATA: self.handle_update_metadata,
            ApiKey.STOP_REPLICA: self.handle_stop_replica,
            **(extra_handlers or {}),
        }
        self._supported: dict[int, tuple[Api, int, int]] = {}
        for key in self._handlers:
            low, high = ADVERTISED_VERSIONS[key]
            definition = api(key)
            assert (
                definition is not None
                and low in definition.valid_versions
                and high in definition.valid_versions
            )
            self._supported[key] = (definition, low, high)
        self._api_versions = [
            ApiVersionsResponse.ApiVersion(
                api_key=key, min_version=ADVERTISED_MINIMUM.get(key, low), max_version=high
            )
            for key, (_, low, high) in sorted(self._supported.items())
        ]

    def supported(self, api_key: int) -> tuple[Api, int, int] | None:
        """(api, lowest, highest version) for an API this broker serves, else None."""
        return self._supported.get(api_key)

    async def handle(self, request: Request) -> Message | Parked | None:
        response = await self._handlers[request.api.key](request)
        # Client quotas (broker/quota_manager.py): the one place every response is recorded against
        # them and, if violated, gets throttle_time_ms and its connection muted (KIP-219).
        quotas = self.quotas
        if quotas is not None and quotas.enabled:
            return quotas.respond(request, response)
        return response

    # -- ApiVersions ------------------------------------------------------------------------------

    async def handle_api_versions(self, request: Request) -> ApiVersionsResponse:
        if request.body is None:
            log.info(
                "ApiVersions v%d from %s is newer than this broker's; answering UNSUPPORTED_VERSION in v0",
                request.requested_version,
                request.peer,
            )
            _, low, high = self._supported[ApiKey.API_VERSIONS]
            return ApiVersionsResponse(
                error_code=ErrorCode.UNSUPPORTED_VERSION,
                api_keys=[
                    ApiVersionsResponse.ApiVersion(
                        api_key=ApiKey.API_VERSIONS, min_version=low, max_version=high
                    )
                ],
            )
        if request.version >= 3:
            body: ApiVersionsRequest = request.body
            for value in (body.client_software_name, body.client_software_version):
                if not _SOFTWARE_NAME.match(value or ""):
                    log.debug(
                        "client %s at %s sent an unusual software name/version %r",
                        request.client_id,
                        request.peer,
                        value,
                    )
        response = ApiVersionsResponse(
            error_code=ErrorCode.NONE, api_keys=self._api_versions, throttle_time_ms=0
        )
        if self.features is not None and not (request.version >= 3 and _mis_skips_tags(request.body)):
            # v3+: the supported and finalized features (KIP-584; older versions do not carry them).
            self.features.fill_api_versions(response)
        return response

    # -- Metadata ---------------------------------------------------------------------------------

    def _broker_list(self, listener: str) -> list[MetadataResponse.MetadataResponseBroker]:
        return [
            MetadataResponse.MetadataResponseBroker(node_id=b.id, host=e.host, port=e.port, rack=b.rack)
            for b, e in self.metadata_cache.alive_endpoints(listener)
        ]

    def _topic_metadata(
        self, name: str, operations: int, version: int = 12, listener: str | None = None
    ) -> MetadataResponse.MetadataResponseTopic:
        """Kafka's ZkMetadataCache.getPartitionMetadata: a leader that is down or (v6+) has no endpoint on
        the request's listener is LEADER_NOT_AVAILABLE / LISTENER_NOT_FOUND with no leader; v0 lists only
        the replicas that are up (REPLICA_NOT_AVAILABLE when some are not)."""
        cache = self.metadata_cache
        partitions = []

        def reachable(broker_id: int) -> bool:
            return cache.is_alive(broker_id) and (
                listener is None or cache.endpoint(broker_id, listener) is not None
            )

        for p in sorted(cache.partitions(name).values(), key=lambda p: p.partition):
            replicas, isr, offline = list(p.replicas), list(p.isr), list(p.offline_replicas)
            if version == 0:
                replicas, isr, offline = (
                    [b for b in ids if reachable(b)] for ids in (replicas, isr, offline)
                )
            if p.leader >= 0 and reachable(p.leader):
                leader = p.leader
                missing = len(replicas) < len(p.replicas) or len(isr) < len(p.isr)
                error = ErrorCode.REPLICA_NOT_AVAILABLE if missing else ErrorCode.NONE
            else:
                leader = -1
                listener_missing = p.leader >= 0 and cache.is_alive(p.leader) and version >= 6
                error = ErrorCode.LISTENER_NOT_FOUND if listener_missing else ErrorCode.LEADER_NOT_AVAILABLE
            partitions.append(
                MetadataResponse.MetadataResponsePartition(
                    error_code=error,
                    partition_index=p.partition,
                    leader_id=leader,
                    leader_epoch=p.leader_epoch,
                    replica_nodes=replicas,
                    isr_nodes=isr,
                    offline_replicas=offline,
                )
            )
        return MetadataResponse.MetadataResponseTopic(
            error_code=ErrorCode.NONE,
            name=name,
            topic_id=cache.topic_id(name),
            is_internal=is_internal(name),
            partitions=partitions,
            topic_authorized_operations=operations,
        )

    def _cluster_operations(self, request: Request) -> int:
        """The cluster's authorized operations for Metadata v8-10 and DescribeCluster (Kafka: 0 without
        DESCRIBE on the cluster, else those of its operations the principal may do)."""
        authorization = self.authorization
        if not authorization.enabled:
            return CLUSTER_OPERATIONS
        if not authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return 0
        return authorization.authorized_operations(request, ResourceType.CLUSTER, CLUSTER_NAME)

    @staticmethod
    def _unauthorized_topic(
        name: str | None, topic_id: uuid.UUID = _ZERO_UUID, internal: bool = False
    ) -> MetadataResponse.MetadataResponseTopic:
        """TOPIC_AUTHORIZATION_FAILED, with nothing about the topic (named by id: the id, no name)."""
        return MetadataResponse.MetadataResponseTopic(
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            name=name,
            topic_id=topic_id,
            is_internal=internal,
            partitions=[],
        )

    async def handle_metadata(self, request: Request) -> MetadataResponse:
        """Kafka 3.9's handleTopicMetadataRequest. With an authorizer, the topics the principal may not
        DESCRIBE are left out of an all-topics answer (no denial logged) and answered
        TOPIC_AUTHORIZATION_FAILED when named, whether they exist or not; a missing topic is
        auto-created only with CREATE on the cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED)."""
        body: MetadataRequest = request.body
        authorization = self.authorization
        requested = body.topics
        if requested is not None and not requested and request.version == 0:
            requested = None  # in v0 an empty list means every topic
        # Before v4 every Metadata request may create topics; from v4 the client says.
        allow_auto_create = request.version < 4 or body.allow_auto_topic_creation
        # v8+: with no authorizer, every operation valid for a topic / the cluster (v8-10 only).
        include_topic_operations = request.version >= 8 and body.include_topic_authorized_operations

        def operations(name: str | None) -> int:
            if not include_topic_operations:
                return AUTHORIZED_OPERATIONS_OMITTED
            if not authorization.enabled:
                return TOPIC_OPERATIONS
            if name is None:
                return AUTHORIZED_OPERATIONS_OMITTED
            return authorization.authorized_operations(request, ResourceType.TOPIC, name)

        cluster_operations = (
            self._cluster_operations(request)
            if 8 <= request.version <= 10 and body.include_cluster_authorized_operations
            else AUTHORIZED_OPERATIONS_OMITTED
        )
        cache = self.metadata_cache
        topics: list[MetadataResponse.MetadataResponseTopic] = []
        names: list[str | None]
        # With an authorizer: the topics the principal may DESCRIBE, and those it may not create.
        describable: set[str] | None = None
        not_creatable: set[str] = set()
        if requested is None:
            existing = list(cache.topic_names())
            if authorization.enabled:
                allowed = authorization.filter_authorized(
                    request, AclOperation.DESCRIBE, ResourceType.TOPIC, existing, log_if_denied=False
                )
                existing = [n for n in existing if n in allowed]
            names = list(existing)
        else:
            problem = _metadata_request_problem(requested, request.version)
            if problem is not None:
                # Kafka's MetadataRequest.getErrorResponse: every topic named, with the error.
                log_refusal(request, ErrorCode.INVALID_REQUEST, problem)
                return MetadataResponse(
                    throttle_time_ms=0,
                    brokers=[],
                    topics=[
                        MetadataResponse.MetadataResponseTopic(
                            error_code=ErrorCode.INVALID_REQUEST,
                            name=t.name,
                            topic_id=_topic_id_of(t),
                            is_internal=False,
                            partitions=[],
                        )
                        for t in requested
                    ],
                )
            names = [t.name for t in requested if _topic_id_of(t) == _ZERO_UUID]
            if authorization.enabled:
                by_id = (
                    cache.topic_name(_topic_id_of(t)) for t in requested if _topic_id_of(t) != _ZERO_UUID
                )
                describable = authorization.filter_authorized(
                    request,
                    AclOperation.DESCRIBE,
                    ResourceType.TOPIC,
                    [n for n in (*names, *by_id) if n is not None],
                )
                if allow_auto_create and self._auto_create_topic is not None:
                    missing = [n for n in names if n in describable and not cache.contains(n)]
                    if missing and not authorization.authorize(
                        request, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False
                    ):
                        creatable = authorization.filter_authorized(
                            request, AclOperation.CREATE, ResourceType.TOPIC, missing
                        )
                        not_creatable = {n for n in missing if n not in creatable}
            for t in requested:
                topic_id = _topic_id_of(t)
                if topic_id == _ZERO_UUID:
                    continue
                # v12+: a topic named by id (UNKNOWN_TOPIC_ID, the name left null, when unknown).
                name = cache.topic_name(topic_id)
                if name is None:
                    topics.append(
                        MetadataResponse.MetadataResponseTopic(
                            error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                            name=None,
                            topic_id=topic_id,
                            is_internal=False,
                            partitions=[],
                        )
                    )
                elif describable is not None and name not in describable:
                    # Kafka: topic ids are not secret, so the id is answered (without the name).
                    topics.append(self._unauthorized_topic(None, topic_id))
                else:
                    topics.append(
                        self._topic_metadata(name, operations(name), request.version, request.listener)
                    )
        for name in names:
            if describable is not None and name is not None and name not in describable:
                topics.append(self._unauthorized_topic(name))  # whether it exists is not disclosed
                continue
            if name is not None and cache.contains(name):
                topics.append(self._topic_metadata(name, operations(name), request.version, request.listener))
                continue
            if name in not_creatable:
                topics.append(self._unauthorized_topic(name, internal=is_internal(name)))
                continue
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            name_error = topic_name_error(name)
            if name_error:
                error = ErrorCode.INVALID_TOPIC_EXCEPTION
                log_refusal(request, error, f"topic {name!r}: {name_error}")
            elif (
                name is not None  # (None has a name_error: this only tells the type checker)
                and allow_auto_create
                and self._auto_create_topic is not None
                and name not in INTERNAL_TOPICS
            ):
                try:
                    await self._auto_create_topic(name)
                    error = ErrorCode.LEADER_NOT_AVAILABLE  # the client retries until leaders are elected
                except KafkaError as e:
                    error = e.code
            topics.append(
                MetadataResponse.MetadataResponseTopic(
                    error_code=error,
                    name=name,
                    is_internal=name is not None and is_internal(name),
                    partitions=[],
                    topic_authorized_operations=operations(name),
                )
            )
        return MetadataResponse(
            throttle_time_ms=0,
            brokers=self._broker_list(request.listener),
            cluster_id=cache.cluster_id,
            # Clients send admin requests to the "controller"; any broker serves them, so name ourselves.
            controller_id=self.broker_id,
            topics=topics,
            cluster_authorized_operations=cluster_operations,
        )

    # -- DescribeCluster --------------------------------------------------------------------------

    async def handle_describe_cluster(self, request: Request) -> DescribeClusterResponse:
        """Kafka's AuthHelper.computeDescribeClusterResponse for a broker endpoint (v0-1)."""
        body = request.body
        endpoint_type = (
            getattr(body, "endpoint_type", ENDPOINT_BROKER) if request.version >= 1 else ENDPOINT_BROKER
        )
        if endpoint_type != ENDPOINT_BROKER:
            known = endpoint_type == ENDPOINT_CONTROLLER
            if request.version == 0:
                error = ErrorCode.INVALID_REQUEST
            else:
                error = ErrorCode.MISMATCHED_ENDPOINT_TYPE if known else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            message = (
                f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
                f"{'CONTROLLER' if known else endpoint_type}"
                if known
                else f"Unsupported endpoint type {endpoint_type}"
            )
            log_refusal(request, error, message)
            return DescribeClusterResponse(
                throttle_time_ms=0,
                error_code=error,
                error_message=message,
                endpoint_type=ENDPOINT_BROKER,
                cluster_id="",
                controller_id=-1,
                brokers=[],
                cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
            )
        return DescribeClusterResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            endpoint_type=ENDPOINT_BROKER,
            cluster_id=self.metadata_cache.cluster_id,
            controller_id=self.broker_id,
            brokers=[
                DescribeClusterResponse.DescribeClusterBroker(
                    broker_id=b.id, host=e.host, port=e.port, rack=b.rack
                )
                for b, e in self.metadata_cache.alive_endpoints(request.listener)
            ],
            cluster_authorized_operations=self._cluster_operations(request)
            if body.include_cluster_authorized_operations
            else AUTHORIZED_OPERATIONS_OMITTED,
        )

    # -- OffsetForLeaderEpoch ----------------------------------------------------------------------

    def _epoch_end_offset(
        self, topic: str, p: OffsetForLeaderEpochRequest.OffsetForLeaderPartition
    ) -> OffsetForLeaderEpochResponse.EpochEndOffset:
        result = OffsetForLeaderEpochResponse.EpochEndOffset(partition=p.partition)
        try:
            result.leader_epoch, result.end_offset = self.replica_manager.last_offset_for_leader_epoch(
                topic, p.partition, p.current_leader_epoch, p.leader_epoch
            )
        except KafkaError as e:
            result.error_code, result.leader_epoch, result.end_offset = e.code, -1, -1
        return result

    async def handle_offset_for_leader_epoch(self, request: Request) -> OffsetForLeaderEpochResponse:
        """Where a leader epoch ends on this leader: followers truncate to it (KIP-101, KIP-279), and
        consumers check they did not read past a truncation (KIP-320). With an authorizer, Kafka's
        check: CLUSTER_ACTION on the cluster (a replica; its denial not logged), else DESCRIBE on each
        topic (a consumer), whose partitions are TOPIC_AUTHORIZATION_FAILED without it."""
        body: OffsetForLeaderEpochRequest = request.body
        authorization = self.authorization
        denied: set[str] = set()
        if authorization.enabled and not authorization.authorize(
            request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False
        ):
            denied = authorization.filter_unauthorized(
                request, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in body.topics)
            )
        return OffsetForLeaderEpochResponse(
            throttle_time_ms=0,
            topics=[
                OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(
                    topic=t.topic,
                    partitions=[
                        OffsetForLeaderEpochResponse.EpochEndOffset(
                            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, partition=p.partition
                        )
                        if t.topic in denied
                        else self._epoch_end_offset(t.topic, p)
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ],
        )

    # -- the controller's requests ----------------------------------------------------------------

    async def _fenced(self, request: Request) -> int | None:
        """NONE if ``request`` comes from the active controller for this broker's current epoch; else
        the error it is refused with, logged with its peer; None when ZooKeeper cannot say: the
        connection is closed unanswered (a controller resends on a new connection, not after an error).
        With an authorizer the sender needs CLUSTER_ACTION on the cluster first (Kafka's
        authorizeClusterOperation): else CLUSTER_AUTHORIZATION_FAILED, for every partition too."""
        authorization = self.authorization
        if authorization.enabled and not authorization.authorize(
            request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            log_refusal(
                request,
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                f"{request.principal} may not CLUSTER_ACTION on the cluster",
            )
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        refusal = await self.replica_manager.check_controller(request.body)
        if refusal is None:
            return ErrorCode.NONE
        log_refusal(request, refusal.error, refusal.detail)
        if refusal.unanswered:
            request.connection.close()
            return None
        return refusal.error

    async def handle_leader_and_isr(self, request: Request) -> LeaderAndIsrResponse | None:
        fenced = await self._fenced(request)
        if fenced is None:
            return None
        error, errors, topic_ids = await self.replica_manager.become_leader_or_follower(
            request.body, request.version, fenced
        )
        if request.version < 5:
            return LeaderAndIsrResponse(
                error_code=error,
                partition_errors=[
                    LeaderAndIsrResponse.LeaderAndIsrPartitionError(
                        topic_name=t, partition_index=p, error_code=code
                    )
                    for (t, p), code in errors.items()
                ],
            )
        by_topic: dict[str, list[LeaderAndIsrResponse.LeaderAndIsrPartitionError]] = {}
        for (t, p), code in errors.items():
            by_topic.setdefault(t, []).append(
                LeaderAndIsrResponse.LeaderAndIsrPartitionError(partition_index=p, error_code=code)
            )
        return LeaderAndIsrResponse(
            error_code=error,
            topics=[
                LeaderAndIsrResponse.LeaderAndIsrTopicError(topic_id=topic_ids[t], partition_errors=errs)
                for t, errs in by_topic.items()
            ],
        )

    async def handle_update_metadata(self, request: Request) -> UpdateMetadataResponse | None:
        fenced = await self._fenced(request)
        if fenced is None:
            return None
        if fenced == ErrorCode.NONE:
            for tp in self.metadata_cache.update(request.body, request.version):
                self.replica_manager.fetch_purgatory.check(tp)
                self.replica_manager.produce_purgatory.check(tp)
            self.replica_manager.elect_leader_purgatory.check(METADATA_UPDATE)
        return UpdateMetadataResponse(error_code=fenced)

    async def handle_stop_replica(self, request: Request) -> StopReplicaResponse | None:
        fenced = await self._fenced(request)
        if fenced is None:
            return None
        error, errors = await self.replica_manager.stop_replicas(request.body, request.version, fenced)
        return StopReplicaResponse(
            error_code=error,
            partition_errors=[
                StopReplicaResponse.StopReplicaPartitionError(
                    topic_name=t, partition_index=p, error_code=code
                )
                for (t, p), code in errors.items()
            ],
        )
