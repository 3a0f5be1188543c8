"""The console's connection to the cluster: one long-lived AdminClient, started when first needed and
started again after the cluster could not be reached, and the settings for aiokafka's consumer and
producer (the same TLS/SASL as the admin client, from ``--command-config``)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from network.client_security import ClientSecurity
from tools.admin_client import AdminClient, AdminError
from tools.command_config import aiokafka_security

log = logging.getLogger(__name__)


class ClusterUnavailable(Exception):
    """The cluster could not be reached or refused a request; the message says so in words."""


class ConsoleClient:
    def __init__(
        self, bootstrap_servers: str, security: ClientSecurity | None = None, timeout: float = 15.0
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.security = security
        self.timeout = timeout
        self._admin: AdminClient | None = None
        self._lock = asyncio.Lock()

    async def admin(self) -> AdminClient:
        """The started AdminClient (its metadata refreshed at start); ClusterUnavailable when no
        bootstrap server answers."""
        async with self._lock:
            if self._admin is None:
                admin = AdminClient(
                    self.bootstrap_servers,
                    client_id="samsa-console",
                    timeout=self.timeout,
                    security=self.security,
                )
                try:
                    await admin.start()
                except (AdminError, OSError, TimeoutError) as e:
                    await admin.close()
                    raise ClusterUnavailable(
                        f"Cannot reach the cluster at {self.bootstrap_servers}: {e}"
                    ) from None
                self._admin = admin
            return self._admin

    async def reset(self) -> None:
        """Drops the admin client after a failure, so that the next request bootstraps again."""
        async with self._lock:
            if self._admin is not None:
                await self._admin.close()
                self._admin = None

    def kafka_settings(self) -> dict[str, Any]:
        """aiokafka's AIOKafkaConsumer/AIOKafkaProducer keyword arguments for this cluster."""
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "client_id": "samsa-console",
            **aiokafka_security(self.security),
        }

    async def close(self) -> None:
        await self.reset()
