"""``--reset-offsets``: GroupOffsetsResetter's plan of new committed offsets for each inactive group, from
one scenario (``--to-earliest``, ``--to-latest``, ``--to-current``, ``--to-offset``, ``--shift-by``,
``--to-datetime``, ``--by-duration``, ``--from-file``) over a scope (``--topic``, ``--all-topics``), kept
within each log's range; printed (``--dry-run``), exported as CSV (``--export``) or committed
(``--execute``), as no member at generation -1.

``plan_reset`` (a ``ResetScenario`` to a ``ResetPlan``) and ``commit_offsets`` are the computation and the
commit without the printing, for the console's reset of a group's offsets."""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from protocol.api import ApiKey
from protocol.errors import ErrorCode, description
from protocol.messages import OffsetCommitRequest
from tools.admin_client import AdminClient
from tools.consumer_groups.command import (
    EARLIEST,
    LATEST,
    CommandError,
    GroupCommand,
    TopicPartition,
    parse_topic_partitions,
)
from tools.consumer_groups.options import SCENARIOS, option_name
from tools.usage import UsageError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

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


class ResetRefused(CommandError):
    """The group cannot be reset (it is active, or the file has no plan for it): the command reports it
    and goes on with the next group."""


@dataclass
class ResetScenario:
    """One ``--reset-offsets`` scenario and its scope, as the options give them (only one scenario is
    set; ``options.check_args`` sees to it)."""

    topics: list[str] = field(default_factory=list)  # --topic arguments: ``t`` or ``t:0,1``
    all_topics: bool = False
    to_offset: int | None = None
    to_earliest: bool = False
    to_latest: bool = False
    shift_by: int | None = None
    to_datetime: str | None = None  # Kafka's yyyy-MM-ddTHH:mm:ss.SSS[zone]
    by_duration: str | None = None  # PnDTnHnMnS
    to_current: bool = False
    from_file: dict[str, dict[TopicPartition, int]] | None = None  # --from-file's plan, by group

    @classmethod
    def from_args(
        cls, args: argparse.Namespace, from_file: dict[str, dict[TopicPartition, int]] | None = None
    ) -> ResetScenario:
        return cls(
            topics=list(args.topic or []),
            all_topics=bool(args.all_topics),
            to_offset=args.to_offset,
            to_earliest=bool(args.to_earliest),
            to_latest=bool(args.to_latest),
            shift_by=args.shift_by,
            to_datetime=args.to_datetime,
            by_duration=args.by_duration,
            to_current=bool(args.to_current),
            from_file=from_file,
        )


@dataclass
class ResetPlan:
    """The new committed offset of each partition in scope, and the warnings about offsets moved into
    the log's range."""

    group_id: str
    offsets: dict[TopicPartition, int]
    warnings: list[str] = field(default_factory=list)


async def plan_reset(groups: GroupCommand, group_id: str, scenario: ResetScenario) -> ResetPlan:
    """``--reset-offsets --dry-run`` for one group: ResetRefused (Kafka's message) unless the group is
    inactive (Empty or Dead); UsageError or CommandError when the scenario cannot be computed."""
    group = await groups.describe_group(group_id)
    if group.state not in ("Empty", "Dead"):
        raise ResetRefused(
            f"Assignments can only be reset if the group '{group_id}' is inactive, but the current "
            f"state is {group.state}."
        )
    planner = _Planner(groups, scenario)
    offsets = await planner.prepare(group_id)
    return ResetPlan(group_id, offsets, planner.warnings)


async def commit_offsets(admin: AdminClient, group_id: str, offsets: dict[TopicPartition, int]) -> None:
    """Kafka's alterConsumerGroupOffsets: OffsetCommit as no member, at generation -1 (the coordinator
    refuses it while the group has members); CommandError with the partition's error in words."""
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
            OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=p) for t, p in by_topic.items()
        ],
    )
    response = await admin.send_to_coordinator(
        group_id,
        ApiKey.OFFSET_COMMIT,
        request,
        lambda r: [p.error_code for t in r.topics for p in t.partitions],
    )
    for t in response.topics:
        for p in t.partitions:
            if p.error_code != ErrorCode.NONE:
                raise CommandError(description(p.error_code))


class ResetOffsets(GroupCommand):
    async def run(self) -> None:
        args = self.args
        scenario = ResetScenario.from_args(args, self._read_reset_plan() if args.from_file else None)
        plans: dict[str, dict[TopicPartition, int]] = {}
        for group_id in await self.group_ids():
            try:
                computed = await plan_reset(self, group_id, scenario)
            except ResetRefused as e:
                self.error(str(e))
                plans[group_id] = {}
                continue
            for warning in computed.warnings:
                print(f"WARN {warning}", file=sys.stderr)
            if args.execute:
                await commit_offsets(self.admin, group_id, computed.offsets)
            plans[group_id] = computed.offsets
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


class _Planner:
    """GroupOffsetsResetter's computation of one scenario's plan, with the requests of ``groups``."""

    def __init__(self, groups: GroupCommand, scenario: ResetScenario) -> None:
        self.groups = groups
        self.scenario = scenario
        self.warnings: list[str] = []

    async def _partitions_to_reset(self, group_id: str) -> list[TopicPartition]:
        scenario, groups = self.scenario, self.groups
        if scenario.all_topics:
            return sorted(await groups.committed_offsets(group_id))
        if not scenario.topics:
            if scenario.from_file is not None:
                return []
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
        parsed = [parse_topic_partitions(t) for t in scenario.topics]
        known = await groups.partitions_of(topic for topic, _ in parsed)
        partitions: list[TopicPartition] = []
        for topic, chosen in parsed:
            unknown = [p for p in chosen or [] if p not in known[topic]]
            if unknown:
                raise CommandError(
                    'The partitions "' + ", ".join(f"{topic}-{p}" for p in unknown) + '" do not exist'
                )
            partitions += [(topic, p) for p in (known[topic] if chosen is None else chosen)]
        return list(dict.fromkeys(partitions))

    async def prepare(self, group_id: str) -> dict[TopicPartition, int]:
        """GroupOffsetsResetter's scenarios: the new offset of each partition in scope."""
        scenario, groups = self.scenario, self.groups
        partitions = await self._partitions_to_reset(group_id)
        if scenario.to_offset is not None:
            return await self._within_range({tp: scenario.to_offset for tp in partitions})
        if scenario.to_earliest:
            return await self._offsets_at(partitions, EARLIEST, "starting offset")
        if scenario.to_latest:
            return await self._offsets_at(partitions, LATEST, "ending offset")
        if scenario.shift_by is not None:
            committed = await groups.committed_offsets(group_id)
            shifted = {}
            for tp in partitions:
                if tp not in committed:
                    raise UsageError(
                        f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current "
                        "committed offset"
                    )
                shifted[tp] = committed[tp] + scenario.shift_by
            return await self._within_range(shifted)
        if scenario.to_datetime is not None or scenario.by_duration is not None:
            if scenario.to_datetime is not None:
                timestamp = parse_datetime(scenario.to_datetime)
            else:
                assert scenario.by_duration is not None
                timestamp = _epoch_ms(datetime.now(UTC) - parse_duration(scenario.by_duration))
            found = await groups.log_offsets(partitions, timestamp)
            # No record at or after the time: the log end offset, as Kafka does.
            later = [tp for tp in partitions if found.get(tp, -1) < 0]
            found.update(await groups.log_offsets(later, LATEST))
            return self._all_found(partitions, found, "offset by timestamp")
        if scenario.from_file is not None:
            if group_id not in scenario.from_file:
                raise ResetRefused(f"No reset plan for group {group_id} found")
            return await self._within_range(scenario.from_file[group_id])
        if scenario.to_current:
            committed = await groups.committed_offsets(group_id)
            plan = {tp: committed[tp] for tp in partitions if tp in committed}
            ends = await self._offsets_at(
                [tp for tp in partitions if tp not in committed], LATEST, "ending offset"
            )
            return {**plan, **ends}
        scenarios = ", ".join(map(option_name, SCENARIOS))
        raise UsageError(
            f"Option '{option_name('reset_offsets')}' requires one of the following scenarios: {scenarios}"
        )

    async def _offsets_at(
        self, partitions: list[TopicPartition], timestamp: int, what: str
    ) -> dict[TopicPartition, int]:
        return self._all_found(partitions, await self.groups.log_offsets(partitions, timestamp), what)

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
        starts = await self.groups.log_offsets(requested, EARLIEST)
        ends = await self.groups.log_offsets(requested, LATEST)
        checked = {}
        for (topic, partition), offset in requested.items():
            end, start = ends.get((topic, partition)), starts.get((topic, partition))
            if end is None:
                raise CommandError(
                    f"Unexpected non-existing offset value for topic partition {topic}-{partition}"
                )
            if offset > end:
                self.warnings.append(
                    f"New offset ({offset}) is higher than latest offset for topic partition "
                    f"{topic}-{partition}. Value will be set to {end}"
                )
                offset = end
            elif start is not None and offset < start:
                self.warnings.append(
                    f"New offset ({offset}) is lower than earliest offset for topic partition "
                    f"{topic}-{partition}. Value will be set to {start}"
                )
                offset = start
            checked[(topic, partition)] = offset
        return checked
