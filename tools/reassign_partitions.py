"""``samsa reassign-partitions``: kafka-reassign-partitions.sh for Samsa (Kafka 3.x, ``--bootstrap-server``).

Actions, JSON formats, outputs, messages and exit codes are Kafka's:

- ``--generate --topics-to-move-json-file F --broker-list 1,2,3 [--disable-rack-aware]``: prints the
  current assignment of the topics in F (``{"topics":[{"topic":"foo"}],"version":1}``) and a proposed
  one over the listed brokers (Kafka's replica assignment, rack-aware when every broker has a rack);
- ``--execute --reassignment-json-file F [--additional]``: prints the current assignment (to roll back
  with) and starts the reassignments of F through AlterPartitionReassignments; refused while other
  reassignments are in progress unless ``--additional``;
- ``--verify --reassignment-json-file F``: whether each reassignment of F is complete or in progress;
- ``--cancel --reassignment-json-file F``: cancels those of F in progress;
- ``--list``: the reassignments in progress.

``--command-config FILE`` gives the client's security settings (TLS, SASL; tools/command_config.py).

Replication throttles (KIP-73, Kafka's ReassignPartitionsCommand): ``--execute --throttle B`` sets
``leader.replication.throttled.replicas`` (each moving partition's current replicas) and
``follower.replication.throttled.replicas`` (its new replicas) on the topics, and
``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` = B on every broker
involved (resubmitting with ``--additional`` changes it); ``--replica-alter-log-dirs-throttle B`` sets
``replica.alter.log.dirs.io.max.bytes.per.second`` on the brokers with log-directory moves. ``--verify``
once nothing is in progress, and ``--cancel``, clear every one of these (broker-level on every broker,
topic-level on the file's topics) unless ``--preserve-throttles``.

Usage errors go to stderr with the usage (exit 1); a failed action prints ``Error: <message>`` on stdout
(exit 1). A ``log_dirs`` entry other than "any" is refused: this tool makes no log-directory moves
(``--timeout``, which bounds waiting for them, is accepted and unused).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from typing import Any, NamedTuple

from protocol.api import ApiKey
from protocol.errors import ErrorCode, KafkaError, description
from protocol.messages import (
    AlterPartitionReassignmentsRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
)
from server_common.replica_assignment import BrokerMetadata, assign_replicas
from tools import command_config
from tools.admin_client import AdminClient, AdminError
from tools.usage import UsageError, UsageParser
from zk import reassignment_json
from zk.reassignment_json import ANY_LOG_DIR, ReassignmentJsonError

ACTIONS = ("generate", "execute", "verify", "cancel", "list")
REQUIRED = {
    "generate": ("topics_to_move_json_file", "broker_list"),
    "execute": ("reassignment_json_file",),
    "verify": ("reassignment_json_file",),
    "cancel": ("reassignment_json_file",),
    "list": (),
}
PERMITTED = {
    "generate": ("disable_rack_aware",),
    "execute": ("additional", "throttle", "replica_alter_log_dirs_throttle", "timeout"),
    "verify": ("preserve_throttles",),
    "cancel": ("preserve_throttles", "timeout"),
}
OPTIONS = (
    "reassignment_json_file",
    "topics_to_move_json_file",
    "broker_list",
    "disable_rack_aware",
    "additional",
    "throttle",
    "replica_alter_log_dirs_throttle",
    "timeout",
    "preserve_throttles",
)
# Kafka's ReassignPartitionsCommand.BROKER_LEVEL_THROTTLES and TOPIC_LEVEL_THROTTLES.
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
BROKER_LEVEL_THROTTLES = (LEADER_RATE, FOLLOWER_RATE, LOG_DIRS_RATE)
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
TOPIC_LEVEL_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4  # ConfigResource.Type
SET, DELETE = 0, 1  # AlterConfigOp.OpType
RUN_VERIFY_WARNING = (
    "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle "
    "is removed."
)
REQUEST_TIMEOUT_MS = 30_000
CANNOT_EXECUTE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override this "
    "and create a new partition assignment in addition to the existing one. The --additional flag can also "
    "be used to change the throttle by resubmitting the current reassignment."
)

Assignment = dict[tuple[str, int], list[int]]


class CommandError(Exception):
    """The action failed: ``Error: <message>`` on stdout."""


class TerseError(Exception):
    """Kafka's TerseException: the message alone on stdout."""


def _parser() -> UsageParser:
    p = UsageParser(
        prog="samsa reassign-partitions",
        description="This tool helps to move topic partitions between replicas.",
    )
    p.add_argument(
        "--bootstrap-server", metavar="SERVER", help="REQUIRED: the server(s) to use for bootstrapping"
    )
    command_config.add_argument(p)
    p.add_argument(
        "--generate", action="store_true", help="Generate a candidate partition reassignment configuration."
    )
    p.add_argument(
        "--execute",
        action="store_true",
        help="Kick off the reassignment as specified by the --reassignment-json-file option.",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="Verify if the reassignment completed as specified by the --reassignment-json-file option.",
    )
    p.add_argument("--cancel", action="store_true", help="Cancel an active reassignment.")
    p.add_argument("--list", action="store_true", help="List all active partition reassignments.")
    p.add_argument(
        "--reassignment-json-file",
        metavar="FILE",
        help="The JSON file with the partition reassignment configuration.",
    )
    p.add_argument(
        "--topics-to-move-json-file",
        metavar="FILE",
        help="Generate a reassignment configuration to move the partitions of the specified topics to the "
        'list of brokers specified by --broker-list: {"topics": [{"topic": "foo"},{"topic": "foo1"}], '
        '"version":1}',
    )
    p.add_argument(
        "--broker-list",
        metavar="1,2,3",
        help="The list of brokers to which the partitions need to be reassigned, with --generate.",
    )
    p.add_argument("--disable-rack-aware", action="store_true", help="Disable rack aware replica assignment.")
    p.add_argument(
        "--additional",
        action="store_true",
        help="Execute this reassignment in addition to any other ongoing ones. This option can also be "
        "used to change the throttle of an ongoing reassignment.",
    )
    p.add_argument(
        "--throttle",
        metavar="throttle",
        type=_long,
        default=-1,
        help="The movement of partitions between brokers will be throttled to this value (bytes/sec). "
        "This option can be included with --execute when a reassignment is started, and it can be altered "
        "by resubmitting the current reassignment along with the --additional flag. The throttle rate "
        "should be at least 1 KB/s.",
    )
    p.add_argument(
        "--replica-alter-log-dirs-throttle",
        metavar="replicaAlterLogDirsThrottle",
        type=_long,
        default=-1,
        help="The movement of replicas between log directories on the same broker will be throttled to "
        "this value (bytes/sec).",
    )
    p.add_argument(
        "--timeout",
        metavar="timeout",
        type=_long,
        default=10000,
        help="The maximum time in ms to wait for log directory replica assignment to begin.",
    )
    p.add_argument(
        "--preserve-throttles", action="store_true", help="Do not modify broker or topic throttles."
    )
    return p


def _long(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'For input string: "{text}"') from None


def _check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """kafka-reassign-partitions.sh's checks, with its messages; returns the action."""
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError("Command must include exactly one action: " + ", ".join(f"--{a}" for a in ACTIONS))
    action = chosen[0]
    if not args.bootstrap_server:
        raise UsageError("Please specify --bootstrap-server")
    for option in REQUIRED[action]:
        if getattr(args, option) is None:
            raise UsageError(f'Missing required argument "[{option.replace("_", "-")}]"')
    allowed = set(REQUIRED[action]) | set(PERMITTED.get(action, ()))
    for option in OPTIONS:
        if option not in allowed and getattr(args, option) != parser.get_default(option):
            raise UsageError(f'Option "[{option.replace("_", "-")}]" can\'t be used with action "[{action}]"')
    return action


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise CommandError(f"{path} ({e.strerror})") from None


def _partition(tp: tuple[str, int]) -> str:
    return f"{tp[0]}-{tp[1]}"


def _java_set(values: list[Any]) -> str:
    return "[" + ", ".join(map(str, values)) + "]"


def parse_execute_json(text: str) -> Assignment:
    """The reassignments of a --reassignment-json-file, checked as Kafka's parseExecuteAssignmentArgs."""
    try:
        moves = reassignment_json.parse_reassignment(text)
    except ReassignmentJsonError as e:
        raise CommandError(str(e)) from None
    if not moves:
        raise CommandError("Partition reassignment list cannot be empty")
    if any(not m.replicas for m in moves):
        raise CommandError("Partition replica list cannot be empty")
    counts = Counter((m.topic, m.partition) for m in moves)
    duplicates = [tp for tp, n in counts.items() if n > 1]
    if duplicates:
        raise CommandError(
            "Partition reassignment contains duplicate topic partitions: "
            + ",".join(map(_partition, duplicates))
        )
    assignment = {(m.topic, m.partition): m.replicas for m in moves}
    check_replica_lists(assignment)
    if any(d != ANY_LOG_DIR for m in moves for d in m.log_dirs):
        raise CommandError("Moving replicas between log directories is not supported by Samsa")
    return assignment


def check_replica_lists(assignment: Assignment) -> None:
    """Kafka's checks of new replica lists: none empty, none naming a broker twice (CommandError)."""
    if any(not replicas for replicas in assignment.values()):
        raise CommandError("Partition replica list cannot be empty")
    repeated = [
        f"{topic}-{partition} contains multiple entries for "
        + ",".join(str(r) for r, n in Counter(replicas).items() if n > 1)
        for (topic, partition), replicas in assignment.items()
        if len(set(replicas)) != len(replicas)
    ]
    if repeated:
        raise CommandError(
            "Partition replica lists may not contain duplicate entries: " + ". ".join(repeated)
        )


def parse_topics_json(text: str) -> list[str]:
    """The topics of a --topics-to-move-json-file (Kafka's parseTopicsData)."""
    try:
        body = json.loads(text)
    except ValueError:
        raise CommandError("The input string is not a valid JSON") from None
    if not isinstance(body, dict):
        raise CommandError("The input string is not a JSON object")
    version = body.get("version", 1)
    if version != 1:
        raise CommandError(f"Not supported version field value {version}")
    items = body.get("topics") or []
    try:
        return [item["topic"] for item in items]
    except (KeyError, TypeError):
        raise CommandError("No such field exists: `topic`") from None


class Move(NamedTuple):
    """Kafka's PartitionMove: the replicas a partition is copied from and those it is copied to."""

    sources: frozenset[int]
    destinations: frozenset[int]


def move_map(
    ongoing: dict[tuple[str, int], Any], proposed: Assignment, current: Assignment
) -> dict[str, dict[int, Move]]:
    """Kafka's calculateProposedMoveMap: per topic and partition, the sources (the replicas before any
    reassignment in progress, else the current ones) and the destinations (the new replicas not among
    them)."""
    moves: dict[str, dict[int, Move]] = {}
    for (topic, partition), r in ongoing.items():
        sources = frozenset(set(r.replicas) - set(r.adding_replicas))
        moves.setdefault(topic, {})[partition] = Move(sources, frozenset(r.adding_replicas))
    for (topic, partition), replicas in proposed.items():
        partitions = moves.setdefault(topic, {})
        if partition in partitions:
            sources = partitions[partition].sources
        else:
            sources = frozenset(current.get((topic, partition), []))
        partitions[partition] = Move(sources, frozenset(replicas) - sources)
    return moves


def leader_throttles(partitions: dict[int, Move]) -> str:
    """calculateLeaderThrottles: ``partition:broker`` for every source replica (sorted as Kafka's TreeSet
    of strings)."""
    return ",".join(sorted({f"{p}:{b}" for p, m in partitions.items() for b in m.sources}))


def follower_throttles(partitions: dict[int, Move]) -> str:
    """calculateFollowerThrottles: ``partition:broker`` for every destination not a source."""
    return ",".join(
        sorted({f"{p}:{b}" for p, m in partitions.items() for b in m.destinations if b not in m.sources})
    )


async def current_assignment(admin: AdminClient, topics: list[str]) -> Assignment:
    """The replicas of every partition of ``topics`` (Kafka's getReplicaAssignmentForTopics)."""
    metadata = await admin.metadata(sorted(set(topics)))
    assignment: Assignment = {}
    for topic in metadata.topics:
        if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise CommandError(f"Topic {topic.name} not found.")
        if topic.error_code != ErrorCode.NONE:
            raise CommandError(f"{topic.name}: {description(topic.error_code)}")
        for p in topic.partitions:
            assignment[(topic.name, p.partition_index)] = list(p.replica_nodes)
    return assignment


async def list_reassignments(
    admin: AdminClient, partitions: list[tuple[str, int]] | None
) -> dict[tuple[str, int], Any]:
    """ListPartitionReassignments (``partitions`` None: all): each partition in progress with its
    ``replicas``, ``adding_replicas`` and ``removing_replicas``."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions or []:
        by_topic.setdefault(topic, []).append(partition)
    request = ListPartitionReassignmentsRequest(
        timeout_ms=REQUEST_TIMEOUT_MS,
        topics=None
        if partitions is None
        else [
            ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(name=t, partition_indexes=p)
            for t, p in by_topic.items()
        ],
    )
    response = await admin.send(ApiKey.LIST_PARTITION_REASSIGNMENTS, request)
    if response.error_code != ErrorCode.NONE:
        raise CommandError(response.error_message or description(response.error_code))
    return {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}


async def alter_reassignments(
    admin: AdminClient, targets: dict[tuple[str, int], list[int] | None]
) -> dict[tuple[str, int], str]:
    """Sends AlterPartitionReassignments (a target None cancels); returns the partitions that failed,
    with why."""
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), replicas in sorted(targets.items()):
        by_topic.setdefault(topic, []).append(
            AlterPartitionReassignmentsRequest.ReassignablePartition(
                partition_index=partition, replicas=replicas
            )
        )
    request = AlterPartitionReassignmentsRequest(
        timeout_ms=REQUEST_TIMEOUT_MS,
        topics=[
            AlterPartitionReassignmentsRequest.ReassignableTopic(name=t, partitions=p)
            for t, p in by_topic.items()
        ],
    )
    response = await admin.send(ApiKey.ALTER_PARTITION_REASSIGNMENTS, request)
    if response.error_code != ErrorCode.NONE:
        message = response.error_message or description(response.error_code)
        return dict.fromkeys(targets, message)
    return {
        (t.name, p.partition_index): p.error_message or description(p.error_code)
        for t in response.responses
        for p in t.partitions
        if p.error_code != ErrorCode.NONE
    }


async def check_proposal(admin: AdminClient, proposed: Assignment) -> Assignment:
    """--execute's checks of a proposal against the cluster (every broker live, every partition
    existing; CommandError); returns the proposal's topics' current assignment."""
    live = {b.node_id for b in (await admin.metadata([])).brokers}
    unknown = [b for replicas in proposed.values() for b in replicas if b not in live]
    if unknown:
        raise CommandError(f"Unknown broker id {unknown[0]}")
    current = await current_assignment(admin, [t for t, _ in proposed])
    missing = [tp for tp in proposed if tp not in current]
    if missing:
        raise CommandError("Unable to find partition: " + ", ".join(map(_partition, missing)))
    return current


class ReassignCommand:
    def __init__(self, admin: AdminClient, args: argparse.Namespace) -> None:
        self.admin = admin
        self.args = args

    async def _current_assignment(self, topics: list[str]) -> Assignment:
        return await current_assignment(self.admin, topics)

    async def _reassignments(self, partitions: list[tuple[str, int]] | None) -> dict[tuple[str, int], Any]:
        return await list_reassignments(self.admin, partitions)

    async def _alter(self, targets: dict[tuple[str, int], list[int] | None]) -> dict[tuple[str, int], str]:
        return await alter_reassignments(self.admin, targets)

    # -- actions --------------------------------------------------------------------------------

    async def generate(self) -> None:
        try:
            brokers = [int(b) for b in self.args.broker_list.split(",")]
        except ValueError:
            raise CommandError(f'For input string: "{self.args.broker_list}"') from None
        repeated = sorted(b for b, n in Counter(brokers).items() if n > 1)
        if repeated:
            raise CommandError(f"Broker list contains duplicate entries: {_java_set(repeated)}")
        topics = parse_topics_json(_read(self.args.topics_to_move_json_file))
        repeated_topics = sorted(t for t, n in Counter(topics).items() if n > 1)
        if repeated_topics:
            raise CommandError(
                f"List of topics to reassign contains duplicate entries: {_java_set(repeated_topics)}"
            )
        current = await self._current_assignment(topics)
        metadata = await self.admin.metadata([])
        rack_aware = not self.args.disable_rack_aware
        chosen = sorted(
            (
                BrokerMetadata(b.node_id, b.rack if rack_aware else None)
                for b in metadata.brokers
                if b.node_id in brokers
            ),
            key=lambda b: b.id,
        )
        racks = [b.rack for b in chosen if b.rack is not None]
        if rack_aware and racks and len(racks) != len(chosen):
            raise CommandError(
                "Not all brokers have rack information. Add --disable-rack-aware in command line to make "
                "replica assignment without rack information."
            )
        proposed: Assignment = {}
        for topic in sorted({t for t, _ in current}):
            partitions = sorted(p for t, p in current if t == topic)
            try:
                assigned = assign_replicas(chosen, len(partitions), len(current[(topic, partitions[0])]))
            except KafkaError as e:
                raise CommandError(e.message) from None
            proposed.update({(topic, p): replicas for p, replicas in assigned.items()})
        print(f"Current partition replica assignment\n{reassignment_json.format_reassignment(current)}\n")
        proposed_json = reassignment_json.format_reassignment(proposed)
        print(f"Proposed partition reassignment configuration\n{proposed_json}")

    async def execute(self) -> None:
        proposed = parse_execute_json(_read(self.args.reassignment_json_file))
        if not self.args.additional and await self._reassignments(None):
            raise TerseError(CANNOT_EXECUTE)
        current = await check_proposal(self.admin, proposed)
        rollback = {tp: r for tp, r in current.items() if tp in proposed}
        print(
            f"Current partition replica assignment\n\n{reassignment_json.format_reassignment(rollback)}\n\n"
            "Save this to use as the --reassignment-json-file option during rollback"
        )
        throttle, log_dirs_throttle = self.args.throttle, self.args.replica_alter_log_dirs_throttle
        if throttle >= 0 or log_dirs_throttle >= 0:
            print(RUN_VERIFY_WARNING)
            if throttle >= 0:
                ongoing = await self._reassignments(None)
                await self._set_reassignment_throttle(move_map(ongoing, proposed, current), throttle)
            if log_dirs_throttle >= 0:
                # Brokers with log-directory moves: none, as this tool makes none.
                print(f"The replica-alter-dir throttle limit was set to {log_dirs_throttle} B/s")
        errors = await self._alter(dict(proposed))
        if errors:
            raise TerseError(
                "Error reassigning partition(s):\n"
                + "\n".join(f"{_partition(tp)}: {message}" for tp, message in sorted(errors.items()))
            )
        print(
            f"Successfully started partition reassignment{'' if len(proposed) == 1 else 's'} for "
            + ",".join(map(_partition, sorted(proposed)))
        )

    async def verify(self) -> None:
        targets = parse_execute_json(_read(self.args.reassignment_json_file))
        ongoing = await self._reassignments(None)
        lines = ["Status of partition reassignment:"]
        finished = [tp for tp in targets if tp not in ongoing]
        current: Assignment = {}
        for topic in sorted({t for t, _ in finished}):
            try:
                current.update(await self._current_assignment([topic]))
            except CommandError:
                pass  # an unknown topic: its partitions have no replicas
        for tp in sorted(targets):
            if tp in ongoing:
                lines.append(f"Reassignment of partition {_partition(tp)} is still in progress.")
            elif current.get(tp, []) == targets[tp]:
                lines.append(f"Reassignment of partition {_partition(tp)} is completed.")
            else:
                replicas, target = ",".join(map(str, current.get(tp, []))), ",".join(map(str, targets[tp]))
                lines.append(
                    f"There is no active reassignment of partition {_partition(tp)}, but replica set is "
                    f"{replicas} rather than {target}."
                )
        print("\n".join(lines))
        if not any(tp in ongoing for tp in targets) and not self.args.preserve_throttles:
            await self._clear_all_throttles(targets)

    # -- throttles ------------------------------------------------------------------------------

    async def _set_reassignment_throttle(self, moves: dict[str, dict[int, Move]], throttle: int) -> None:
        """Kafka's modifyReassignmentThrottle: the topics' throttled replicas, then the rate on every
        broker a move involves."""
        topic_ops: dict[str, list[tuple[str, int, str | None]]] = {
            topic: [
                (LEADER_REPLICAS, SET, leader_throttles(partitions)),
                (FOLLOWER_REPLICAS, SET, follower_throttles(partitions)),
            ]
            for topic, partitions in moves.items()
        }
        await self._alter_configs(TOPIC_RESOURCE, topic_ops)
        brokers = sorted(
            {
                b
                for partitions in moves.values()
                for m in partitions.values()
                for b in m.sources | m.destinations
            }
        )
        await self._alter_configs(
            BROKER_RESOURCE,
            {
                str(b): [(LEADER_RATE, SET, str(throttle)), (FOLLOWER_RATE, SET, str(throttle))]
                for b in brokers
            },
        )
        print(f"The inter-broker throttle limit was set to {throttle} B/s")

    async def _clear_all_throttles(self, targets: Assignment) -> None:
        """Kafka's clearAllThrottles: the broker-level throttles of every broker of the cluster and of the
        targets, the topic-level throttles of the targets' topics."""
        brokers = {b.node_id for b in (await self.admin.metadata([])).brokers}
        brokers.update(b for replicas in targets.values() for b in replicas)
        print(
            f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
            + ",".join(map(str, sorted(brokers)))
        )
        await self._alter_configs(
            BROKER_RESOURCE, {str(b): [(n, DELETE, None) for n in BROKER_LEVEL_THROTTLES] for b in brokers}
        )
        topics = sorted({t for t, _ in targets})
        print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} " + ",".join(topics))
        await self._alter_configs(
            TOPIC_RESOURCE, {t: [(n, DELETE, None) for n in TOPIC_LEVEL_THROTTLES] for t in topics}
        )

    async def _alter_configs(
        self, resource_type: int, changes: dict[str, list[tuple[str, int, str | None]]]
    ) -> None:
        """IncrementalAlterConfigs; a broker's own configs go to that broker (as Kafka's Admin sends them)."""

        def request(names: list[str]) -> IncrementalAlterConfigsRequest:
            return IncrementalAlterConfigsRequest(
                resources=[
                    IncrementalAlterConfigsRequest.AlterConfigsResource(
                        resource_type=resource_type,
                        resource_name=name,
                        configs=[
                            IncrementalAlterConfigsRequest.AlterableConfig(
                                name=key, config_operation=op, value=value
                            )
                            for key, op, value in changes[name]
                        ],
                    )
                    for name in names
                ],
                validate_only=False,
            )

        if resource_type == BROKER_RESOURCE:
            responses = [
                await self.admin.send_to_node(ApiKey.INCREMENTAL_ALTER_CONFIGS, request([name]), int(name))
                for name in sorted(changes, key=int)
            ]
        elif changes:
            responses = [await self.admin.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, request(sorted(changes)))]
        else:
            responses = []
        for response in responses:
            for result in response.responses:
                if result.error_code != ErrorCode.NONE:
                    raise CommandError(result.error_message or description(result.error_code))

    async def cancel(self) -> None:
        targets = parse_execute_json(_read(self.args.reassignment_json_file))
        ongoing = await self._reassignments(sorted(targets))
        # Kafka's condition, kept as it is.
        active = sorted(tp for tp, r in ongoing.items() if not r.adding_replicas or r.removing_replicas)
        if not active:
            print("None of the specified partition reassignments are active.")
            if not self.args.preserve_throttles:
                await self._clear_all_throttles(targets)
            return
        errors = await self._alter(dict.fromkeys(active))
        if errors:
            raise TerseError(
                f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} for:\n"
                + "\n".join(f"{_partition(tp)}: {message}" for tp, message in sorted(errors.items()))
            )
        print(
            f"Successfully cancelled partition reassignment{'' if len(active) == 1 else 's'} for: "
            + ",".join(map(_partition, active))
        )
        if not self.args.preserve_throttles:
            await self._clear_all_throttles(targets)

    async def list(self) -> None:
        ongoing = await self._reassignments(None)
        if not ongoing:
            print("No partition reassignments found.")
            return
        lines = ["Current partition reassignments:"]
        for tp, r in sorted(ongoing.items()):
            line = f"{_partition(tp)}: replicas: {','.join(map(str, r.replicas))}."
            if r.adding_replicas:
                line += f" adding: {','.join(map(str, r.adding_replicas))}."
            if r.removing_replicas:
                line += f" removing: {','.join(map(str, r.removing_replicas))}."
            lines.append(line)
        print("\n".join(lines))


async def _run(args: argparse.Namespace, action: str) -> None:
    security = command_config.client_security(args.command_config)
    async with AdminClient(
        args.bootstrap_server, client_id="reassign-partitions-tool", security=security
    ) as admin:
        await getattr(ReassignCommand(admin, args), action)()


def main(argv: list[str]) -> int:
    parser = _parser()
    if not argv:
        parser.print_help(sys.stderr)
        return 1
    try:
        args = parser.parse_args(argv)
        action = _check_args(parser, args)
        asyncio.run(_run(args, action))
    except UsageError as e:
        print(e, file=sys.stderr)
        parser.print_usage(sys.stderr)
        return 1
    except TerseError as e:
        print(e)
        return 1
    except (CommandError, AdminError) as e:
        print(f"Error: {e}")
        return 1
    return 0
