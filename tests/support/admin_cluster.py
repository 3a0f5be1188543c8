"""``AdminCluster``: the admin-API tests' cluster (tests/broker/test_admin_cluster.py,
test_admin_clients.py): a ``Cluster`` (LocalCluster) of one controller and ``size`` brokers on a
ZooKeeper chroot of its own, with the raw clients, metadata and znode views those tests ask it for."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from protocol.api import ApiKey
from protocol.messages import MetadataRequest
from tests.support.cluster import Cluster, chroot
from tests.support.raw_client import RawClient
from zk.server import ZooKeeperServer

# Every broker's own settings in these tests.
ADMIN_BROKER_SETTINGS = {
    "num.partitions": "1",
    "log.cleaner.enable": "false",
    # The last brokers to stop still lead partitions; waiting for leadership to move is for the
    # shutdown tests, not these.
    "controlled.shutdown.enable": "false",
}


class AdminCluster:
    """ZooKeeper (a chroot of the shared server), one controller and ``size`` brokers (ids 1..size), with
    ``racks`` (broker id -> rack) and ``broker_overrides``; ``controller`` and ``brokers`` are its nodes,
    ``zk`` a kazoo client of its chroot once started."""

    def __init__(
        self,
        workdir: Path,
        zookeeper: str,
        size: int = 3,
        broker_overrides: dict[str, str] | None = None,
        racks: dict[int, str] | None = None,
    ) -> None:
        self.cluster = Cluster(
            workdir,
            zookeeper,
            brokers=size,
            broker_overrides={**ADMIN_BROKER_SETTINGS, **(broker_overrides or {})},
        )
        for broker_id, rack in (racks or {}).items():
            self.cluster.broker(broker_id).overrides["broker.rack"] = rack
        self.controller = self.cluster.controller(9001)
        self.brokers = list(self.cluster.brokers.values())
        self.zk: Any = None
        self._clients: list[RawClient] = []

    def start(self) -> AdminCluster:
        self.cluster.start()
        try:
            self.zk = self.cluster.zk()
            self.wait_for(self._all_brokers_known, 20, "the controller to announce every broker")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for client in self._clients:
            client.close()
        self._clients.clear()
        self.zk = None
        self.cluster.stop()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def client(self, broker_id: int = 1) -> RawClient:
        client = RawClient(self.cluster.broker(broker_id).bootstrap, timeout=30)
        self._clients.append(client)
        return client

    def request(self, api_key: int, version: int, body: object, broker_id: int = 1) -> Any:
        return self.client(broker_id).request(api_key, version, body)

    def metadata(self, topics: list[str] | None, broker_id: int = 1) -> Any:
        wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        body = MetadataRequest(topics=wanted, allow_auto_topic_creation=False)
        return self.request(ApiKey.METADATA, 12, body, broker_id)

    def _all_brokers_known(self) -> bool:
        return all(len(self.metadata([], b.broker_id).brokers) == len(self.brokers) for b in self.brokers)

    def leaders_everywhere(self, topic: str, partitions: int) -> bool:
        """Every broker's metadata shows ``partitions`` partitions of ``topic``, each with a leader."""
        for broker in self.brokers:
            found = self.metadata([topic], broker.broker_id).topics[0]
            if found.error_code or len(found.partitions) != partitions:
                return False
            if any(p.leader_id < 0 for p in found.partitions):
                return False
        return True

    @staticmethod
    def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.05)

    def znode(self, path: str) -> Any:
        """The JSON at ``path``, or None when the node does not exist."""
        from kazoo.exceptions import NoNodeError

        assert self.zk is not None
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return None
        return json.loads(data) if data else {}

    def logs(self) -> str:
        return "\n".join([self.controller.log(), *(b.log() for b in self.brokers)])


@contextlib.contextmanager
def admin_cluster(base: Path, server: ZooKeeperServer, **kwargs: Any) -> Iterator[AdminCluster]:
    """A started AdminCluster in a fresh chroot, stopped on exit."""
    cluster = AdminCluster(base, chroot(server, f"samsa-admin-{uuid.uuid4().hex[:6]}"), **kwargs).start()
    try:
        yield cluster
    finally:
        cluster.stop()
