"""What the Topics pages do to and read of a cluster beyond the shared snapshot: create, delete, add
partitions, set or delete a config, elect preferred leaders, start a reassignment and follow its progress,
and read a topic's configs, each through the ``tools/`` function that the matching command line tool
uses (tools/topics.py, tools/leader_election.py, tools/reassign_partitions.py), so that the console and
the tools send the same requests and say the same things.

Each action parses what the form sent, returns its outcome as a sentence, and raises ``ActionError`` (a
sentence too) when the input is wrong or the cluster refused it; the broker's own message (Kafka's, e.g.
"Topic 'x' already exists.") is kept as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tools import leader_election, reassign_partitions
from tools import topics as topics_tool
from tools.admin_client import AdminClient
from tools.usage import CommandLineError

# DescribeConfigs' ConfigSource, in words.
CONFIG_SOURCES = {
    1: "topic",
    2: "broker (dynamic)",
    3: "cluster default (dynamic)",
    4: "broker (static)",
    5: "default",
    6: "broker logger",
}
_KAFKA_EXCEPTION_PREFIX = "org.apache.kafka.common.errors."

# The tools' failures: their messages are already the words a user should read.
_TOOL_ERRORS = (
    topics_tool.CommandError,
    CommandLineError,
    leader_election.CommandFailed,
    reassign_partitions.CommandError,
    reassign_partitions.TerseError,
)


class ActionError(Exception):
    """An action that could not be done; the message says why, in words."""


def _count(text: str, what: str) -> int | None:
    """A form's whole number; None when left empty."""
    text = text.strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ActionError(f"The {what} must be a whole number, not {text!r}.") from None


def parse_configs(text: str) -> dict[str, str]:
    """``key=value`` lines (blank lines ignored) as kafka-topics.sh's ``--config`` items."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    try:
        return topics_tool.parse_configs(lines)
    except CommandLineError as e:
        raise ActionError(str(e)) from None


def parse_replicas(text: str, partition: int) -> list[int]:
    """A partition's new replicas as typed: broker ids separated by commas (or spaces)."""
    items = [item for item in text.replace(",", " ").split() if item]
    try:
        return [int(item) for item in items]
    except ValueError:
        raise ActionError(
            f"Partition {partition}: {text.strip()!r} is not a list of broker ids such as 1,2,3."
        ) from None


def _partitions(partitions: list[tuple[str, int]]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in partitions)


async def create_topic(
    admin: AdminClient, name: str, partitions: str, replication_factor: str, configs: str
) -> str:
    """CreateTopics, as ``samsa topics --create`` (empty counts: the cluster's defaults)."""
    name = name.strip()
    if not name:
        raise ActionError("A topic needs a name.")
    count, factor = _count(partitions, "partition count"), _count(replication_factor, "replication factor")
    if factor is not None and not 1 <= factor <= 32767:
        raise ActionError("The replication factor must be between 1 and 32767 inclusive.")
    if count is not None and count < 1:
        raise ActionError("The partitions must be greater than 0.")
    settings = parse_configs(configs)
    try:
        await topics_tool.create_topic(admin, name, count, factor, settings)
    except _TOOL_ERRORS as e:
        raise ActionError(str(e)) from None
    return f"Created topic {name}."


async def delete_topic(admin: AdminClient, name: str) -> str:
    try:
        await topics_tool.delete_topics(admin, [name])
    except _TOOL_ERRORS as e:
        raise ActionError(str(e)) from None
    return f"Deleted topic {name}."


async def add_partitions(admin: AdminClient, name: str, count: str) -> str:
    """CreatePartitions: the topic grown to ``count`` partitions in all."""
    total = _count(count, "partition count")
    if total is None:
        raise ActionError("Say how many partitions the topic should have in all.")
    try:
        await topics_tool.create_partitions(admin, {name: total})
    except _TOOL_ERRORS as e:
        raise ActionError(str(e)) from None
    return f"Topic {name} now has {total} partitions."


async def alter_config(admin: AdminClient, name: str, key: str, value: str, delete: bool) -> str:
    """IncrementalAlterConfigs: SET ``key`` to ``value``, or DELETE it (back to its default)."""
    key = key.strip()
    if not key:
        raise ActionError("Name the config to change.")
    try:
        if delete:
            await topics_tool.alter_topic_configs(admin, [name], {}, [key])
        else:
            await topics_tool.alter_topic_configs(admin, [name], {key: value.strip()}, [])
    except _TOOL_ERRORS as e:
        raise ActionError(str(e)) from None
    if delete:
        return f"Config {key} of topic {name} is back to its default."
    return f"Config {key} of topic {name} set to {value.strip()}."


async def elect_preferred_leaders(admin: AdminClient, name: str, partitions: list[int]) -> str:
    """ElectLeaders (PREFERRED) for the topic's partitions, as ``samsa leader-election``."""
    if not partitions:
        raise ActionError(f"Topic {name} has no partitions to elect leaders for.")
    try:
        result = await leader_election.elect_leaders(admin, "PREFERRED", [(name, p) for p in partitions])
    except _TOOL_ERRORS as e:
        raise ActionError(str(e).removeprefix(_KAFKA_EXCEPTION_PREFIX)) from None
    words = []
    if result.succeeded:
        words.append(f"Preferred leader elected for {_partitions(result.succeeded)}.")
    if result.noop:
        words.append(f"Already led by their preferred replica: {_partitions(result.noop)}.")
    if result.failed:
        failures = "; ".join(
            f"{t}-{p}: {error.removeprefix(_KAFKA_EXCEPTION_PREFIX)}"
            for (t, p), error in result.failed.items()
        )
        raise ActionError(" ".join([*words, f"Election failed for {failures}"]))
    return " ".join(words) or "No partition needed an election."


async def start_reassignment(
    admin: AdminClient, name: str, fields: Mapping[int, str], current: Mapping[int, list[int]]
) -> tuple[str, dict[int, list[int]]]:
    """AlterPartitionReassignments for the partitions whose typed replicas differ from their current
    ones, after ``samsa reassign-partitions --execute``'s checks; the outcome and the targets started."""
    wanted = {p: parse_replicas(text, p) for p, text in sorted(fields.items())}
    changed = {p: r for p, r in wanted.items() if r != current.get(p)}
    if not changed:
        raise ActionError("Nothing to reassign: every partition already has these replicas.")
    proposal = {(name, p): r for p, r in changed.items()}
    try:
        reassign_partitions.check_replica_lists(proposal)
        await reassign_partitions.check_proposal(admin, proposal)
        errors = await reassign_partitions.alter_reassignments(admin, dict(proposal))
    except _TOOL_ERRORS as e:
        raise ActionError(str(e)) from None
    if errors:
        raise ActionError(
            "The reassignment was refused: "
            + "; ".join(f"{t}-{p}: {m}" for (t, p), m in sorted(errors.items()))
        )
    return f"Reassignment started for {_partitions(sorted(proposal))}.", changed


@dataclass
class ConfigRow:
    name: str
    value: str | None
    source: str
    default: bool
    read_only: bool
    sensitive: bool


async def topic_configs(admin: AdminClient, name: str) -> list[ConfigRow]:
    """The topic's configs (DescribeConfigs), sorted by name; ActionError when it cannot be described."""
    try:
        entries = (await topics_tool.describe_topic_configs(admin, [name])).get(name, [])
    except _TOOL_ERRORS as e:
        raise ActionError(str(e)) from None
    return sorted(
        (
            ConfigRow(
                e.name,
                e.value,
                CONFIG_SOURCES.get(e.config_source, "default" if e.is_default else "override"),
                topics_tool.is_default(e),
                e.read_only,
                e.is_sensitive,
            )
            for e in entries
        ),
        key=lambda row: row.name,
    )


@dataclass
class PartitionMove:
    """One partition of a reassignment as the progress view shows it."""

    partition: int
    target: list[int] | None  # what the console asked for; None: started elsewhere
    replicas: list[int]
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)
    in_progress: bool = False

    @property
    def state(self) -> str:
        if self.in_progress:
            return "in progress"
        if self.target is None or self.target == self.replicas:
            return "done"
        return "not as asked"  # cancelled or replaced by another reassignment


@dataclass
class ReassignmentProgress:
    moves: list[PartitionMove]

    @property
    def complete(self) -> bool:
        return bool(self.moves) and all(m.state == "done" for m in self.moves)

    @property
    def in_progress(self) -> bool:
        return any(m.in_progress for m in self.moves)


def progress(
    targets: Mapping[int, list[int]], ongoing: Mapping[int, Any], current: Mapping[int, list[int]]
) -> ReassignmentProgress:
    """The partitions asked for (``targets``) or being reassigned (``ongoing``: ListPartitionReassignments'
    entries by partition); a partition is done when it is not listed and its replicas are the target."""
    moves = []
    for p in sorted(set(targets) | set(ongoing)):
        entry = ongoing.get(p)
        if entry is not None:
            moves.append(
                PartitionMove(
                    p,
                    targets.get(p),
                    list(entry.replicas),
                    list(entry.adding_replicas),
                    list(entry.removing_replicas),
                    in_progress=True,
                )
            )
        else:
            moves.append(PartitionMove(p, targets.get(p), list(current.get(p, []))))
    return ReassignmentProgress(moves)


async def reassignments(admin: AdminClient, name: str, partitions: list[int]) -> dict[int, Any]:
    """The topic's partitions being reassigned (ListPartitionReassignments), by partition."""
    if not partitions:
        return {}
    try:
        listed = await reassign_partitions.list_reassignments(admin, [(name, p) for p in partitions])
    except _TOOL_ERRORS as e:
        raise ActionError(str(e)) from None
    return {p: entry for (t, p), entry in listed.items() if t == name}
