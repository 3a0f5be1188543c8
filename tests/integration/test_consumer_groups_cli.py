"""``samsa consumer-groups`` (kafka-consumer-groups.sh) against a real cluster: ZooKeeper, a controller
and three brokers, with aiokafka consumers in the groups.

- ``--describe`` shows each member's partitions, the committed offsets, log end offsets and lag as the
  consumers themselves see them (aiokafka's assignment(), committed() and end_offsets()); ``--members
  [--verbose]`` and ``--state`` agree; an empty group shows its offsets without owners.
- ``--list``, with and without ``--state`` filters.
- ``--reset-offsets``: refused while the group is active; ``--dry-run`` (and the default) changes
  nothing; ``--execute`` with --to-offset, --shift-by, --to-datetime, --to-latest, --to-earliest moves
  the commits, and a new consumer resumes exactly there; ``--export`` prints the plan as CSV.
- ``--delete`` and ``--delete-offsets``: refused while the group is active, then done.
- Argument checks and the date and duration parsers, without a cluster.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.cluster import Cluster
from tools import consumer_groups
from tools.consumer_groups.command import CommandError
from tools.consumer_groups.reset_offsets import parse_datetime, parse_duration
from zk.server import ZooKeeperServer

pytestmark = pytest.mark.integration

aiokafka = pytest.importorskip("aiokafka")

SESSION_MS = 6000
BASE_TIMESTAMP = 1_600_000_000_000  # the records' timestamps: BASE + 1000 * offset


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer) -> Iterator[Cluster]:
    chroot = f"{zookeeper_server.connect_string}/samsa-consumer-groups-cli"
    running = Cluster(tmp_path_factory.mktemp("consumer-groups-cli"), chroot).start()
    try:
        yield running
    finally:
        running.stop()


_names = itertools.count()


@dataclass
class Result:
    code: int
    out: str
    err: str

    def table(self) -> list[dict[str, str]]:
        """The rows of the (last) table printed, as dicts keyed by the header's columns."""
        lines = [line.split() for line in self.out.splitlines() if line.strip()]
        start = max(i for i, cells in enumerate(lines) if cells[0] in ("GROUP", "TOPIC"))
        header = lines[start]
        return [dict(zip(header, cells, strict=False)) for cells in lines[start + 1 :]]


async def samsa(cluster: Cluster, *args: str) -> Result:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tools",
        "consumer-groups",
        "--bootstrap-server",
        cluster.bootstrap,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), 60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return Result(process.returncode or 0, out.decode(), err.decode())


async def new_topic(cluster: Cluster, partitions: int, records: list[int]) -> str:
    """A topic whose partition p holds records[p] records, record i with timestamp BASE + 1000 i."""
    topic = f"cli-{next(_names)}"
    await asyncio.to_thread(cluster.create_topic, topic, partitions, 3)
    producer = aiokafka.AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    await producer.start()
    try:
        for p, count in enumerate(records):
            for i in range(count):
                await producer.send(
                    topic, b"%d-%d" % (p, i), partition=p, timestamp_ms=BASE_TIMESTAMP + 1000 * i
                )
        await producer.flush()
    finally:
        await producer.stop()
    return topic


def consumer(cluster: Cluster, topic: str, group: str, client_id: str) -> Any:
    return aiokafka.AIOKafkaConsumer(
        topic,
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        client_id=client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500,
    )


async def wait_until(condition: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = condition()
        if inspect.isawaitable(found):
            found = await found
        if found:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what} did not happen in {timeout} s (last: {found!r})")
        await asyncio.sleep(0.2)


async def stable_describe(cluster: Cluster, group: str, members: int) -> Result:
    """``--describe --state`` once the group is Stable with this many members."""

    async def check() -> Result | None:
        result = await samsa(cluster, "--describe", "--group", group, "--state")
        rows = result.table()
        if rows and rows[0].get("STATE") == "Stable" and rows[0].get("#MEMBERS") == str(members):
            return result
        return None

    return await wait_until(check, f"{group} stable with {members} members")


async def test_describe_matches_what_the_consumers_see(cluster: Cluster) -> None:
    records = [5 + p for p in range(6)]
    topic = await new_topic(cluster, 6, records)
    group = f"describe-{next(_names)}"
    by_client = {f"cli-consumer-{i}": consumer(cluster, topic, group, f"cli-consumer-{i}") for i in range(3)}
    consumers = list(by_client.values())
    for c in consumers:
        await c.start()
    try:

        async def shared() -> bool:
            shares = [c.assignment() for c in consumers]
            covered = set().union(*shares)
            return all(shares) and len(covered) == 6 and sum(map(len, shares)) == 6

        await wait_until(shared, "a disjoint assignment of the 6 partitions")
        state = (await stable_describe(cluster, group, 3)).table()[0]
        assert state["ASSIGNMENT-STRATEGY"] == "roundrobin"  # aiokafka's default assignor
        assert state["COORDINATOR"].rsplit(":", 1)[0] == "127.0.0.1"

        # Each consumer commits p for its partitions p < 5; partition 5 has no commit.
        owner: dict[int, Any] = {}
        for c in consumers:
            mine = {tp: tp.partition for tp in c.assignment() if tp.partition < 5}
            owner.update({tp.partition: c for tp in c.assignment()})
            if mine:
                await c.commit(mine)

        result = await samsa(cluster, "--describe", "--group", group)
        assert result.code == 0, result
        rows = {int(r["PARTITION"]): r for r in result.table()}
        assert sorted(rows) == list(range(6))
        # Kafka's order: the members with the most partitions first, each member's rows together.
        owners = [r["CONSUMER-ID"] for r in result.table()]
        runs = [len(list(run)) for _, run in itertools.groupby(owners)]
        assert len(runs) == 3 and runs == sorted(runs, reverse=True)
        for p, row in rows.items():
            c = owner[p]
            assert by_client[row["CLIENT-ID"]] is c
            tp = aiokafka.TopicPartition(topic, p)
            committed = await c.committed(tp)
            end = (await c.end_offsets([tp]))[tp]
            assert row["GROUP"] == group and row["TOPIC"] == topic
            assert row["CONSUMER-ID"].startswith(row["CLIENT-ID"] + "-")
            assert row["HOST"] == "/127.0.0.1"
            assert row["LOG-END-OFFSET"] == str(end) == str(records[p])
            if p < 5:
                assert row["CURRENT-OFFSET"] == str(committed) == str(p)
                assert row["LAG"] == str(records[p] - p)
            else:
                assert committed is None and row["CURRENT-OFFSET"] == "-" and row["LAG"] == "-"

        members = await samsa(cluster, "--describe", "--group", group, "--members", "--verbose")
        assert members.code == 0, members
        member_rows = {r["CLIENT-ID"]: r for r in members.table()}
        assert sorted(member_rows) == sorted(by_client)
        for client_id, c in by_client.items():
            row = member_rows[client_id]
            partitions = sorted(tp.partition for tp in c.assignment())
            assert row["#PARTITIONS"] == str(len(partitions))
            assert row["ASSIGNMENT"] == f"{topic}({','.join(map(str, partitions))})"
        assert "ASSIGNMENT" not in (await samsa(cluster, "--describe", "--group", group, "--members")).out
    finally:
        for c in consumers:
            await c.stop()

    # Empty now: the offsets stay, without owners.
    async def empty() -> Result | None:
        result = await samsa(cluster, "--describe", "--group", group)
        return result if "has no active members" in result.err else None

    result = await wait_until(empty, "the group empty")
    assert f"Consumer group '{group}' has no active members." in result.err
    rows = result.table()
    assert [(r["PARTITION"], r["CURRENT-OFFSET"], r["CONSUMER-ID"]) for r in rows] == [
        (str(p), str(p), "-") for p in range(5)
    ]
    members = await samsa(cluster, "--describe", "--group", group, "--members")
    assert members.code == 0 and members.out.strip() == "" and "has no active members" in members.err

    missing = await samsa(cluster, "--describe", "--group", "no-such-group")
    assert missing.code == 1 and "Error: Consumer group 'no-such-group' does not exist." in missing.out


async def test_list_with_state_filters(cluster: Cluster) -> None:
    topic = await new_topic(cluster, 1, [3])
    active, idle = f"list-active-{next(_names)}", f"list-idle-{next(_names)}"
    c = consumer(cluster, topic, idle, "cli-idle")
    await c.start()
    await wait_until(lambda: c.assignment(), "an assignment")
    await c.commit({aiokafka.TopicPartition(topic, 0): 1})
    await c.stop()
    c = consumer(cluster, topic, active, "cli-active")
    await c.start()
    try:
        await stable_describe(cluster, active, 1)
        listed = await samsa(cluster, "--list")
        assert listed.code == 0 and {active, idle} <= set(listed.out.split())
        states = {r["GROUP"]: r["STATE"] for r in (await samsa(cluster, "--list", "--state")).table()}
        assert states[active] == "Stable" and states[idle] == "Empty"
        stable = (await samsa(cluster, "--list", "--state", "stable")).table()
        assert {r["GROUP"] for r in stable} >= {active} and idle not in {r["GROUP"] for r in stable}
        both = {r["GROUP"] for r in (await samsa(cluster, "--list", "--state", "Stable,EMPTY")).table()}
        assert {active, idle} <= both
        bad = await samsa(cluster, "--list", "--state", "busy")
        assert bad.code == 1 and "Invalid state list 'busy'. Valid states are: " in bad.err
    finally:
        await c.stop()


async def committed_by_cli(cluster: Cluster, group: str) -> dict[int, str]:
    result = await samsa(cluster, "--describe", "--group", group)
    assert result.code == 0, result
    return {int(r["PARTITION"]): r["CURRENT-OFFSET"] for r in result.table()}


async def test_reset_offsets(cluster: Cluster) -> None:
    topic = await new_topic(cluster, 3, [10, 10, 10])
    group = f"reset-{next(_names)}"
    tps = [aiokafka.TopicPartition(topic, p) for p in range(3)]
    c = consumer(cluster, topic, group, "cli-reset")
    await c.start()
    try:
        await wait_until(lambda: len(c.assignment()) == 3, "the whole topic assigned")
        await c.commit(dict.fromkeys(tps, 10))
        await stable_describe(cluster, group, 1)
        refused = await samsa(
            cluster, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"
        )
        assert refused.code == 1
        assert (
            f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state "
            "is Stable." in refused.out
        )
    finally:
        await c.stop()
    assert await committed_by_cli(cluster, group) == {0: "10", 1: "10", 2: "10"}

    # Without --execute it is a dry run, with a warning; the plan is printed and nothing changes.
    plan = await samsa(cluster, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest")
    assert (
        plan.code == 0 and "WARN: No action will be performed as the --execute option is missing." in plan.err
    )
    assert [(r["GROUP"], r["TOPIC"], r["PARTITION"], r["NEW-OFFSET"]) for r in plan.table()] == [
        (group, topic, str(p), "0") for p in range(3)
    ]
    dry = await samsa(
        cluster, "--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-offset", "4", "--dry-run"
    )
    assert dry.code == 0 and [r["NEW-OFFSET"] for r in dry.table()] == ["4"]
    assert await committed_by_cli(cluster, group) == {0: "10", 1: "10", 2: "10"}

    async def execute(*args: str) -> list[tuple[int, int]]:
        result = await samsa(cluster, "--reset-offsets", "--group", group, *args, "--execute")
        assert result.code == 0, result
        return [(int(r["PARTITION"]), int(r["NEW-OFFSET"])) for r in result.table()]

    assert await execute("--topic", f"{topic}:0,1", "--to-offset", "4") == [(0, 4), (1, 4)]
    assert await committed_by_cli(cluster, group) == {0: "4", 1: "4", 2: "10"}
    assert await execute("--all-topics", "--shift-by", "-2") == [(0, 2), (1, 2), (2, 8)]
    # A time between two records' timestamps: the first record at or after it.
    at = datetime.fromtimestamp((BASE_TIMESTAMP + 6500) / 1000, UTC)
    when = at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}"
    assert await execute("--topic", f"{topic}:2", "--to-datetime", when) == [(2, 7)]
    assert await execute("--topic", f"{topic}:1", "--to-latest") == [(1, 10)]
    # Out of range: clamped to the log end, with a warning.
    clamped = await samsa(
        cluster, "--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-offset", "99"
    )
    assert [r["NEW-OFFSET"] for r in clamped.table()] == ["10"] and "Value will be set to 10" in clamped.err
    exported = await samsa(
        cluster, "--reset-offsets", "--group", group, "--all-topics", "--to-current", "--export"
    )
    assert exported.out.split() == [f"{topic},0,2", f"{topic},1,10", f"{topic},2,7"]
    rows = (await samsa(cluster, "--describe", "--group", group)).table()
    assert [(r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for r in rows] == [
        ("2", "10", "8"),
        ("10", "10", "0"),
        ("7", "10", "3"),
    ]

    # A consumer of the group resumes exactly at the reset offsets.
    c = consumer(cluster, topic, group, "cli-resume")
    await c.start()
    try:
        first: dict[int, int] = {}

        async def read() -> bool:
            for tp, batch in (await c.getmany(timeout_ms=200)).items():
                first.setdefault(tp.partition, batch[0].offset)
            return len(first) == 2

        await wait_until(read, "records of partitions 0 and 2")
        assert first == {0: 2, 2: 7}
    finally:
        await c.stop()

    errors = await samsa(
        cluster, "--reset-offsets", "--group", group, "--topic", f"{topic}:7", "--to-earliest"
    )
    assert errors.code == 1 and f'The partitions "{topic}-7" do not exist' in errors.out


async def test_delete_group_and_offsets(cluster: Cluster) -> None:
    topic = await new_topic(cluster, 2, [4, 4])
    group = f"delete-{next(_names)}"
    c = consumer(cluster, topic, group, "cli-delete")
    await c.start()
    try:
        await wait_until(lambda: len(c.assignment()) == 2, "the whole topic assigned")
        await c.commit({aiokafka.TopicPartition(topic, p): 3 for p in range(2)})
        await stable_describe(cluster, group, 1)
        refused = await samsa(cluster, "--delete", "--group", group)
        assert refused.code == 1
        assert "Error: Deletion of some consumer groups failed:" in refused.out
        assert (
            f"* Group '{group}' could not be deleted due to: NON_EMPTY_GROUP: The group is not empty."
            in refused.out
        )
        subscribed = await samsa(cluster, "--delete-offsets", "--group", group, "--topic", topic)
        assert subscribed.code == 1 and "Encounter some partition level error" in subscribed.out
        assert [r["STATUS"] for r in subscribed.table()] == ["Error:", "Error:"]
    finally:
        await c.stop()

    async def empty() -> bool:
        result = await samsa(cluster, "--describe", "--group", group, "--state")
        return "Empty" in result.out

    await wait_until(empty, "the group empty")
    deleted = await samsa(cluster, "--delete-offsets", "--group", group, "--topic", f"{topic}:0")
    assert deleted.code == 0, deleted
    assert f"Request succeed for deleting offsets with topic {topic}:0 group {group}" in deleted.out
    assert [(r["TOPIC"], r["PARTITION"], r["STATUS"]) for r in deleted.table()] == [
        (topic, "0", "Successful")
    ]
    assert await committed_by_cli(cluster, group) == {1: "3"}

    gone = await samsa(cluster, "--delete", "--group", group)
    assert gone.code == 0 and f"Deletion of requested consumer groups ('{group}') was successful." in gone.out
    assert group not in (await samsa(cluster, "--list")).out.split()
    missing = await samsa(cluster, "--delete", "--group", group)
    assert missing.code == 1 and "GROUP_ID_NOT_FOUND: The group id does not exist." in missing.out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--list"], 'Missing required argument "[bootstrap-server]"'),
        (["--bootstrap-server", "h:1"], "Command must include exactly one action"),
        (["--bootstrap-server", "h:1", "--list", "--describe"], "Command must include exactly one action"),
        (["--bootstrap-server", "h:1", "--describe"], "Option [describe] takes one of these options"),
        (
            ["--bootstrap-server", "h:1", "--describe", "--group", "g", "--members", "--state"],
            "Option [describe] takes at most one of these options: [members], [offsets], [state]",
        ),
        (["--bootstrap-server", "h:1", "--list", "--members"], "Option(s) [members] are unavailable"),
        (["--bootstrap-server", "h:1", "--delete", "--group", "g", "--topic", "t"], "topic-specific offset"),
        (["--bootstrap-server", "h:1", "--delete-offsets", "--group", "g"], "takes the following options"),
        (
            ["--bootstrap-server", "h:1", "--reset-offsets", "--group", "g", "--execute", "--dry-run"],
            "Option [reset-offsets] only accepts one of [execute] and [dry-run]",
        ),
        (
            [
                "--bootstrap-server",
                "h:1",
                "--reset-offsets",
                "--group",
                "g",
                "--to-offset",
                "1",
                "--to-latest",
            ],
            'Option "[to-offset]" can\'t be used with option "[to-latest]"',
        ),
        (
            ["--bootstrap-server", "h:1", "--describe", "--group", "g", "--all-groups"],
            'Option "[group]" can\'t be used with option "[all-groups]"',
        ),
        (["--bootstrap-server", "h:1", "--describe", "--all-groups", "--topic", "t"], 'Option "[topic]"'),
    ],
)
def test_usage_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert consumer_groups.main(args) == 1
    err = capsys.readouterr().err
    assert message in err and "usage: samsa consumer-groups" in err


def test_datetime_and_duration_parsing() -> None:
    assert parse_datetime("2020-01-01T00:00:00.000") == 1577836800000
    assert parse_datetime("2020-01-01T00:00:00.123Z") == 1577836800123
    assert parse_datetime("2020-01-01T02:00:00.000+02:00") == 1577836800000
    assert parse_datetime("2020-01-01T02:00:00.000+0200") == 1577836800000
    assert parse_datetime("2019-12-31T23:00:00.000-01") == 1577836800000
    for bad in ("2020-01-01 00:00:00.000", "2020-01-01T00:00:00", "2020-13-01T00:00:00.000"):
        with pytest.raises(CommandError):
            parse_datetime(bad)
    assert parse_duration("PT1H") == timedelta(hours=1)
    assert parse_duration("P1DT2H3M4.5S") == timedelta(days=1, hours=2, minutes=3, seconds=4.5)
    assert parse_duration("-PT30M") == -timedelta(minutes=30)
    for bad in ("P", "PT", "1H", "PT1X"):
        with pytest.raises(CommandError):
            parse_duration(bad)
