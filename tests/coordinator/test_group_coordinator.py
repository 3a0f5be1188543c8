"""The classic group protocol against a coordinator with fake __consumer_offsets replicas: joins,
MEMBER_ID_REQUIRED, protocol selection, syncs, heartbeats and session expiry, rebalance and sync
deadlines (delayed operations in the heartbeat and rebalance purgatories), generations fencing commits,
static membership, leaving, and offset commits."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.group_config import GroupConfig
from coordinator.group_metadata import GroupState, OffsetAndMetadata
from coordinator.heartbeats import DelayedHeartbeat, MemberKey
from coordinator.join_group import MemberJoin
from coordinator.leave_group import MemberIdentity
from coordinator.rebalance import DelayedJoin, DelayedSync, GroupJoinKey, GroupSyncKey, InitialDelayedJoin
from protocol.errors import ErrorCode
from tests.coordinator.conftest import REBALANCE_MS, SESSION_MS, Env, subscription, until

T0 = ("t", 0)


def offsets(offset: int = 5, metadata: str = "") -> dict[tuple[str, int], OffsetAndMetadata]:
    return {T0: OffsetAndMetadata(offset, -1, metadata, 1)}


async def commit(env: Env, group: str, member_id: str = "", generation: int = -1, **kw: object) -> int:
    result = await env.coordinator.handle_commit_offsets(group, member_id, None, generation, offsets(**kw))
    return result[T0]


async def test_member_id_required_then_single_member_group(env: Env) -> None:
    first = await env.coordinator.handle_join_group(
        MemberJoin(
            group_id="g",
            member_id="",
            group_instance_id=None,
            client_id="client",
            client_host="/h",
            rebalance_timeout_ms=REBALANCE_MS,
            session_timeout_ms=1000,
            protocol_type="consumer",
            protocols=[("range", b"x")],
            require_known_member_id=True,
        )
    )
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED and first.member_id.startswith("client-")
    assert env.manager.get_group("g").is_pending_member(first.member_id)
    (joined,) = await env.stable_group("g", 1)
    assert joined.generation_id == 1 and joined.leader_id == joined.member_id
    group = env.manager.get_group("g")
    assert group.is_(GroupState.STABLE) and group.protocol_name == "range"
    # The stable group's metadata is in its __consumer_offsets partition.
    assert any(r.key[:2] == b"\x00\x02" for r in env.topic.records(env.manager.partition_for("g")))


async def test_join_with_unknown_member_id_or_bad_session(env: Env) -> None:
    result = await env.join("nope", "someone", wait=True)
    assert result.error == ErrorCode.UNKNOWN_MEMBER_ID
    result = await env.join("g", instance="i", session_ms=50)
    assert result.error == ErrorCode.INVALID_SESSION_TIMEOUT
    result = await env.join("")
    assert result.error == ErrorCode.INVALID_GROUP_ID


async def test_protocol_selection_and_inconsistent_protocol(env: Env) -> None:
    a = await env.join("g", protocols=[("range", b"a"), ("roundrobin", b"a")], wait=False)
    b = await env.join("g", protocols=[("roundrobin", b"b"), ("range", b"b")], wait=False)
    c = await env.join("g", protocols=[("roundrobin", b"c"), ("sticky", b"c")], wait=False)
    results = [await asyncio.wait_for(f, 5) for f in (a, b, c)]
    assert {r.protocol_name for r in results} == {"roundrobin"}  # the only protocol all support
    leader = next(r for r in results if r.members)
    assert sorted(m[2] for m in leader.members) == [b"a", b"b", b"c"]
    odd = await env.join("g", protocols=[("cooperative-sticky", b"")])
    assert odd.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


async def test_followers_wait_for_the_leaders_assignment(env: Env) -> None:
    futures = [await env.join("g", wait=False) for _ in range(3)]
    results = [await asyncio.wait_for(f, 5) for f in futures]
    assert len({r.generation_id for r in results}) == 1
    leader = next(r for r in results if r.leader_id == r.member_id)
    followers = [r for r in results if r is not leader]
    pending = [env.sync("g", r) for r in followers]
    await asyncio.sleep(0.05)
    assert not any(p.done() for p in pending)
    # The leader leaves one member out: it gets an empty assignment.
    assignment = {followers[0].member_id: b"p0-5", leader.member_id: b"p6-11"}
    assert (await env.sync("g", leader, assignment)).assignment == b"p6-11"
    answers = [await asyncio.wait_for(p, 5) for p in pending]
    assert [a.assignment for a in answers] == [b"p0-5", b""]
    assert all(a.protocol_type == "consumer" and a.protocol_name == "range" for a in answers)


async def test_new_member_triggers_rebalance_through_heartbeats(env: Env) -> None:
    (first,) = await env.stable_group("g", 1)
    second = await env.join("g", wait=False)
    await until(lambda: env.manager.get_group("g").is_(GroupState.PREPARING_REBALANCE))
    hb = env.coordinator.handle_heartbeat("g", first.member_id, None, first.generation_id)
    assert hb == ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = await env.join("g", first.member_id)
    joined = await asyncio.wait_for(second, 5)
    assert rejoined.generation_id == joined.generation_id == 2
    # Commits wait for the assignment; the old generation's are refused.
    assert await commit(env, "g", first.member_id, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    assert await commit(env, "g", first.member_id, first.generation_id) == ErrorCode.ILLEGAL_GENERATION
    leader = rejoined if rejoined.leader_id == rejoined.member_id else joined
    await env.sync("g", leader, {rejoined.member_id: b"a", joined.member_id: b"b"})
    assert await commit(env, "g", first.member_id, first.generation_id) == ErrorCode.ILLEGAL_GENERATION
    assert await commit(env, "g", first.member_id, 2) == ErrorCode.NONE
    assert await commit(env, "g", "ghost", 2) == ErrorCode.UNKNOWN_MEMBER_ID
    assert env.coordinator.handle_heartbeat("g", first.member_id, None, 1) == ErrorCode.ILLEGAL_GENERATION


async def test_session_expiry_removes_member(env: Env) -> None:
    a, b = await env.stable_group("g", 2)
    survivor = a
    for _ in range(8):  # only the survivor heartbeats
        await asyncio.sleep(0.15)
        error = env.coordinator.handle_heartbeat("g", survivor.member_id, None, survivor.generation_id)
        if error == ErrorCode.REBALANCE_IN_PROGRESS:
            break
    assert error == ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = await env.join("g", survivor.member_id)
    assert rejoined.generation_id == 2 and [m[0] for m in rejoined.members] == [survivor.member_id]
    assert not env.manager.get_group("g").has(b.member_id)


async def test_members_that_do_not_rejoin_are_dropped_after_the_rebalance_timeout(env: Env) -> None:
    a, b = await env.stable_group("g", 2)
    leader = a if a.leader_id == a.member_id else b
    other = b if leader is a else a
    started = asyncio.get_running_loop().time()
    rejoined = await env.join("g", leader.member_id)  # the leader asks for a rebalance
    assert asyncio.get_running_loop().time() - started >= REBALANCE_MS / 1000 * 0.9
    assert [m[0] for m in rejoined.members] == [leader.member_id]
    assert not env.manager.get_group("g").has(other.member_id)


async def test_members_that_do_not_sync_are_dropped(env: Env) -> None:
    futures = [await env.join("g", wait=False) for _ in range(2)]
    results = [await asyncio.wait_for(f, 5) for f in futures]
    leader = next(r for r in results if r.leader_id == r.member_id)
    other = next(r for r in results if r is not leader)
    await env.sync("g", leader, {leader.member_id: b"x", other.member_id: b"y"})
    # The other member never syncs: after the rebalance timeout it is removed and the group rebalances.
    await until(lambda: not env.manager.get_group("g").has(other.member_id), timeout=3)
    assert env.manager.get_group("g").is_(GroupState.PREPARING_REBALANCE)


@pytest.mark.parametrize(
    "group_config", [GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=150)]
)
async def test_initial_rebalance_delay_gathers_members(env: Env) -> None:
    first = await env.join("g", wait=False)
    await asyncio.sleep(0.1)
    second = await env.join("g", wait=False)
    a, b = await asyncio.wait_for(first, 5), await asyncio.wait_for(second, 5)
    assert a.generation_id == b.generation_id == 1


async def test_leave_group_batched(env: Env) -> None:
    a, b, c = await env.stable_group("g", 3)
    result = env.coordinator.handle_leave_group(
        "g", [MemberIdentity(a.member_id), MemberIdentity(b.member_id), MemberIdentity("ghost")]
    )
    assert result.error == ErrorCode.NONE
    assert [e for _, e in result.members] == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert env.manager.get_group("g").is_(GroupState.PREPARING_REBALANCE)
    rejoined = await env.join("g", c.member_id)
    assert rejoined.generation_id == 2 and len(rejoined.members) == 1
    assert env.coordinator.handle_leave_group("other", [MemberIdentity("x")]).members[0][1] == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )


async def test_last_member_leaving_empties_the_group(env: Env) -> None:
    (a,) = await env.stable_group("g", 1)
    env.coordinator.handle_leave_group("g", [MemberIdentity(a.member_id)])
    await until(lambda: env.manager.get_group("g").is_(GroupState.EMPTY))
    assert env.manager.get_group("g").generation_id == 2


async def test_static_member_rejoins_without_rebalance(env: Env) -> None:
    first = await env.join("g", instance="i-1", wait=False)
    other = await env.join("g", instance="i-2", wait=False)
    a, b = await asyncio.wait_for(first, 5), await asyncio.wait_for(other, 5)
    leader = a if a.leader_id == a.member_id else b
    await env.sync("g", leader, {a.member_id: b"A", b.member_id: b"B"})
    assert env.manager.get_group("g").is_(GroupState.STABLE)
    # The consumer behind i-1 restarts: a new member id, the same generation and assignment.
    again = await env.join("g", instance="i-1")
    assert again.error == ErrorCode.NONE and again.member_id != a.member_id
    assert again.generation_id == a.generation_id
    group = env.manager.get_group("g")
    assert group.is_(GroupState.STABLE) and group.get(again.member_id).assignment == b"A"
    synced = await env.coordinator.handle_sync_group(
        "g", again.generation_id, again.member_id, None, None, "i-1", {}
    )
    assert synced.assignment == b"A"
    # The old incarnation is fenced.
    assert (
        env.coordinator.handle_heartbeat("g", a.member_id, "i-1", a.generation_id)
        == ErrorCode.FENCED_INSTANCE_ID
    )
    fenced = await env.coordinator.handle_commit_offsets("g", a.member_id, "i-1", a.generation_id, offsets())
    assert fenced[T0] == ErrorCode.FENCED_INSTANCE_ID
    rejoin = await env.join("g", a.member_id, instance="i-1")
    assert rejoin.error == ErrorCode.FENCED_INSTANCE_ID


async def test_static_leader_with_skip_assignment(env: Env) -> None:
    (joined,) = [await env.join("g", instance="i-1")]
    await env.sync("g", joined, {joined.member_id: b"A"})
    again = await env.join("g", instance="i-1", skip_assignment=True)
    assert again.skip_assignment and again.leader_id == again.member_id and len(again.members) == 1
    again = await env.join("g", instance="i-1")
    assert not again.skip_assignment and again.leader_id != again.member_id and again.members == []


async def test_static_member_expires_with_its_session(env: Env) -> None:
    first = await env.join("g", instance="i-1", session_ms=200)
    await env.sync("g", first, {first.member_id: b"A"})
    await until(lambda: env.manager.get_group("g").is_(GroupState.EMPTY), timeout=3)
    assert env.manager.get_group("g").generation_id == 2 and not env.manager.get_group("g").static_members


async def test_group_max_size(env: Env) -> None:
    await env.stable_group("g", 10)
    result = await env.join("g")
    assert result.error == ErrorCode.GROUP_MAX_SIZE_REACHED


async def test_simple_consumer_commits(env: Env) -> None:
    assert await commit(env, "simple", offset=10, metadata="m") == ErrorCode.NONE
    error, found = env.coordinator.handle_fetch_offsets("simple", None)
    assert error == ErrorCode.NONE and found == {T0: OffsetAndMetadata(10, -1, "m", 1)}
    error, found = env.coordinator.handle_fetch_offsets("simple", [("t", 1)])
    assert found == {("t", 1): None}
    # A member-less commit to a group with members is refused.
    await env.stable_group("g", 1)
    assert await commit(env, "g") == ErrorCode.UNKNOWN_MEMBER_ID
    # A generation for a group that does not exist: the member is from an older coordinator.
    assert await commit(env, "gone", "m", 3) == ErrorCode.ILLEGAL_GENERATION


async def test_offset_metadata_too_large(env: Env) -> None:
    assert await commit(env, "g", metadata="x" * 4097) == ErrorCode.OFFSET_METADATA_TOO_LARGE
    assert await commit(env, "g", metadata="x" * 4096) == ErrorCode.NONE


async def test_commit_is_visible_once_replicated(env: Env) -> None:
    env.topic.hold = True
    pending = env.coordinator.handle_commit_offsets("g", "", None, -1, offsets(7))
    await asyncio.sleep(0.01)
    assert not pending.done()
    assert env.coordinator.handle_fetch_offsets("g", [T0])[1] == {T0: None}
    # A second commit completes before the first: the newer record wins whatever the order.
    second = env.coordinator.handle_commit_offsets("g", "", None, -1, offsets(9))
    env.topic.release(reverse=True)
    assert (await pending)[T0] == (await second)[T0] == ErrorCode.NONE
    assert env.coordinator.handle_fetch_offsets("g", [T0])[1][T0].offset == 9


@pytest.mark.parametrize(
    ("append_error", "answer"),
    [
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REQUEST_TIMED_OUT),
        (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE),
    ],
)
async def test_failed_commit_appends(env: Env, append_error: int, answer: int) -> None:
    env.topic.fail_with = append_error
    assert await commit(env, "g") == answer
    assert env.coordinator.handle_fetch_offsets("g", [T0])[1] == {T0: None}
    assert not env.manager.get_group("g").pending_offset_commits


async def test_failed_group_store_sends_members_back(env: Env) -> None:
    joined = await env.join("g")
    env.topic.fail_with = ErrorCode.NOT_LEADER_OR_FOLLOWER
    synced = await env.sync("g", joined, {joined.member_id: b"A"})
    assert synced.error == ErrorCode.NOT_COORDINATOR


async def test_sync_errors(env: Env) -> None:
    (a,) = await env.stable_group("g", 1)
    c = env.coordinator
    assert (
        await c.handle_sync_group("g", 9, a.member_id, None, None, None, {})
    ).error == ErrorCode.ILLEGAL_GENERATION
    assert (await c.handle_sync_group("g", 1, "x", None, None, None, {})).error == ErrorCode.UNKNOWN_MEMBER_ID
    wrong = await c.handle_sync_group("g", 1, a.member_id, "connect", None, None, {})
    assert wrong.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    wrong = await c.handle_sync_group("g", 1, a.member_id, "consumer", "roundrobin", None, {})
    assert wrong.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert (
        await c.handle_sync_group("none", 1, "x", None, None, None, {})
    ).error == ErrorCode.UNKNOWN_MEMBER_ID


async def test_describe_and_list_groups(env: Env) -> None:
    a, b = await env.stable_group("g", 2)
    await commit(env, "simple")
    error, summary = env.coordinator.handle_describe_group("g")
    assert error == ErrorCode.NONE and summary.state == "Stable" and summary.protocol == "range"
    assert {m.member_id: m.assignment for m in summary.members} == {
        a.member_id: a.member_id.encode(),
        b.member_id: b.member_id.encode(),
    }
    assert summary.members[0].metadata == subscription("t")
    assert env.coordinator.handle_describe_group("unknown")[1].state == "Dead"
    error, groups = env.coordinator.handle_list_groups(set())
    assert sorted(groups) == [("g", "consumer", "Stable"), ("simple", "", "Empty")]
    assert env.coordinator.handle_list_groups({"empty"})[1] == [("simple", "", "Empty")]


async def test_delete_groups(env: Env) -> None:
    await env.stable_group("busy", 1)
    await commit(env, "idle")
    errors = await env.coordinator.handle_delete_groups(["busy", "idle", "missing"])
    assert errors == {
        "busy": ErrorCode.NON_EMPTY_GROUP,
        "idle": ErrorCode.NONE,
        "missing": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    assert env.manager.get_group("idle") is None
    # The tombstone of its offset is in the log: a reload finds nothing.
    assert env.topic.records(env.manager.partition_for("idle"))[-1].value is None
    reloaded = await env.reopen()
    assert reloaded.manager.get_group("idle") is None
    await reloaded.shutdown()


async def test_offset_delete(env: Env) -> None:
    (a,) = await env.stable_group("g", 1)
    await env.coordinator.handle_commit_offsets(
        "g", a.member_id, None, 1, {T0: OffsetAndMetadata(1), ("other", 0): OffsetAndMetadata(2)}
    )
    error, errors = await env.coordinator.handle_delete_offsets("g", [T0, ("other", 0)])
    assert error == ErrorCode.NONE
    assert errors == {T0: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): ErrorCode.NONE}
    assert env.coordinator.handle_fetch_offsets("g", None)[1] == {T0: OffsetAndMetadata(1, -1, "", -1)}
    assert (await env.coordinator.handle_delete_offsets("nope", [T0]))[0] == ErrorCode.GROUP_ID_NOT_FOUND


async def test_offsets_expire_after_retention(env: Env) -> None:
    committed = OffsetAndMetadata(5, commit_timestamp=env.clock.now)
    await env.coordinator.handle_commit_offsets("simple", "", None, -1, {T0: committed})
    env.clock.now += env.manager.config.retention_ms - 1
    assert await env.manager.expire_offsets() == 0
    env.clock.now += 1
    assert await env.manager.expire_offsets() == 1
    assert env.manager.get_group("simple") is None  # empty without offsets: gone


async def test_not_coordinator_and_loading(env: Env) -> None:
    p = env.manager.partition_for("g")
    joining = await env.join("g", wait=False)
    env.topic.leading.discard(p)
    env.coordinator.on_resignation(p, 1)
    assert (await asyncio.wait_for(joining, 1)).error == ErrorCode.NOT_COORDINATOR
    assert env.coordinator.handle_heartbeat("g", "m", None, 1) == ErrorCode.NOT_COORDINATOR
    assert (await commit(env, "g")) == ErrorCode.NOT_COORDINATOR
    # Leading again: while the partition loads, requests hear COORDINATOR_LOAD_IN_PROGRESS.
    env.topic.leading.add(p)
    env.coordinator.on_election(p, 2)
    assert (await commit(env, "g")) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert env.coordinator.handle_fetch_offsets("g", None)[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert (await env.sync("g", joining.result())).error == ErrorCode.REBALANCE_IN_PROGRESS
    assert env.coordinator.handle_heartbeat("g", "m", None, 1) == ErrorCode.NONE  # answered blindly
    await until(lambda: p in env.manager.owned_partitions)
    # A stale resignation (older epoch) is ignored.
    env.coordinator.on_resignation(p, 1)
    assert p in env.manager.owned_partitions


async def test_groups_and_offsets_survive_a_coordinator_move(env: Env) -> None:
    a, b = await env.stable_group("g", 2)
    await env.coordinator.handle_commit_offsets("g", a.member_id, None, 1, offsets(33, "meta"))
    await commit(env, "simple", offset=4)
    moved = await env.reopen()
    group = moved.manager.get_group("g")
    assert group.is_(GroupState.STABLE) and group.generation_id == 1 and group.protocol_name == "range"
    assert {m: group.get(m).assignment for m in group.members} == {
        a.member_id: a.member_id.encode(),
        b.member_id: b.member_id.encode(),
    }
    assert moved.handle_fetch_offsets("g", [T0])[1][T0].offset == 33
    assert moved.handle_fetch_offsets("simple", [T0])[1][T0].offset == 4
    # The loaded members can carry on: heartbeats and commits of generation 1 work.
    assert moved.handle_heartbeat("g", a.member_id, None, 1) == ErrorCode.NONE
    assert (await moved.handle_commit_offsets("g", b.member_id, None, 1, offsets(40)))[T0] == ErrorCode.NONE
    await moved.shutdown()


async def test_group_timers_are_delayed_operations_in_the_purgatories(env: Env) -> None:
    heartbeats = env.coordinator.heartbeats.purgatory
    rebalances = env.coordinator.rebalancer.purgatory
    futures = [await env.join("g", wait=False) for _ in range(2)]
    # The rebalance waits in the purgatory until both members joined (then it completed there).
    a, b = [await asyncio.wait_for(f, 5) for f in futures]
    assert not rebalances.watched(GroupJoinKey("g"))
    # Each member's session is one DelayedHeartbeat; the SyncGroup deadline is a DelayedSync.
    for member in (a, b):
        [session] = heartbeats.watched(MemberKey("g", member.member_id))
        assert isinstance(session, DelayedHeartbeat) and session.timeout_ms == SESSION_MS
    [sync] = rebalances.watched(GroupSyncKey("g"))
    assert isinstance(sync, DelayedSync)
    leader = a if a.leader_id == a.member_id else b
    await env.sync("g", leader, {a.member_id: b"A", b.member_id: b"B"})
    await env.sync("g", b if leader is a else a)
    assert sync.completed and not rebalances.watched(GroupSyncKey("g"))
    # A heartbeat completes the member's deadline and watches the next one.
    before = heartbeats.watched(MemberKey("g", a.member_id))
    assert env.coordinator.handle_heartbeat("g", a.member_id, None, a.generation_id) == ErrorCode.NONE
    after = heartbeats.watched(MemberKey("g", a.member_id))
    assert before[0].completed and len(after) == 1 and after[0] is not before[0]
    # The leader's rejoin starts a rebalance: a DelayedJoin waits for the other member.
    rejoin = await env.join("g", leader.member_id, wait=False)
    [join] = rebalances.watched(GroupJoinKey("g"))
    assert isinstance(join, DelayedJoin) and join.timeout_ms == REBALANCE_MS
    # Leaving completes that member's session, and the rebalance with it.
    other = b if leader is a else a
    env.coordinator.handle_leave_group("g", [MemberIdentity(other.member_id)])
    assert not heartbeats.watched(MemberKey("g", other.member_id))
    assert (await asyncio.wait_for(rejoin, 5)).generation_id == 2 and join.completed
    # Losing the partition cancels the group's deadlines.
    env.coordinator.on_resignation(env.manager.partition_for("g"), 1)
    assert len(heartbeats) == 0 and len(rebalances) == 0


@pytest.mark.parametrize(
    "group_config", [GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=150)]
)
async def test_a_new_groups_first_rebalance_is_an_initial_delayed_join(env: Env) -> None:
    joining = await env.join("g", wait=False)
    [join] = env.coordinator.rebalancer.purgatory.watched(GroupJoinKey("g"))
    assert isinstance(join, InitialDelayedJoin) and join.timeout_ms == 150
    assert (await asyncio.wait_for(joining, 5)).generation_id == 1
