"""AdminClient: what ``samsa topics`` needs of a cluster, over Samsa's own NetworkClient and protocol codecs.

It bootstraps from a ``--bootstrap-server`` list, negotiates each API's version from the bootstrap broker's
ApiVersions (the newest both sides know), keeps the brokers and controller from Metadata, and sends a
request to a chosen broker, to the controller (as Kafka's Admin client sends CreateTopics, DeleteTopics
and CreatePartitions), to a group's coordinator (found with FindCoordinator) or to any broker, retrying on
another broker while the deadline allows when a connection fails or the controller or coordinator has moved.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from network.client import NetworkClient
from network.client_security import ClientSecurity
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode, description, retriable
from protocol.messages import ApiVersionsRequest, FindCoordinatorRequest, Message, MetadataRequest

# The errors after which Kafka's Admin client looks the coordinator up again and retries.
COORDINATOR_ERRORS = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
)
GROUP_KEY_TYPE = 0  # FindCoordinator's CoordinatorType.GROUP
RETRY_BACKOFF = 0.1


class AdminError(Exception):
    """A failure to report to the user as it is."""


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` (IPv6 hosts in brackets) as (host, port) pairs."""
    addresses = []
    for item in filter(None, (s.strip() for s in servers.split(","))):
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise AdminError(f"Invalid url in bootstrap.servers: {item}")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise AdminError("No resolvable bootstrap urls given in bootstrap.servers")
    return addresses


class AdminClient:
    def __init__(
        self,
        bootstrap_servers: str,
        client_id: str = "samsa-admin",
        timeout: float = 30.0,
        *,
        security: ClientSecurity | None = None,
    ) -> None:
        """``security``: how to connect to the brokers' listener (TLS, SASL), as a tool's
        ``--command-config`` file says (tools/command_config.py); None is PLAINTEXT."""
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.client_id = client_id
        self.timeout = timeout
        self.security = security
        self.versions: dict[int, tuple[int, int]] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.controller_id = -1
        self._clients: dict[tuple[str, int], NetworkClient] = {}
        self._bootstrap_address: tuple[str, int] | None = None

    async def __aenter__(self) -> AdminClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _client(self, address: tuple[str, int]) -> NetworkClient:
        client = self._clients.get(address)
        if client is None:
            client = NetworkClient(
                *address,
                self.client_id,
                request_timeout=self.timeout,
                connect_timeout=self.timeout,
                security=self.security,
            )
            self._clients[address] = client
        return client

    async def start(self) -> None:
        """Finds a bootstrap server that answers ApiVersions, then reads the cluster's metadata."""
        api_versions = api(ApiKey.API_VERSIONS)
        assert api_versions is not None
        errors = []
        for address in self.bootstrap:
            try:
                response = await self._client(address).send(api_versions, 0, ApiVersionsRequest())
            except (OSError, TimeoutError) as e:
                errors.append(f"{address[0]}:{address[1]}: {e}")
                continue
            if response.error_code != ErrorCode.NONE:
                errors.append(f"{address[0]}:{address[1]}: ApiVersions error {response.error_code}")
                continue
            self.versions = {v.api_key: (v.min_version, v.max_version) for v in response.api_keys}
            self._bootstrap_address = address
            await self.metadata([])
            return
        raise AdminError("could not connect to any bootstrap server: " + "; ".join(errors))

    def version(self, key: ApiKey) -> int:
        """The newest version of ``key`` that both the broker and Samsa's schemas have."""
        spec = api(key)
        broker = self.versions.get(key)
        if spec is None or broker is None:
            raise AdminError(f"The broker does not support {key.name}")
        high = min(broker[1], spec.valid_versions.high)
        if high < max(broker[0], spec.valid_versions.low):
            raise AdminError(f"The broker does not support {key.name} at any version Samsa knows")
        return high

    async def metadata(self, topics: list[str] | None) -> Any:
        """Metadata for ``topics`` (None: every topic; []: none), never creating topics. Updates the
        known brokers and controller."""
        request = MetadataRequest(
            topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
        )
        response = await self.send(ApiKey.METADATA, request)
        self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        self.controller_id = response.controller_id
        return response

    async def send(self, key: ApiKey, body: Message, node: int | None = None) -> Any:
        """Sends to ``node`` (None: any broker), trying the other brokers if it cannot be reached."""
        spec = api(key)
        assert spec is not None
        version = self.version(key)
        addresses = []
        if node is not None and node in self.brokers:
            addresses.append(self.brokers[node])
        addresses += [a for a in self.brokers.values() if a not in addresses]
        if self._bootstrap_address is not None and self._bootstrap_address not in addresses:
            addresses.append(self._bootstrap_address)
        errors = []
        for address in addresses:
            try:
                return await self._client(address).send(spec, version, body)
            except (OSError, TimeoutError) as e:
                errors.append(f"{address[0]}:{address[1]}: {e}")
        raise AdminError(f"{key.name} failed on every broker: " + "; ".join(errors))

    async def send_to_controller(self, key: ApiKey, body: Message, errors_of: Any) -> Any:
        """Sends to the controller; while ``errors_of(response)`` holds NOT_CONTROLLER and the deadline
        allows, refreshes the metadata and sends again."""
        deadline = time.monotonic() + self.timeout
        while True:
            response = await self.send(key, body, self.controller_id)
            if ErrorCode.NOT_CONTROLLER not in errors_of(response) or time.monotonic() > deadline:
                return response
            await asyncio.sleep(0.1)
            await self.metadata([])

    async def send_to_node(self, key: ApiKey, body: Message, node: int) -> Any:
        """Sends to broker ``node`` and no other: for what only that broker can answer (its groups in
        ListGroups, a coordinator's requests, a partition leader's offsets)."""
        spec = api(key)
        assert spec is not None
        address = self.brokers.get(node)
        if address is None:
            raise AdminError(f"Broker {node} is not in the cluster's metadata")
        try:
            return await self._client(address).send(spec, self.version(key), body)
        except (OSError, TimeoutError) as e:
            raise AdminError(f"{key.name} to broker {node} ({address[0]}:{address[1]}) failed: {e}") from None

    async def find_coordinator(self, group: str) -> int:
        """The id of ``group``'s coordinator, asking again while FindCoordinator answers a retriable
        error and the deadline allows."""
        deadline = time.monotonic() + self.timeout
        batched = self.version(ApiKey.FIND_COORDINATOR) >= 4
        request = FindCoordinatorRequest(key=group, key_type=GROUP_KEY_TYPE, coordinator_keys=[group])
        while True:
            response = await self.send(ApiKey.FIND_COORDINATOR, request)
            found = response.coordinators[0] if batched else response
            if found.error_code == ErrorCode.NONE:
                self.brokers.setdefault(found.node_id, (found.host, found.port))
                return found.node_id
            if not retriable(found.error_code) or time.monotonic() > deadline:
                raise AdminError(found.error_message or description(found.error_code))
            await asyncio.sleep(RETRY_BACKOFF)

    async def send_to_coordinator(self, group: str, key: ApiKey, body: Message, errors_of: Any) -> Any:
        """Sends to ``group``'s coordinator; while the coordinator cannot be reached or
        ``errors_of(response)`` holds a coordinator error, and the deadline allows, finds it again and
        sends again."""
        deadline = time.monotonic() + self.timeout
        while True:
            node = await self.find_coordinator(group)
            try:
                response = await self.send_to_node(key, body, node)
            except AdminError:
                if time.monotonic() > deadline:
                    raise
            else:
                if COORDINATOR_ERRORS.isdisjoint(errors_of(response)) or time.monotonic() > deadline:
                    return response
            await asyncio.sleep(RETRY_BACKOFF)
            await self.metadata([])

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
