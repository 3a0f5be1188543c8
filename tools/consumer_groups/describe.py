"""``--list`` and ``--describe`` (``--offsets``, ``--members [--verbose]``, ``--state``): the groups, their
members and their offsets with lag, in kafka-consumer-groups.sh's tables and notes."""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass

from tools.consumer_groups.command import (
    LATEST,
    MISSING,
    CommandError,
    Group,
    GroupCommand,
    Member,
    TopicPartition,
)
from tools.consumer_groups.options import parse_states


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


class ListGroups(GroupCommand):
    async def run(self) -> None:
        if self.args.state is None:
            for group_id, _ in await self.list_groups():
                print(group_id)
            return
        states = parse_states(self.args.state) if self.args.state else []
        groups = await self.list_groups(states)
        width = max([15, *(len(g) for g, _ in groups)])
        print(f"{'GROUP':<{width}} STATE")
        for group_id, state in groups:
            print(f"{group_id:<{width}} {state}")


class DescribeGroups(GroupCommand):
    async def run(self) -> None:
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
                self._print_offsets(group.group_id, group.state, await self.offset_rows(group))

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

    async def offset_rows(self, group: Group) -> list[Row]:
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
        for owner, partitions in owners:
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
                        owner.consumer_id if owner else MISSING,
                        owner.host if owner else MISSING,
                        owner.client_id if owner else MISSING,
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
                text += assignment_string(m.assignment)
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


def assignment_string(assignment: list[TopicPartition]) -> str:
    """``topic1(0,1), topic2(0)``, or "-" for none."""
    if not assignment:
        return MISSING
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in assignment:
        by_topic[topic].append(partition)
    return ", ".join(sorted(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in by_topic.items()))
