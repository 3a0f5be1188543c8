"""``samsa topics``: kafka-topics.sh for Samsa — create, describe, list, alter and delete topics.

Flags, output formats, messages and exit codes are kafka-topics.sh's (Kafka 3.x, ``--bootstrap-server``
mode): usage errors go to stderr with exit code 1; a failed request prints ``Error while executing topic
command : <message>`` on stdout and exits 1. ``--topic`` is a regular expression except with --create.
``--command-config FILE`` gives the client's security settings (TLS, SASL; tools/command_config.py).

One addition: ``--alter --config k=v`` (and ``--delete-config k``) changes a topic's configs through
IncrementalAlterConfigs, as kafka-topics.sh did in its ZooKeeper mode; Kafka later moved this to
kafka-configs.sh, which Samsa does not have.
"""

from __future__ import annotations

import argparse
import builtins
import re
import uuid
from typing import Any

from protocol.api import ApiKey
from protocol.errors import ErrorCode, description
from protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from protocol.topic import is_internal
from tools import command_config
from tools.admin_client import AdminClient, AdminError
from tools.topic_filter import topic_filter
from tools.usage import CommandLineError, UsageError, UsageParser, run_command
from zk.znodes import topic_id_string

TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC
DEFAULT_CONFIG = 5  # DescribeConfigs ConfigSource.DEFAULT_CONFIG
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations
REQUEST_TIMEOUT_MS = 30_000
ACTIONS = ("create", "list", "alter", "describe", "delete")


class CommandError(Exception):
    """A request the cluster refused: ``Error while executing topic command : <message>``."""


def _parser() -> UsageParser:
    p = UsageParser(prog="samsa topics", description="Create, delete, describe, or change a topic.")
    p.add_argument("--bootstrap-server", metavar="SERVER", help="REQUIRED: the Kafka server to connect to")
    command_config.add_argument(p)
    for action, text in (
        ("create", "Create a new topic."),
        ("list", "List all available topics."),
        ("alter", "Alter the number of partitions, replica assignment and/or configuration of the topic."),
        ("describe", "List details for the given topics."),
        ("delete", "Delete a topic."),
    ):
        p.add_argument(f"--{action}", action="store_true", help=text)
    p.add_argument(
        "--topic",
        help="The topic to create, alter, describe or delete; a regular expression, except with --create.",
    )
    p.add_argument("--partitions", type=int, metavar="N", help="partitions of the topic created or altered")
    p.add_argument("--replication-factor", type=int, metavar="N", help="replication factor of a new topic")
    p.add_argument(
        "--replica-assignment",
        metavar="ASSIGNMENT",
        help="broker_id_for_part1_replica1 : broker_id_for_part1_replica2 , "
        "broker_id_for_part2_replica1 : broker_id_for_part2_replica2 , ...",
    )
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a topic configuration for the topic being created or altered (repeatable)",
    )
    p.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="NAME",
        help="a topic configuration override to remove, with --alter (repeatable)",
    )
    p.add_argument(
        "--if-exists", action="store_true", help="with alter, delete or describe: only if it exists"
    )
    p.add_argument("--if-not-exists", action="store_true", help="with create: no error if it exists")
    p.add_argument(
        "--exclude-internal", action="store_true", help="with list or describe: no internal topics"
    )
    p.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="with describe: only partitions whose ISR is smaller than their replicas",
    )
    p.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="with describe: only partitions whose leader is not available",
    )
    p.add_argument(
        "--under-min-isr-partitions",
        action="store_true",
        help="with describe: only partitions whose ISR is smaller than min.insync.replicas",
    )
    p.add_argument(
        "--at-min-isr-partitions",
        action="store_true",
        help="with describe: only partitions whose ISR equals min.insync.replicas",
    )
    p.add_argument(
        "--topics-with-overrides",
        action="store_true",
        help="with describe: only topics that have overridden configs",
    )
    return p


REPORT_OPTIONS = (
    "under_replicated_partitions",
    "unavailable_partitions",
    "under_min_isr_partitions",
    "at_min_isr_partitions",
)


def _check_args(args: argparse.Namespace) -> None:
    """kafka-topics.sh's checks, with its messages."""
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError(
            "Command must include exactly one action: --list, --describe, --create, --alter or --delete"
        )
    action = chosen[0]
    if not args.bootstrap_server:
        raise CommandLineError("--bootstrap-server must be specified")
    if action not in ("list", "describe") and not args.topic:
        raise UsageError('Missing required argument "[topic]"')
    if action == "alter" and args.partitions is None and not args.config and not args.delete_config:
        raise UsageError('Missing required argument "[partitions]"')
    allowed = {
        "config": ("create", "alter"),
        "partitions": ("create", "alter"),
        "replication_factor": ("create",),
        "replica_assignment": ("create", "alter"),
        "delete_config": ("alter",),
        "if_exists": ("alter", "delete", "describe"),
        "if_not_exists": ("create",),
        "exclude_internal": ("list", "describe"),
        "topics_with_overrides": ("describe",),
        **dict.fromkeys(REPORT_OPTIONS, ("describe",)),
    }
    for option, actions in allowed.items():
        if getattr(args, option) and action not in actions:
            raise UsageError(f'Option "[{option.replace("_", "-")}]" can\'t be used with option "[{action}]"')
    if action == "create" and args.replica_assignment and (args.partitions or args.replication_factor):
        raise UsageError(
            'Option "[replica-assignment]" can\'t be used with option "[partitions]" or '
            '"[replication-factor]"'
        )
    if args.topics_with_overrides and any(getattr(args, o) for o in REPORT_OPTIONS):
        raise UsageError('Option "[topics-with-overrides]" can\'t be used with the partition reports')


def parse_configs(items: list[str]) -> dict[str, str]:
    """``key=value`` items as a dict; CommandLineError with kafka-topics.sh's message for a bad one."""
    configs = {}
    for item in items:
        parts = re.split(r"\s*=\s*", item)
        while parts and not parts[-1]:
            parts.pop()  # Java's String.split drops trailing empty strings
        if len(parts) != 2:
            raise CommandLineError(
                "requirement failed: Invalid topic config: "
                'all configs to be added must be in the format "key=val".'
            )
        configs[parts[0].strip()] = parts[1].strip()
    return configs


def _parse_replica_assignment(text: str) -> list[list[int]]:
    assignment: list[list[int]] = []
    for i, partition in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in partition.split(":")]
        except ValueError:
            raise CommandLineError(f"Invalid replica assignment: {text!r}") from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise CommandError(
                "Partition replica lists may not contain duplicate entries: " + ",".join(map(str, duplicates))
            )
        if assignment and len(brokers) != len(assignment[0]):
            raise CommandError(f"Partition {i} has different replication factor: {brokers}")
        assignment.append(brokers)
    return assignment


def _error_message(code: int, message: str | None) -> str:
    return message or description(code)


# -- the operations, as functions of an AdminClient (the tool prints around them; the console calls them) --


async def create_topic(
    admin: AdminClient,
    name: str,
    partitions: int | None = None,
    replication_factor: int | None = None,
    configs: dict[str, str] | None = None,
    assignment: list[list[int]] | None = None,
    if_not_exists: bool = False,
) -> bool:
    """CreateTopics for one topic (None: the broker's default partitions / replication factor;
    ``assignment``: each partition's replicas instead). True when created, False when it existed and
    ``if_not_exists``; CommandError with the broker's message otherwise."""
    topic = CreateTopicsRequest.CreatableTopic(
        name=name,
        num_partitions=-1 if partitions is None or assignment else partitions,
        replication_factor=-1 if replication_factor is None or assignment else replication_factor,
        configs=[
            CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
        ],
    )
    if assignment:
        topic.assignments = [
            CreateTopicsRequest.CreatableReplicaAssignment(partition_index=i, broker_ids=brokers)
            for i, brokers in enumerate(assignment)
        ]
    request = CreateTopicsRequest(topics=[topic], timeout_ms=REQUEST_TIMEOUT_MS, validate_only=False)
    response = await admin.send_to_controller(
        ApiKey.CREATE_TOPICS, request, lambda r: [t.error_code for t in r.topics]
    )
    result = response.topics[0]
    if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and if_not_exists:
        return False
    if result.error_code != ErrorCode.NONE:
        raise CommandError(_error_message(result.error_code, result.error_message))
    return True


async def create_partitions(
    admin: AdminClient, counts: dict[str, int], new_assignments: dict[str, list[list[int]]] | None = None
) -> None:
    """CreatePartitions: each topic grown to ``counts[topic]`` partitions (the new ones' replicas from
    ``new_assignments`` or the controller's choice); CommandError with the broker's message."""
    topics = [
        CreatePartitionsRequest.CreatePartitionsTopic(
            name=name,
            count=count,
            assignments=None
            if not new_assignments or name not in new_assignments
            else [
                CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=b)
                for b in new_assignments[name]
            ],
        )
        for name, count in counts.items()
    ]
    request = CreatePartitionsRequest(topics=topics, timeout_ms=REQUEST_TIMEOUT_MS, validate_only=False)
    response = await admin.send_to_controller(
        ApiKey.CREATE_PARTITIONS, request, lambda r: [t.error_code for t in r.results]
    )
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            raise CommandError(_error_message(result.error_code, result.error_message))


async def alter_topic_configs(
    admin: AdminClient, names: list[str], set_configs: dict[str, str], delete_configs: list[str]
) -> list[str]:
    """IncrementalAlterConfigs on topics ``names``: SET each of ``set_configs``, DELETE (back to the
    default) each of ``delete_configs``. The topics updated, in the response's order; CommandError with
    the broker's message at the first that failed."""
    changes = [
        IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=SET, value=v)
        for k, v in set_configs.items()
    ]
    changes += [
        IncrementalAlterConfigsRequest.AlterableConfig(name=k.strip(), config_operation=DELETE, value=None)
        for k in delete_configs
    ]
    request = IncrementalAlterConfigsRequest(
        resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=TOPIC_RESOURCE, resource_name=name, configs=changes
            )
            for name in names
        ],
        validate_only=False,
    )
    response = await admin.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
    updated = []
    for result in response.responses:
        if result.error_code != ErrorCode.NONE:
            raise CommandError(_error_message(result.error_code, result.error_message))
        updated.append(result.resource_name)
    return updated


async def delete_topics(admin: AdminClient, names: list[str]) -> None:
    """DeleteTopics; CommandError with the broker's message for the first that failed."""
    request = DeleteTopicsRequest(
        topics=[DeleteTopicsRequest.DeleteTopicState(name=n, topic_id=uuid.UUID(int=0)) for n in names],
        topic_names=names,
        timeout_ms=REQUEST_TIMEOUT_MS,
    )
    response = await admin.send_to_controller(
        ApiKey.DELETE_TOPICS, request, lambda r: [t.error_code for t in r.responses]
    )
    for result in response.responses:
        if result.error_code != ErrorCode.NONE:
            raise CommandError(_error_message(result.error_code, result.error_message))


async def describe_topic_configs(admin: AdminClient, names: list[str]) -> dict[str, list[Any]]:
    """DescribeConfigs: every config entry of each topic (``is_default`` tells the defaults);
    CommandError with the broker's message for a topic it could not describe."""
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=TOPIC_RESOURCE, resource_name=name, configuration_keys=None
            )
            for name in names
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    response = await admin.send(ApiKey.DESCRIBE_CONFIGS, request)
    configs = {}
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            raise CommandError(_error_message(result.error_code, result.error_message))
        configs[result.resource_name] = list(result.configs)
    return configs


class TopicService:
    def __init__(self, admin: AdminClient, args: argparse.Namespace) -> None:
        self.admin = admin
        self.args = args

    async def topics(self) -> tuple[list[str], Any]:
        """The topic names matching --topic (sorted) and the Metadata response they came from."""
        metadata = await self.admin.metadata(None)
        names = sorted(t.name for t in metadata.topics if t.error_code == ErrorCode.NONE)
        exclude = self.args.exclude_internal
        if self.args.topic:
            try:
                include = topic_filter(self.args.topic)
            except ValueError as e:
                raise CommandError(f"{e}.") from None
            names = [n for n in names if include.fullmatch(n) and not (exclude and is_internal(n))]
        elif exclude:
            names = [n for n in names if not is_internal(n)]
        if self.args.topic and not names and not self.args.if_exists:
            raise CommandLineError(f"Topic '{self.args.topic}' does not exist as expected")
        return names, metadata

    async def create(self) -> None:
        args = self.args
        name = args.topic
        if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
            raise CommandLineError("The replication factor must be between 1 and 32767 inclusive")
        if args.partitions is not None and args.partitions < 1:
            raise CommandLineError("The partitions must be greater than 0")
        configs = parse_configs(args.config)
        if "." in name or "_" in name:
            print(
                "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
                "could collide. To avoid issues it is best to use either, but not both."
            )
        assignment = _parse_replica_assignment(args.replica_assignment) if args.replica_assignment else None
        created = await create_topic(
            self.admin,
            name,
            args.partitions,
            args.replication_factor,
            configs,
            assignment,
            args.if_not_exists,
        )
        if not created:
            return
        print(f"Created topic {name}.")

    async def list(self) -> None:
        names, _ = await self.topics()
        print("\n".join(names))

    async def alter(self) -> None:
        args = self.args
        names, metadata = await self.topics()
        if not names:
            return
        if args.config or args.delete_config:
            await self._alter_configs(names)
        if args.partitions is not None:
            current = {t.name: len(t.partitions) for t in metadata.topics}
            new_assignments = None
            if args.replica_assignment:
                assignment = _parse_replica_assignment(args.replica_assignment)
                new_assignments = {name: assignment[current[name] :] for name in names}
            await create_partitions(self.admin, dict.fromkeys(names, args.partitions), new_assignments)

    async def _alter_configs(self, names: builtins.list[str]) -> None:  # list is a method here
        args = self.args
        print(
            "WARNING: Altering topic configuration from this script has been deprecated and may be removed "
            "in future releases.\n         Going forward, please use kafka-configs.sh for this functionality"
        )
        for name in await alter_topic_configs(
            self.admin, names, parse_configs(args.config), args.delete_config
        ):
            print(f"Updated config for topic {name}.")

    async def delete(self) -> None:
        names, _ = await self.topics()
        if not names:
            return
        await delete_topics(self.admin, names)

    async def describe(self) -> None:
        args = self.args
        names, metadata = await self.topics()
        if not names:
            return
        topics = {t.name: t for t in metadata.topics}
        live_brokers = {b.node_id for b in metadata.brokers}
        configs = await self._describe_configs(names)
        describe_configs = not any(getattr(args, o) for o in REPORT_OPTIONS)
        for name in names:
            topic = topics[name]
            partitions = sorted(topic.partitions, key=lambda p: p.partition_index)
            entries = configs.get(name, [])
            overrides = [e for e in entries if not is_default(e)]
            if describe_configs and (not args.topics_with_overrides or overrides):
                line = f"Topic: {name}"
                if topic.topic_id.int:
                    line += f"\tTopicId: {topic_id_string(topic.topic_id)}"
                replication = len(partitions[0].replica_nodes) if partitions else 0
                line += f"\tPartitionCount: {len(partitions)}\tReplicationFactor: {replication}"
                line += "\tConfigs: " + ",".join(f"{e.name}={_java_string(e.value)}" for e in overrides)
                print(line)
            if args.topics_with_overrides:
                continue
            min_isr = next((int(e.value) for e in entries if e.name == "min.insync.replicas"), 1)
            for p in partitions:
                if describe_configs or self._reported(p, live_brokers, min_isr):
                    print(
                        f"\tTopic: {name}\tPartition: {p.partition_index}"
                        f"\tLeader: {p.leader_id if p.leader_id >= 0 else 'none'}"
                        f"\tReplicas: {','.join(map(str, p.replica_nodes))}"
                        f"\tIsr: {','.join(map(str, p.isr_nodes))}"
                    )

    def _reported(self, p: Any, live_brokers: set[int], min_isr: int) -> bool:
        args = self.args
        has_leader = p.leader_id >= 0
        return bool(
            (args.under_replicated_partitions and len(p.isr_nodes) < len(p.replica_nodes))
            or (args.unavailable_partitions and (not has_leader or p.leader_id not in live_brokers))
            or (args.under_min_isr_partitions and (not has_leader or len(p.isr_nodes) < min_isr))
            or (args.at_min_isr_partitions and len(p.isr_nodes) == min_isr)
        )

    async def _describe_configs(self, names: builtins.list[str]) -> dict[str, builtins.list[Any]]:
        return await describe_topic_configs(self.admin, names)


def _java_string(value: str | None) -> str:
    return "null" if value is None else value  # a sensitive config's value is null


def is_default(entry: Any) -> bool:
    # DescribeConfigs v0 has is_default; v1+ replaced it with config_source.
    return entry.config_source == DEFAULT_CONFIG if entry.config_source != -1 else entry.is_default


async def _run(args: argparse.Namespace) -> None:
    action = next(a for a in ACTIONS if getattr(args, a))
    security = command_config.client_security(args.command_config)
    async with AdminClient(args.bootstrap_server, client_id="samsa-topics", security=security) as admin:
        await getattr(TopicService(admin, args), action)()


def main(argv: list[str]) -> int:
    try:
        return run_command(
            _parser(), argv, _check_args, _run, no_args_text="Create, delete, describe, or change a topic."
        )
    except (CommandError, AdminError) as e:
        print(f"Error while executing topic command : {e}")
        return 1
