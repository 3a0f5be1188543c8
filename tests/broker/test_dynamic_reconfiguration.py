"""Dynamic broker configs applied while running (broker/dynamic_config.py): the reconfigurables each
part exposes — the handler pool's workers, the connection limits, the listeners, the log cleaner's
threads — and DynamicBrokerConfig handing them the old and new configuration, with Kafka's listener
checks."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from broker.config import KafkaConfig
from broker.dynamic_config import (
    DynamicBrokerConfig,
    DynamicConfigError,
    applied_at_once,
)
from broker.replica_fetcher import FetchSettings, ReplicaFetcher, ReplicaFetcherManager
from network.acceptor import ConnectionQuotas
from network.handler_pool import KafkaRequestHandlerPool
from network.request_channel import RequestChannel
from network.socket_server import SocketServer
from server_common.config import parse_endpoints
from storage.cleaner import LogCleaner

BASE = {"broker.id": "1", "zookeeper.connect": "zk:2181", "listeners": "PLAINTEXT://127.0.0.1:0"}


def config(**overrides: str) -> KafkaConfig:
    return KafkaConfig({**BASE, **{k.replace("_", "."): v for k, v in overrides.items()}})


async def until(condition: Callable[[], Any], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


class _Connection:
    def __init__(self) -> None:
        self.completed: list[int] = []

    def complete(self, request: Any, response: Any) -> None:
        self.completed.append(request.correlation_id)

    def handled(self, request: Any) -> None:
        pass

    def close(self) -> None:
        pass


class _Request:
    def __init__(self, connection: _Connection, correlation_id: int) -> None:
        self.connection = connection
        self.correlation_id = correlation_id


class _BlockingApis:
    """Handles each request by waiting on its gate: the number of requests in hand is the number of
    workers busy."""

    def __init__(self) -> None:
        self.in_hand = 0
        self.gate = asyncio.Event()

    async def handle(self, request: Any) -> None:
        self.in_hand += 1
        try:
            await self.gate.wait()
        finally:
            self.in_hand -= 1


async def test_num_io_threads_resize_adds_workers_and_retires_them_after_their_request() -> None:
    channel = RequestChannel(100)
    apis = _BlockingApis()
    pool = KafkaRequestHandlerPool(channel, apis, 2)  # type: ignore[arg-type]
    pool.start()
    connection = _Connection()
    try:
        for i in range(6):
            await channel.send_request(_Request(connection, i))  # type: ignore[arg-type]
        await until(lambda: apis.in_hand == 2)
        pool.resize(4)
        await until(lambda: apis.in_hand == 4)  # two more workers took requests at once
        pool.resize(2)
        await asyncio.sleep(0.05)
        assert apis.in_hand == 4  # the requests in hand are not cut short
        apis.gate.set()
        await until(lambda: len(connection.completed) == 6)
        assert sorted(connection.completed) == list(range(6))
        apis.gate.clear()
        await until(lambda: len(pool._tasks) == 2)  # the retired workers ended after their request
        for i in range(6, 9):
            await channel.send_request(_Request(connection, i))  # type: ignore[arg-type]
        await until(lambda: apis.in_hand == 2)
        await asyncio.sleep(0.05)
        assert apis.in_hand == 2 and pool.size == 2
        apis.gate.set()
        await until(lambda: len(connection.completed) == 9)
    finally:
        await pool.shutdown()


async def test_connection_quotas_update_applies_to_the_next_connection_and_wakes_the_acceptor() -> None:
    quotas = ConnectionQuotas(1, 5, {})
    quotas.opened("10.0.0.1")
    waiting = asyncio.get_running_loop().create_task(quotas.wait_for_slot())
    await asyncio.sleep(0.01)
    assert not waiting.done()  # max.connections reached
    quotas.update(10, 1, {"10.0.0.9": 3})
    await asyncio.wait_for(waiting, 1)
    assert not quotas.ip_allowed("10.0.0.1")  # max.connections.per.ip lowered to 1
    assert quotas.ip_allowed("10.0.0.2")
    for _ in range(3):
        assert quotas.ip_allowed("10.0.0.9")
        quotas.opened("10.0.0.9")
    assert not quotas.ip_allowed("10.0.0.9")  # its override


async def test_listeners_added_accept_at_once_and_removed_ones_close_their_connections() -> None:
    class _Handler:
        async def handle(self, request: Any) -> None:
            return None

    server = SocketServer(config(), _Handler(), lambda key: None)  # type: ignore[arg-type]
    server.start_processing()
    try:
        protocols = {"PLAINTEXT": "PLAINTEXT", "EXTRA": "PLAINTEXT"}
        server.add_listeners(parse_endpoints("listeners", ["EXTRA://127.0.0.1:0"], protocols))
        port = server.bound_ports["EXTRA"]
        loop = asyncio.get_running_loop()
        client = socket.socket()
        client.setblocking(False)
        await loop.sock_connect(client, ("127.0.0.1", port))
        await until(lambda: any(p.connections for p in server.processors))
        await server.remove_listeners({"EXTRA"})
        assert "EXTRA" not in server.bound_ports
        assert await asyncio.wait_for(loop.sock_recv(client, 10), 2) == b""  # closed by the broker
        client.close()
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    finally:
        await server.shutdown()


def test_cleaner_threads_change_at_runtime_and_a_retired_thread_ends() -> None:
    cleaner = LogCleaner(lambda: [], backoff_ms=60_000)
    cleaner.start(1)
    try:
        cleaner.reconfigure(3, 24 * 1000, 50)
        names = {t.name for t in threading.enumerate()}
        assert {f"kafka-log-cleaner-thread-{i}" for i in range(3)} <= names
        assert cleaner.max_map_entries == 1000 and cleaner.backoff_ms == 50
        cleaner.reconfigure(1, 24 * 1000, 50)
        deadline = time.monotonic() + 5
        while any(t.name == "kafka-log-cleaner-thread-2" for t in threading.enumerate()):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert any(t.name == "kafka-log-cleaner-thread-0" for t in threading.enumerate())
    finally:
        cleaner.shutdown()
    assert not any(t.name.startswith("kafka-log-cleaner-thread") for t in threading.enumerate())


async def test_reconfigure_hands_the_old_and_new_configuration_to_each_reconfigurable() -> None:
    dynamic = DynamicBrokerConfig(config())
    seen: list[tuple[KafkaConfig, KafkaConfig]] = []

    async def reconfigurable(old: KafkaConfig, new: KafkaConfig) -> None:
        seen.append((old, new))

    def broken(old: KafkaConfig, new: KafkaConfig) -> None:
        raise RuntimeError("boom")

    dynamic.reconfigurables += [broken, reconfigurable]  # one failing does not stop the others
    dynamic.per_broker = {
        "advertised.listeners": "PLAINTEXT://localhost:9092",
        "max.connections.per.ip": "7",
        "num.io.threads": "16",
    }
    await dynamic.reconfigure()
    [(old, new)] = seen
    assert old["num.io.threads"] == 8 and new["num.io.threads"] == 16
    assert new["max.connections.per.ip"] == 7
    assert [(e.host, e.port) for e in new.advertised_listeners] == [("localhost", 9092)]
    assert dynamic.current is new and new.originals == dynamic.config.originals
    dynamic.per_broker = {}
    await dynamic.reconfigure()
    assert seen[1][1]["num.io.threads"] == 8  # a deleted override goes back to server.properties


def test_listener_changes_are_checked_as_kafka_checks_them() -> None:
    dynamic = DynamicBrokerConfig(config())
    dynamic.validate(
        {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
            "listeners": "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0",
        },
        per_broker=True,
    )
    # A SASL listener needs mechanisms Samsa serves (Kafka's default GSSAPI is not one).
    with pytest.raises(DynamicConfigError, match=r"sasl\.enabled\.mechanisms='GSSAPI'"):
        dynamic.validate(
            {
                "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT",
                "listeners": "PLAINTEXT://127.0.0.1:0",
            },
            per_broker=True,
        )
    with pytest.raises(DynamicConfigError, match="Security protocol cannot be updated for existing listener"):
        dynamic.validate(
            {
                "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT",
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "listener.name.plaintext.sasl.enabled.mechanisms": "PLAIN",
            },
            per_broker=True,
        )
    with pytest.raises(DynamicConfigError, match="inter-broker listener PLAINTEXT"):
        dynamic.validate(
            {
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
                "listeners": "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0",
                "advertised.listeners": "EXTRA://localhost:9093",
            },
            per_broker=True,
        )


def test_what_applies_at_once_is_named() -> None:
    for name in (
        "advertised.listeners",
        "listeners",
        "max.connections.per.ip",
        "num.io.threads",
        "log.cleaner.threads",
        "message.max.bytes",
    ):
        assert applied_at_once(name), name
    for name in ("num.network.threads", "background.threads", "num.recovery.threads.per.data.dir"):
        assert not applied_at_once(name), name


async def test_a_listener_whose_port_is_taken_is_not_added_and_the_rest_still_are() -> None:
    class _Handler:
        async def handle(self, request: Any) -> None:
            return None

    server = SocketServer(config(), _Handler(), lambda key: None)  # type: ignore[arg-type]
    taken = socket.create_server(("127.0.0.1", 0))
    try:
        protocols = {"PLAINTEXT": "PLAINTEXT", "TAKEN": "PLAINTEXT", "FREE": "PLAINTEXT"}
        server.add_listeners(
            parse_endpoints(
                "listeners",
                [f"TAKEN://127.0.0.1:{taken.getsockname()[1]}", "FREE://127.0.0.1:0"],
                protocols,
            )
        )
        assert set(server.bound_ports) == {"PLAINTEXT", "FREE"}
    finally:
        taken.close()
        await server.shutdown()


class _Followed:
    """What the fetcher manager reads of a followed partition."""

    def __init__(self, partition: int) -> None:
        self.key = ("resized", partition)
        self.leader_id = 2
        self.leader_epoch = 0


async def test_replica_fetchers_resize_moves_partitions_and_stops_the_fetchers_beyond(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def idle(self: ReplicaFetcher) -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(ReplicaFetcher, "_run", idle)
    manager = ReplicaFetcherManager(FetchSettings(1, 500, 1, 10_000_000, 1_000_000, 1000, 30_000), 1)
    partitions = [_Followed(p) for p in range(8)]
    for partition in partitions:
        manager.add_partition(partition, "127.0.0.1", 1)  # type: ignore[arg-type]

    def fetchers_of() -> dict[tuple[str, int], int]:
        return {key: index for key, (_, index) in manager._owner.items()}

    assert set(fetchers_of().values()) == {0}
    manager.resize(2)
    assert fetchers_of() == {p.key: manager._index(p.key) for p in partitions}
    assert set(fetchers_of().values()) == {0, 1}  # some moved to the new fetcher
    assert sorted(len(f) for f in manager._fetchers.values()) == sorted(
        list(fetchers_of().values()).count(i) for i in (0, 1)
    )
    manager.resize(1)
    assert set(fetchers_of().values()) == {0} and list(manager._fetchers) == [(2, 0)]
    assert len(manager._fetchers[(2, 0)]) == 8
    await manager.shutdown()
    await asyncio.gather(*manager._retiring)
