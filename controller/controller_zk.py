"""ControllerZkClient: the controller's reads of Kafka's ZooKeeper layout and its fenced writes (the
controller half of Kafka's KafkaZkClient).

Election is one transaction: create the ephemeral ``/controller`` and bump ``/controller_epoch`` on the
zkVersion just read (or create it with epoch 1), so two candidates cannot both win an epoch. After that,
every write goes in a transaction whose first op checks that ``/controller_epoch`` still has the
zkVersion this controller's election left there: once another controller has been elected the check
fails, nothing is applied, and ``ControllerMovedError`` is raised (KAFKA-6082). Partition state writes
are further conditional on the state znode's own zkVersion.

A write that ZkClient retried after a lost connection may find its first attempt applied (NodeExists,
BadVersion); the partition-state writes re-read the znode and accept it when it holds what was written.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from controller.context import LiveBroker, ReplicaAssignment, TopicPartition
from zk import reassignment_json, znodes
from zk.client import ZkClient, ZkOp, ZkTransactionError

log = logging.getLogger(__name__)

MAX_ASSIGNMENT_WRITES = 10


class ControllerMovedError(Exception):
    """This controller is no longer the active one: another was elected, or it resigned."""


@dataclass(frozen=True)
class TopicRecord:
    """``/brokers/topics/<topic>`` as read: the assignment, whether it carried a topic id, its zkVersion."""

    assignment: znodes.TopicAssignment
    has_topic_id: bool
    zk_version: int


@dataclass(frozen=True)
class StateUpdateResult:
    """The outcome of conditional partition-state writes."""

    written: dict[TopicPartition, znodes.PartitionState]  # with their new zkVersions
    retry: list[TopicPartition]  # lost a race on the zkVersion: re-read and decide again
    failed: dict[TopicPartition, Exception]


def _same_state(a: znodes.PartitionState, b: znodes.PartitionState) -> bool:
    return (a.leader, a.leader_epoch, a.isr, a.controller_epoch) == (
        b.leader,
        b.leader_epoch,
        b.isr,
        b.controller_epoch,
    )


class ControllerZkClient:
    def __init__(self, zk: ZkClient, is_fenced: Callable[[], bool]) -> None:
        self.zk = zk
        # True once this process knows it is not (or no longer) the active controller: nothing is
        # written from then on, even before ZooKeeper would refuse the write.
        self._is_fenced = is_fenced

    # -- election -------------------------------------------------------------------------------

    async def ensure_persistent_paths(self) -> None:
        for path in znodes.PERSISTENT_PATHS:
            await self.zk.ensure_path(path)

    async def controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, zkVersion) of ``/controller_epoch``, or None before any controller was elected."""
        found = await self.zk.get(znodes.CONTROLLER_EPOCH)
        if found is None:
            return None
        data, stat = found
        return int(data.decode()), stat.version

    async def active_controller(self) -> tuple[int, int] | None:
        """(controller id, owning session id) from ``/controller``, or None when nobody holds it."""
        found = await self.zk.get(znodes.CONTROLLER)
        if found is None:
            return None
        data, stat = found
        return znodes.decode_controller(data), stat.ephemeralOwner

    async def register_controller(self, controller_id: int, endpoints: Sequence[str]) -> tuple[int, int]:
        """Becomes the active controller: returns (new epoch, zkVersion of /controller_epoch), or raises
        ControllerMovedError when another candidate holds ``/controller`` or bumped the epoch first."""
        current = await self.controller_epoch()
        if current is None:
            new_epoch = 1
            epoch_op = ZkOp("create", znodes.CONTROLLER_EPOCH, b"1")
        else:
            new_epoch = current[0] + 1
            epoch_op = ZkOp("set", znodes.CONTROLLER_EPOCH, str(new_epoch).encode(), version=current[1])
        registration = ZkOp(
            "create",
            znodes.CONTROLLER,
            znodes.encode_controller(controller_id, list(endpoints)),
            ephemeral=True,
        )
        try:
            results = await self.zk.transaction([registration, epoch_op])
        except ZkTransactionError as e:
            if isinstance(e.cause, NodeExistsError | BadVersionError):
                return await self._check_registration(new_epoch)
            raise
        return new_epoch, (0 if current is None else results[1].version)

    async def _check_registration(self, new_epoch: int) -> tuple[int, int]:
        # The transaction may have been applied by an attempt ZkClient retried after a lost connection:
        # then /controller is this session's and the epoch is the one it wrote.
        holder = await self.active_controller()
        if holder is not None and holder[1] == self.zk.session_id:
            current = await self.controller_epoch()
            if current is not None and current[0] == new_epoch:
                return current
        raise ControllerMovedError("another controller was elected first")

    async def resign(self, epoch_zk_version: int) -> None:
        """Deletes ``/controller``, only while this controller's epoch is still the current one."""
        try:
            await self._fenced(epoch_zk_version, [ZkOp("delete", znodes.CONTROLLER)], check_fence=False)
        except ZkTransactionError as e:
            if not isinstance(e.cause, NoNodeError):
                raise

    # -- reads ----------------------------------------------------------------------------------

    async def live_brokers(self) -> dict[int, LiveBroker]:
        ids = await self.zk.get_children(znodes.BROKER_IDS) or []
        found = await asyncio.gather(*(self.zk.get(znodes.broker_path(int(i))) for i in ids))
        brokers = {}
        for broker_id, item in zip(ids, found, strict=True):
            if item is None:
                continue  # gone between the listing and the read
            data, stat = item
            registration = znodes.BrokerRegistration.decode(int(broker_id), data)
            brokers[registration.id] = LiveBroker(registration, stat.czxid)
        return brokers

    async def topics(self) -> list[str]:
        return sorted(await self.zk.get_children(znodes.TOPICS) or [])

    async def topic_records(self, topics: Iterable[str]) -> dict[str, TopicRecord]:
        names = list(topics)
        found = await asyncio.gather(*(self.zk.get(znodes.topic_path(t)) for t in names))
        records = {}
        for topic, item in zip(names, found, strict=True):
            if item is None:
                continue
            data, stat = item
            has_id = bool(json.loads(data.decode()).get("topic_id"))
            records[topic] = TopicRecord(znodes.TopicAssignment.decode(data), has_id, stat.version)
        return records

    async def partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, znodes.PartitionState | None]:
        wanted = list(partitions)
        found = await asyncio.gather(*(self.zk.get(znodes.partition_state_path(*tp)) for tp in wanted))
        return {
            tp: (znodes.PartitionState.decode(item[0], item[1].version) if item is not None else None)
            for tp, item in zip(wanted, found, strict=True)
        }

    async def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        names = list(topics)
        found = await asyncio.gather(*(self.zk.get(znodes.topic_config_path(t)) for t in names))
        return {
            t: znodes.decode_config(item[0] if item else None) for t, item in zip(names, found, strict=True)
        }

    async def topic_deletions(self) -> list[str]:
        return sorted(await self.zk.get_children(znodes.DELETE_TOPICS) or [])

    async def reassignment_request(self) -> dict[TopicPartition, list[int]] | None:
        """``/admin/reassign_partitions`` (partition -> target replicas; a partition named twice keeps its
        last entry), or None when absent. Raises ReassignmentJsonError when it does not parse."""
        found = await self.zk.get(znodes.REASSIGN_PARTITIONS)
        if found is None:
            return None
        return {
            TopicPartition(m.topic, m.partition): m.replicas
            for m in reassignment_json.parse_reassignment(found[0])
        }

    async def preferred_replica_election_request(self) -> list[TopicPartition] | None:
        """The partitions named in ``/admin/preferred_replica_election``, or None when absent. Raises
        ValueError (KeyError, TypeError) when it does not parse."""
        found = await self.zk.get(znodes.PREFERRED_REPLICA_ELECTION)
        if found is None:
            return None
        return [TopicPartition(t, p) for t, p in znodes.decode_partitions(found[0])]

    # -- fenced writes --------------------------------------------------------------------------

    async def _fenced(
        self, epoch_zk_version: int, ops: Sequence[ZkOp], check_fence: bool = True
    ) -> list[Any]:
        """Runs ``ops`` in one transaction behind the controller-epoch check; returns their results."""
        if check_fence and self._is_fenced():
            raise ControllerMovedError("this controller has resigned")
        check = ZkOp("check", znodes.CONTROLLER_EPOCH, version=epoch_zk_version)
        try:
            return (await self.zk.transaction([check, *ops]))[1:]
        except ZkTransactionError as e:
            if e.errors and e.errors[0] is e.cause:
                raise ControllerMovedError(
                    f"/controller_epoch is past zkVersion {epoch_zk_version}: another controller was elected"
                ) from None
            raise

    async def set_topic_id(self, topic: str, record: TopicRecord, epoch_zk_version: int) -> None:
        """Writes the topic id into an assignment that had none (topics created by old tools)."""
        await self._fenced(
            epoch_zk_version,
            [ZkOp("set", znodes.topic_path(topic), record.assignment.encode(), version=record.zk_version)],
        )

    async def create_partition_states(
        self, states: dict[TopicPartition, znodes.PartitionState], epoch_zk_version: int
    ) -> dict[TopicPartition, znodes.PartitionState | Exception]:
        """Creates the state znodes of new partitions; each result is the stored state or the error."""
        topics = {tp.topic for tp in states}
        existing: dict[str, set[str]] = {}
        for topic in topics:
            children = await self.zk.get_children(znodes.partitions_path(topic))
            if children is None:
                try:
                    await self._fenced(epoch_zk_version, [ZkOp("create", znodes.partitions_path(topic))])
                except ZkTransactionError as e:
                    if not isinstance(e.cause, NodeExistsError):
                        raise
                children = []
            existing[topic] = set(children)

        async def create(
            tp: TopicPartition, state: znodes.PartitionState
        ) -> znodes.PartitionState | Exception:
            ops = (
                []
                if str(tp.partition) in existing[tp.topic]
                else [ZkOp("create", f"{znodes.partitions_path(tp.topic)}/{tp.partition}")]
            )
            ops.append(ZkOp("create", znodes.partition_state_path(*tp), state.encode()))
            try:
                await self._fenced(epoch_zk_version, ops)
            except ZkTransactionError as e:
                if isinstance(e.cause, NodeExistsError):
                    stored = (await self.partition_states([tp]))[tp]
                    if stored is not None and _same_state(stored, state):
                        return stored
                return e.cause if isinstance(e.cause, Exception) else e
            return dataclasses.replace(state, zk_version=0)

        results = await _gather_fenced([create(tp, s) for tp, s in states.items()])
        return dict(zip(states, results, strict=True))

    async def update_partition_states(
        self, states: dict[TopicPartition, znodes.PartitionState], epoch_zk_version: int
    ) -> StateUpdateResult:
        """Writes each state on the condition that its znode still has ``state.zk_version``."""

        async def update(
            tp: TopicPartition, state: znodes.PartitionState
        ) -> znodes.PartitionState | Exception | None:
            op = ZkOp("set", znodes.partition_state_path(*tp), state.encode(), version=state.zk_version)
            try:
                results = await self._fenced(epoch_zk_version, [op])
            except ZkTransactionError as e:
                if isinstance(e.cause, BadVersionError):
                    stored = (await self.partition_states([tp]))[tp]
                    if stored is not None and _same_state(stored, state):
                        return stored  # an earlier attempt of this very write was applied
                    return None
                return e.cause if isinstance(e.cause, Exception) else e
            return dataclasses.replace(state, zk_version=results[0].version)

        results = await _gather_fenced([update(tp, s) for tp, s in states.items()])
        written, retry, failed = {}, [], {}
        for tp, result in zip(states, results, strict=True):
            if result is None:
                retry.append(tp)
            elif isinstance(result, Exception):
                failed[tp] = result
            else:
                written[tp] = result
        return StateUpdateResult(written, retry, failed)

    async def set_replica_assignment(
        self, partition: TopicPartition, assignment: ReplicaAssignment, epoch_zk_version: int
    ) -> None:
        """Writes one partition's replicas and its replicas being added and removed into
        ``/brokers/topics/<t>``, keeping the other partitions and the topic id; conditional on the version
        read, re-read when another writer (a broker adding partitions) got in between."""
        path = znodes.topic_path(partition.topic)
        for _ in range(MAX_ASSIGNMENT_WRITES):
            found = await self.zk.get(path)
            if found is None:
                raise RuntimeError(f"topic {partition.topic} has no assignment in ZooKeeper")
            record = znodes.TopicAssignment.decode(found[0])
            record.partitions[partition.partition] = list(assignment.replicas)
            for replicas, by_partition in (
                (assignment.adding, record.adding_replicas),
                (assignment.removing, record.removing_replicas),
            ):
                if replicas:
                    by_partition[partition.partition] = list(replicas)
                else:
                    by_partition.pop(partition.partition, None)
            op = ZkOp("set", path, record.encode(), version=found[1].version)
            try:
                await self._fenced(epoch_zk_version, [op])
                return
            except ZkTransactionError as e:
                if not isinstance(e.cause, BadVersionError):
                    raise
        raise RuntimeError(f"the assignment of topic {partition.topic} keeps changing")

    async def set_reassignment_request(
        self, assignments: dict[TopicPartition, list[int]], epoch_zk_version: int
    ) -> None:
        """Rewrites ``/admin/reassign_partitions`` with what is left of it; deletes it when nothing is."""
        path = znodes.REASSIGN_PARTITIONS
        try:
            if assignments:
                data = reassignment_json.encode_znode(assignments)
                await self._fenced(epoch_zk_version, [ZkOp("set", path, data)])
            else:
                await self._fenced(epoch_zk_version, [ZkOp("delete", path)])
        except ZkTransactionError as e:
            if not isinstance(e.cause, NoNodeError):
                raise

    async def delete_preferred_replica_election(self, epoch_zk_version: int) -> None:
        try:
            await self._fenced(epoch_zk_version, [ZkOp("delete", znodes.PREFERRED_REPLICA_ELECTION)])
        except ZkTransactionError as e:
            if not isinstance(e.cause, NoNodeError):
                raise

    async def delete_topic_deletions(self, topics: Iterable[str], epoch_zk_version: int) -> None:
        for topic in topics:
            try:
                await self._fenced(epoch_zk_version, [ZkOp("delete", znodes.delete_topic_path(topic))])
            except ZkTransactionError as e:
                if not isinstance(e.cause, NoNodeError):
                    raise

    async def delete_topic(self, topic: str, epoch_zk_version: int) -> None:
        """Removes the topic's assignment with its partition states, its configs and its deletion
        request, all in one transaction."""
        for _ in range(5):
            paths = await self._subtree(znodes.topic_path(topic))
            for extra in (znodes.topic_config_path(topic), znodes.delete_topic_path(topic)):
                if await self.zk.exists(extra) is not None:
                    paths.append(extra)
            if not paths:
                return
            try:
                await self._fenced(epoch_zk_version, [ZkOp("delete", p) for p in paths])
                return
            except ZkTransactionError as e:
                log.info(
                    "deleting the znodes of topic %s raced with another change (%r); retrying", topic, e.cause
                )
        raise RuntimeError(f"could not delete the znodes of topic {topic}")

    async def _subtree(self, path: str) -> list[str]:
        """``path`` and every node below it, deepest first (the order a delete must take)."""
        children = await self.zk.get_children(path)
        if children is None:
            return []
        below: list[str] = []
        for child in children:
            below += await self._subtree(f"{path}/{child}")
        return [*below, path]


async def _gather_fenced(coroutines: list) -> list:
    """Runs the writes together; if any found the controller moved, raises that once all are done."""
    results = await asyncio.gather(*coroutines, return_exceptions=True)
    for result in results:
        if isinstance(result, ControllerMovedError):
            raise result
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, Exception):
            raise result
    return results
