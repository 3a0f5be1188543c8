"""KafkaZkClient: the broker's operations on Kafka's ZooKeeper layout (Kafka's ``KafkaZkClient``).

Bootstrapping the layout, the cluster id, the broker's ephemeral registration, whose creation zxid is
its broker epoch, and the reads that say which controller is the active one.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kazoo.exceptions import NodeExistsError

from zk import znodes
from zk.client import ZkClient

log = logging.getLogger(__name__)


class BrokerIdInUseError(RuntimeError):
    pass


class KafkaZkClient:
    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    async def create_top_level_paths(self) -> None:
        for path in znodes.PERSISTENT_PATHS:
            await self.zk.ensure_path(path)

    async def get_or_create_cluster_id(self, proposed: str) -> str:
        """The cluster's id from /cluster/id; the first broker to get there stores ``proposed``."""
        existing = await self.zk.get(znodes.CLUSTER_ID)
        if existing is not None:
            return znodes.decode_cluster_id(existing[0])
        try:
            await self.zk.create(znodes.CLUSTER_ID, znodes.encode_cluster_id(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            found = await self.zk.get(znodes.CLUSTER_ID)
            assert found is not None
            return znodes.decode_cluster_id(found[0])

    async def register_broker(self, registration: znodes.BrokerRegistration, wait_for_old: float) -> int:
        """Creates /brokers/ids/<id> and returns the broker epoch (the node's czxid).

        A node left by this broker's previous incarnation (killed before its session ended) disappears
        when that session expires; wait up to ``wait_for_old`` seconds for it rather than fail.
        """
        path = znodes.broker_path(registration.id)
        deadline = time.monotonic() + wait_for_old
        announced = False
        while True:
            try:
                stat = await self.zk.create_returning_stat(path, registration.encode(), ephemeral=True)
            except NodeExistsError:
                found = await self.zk.get(path)
                if found is not None and found[1].ephemeralOwner == self.zk.session_id:
                    return found[1].czxid
                if time.monotonic() > deadline:
                    raise BrokerIdInUseError(
                        f"broker id {registration.id} is registered by another live broker ({path})"
                    ) from None
                if not announced:
                    log.info("%s is held by an earlier session; waiting for it to expire", path)
                    announced = True
                await asyncio.sleep(0.25)
                continue
            log.info("registered broker %d at %s with broker epoch %d", registration.id, path, stat.czxid)
            return stat.czxid

    async def get_controller_id(self) -> int | None:
        """The active controller's id from ``/controller``; None while no controller is elected."""
        found = await self.zk.get(znodes.CONTROLLER)
        return None if found is None else znodes.decode_controller(found[0])

    async def get_controller_epoch(self) -> int | None:
        """``/controller_epoch``: the epoch of the latest controller elected; None before the first."""
        found = await self.zk.get(znodes.CONTROLLER_EPOCH)
        return None if found is None else znodes.decode_controller_epoch(found[0])

    async def get_registered_broker_epoch(self, broker_id: int) -> int | None:
        """The broker epoch (czxid) of ``/brokers/ids/<broker_id>`` if this session holds that
        registration; None if the node is missing or another session's."""
        found = await self.zk.get(znodes.broker_path(broker_id))
        if found is None or found[1].ephemeralOwner != self.zk.session_id:
            return None
        return found[1].czxid
