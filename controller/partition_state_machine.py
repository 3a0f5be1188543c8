"""PartitionStateMachine: the life of each partition (Kafka's ZkPartitionStateMachine).

States and the transitions allowed into each::

    NewPartition          <- NonExistentPartition               (assignment known, no leader yet)
    OnlinePartition       <- New, Online, Offline               (a leader was elected)
    OfflinePartition      <- New, Online, Offline               (its leader is gone)
    NonExistentPartition  <- Offline                            (its topic was deleted)

New -> Online creates the state znode with the first live replica as leader and every live replica in
the ISR. Online/Offline -> Online re-reads the state znode, elects by the given strategy, and writes the
result conditionally on the znode's zkVersion (and the controller epoch); a lost race is re-read and
retried. Each change is queued in the request batch: LeaderAndIsr to the partition's live replicas,
UpdateMetadata to every live broker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from controller.context import ControllerContext, PartitionStatus, TopicPartition
from controller.controller_zk import ControllerMovedError, ControllerZkClient
from controller.election import (
    Election,
    ElectionStrategy,
    controlled_shutdown_election,
    new_partition_election,
    offline_partition_election,
    preferred_replica_election,
    reassign_partition_election,
)
from controller.request_batch import ControllerBrokerRequestBatch
from zk.znodes import PartitionState

log = logging.getLogger(__name__)

_VALID_PREVIOUS = {
    PartitionStatus.NEW: {PartitionStatus.NON_EXISTENT},
    PartitionStatus.ONLINE: {PartitionStatus.NEW, PartitionStatus.ONLINE, PartitionStatus.OFFLINE},
    PartitionStatus.OFFLINE: {PartitionStatus.NEW, PartitionStatus.ONLINE, PartitionStatus.OFFLINE},
    PartitionStatus.NON_EXISTENT: {PartitionStatus.OFFLINE},
}
# Conditional writes that keep losing to concurrent writers are given up after this many rounds.
MAX_WRITE_ATTEMPTS = 10

UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"


class StateChangeFailed(Exception):
    pass


class PartitionStateMachine:
    def __init__(
        self,
        context: ControllerContext,
        zk: ControllerZkClient,
        batch: ControllerBrokerRequestBatch,
        unclean_default: bool,
        prefix: str,
    ) -> None:
        self._context = context
        self._zk = zk
        self._batch = batch
        self._unclean_default = unclean_default
        self._prefix = prefix
        # Told of each leader elected for an existing partition (controller_metrics counts them).
        self.on_elected: Callable[[ElectionStrategy, Election], None] | None = None

    async def startup(self) -> None:
        """Sets each partition's state from its leadership, then elects where there is no live leader."""
        context = self._context
        for partition in context.all_partitions():
            state = context.leadership.get(partition)
            if state is None:
                context.partition_states[partition] = PartitionStatus.NEW
            elif context.is_replica_online(state.leader):
                context.partition_states[partition] = PartitionStatus.ONLINE
            else:
                context.partition_states[partition] = PartitionStatus.OFFLINE
        await self.trigger_online_partition_state_change()

    async def trigger_online_partition_state_change(self) -> dict[TopicPartition, Exception | None]:
        """Elects leaders for every New or Offline partition of a topic not being deleted."""
        context = self._context
        partitions = [
            tp
            for tp, status in context.partition_states.items()
            if status in (PartitionStatus.NEW, PartitionStatus.OFFLINE)
            and not context.is_topic_queued_for_deletion(tp.topic)
        ]
        return await self.handle_state_changes(partitions, PartitionStatus.ONLINE, ElectionStrategy.OFFLINE)

    async def handle_state_changes(
        self,
        partitions: Sequence[TopicPartition],
        target: PartitionStatus,
        strategy: ElectionStrategy | None = None,
    ) -> dict[TopicPartition, Exception | None]:
        """Moves ``partitions`` to ``target``; per partition, None on success or why it failed. The
        requests the changes call for are sent once all are done."""
        if not partitions:
            return {}
        self._batch.new_batch()
        try:
            results = await self._do_handle_state_changes(partitions, target, strategy)
        except ControllerMovedError:
            self._batch.new_batch()
            raise
        except Exception as e:
            log.exception("%s error moving partitions to %s", self._prefix, target.value)
            results = {tp: e for tp in partitions}
        self._batch.send()
        return results

    async def _do_handle_state_changes(
        self, partitions: Sequence[TopicPartition], target: PartitionStatus, strategy: ElectionStrategy | None
    ) -> dict[TopicPartition, Exception | None]:
        context = self._context
        results: dict[TopicPartition, Exception | None] = {}
        valid = []
        for tp in partitions:
            current = context.partition_state(tp)
            if current in _VALID_PREVIOUS[target]:
                valid.append(tp)
            else:
                log.error(
                    "%s invalid state transition of partition %s from %s to %s",
                    self._prefix,
                    tp,
                    current.value,
                    target.value,
                )
                results[tp] = StateChangeFailed(f"{tp} cannot move from {current.value} to {target.value}")
        if target is PartitionStatus.ONLINE:
            uninitialized = [tp for tp in valid if context.partition_state(tp) is PartitionStatus.NEW]
            to_elect = [tp for tp in valid if context.partition_state(tp) is not PartitionStatus.NEW]
            if uninitialized:
                results.update(await self._initialize_leader_and_isr(uninitialized))
            if to_elect:
                assert strategy is not None, "electing leaders needs a strategy"
                results.update(await self._elect_leaders(to_elect, strategy))
            for tp in valid:
                if tp in results and results[tp] is None:
                    context.partition_states[tp] = PartitionStatus.ONLINE
        else:
            for tp in valid:
                context.partition_states[tp] = target
                results[tp] = None
        return results

    async def _initialize_leader_and_isr(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, Exception | None]:
        context = self._context
        results: dict[TopicPartition, Exception | None] = {}
        states: dict[TopicPartition, PartitionState] = {}
        live = context.live_broker_ids
        for tp in partitions:
            election = new_partition_election(context.replicas(tp), live)
            if election is None:
                log.error(
                    "%s partition %s stays new: none of its replicas %s is alive (live brokers %s)",
                    self._prefix,
                    tp,
                    context.replicas(tp),
                    sorted(live),
                )
                results[tp] = StateChangeFailed(f"no replica of {tp} is alive")
                continue
            states[tp] = PartitionState(election.leader, 0, election.isr, context.epoch)
        created = await self._zk.create_partition_states(states, context.epoch_zk_version)
        for tp, result in created.items():
            if isinstance(result, Exception):
                log.error("%s could not create the state of partition %s: %r", self._prefix, tp, result)
                results[tp] = result
                continue
            context.leadership[tp] = result
            self._batch.add_leader_and_isr(result.isr, tp, result, is_new=True)
            log.info(
                "%s partition %s is online: leader %d, ISR %s (new partition)",
                self._prefix,
                tp,
                result.leader,
                list(result.isr),
            )
            results[tp] = None
        return results

    async def _elect_leaders(
        self, partitions: Sequence[TopicPartition], strategy: ElectionStrategy
    ) -> dict[TopicPartition, Exception | None]:
        results: dict[TopicPartition, Exception | None] = {}
        remaining = list(partitions)
        for _ in range(MAX_WRITE_ATTEMPTS):
            if not remaining:
                break
            remaining = await self._try_elect_leaders(remaining, strategy, results)
        for tp in remaining:
            log.error("%s gave up electing a leader for %s: its state keeps changing", self._prefix, tp)
            results[tp] = StateChangeFailed(f"{tp}: too many conflicting writes")
        return results

    async def _try_elect_leaders(
        self,
        partitions: Sequence[TopicPartition],
        strategy: ElectionStrategy,
        results: dict[TopicPartition, Exception | None],
    ) -> list[TopicPartition]:
        """One round: read, elect, write. Returns the partitions that lost a zkVersion race."""
        context = self._context
        stored = await self._zk.partition_states(partitions)
        current: dict[TopicPartition, PartitionState] = {}
        for tp, state in stored.items():
            if state is None:
                results[tp] = StateChangeFailed(f"{tp} has no state znode")
            elif state.controller_epoch > context.epoch:
                log.error(
                    "%s the state of %s was written by controller epoch %d: another controller is active",
                    self._prefix,
                    tp,
                    state.controller_epoch,
                )
                results[tp] = StateChangeFailed(f"{tp} was changed by a newer controller")
            else:
                current[tp] = state
        unclean = await self._unclean_allowed(current, strategy)
        elected: dict[TopicPartition, PartitionState] = {}
        decisions: dict[TopicPartition, tuple[Election, list[int]]] = {}
        for tp, state in current.items():
            election, recipients, failure = self._decide(tp, state, strategy, unclean.get(tp.topic, False))
            if election is None:
                results[tp] = StateChangeFailed(failure)
                continue
            elected[tp] = PartitionState(
                election.leader, state.leader_epoch + 1, election.isr, context.epoch, state.zk_version
            )
            decisions[tp] = (election, recipients)
        outcome = await self._zk.update_partition_states(elected, context.epoch_zk_version)
        for tp, written in outcome.written.items():
            previous = current[tp]
            election, recipients = decisions[tp]
            context.leadership[tp] = written
            self._batch.add_leader_and_isr(recipients, tp, written, is_new=False)
            if self.on_elected is not None:
                self.on_elected(strategy, election)
            log.log(
                logging.WARNING if election.unclean else logging.INFO,
                "%s partition %s: leader %d -> %d (leader epoch %d), ISR %s -> %s (%s election%s)",
                self._prefix,
                tp,
                previous.leader,
                written.leader,
                written.leader_epoch,
                list(previous.isr),
                list(written.isr),
                strategy.value,
                ", UNCLEAN: the new leader was not in the ISR, messages may be lost"
                if election.unclean
                else "",
            )
            results[tp] = None
        for tp, error in outcome.failed.items():
            log.error("%s could not write the new leader of %s: %r", self._prefix, tp, error)
            results[tp] = error
        return outcome.retry

    def _decide(
        self, tp: TopicPartition, state: PartitionState, strategy: ElectionStrategy, unclean: bool
    ) -> tuple[Election | None, list[int], str]:
        """(the election or None, the replicas to tell, why no leader could be elected)."""
        context = self._context
        replicas = context.replicas(tp)
        # Live brokers whose replica of the partition is not in a failed log dir (JBOD).
        live = {b for b in context.live_broker_ids if context.is_replica_online(b, partition=tp)}
        isr = list(state.isr)
        if strategy in (ElectionStrategy.OFFLINE, ElectionStrategy.UNCLEAN):
            election = offline_partition_election(replicas, state.isr, live, unclean)
            why = (
                f"no live in-sync replica of {tp} (ISR {isr}, live brokers {sorted(live)}) and unclean "
                "election is disabled"
                if not unclean
                else f"no replica of {tp} is alive (replicas {replicas}, live brokers {sorted(live)})"
            )
            if election is None and strategy is ElectionStrategy.OFFLINE:
                log.error("%s no leader for %s: %s", self._prefix, tp, why)
            return election, [r for r in replicas if context.is_replica_online(r, partition=tp)], why
        if strategy is ElectionStrategy.PREFERRED:
            election = preferred_replica_election(replicas, state.isr, live)
            preferred = replicas[0] if replicas else None
            why = f"the preferred replica {preferred} of {tp} is not alive and in the ISR {isr}"
            return election, list(replicas), why
        if strategy is ElectionStrategy.REASSIGN:
            target = list(context.full_assignment(tp).target)
            election = reassign_partition_election(target, state.isr, live)
            why = f"no target replica of {tp} ({target}) is alive and in the ISR {isr}"
            return election, target, why
        election = controlled_shutdown_election(
            replicas, state.isr, context.live_or_shutting_down_broker_ids, context.shutting_down_broker_ids
        )
        if election is None:
            log.info(
                "%s %s stays led by %d: no other live in-sync replica (ISR %s, shutting down %s)",
                self._prefix,
                tp,
                state.leader,
                isr,
                sorted(context.shutting_down_broker_ids),
            )
        recipients = [r for r in replicas if context.is_replica_online(r, include_shutting_down=True)]
        return election, recipients, f"no other live in-sync replica of {tp} can lead"

    async def _unclean_allowed(
        self, states: dict[TopicPartition, PartitionState], strategy: ElectionStrategy
    ) -> dict[str, bool]:
        """Per topic that has a partition with no live ISR member: may it elect an out-of-sync leader?
        The topic's config (``/config/topics/<t>``) overrides the controller's default; an unclean
        election asked for by ElectLeaders is allowed whatever they say."""
        if strategy not in (ElectionStrategy.OFFLINE, ElectionStrategy.UNCLEAN):
            return {}
        topics = {
            tp.topic
            for tp, state in states.items()
            if not any(self._context.is_replica_online(r) for r in state.isr)
        }
        if not topics:
            return {}
        if strategy is ElectionStrategy.UNCLEAN:
            return dict.fromkeys(topics, True)
        configs = await self._zk.topic_configs(topics)
        allowed = {}
        for topic in topics:
            value = configs.get(topic, {}).get(UNCLEAN_LEADER_ELECTION)
            allowed[topic] = self._unclean_default if value is None else value.strip().lower() == "true"
        return allowed
