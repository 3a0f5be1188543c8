"""ReplicaElectionManager: leader elections asked for rather than forced by a failure (Kafka's
KafkaController.processReplicaLeaderElection, onReplicaElection and checkAndTriggerAutoLeaderRebalance).

Three triggers:

- ElectLeaders (the admin client): preferred or unclean, per-partition results as Kafka answers them;
- ``/admin/preferred_replica_election`` (Kafka's JSON, ``{"version":1,"partitions":[{"topic":"t",
  "partition":0}]}``): preferred elections, then the znode is deleted;
- the auto-rebalance check (``auto.leader.rebalance.enable``): every
  ``leader.imbalance.check.interval.seconds``, for each broker, the share of the partitions it is the
  preferred replica of that it does not lead; above ``leader.imbalance.per.broker.percentage`` percent,
  preferred elections for those whose preferred replica is alive and in the ISR (none while a
  reassignment is in progress).

A preferred election elects the first replica of the assignment when it is alive and in the ISR; an
unclean one elects from the live ISR, or else any live replica, for partitions that have no live leader.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from enum import Enum, IntEnum

from controller.context import ControllerContext, PartitionStatus, TopicPartition
from controller.controller_zk import ControllerZkClient
from controller.election import ElectionStrategy, preferred_replica_election
from controller.partition_state_machine import PartitionStateMachine, StateChangeFailed
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class ElectionType(IntEnum):
    """ElectLeaders' election types (Kafka's ElectionType)."""

    PREFERRED = 0
    UNCLEAN = 1


class ElectionTrigger(Enum):
    ADMIN_CLIENT = "the admin client"
    ZOOKEEPER = "/admin/preferred_replica_election"
    AUTO = "the auto-rebalance check"


# Per partition: the new leader, or the error with its message.
ElectionResult = int | tuple[ErrorCode, str | None]


class ReplicaElectionManager:
    def __init__(
        self,
        context: ControllerContext,
        zk: ControllerZkClient,
        partitions: PartitionStateMachine,
        imbalance_percentage: int,
        prefix: str,
    ) -> None:
        self._context = context
        self._zk = zk
        self._partitions = partitions
        self._imbalance_percentage = imbalance_percentage
        self._prefix = prefix

    async def elect(
        self, partitions: Iterable[TopicPartition], election_type: ElectionType, trigger: ElectionTrigger
    ) -> dict[TopicPartition, ElectionResult]:
        """Elects where an election is needed; every partition asked about gets a result."""
        context = self._context
        results: dict[TopicPartition, ElectionResult] = {}
        electable: list[TopicPartition] = []
        for tp in dict.fromkeys(partitions):
            if not context.replicas(tp):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
            elif context.is_topic_queued_for_deletion(tp.topic):
                results[tp] = ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted"
            elif self._needs_election(tp, election_type):
                electable.append(tp)
            else:
                results[tp] = ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
        if electable:
            log.info(
                "%s %s leader election for %s, asked by %s",
                self._prefix,
                election_type.name.lower(),
                ", ".join(map(str, electable)),
                trigger.value,
            )
        strategy = (
            ElectionStrategy.PREFERRED
            if election_type is ElectionType.PREFERRED
            else ElectionStrategy.UNCLEAN
        )
        if election_type is ElectionType.UNCLEAN and trigger is not ElectionTrigger.ADMIN_CLIENT:
            strategy = ElectionStrategy.OFFLINE  # only an administrator may force an unclean election
        outcome = await self._partitions.handle_state_changes(electable, PartitionStatus.ONLINE, strategy)
        unavailable = (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            if election_type is ElectionType.PREFERRED
            else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        )
        for tp in electable:
            error = outcome.get(tp, StateChangeFailed(f"{tp} was not elected"))
            if error is None:
                results[tp] = context.leadership[tp].leader
            elif isinstance(error, StateChangeFailed):
                results[tp] = unavailable, str(error)
            else:
                results[tp] = ErrorCode.UNKNOWN_SERVER_ERROR, str(error)
        if trigger is not ElectionTrigger.ADMIN_CLIENT:
            for tp in electable:
                leader = context.leadership[tp].leader if tp in context.leadership else -1
                preferred = context.replicas(tp)[0]
                if leader == preferred:
                    log.info(
                        "%s %s completed preferred replica election: leader %d", self._prefix, tp, leader
                    )
                else:
                    result = results[tp]
                    log.warning(
                        "%s %s: preferred replica election to %d failed (%s); the leader is still %d",
                        self._prefix,
                        tp,
                        preferred,
                        result[1] if isinstance(result, tuple) else "",
                        leader,
                    )
        return results

    def _needs_election(self, tp: TopicPartition, election_type: ElectionType) -> bool:
        state = self._context.leadership.get(tp)
        if state is None:
            return True  # never had a leader: the state machine gives it its first
        if election_type is ElectionType.PREFERRED:
            return state.leader != self._context.replicas(tp)[0]
        return state.leader not in self._context.live_broker_ids

    async def on_request_znode(self) -> None:
        """``/admin/preferred_replica_election`` was created (or found at failover): preferred elections
        for the partitions it names, then the znode is deleted."""
        try:
            requested = await self._zk.preferred_replica_election_request()
        except (ValueError, KeyError, TypeError) as e:
            log.error("%s /admin/preferred_replica_election is not valid (%r); deleting it", self._prefix, e)
            requested = []
        if requested is None:
            return
        try:
            await self.elect(requested, ElectionType.PREFERRED, ElectionTrigger.ZOOKEEPER)
        finally:
            await self._zk.delete_preferred_replica_election(self._context.epoch_zk_version)

    async def check_auto_rebalance(self) -> None:
        context = self._context
        by_preferred: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in context.all_partitions():
            replicas = context.replicas(tp)
            if replicas and not context.is_topic_queued_for_deletion(tp.topic):
                by_preferred[replicas[0]].append(tp)
        for broker_id, partitions in sorted(by_preferred.items()):
            not_led = [
                tp
                for tp in partitions
                if tp in context.leadership and context.leadership[tp].leader != broker_id
            ]
            ratio = len(not_led) / len(partitions)
            if ratio <= self._imbalance_percentage / 100:
                continue
            log.info(
                "%s broker %d leads %d of the %d partitions it is the preferred replica of "
                "(imbalance %.0f%% > %d%%)",
                self._prefix,
                broker_id,
                len(partitions) - len(not_led),
                len(partitions),
                ratio * 100,
                self._imbalance_percentage,
            )
            if context.partitions_being_reassigned:
                continue
            candidates = [tp for tp in not_led if self._preferred_can_lead(tp)]
            if candidates:
                await self.elect(candidates, ElectionType.PREFERRED, ElectionTrigger.AUTO)

    def _preferred_can_lead(self, tp: TopicPartition) -> bool:
        replicas = self._context.replicas(tp)
        isr = self._context.leadership[tp].isr
        return preferred_replica_election(replicas, isr, self._context.live_broker_ids) is not None
