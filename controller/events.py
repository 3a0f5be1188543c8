"""The controller's events: every input the controller reacts to, queued for its single event task.

ZooKeeper watches, session changes, requests from brokers and responses to the controller's own
requests all become one of these, so the controller's state is only ever touched by one task, in
arrival order (Kafka's ControllerEvent).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from controller.controller_zk import ControllerMovedError


class ControllerEvent:
    def abandon(self) -> None:
        """Called for an event dropped unprocessed (the controller resigned or is stopping)."""


@dataclass
class Startup(ControllerEvent):
    pass


@dataclass
class ControllerChange(ControllerEvent):
    """``/controller`` was written: someone (perhaps this process) holds it."""


@dataclass
class SessionExpired(ControllerEvent):
    """The ZooKeeper session was lost: its ephemeral ``/controller`` is gone with it."""


@dataclass
class BrokerChange(ControllerEvent):
    """The children of ``/brokers/ids`` changed."""


@dataclass
class TopicChange(ControllerEvent):
    """The children of ``/brokers/topics`` changed."""


@dataclass
class PartitionModifications(ControllerEvent):
    """``/brokers/topics/<topic>`` was rewritten (partitions added)."""

    topic: str


@dataclass
class TopicDeletion(ControllerEvent):
    """The children of ``/admin/delete_topics`` changed."""


@dataclass
class ControlledShutdown(ControllerEvent):
    """A broker asks to shut down; ``result`` gets the partitions it still leads."""

    broker_id: int
    broker_epoch: int
    result: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def abandon(self) -> None:
        if not self.result.done():
            self.result.set_exception(ControllerMovedError("the controller resigned"))


@dataclass
class StopReplicaResponseReceived(ControllerEvent):
    """A broker answered a StopReplica that deleted partitions of topics being deleted."""

    broker_id: int
    error_code: int
    partition_errors: dict[Any, int]  # TopicPartition -> error code, for the deleted partitions


@dataclass
class AlterPartitionReceived(ControllerEvent):
    """A partition leader asks to change ISRs; ``result`` gets each partition's new state or error."""

    broker_id: int
    broker_epoch: int
    changes: dict[Any, Any]  # TopicPartition -> IsrChange
    result: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def abandon(self) -> None:
        if not self.result.done():
            self.result.set_exception(ControllerMovedError("the controller resigned"))


@dataclass
class ReplicaLeaderElection(ControllerEvent):
    """ElectLeaders: ``partitions`` (None: all) with ``election_type``; ``result`` gets each partition's
    new leader or error."""

    partitions: Any  # set of TopicPartition, or None
    election_type: Any  # ElectionType
    result: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def abandon(self) -> None:
        if not self.result.done():
            self.result.set_exception(ControllerMovedError("the controller resigned"))


@dataclass
class PreferredReplicaElectionRequested(ControllerEvent):
    """``/admin/preferred_replica_election`` was created."""


@dataclass
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    """Time for the auto-rebalance check (``leader.imbalance.check.interval.seconds``)."""


@dataclass
class ZkPartitionReassignment(ControllerEvent):
    """``/admin/reassign_partitions`` was created."""


@dataclass
class ApiPartitionReassignment(ControllerEvent):
    """AlterPartitionReassignments: partition -> target replicas (None: cancel); ``result`` gets each
    partition's (error code, message)."""

    reassignments: dict[Any, Any]
    result: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def abandon(self) -> None:
        if not self.result.done():
            self.result.set_exception(ControllerMovedError("the controller resigned"))


@dataclass
class ListPartitionReassignments(ControllerEvent):
    """ListPartitionReassignments: ``partitions`` (None: all); ``result`` gets those being reassigned."""

    partitions: Any
    result: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def abandon(self) -> None:
        if not self.result.done():
            self.result.set_exception(ControllerMovedError("the controller resigned"))
