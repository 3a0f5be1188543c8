"""BrokerTxnMarkerTransport: how the transaction coordinator reaches partition leaders with its markers.

The coordinator (``coordinator.transaction_coordinator``) decides which markers go where and retries;
this module is the broker's half of its ``TxnMarkerTransport``: who leads a partition now (the
MetadataCache, as the controller's UpdateMetadata last said) and one WriteTxnMarkers round trip to a
broker, on its endpoint of the inter-broker listener (``inter.broker.listener.name``, else the first of
this broker's listeners speaking ``security.inter.broker.protocol``, as the controller picks it). One
``NetworkClient`` per destination broker, as Kafka's TransactionMarkerChannelManager keeps one
connection per node; a client whose connection fails is dropped and the next write reconnects.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from broker.config import KafkaConfig
from broker.metadata_cache import MetadataCache
from coordinator.transaction_coordinator import TxnMarker
from network.client import NetworkClient
from network.client_security import ClientSecurity
from protocol.api import ApiKey, api
from protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse

log = logging.getLogger(__name__)

# WriteTxnMarkers v1 (flexible) is the highest version Kafka 3.9 and Samsa both have.
WRITE_TXN_MARKERS_VERSION = 1


def inter_broker_listener(config: KafkaConfig) -> str:
    """The listener brokers reach each other on."""
    named = config["inter.broker.listener.name"]
    if named:
        return str(named).upper()
    protocol = config["security.inter.broker.protocol"]
    for endpoint in config.listeners:
        if endpoint.security_protocol == protocol:
            return endpoint.listener
    return config.listeners[0].listener


def write_txn_markers_request(markers: Sequence[TxnMarker]) -> WriteTxnMarkersRequest:
    written = []
    for marker in markers:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in marker.partitions:
            by_topic.setdefault(topic, []).append(partition)
        written.append(
            WriteTxnMarkersRequest.WritableTxnMarker(
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                transaction_result=marker.commit,
                topics=[
                    WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=topic, partition_indexes=partitions)
                    for topic, partitions in by_topic.items()
                ],
                coordinator_epoch=marker.coordinator_epoch,
            )
        )
    return WriteTxnMarkersRequest(markers=written)


def marker_errors(response: WriteTxnMarkersResponse) -> dict[tuple[int, str, int], int]:
    """{(producer id, topic, partition): error code} of a WriteTxnMarkers response."""
    return {
        (marker.producer_id, topic.name, p.partition_index): p.error_code
        for marker in response.markers
        for topic in marker.topics
        for p in topic.partitions
    }


class BrokerTxnMarkerTransport:
    """``coordinator.transaction_coordinator.TxnMarkerTransport`` over the MetadataCache and one
    NetworkClient per destination broker."""

    def __init__(
        self,
        broker_id: int,
        metadata_cache: MetadataCache,
        listener: str,
        request_timeout_ms: int,
        *,
        security: ClientSecurity | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.listener = listener
        self.security = security  # how ``listener`` is reached (ClientSecurity.for_inter_broker)
        self.request_timeout = request_timeout_ms / 1000
        self._clients: dict[int, NetworkClient] = {}
        self._closed = False

    def leader_of(self, topic: str, partition: int) -> int | None:
        found = self.metadata_cache.partition(topic, partition)
        if found is None or found.leader < 0 or not self.metadata_cache.is_alive(found.leader):
            return None
        return found.leader

    def topic_exists(self, topic: str) -> bool:
        return self.metadata_cache.contains(topic)

    async def _client(self, node_id: int) -> NetworkClient:
        if self._closed:
            raise ConnectionError("the marker transport is shut down")
        endpoint = self.metadata_cache.endpoint(node_id, self.listener)
        if endpoint is None:
            raise ConnectionError(f"broker {node_id} has no live endpoint on listener {self.listener}")
        client = self._clients.get(node_id)
        if client is not None and (client.host, client.port) != (endpoint.host, endpoint.port):
            # The broker came back elsewhere: its old connection is of no use.
            del self._clients[node_id]
            await client.close()
            client = None
        if client is None:
            client = self._clients[node_id] = NetworkClient(
                endpoint.host,
                endpoint.port,
                f"broker-{self.broker_id}-txn-markers",
                request_timeout=self.request_timeout,
                connect_timeout=self.request_timeout,
                security=self.security,
            )
        return client

    async def write_markers(self, node_id: int, markers: list[TxnMarker]) -> dict[tuple[int, str, int], int]:
        """WriteTxnMarkers to ``node_id``: {(producer id, topic, partition): error code}. Raises
        ConnectionError, OSError or TimeoutError when the broker cannot be reached or does not answer
        (the coordinator retries)."""
        client = await self._client(node_id)
        try:
            response = await client.send(
                api(ApiKey.WRITE_TXN_MARKERS), WRITE_TXN_MARKERS_VERSION, write_txn_markers_request(markers)
            )
        except (OSError, TimeoutError):
            if self._clients.get(node_id) is client:
                del self._clients[node_id]
            await client.close()
            raise
        return marker_errors(response)

    async def shutdown(self) -> None:
        self._closed = True
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()
