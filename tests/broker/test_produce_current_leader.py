"""KIP-951 in Produce v10+: a NOT_LEADER_OR_FOLLOWER partition carries the leader and epoch this broker
knows (its own replica's view, else the metadata cache's) and the response the endpoints of those
leaders on the request's listener, as Kafka's KafkaApis.getCurrentLeader; before v10 neither."""

from __future__ import annotations

from broker.metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache
from broker.produce_apis import ProduceApis
from broker.replica_manager import ReplicaManager
from protocol.errors import ErrorCode
from protocol.messages import ProduceResponse
from storage.log_manager import LogManager
from tests.broker.controller_requests import leader_and_isr, update_metadata
from tests.broker.test_produce_record_errors import (
    TOPIC,
    batch,
    partition_response,
    produce,
    respond,
)
from tests.support.handler_requests import FakeConnection


async def setup(logs: LogManager) -> tuple[ProduceApis, MetadataCache]:
    """Broker 1 leads partition 0, follows partition 1 (led by broker 2, epoch 4); partition 2 has no
    replica here and is led by broker 3 (epoch 7), partition 3 by broker 4, who is not alive."""
    cache = MetadataCache("cluster")
    cache.add_broker(BrokerInfo(1, None))
    manager = ReplicaManager(1, logs, cache)
    await manager.become_leader_or_follower(leader_and_isr(TOPIC, {0: [1]}), 6)
    await manager.become_leader_or_follower(leader_and_isr(TOPIC, {1: [2, 1]}, leader_epoch=4), 6)
    cache.update(update_metadata({1: ("h1", 9092), 2: ("h2", 9093)}, TOPIC, {0: [1], 1: [2, 1]}), 6)
    cache.update(update_metadata({1: ("h1", 9092), 2: ("h2", 9093)}, TOPIC, {1: [2, 1]}, leader_epoch=4), 6)
    cache.update(update_metadata({1: ("h1", 9092), 2: ("h2", 9093)}, TOPIC, {2: [3]}, leader_epoch=7), 6)
    cache.update(update_metadata({1: ("h1", 9092), 2: ("h2", 9093)}, TOPIC, {3: [4]}), 6)
    cache.add_broker(
        BrokerInfo(3, "rack-c", {"PLAINTEXT": BrokerEndpoint("h3", 9094), "SSL": BrokerEndpoint("h3", 9095)})
    )
    return ProduceApis(cache, manager), cache


async def test_not_leader_carries_the_current_leader_and_its_endpoint_from_v10(logs: LogManager) -> None:
    apis, _ = await setup(logs)
    response = await respond(apis, produce({i: batch([b"k"]) for i in range(4)}, version=10))
    assert partition_response(response, 0).error_code == ErrorCode.NONE
    assert partition_response(response, 0).current_leader is None
    leaders = {}
    for i in (1, 2, 3):
        p = partition_response(response, i)
        assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert p.current_leader is not None
        leaders[i] = (p.current_leader.leader_id, p.current_leader.leader_epoch)
    # Partition 1 from this broker's follower replica, 2 and 3 from the metadata cache.
    assert leaders == {1: (2, 4), 2: (3, 7), 3: (4, 0)}
    # Broker 4 is not alive: no endpoint for it.
    assert sorted((n.node_id, n.host, n.port, n.rack) for n in response.node_endpoints) == [
        (2, "h2", 9093, None),
        (3, "h3", 9094, "rack-c"),
    ]
    # On the wire (tagged fields), as a v10 client reads them.
    decoded = ProduceResponse.decode(response.encode(10), 10)
    p = partition_response(decoded, 2)
    assert p.current_leader is not None and (p.current_leader.leader_id, p.current_leader.leader_epoch) == (
        3,
        7,
    )
    assert sorted(n.node_id for n in decoded.node_endpoints) == [2, 3]


async def test_the_endpoint_is_the_one_on_the_request_listener(logs: LogManager) -> None:
    apis, _ = await setup(logs)
    connection = FakeConnection()
    connection.listener = "SSL"  # type: ignore[misc]
    response = await respond(
        apis, produce({1: batch([b"k"]), 2: batch([b"k"])}, version=11, connection=connection)
    )
    assert partition_response(response, 1).current_leader is not None  # broker 2 has no SSL listener
    assert [(n.node_id, n.port) for n in response.node_endpoints] == [(3, 9095)]


async def test_before_v10_there_is_no_leader_hint(logs: LogManager) -> None:
    apis, _ = await setup(logs)
    response = await respond(apis, produce({2: batch([b"k"])}, version=9))
    p = partition_response(response, 2)
    assert (p.error_code, p.current_leader, response.node_endpoints) == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        None,
        [],
    )


async def test_an_unknown_partition_gets_no_leader_hint(logs: LogManager) -> None:
    apis, _ = await setup(logs)
    response = await respond(apis, produce({9: batch([b"k"])}, version=11))
    p = partition_response(response, 9)
    assert (p.error_code, p.current_leader, response.node_endpoints) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        None,
        [],
    )
