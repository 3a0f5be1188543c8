"""The ZooKeeper client's metrics (zk/zk_metrics.py) against a real server: the session state, the
request latency histogram, and the expiry and (re)connect counters."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KeeperState

from server_common.metrics import Metrics
from zk.client import ZkClient
from zk.server import ZooKeeperServer
from zk.zk_metrics import register_zookeeper_metrics, session_state

S = "kafka_server_sessionexpirelistener_"
LATENCY = "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms"


def test_session_states_are_zookeepers_names() -> None:
    def client(state: str, session_id: int = 5) -> ZkClient:
        return SimpleNamespace(kazoo=SimpleNamespace(client_state=state), session_id=session_id)  # type: ignore[return-value]

    assert session_state(client(KeeperState.CONNECTED)) == "CONNECTED"
    assert session_state(client(KeeperState.CONNECTED_RO)) == "CONNECTEDREADONLY"
    assert session_state(client(KeeperState.CONNECTING)) == "CONNECTING"
    assert session_state(client(KeeperState.EXPIRED_SESSION)) == "CLOSED"
    assert session_state(client(KeeperState.AUTH_FAILED)) == "AUTH_FAILED"
    assert session_state(client(KeeperState.CLOSED, session_id=0)) == "NOT_CONNECTED"


@pytest.mark.integration
async def test_latency_state_and_an_expired_session_are_measured(zookeeper_server: ZooKeeperServer) -> None:
    metrics = Metrics(process=False)
    zk = ZkClient(zookeeper_server.connect_string, 4000, operation_timeout=10)
    register_zookeeper_metrics(metrics, zk)  # before the start, as the controller does
    assert metrics.sample(S + "sessionstate", {"state": "NOT_CONNECTED"}) == 1
    await zk.start()
    try:
        assert metrics.sample(S + "sessionstate", {"state": "CONNECTED"}) == 1
        assert metrics.sample(S + "sessionstate", {"state": "CONNECTING"}) == 0
        assert metrics.sample(S + "zookeepersyncconnects_total") == 1
        before = metrics.sample(LATENCY + "_count") or 0
        for _ in range(5):
            await zk.exists("/")
        await zk.get("/no-such-node")  # an error answer is timed too
        assert metrics.sample(LATENCY + "_count") == before + 6
        assert (metrics.sample(LATENCY + "_sum") or 0) > 0

        # Expire the session from outside: a second connection with its id and password, closed.
        session_id, password = zk.kazoo.client_id
        twin = KazooClient(zookeeper_server.connect_string, client_id=(session_id, password))
        await asyncio.to_thread(twin.start)
        await asyncio.to_thread(twin.stop)
        await asyncio.to_thread(twin.close)
        for _ in range(200):
            if (
                metrics.sample(S + "zookeeperexpires_total")
                and zk.kazoo.client_state == KeeperState.CONNECTED
            ):
                break
            await asyncio.sleep(0.05)
        assert metrics.sample(S + "zookeeperexpires_total") == 1
        assert (metrics.sample(S + "zookeeperdisconnects_total") or 0) >= 1
        assert metrics.sample(S + "zookeepersyncconnects_total") == 2  # kazoo made a new session
        assert metrics.sample(S + "sessionstate", {"state": "CONNECTED"}) == 1
    finally:
        await zk.close()
