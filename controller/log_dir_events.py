"""The controller's side of log dir failures (Kafka's KafkaController.processLogDirEventNotification,
onBrokerLogDirFailure and the LeaderAndIsr response handling, ZooKeeper mode).

A broker whose log dir failed writes ``/log_dir_event_notification/log_dir_event_<seq>``. The controller,
watching that node's children, reads and deletes the notifications and sends each live broker named a
LeaderAndIsr for every partition it hosts (the replicas go Online again, which sends their current
state). The broker answers KAFKA_STORAGE_ERROR for the partitions whose log was in the failed dir: the
controller learns them from every LeaderAndIsr response (``ResponseTap`` sits between the request batch
and the channel), keeps them per broker in ``ControllerContext.replicas_on_offline_dirs`` (which
``is_replica_online`` consults, so UpdateMetadata lists them in ``offline_replicas`` and no election
picks them) and takes the newly offline replicas offline: partitions they led get a new leader from the
rest of the ISR, and they leave the ISRs. A broker that starts again (or dies) starts afresh.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from controller.context import ControllerContext, PartitionReplica, ReplicaStatus, TopicPartition
from controller.events import ControllerEvent
from controller.replica_state_machine import ReplicaStateMachine
from controller.request_batch import RequestSender
from protocol.api import Api, ApiKey
from protocol.errors import ErrorCode
from zk import znodes
from zk.client import ZkClient

log = logging.getLogger(__name__)


@dataclass
class LogDirEventNotification(ControllerEvent):
    """The children of /log_dir_event_notification changed."""


@dataclass
class LeaderAndIsrResponseReceived(ControllerEvent):
    broker_id: int
    error_code: int
    partition_errors: dict[TopicPartition, int] = field(default_factory=dict)


class ResponseTap:
    """A RequestSender that hands every LeaderAndIsr response to ``on_response(broker id, response)``
    besides the request's own callback."""

    def __init__(self, sender: RequestSender, on_response: Callable[[int, Any], None]) -> None:
        self._sender = sender
        self._on_response = on_response

    def endpoint(self, broker_id: int) -> tuple[str, int] | None:
        return self._sender.endpoint(broker_id)

    def send(
        self, broker_id: int, api: Api, version: int, body: Any, callback: Callable[[Any], None] | None
    ) -> None:
        if api.key != ApiKey.LEADER_AND_ISR:
            self._sender.send(broker_id, api, version, body, callback)
            return

        def on_response(response: Any) -> None:
            if callback is not None:
                callback(response)
            self._on_response(broker_id, response)

        self._sender.send(broker_id, api, version, body, on_response)


def partition_errors(context: ControllerContext, response: Any) -> dict[TopicPartition, int]:
    """The per-partition errors of a LeaderAndIsr response, whatever its version (v5+ names topics
    by id)."""
    errors = {
        TopicPartition(p.topic_name, p.partition_index): p.error_code
        for p in getattr(response, "partition_errors", None) or []
    }
    names = {topic_id: name for name, topic_id in context.topic_ids.items()}
    for topic in getattr(response, "topics", None) or []:
        name = names.get(topic.topic_id)
        if name is None:
            continue
        for p in topic.partition_errors:
            errors[TopicPartition(name, p.partition_index)] = p.error_code
    return errors


async def read_notifications(zk: ZkClient) -> set[int]:
    """The broker ids of the pending log dir event notifications, which are deleted."""
    children = await zk.get_children(znodes.LOG_DIR_EVENT_NOTIFICATION) or []
    brokers: set[int] = set()
    for child in sorted(children):
        path = f"{znodes.LOG_DIR_EVENT_NOTIFICATION}/{child}"
        found = await zk.get(path)
        if found is not None:
            broker_id = znodes.decode_log_dir_event(found[0])
            if broker_id is None:
                log.warning("ignoring the malformed log dir event notification %s", path)
            else:
                brokers.add(broker_id)
        try:
            await zk.delete(path)
        except Exception as e:  # gone already (another controller), or ZooKeeper unreachable
            log.debug("could not delete %s: %s", path, e)
    return brokers


async def on_broker_log_dir_failure(
    context: ControllerContext, replicas: ReplicaStateMachine, broker_ids: list[int], prefix: str
) -> None:
    """Kafka's onBrokerLogDirFailure: a LeaderAndIsr to each broker for all its partitions."""
    log.info(
        "%s log dir failure on brokers %s: sending them LeaderAndIsr for their partitions", prefix, broker_ids
    )
    await replicas.handle_state_changes(context.replicas_on_brokers(set(broker_ids)), ReplicaStatus.ONLINE)


async def on_leader_and_isr_response(
    context: ControllerContext,
    event: LeaderAndIsrResponseReceived,
    replicas_become_offline: Callable[[list[PartitionReplica]], Awaitable[None]],
    prefix: str,
) -> list[TopicPartition]:
    """Kafka's LeaderAndIsrResponseReceived: the broker's replicas answering KAFKA_STORAGE_ERROR are in a
    failed log dir; those newly found go offline. Returns their partitions."""
    if event.error_code != ErrorCode.NONE or event.broker_id not in context.live_brokers:
        return []
    offline = {tp for tp, code in event.partition_errors.items() if code == ErrorCode.KAFKA_STORAGE_ERROR}
    online = {tp for tp, code in event.partition_errors.items() if code == ErrorCode.NONE}
    previous = context.replicas_on_offline_dirs.get(event.broker_id, set())
    current = (previous - online) | offline
    if current:
        context.replicas_on_offline_dirs[event.broker_id] = current
    else:
        context.replicas_on_offline_dirs.pop(event.broker_id, None)
    new = sorted(current - previous)
    if new:
        log.warning(
            "%s broker %d has %d replicas in failed log dirs: %s",
            prefix,
            event.broker_id,
            len(new),
            ", ".join(str(tp) for tp in new[:10]) + (" ..." if len(new) > 10 else ""),
        )
        await replicas_become_offline([PartitionReplica(tp, event.broker_id) for tp in new])
    return new
