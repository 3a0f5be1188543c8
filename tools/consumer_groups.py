"""``samsa consumer-groups``: kafka-consumer-groups.sh for Samsa — list, describe and delete consumer
groups, and reset or delete their committed offsets.

Flags, output and messages are those of Kafka 3.x's ConsumerGroupCommand (``--bootstrap-server`` mode):
``--list [--state [STATES]]``; ``--describe`` of ``--group G`` (repeatable) or ``--all-groups`` with
``--offsets`` (the default), ``--members [--verbose]`` or ``--state``; ``--delete``; ``--reset-offsets``
with one scenario (``--to-earliest``, ``--to-latest``, ``--to-current``, ``--to-offset``, ``--shift-by``,
``--to-datetime``, ``--by-duration``, ``--from-file``), a scope (``--topic t[:p,p]`` repeatable, or
``--all-topics``), and ``--dry-run`` (the default: only print the plan), ``--execute`` or ``--export``;
``--delete-offsets --group G --topic t[:p,p]``.

Lag is the partition's log end offset (ListOffsets latest, read_uncommitted: the high watermark) minus
the committed offset, "-" where either is unknown. ``--execute`` commits with OffsetCommit at
generation -1 and no member id, as Kafka's Admin client does, and only for a group that is Empty or
Dead (unknown). Usage errors print the message and the usage on stderr and exit 1.

One difference: kafka-consumer-groups.sh exits 0 after printing ``Error: ...``; Samsa exits 1, so that a
script can tell. ``--command-config`` is not offered (Samsa's tools have no client security settings).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from protocol.api import ApiKey
from protocol.errors import ErrorCode, description
from protocol.messages import (
    ConsumerProtocolAssignment,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
)
from tools.admin_client import AdminClient, AdminError
from tools.usage import UsageError, UsageParser

MISSING = "-"
LATEST, EARLIEST = -1, -2  # ListOffsets' special timestamps
CONSUMER_PROTOCOL = "consumer"
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
SCENARIOS = (
    "to_offset",
    "shift_by",
    "to_datetime",
    "by_duration",
    "to_earliest",
    "to_latest",
    "to_current",
    "from_file",
)
DESCRIBE_VIEWS = ("members", "offsets", "state")
FIRST_BATCHED_OFFSET_FETCH = 8  # OffsetFetch v8 takes a list of groups
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

TopicPartition = tuple[str, int]


class CommandError(Exception):
    """A failure while executing: ``Error: Executing consumer group command failed due to <message>``."""


def _option(name: str) -> str:
    """An option as joptsimple prints it: ``[reset-offsets]``."""
    return f"[{name.replace('_', '-')}]"


def _parser() -> UsageParser:
    p = UsageParser(
        prog="samsa consumer-groups",
        description="List all consumer groups, describe a consumer group, delete consumer group info, "
        "or reset consumer group offsets.",
    )
    p.add_argument("--bootstrap-server", metavar="SERVER", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--group", action="append", metavar="GROUP", help="The consumer group we wish to act on.")
    p.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC",
        help="The topic whose consumer group offsets are reset or deleted; partitions may be given as "
        "topic1:0,1,2. Repeatable.",
    )
    p.add_argument(
        "--all-topics",
        action="store_true",
        help="Consider all topics assigned to a group in --reset-offsets.",
    )
    p.add_argument("--list", action="store_true", help="List all consumer groups.")
    p.add_argument(
        "--describe",
        action="store_true",
        help="Describe consumer group and list offset lag (number of messages not yet processed).",
    )
    p.add_argument("--all-groups", action="store_true", help="Apply to all consumer groups.")
    p.add_argument("--delete", action="store_true", help="Delete the groups (--group g1 --group g2).")
    p.add_argument(
        "--timeout",
        type=int,
        default=5000,
        metavar="MS",
        help="The time to wait for the cluster's answers, e.g. for a group to stabilize (default 5000 ms).",
    )
    p.add_argument(
        "--reset-offsets",
        action="store_true",
        help="Reset offsets of consumer group; the group must be inactive. --dry-run (the default) shows "
        "the plan, --execute applies it, --export prints it as CSV.",
    )
    p.add_argument(
        "--delete-offsets",
        action="store_true",
        help="Delete offsets of consumer group. Supports one consumer group at the time, and multiple "
        "topics.",
    )
    p.add_argument("--dry-run", action="store_true", help="Only show results without executing changes.")
    p.add_argument("--execute", action="store_true", help="Execute operation (reset-offsets).")
    p.add_argument("--export", action="store_true", help="Export the reset plan as CSV.")
    p.add_argument("--to-offset", type=int, metavar="OFFSET", help="Reset offsets to a specific offset.")
    p.add_argument("--from-file", metavar="PATH", help="Reset offsets to values defined in CSV file.")
    p.add_argument(
        "--to-datetime",
        metavar="DATETIME",
        help="Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'",
    )
    p.add_argument(
        "--by-duration",
        metavar="DURATION",
        help="Reset offsets to offset by duration from current timestamp. Format: 'PnDTnHnMnS'",
    )
    p.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    p.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    p.add_argument("--to-current", action="store_true", help="Reset offsets to current offset.")
    p.add_argument(
        "--shift-by",
        type=int,
        metavar="N",
        help="Reset offsets shifting current offset by 'n', where 'n' can be positive or negative.",
    )
    p.add_argument("--members", action="store_true", help="With --describe: describe members of the group.")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="With --describe --members: also show each member's assignment.",
    )
    p.add_argument(
        "--offsets",
        action="store_true",
        help="With --describe: list the group's partitions with their offset lag (the default).",
    )
    p.add_argument(
        "--state",
        nargs="?",
        const="",
        metavar="STATES",
        help="With --describe: the state of the group. With --list: the state of every group, or only the "
        "groups in these states (comma-separated, e.g. stable,empty).",
    )
    return p


def _check_args(args: argparse.Namespace) -> None:
    """ConsumerGroupCommandOptions.checkArgs, with its messages."""
    if not args.bootstrap_server:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError(
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
            "--delete-offsets"
        )
    action = chosen[0]
    for option in ("members", "verbose", "offsets", "state"):
        allowed = ("describe", "list") if option == "state" else ("describe",)
        if _given(args, option) and action not in allowed:
            raise UsageError(
                f"Option(s) {_option(option)} are unavailable given other options on the command line"
            )
    scope = f"{_option('group')}, {_option('all_groups')}"
    if action == "describe":
        if not args.group and not args.all_groups:
            raise UsageError(f"Option {_option('describe')} takes one of these options: {scope}")
        if sum(_given(args, v) for v in DESCRIBE_VIEWS) > 1:
            views = ", ".join(map(_option, DESCRIBE_VIEWS))
            raise UsageError(f"Option {_option('describe')} takes at most one of these options: {views}")
        if args.state:
            raise UsageError(f"Option {_option('describe')} does not take a value for {_option('state')}")
    if action == "delete":
        if not args.group and not args.all_groups:
            raise UsageError(f"Option {_option('delete')} takes one of these options: {scope}")
        if args.topic:
            raise UsageError(
                "The consumer does not support topic-specific offset deletion from a consumer group."
            )
    if action == "delete_offsets" and (not args.group or not args.topic):
        raise UsageError(
            f"Option {_option('delete_offsets')} takes the following options: "
            f"{_option('group')}, {_option('topic')}"
        )
    if action == "reset_offsets":
        if args.dry_run and args.execute:
            raise UsageError(
                f"Option {_option('reset_offsets')} only accepts one of {_option('execute')} and "
                f"{_option('dry_run')}"
            )
        if not args.dry_run and not args.execute:
            # Kafka's words, the missing space after "missing." included.
            print(
                "WARN: No action will be performed as the --execute option is missing.In a future major "
                "release, the default behavior of this command will be to prompt the user before executing "
                "the reset rather than doing a dry run. You should add the --dry-run option explicitly if "
                "you are scripting this command and want to keep the current default behavior without "
                "prompting.",
                file=sys.stderr,
            )
        if not args.group and not args.all_groups:
            raise UsageError(f"Option {_option('reset_offsets')} takes one of these options: {scope}")
        given = [s for s in SCENARIOS if _given(args, s)]
        if len(given) > 1:
            raise UsageError(f'Option "{_option(given[0])}" can\'t be used with option "{_option(given[1])}"')
    if args.group and args.all_groups:
        raise UsageError(f'Option "{_option("group")}" can\'t be used with option "{_option("all_groups")}"')
    if args.group and action == "list":
        raise UsageError(f'Option "{_option("group")}" can\'t be used with option "{_option("list")}"')
    if args.topic and action in ("list", "describe"):
        raise UsageError(f'Option "{_option("topic")}" can\'t be used with option "{_option(action)}"')
    if action == "list" and args.state:
        _parse_states(args.state)


def _given(args: argparse.Namespace, option: str) -> bool:
    value = getattr(args, option)
    return value is not None and value is not False


def _parse_states(text: str) -> list[str]:
    """ConsumerGroupState.parse over a comma-separated list, case-insensitively."""
    by_name = {s.lower(): s for s in STATES}
    states = [by_name.get(s.strip().lower()) for s in text.split(",")]
    if None in states:
        raise UsageError(f"Invalid state list '{text}'. Valid states are: {', '.join(STATES)}")
    return sorted(set(states), key=STATES.index)  # type: ignore[arg-type]


_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})(Z|[+-]\d{2}(?::?\d{2})?)")


def parse_datetime(text: str) -> int:
    """Kafka's Utils.getDateTime: ``yyyy-MM-ddTHH:mm:ss.SSS`` with an optional zone (Z, +hh, +hhmm,
    +hh:mm), UTC when there is none; epoch milliseconds."""
    _, t, clock = text.partition("T")
    if not t or not clock:
        raise CommandError("Error parsing timestamp. It does not contain a 'T' according to ISO8601 format")
    if not any(c in clock for c in "+-Z"):
        text += "Z"
    match = _DATETIME.fullmatch(text)
    try:
        if match is None:
            raise ValueError
        year, month, day, hour, minute, second, millis = (int(g) for g in match.groups()[:7])
        zone = match.group(8)
        offset = timedelta(0)
        if zone != "Z":
            digits = zone[1:].replace(":", "")
            offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
            offset = -offset if zone[0] == "-" else offset
        moment = datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=timezone(offset))
    except ValueError:
        raise CommandError(f'Unparseable date: "{text}"') from None
    return _epoch_ms(moment)


def _epoch_ms(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(milliseconds=1)


_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE,
)


def parse_duration(text: str) -> timedelta:
    """Java's Duration.parse for the ``PnDTnHnMn.nS`` form."""
    match = _DURATION.fullmatch(text)
    if match is None or text.upper().endswith("T") or not any(match.groups()[1:]):
        raise CommandError(f"Text cannot be parsed to a Duration: {text}")
    sign, days, hours, minutes, seconds, fraction = match.groups()
    amount = timedelta(
        days=int(days or 0),
        hours=int(hours or 0),
        minutes=int(minutes or 0),
        seconds=int(seconds or 0),
    )
    if fraction:
        nanos = int(fraction.ljust(9, "0"))
        amount += timedelta(microseconds=(-nanos if (seconds or "").startswith("-") else nanos) / 1000)
    return -amount if sign == "-" else amount


def _parse_topic_partitions(arg: str) -> tuple[str, list[int] | None]:
    """``topic`` or ``topic:0,1,2``."""
    if ":" not in arg:
        return arg, None
    topic, _, partitions = arg.partition(":")
    numbers = []
    for p in partitions.split(","):
        try:
            numbers.append(int(p))
        except ValueError:
            raise CommandError(f'For input string: "{p}"') from None
    return topic, numbers


def _error(message: str) -> None:
    print(f"\nError: {message}")


def _decode_assignment(data: bytes | memoryview | None) -> list[TopicPartition]:
    """The partitions of a ConsumerProtocolAssignment (empty when the member has none yet)."""
    if not data or len(data) < 2:
        return []
    version = int.from_bytes(data[:2], "big", signed=True)
    assignment = ConsumerProtocolAssignment.decode(memoryview(data)[2:], min(max(version, 0), 3))
    return [(t.topic, p) for t in assignment.assigned_partitions for p in t.partitions]


@dataclass
class Member:
    consumer_id: str
    group_instance_id: str
    client_id: str
    host: str
    assignment: list[TopicPartition]


@dataclass
class Group:
    group_id: str
    state: str
    assignment_strategy: str
    members: list[Member]


@dataclass
class Row:
    """A line of ``--describe --offsets``."""

    group: str
    topic: str
    partition: str
    offset: str
    log_end_offset: str
    lag: str
    consumer_id: str
    host: str
    client_id: str


class ConsumerGroupService:
    """kafka-consumer-groups.sh's actions, one method each; ``failed`` says whether one printed an error."""

    def __init__(self, admin: AdminClient, args: argparse.Namespace) -> None:
        self.admin = admin
        self.args = args
        self.failed = False

    def error(self, message: str) -> None:
        self.failed = True
        _error(message)

    # -- requests ---------------------------------------------------------------------------------

    async def list_groups(self, states: list[str] | None = None) -> list[tuple[str, str]]:
        """(group id, state) of every consumer group of every broker, sorted by group id."""
        request = ListGroupsRequest(states_filter=states or [])
        responses = await asyncio.gather(
            *(self._list_groups_of(node, request) for node in sorted(self.admin.brokers))
        )
        groups: dict[str, str] = {}
        for response in responses:
            for g in response.groups:
                if g.protocol_type in (CONSUMER_PROTOCOL, ""):
                    groups[g.group_id] = g.group_state or "Unknown"
        return sorted(groups.items())

    async def _list_groups_of(self, node: int, request: ListGroupsRequest) -> Any:
        deadline = time.monotonic() + self.admin.timeout
        while True:
            response = await self.admin.send_to_node(ApiKey.LIST_GROUPS, request, node)
            if response.error_code == ErrorCode.NONE:
                return response
            if response.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                raise CommandError(description(response.error_code))
            await asyncio.sleep(0.1)

    async def group_ids(self) -> list[str]:
        if self.args.all_groups:
            return [g for g, _ in await self.list_groups()]
        return list(dict.fromkeys(self.args.group))

    async def describe_group(self, group_id: str) -> Group:
        response = await self.admin.send_to_coordinator(
            group_id,
            ApiKey.DESCRIBE_GROUPS,
            DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False),
            lambda r: [g.error_code for g in r.groups],
        )
        described = response.groups[0]
        if described.error_code != ErrorCode.NONE:
            raise CommandError(described.error_message or description(described.error_code))
        if described.protocol_type not in (CONSUMER_PROTOCOL, ""):
            raise CommandError(f"GroupId {group_id} is not a consumer group ({described.protocol_type}).")
        members = [
            Member(
                m.member_id,
                m.group_instance_id or "",
                m.client_id,
                m.client_host,
                _decode_assignment(m.member_assignment),
            )
            for m in described.members
        ]
        return Group(group_id, described.group_state, described.protocol_data, members)

    async def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """Every offset the group has committed (OffsetFetch for all topics)."""
        batched = self.admin.version(ApiKey.OFFSET_FETCH) >= FIRST_BATCHED_OFFSET_FETCH
        if batched:
            request = OffsetFetchRequest(
                groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group_id, topics=None)],
                require_stable=False,
            )
        else:
            request = OffsetFetchRequest(group_id=group_id, topics=None, require_stable=False)

        def result_of(response: Any) -> Any:
            return response.groups[0] if batched else response

        response = await self.admin.send_to_coordinator(
            group_id, ApiKey.OFFSET_FETCH, request, lambda r: [result_of(r).error_code]
        )
        result = result_of(response)
        if result.error_code != ErrorCode.NONE:
            raise CommandError(description(result.error_code))
        # A negative offset means the group has no offset for the partition.
        return {
            (t.name, p.partition_index): p.committed_offset
            for t in result.topics
            for p in t.partitions
            if p.error_code == ErrorCode.NONE and p.committed_offset >= 0
        }

    async def partitions_of(self, topics: Iterable[str]) -> dict[str, list[int]]:
        """The partitions of each topic; CommandError for a topic that does not exist."""
        names = sorted(set(topics))
        if not names:
            return {}
        metadata = await self.admin.metadata(names)
        found = {}
        for t in metadata.topics:
            if t.error_code != ErrorCode.NONE:
                raise CommandError(description(t.error_code))
            found[t.name] = sorted(p.partition_index for p in t.partitions)
        return found

    async def log_offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """ListOffsets at ``timestamp`` (LATEST, EARLIEST or epoch ms) from each partition's leader;
        partitions without a leader or with an error are left out. -1 where no record is that recent."""
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        metadata = await self.admin.metadata(sorted({t for t, _ in wanted}))
        leaders = {
            (t.name, p.partition_index): p.leader_id
            for t in metadata.topics
            if t.error_code == ErrorCode.NONE
            for p in t.partitions
        }
        by_leader: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for topic, partition in wanted:
            leader = leaders.get((topic, partition), -1)
            if leader >= 0:
                by_leader[leader][topic].append(partition)

        async def ask(leader: int, topics: dict[str, list[int]]) -> Any:
            request = ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name=topic,
                        partitions=[
                            ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                            for p in partitions
                        ],
                    )
                    for topic, partitions in topics.items()
                ],
            )
            try:
                return await self.admin.send_to_node(ApiKey.LIST_OFFSETS, request, leader)
            except AdminError:
                return None

        responses = await asyncio.gather(*(ask(leader, topics) for leader, topics in by_leader.items()))
        return {
            (t.name, p.partition_index): p.offset
            for response in responses
            if response is not None
            for t in response.topics
            for p in t.partitions
            if p.error_code == ErrorCode.NONE
        }

    # -- --list -----------------------------------------------------------------------------------

    async def list(self) -> None:
        if self.args.state is None:
            for group_id, _ in await self.list_groups():
                print(group_id)
            return
        states = _parse_states(self.args.state) if self.args.state else []
        groups = await self.list_groups(states)
        width = max([15, *(len(g) for g, _ in groups)])
        print(f"{'GROUP':<{width}} STATE")
        for group_id, state in groups:
            print(f"{group_id:<{width}} {state}")

    # -- --describe -------------------------------------------------------------------------------

    async def describe(self) -> None:
        args = self.args
        groups = [await self.describe_group(g) for g in sorted(await self.group_ids())]
        if args.members:
            for group in groups:
                self._print_members(group)
        elif args.state is not None:
            for group in groups:
                self._print_state(group, await self.admin.find_coordinator(group.group_id))
        else:
            for group in groups:
                self._print_offsets(group.group_id, group.state, await self._offset_rows(group))

    def _should_print(self, group_id: str, state: str, rows: int) -> bool:
        """Kafka's shouldPrintMemberState: the notes for dead, empty and rebalancing groups."""
        if state == "Dead":
            self.error(f"Consumer group '{group_id}' does not exist.")
        elif state == "Empty":
            print(f"\nConsumer group '{group_id}' has no active members.", file=sys.stderr)
        elif state in ("PreparingRebalance", "CompletingRebalance"):
            print(f"\nWarning: Consumer group '{group_id}' is rebalancing.", file=sys.stderr)
        elif state != "Stable":
            raise CommandError(f"Expected a valid consumer group state, but found '{state}'.")
        return state != "Dead" and rows > 0

    async def _offset_rows(self, group: Group) -> list[Row]:
        committed = await self.committed_offsets(group.group_id)
        owners: list[tuple[Member | None, list[TopicPartition]]] = []
        # Members with the most partitions first, as Kafka lists them; then the partitions the group has
        # offsets for that no member owns.
        for member in sorted((m for m in group.members if m.assignment), key=lambda m: -len(m.assignment)):
            owners.append((member, sorted(set(member.assignment))))
        assigned = {tp for m in group.members for tp in m.assignment}
        unowned = sorted(tp for tp in committed if tp not in assigned)
        owners += [(None, [tp]) for tp in unowned]
        ends = await self.log_offsets([tp for _, tps in owners for tp in tps], LATEST)
        rows = []
        for member, partitions in owners:
            for tp in partitions:
                offset, end = committed.get(tp), ends.get(tp)
                rows.append(
                    Row(
                        group.group_id,
                        tp[0],
                        str(tp[1]),
                        MISSING if offset is None else str(offset),
                        MISSING if end is None else str(end),
                        MISSING if offset is None or end is None else str(end - offset),
                        member.consumer_id if member else MISSING,
                        member.host if member else MISSING,
                        member.client_id if member else MISSING,
                    )
                )
        return rows

    def _print_offsets(self, group_id: str, state: str, rows: list[Row]) -> None:
        if not self._should_print(group_id, state, len(rows)):
            return
        g = max([15, *(len(r.group) for r in rows)])
        t = max([15, *(len(r.topic) for r in rows)])
        c = max([15, *(len(r.consumer_id) for r in rows)])
        h = max([15, *(len(r.host) for r in rows)])

        def line(*cells: str) -> str:
            group, topic, partition, offset, end, lag, consumer, host, client = cells
            return (
                f"{group:<{g}} {topic:<{t}} {partition:<10} {offset:<15} {end:<15} {lag:<15} "
                f"{consumer:<{c}} {host:<{h}} {client}"
            )

        print()
        print(
            line(
                "GROUP",
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID",
            )
        )
        for r in rows:
            print(
                line(
                    r.group,
                    r.topic,
                    r.partition,
                    r.offset,
                    r.log_end_offset,
                    r.lag,
                    r.consumer_id,
                    r.host,
                    r.client_id,
                )
            )

    def _print_members(self, group: Group) -> None:
        members = group.members
        if not self._should_print(group.group_id, group.state, len(members)):
            return
        g = max([15, len(group.group_id)])
        c = max([15, *(len(m.consumer_id) for m in members)])
        i = max([17, *(len(m.group_instance_id) for m in members)])
        h = max([15, *(len(m.host) for m in members)])
        cl = max([15, *(len(m.client_id) for m in members)])
        with_instance = any(m.group_instance_id for m in members)

        def line(group_id: str, consumer: str, instance: str, host: str, client: str, count: str) -> str:
            text = f"{group_id:<{g}} {consumer:<{c}} "
            if with_instance:
                text += f"{instance:<{i}} "
            return text + f"{host:<{h}} {client:<{cl}} {count:<15} "

        header = line("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
        print("\n" + header + ("ASSIGNMENT" if self.args.verbose else ""))
        for m in members:
            text = line(
                group.group_id,
                m.consumer_id,
                m.group_instance_id,
                m.host,
                m.client_id,
                str(len(m.assignment)),
            )
            if self.args.verbose:
                text += _assignment_string(m.assignment)
            print(text)

    def _print_state(self, group: Group, node: int) -> None:
        if not self._should_print(group.group_id, group.state, 1):
            return
        host, port = self.admin.brokers[node]
        coordinator = f"{host}:{port} ({node})"
        w = max(25, len(coordinator))

        def line(*cells: str) -> str:
            group_id, coordinator, strategy, state, members = cells
            return f"{group_id:<{w}} {coordinator:<25} {strategy:<20} {state:<15} {members}"

        print("\n" + line("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"))
        print(
            line(group.group_id, coordinator, group.assignment_strategy, group.state, str(len(group.members)))
        )

    # -- --delete ---------------------------------------------------------------------------------

    async def delete(self) -> None:
        results: dict[str, int] = {}
        for group_id in await self.group_ids():
            response = await self.admin.send_to_coordinator(
                group_id,
                ApiKey.DELETE_GROUPS,
                DeleteGroupsRequest(groups_names=[group_id]),
                lambda r: [g.error_code for g in r.results],
            )
            results[group_id] = response.results[0].error_code
        deleted = [g for g, code in results.items() if code == ErrorCode.NONE]
        failed = {g: code for g, code in results.items() if code != ErrorCode.NONE}
        quoted = ", ".join(f"'{g}'" for g in deleted)
        if not failed:
            print(f"Deletion of requested consumer groups ({quoted}) was successful.")
            return
        self.error("Deletion of some consumer groups failed:")
        for group_id, code in failed.items():
            print(
                f"* Group '{group_id}' could not be deleted due to: "
                f"{ErrorCode(code).name}: {description(code)}"
            )
        if deleted:
            print(f"\nThese consumer groups were deleted successfully: {quoted}")

    # -- --reset-offsets --------------------------------------------------------------------------

    async def reset_offsets(self) -> None:
        args = self.args
        plan_from_file = self._read_reset_plan() if args.from_file else None
        plans: dict[str, dict[TopicPartition, int]] = {}
        for group_id in await self.group_ids():
            group = await self.describe_group(group_id)
            if group.state not in ("Empty", "Dead"):
                self.error(
                    f"Assignments can only be reset if the group '{group_id}' is inactive, but the current "
                    f"state is {group.state}."
                )
                plans[group_id] = {}
                continue
            plan = await self._prepare(group_id, plan_from_file)
            if args.execute:
                await self._commit(group_id, plan)
            plans[group_id] = plan
        if args.export:
            with_group = len(args.group or []) != 1
            print(
                "".join(
                    (f"{g}," if with_group else "") + f"{topic},{partition},{offset}\n"
                    for g, plan in plans.items()
                    for (topic, partition), offset in sorted(plan.items())
                )
            )
            return
        if plans:
            print(f"\n{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}")
        for group_id, plan in plans.items():
            for (topic, partition), offset in sorted(plan.items()):
                print(f"{group_id:<30} {topic:<30} {partition!s:<10} {offset!s:<15}")

    async def _partitions_to_reset(self, group_id: str) -> list[TopicPartition]:
        args = self.args
        if args.all_topics:
            return sorted(await self.committed_offsets(group_id))
        if not args.topic:
            if args.from_file:
                return []
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
        parsed = [_parse_topic_partitions(t) for t in args.topic]
        known = await self.partitions_of(topic for topic, _ in parsed)
        partitions: list[TopicPartition] = []
        for topic, chosen in parsed:
            unknown = [p for p in chosen or [] if p not in known[topic]]
            if unknown:
                raise CommandError(
                    'The partitions "' + ", ".join(f"{topic}-{p}" for p in unknown) + '" do not exist'
                )
            partitions += [(topic, p) for p in (known[topic] if chosen is None else chosen)]
        return list(dict.fromkeys(partitions))

    async def _prepare(
        self, group_id: str, plan_from_file: dict[str, dict[TopicPartition, int]] | None
    ) -> dict[TopicPartition, int]:
        """GroupOffsetsResetter's scenarios: the new offset of each partition in scope."""
        args = self.args
        partitions = await self._partitions_to_reset(group_id)
        if args.to_offset is not None:
            return await self._within_range({tp: args.to_offset for tp in partitions})
        if args.to_earliest:
            return await self._offsets_at(partitions, EARLIEST, "starting offset")
        if args.to_latest:
            return await self._offsets_at(partitions, LATEST, "ending offset")
        if args.shift_by is not None:
            committed = await self.committed_offsets(group_id)
            shifted = {}
            for tp in partitions:
                if tp not in committed:
                    raise UsageError(
                        f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current "
                        "committed offset"
                    )
                shifted[tp] = committed[tp] + args.shift_by
            return await self._within_range(shifted)
        if args.to_datetime is not None or args.by_duration is not None:
            if args.to_datetime is not None:
                timestamp = parse_datetime(args.to_datetime)
            else:
                timestamp = _epoch_ms(datetime.now(UTC) - parse_duration(args.by_duration))
            found = await self.log_offsets(partitions, timestamp)
            # No record at or after the time: the log end offset, as Kafka does.
            later = [tp for tp in partitions if found.get(tp, -1) < 0]
            found.update(await self.log_offsets(later, LATEST))
            return self._all_found(partitions, found, "offset by timestamp")
        if plan_from_file is not None:
            if group_id not in plan_from_file:
                self.error(f"No reset plan for group {group_id} found")
                return {}
            return await self._within_range(plan_from_file[group_id])
        if args.to_current:
            committed = await self.committed_offsets(group_id)
            plan = {tp: committed[tp] for tp in partitions if tp in committed}
            ends = await self._offsets_at(
                [tp for tp in partitions if tp not in committed], LATEST, "ending offset"
            )
            return {**plan, **ends}
        scenarios = ", ".join(map(_option, SCENARIOS))
        raise UsageError(
            f"Option '{_option('reset_offsets')}' requires one of the following scenarios: {scenarios}"
        )

    async def _offsets_at(
        self, partitions: list[TopicPartition], timestamp: int, what: str
    ) -> dict[TopicPartition, int]:
        return self._all_found(partitions, await self.log_offsets(partitions, timestamp), what)

    @staticmethod
    def _all_found(
        partitions: list[TopicPartition], found: dict[TopicPartition, int], what: str
    ) -> dict[TopicPartition, int]:
        for topic, partition in partitions:
            if found.get((topic, partition), -1) < 0:
                raise UsageError(f"Error getting {what} of topic partition: {topic}-{partition}")
        return {tp: found[tp] for tp in partitions}

    async def _within_range(self, requested: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Kafka's checkOffsetsRange: an offset past the log end becomes the log end, one before the
        log start becomes the log start, with a warning."""
        starts = await self.log_offsets(requested, EARLIEST)
        ends = await self.log_offsets(requested, LATEST)
        checked = {}
        for (topic, partition), offset in requested.items():
            end, start = ends.get((topic, partition)), starts.get((topic, partition))
            if end is None:
                raise CommandError(
                    f"Unexpected non-existing offset value for topic partition {topic}-{partition}"
                )
            if offset > end:
                print(
                    f"WARN New offset ({offset}) is higher than latest offset for topic partition "
                    f"{topic}-{partition}. Value will be set to {end}",
                    file=sys.stderr,
                )
                offset = end
            elif start is not None and offset < start:
                print(
                    f"WARN New offset ({offset}) is lower than earliest offset for topic partition "
                    f"{topic}-{partition}. Value will be set to {start}",
                    file=sys.stderr,
                )
                offset = start
            checked[(topic, partition)] = offset
        return checked

    def _read_reset_plan(self) -> dict[str, dict[TopicPartition, int]]:
        """The --from-file CSV: ``topic,partition,offset`` lines for a single --group, otherwise
        ``group,topic,partition,offset``."""
        try:
            with open(self.args.from_file) as f:
                lines = [line.strip() for line in f if line.strip()]
        except OSError as e:
            raise CommandError(str(e)) from None
        single = len(self.args.group or []) == 1 and bool(lines) and len(lines[0].split(",")) == 3
        plan: dict[str, dict[TopicPartition, int]] = defaultdict(dict)
        for line in lines:
            fields = [f.strip() for f in line.split(",")]
            try:
                if single:
                    group_id, (topic, partition, offset) = self.args.group[0], fields
                else:
                    group_id, topic, partition, offset = fields
                plan[group_id][(topic, int(partition))] = int(offset)
            except ValueError:
                raise CommandError(f"Invalid line in the reset plan {self.args.from_file}: {line}") from None
        return plan

    async def _commit(self, group_id: str, offsets: dict[TopicPartition, int]) -> None:
        """Kafka's alterConsumerGroupOffsets: OffsetCommit as no member, at generation -1."""
        by_topic: dict[str, list[Any]] = defaultdict(list)
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic[topic].append(
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=partition,
                    committed_offset=offset,
                    committed_leader_epoch=-1,
                    committed_metadata="",
                )
            )
        request = OffsetCommitRequest(
            group_id=group_id,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            retention_time_ms=-1,
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=p)
                for t, p in by_topic.items()
            ],
        )
        response = await self.admin.send_to_coordinator(
            group_id,
            ApiKey.OFFSET_COMMIT,
            request,
            lambda r: [p.error_code for t in r.topics for p in t.partitions],
        )
        for t in response.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE:
                    raise CommandError(description(p.error_code))

    # -- --delete-offsets -------------------------------------------------------------------------

    async def delete_offsets(self) -> None:
        group_id = self.args.group[0]
        topics = self.args.topic
        results: dict[TopicPartition, int] = {}
        partitions: list[TopicPartition] = []
        whole_topics = []
        for arg in topics:
            topic, chosen = _parse_topic_partitions(arg)
            if chosen is None:
                whole_topics.append(topic)
            else:
                partitions += [(topic, p) for p in chosen]
        if whole_topics:
            metadata = await self.admin.metadata(sorted(set(whole_topics)))
            for t in metadata.topics:
                if t.error_code != ErrorCode.NONE:
                    results[(t.name, -1)] = t.error_code
                else:
                    partitions += [(t.name, p.partition_index) for p in t.partitions]
        partitions = list(dict.fromkeys(partitions))
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in partitions:
            by_topic[topic].append(partition)
        request = OffsetDeleteRequest(
            group_id=group_id,
            topics=[
                OffsetDeleteRequest.OffsetDeleteRequestTopic(
                    name=topic,
                    partitions=[
                        OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=p) for p in ps
                    ],
                )
                for topic, ps in by_topic.items()
            ],
        )
        response = await self.admin.send_to_coordinator(
            group_id, ApiKey.OFFSET_DELETE, request, lambda r: [r.error_code]
        )
        top_level = response.error_code
        answered = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
        for tp in partitions:
            # A group-level error fails every partition, as in Kafka's Admin client.
            results[tp] = top_level if top_level != ErrorCode.NONE else answered.get(tp, ErrorCode.NONE)
        if top_level == ErrorCode.NONE:
            top_level = next(
                (results[tp] for tp in partitions if results[tp] != ErrorCode.NONE), ErrorCode.NONE
            )
        if top_level == ErrorCode.NONE:
            print(f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group_id}")
        elif top_level == ErrorCode.INVALID_GROUP_ID:
            self.error(f"'{group_id}' is not valid.")
        elif top_level == ErrorCode.GROUP_ID_NOT_FOUND:
            self.error(f"'{group_id}' does not exist.")
        elif top_level == ErrorCode.GROUP_AUTHORIZATION_FAILED:
            self.error(f"Access to '{group_id}' is not authorized.")
        elif top_level == ErrorCode.NON_EMPTY_GROUP:
            self.error(
                f"Deleting offsets of a consumer group '{group_id}' is forbidden if the group is not empty."
            )
        elif top_level in (
            ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ):
            self.error("Encounter some partition level error, see the follow-up details:")
        else:
            self.error(f"Encounter some unknown error: {ErrorCode(top_level).name}")
        print(f"\n{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}")
        for (topic, partition), code in sorted(results.items(), key=lambda r: r[0][0] + str(r[0][1])):
            status = "Successful" if code == ErrorCode.NONE else f"Error: {description(code)}"
            shown = str(partition) if partition >= 0 else "Not Provided"
            print(f"{topic:<30} {shown:<15} {status:<15}")


def _assignment_string(assignment: list[TopicPartition]) -> str:
    """``topic1(0,1), topic2(0)``, or "-" for none."""
    if not assignment:
        return MISSING
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in assignment:
        by_topic[topic].append(partition)
    return ", ".join(sorted(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in by_topic.items()))


async def _run(args: argparse.Namespace) -> bool:
    """Runs the action; True if it reported an error."""
    action = next(a for a in ACTIONS if getattr(args, a))
    async with AdminClient(
        args.bootstrap_server, client_id="samsa-consumer-groups", timeout=args.timeout / 1000
    ) as admin:
        service = ConsumerGroupService(admin, args)
        await getattr(service, action)()
        return service.failed


def main(argv: list[str]) -> int:
    parser = _parser()
    if not argv:
        parser.print_help(sys.stderr)
        print(
            "This tool helps to list all consumer groups, describe a consumer group, delete consumer group "
            "info, or reset consumer group offsets.",
            file=sys.stderr,
        )
        return 1
    try:
        args = parser.parse_args(argv)
        _check_args(args)
        failed = asyncio.run(_run(args))
    except UsageError as e:
        print(e, file=sys.stderr)
        parser.print_usage(sys.stderr)
        return 1
    except (CommandError, AdminError) as e:
        _error(f"Executing consumer group command failed due to {e}")
        return 1
    return 1 if failed else 0
