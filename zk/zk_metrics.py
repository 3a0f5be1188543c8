"""The ZooKeeper client's metrics, in brokers and controllers alike (``register_zookeeper_metrics``).

Kafka's ZooKeeperClient defines them (MBeans ``kafka.server:type=SessionExpireListener,name=...`` and
``kafka.server:type=ZooKeeperClientMetrics,name=ZooKeeperRequestLatencyMs``); here, named as the
Prometheus JMX exporter's Kafka rules name those:

- ``kafka_server_sessionexpirelistener_sessionstate{state}``: 1 for the session's current state, 0 for
  the others. Kafka's gauge is a string (ZooKeeper's ``States`` name), which the JMX exporter cannot
  export as a number; one series per state, as Prometheus encodes an enum, keeps the name.
- ``kafka_server_sessionexpirelistener_zookeeperexpires_total``, ``..._zookeeperdisconnects_total``,
  ``..._zookeepersyncconnects_total``: Kafka's ZooKeeperExpiresPerSec, ZooKeeperDisconnectsPerSec and
  ZooKeeperSyncConnectsPerSec meters as counters (kazoo's LOST, SUSPENDED and CONNECTED).
- ``kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms``: a histogram of the milliseconds
  from sending each request (every attempt of a retried one; a transaction is one) to its answer, as
  Kafka times it in ZooKeeperClient's callbacks. The watches' own reads (kazoo re-arms them) are not in it.
"""

from __future__ import annotations

from kazoo.client import KazooState
from kazoo.protocol.states import KeeperState

from server_common.metrics import Metrics
from zk.client import ZkClient

# ZooKeeper's org.apache.zookeeper.ZooKeeper.States names (what Kafka's SessionState gauge reads), by
# kazoo's KeeperState. kazoo reconnects by itself after an expiry (CONNECTING), where ZooKeeper's Java
# client stays CLOSED until Kafka makes a new one.
SESSION_STATES: dict[str, str] = {
    KeeperState.CONNECTING: "CONNECTING",
    KeeperState.CONNECTED: "CONNECTED",
    KeeperState.CONNECTED_RO: "CONNECTEDREADONLY",
    KeeperState.AUTH_FAILED: "AUTH_FAILED",
    KeeperState.CLOSED: "CLOSED",
    KeeperState.EXPIRED_SESSION: "CLOSED",
}
STATE_NAMES: tuple[str, ...] = (
    "CONNECTING",
    "ASSOCIATING",
    "CONNECTED",
    "CONNECTEDREADONLY",
    "CLOSED",
    "AUTH_FAILED",
    "NOT_CONNECTED",
)


def session_state(zk: ZkClient) -> str:
    """The session's state by ZooKeeper's name (``NOT_CONNECTED`` before the client first starts)."""
    if zk.session_id == 0 and zk.kazoo.client_state == KeeperState.CLOSED:
        return "NOT_CONNECTED"
    return SESSION_STATES.get(zk.kazoo.client_state, "NOT_CONNECTED")


def register_zookeeper_metrics(metrics: Metrics, zk: ZkClient) -> None:
    """Defines the ZooKeeper metrics in ``metrics`` and hooks them to ``zk`` (started or not yet)."""
    metrics.gauge(
        "kafka_server_sessionexpirelistener_sessionstate",
        "The ZooKeeper session's state: 1 for the current one (ZooKeeper's States names), 0 for the others",
        lambda: [((name,), 1 if name == session_state(zk) else 0) for name in STATE_NAMES],
        ("state",),
    )
    expires = metrics.counter(
        "kafka_server_sessionexpirelistener_zookeeperexpires",
        "ZooKeeper sessions that expired (their ephemeral nodes gone)",
    ).labels()
    disconnects = metrics.counter(
        "kafka_server_sessionexpirelistener_zookeeperdisconnects",
        "Connections to ZooKeeper lost (the session suspended)",
    ).labels()
    sync_connects = metrics.counter(
        "kafka_server_sessionexpirelistener_zookeepersyncconnects",
        "Connections to ZooKeeper made or made again",
    ).labels()
    counters = {
        KazooState.LOST: expires,
        KazooState.SUSPENDED: disconnects,
        KazooState.CONNECTED: sync_connects,
    }

    def on_state(state: str) -> None:
        counter = counters.get(state)
        if counter is not None:
            counter.inc()

    zk.add_session_listener(on_state)
    if zk.kazoo.connected:  # registered after the start (a broker's): its first connection counts too
        sync_connects.inc()
    zk.request_latency = metrics.histogram(
        "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms",
        "Milliseconds from sending a ZooKeeper request to its answer",
    ).labels()
