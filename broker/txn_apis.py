"""TxnApis: the broker's handlers for the transaction coordinator's APIs, merged into KafkaApis.

InitProducerId (with a transactional id: the coordinator; without one: a fresh id with epoch 0 from
``broker.producer_id_manager``, as Kafka hands idempotent producers), AddPartitionsToTxn (v0-3, a
client's one transaction; v4+, a leader's batch of transactions, each either added to or, with
``verify_only``, checked against the coordinator's state, KIP-890), AddOffsetsToTxn (the group's
``__consumer_offsets`` partition joins the transaction), EndTxn, DescribeTransactions and
ListTransactions. Each converts its request for ``coordinator.transaction_coordinator`` and the
coordinator's outcome back into the response of the request's version. The coordinator's errors are
version-independent; like Kafka's KafkaApis, this module answers PRODUCER_FENCED as
INVALID_PRODUCER_EPOCH to clients too old to know it. Answers that wait for the transaction log are
parked on the coordinator's future (``network.handler_pool.park``), holding no request handler.

``on_role_change`` is the ReplicaManager role listener through which the coordinator follows the
leadership of the ``__transaction_state`` partitions (the leader epoch is the coordinator epoch).

Authorization (Kafka 3.9's KafkaApis, checked before anything else): InitProducerId with a
transactional id needs WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), without one (an idempotent
producer) IDEMPOTENT_WRITE on the cluster or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED);
AddPartitionsToTxn v0-3 WRITE on the transactional id (every partition then
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each topic (TOPIC_AUTHORIZATION_FAILED, the others
OPERATION_NOT_ATTEMPTED; an internal topic is never writable here, authorizer or not, as in Kafka),
v4+ (from brokers) CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED); AddOffsetsToTxn WRITE
on the transactional id, then READ on the group (GROUP_AUTHORIZATION_FAILED); EndTxn WRITE on the
transactional id; DescribeTransactions DESCRIBE on each transactional id, its partitions listed only
for topics the principal may DESCRIBE; ListTransactions lists only the transactional ids it may
DESCRIBE.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from broker.authorization import ALLOW_ALL, Authorization
from broker.refusals import log_refusal
from coordinator.group_metadata_manager import partition_for as group_partition_for
from coordinator.transaction_coordinator import (
    InitProducerIdResult,
    ProducerIdGenerator,
    TransactionCoordinator,
    TransactionDescription,
    TransactionListing,
)
from network.handler_pool import Parked, park
from network.request_channel import Request
from protocol.api import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    Message,
)
from protocol.topic import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC, is_internal
from server_common.acls import CLUSTER_NAME, AclOperation, ResourceType
from server_common.futures import all_of, completed, then

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Message | Parked | None]]
TopicPartition = tuple[str, int]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# The first version of each API whose clients know PRODUCER_FENCED (KIP-588); older ones get
# INVALID_PRODUCER_EPOCH, which they handle the same way.
PRODUCER_FENCED_SINCE: dict[int, int] = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
}
# From v4 AddPartitionsToTxn comes from partition leaders, batched by transaction (KIP-890).
FIRST_BROKER_VERSION = 4


class TransactionCoordinatorApi(Protocol):
    """What these handlers use of ``coordinator.transaction_coordinator.TransactionCoordinator``."""

    def on_election(self, partition: int, coordinator_epoch: int) -> None: ...
    def on_resignation(self, partition: int, coordinator_epoch: int | None) -> None: ...
    def handle_init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        expected_producer_id: int = -1,
        expected_epoch: int = -1,
    ) -> asyncio.Future[InitProducerIdResult]: ...
    def handle_add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> asyncio.Future[dict[TopicPartition, int]]: ...
    def handle_verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]: ...
    def handle_end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> asyncio.Future[int]: ...
    def handle_describe(self, transactional_id: str) -> TransactionDescription: ...
    def handle_list(
        self, states: list[str], producer_ids: list[int], duration_ms: int = -1
    ) -> tuple[int, list[TransactionListing]]: ...


def client_error(api_key: int, version: int, error: int) -> int:
    """``error`` as a client of this API version understands it."""
    if error == ErrorCode.PRODUCER_FENCED and version < PRODUCER_FENCED_SINCE[api_key]:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _topic_results(
    topics: Sequence[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic], errors: dict[TopicPartition, int]
) -> list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]:
    """Per topic and partition of the request (each once), its error in ``errors``."""
    results: dict[str, dict[int, int]] = {}
    for topic in topics:
        by_partition = results.setdefault(topic.name, {})
        for p in topic.partitions:
            by_partition[p] = errors.get((topic.name, p), ErrorCode.NONE)
    return [
        AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(
            name=name,
            results_by_partition=[
                AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(
                    partition_index=p, partition_error_code=error
                )
                for p, error in by_partition.items()
            ],
        )
        for name, by_partition in results.items()
    ]


class TxnApis:
    def __init__(
        self,
        coordinator: TransactionCoordinatorApi,
        producer_ids: ProducerIdGenerator,
        partition_exists: Callable[[str, int], bool],
        offsets_topic_partitions: int,
        *,
        authorization: Authorization = ALLOW_ALL,
    ) -> None:
        """``partition_exists``: whether the metadata knows a partition; ``offsets_topic_partitions``:
        ``offsets.topic.num.partitions``, which places a group in ``__consumer_offsets``."""
        self.authorization = authorization
        self.coordinator = coordinator
        self.producer_ids = producer_ids
        self._partition_exists = partition_exists
        self._offsets_topic_partitions = offsets_topic_partitions

    def handlers(self) -> dict[int, Handler]:
        """api key -> handler, merged into KafkaApis."""
        return {
            ApiKey.INIT_PRODUCER_ID: self.handle_init_producer_id,
            ApiKey.ADD_PARTITIONS_TO_TXN: self.handle_add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: self.handle_add_offsets_to_txn,
            ApiKey.END_TXN: self.handle_end_txn,
            ApiKey.DESCRIBE_TRANSACTIONS: self.handle_describe_transactions,
            ApiKey.LIST_TRANSACTIONS: self.handle_list_transactions,
        }

    def _may_write(self, request: Request, transactional_id: str | None) -> bool:
        """WRITE on the transactional id (refusal logged with the peer)."""
        if self.authorization.authorize(
            request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id or ""
        ):
            return True
        log_refusal(
            request,
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            f"{request.principal} may not WRITE transactional id {transactional_id!r}",
        )
        return False

    def on_role_change(self, topic: str, partition: int, leader: bool, leader_epoch: int) -> None:
        """The ReplicaManager's role listener: the coordinator loads a ``__transaction_state`` partition
        when this broker becomes its leader and unloads it when it stops being one (Kafka's
        onLeadershipChange and StopReplica handling); the leader epoch is the coordinator epoch."""
        if topic != TRANSACTION_STATE_TOPIC:
            return
        if leader:
            self.coordinator.on_election(partition, leader_epoch)
        else:
            self.coordinator.on_resignation(partition, leader_epoch if leader_epoch >= 0 else None)

    # -- InitProducerId ---------------------------------------------------------------------------

    async def handle_init_producer_id(self, request: Request) -> Message | Parked | None:
        body: InitProducerIdRequest = request.body
        version = request.version

        def response(
            error: int, producer_id: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH
        ) -> Message:
            if error:
                producer_id, epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            return InitProducerIdResponse(
                throttle_time_ms=0,
                error_code=client_error(ApiKey.INIT_PRODUCER_ID, version, error),
                producer_id=producer_id,
                producer_epoch=epoch,
            )

        transactional_id = body.transactional_id
        if self.authorization.enabled:
            refusal = self._init_producer_id_refusal(request, transactional_id)
            if refusal is not None:
                return response(refusal)
        # Before v3 the fields are absent and decode as -1.
        if (body.producer_id == NO_PRODUCER_ID) != (body.producer_epoch == NO_PRODUCER_EPOCH):
            return response(ErrorCode.INVALID_REQUEST)
        if transactional_id is None:
            # Kafka hands an idempotent producer a fresh id with epoch 0 whatever id it had: such a
            # producer bumps its epoch itself (KIP-360) and asks again only to start over.
            try:
                new_id = await self.producer_ids.generate_producer_id()
            except KafkaError as e:
                return response(e.code)
            return response(ErrorCode.NONE, new_id, 0)
        if not transactional_id:
            return response(ErrorCode.INVALID_REQUEST)  # the coordinator's rule, as the client's
        initialized = self.coordinator.handle_init_producer_id(
            transactional_id, body.transaction_timeout_ms, body.producer_id, body.producer_epoch
        )

        def respond(result: InitProducerIdResult) -> Message:
            return response(result.error, result.producer_id, result.producer_epoch)

        return park(initialized, respond)

    def _init_producer_id_refusal(self, request: Request, transactional_id: str | None) -> int | None:
        """Kafka's checks: WRITE on the transactional id; an idempotent producer IDEMPOTENT_WRITE on the
        cluster (its denial not logged) or WRITE on some topic (authorizeByResourceType)."""
        if transactional_id is not None:
            return (
                None
                if self._may_write(request, transactional_id)
                else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            )
        authorization = self.authorization
        if authorization.authorize(
            request, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False
        ) or authorization.authorize_by_resource_type(request, AclOperation.WRITE, ResourceType.TOPIC):
            return None
        log_refusal(
            request,
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"{request.principal} has neither IDEMPOTENT_WRITE on the cluster nor WRITE on any topic",
        )
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    # -- AddPartitionsToTxn -----------------------------------------------------------------------

    def _add_partitions(
        self,
        version: int,
        transaction: AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction,
        request: Request | None = None,
    ) -> asyncio.Future[dict[TopicPartition, int]]:
        """Adds (or, ``verify_only``, checks) one transaction's partitions: each partition's error.
        Kafka's rule: if any partition is refused, none is added; a client's (v0-3, ``request`` given)
        partitions of a topic it may not WRITE to (an internal topic is never writable here) get
        TOPIC_AUTHORIZATION_FAILED, unknown ones UNKNOWN_TOPIC_OR_PARTITION and the rest
        OPERATION_NOT_ATTEMPTED."""
        partitions = list(dict.fromkeys((t.name, p) for t in transaction.topics for p in t.partitions))
        refused: dict[TopicPartition, int] = {}
        if request is not None:
            names = list(dict.fromkeys(t for t, _ in partitions if not is_internal(t)))
            writable = self.authorization.filter_authorized(
                request, AclOperation.WRITE, ResourceType.TOPIC, names
            )
            refused = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in partitions if tp[0] not in writable}
        for tp in partitions:
            if tp not in refused and not self._partition_exists(*tp):
                refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if refused:
            return completed({tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in partitions})
        txn_id, producer_id, epoch = (
            transaction.transactional_id,
            transaction.producer_id,
            transaction.producer_epoch,
        )
        if version >= FIRST_BROKER_VERSION and transaction.verify_only:
            return completed(
                self.coordinator.handle_verify_partitions(txn_id, producer_id, epoch, partitions)
            )

        def for_client(errors: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
            return {
                tp: client_error(ApiKey.ADD_PARTITIONS_TO_TXN, version, error) for tp, error in errors.items()
            }

        return then(
            self.coordinator.handle_add_partitions(txn_id, producer_id, epoch, partitions), for_client
        )

    async def handle_add_partitions_to_txn(self, request: Request) -> Message | Parked | None:
        body: AddPartitionsToTxnRequest = request.body
        version = request.version
        if version < FIRST_BROKER_VERSION:
            # A client's single transaction, in the same form as one of a batch.
            transaction = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                transactional_id=body.v3_and_below_transactional_id,
                producer_id=body.v3_and_below_producer_id,
                producer_epoch=body.v3_and_below_producer_epoch,
                verify_only=False,
                topics=body.v3_and_below_topics,
            )

            def one(errors: dict[TopicPartition, int]) -> Message:
                return AddPartitionsToTxnResponse(
                    throttle_time_ms=0,
                    results_by_topic_v3_and_below=_topic_results(transaction.topics, errors),
                )

            if self.authorization.enabled and not self._may_write(request, transaction.transactional_id):
                # Kafka's errorResponseForTransaction: every partition gets the error.
                return one(
                    {
                        (t.name, p): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                        for t in transaction.topics
                        for p in t.partitions
                    }
                )
            return park(self._add_partitions(version, transaction, request), one)
        if self.authorization.enabled and not self.authorization.authorize(
            request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            # Only brokers send v4+ (Kafka's authorizeClusterOperation; getErrorResponse: the top-level
            # error alone).
            log_refusal(
                request,
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                f"{request.principal} may not CLUSTER_ACTION on the cluster",
            )
            return AddPartitionsToTxnResponse(
                throttle_time_ms=0,
                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                results_by_transaction=[],
            )
        # One result per transactional id (Kafka's request keys its transactions by id).
        transactions = list({t.transactional_id: t for t in body.transactions}.values())

        def batch(results: list[dict[TopicPartition, int]]) -> Message:
            return AddPartitionsToTxnResponse(
                throttle_time_ms=0,
                error_code=ErrorCode.NONE,
                results_by_transaction=[
                    AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                        transactional_id=t.transactional_id, topic_results=_topic_results(t.topics, errors)
                    )
                    for t, errors in zip(transactions, results, strict=True)
                ],
            )

        return park(all_of([self._add_partitions(version, t) for t in transactions]), batch)

    # -- AddOffsetsToTxn --------------------------------------------------------------------------

    async def handle_add_offsets_to_txn(self, request: Request) -> Message | Parked | None:
        body: AddOffsetsToTxnRequest = request.body
        version = request.version
        if self.authorization.enabled:
            refusal = None
            if not self._may_write(request, body.transactional_id):
                refusal = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            elif not self.authorization.authorize(
                request, AclOperation.READ, ResourceType.GROUP, body.group_id
            ):
                refusal = ErrorCode.GROUP_AUTHORIZATION_FAILED
                log_refusal(request, refusal, f"{request.principal} may not READ group {body.group_id!r}")
            if refusal is not None:
                return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=refusal)
        offsets_partition = (
            GROUP_METADATA_TOPIC,
            group_partition_for(body.group_id, self._offsets_topic_partitions),
        )
        added = self.coordinator.handle_add_partitions(
            body.transactional_id, body.producer_id, body.producer_epoch, [offsets_partition]
        )

        def response(errors: dict[TopicPartition, int]) -> Message:
            error = errors.get(offsets_partition, next(iter(errors.values()), ErrorCode.NONE))
            return AddOffsetsToTxnResponse(
                throttle_time_ms=0, error_code=client_error(ApiKey.ADD_OFFSETS_TO_TXN, version, error)
            )

        return park(added, response)

    # -- EndTxn -----------------------------------------------------------------------------------

    async def handle_end_txn(self, request: Request) -> Message | Parked | None:
        body: EndTxnRequest = request.body
        version = request.version
        if self.authorization.enabled and not self._may_write(request, body.transactional_id):
            return EndTxnResponse(
                throttle_time_ms=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            )
        ended = self.coordinator.handle_end_txn(
            body.transactional_id, body.producer_id, body.producer_epoch, body.committed
        )

        def response(error: int) -> Message:
            return EndTxnResponse(throttle_time_ms=0, error_code=client_error(ApiKey.END_TXN, version, error))

        return park(ended, response)

    # -- DescribeTransactions, ListTransactions ---------------------------------------------------

    def _described(self, transactional_id: str) -> DescribeTransactionsResponse.TransactionState:
        found = self.coordinator.handle_describe(transactional_id)
        if found.error:
            # Kafka sets only the id and the error then.
            return DescribeTransactionsResponse.TransactionState(
                error_code=found.error,
                transactional_id=transactional_id,
                transaction_state="",
                transaction_timeout_ms=0,
                transaction_start_time_ms=0,
                producer_id=0,
                producer_epoch=0,
                topics=[],
            )
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(found.partitions):
            by_topic.setdefault(topic, []).append(partition)
        return DescribeTransactionsResponse.TransactionState(
            error_code=ErrorCode.NONE,
            transactional_id=transactional_id,
            transaction_state=found.state,
            transaction_timeout_ms=found.transaction_timeout_ms,
            transaction_start_time_ms=found.transaction_start_time_ms,
            producer_id=found.producer_id,
            producer_epoch=found.producer_epoch,
            topics=[
                DescribeTransactionsResponse.TopicData(topic=topic, partitions=partitions)
                for topic, partitions in by_topic.items()
            ],
        )

    async def handle_describe_transactions(self, request: Request) -> Message:
        """Kafka's handleDescribeTransactionsRequest: with an authorizer, a transactional id the principal
        may not DESCRIBE is TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and a described transaction lists
        only the partitions of topics it may DESCRIBE."""
        body: DescribeTransactionsRequest = request.body
        authorization = self.authorization
        if not authorization.enabled:
            return DescribeTransactionsResponse(
                throttle_time_ms=0, transaction_states=[self._described(t) for t in body.transactional_ids]
            )
        states = []
        for transactional_id in body.transactional_ids:
            if authorization.authorize(
                request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id
            ):
                state = self._described(transactional_id)
                state.topics = [
                    t
                    for t in state.topics
                    if authorization.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic)
                ]
            else:
                state = DescribeTransactionsResponse.TransactionState(
                    error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    transactional_id=transactional_id,
                )
            states.append(state)
        return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)

    async def handle_list_transactions(self, request: Request) -> Message:
        body: ListTransactionsRequest = request.body
        duration = body.duration_filter if request.version >= 1 else -1
        states = list(dict.fromkeys(body.state_filters))
        # An unknown state matches nothing (it does not widen the filter); the response names it.
        unknown = TransactionCoordinator.unknown_state_filters(states)
        error, listed = self.coordinator.handle_list(states, list(body.producer_id_filters), duration)
        if self.authorization.enabled:
            # Kafka: only the transactional ids the principal may DESCRIBE (each denial logged).
            listed = [
                t
                for t in listed
                if self.authorization.authorize(
                    request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id
                )
            ]
        return ListTransactionsResponse(
            throttle_time_ms=0,
            error_code=error,
            unknown_state_filters=unknown,
            transaction_states=[
                ListTransactionsResponse.TransactionState(
                    transactional_id=t.transactional_id, producer_id=t.producer_id, transaction_state=t.state
                )
                for t in listed
            ]
            if error == ErrorCode.NONE
            else [],
        )
