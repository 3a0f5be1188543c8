"""AddPartitionsToTxnManager: a partition leader asks transaction coordinators whether partitions are
part of a producer's ongoing transaction (KIP-890 part 1, Kafka's AddPartitionsToTxnManager).

Before a producer's first transactional batch of a transaction is appended to a partition, the leader
sends the transaction coordinator of the producer's ``transactional.id`` (the leader of
``__transaction_state`` partition ``partition_for(transactional id)`` in the metadata cache, on the
inter-broker listener) an AddPartitionsToTxn v4 with ``verify_only``. Requests are batched per
coordinator node: while one is in flight to a node, later verifications for that node wait and go
together in the next one. At most one verification per transactional id waits for a node; a newer one
replaces it, the older answered as Kafka does (INVALID_PRODUCER_EPOCH when the newer one has a higher
epoch, NETWORK_EXCEPTION when the same; a lower epoch is refused at once).

``verify_transaction`` returns a future of the partitions that are NOT verified, each with its error
(empty: all verified). The errors are the coordinator's, adjusted as Kafka adjusts them
(PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE -> INVALID_TXN_STATE for producers
that predate it); a coordinator that cannot be found or reached gives COORDINATOR_NOT_AVAILABLE or
NETWORK_EXCEPTION, which the produce path turns into a retriable NOT_ENOUGH_REPLICAS. Unlike Kafka, a
partition the coordinator's answer leaves out counts as not verified (INVALID_TXN_STATE), and a
coordinator that does not serve the request (it closes the connection) fails the verification rather
than skipping it: an unverified transactional batch must never reach a log.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker.metadata_cache import MetadataCache
from network.client import NetworkClient
from network.client_security import ClientSecurity
from protocol.api import Api, ApiKey, api
from protocol.errors import ErrorCode
from protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, Message
from protocol.topic import TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
VerificationErrors = dict[TopicPartition, int]
# The first version with batched, verify-only requests (Kafka's AddPartitionsToTxnRequest.forBroker).
VERIFY_VERSION = 4


class BrokerClient(Protocol):
    async def send(self, api: Api, version: int, body: Message) -> Any: ...

    async def close(self) -> None: ...


ClientFactory = Callable[[str, int, str, float], BrokerClient]


def _network_client(
    host: str, port: int, client_id: str, timeout: float, security: ClientSecurity | None = None
) -> BrokerClient:
    return NetworkClient(
        host, port, client_id, request_timeout=timeout, connect_timeout=timeout, security=security
    )


@dataclass
class _Verification:
    """One transactional id's verification waiting for its coordinator."""

    producer_id: int
    producer_epoch: int
    partitions: list[TopicPartition]
    future: asyncio.Future[VerificationErrors]
    generic_errors: bool


@dataclass
class _NodeQueue:
    """A coordinator node's verifications: those waiting for the next request, and whether one is in
    flight."""

    waiting: dict[str, _Verification] = field(default_factory=dict)
    in_flight: bool = False


def _all(verification: _Verification, error: int) -> VerificationErrors:
    return dict.fromkeys(verification.partitions, error)


def _settle(verification: _Verification, errors: VerificationErrors) -> None:
    if not verification.future.done():
        verification.future.set_result(errors)


class AddPartitionsToTxnManager:
    def __init__(
        self,
        broker_id: int,
        metadata_cache: MetadataCache,
        listener: str,
        partition_for: Callable[[str], int],
        request_timeout_ms: int,
        client_factory: ClientFactory | None = None,
        *,
        security: ClientSecurity | None = None,
    ) -> None:
        """``security``: how the coordinators' inter-broker listener is reached (ClientSecurity.
        for_inter_broker), for the default ``client_factory``."""
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.listener = listener
        self.partition_for = partition_for
        self.request_timeout = request_timeout_ms / 1000
        self._client_factory: ClientFactory = client_factory or functools.partial(
            _network_client, security=security
        )
        self._clients: dict[int, tuple[tuple[str, int], BrokerClient]] = {}
        self._nodes: dict[int, _NodeQueue] = {}
        self._tasks: set[asyncio.Task] = set()
        self._closed = False

    def coordinator_of(self, transactional_id: str) -> int | None:
        """The node leading the transactional id's ``__transaction_state`` partition, if it is alive
        and has the inter-broker listener (Kafka's getTransactionCoordinator)."""
        found = self.metadata_cache.partition(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))
        if found is None or found.leader < 0:
            return None
        if self.metadata_cache.endpoint(found.leader, self.listener) is None:
            return None
        return found.leader

    def verify_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        generic_errors: bool = False,
    ) -> asyncio.Future[VerificationErrors]:
        """The partitions of ``partitions`` the coordinator does not confirm as part of the producer's
        ongoing transaction, with their errors; empty when all are. ``generic_errors``: the producer
        understands TRANSACTION_ABORTABLE (Produce v11+)."""
        future: asyncio.Future[VerificationErrors] = asyncio.get_running_loop().create_future()
        verification = _Verification(producer_id, producer_epoch, list(partitions), future, generic_errors)
        node = None if self._closed else self.coordinator_of(transactional_id)
        if node is None:
            _settle(verification, _all(verification, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return future
        queue = self._nodes.setdefault(node, _NodeQueue())
        existing = queue.waiting.get(transactional_id)
        if existing is not None:
            if existing.producer_epoch <= producer_epoch:
                # A newer epoch fences the waiting one; the same epoch is the client retrying.
                error = (
                    ErrorCode.INVALID_PRODUCER_EPOCH
                    if existing.producer_epoch < producer_epoch
                    else ErrorCode.NETWORK_EXCEPTION
                )
                _settle(existing, _all(existing, error))
            else:
                _settle(verification, _all(verification, ErrorCode.INVALID_PRODUCER_EPOCH))
                return future
        queue.waiting[transactional_id] = verification
        self._maybe_send(node, queue)
        return future

    def _maybe_send(self, node: int, queue: _NodeQueue) -> None:
        if queue.in_flight or not queue.waiting or self._closed:
            return
        batch, queue.waiting = queue.waiting, {}
        queue.in_flight = True
        task = asyncio.get_running_loop().create_task(
            self._send(node, queue, batch), name=f"txn-verification-{node}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _client(self, node: int) -> BrokerClient | None:
        endpoint = self.metadata_cache.endpoint(node, self.listener)
        if endpoint is None:
            return None
        address = (endpoint.host, endpoint.port)
        known = self._clients.get(node)
        if known is not None and known[0] == address:
            return known[1]
        if known is not None:  # the node moved: its old connection goes
            task = asyncio.get_running_loop().create_task(known[1].close())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        client = self._client_factory(
            endpoint.host, endpoint.port, f"broker-{self.broker_id}-txn-verification", self.request_timeout
        )
        self._clients[node] = (address, client)
        return client

    async def _send(self, node: int, queue: _NodeQueue, batch: dict[str, _Verification]) -> None:
        try:
            client = self._client(node)
            if client is None:
                for verification in batch.values():
                    _settle(verification, _all(verification, ErrorCode.COORDINATOR_NOT_AVAILABLE))
                return
            request = AddPartitionsToTxnRequest(
                transactions=[_transaction(txn_id, v) for txn_id, v in batch.items()]
            )
            try:
                response = await client.send(api(ApiKey.ADD_PARTITIONS_TO_TXN), VERIFY_VERSION, request)
            except (OSError, TimeoutError, ValueError) as e:  # ConnectionError is an OSError
                log.warning(
                    "AddPartitionsToTxn (verification) to broker %d failed: %s; %d transactions not verified",
                    node,
                    e,
                    len(batch),
                )
                for verification in batch.values():
                    _settle(verification, _all(verification, ErrorCode.NETWORK_EXCEPTION))
                return
            _answer(node, batch, response)
        except asyncio.CancelledError:  # shutdown: the produces waiting on it get a retriable answer
            for verification in batch.values():
                _settle(verification, _all(verification, ErrorCode.NETWORK_EXCEPTION))
            raise
        except Exception:
            log.exception("verification of %d transactions with broker %d failed", len(batch), node)
            for verification in batch.values():
                _settle(verification, _all(verification, ErrorCode.UNKNOWN_SERVER_ERROR))
        finally:
            queue.in_flight = False
            self._maybe_send(node, queue)

    async def shutdown(self) -> None:
        """Answers waiting verifications with NETWORK_EXCEPTION and closes the connections."""
        self._closed = True
        for queue in self._nodes.values():
            for verification in queue.waiting.values():
                _settle(verification, _all(verification, ErrorCode.NETWORK_EXCEPTION))
            queue.waiting.clear()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for _, client in self._clients.values():
            await client.close()
        self._clients.clear()


def _transaction(
    transactional_id: str, v: _Verification
) -> AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in v.partitions:
        by_topic.setdefault(topic, []).append(partition)
    return AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
        transactional_id=transactional_id,
        producer_id=v.producer_id,
        producer_epoch=v.producer_epoch,
        verify_only=True,
        topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=partitions)
            for topic, partitions in by_topic.items()
        ],
    )


def _answer(node: int, batch: dict[str, _Verification], response: AddPartitionsToTxnResponse) -> None:
    """Each transaction's unverified partitions, from a coordinator's response."""
    if response.error_code != ErrorCode.NONE:
        # The client must not see CLUSTER_AUTHORIZATION_FAILED: it says verification did not complete.
        error = (
            ErrorCode.INVALID_TXN_STATE
            if response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            else response.error_code
        )
        log.warning("AddPartitionsToTxn (verification) to broker %d answered %s", node, ErrorCode(error).name)
        for verification in batch.values():
            _settle(verification, _all(verification, error))
        return
    answered: dict[str, dict[TopicPartition, int]] = {}
    for result in response.results_by_transaction:
        codes = answered.setdefault(result.transactional_id, {})
        for topic in result.topic_results:
            for partition in topic.results_by_partition:
                codes[(topic.name, partition.partition_index)] = partition.partition_error_code
    for transactional_id, verification in batch.items():
        codes = answered.get(transactional_id, {})
        unverified: VerificationErrors = {}
        for tp in verification.partitions:
            code = codes.get(tp, ErrorCode.INVALID_TXN_STATE)
            if code == ErrorCode.NONE:
                continue
            if code == ErrorCode.PRODUCER_FENCED:
                code = ErrorCode.INVALID_PRODUCER_EPOCH  # what producers expect here
            elif code == ErrorCode.TRANSACTION_ABORTABLE and not verification.generic_errors:
                code = ErrorCode.INVALID_TXN_STATE  # producers before Produce v11 do not know it
            unverified[tp] = code
        _settle(verification, unverified)
