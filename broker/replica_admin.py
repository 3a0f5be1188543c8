"""ReplicaAdmin: the admin requests that move leaders and replicas — ElectLeaders (v0-2),
AlterPartitionReassignments (v0) and ListPartitionReassignments (v0).

As in Kafka's ZooKeeper mode, the controller carries them out. Samsa's controller is a process of its
own that clients cannot reach (Metadata names the answering broker as the controller), so the broker
sends the request on, in the same protocol, to the listener the active controller publishes in
``/controller`` (``ControllerChannel``, as for ControlledShutdown and AlterPartition), trying again while
there is no controller, the connection fails or the controller reached answers NOT_CONTROLLER (it was
just deposed), until the request's own timeout. Then it answers its client:

- ElectLeaders: a request for every partition (null topics) is expanded from this broker's metadata
  cache before it goes, and its answer leaves out ELECTION_NOT_NEEDED (Kafka's broker does both). A
  partition the controller elected is answered once this broker's metadata shows the new leader — the
  preferred replica, or for an unclean election a live one — or REQUEST_TIMED_OUT at the request's
  timeout: the answer is parked on a DelayedElectLeader in the ReplicaManager's purgatory, which every
  UpdateMetadata checks. Without a reachable controller every partition gets NOT_CONTROLLER.
- AlterPartitionReassignments and ListPartitionReassignments: the controller's answer as it is, or
  its top-level NOT_CONTROLLER / REQUEST_TIMED_OUT when none answered.

Authorization, as Kafka 3.9's KafkaApis: ElectLeaders and AlterPartitionReassignments need ALTER on the
cluster, ListPartitionReassignments DESCRIBE; without it nothing is forwarded and every partition asked
for (and the request, where the response has a top-level error) is CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from typing import Any

from broker.authorization import ALLOW_ALL, Authorization
from broker.controller_channel import ControllerChannel
from broker.metadata_cache import MetadataCache
from broker.refusals import log_refusal
from broker.replica_manager import METADATA_UPDATE, ElectionResults, ReplicaManager
from network.handler_pool import Parked, park
from network.request_channel import Request
from protocol.api import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    Message,
)
from server_common.acls import CLUSTER_NAME, AclOperation, ResourceType
from server_common.purgatory import DelayedOperation

ELECT_LEADERS_VERSION = 2  # what brokers send the controller (it serves 0-2)
REASSIGNMENTS_VERSION = 0
PREFERRED, UNCLEAN = 0, 1
RETRY_BACKOFF = 0.1  # seconds between attempts to reach the controller

PartitionError = tuple[int, str | None]


class DelayedElectLeader(DelayedOperation[ElectionResults]):
    """Elected partitions whose new leader this broker's metadata does not show yet; REQUEST_TIMED_OUT
    for those still missing at the deadline."""

    def __init__(
        self,
        timeout_ms: int,
        metadata_cache: MetadataCache,
        election_type: int,
        results: ElectionResults,
    ) -> None:
        super().__init__(timeout_ms)
        self.metadata_cache = metadata_cache
        self.election_type = election_type
        self.results = results
        self.pending = {tp for tp, (code, _) in results.items() if code == ErrorCode.NONE}

    def try_complete(self) -> bool:
        self.pending = {tp for tp in self.pending if not self._shows_new_leader(tp)}
        return not self.pending and self.complete()

    def on_complete(self) -> ElectionResults:
        self.results.update(dict.fromkeys(self.pending, (ErrorCode.REQUEST_TIMED_OUT, None)))
        return self.results

    def _shows_new_leader(self, tp: tuple[str, int]) -> bool:
        found = self.metadata_cache.partition(*tp)
        if found is None or found.leader < 0 or not self.metadata_cache.is_alive(found.leader):
            return False
        return self.election_type != PREFERRED or (bool(found.replicas) and found.leader == found.replicas[0])


class ReplicaAdmin:
    # A class default too: tests build the handlers without the constructor.
    authorization: Authorization = ALLOW_ALL

    def __init__(
        self,
        metadata_cache: MetadataCache,
        channel: ControllerChannel,
        replica_manager: ReplicaManager,
        *,
        authorization: Authorization = ALLOW_ALL,
    ) -> None:
        self.metadata_cache = metadata_cache
        self.authorization = authorization
        self.channel = channel
        self.replica_manager = replica_manager

    async def close(self) -> None:
        await self.channel.close()

    async def _send_to_controller(self, key: ApiKey, version: int, body: Message, timeout_ms: int) -> Any:
        """The active controller's answer. Raises KafkaError: NOT_CONTROLLER when no controller could be
        reached in time, REQUEST_TIMED_OUT when the one reached did not answer in time."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while True:
            try:
                response = await self.channel.send(key, version, body)
            except TimeoutError:
                failure = KafkaError(ErrorCode.REQUEST_TIMED_OUT, "The controller did not answer in time.")
            except OSError:  # ConnectionError, NoActiveControllerError
                failure = KafkaError(ErrorCode.NOT_CONTROLLER, "No active controller could be reached.")
            else:
                if response.error_code != ErrorCode.NOT_CONTROLLER:
                    return response
                failure = KafkaError(ErrorCode.NOT_CONTROLLER, "No active controller could be reached.")
            if time.monotonic() + RETRY_BACKOFF > deadline:
                raise failure
            await asyncio.sleep(RETRY_BACKOFF)

    # -- ElectLeaders -----------------------------------------------------------------------------

    async def handle_elect_leaders(self, request: Request) -> Message | Parked | None:
        body: ElectLeadersRequest = request.body
        election_type = body.election_type if request.version >= 1 else PREFERRED
        requested = body.topic_partitions
        every_partition = requested is None
        if not self._may(request, AclOperation.ALTER):
            # Kafka: CLUSTER_AUTHORIZATION_FAILED at the top (v1+) and, without a message, for each
            # partition named (none when all were asked for).
            denied: ElectionResults = {
                (t.topic, p): (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
                for t in requested or []
                for p in t.partitions
            }
            response = _elect_leaders_response(every_partition, denied)
            response.error_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return response
        if requested is None:
            partitions = [
                (topic, p)
                for topic in self.metadata_cache.topic_names()
                for p in self.metadata_cache.partitions(topic)
            ]
        else:
            partitions = list(dict.fromkeys((t.topic, p) for t in requested for p in t.partitions))
        deadline = time.monotonic() + max(body.timeout_ms, 0) / 1000
        results = await self._elect(partitions, election_type, body.timeout_ms) if partitions else {}
        remaining_ms = max(int((deadline - time.monotonic()) * 1000), 0)
        waiting = DelayedElectLeader(remaining_ms, self.metadata_cache, election_type, results)
        shown = self.replica_manager.elect_leader_purgatory.try_complete_else_watch(
            waiting, [METADATA_UPDATE]
        )
        return park(shown, partial(_elect_leaders_response, every_partition))

    async def _elect(
        self, partitions: list[tuple[str, int]], election_type: int, timeout_ms: int
    ) -> dict[tuple[str, int], PartitionError]:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in partitions:
            by_topic[topic].append(partition)
        forwarded = ElectLeadersRequest(
            election_type=election_type,
            topic_partitions=[
                ElectLeadersRequest.TopicPartitions(topic=topic, partitions=found)
                for topic, found in by_topic.items()
            ],
            timeout_ms=timeout_ms,
        )
        try:
            response = await self._send_to_controller(
                ApiKey.ELECT_LEADERS, ELECT_LEADERS_VERSION, forwarded, timeout_ms
            )
        except KafkaError as e:
            return dict.fromkeys(partitions, (e.code, e.message))
        if response.error_code != ErrorCode.NONE:
            return dict.fromkeys(partitions, (response.error_code, None))
        return {
            (topic.topic, p.partition_id): (p.error_code, p.error_message)
            for topic in response.replica_election_results
            for p in topic.partition_result
        }

    # -- authorization ----------------------------------------------------------------------------

    def _may(self, request: Request, operation: AclOperation) -> bool:
        return self.authorization.authorize(request, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    # -- reassignments ------------------------------------------------------------------------------

    async def handle_alter_partition_reassignments(self, request: Request) -> Message:
        body: AlterPartitionReassignmentsRequest = request.body
        if not self._may(request, AclOperation.ALTER):
            # Kafka's authorizeClusterOperation throws (logged as the request's failure, here a refusal);
            # the request's error response carries the error at the top and for every partition.
            message = _not_authorized(request)
            log_refusal(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is needed")
            return AlterPartitionReassignmentsResponse(
                throttle_time_ms=0,
                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                error_message=message,
                responses=[
                    AlterPartitionReassignmentsResponse.ReassignableTopicResponse(
                        name=topic.name,
                        partitions=[
                            AlterPartitionReassignmentsResponse.ReassignablePartitionResponse(
                                partition_index=p.partition_index,
                                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                error_message=message,
                            )
                            for p in topic.partitions
                        ],
                    )
                    for topic in body.topics
                ],
            )
        return await self._forward(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            request,
            lambda e: AlterPartitionReassignmentsResponse(
                throttle_time_ms=0, error_code=e.code, error_message=e.message, responses=[]
            ),
        )

    async def handle_list_partition_reassignments(self, request: Request) -> Message:
        body: ListPartitionReassignmentsRequest = request.body
        if not self._may(request, AclOperation.DESCRIBE):
            log_refusal(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "DESCRIBE on the cluster is needed")
            return ListPartitionReassignmentsResponse(
                throttle_time_ms=0,
                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                error_message=_not_authorized(request),
                topics=[
                    ListPartitionReassignmentsResponse.OngoingTopicReassignment(
                        name=topic.name,
                        partitions=[
                            ListPartitionReassignmentsResponse.OngoingPartitionReassignment(partition_index=p)
                            for p in topic.partition_indexes
                        ],
                    )
                    for topic in body.topics or []
                ],
            )
        return await self._forward(
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            request,
            lambda e: ListPartitionReassignmentsResponse(
                throttle_time_ms=0, error_code=e.code, error_message=e.message, topics=[]
            ),
        )

    async def _forward(
        self, key: ApiKey, request: Request, failed: Callable[[KafkaError], Message]
    ) -> Message:
        """The controller's answer to the request as it came (same API, same version)."""
        try:
            return await self._send_to_controller(
                key, REASSIGNMENTS_VERSION, request.body, request.body.timeout_ms
            )
        except KafkaError as e:
            return failed(e)


def _not_authorized(request: Request) -> str:
    """The message of Kafka's ClusterAuthorizationException from authorizeClusterOperation ("Request
    <request> is not authorized."), naming the request as Samsa's logs do."""
    return f"Request {request.api.name} v{request.version} from {request.peer} is not authorized."


def _elect_leaders_response(every_partition: bool, results: ElectionResults) -> ElectLeadersResponse:
    if every_partition:
        results = {tp: r for tp, r in results.items() if r[0] != ErrorCode.ELECTION_NOT_NEEDED}
    by_topic: dict[str, list[ElectLeadersResponse.PartitionResult]] = defaultdict(list)
    for (topic, partition), (code, message) in sorted(results.items()):
        by_topic[topic].append(
            ElectLeadersResponse.PartitionResult(
                partition_id=partition, error_code=code, error_message=message
            )
        )
    return ElectLeadersResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        replica_election_results=[
            ElectLeadersResponse.ReplicaElectionResult(topic=topic, partition_result=found)
            for topic, found in by_topic.items()
        ],
    )
