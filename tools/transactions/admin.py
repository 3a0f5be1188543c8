"""The requests of ``samsa transactions``, over tools/admin_client.py: what Kafka's Admin client does for
kafka-transactions.sh (listTransactions, describeTransactions, describeProducers, abortTransaction),
with its routing and retries:

- ListTransactions goes to every broker (each answers for the transactional ids it coordinates);
- DescribeTransactions goes to each id's coordinator, found with FindCoordinator key type TRANSACTION;
  NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE find it again, COORDINATOR_LOAD_IN_PROGRESS asks again;
- DescribeProducers goes to each partition's leader (a leader that moved is looked up again), or to the
  one broker asked for, where NOT_LEADER_OR_FOLLOWER is final;
- WriteTxnMarkers with one ABORT marker goes to the partition's leader.

Retries end at the client's deadline. What Kafka's Admin raises as an exception for one key is returned
here as ``RequestError`` with the same message.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from protocol.api import ApiKey
from protocol.errors import ErrorCode, description, retriable
from protocol.messages import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    FindCoordinatorRequest,
    ListTransactionsRequest,
    WriteTxnMarkersRequest,
)
from tools.admin_client import AdminClient, AdminError

TopicPartition = tuple[str, int]

TRANSACTION_KEY_TYPE = 1  # FindCoordinator's CoordinatorType.TRANSACTION
RETRY_BACKOFF = 0.1
# Kafka's TransactionState names; anything else a broker says is "Unknown" (TransactionState.parse).
STATES = frozenset(
    {
        "Ongoing",
        "PrepareAbort",
        "PrepareCommit",
        "CompleteAbort",
        "CompleteCommit",
        "Empty",
        "PrepareEpochFence",
    }
)
# The errors after which the Admin client looks a partition's leader up again and retries.
LEADER_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.BROKER_NOT_AVAILABLE,
    }
)


def tp_string(tp: TopicPartition) -> str:
    """A partition as Kafka prints a TopicPartition: ``topic-0``."""
    return f"{tp[0]}-{tp[1]}"


def state_name(state: str) -> str:
    return state if state in STATES else "Unknown"


class RequestError(Exception):
    """One key's failure (a partition, a transactional id, a broker), with Kafka's message."""

    def __init__(self, message: str, code: int = ErrorCode.UNKNOWN_SERVER_ERROR) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionDescription:
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None  # None: no transaction under way
    topic_partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None  # None: no marker written for this producer yet
    current_transaction_start_offset: int | None  # None: no open transaction


@dataclass(frozen=True)
class AbortSpec:
    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def __str__(self) -> str:
        return (
            f"AbortTransactionSpec(topicPartition={tp_string(self.topic_partition)}, "
            f"producerId={self.producer_id}, producerEpoch={self.producer_epoch}, "
            f"coordinatorEpoch={self.coordinator_epoch})"
        )


class TransactionsAdmin:
    """The Admin calls of kafka-transactions.sh over a started ``AdminClient``."""

    def __init__(self, admin: AdminClient) -> None:
        self.admin = admin

    def _deadline(self) -> float:
        return time.monotonic() + self.admin.timeout

    # -- the cluster ----------------------------------------------------------------------------------

    @property
    def brokers(self) -> dict[int, tuple[str, int]]:
        return self.admin.brokers

    async def list_topics(self) -> list[str]:
        """Every topic, the internal ones too."""
        metadata = await self.admin.metadata(None)
        return sorted(t.name for t in metadata.topics if t.error_code == ErrorCode.NONE)

    async def describe_topics(self, topics: Collection[str]) -> dict[str, list[tuple[int, int, list[int]]]]:
        """(partition, leader, replicas) of each topic's partitions; RequestError for a topic that fails."""
        if not topics:
            return {}
        metadata = await self.admin.metadata(sorted(set(topics)))
        found = {}
        for t in metadata.topics:
            if t.error_code != ErrorCode.NONE:
                raise RequestError(description(t.error_code), t.error_code)
            found[t.name] = sorted(
                (p.partition_index, p.leader_id, list(p.replica_nodes)) for p in t.partitions
            )
        return found

    async def _leaders(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int | RequestError]:
        """Each partition's leader from fresh metadata: its id, or RequestError (a topic or partition that
        does not exist, or no leader now: LEADER_NOT_AVAILABLE, which is retriable)."""
        wanted = sorted(set(partitions))
        metadata = await self.admin.metadata(sorted({t for t, _ in wanted}))
        topics = {t.name: t for t in metadata.topics}
        leaders: dict[TopicPartition, int | RequestError] = {}
        for tp in wanted:
            topic = topics.get(tp[0])
            if topic is None or topic.error_code != ErrorCode.NONE:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic is None else topic.error_code
                leaders[tp] = RequestError(description(code), code)
                continue
            leader = next((p.leader_id for p in topic.partitions if p.partition_index == tp[1]), None)
            if leader is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                leaders[tp] = RequestError(description(code), code)
            elif leader < 0 or leader not in self.admin.brokers:
                code = ErrorCode.LEADER_NOT_AVAILABLE
                leaders[tp] = RequestError(description(code), code)
            else:
                leaders[tp] = leader
        return leaders

    # -- ListTransactions -----------------------------------------------------------------------------

    async def list_transactions(
        self,
        producer_ids: Collection[int] = (),
        states: Collection[str] = (),
        duration_ms: int | None = None,
    ) -> dict[int, list[TransactionListing]]:
        """Broker id -> the transactions it coordinates (every broker of the cluster is asked)."""
        if duration_ms is not None and self.admin.version(ApiKey.LIST_TRANSACTIONS) < 1:
            raise RequestError("The broker does not support ListTransactions with a duration filter")
        request = ListTransactionsRequest(
            state_filters=list(states),
            producer_id_filters=sorted(producer_ids),
            duration_filter=-1 if duration_ms is None else duration_ms,
        )
        nodes = sorted(self.admin.brokers)
        listings = await asyncio.gather(*(self._list_of(node, request) for node in nodes))
        return dict(zip(nodes, listings, strict=True))

    async def _list_of(self, node: int, request: ListTransactionsRequest) -> list[TransactionListing]:
        deadline = self._deadline()
        while True:
            response = await self.admin.send_to_node(ApiKey.LIST_TRANSACTIONS, request, node)
            code = response.error_code
            if code == ErrorCode.NONE:
                return [
                    TransactionListing(s.transactional_id, s.producer_id, state_name(s.transaction_state))
                    for s in response.transaction_states
                ]
            if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and time.monotonic() < deadline:
                await asyncio.sleep(RETRY_BACKOFF)
                continue
            if code == ErrorCode.COORDINATOR_NOT_AVAILABLE:
                raise RequestError(
                    f"ListTransactions request sent to broker {node} failed because the coordinator is "
                    "shutting down",
                    code,
                )
            raise RequestError(
                f"ListTransactions request sent to broker {node} failed with an unexpected exception: "
                f"{description(code)}",
                code,
            )

    # -- DescribeTransactions -------------------------------------------------------------------------

    async def find_coordinator(self, transactional_id: str) -> int:
        """The id of the broker coordinating ``transactional_id``, asking again while FindCoordinator
        answers a retriable error and the deadline allows."""
        deadline = self._deadline()
        batched = self.admin.version(ApiKey.FIND_COORDINATOR) >= 4
        request = FindCoordinatorRequest(
            key=transactional_id, key_type=TRANSACTION_KEY_TYPE, coordinator_keys=[transactional_id]
        )
        while True:
            response = await self.admin.send(ApiKey.FIND_COORDINATOR, request)
            found = response.coordinators[0] if batched else response
            if found.error_code == ErrorCode.NONE:
                self.admin.brokers.setdefault(found.node_id, (found.host, found.port))
                return int(found.node_id)
            if not retriable(found.error_code) or time.monotonic() > deadline:
                raise RequestError(found.error_message or description(found.error_code), found.error_code)
            await asyncio.sleep(RETRY_BACKOFF)

    async def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, TransactionDescription | RequestError]:
        """Each id's description from its coordinator, or its failure."""
        pending = sorted(set(transactional_ids))
        results: dict[str, TransactionDescription | RequestError] = {}
        deadline = self._deadline()
        while pending:
            by_coordinator: dict[int, list[str]] = defaultdict(list)
            for transactional_id in pending:
                try:
                    by_coordinator[await self.find_coordinator(transactional_id)].append(transactional_id)
                except RequestError as e:
                    results[transactional_id] = e
            retry: list[str] = []
            for node, ids in sorted(by_coordinator.items()):
                retry += await self._describe_at(node, ids, results)
            pending = retry
            if pending:
                if time.monotonic() > deadline:
                    for transactional_id in pending:
                        results[transactional_id] = RequestError(
                            f"DescribeTransactions request for transactionalId `{transactional_id}` "
                            "timed out",
                            ErrorCode.REQUEST_TIMED_OUT,
                        )
                    break
                await asyncio.sleep(RETRY_BACKOFF)
        return results

    async def _describe_at(
        self, node: int, ids: list[str], results: dict[str, TransactionDescription | RequestError]
    ) -> list[str]:
        """DescribeTransactions of ``ids`` at their coordinator ``node``; the ids to ask again."""
        try:
            response = await self.admin.send_to_node(
                ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest(transactional_ids=ids), node
            )
        except AdminError:
            await self.admin.metadata([])
            return ids
        retry = []
        answered = set()
        for state in response.transaction_states:
            transactional_id = state.transactional_id
            answered.add(transactional_id)
            code = state.error_code
            if code == ErrorCode.NONE:
                start = state.transaction_start_time_ms
                results[transactional_id] = TransactionDescription(
                    node,
                    state_name(state.transaction_state),
                    state.producer_id,
                    state.producer_epoch,
                    state.transaction_timeout_ms,
                    None if start < 0 else start,
                    frozenset((t.topic, p) for t in state.topics for p in t.partitions),
                )
            elif code in (
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                ErrorCode.NOT_COORDINATOR,
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ):
                retry.append(transactional_id)
            elif code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                results[transactional_id] = RequestError(
                    f"DescribeTransactions request for transactionalId `{transactional_id}` failed "
                    "because the ID could not be found",
                    code,
                )
            else:
                results[transactional_id] = RequestError(
                    f"DescribeTransactions request for transactionalId `{transactional_id}` failed due to "
                    f"unexpected error: {description(code)}",
                    code,
                )
        return retry + [i for i in ids if i not in answered]

    # -- DescribeProducers ----------------------------------------------------------------------------

    async def describe_producers(
        self, partitions: Iterable[TopicPartition], broker_id: int | None = None
    ) -> dict[TopicPartition, list[ProducerState] | RequestError]:
        """The active producers of each partition, on its leader or on ``broker_id``'s replica."""
        pending = sorted(set(partitions))
        results: dict[TopicPartition, list[ProducerState] | RequestError] = {}
        deadline = self._deadline()
        while pending:
            if broker_id is not None:
                targets = {tp: broker_id for tp in pending}
            else:
                targets = {}
                for tp, leader in (await self._leaders(pending)).items():
                    if isinstance(leader, int):
                        targets[tp] = leader
                    elif leader.code in (ErrorCode.LEADER_NOT_AVAILABLE,) and time.monotonic() < deadline:
                        continue  # asked again below
                    else:
                        results[tp] = leader
            by_node: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp, node in targets.items():
                by_node[node].append(tp)
            for node, tps in sorted(by_node.items()):
                await self._describe_producers_at(node, tps, broker_id is not None, results)
            pending = [tp for tp in pending if tp not in results]
            if pending:
                if time.monotonic() > deadline:
                    for tp in pending:
                        results[tp] = RequestError(
                            f"Failed to describe active producers for partition {tp_string(tp)}: timed out "
                            "waiting for its leader",
                            ErrorCode.REQUEST_TIMED_OUT,
                        )
                    break
                await asyncio.sleep(RETRY_BACKOFF)
        return results

    async def _describe_producers_at(
        self,
        node: int,
        partitions: list[TopicPartition],
        static: bool,
        results: dict[TopicPartition, list[ProducerState] | RequestError],
    ) -> None:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in partitions:
            by_topic[topic].append(partition)
        request = DescribeProducersRequest(
            topics=[
                DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps)
                for t, ps in by_topic.items()
            ]
        )
        try:
            response = await self.admin.send_to_node(ApiKey.DESCRIBE_PRODUCERS, request, node)
        except AdminError as e:
            if static:
                for tp in partitions:
                    results[tp] = RequestError(str(e), ErrorCode.BROKER_NOT_AVAILABLE)
            return  # else: the leader is looked up again
        for t in response.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if tp not in partitions:
                    continue
                results_of = _producer_result(tp, p, node, static)
                if results_of is not None:
                    results[tp] = results_of

    # -- WriteTxnMarkers ------------------------------------------------------------------------------

    async def abort_transaction(self, spec: AbortSpec) -> None:
        """Writes an ABORT marker for the spec's producer to the partition, on its leader (as Kafka's
        Admin.abortTransaction). RequestError if the leader refuses it."""
        topic, partition = spec.topic_partition
        marker = WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=spec.producer_id,
            producer_epoch=spec.producer_epoch,
            transaction_result=False,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])],
            coordinator_epoch=spec.coordinator_epoch,
        )
        request = WriteTxnMarkersRequest(markers=[marker])
        deadline = self._deadline()
        while True:
            leader = (await self._leaders([spec.topic_partition]))[spec.topic_partition]
            if isinstance(leader, RequestError):
                code = leader.code
            else:
                try:
                    response = await self.admin.send_to_node(ApiKey.WRITE_TXN_MARKERS, request, leader)
                except AdminError:
                    code = ErrorCode.BROKER_NOT_AVAILABLE
                else:
                    code = _marker_result(spec, response)
                    if code == ErrorCode.NONE:
                        return
            if code not in LEADER_ERRORS or time.monotonic() > deadline:
                raise RequestError(_abort_message(spec, code), code)
            await asyncio.sleep(RETRY_BACKOFF)


def _producer_result(
    tp: TopicPartition, p: Any, node: int, static: bool
) -> list[ProducerState] | RequestError | None:
    """One partition of a DescribeProducers response: its producers, its failure, or None to ask again
    (the leader moved), as Kafka's DescribeProducersHandler."""
    code = p.error_code
    if code == ErrorCode.NONE:
        return [
            ProducerState(
                s.producer_id,
                s.producer_epoch,
                s.last_sequence,
                s.last_timestamp,
                None if s.coordinator_epoch < 0 else s.coordinator_epoch,
                None if s.current_txn_start_offset < 0 else s.current_txn_start_offset,
            )
            for s in p.active_producers
        ]
    if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        if static:
            return RequestError(
                f"Failed to describe active producers for partition {tp_string(tp)} on brokerId {node}", code
            )
        return None
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not static:
        return None
    if code == ErrorCode.INVALID_TOPIC_EXCEPTION:
        return RequestError(
            f"Failed to fetch metadata for partition {tp_string(tp)} due to invalid topic error: "
            f"{p.error_message or description(code)}",
            code,
        )
    return RequestError(
        f"Failed to describe active producers for partition {tp_string(tp)} due to unexpected error: "
        f"{p.error_message or description(code)}",
        code,
    )


def _marker_result(spec: AbortSpec, response: Any) -> int:
    """The error code of the one partition of a WriteTxnMarkers response (Kafka's AbortTransactionHandler
    also refuses a response about anything else)."""
    topic, partition = spec.topic_partition
    markers = response.markers
    if len(markers) != 1 or markers[0].producer_id != spec.producer_id:
        raise RequestError(
            f"WriteTxnMarkers response included unexpected marker entries (expected exactly one entry with "
            f"producerId {spec.producer_id})"
        )
    topics = markers[0].topics
    if len(topics) != 1 or topics[0].name != topic:
        raise RequestError(
            f"WriteTxnMarkers response included unexpected topic entries (expected exactly one entry with "
            f"topic partition {tp_string(spec.topic_partition)})"
        )
    partitions = topics[0].partitions
    if len(partitions) != 1 or partitions[0].partition_index != partition:
        raise RequestError(
            f"WriteTxnMarkers response included unexpected partition entries for topic {topic} (expected "
            f"exactly one entry with partition {partition})"
        )
    return int(partitions[0].error_code)


def _abort_message(spec: AbortSpec, code: int) -> str:
    if code == ErrorCode.INVALID_PRODUCER_EPOCH:
        return f"WriteTxnMarkers request with {spec} failed due an invalid producer epoch"
    if code == ErrorCode.TRANSACTION_COORDINATOR_FENCED:
        return (
            f"WriteTxnMarkers request with {spec} failed since the provided coordinator epoch "
            f"{spec.coordinator_epoch} has been fenced by the active coordinator"
        )
    return f"WriteTxnMarkers request with {spec} failed due to unexpected error: {description(code)}"
