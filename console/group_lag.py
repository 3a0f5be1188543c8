"""The console's reading of consumer groups and their lag: every group of every broker with its state,
protocol, members and total lag (``list_groups``); one group's members and its committed offsets with
the lag of each partition (``read_group``, the rows ``samsa consumer-groups --describe`` prints); and
``LagHistory``, each group's total lag (and per topic) sampled while the console runs, kept in
``console.state`` for 15 minutes and drawn as the group page's chart.

The requests are tools/consumer_groups' (ListGroups on every broker, DescribeGroups and OffsetFetch at
the coordinator, ListOffsets at the leaders); the list's lag uses the shared ClusterSnapshot's end
offsets, so that the list costs no ListOffsets of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from console.cluster import ClusterSnapshot
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import DescribeGroupsRequest, OffsetFetchRequest
from tools.admin_client import AdminClient, AdminError
from tools.consumer_groups.command import (
    FIRST_BATCHED_OFFSET_FETCH,
    MISSING,
    CommandError,
    Group,
    GroupCommand,
    GroupListing,
    TopicPartition,
    committed_of,
    list_groups_of,
)
from tools.consumer_groups.describe import DescribeGroups, Row, assignment_string

WINDOW = 15 * 60.0  # seconds of lag history kept per group
MIN_INTERVAL = 1.0  # samples closer than this replace the last one (several viewers refresh at once)
STATE_KEY = "group_lag"
MAX_TOPIC_SERIES = 6  # more topics than this: the chart shows the total only


def requests(admin: AdminClient) -> GroupCommand:
    """tools/consumer_groups' requests about groups and offsets, without a command line."""
    return GroupCommand(admin, argparse.Namespace(all_groups=False, group=[]))


@dataclass
class GroupSummary:
    """A row of the groups list."""

    group_id: str
    protocol_type: str
    state: str
    coordinator: int
    coordinator_address: str
    protocol: str = ""
    members: int | None = None
    lag: int | None = None  # None: no committed offset whose partition's end offset is known
    lag_by_topic: dict[str, int] = field(default_factory=dict)


@dataclass
class GroupsList:
    groups: list[GroupSummary]
    warnings: list[str]  # what could not be read, in words


@dataclass
class GroupDetail:
    group: Group
    coordinator: int
    coordinator_address: str
    rows: list[Row]  # --describe --offsets' rows: committed offset, log end offset, lag, owner
    assignments: dict[str, str]  # member id -> its partitions as ``topic(0,1), other(2)``

    @property
    def lag(self) -> int | None:
        lags = [int(r.lag) for r in self.rows if r.lag != MISSING]
        return sum(lags) if lags else None

    @property
    def lag_by_topic(self) -> dict[str, int]:
        by_topic: dict[str, int] = defaultdict(int)
        for r in self.rows:
            if r.lag != MISSING:
                by_topic[r.topic] += int(r.lag)
        return dict(by_topic)

    @property
    def topics(self) -> list[str]:
        return sorted({r.topic for r in self.rows})


def _address(admin: AdminClient, node: int) -> str:
    host_port = admin.brokers.get(node)
    return f"{host_port[0]}:{host_port[1]}" if host_port else "?"


async def list_groups(admin: AdminClient, snapshot: ClusterSnapshot) -> GroupsList:
    """Every group of every live broker (a broker that cannot answer is a warning, not a failure), with
    its protocol and members and its total lag (DescribeGroups and OffsetFetch at its coordinator, one
    request each per broker, against the snapshot's end offsets)."""
    warnings: list[str] = []
    nodes = [b.id for b in snapshot.brokers.values() if b.up]

    async def listed(node: int) -> list[GroupListing]:
        try:
            return await list_groups_of(admin, node)
        except (AdminError, CommandError) as e:
            warnings.append(f"Groups of broker {node}: {e}")
            return []

    listings = [g for found in await asyncio.gather(*(listed(n) for n in nodes)) for g in found]
    groups = {
        g.group_id: GroupSummary(
            g.group_id, g.protocol_type, g.state, g.coordinator, _address(admin, g.coordinator)
        )
        for g in listings
    }
    by_coordinator: dict[int, list[str]] = defaultdict(list)
    for g in listings:
        by_coordinator[g.coordinator].append(g.group_id)
    ends = {(p.topic, p.partition): p.end_offset for p in snapshot.partitions() if p.end_offset is not None}
    commands = requests(admin)

    async def describe(node: int, group_ids: list[str]) -> None:
        request = DescribeGroupsRequest(groups=sorted(group_ids), include_authorized_operations=False)
        try:
            response = await admin.send_to_node(ApiKey.DESCRIBE_GROUPS, request, node)
        except AdminError as e:
            warnings.append(f"Describing the groups of broker {node}: {e}")
            return
        for described in response.groups:
            summary = groups.get(described.group_id)
            if summary is None or described.error_code != ErrorCode.NONE:
                continue
            summary.protocol = described.protocol_data
            summary.members = len(described.members)
            summary.state = described.group_state or summary.state

    def set_lag(summary: GroupSummary, committed: dict[TopicPartition, int]) -> None:
        summary.lag_by_topic = lag_by_topic(committed, ends)
        if summary.lag_by_topic:
            summary.lag = sum(summary.lag_by_topic.values())

    async def lag(summary: GroupSummary) -> None:
        try:
            committed = await commands.committed_offsets(summary.group_id)
        except (AdminError, CommandError) as e:
            warnings.append(f"Offsets of group {summary.group_id}: {e}")
            return
        set_lag(summary, committed)

    async def lags(node: int, group_ids: list[str]) -> None:
        """One OffsetFetch for all the groups of a coordinator (v8 takes several groups); a group it
        cannot answer for (its coordinator moved) is asked on its own."""
        retry = list(group_ids)
        if admin.version(ApiKey.OFFSET_FETCH) >= FIRST_BATCHED_OFFSET_FETCH:
            request = OffsetFetchRequest(
                groups=[
                    OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, topics=None) for g in group_ids
                ],
                require_stable=False,
            )
            try:
                response = await admin.send_to_node(ApiKey.OFFSET_FETCH, request, node)
            except AdminError:
                pass
            else:
                retry = []
                for result in response.groups:
                    if result.group_id not in groups:
                        continue
                    if result.error_code == ErrorCode.NONE:
                        set_lag(groups[result.group_id], committed_of(result))
                    else:
                        retry.append(result.group_id)
        await asyncio.gather(*(lag(groups[g]) for g in retry))

    await asyncio.gather(
        *(describe(node, ids) for node, ids in by_coordinator.items()),
        *(lags(node, ids) for node, ids in by_coordinator.items()),
    )
    return GroupsList(sorted(groups.values(), key=lambda g: g.group_id), warnings)


def lag_by_topic(committed: dict[TopicPartition, int], ends: dict[TopicPartition, int]) -> dict[str, int]:
    """Each topic's lag: the sum over its partitions of end offset minus committed offset, never below
    zero (the end offsets may be a moment older than the commits); partitions without a known end
    offset left out."""
    by_topic: dict[str, int] = {}
    for (topic, partition), offset in committed.items():
        end = ends.get((topic, partition))
        if end is not None:
            by_topic[topic] = by_topic.get(topic, 0) + max(0, end - offset)
    return dict(sorted(by_topic.items()))


async def read_group(admin: AdminClient, group_id: str) -> GroupDetail:
    """One group as ``samsa consumer-groups --describe`` sees it: its state, protocol and members with
    their assignments, and the offsets rows (CommandError in words for a group that is not a consumer
    group)."""
    command = DescribeGroups(admin, argparse.Namespace(all_groups=False, group=[group_id]))
    group, coordinator = await asyncio.gather(
        command.describe_group(group_id), admin.find_coordinator(group_id)
    )
    rows = await command.offset_rows(group)
    assignments = {m.consumer_id: assignment_string(m.assignment) for m in group.members}
    return GroupDetail(group, coordinator, _address(admin, coordinator), rows, assignments)


@dataclass
class Sample:
    at: float  # unix seconds
    total: int | None
    by_topic: dict[str, int]


class LagHistory:
    """Each group's lag over the last ``window`` seconds, one sample per refresh of a groups view."""

    def __init__(self, window: float = WINDOW, min_interval: float = MIN_INTERVAL) -> None:
        self.window = window
        self.min_interval = min_interval
        self._samples: dict[str, deque[Sample]] = {}

    def record(
        self, group_id: str, total: int | None, by_topic: dict[str, int], now: float | None = None
    ) -> None:
        now = time.time() if now is None else now
        samples = self._samples.setdefault(group_id, deque())
        sample = Sample(now, total, dict(by_topic))
        if samples and now - samples[-1].at < self.min_interval:
            samples[-1] = Sample(samples[-1].at, total, dict(by_topic))
        else:
            samples.append(sample)
        self._trim(now)

    def _trim(self, now: float) -> None:
        for group_id in list(self._samples):
            samples = self._samples[group_id]
            while samples and samples[0].at < now - self.window:
                samples.popleft()
            if not samples:
                del self._samples[group_id]

    def forget(self, group_id: str) -> None:
        self._samples.pop(group_id, None)

    def samples(self, group_id: str) -> list[Sample]:
        return list(self._samples.get(group_id, ()))

    def series(self, group_id: str) -> tuple[dict[str, list[Any]], dict[str, str]]:
        """The chart's data (``{"x": [...], "total": [...], "topic:<name>": [...]}``: per topic only when
        there are several topics, and not too many) and its labels."""
        samples = self.samples(group_id)
        data: dict[str, list[Any]] = {"x": [round(s.at, 3) for s in samples]}
        data["total"] = [s.total for s in samples]
        labels = {"total": "Total lag"}
        topics = sorted({t for s in samples for t in s.by_topic})
        if 1 < len(topics) <= MAX_TOPIC_SERIES:
            for topic in topics:
                data[f"topic:{topic}"] = [s.by_topic.get(topic) for s in samples]
                labels[f"topic:{topic}"] = topic
        return data, labels


def history(state: dict[str, Any]) -> LagHistory:
    """The console's lag history (in ``console.state``), made on first use."""
    found = state.get(STATE_KEY)
    if not isinstance(found, LagHistory):
        found = state[STATE_KEY] = LagHistory()
    return found
