"""AlterPartition: a partition leader asks the controller to change its ISR (Kafka 2.7+'s AlterIsr /
AlterPartition in ZooKeeper mode, KIP-497, with KIP-841's and KIP-903's eligibility checks).

In this cluster only the active controller writes partition state, so a leader that shrinks or grows
its ISR sends the change here; the controller checks it against what it knows, writes it with the
zkVersion and epoch checks, tells every broker by UpdateMetadata, and answers with the state in force.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from controller.context import ControllerContext, TopicPartition
from controller.controller_zk import ControllerZkClient
from controller.request_batch import ControllerBrokerRequestBatch
from protocol.errors import ErrorCode
from zk.znodes import PartitionState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IsrChange:
    """One partition of an AlterPartition request."""

    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int  # the zkVersion of the state the leader based its change on
    isr_broker_epochs: Mapping[int, int] | None = None  # v3: each member's broker epoch (-1: unknown)
    leader_recovery_state: int = 0


async def alter_partition(
    context: ControllerContext,
    zk: ControllerZkClient,
    batch: ControllerBrokerRequestBatch,
    broker_id: int,
    changes: Mapping[TopicPartition, IsrChange],
    prefix: str,
) -> dict[TopicPartition, PartitionState | ErrorCode]:
    """Applies the acceptable changes; per partition, the state now in force or why it was refused.
    The caller has checked that ``broker_id`` is live with the broker epoch it sent."""
    results: dict[TopicPartition, PartitionState | ErrorCode] = {}
    accepted: dict[TopicPartition, PartitionState] = {}
    for tp, change in changes.items():
        current = context.leadership.get(tp)
        if current is None or context.is_topic_queued_for_deletion(tp.topic):
            results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif change.partition_epoch > current.zk_version or change.leader_epoch > current.leader_epoch:
            # The leader knows a newer state than this controller: it is probably not the active one.
            results[tp] = ErrorCode.NOT_CONTROLLER
        elif change.leader_epoch < current.leader_epoch:
            results[tp] = ErrorCode.FENCED_LEADER_EPOCH
        elif (current.leader, current.isr) == (broker_id, change.isr):
            results[tp] = current  # already done (a retry): answered before any version check
        elif change.partition_epoch < current.zk_version:
            results[tp] = ErrorCode.INVALID_UPDATE_VERSION
        elif change.leader_recovery_state != 0:
            results[tp] = ErrorCode.INVALID_REQUEST  # ZooKeeper-mode partitions never recover
        elif ineligible := _ineligible(context, change):
            log.info(
                "%s refusing ISR %s for %s from broker %d: %s not eligible",
                prefix,
                list(change.isr),
                tp,
                broker_id,
                sorted(ineligible),
            )
            results[tp] = ErrorCode.INELIGIBLE_REPLICA
        else:
            accepted[tp] = PartitionState(
                broker_id, change.leader_epoch, change.isr, context.epoch, change.partition_epoch
            )
    outcome = await zk.update_partition_states(accepted, context.epoch_zk_version)
    for tp, written in outcome.written.items():
        log.info(
            "%s partition %s: ISR %s -> %s at the request of leader %d (partition epoch %d)",
            prefix,
            tp,
            list(context.leadership[tp].isr),
            list(written.isr),
            broker_id,
            written.zk_version,
        )
        context.leadership[tp] = written
        results[tp] = written
    for tp in outcome.retry:
        results[tp] = ErrorCode.INVALID_UPDATE_VERSION
    for tp, error in outcome.failed.items():
        log.error("%s could not write the ISR of %s: %r", prefix, tp, error)
        results[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
    if outcome.written:
        batch.new_batch()
        batch.add_update_metadata(context.live_or_shutting_down_broker_ids, list(outcome.written))
        batch.send()
    return results


def _ineligible(context: ControllerContext, change: IsrChange) -> set[int]:
    """ISR members that may not join: not live, shutting down, or registered with another epoch."""
    bad = set(change.isr) - context.live_broker_ids
    for member, epoch in (change.isr_broker_epochs or {}).items():
        if epoch != -1 and epoch != context.broker_epoch(member):
            bad.add(member)
    return bad
