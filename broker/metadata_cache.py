"""The broker's view of the cluster that Metadata and DescribeCluster answer from.

Holds the live brokers with their advertised endpoints per listener, the controller id, the cluster id
and the topics' partition states. The controller keeps it current (UpdateMetadata); until a cluster
exists, the broker registers only itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BrokerEndpoint:
    host: str
    port: int


@dataclass(frozen=True)
class BrokerInfo:
    id: int
    rack: str | None
    endpoints: dict[str, BrokerEndpoint] = field(default_factory=dict)  # by listener name


class MetadataCache:
    def __init__(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id
        self.controller_id = -1
        self._brokers: dict[int, BrokerInfo] = {}

    def add_broker(self, broker: BrokerInfo) -> None:
        self._brokers[broker.id] = broker

    def alive_brokers(self) -> list[BrokerInfo]:
        return sorted(self._brokers.values(), key=lambda b: b.id)

    def alive_endpoints(self, listener: str) -> list[tuple[BrokerInfo, BrokerEndpoint]]:
        """The live brokers that have ``listener``, with their address on it (Kafka leaves out the rest)."""
        return [(b, b.endpoints[listener]) for b in self.alive_brokers() if listener in b.endpoints]

    def topic_names(self) -> list[str]:
        return []
