"""Every connection a server opens to another server goes as the inter-broker listener says
(``ClientSecurity.for_inter_broker``): the replica fetchers, the transaction markers, the KIP-890
verification, the broker's channel to the controller (on the controller's endpoint named like the
inter-broker listener) and the controller's channels to the brokers."""

from __future__ import annotations

import asyncio
import ssl
from types import SimpleNamespace
from typing import Any

from broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from broker.controller_channel import ControllerChannel
from broker.replica_fetcher import FetchSettings, ReplicaFetcher
from broker.txn_marker_transport import BrokerTxnMarkerTransport
from controller.channel_manager import network_client
from network.client_security import ClientSecurity
from zk import znodes

SECURITY = ClientSecurity("SASL_SSL", ssl.create_default_context(), "SCRAM-SHA-512", "broker", "secret")


def test_the_controller_is_reached_on_its_endpoint_named_like_the_inter_broker_listener() -> None:
    data = znodes.encode_controller(9001, ["EXTERNAL://ext:9093", "INTERNAL://ctl:9094"])
    assert znodes.decode_controller_endpoint(data, "internal") == ("ctl", 9094)
    assert znodes.decode_controller_endpoint(data, "OTHER") == ("ext", 9093)  # none so named: the first
    assert znodes.decode_controller_endpoint(data) == ("ext", 9093)
    assert znodes.decode_controller_endpoint(znodes.encode_controller(9001)) is None


def test_each_server_to_server_client_carries_the_inter_broker_security() -> None:
    async def clients() -> list[Any]:
        made = []
        settings = FetchSettings(1, 500, 1, 10_000_000, 1_000_000, 1000, 30_000, security=SECURITY)
        made.append(ReplicaFetcher(settings, 2, "b2", 9092, "f")._client)

        cache = SimpleNamespace(endpoint=lambda node, listener: SimpleNamespace(host="b3", port=9093))
        markers = BrokerTxnMarkerTransport(1, cache, "INTERNAL", 1000, security=SECURITY)  # type: ignore[arg-type]
        made.append(await markers._client(3))

        verification = AddPartitionsToTxnManager(1, cache, "INTERNAL", lambda t: 0, 1000, security=SECURITY)  # type: ignore[arg-type]
        made.append(verification._client_factory("b3", 9093, "x", 1.0))

        class Zk:
            operation_timeout = 1.0

            async def get(self, path: str, timeout: float | None = None) -> Any:
                data = znodes.encode_controller(9001, ["SASL_SSL://ctl:9093"])
                return data, SimpleNamespace(version=0)

        channel = ControllerChannel(Zk(), 1, 1.0, security=SECURITY, listener="SASL_SSL")  # type: ignore[arg-type]
        controller = await channel.active_controller()
        assert (controller.host, controller.port) == ("ctl", 9093)
        made.append(network_client("b1", 9092, "controller-9001", 1.0, security=SECURITY))
        return made

    for client in asyncio.run(clients()):
        assert client.security is SECURITY, client
