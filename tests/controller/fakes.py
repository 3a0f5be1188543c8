"""In-process fakes for the controller's unit tests: ZooKeeper state kept in a dict (with zkVersions,
lost races and a deposed controller on demand; partition states, topic configs, replica assignments and
the /admin requests) and a request sender that records what would go out."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from kazoo.exceptions import NodeExistsError

from controller.context import ControllerContext, LiveBroker, ReplicaAssignment, TopicPartition
from controller.controller_zk import ControllerMovedError, StateUpdateResult
from protocol.api import Api
from zk.znodes import BrokerRegistration, PartitionState


class FakeZk:
    """The partition-state part of ControllerZkClient, in memory."""

    def __init__(self) -> None:
        self.states: dict[TopicPartition, PartitionState] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.races: set[TopicPartition] = set()  # the next write of these loses to someone else's
        self.moved = False  # another controller was elected: every write fails the epoch check
        self.writes = 0
        self.assignments: dict[TopicPartition, ReplicaAssignment] = {}  # as in /brokers/topics/<t>
        self.reassign_request: dict[TopicPartition, list[int]] | None = None  # /admin/reassign_partitions
        self.preferred_request: list[TopicPartition] | None = None  # /admin/preferred_replica_election

    def _check_epoch(self) -> None:
        if self.moved:
            raise ControllerMovedError("another controller was elected")

    async def partition_states(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Any]:
        return {tp: self.states.get(tp) for tp in partitions}

    async def create_partition_states(
        self, states: dict[TopicPartition, PartitionState], epoch_zk_version: int
    ) -> dict[TopicPartition, Any]:
        self._check_epoch()
        results: dict[TopicPartition, Any] = {}
        for tp, state in states.items():
            if tp in self.states:
                results[tp] = NodeExistsError()
            else:
                self.writes += 1
                results[tp] = self.states[tp] = dataclasses.replace(state, zk_version=0)
        return results

    async def update_partition_states(
        self, states: dict[TopicPartition, PartitionState], epoch_zk_version: int
    ) -> StateUpdateResult:
        self._check_epoch()
        written, retry = {}, []
        for tp, state in states.items():
            stored = self.states[tp]
            if tp in self.races:
                self.races.discard(tp)
                self.states[tp] = dataclasses.replace(stored, zk_version=stored.zk_version + 1)
                retry.append(tp)
            elif stored.zk_version != state.zk_version:
                retry.append(tp)
            else:
                self.writes += 1
                written[tp] = self.states[tp] = dataclasses.replace(state, zk_version=stored.zk_version + 1)
        return StateUpdateResult(written, retry, {})

    async def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        return {t: self.configs.get(t, {}) for t in topics}

    async def set_replica_assignment(
        self, partition: TopicPartition, assignment: ReplicaAssignment, epoch_zk_version: int
    ) -> None:
        self._check_epoch()
        self.writes += 1
        self.assignments[partition] = assignment

    async def reassignment_request(self) -> dict[TopicPartition, list[int]] | None:
        return None if self.reassign_request is None else dict(self.reassign_request)

    async def set_reassignment_request(
        self, assignments: dict[TopicPartition, list[int]], epoch_zk_version: int
    ) -> None:
        self._check_epoch()
        self.reassign_request = dict(assignments) if assignments else None

    async def preferred_replica_election_request(self) -> list[TopicPartition] | None:
        return self.preferred_request

    async def delete_preferred_replica_election(self, epoch_zk_version: int) -> None:
        self._check_epoch()
        self.preferred_request = None


class RecordingSender:
    """Stands in for the channel manager: records (broker id, api key, request) and keeps callbacks."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int, Any]] = []
        self.callbacks: list[Callable[[Any], None] | None] = []

    def endpoint(self, broker_id: int) -> tuple[str, int] | None:
        return ("host", 9000 + broker_id)

    def send(
        self, broker_id: int, api: Api, version: int, body: Any, callback: Callable[[Any], None] | None
    ) -> None:
        self.sent.append((broker_id, api.key, body))
        self.callbacks.append(callback)

    def to(self, broker_id: int, api_key: int | None = None) -> list[Any]:
        return [b for (to, key, b) in self.sent if to == broker_id and (api_key is None or key == api_key)]

    def kinds(self, broker_id: int) -> list[int]:
        return [key for (to, key, _) in self.sent if to == broker_id]


def live_broker(broker_id: int) -> LiveBroker:
    registration = BrokerRegistration(
        broker_id, {"PLAINTEXT": ("host", 9000 + broker_id)}, {"PLAINTEXT": "PLAINTEXT"}
    )
    return LiveBroker(registration, 100 + broker_id)


def make_context(
    live: Iterable[int], assignments: dict[str, dict[int, list[int]]], epoch: int = 3
) -> ControllerContext:
    import uuid

    context = ControllerContext(epoch=epoch, epoch_zk_version=epoch - 1)
    context.live_brokers = {b: live_broker(b) for b in live}
    for topic, partitions in assignments.items():
        context.add_topic(topic, uuid.uuid4(), partitions)
    return context
