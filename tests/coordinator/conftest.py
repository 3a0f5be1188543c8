"""A group coordinator over fake ``__consumer_offsets`` replicas (real logs), with short timeouts, and
helpers that play the clients' side of the group protocol."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from coordinator.group_config import GroupConfig
from coordinator.group_coordinator import GroupCoordinator
from coordinator.group_metadata import JoinGroupResult, SyncGroupResult
from coordinator.group_metadata_manager import GroupMetadataManager, OffsetConfig
from coordinator.join_group import MemberJoin
from protocol.errors import ErrorCode
from tests.coordinator.fakes import FakeOffsetsTopic

PARTITIONS = 4
SESSION_MS = 1000
REBALANCE_MS = 400


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: topics and null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


@dataclass
class Env:
    topic: FakeOffsetsTopic
    manager: GroupMetadataManager
    coordinator: GroupCoordinator
    clock: Clock

    async def join(
        self,
        group: str,
        member_id: str = "",
        *,
        instance: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        skip_assignment: bool = False,
        wait: bool = True,
    ) -> JoinGroupResult | asyncio.Future[JoinGroupResult]:
        """JoinGroup as a v5+ client: an unknown dynamic member first gets MEMBER_ID_REQUIRED and
        rejoins with the id. Returns the answer, or (wait=False) the pending future."""
        protocols = protocols if protocols is not None else [("range", subscription("t"))]

        def send(mid: str) -> asyncio.Future[JoinGroupResult]:
            return self.coordinator.handle_join_group(
                MemberJoin(
                    group,
                    mid,
                    instance,
                    client_id="client",
                    client_host="/127.0.0.1",
                    rebalance_timeout_ms=rebalance_ms,
                    session_timeout_ms=session_ms,
                    protocol_type="consumer",
                    protocols=protocols,
                    require_known_member_id=instance is None,
                    support_skipping_assignment=skip_assignment,
                )
            )

        future = send(member_id)
        if member_id == "" and instance is None:
            first = await future
            if first.error != ErrorCode.MEMBER_ID_REQUIRED:
                return first
            future = send(first.member_id)
        if not wait:
            return future
        return await asyncio.wait_for(future, 5)

    def sync(
        self, group: str, result: JoinGroupResult, assignment: dict[str, bytes] | None = None
    ) -> asyncio.Future[SyncGroupResult]:
        return self.coordinator.handle_sync_group(
            group,
            result.generation_id,
            result.member_id,
            "consumer",
            result.protocol_name,
            None,
            assignment or {},
        )

    async def stable_group(self, group: str, members: int) -> list[JoinGroupResult]:
        """``members`` dynamic members joined at once and synced, the leader assigning b"<member id>"."""
        futures = [await self.join(group, wait=False) for _ in range(members)]
        results = [await asyncio.wait_for(f, 5) for f in futures]
        leader = next(r for r in results if r.leader_id == r.member_id)
        syncs = [
            self.sync(group, r, {m: m.encode() for m, _, _ in leader.members} if r is leader else None)
            for r in results
        ]
        for r, s in zip(results, syncs, strict=True):
            answer = await asyncio.wait_for(s, 5)
            assert answer.error == ErrorCode.NONE and answer.assignment == r.member_id.encode()
        return results

    async def reopen(self) -> GroupCoordinator:
        """A new coordinator over the same logs (the partitions moved to another broker and back)."""
        manager = GroupMetadataManager(1, self.manager.config, self.topic, self.clock)
        coordinator = GroupCoordinator(1, self.coordinator.config, manager)
        coordinator.startup()
        for p in range(PARTITIONS):
            coordinator.on_election(p, 1)
        await until(lambda: manager.owned_partitions == set(range(PARTITIONS)))
        return coordinator


async def until(condition: Callable[[], object], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.01)


@pytest.fixture
def group_config() -> GroupConfig:
    """The coordinator's settings; a test parametrizes ``group_config`` for others."""
    return GroupConfig(min_session_timeout_ms=100, initial_rebalance_delay_ms=0, max_size=10)


@pytest.fixture
async def env(tmp_path: Path, group_config: GroupConfig) -> AsyncIterator[Env]:
    topic = FakeOffsetsTopic(tmp_path, PARTITIONS)
    clock = Clock()
    manager = GroupMetadataManager(1, OffsetConfig(num_partitions=PARTITIONS), topic, clock)
    coordinator = GroupCoordinator(1, group_config, manager)
    coordinator.startup()
    topic.leading.update(range(PARTITIONS))
    for p in range(PARTITIONS):
        coordinator.on_election(p, 0)
    await until(lambda: manager.owned_partitions == set(range(PARTITIONS)))
    env = Env(topic, manager, coordinator, clock)
    try:
        yield env
    finally:
        await coordinator.shutdown()
        topic.close()
