"""ControllerChannelManager: the controller's connections to the brokers (Kafka's ControllerChannelManager).

One NetworkClient and one sender task per live broker, connected to the broker's inter-broker
listener as its registration advertises it. A broker's requests go out one at a time in the order they
were queued (an UpdateMetadata naming a new leader must not overtake the LeaderAndIsr that made it
one). A request that fails on the connection is retried, after a short backoff, for as long as the
broker is registered; a broker that leaves is removed with its queue. Responses are handed to the
request's callback on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from controller.context import LiveBroker
from network.client import NetworkClient
from network.client_security import ClientSecurity
from protocol.api import Api
from zk.znodes import BrokerRegistration

log = logging.getLogger(__name__)

ResponseCallback = Callable[[Any], None]
_RETRY_BACKOFF = 0.1
_MAX_RETRY_BACKOFF = 1.0


class BrokerClient(Protocol):
    async def send(self, api: Api, version: int, body: Any) -> Any: ...

    async def close(self) -> None: ...


ClientFactory = Callable[[str, int, str, float], BrokerClient]


def network_client(
    host: str, port: int, client_id: str, timeout: float, security: ClientSecurity | None = None
) -> BrokerClient:
    """A connection to a broker's inter-broker listener; ``security``: ClientSecurity.for_inter_broker
    of the controller's config (TLS, SASL as the brokers reach each other)."""
    return NetworkClient(
        host, port, client_id, request_timeout=timeout, connect_timeout=timeout, security=security
    )


def inter_broker_endpoint(
    registration: BrokerRegistration, listener: str | None, security_protocol: str
) -> tuple[str, int] | None:
    """The (host, port) the controller uses for a broker: its endpoint on ``inter.broker.listener.name``,
    else its first endpoint speaking ``security.inter.broker.protocol``."""
    if listener is not None:
        return registration.endpoints.get(listener)
    for name, address in registration.endpoints.items():
        if registration.security_protocols.get(name, name) == security_protocol:
            return address
    return None


class _BrokerSender:
    """The queue and sender task of one broker (Kafka's RequestSendThread)."""

    def __init__(self, broker_id: int, client: BrokerClient, prefix: str) -> None:
        self.broker_id = broker_id
        self.client = client
        self._prefix = prefix
        self.queue: asyncio.Queue[tuple[Api, int, Any, ResponseCallback | None]] = asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"controller-sender-{broker_id}")

    async def _run(self) -> None:
        while True:
            api, version, body, callback = await self.queue.get()
            response = await self._send_until_answered(api, version, body)
            if callback is not None:
                try:
                    callback(response)
                except Exception:
                    log.exception(
                        "%s error handling the %s response of broker %d",
                        self._prefix,
                        api.name,
                        self.broker_id,
                    )

    async def _send_until_answered(self, api: Api, version: int, body: Any) -> Any:
        backoff = _RETRY_BACKOFF
        attempt = 0
        while True:
            try:
                return await self.client.send(api, version, body)
            except (ConnectionError, OSError, TimeoutError) as e:
                attempt += 1
                if attempt == 1 or attempt % 50 == 0:
                    log.warning(
                        "%s %s to broker %d failed (%s); retrying while the broker is registered",
                        self._prefix,
                        api.name,
                        self.broker_id,
                        e,
                    )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_RETRY_BACKOFF)


class ControllerChannelManager:
    def __init__(
        self,
        controller_id: int,
        epoch: int,
        request_timeout: float,
        listener: str | None,
        security_protocol: str,
        client_factory: ClientFactory = network_client,
    ) -> None:
        self._client_id = f"controller-{controller_id}"
        self._prefix = f"[Controller id={controller_id} epoch={epoch}]"
        self._request_timeout = request_timeout
        self._listener = listener
        self._security_protocol = security_protocol
        self._client_factory = client_factory
        self._senders: dict[int, _BrokerSender] = {}
        self._endpoints: dict[int, tuple[str, int]] = {}
        self._closing: set[asyncio.Task] = set()
        self._stopped = False

    def endpoint(self, broker_id: int) -> tuple[str, int] | None:
        return self._endpoints.get(broker_id)

    def add_broker(self, broker: LiveBroker) -> None:
        if self._stopped or broker.id in self._senders:
            return
        endpoint = inter_broker_endpoint(broker.registration, self._listener, self._security_protocol)
        if endpoint is None:
            log.error(
                "%s broker %d registers no endpoint for the inter-broker listener (%s); not connecting to it",
                self._prefix,
                broker.id,
                self._listener or self._security_protocol,
            )
            return
        self._endpoints[broker.id] = endpoint
        client = self._client_factory(endpoint[0], endpoint[1], self._client_id, self._request_timeout)
        self._senders[broker.id] = _BrokerSender(broker.id, client, self._prefix)
        log.info("%s connecting to broker %d at %s:%d", self._prefix, broker.id, *endpoint)

    def remove_broker(self, broker_id: int) -> None:
        """Stops the broker's sender now; its queued requests are dropped."""
        sender = self._senders.pop(broker_id, None)
        self._endpoints.pop(broker_id, None)
        if sender is None:
            return
        sender.task.cancel()
        task = asyncio.get_running_loop().create_task(self._close(sender))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    @staticmethod
    async def _close(sender: _BrokerSender) -> None:
        try:
            await sender.task
        except asyncio.CancelledError:
            pass
        await sender.client.close()

    def send(
        self, broker_id: int, api: Api, version: int, body: Any, callback: ResponseCallback | None
    ) -> None:
        sender = self._senders.get(broker_id)
        if sender is None or self._stopped:
            log.info("%s not sending %s to broker %d: it is not live", self._prefix, api.name, broker_id)
            return
        sender.queue.put_nowait((api, version, body, callback))

    def stop(self) -> None:
        """Stops every sender at once (the controller has been deposed): nothing more goes out."""
        self._stopped = True
        for broker_id in list(self._senders):
            self.remove_broker(broker_id)

    async def shutdown(self) -> None:
        self.stop()
        if self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)
