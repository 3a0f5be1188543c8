"""An in-process stand-in for a broker, for checking what the controller sends: it registers
``/brokers/ids/<id>`` in ZooKeeper (with its own session, so that it can die), serves the Kafka protocol
with the broker's own network layer, records every controller request, and answers as a broker does
(STALE_CONTROLLER_EPOCH for an older controller epoch than it has seen)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from network.acceptor import Acceptor, ConnectionQuotas
from network.handler_pool import KafkaRequestHandlerPool
from network.processor import Processor
from network.request_channel import Request, RequestChannel
from protocol.api import Api, ApiKey, api
from protocol.errors import ErrorCode
from protocol.messages import (
    ApiVersionsResponse,
    LeaderAndIsrResponse,
    Message,
    StopReplicaResponse,
    UpdateMetadataResponse,
)
from server_common.config import Endpoint
from zk import znodes
from zk.client import ZkClient

_SERVED = {
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.LEADER_AND_ISR: (0, 7),
    ApiKey.STOP_REPLICA: (0, 4),
    ApiKey.UPDATE_METADATA: (0, 8),
}


@dataclass
class Received:
    api_key: int
    version: int
    body: Any
    at: float


class FakeBroker:
    def __init__(self, broker_id: int, zookeeper: str, rack: str | None = None) -> None:
        self.id = broker_id
        self.zookeeper = zookeeper
        self.rack = rack
        self.received: list[Received] = []
        self.highest_controller_epoch = 0
        self.stop_replica_error = ErrorCode.NONE  # what StopReplica answers per partition
        self.epoch = -1  # the czxid of its registration
        self.port = 0
        self.zk: ZkClient | None = None
        self._acceptor: Acceptor | None = None
        self._processors: list[Processor] = []
        self._pool: KafkaRequestHandlerPool | None = None
        self._supported: dict[int, tuple[Api, int, int]] = {
            key: (api(key), low, high)
            for key, (low, high) in _SERVED.items()  # type: ignore[misc]
        }

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> FakeBroker:
        channel = RequestChannel(100)
        self._pool = KafkaRequestHandlerPool(channel, self, 1)
        self._pool.start()
        quotas = ConnectionQuotas(1000, 1000, {})
        self._processors = [Processor(0, channel, self.supported, 100 << 20, quotas.closed)]
        self._acceptor = Acceptor(
            Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 0), self._processors, quotas, 50, 0, 0
        )
        self._acceptor.start()
        self.port = self._acceptor.port
        await self.register()
        return self

    async def register(self) -> None:
        """Registers in ZooKeeper with a new session (a new broker epoch)."""
        self.zk = ZkClient(self.zookeeper, 4000, operation_timeout=10)
        await self.zk.start()
        registration = znodes.BrokerRegistration(
            self.id, {"PLAINTEXT": ("127.0.0.1", self.port)}, {"PLAINTEXT": "PLAINTEXT"}, self.rack
        )
        await self.zk.create(
            znodes.broker_path(self.id), registration.encode(), ephemeral=True, makepath=True
        )
        found = await self.zk.get(znodes.broker_path(self.id))
        assert found is not None
        self.epoch = found[1].czxid

    async def deregister(self) -> None:
        """Closes its session: its registration disappears at once, as when a broker dies."""
        if self.zk is not None:
            await self.zk.close()
            self.zk = None

    async def stop(self) -> None:
        await self.deregister()
        if self._acceptor is not None:
            await self._acceptor.close()
        for processor in self._processors:
            processor.close_all()
        if self._pool is not None:
            await self._pool.shutdown()

    # -- what it received -----------------------------------------------------------------------

    def requests(self, api_key: int) -> list[Any]:
        return [r.body for r in self.received if r.api_key == api_key]

    def leader_and_isr_states(self) -> dict[tuple[str, int], Any]:
        """The latest LeaderAndIsr partition state received per (topic, partition)."""
        states: dict[tuple[str, int], Any] = {}
        for request in self.requests(ApiKey.LEADER_AND_ISR):
            for topic in request.topic_states:
                for p in topic.partition_states:
                    states[(topic.topic_name, p.partition_index)] = p
        return states

    def metadata_states(self) -> dict[tuple[str, int], Any]:
        """The latest UpdateMetadata partition state received per (topic, partition)."""
        states: dict[tuple[str, int], Any] = {}
        for request in self.requests(ApiKey.UPDATE_METADATA):
            for topic in request.topic_states:
                for p in topic.partition_states:
                    states[(topic.topic_name, p.partition_index)] = p
        return states

    def stop_replicas(self) -> list[tuple[str, int, int, bool]]:
        """(topic, partition, leader epoch, delete) of every StopReplica partition received."""
        return [
            (t.topic_name, p.partition_index, p.leader_epoch, p.delete_partition)
            for request in self.requests(ApiKey.STOP_REPLICA)
            for t in request.topic_states
            for p in t.partition_states
        ]

    # -- serving --------------------------------------------------------------------------------

    def supported(self, api_key: int) -> tuple[Api, int, int] | None:
        return self._supported.get(api_key)

    async def handle(self, request: Request) -> Message:
        key = request.api.key
        body = request.body
        if key == ApiKey.API_VERSIONS:
            return ApiVersionsResponse(
                error_code=0,
                api_keys=[
                    ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                    for k, (lo, hi) in _SERVED.items()
                ],
            )
        self.received.append(Received(key, request.version, body, time.monotonic()))
        stale = body.controller_epoch < self.highest_controller_epoch
        self.highest_controller_epoch = max(self.highest_controller_epoch, body.controller_epoch)
        error = ErrorCode.STALE_CONTROLLER_EPOCH if stale else ErrorCode.NONE
        if key == ApiKey.LEADER_AND_ISR:
            return LeaderAndIsrResponse(
                error_code=error,
                topics=[
                    LeaderAndIsrResponse.LeaderAndIsrTopicError(
                        topic_id=t.topic_id,
                        partition_errors=[
                            LeaderAndIsrResponse.LeaderAndIsrPartitionError(
                                partition_index=p.partition_index, error_code=0
                            )
                            for p in t.partition_states
                        ],
                    )
                    for t in ([] if stale else body.topic_states)
                ],
            )
        if key == ApiKey.UPDATE_METADATA:
            return UpdateMetadataResponse(error_code=error)
        return StopReplicaResponse(
            error_code=error,
            partition_errors=[
                StopReplicaResponse.StopReplicaPartitionError(
                    topic_name=t.topic_name,
                    partition_index=p.partition_index,
                    error_code=self.stop_replica_error,
                )
                for t in ([] if stale else body.topic_states)
                for p in t.partition_states
            ],
        )


async def eventually(predicate: Any, timeout: float = 10.0, interval: float = 0.05) -> None:
    """Waits until ``predicate()`` (sync or async) is true; fails with the predicate's name."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout} s: {getattr(predicate, '__name__', predicate)}")
        await asyncio.sleep(interval)
