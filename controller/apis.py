"""ControllerApis: the requests a controller process answers on its own listener.

ApiVersions, so that any Kafka client can talk to it; ControlledShutdown (v0-3), which brokers send to
the endpoint the active controller publishes in ``/controller``; AlterPartition (v0-3), by which
partition leaders change their ISR; ElectLeaders (v0-2), AlterPartitionReassignments (v0) and
ListPartitionReassignments (v0), which brokers forward here from the admin clients they serve. A standby
controller answers NOT_CONTROLLER, and the broker looks up the active one again.

Only brokers may call it (Kafka's controller checks CLUSTER_ACTION on the Cluster for ControlledShutdown
and AlterPartition; the admin requests here come from brokers that checked their own clients): every
request but ApiVersions and the SASL ones must come from a principal the authorizer lets do
CLUSTER_ACTION on the Cluster (``super.users`` included) when ``authorizer.class.name`` is set, else, when
``super.users`` is set, from one of them; otherwise CLUSTER_AUTHORIZATION_FAILED. With neither (a
plaintext controller, as before) everyone may, as Kafka without an authorizer.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable

from controller.alter_partition import IsrChange
from controller.context import TopicPartition
from controller.controller import KafkaController
from controller.replica_election import ElectionType
from network.handler_pool import Parked
from network.request_channel import Request
from network.sasl_server import sasl_handlers
from protocol.api import Api, ApiKey, api
from protocol.api_versions import ADVERTISED_VERSIONS
from protocol.errors import ErrorCode, KafkaError, description
from protocol.messages import (
    AlterPartitionReassignmentsResponse,
    AlterPartitionResponse,
    ApiVersionsResponse,
    ControlledShutdownResponse,
    ElectLeadersResponse,
    ListPartitionReassignmentsResponse,
    Message,
)
from server_common.acl_authorizer import log_audit
from server_common.acls import CLUSTER_NAME, AclOperation, Action, Authorizer, ResourceType
from server_common.principal import KafkaPrincipal
from zk.znodes import PartitionState

log = logging.getLogger(__name__)

# What any peer may send: ApiVersions before anything else, the SASL exchange that authenticates it.
_UNGATED = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
_CLUSTER_ACTION = Action(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)

_SERVED = {
    ApiKey.API_VERSIONS: ADVERTISED_VERSIONS[ApiKey.API_VERSIONS],
    ApiKey.CONTROLLED_SHUTDOWN: ADVERTISED_VERSIONS[ApiKey.CONTROLLED_SHUTDOWN],
    ApiKey.ALTER_PARTITION: (0, 3),
    ApiKey.ELECT_LEADERS: ADVERTISED_VERSIONS[ApiKey.ELECT_LEADERS],
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: ADVERTISED_VERSIONS[ApiKey.ALTER_PARTITION_REASSIGNMENTS],
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ADVERTISED_VERSIONS[ApiKey.LIST_PARTITION_REASSIGNMENTS],
    ApiKey.SASL_HANDSHAKE: ADVERTISED_VERSIONS[ApiKey.SASL_HANDSHAKE],
    ApiKey.SASL_AUTHENTICATE: ADVERTISED_VERSIONS[ApiKey.SASL_AUTHENTICATE],
}


class ControllerApis:
    def __init__(
        self,
        controller: KafkaController,
        *,
        authorizer: Authorizer | None = None,
        super_users: Iterable[KafkaPrincipal] = (),
    ) -> None:
        self._controller = controller
        self._authorizer = authorizer
        self._super_users = frozenset(super_users)
        self._supported: dict[int, tuple[Api, int, int]] = {}
        for key, (low, high) in _SERVED.items():
            definition = api(key)
            assert definition is not None
            self._supported[key] = (definition, low, high)
        self._api_versions = [
            ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
            for key, (_, low, high) in sorted(self._supported.items())
        ]
        self._handlers: dict[int, Callable[[Request], Awaitable[Message | Parked | None]]] = {
            ApiKey.CONTROLLED_SHUTDOWN: self._handle_controlled_shutdown,
            ApiKey.ALTER_PARTITION: self._handle_alter_partition,
            ApiKey.ELECT_LEADERS: self._handle_elect_leaders,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self._handle_alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self._handle_list_partition_reassignments,
            **sasl_handlers(),  # SaslHandshake, SaslAuthenticate (network.sasl_server)
        }

    def supported(self, api_key: int) -> tuple[Api, int, int] | None:
        return self._supported.get(api_key)

    async def handle(self, request: Request) -> Message | Parked | None:
        if request.api.key == ApiKey.API_VERSIONS:
            return self._handle_api_versions(request)
        if request.api.key not in _UNGATED and not self.from_a_broker(request):
            return _cluster_authorization_failed(request)
        return await self._handlers[request.api.key](request)

    def from_a_broker(self, request: Request) -> bool:
        """May the request's principal call the controller: CLUSTER_ACTION on the Cluster by the
        authorizer (super users included), else membership of ``super.users``, else (neither is
        configured) yes."""
        principal = request.principal
        if self._authorizer is not None:
            return self._authorizer.authorize(principal, request.client_ip, [_CLUSTER_ACTION])[0]
        if not self._super_users or principal in self._super_users:
            return True
        log_audit(
            principal,
            request.client_ip,
            _CLUSTER_ACTION,
            False,
            detail=(
                f" for request = {request.api.name} with resourceRefCount = 1 (not one of super.users; "
                "no authorizer)"
            ),
        )
        return False

    def _handle_api_versions(self, request: Request) -> Message:
        if request.body is None:  # a version newer than ours: answer in v0 so that the client retries
            api_versions = [v for v in self._api_versions if v.api_key == ApiKey.API_VERSIONS]
            return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=api_versions)
        return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=self._api_versions, throttle_time_ms=0)

    async def _handle_controlled_shutdown(self, request: Request) -> Message:
        body = request.body
        broker_epoch = body.broker_epoch if request.version >= 2 else -1
        log.info(
            "%s ControlledShutdown v%d from broker %d (epoch %d) at %s",
            self._controller.prefix,
            request.version,
            body.broker_id,
            broker_epoch,
            request.peer,
        )
        try:
            remaining = await self._controller.controlled_shutdown(body.broker_id, broker_epoch)
        except KafkaError as e:
            log.info("%s ControlledShutdown of broker %d: %s", self._controller.prefix, body.broker_id, e)
            return ControlledShutdownResponse(error_code=e.code, remaining_partitions=[])
        return ControlledShutdownResponse(
            error_code=ErrorCode.NONE,
            remaining_partitions=[
                ControlledShutdownResponse.RemainingPartition(
                    topic_name=tp.topic, partition_index=tp.partition
                )
                for tp in remaining
            ],
        )

    async def _handle_alter_partition(self, request: Request) -> Message:
        body = request.body
        version = request.version
        changes: dict[tuple[str | uuid.UUID, int], IsrChange] = {}
        for topic in body.topics:
            key = topic.topic_id if version >= 2 else topic.topic_name
            for p in topic.partitions:
                if version >= 3:
                    isr = tuple(b.broker_id for b in p.new_isr_with_epochs)
                    epochs = {b.broker_id: b.broker_epoch for b in p.new_isr_with_epochs}
                else:
                    isr, epochs = tuple(p.new_isr), None
                changes[(key, p.partition_index)] = IsrChange(
                    p.leader_epoch, isr, p.partition_epoch, epochs, p.leader_recovery_state
                )
        try:
            results = await self._controller.alter_partition(body.broker_id, body.broker_epoch, changes)
        except KafkaError as e:
            log.info("%s AlterPartition from broker %d: %s", self._controller.prefix, body.broker_id, e)
            return AlterPartitionResponse(error_code=e.code, topics=[])
        by_topic: dict[str | uuid.UUID, list[AlterPartitionResponse.PartitionData]] = defaultdict(list)
        for (topic_key, partition), result in results.items():
            if isinstance(result, PartitionState):
                by_topic[topic_key].append(
                    AlterPartitionResponse.PartitionData(
                        partition_index=partition,
                        error_code=ErrorCode.NONE,
                        leader_id=result.leader,
                        leader_epoch=result.leader_epoch,
                        isr=list(result.isr),
                        partition_epoch=result.zk_version,
                    )
                )
            else:
                by_topic[topic_key].append(
                    AlterPartitionResponse.PartitionData(partition_index=partition, error_code=result)
                )
        return AlterPartitionResponse(
            error_code=ErrorCode.NONE,
            topics=[
                AlterPartitionResponse.TopicData(
                    topic_name=key if isinstance(key, str) else "",
                    topic_id=key if isinstance(key, uuid.UUID) else uuid.UUID(int=0),
                    partitions=partitions,
                )
                for key, partitions in by_topic.items()
            ],
        )

    async def _handle_elect_leaders(self, request: Request) -> Message:
        body = request.body
        partitions = (
            None
            if body.topic_partitions is None
            else {TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions}
        )
        try:
            election_type = ElectionType(body.election_type)
            results = await self._controller.elect_leaders(partitions, election_type)
        except ValueError:
            return _elect_leaders_response(ErrorCode.INVALID_REQUEST, partitions or set(), {})
        except KafkaError as e:
            return _elect_leaders_response(e.code, partitions or set(), {})
        if partitions is None:
            # Asked for every partition: only those elected or failed are reported (Kafka's broker).
            results = {
                tp: r
                for tp, r in results.items()
                if not (isinstance(r, tuple) and r[0] == ErrorCode.ELECTION_NOT_NEEDED)
            }
        return _elect_leaders_response(
            ErrorCode.NONE,
            set(results),
            {tp: (ErrorCode.NONE, None) if isinstance(r, int) else r for tp, r in results.items()},
        )

    async def _handle_alter_partition_reassignments(self, request: Request) -> Message:
        body = request.body
        reassignments: dict[TopicPartition, list[int] | None] = {
            TopicPartition(t.name, p.partition_index): None if p.replicas is None else list(p.replicas)
            for t in body.topics
            for p in t.partitions
        }
        try:
            results = await self._controller.alter_partition_reassignments(reassignments)
        except KafkaError as e:
            return AlterPartitionReassignmentsResponse(
                throttle_time_ms=0, error_code=e.code, error_message=e.message, responses=[]
            )
        by_topic: dict[str, list[AlterPartitionReassignmentsResponse.ReassignablePartitionResponse]] = (
            defaultdict(list)
        )
        for tp, (code, message) in sorted(results.items()):
            by_topic[tp.topic].append(
                AlterPartitionReassignmentsResponse.ReassignablePartitionResponse(
                    partition_index=tp.partition, error_code=code, error_message=message
                )
            )
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            error_message=None,
            responses=[
                AlterPartitionReassignmentsResponse.ReassignableTopicResponse(
                    name=topic, partitions=partitions
                )
                for topic, partitions in by_topic.items()
            ],
        )

    async def _handle_list_partition_reassignments(self, request: Request) -> Message:
        body = request.body
        partitions = (
            None
            if body.topics is None
            else {TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes}
        )
        try:
            found = await self._controller.list_partition_reassignments(partitions)
        except KafkaError as e:
            return ListPartitionReassignmentsResponse(
                throttle_time_ms=0, error_code=e.code, error_message=e.message, topics=[]
            )
        by_topic: dict[str, list[ListPartitionReassignmentsResponse.OngoingPartitionReassignment]] = (
            defaultdict(list)
        )
        for tp, assignment in sorted(found.items()):
            by_topic[tp.topic].append(
                ListPartitionReassignmentsResponse.OngoingPartitionReassignment(
                    partition_index=tp.partition,
                    replicas=list(assignment.replicas),
                    adding_replicas=list(assignment.adding),
                    removing_replicas=list(assignment.removing),
                )
            )
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            error_message=None,
            topics=[
                ListPartitionReassignmentsResponse.OngoingTopicReassignment(name=topic, partitions=partitions)
                for topic, partitions in by_topic.items()
            ],
        )


def _elect_leaders_response(
    error: ErrorCode,
    partitions: set[TopicPartition],
    results: dict[TopicPartition, tuple[ErrorCode, str | None]],
) -> Message:
    """ElectLeaders' answer; a partition without a result gets the top-level error."""
    by_topic: dict[str, list[ElectLeadersResponse.PartitionResult]] = defaultdict(list)
    for tp in sorted(partitions):
        code, message = results.get(tp, (error, description(error)))
        by_topic[tp.topic].append(
            ElectLeadersResponse.PartitionResult(
                partition_id=tp.partition, error_code=code, error_message=message
            )
        )
    return ElectLeadersResponse(
        throttle_time_ms=0,
        error_code=error,
        replica_election_results=[
            ElectLeadersResponse.ReplicaElectionResult(topic=topic, partition_result=results_)
            for topic, results_ in by_topic.items()
        ],
    )


def _cluster_authorization_failed(request: Request) -> Message:
    """The answer to a request from a principal that is not a broker's (Kafka's, per API)."""
    key, code = request.api.key, ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    log.warning(
        "%s from %s (%s) refused: CLUSTER_AUTHORIZATION_FAILED (only brokers may call the controller)",
        request.api.name,
        request.principal,
        request.peer,
    )
    body = request.body
    if key == ApiKey.CONTROLLED_SHUTDOWN:
        return ControlledShutdownResponse(error_code=code, remaining_partitions=[])
    if key == ApiKey.ALTER_PARTITION:
        return AlterPartitionResponse(error_code=code, topics=[])
    if key == ApiKey.ELECT_LEADERS:
        partitions = (
            set()
            if body is None or body.topic_partitions is None
            else {TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions}
        )
        return _elect_leaders_response(code, partitions, {})
    if key == ApiKey.ALTER_PARTITION_REASSIGNMENTS:
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=code, error_message=description(code), responses=[]
        )
    if key == ApiKey.LIST_PARTITION_REASSIGNMENTS:
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=code, error_message=description(code), topics=[]
        )
    raise AssertionError(f"no CLUSTER_AUTHORIZATION_FAILED answer for {request.api.name}")
