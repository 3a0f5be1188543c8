"""What a real ``samsa controller`` writes to ZooKeeper and sends to brokers as the cluster changes:
brokers joining, dying, bouncing and shutting down; topics created, extended and deleted. The brokers
are in-process fakes that register in ZooKeeper and record the controller's requests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import AlterPartitionRequest, ControlledShutdownRequest
from tests.controller.fake_broker import FakeBroker, eventually
from tests.controller.zk_helpers import (
    active_controller,
    add_partitions,
    create_topic,
    leader_epoch_isr,
    partition_state,
    state_is,
)
from tests.support.raw_client import RawClient
from tools.local_cluster import ControllerNode
from zk import znodes
from zk.client import ZkClient

pytestmark = pytest.mark.integration

LEADER_AND_ISR, UPDATE_METADATA, STOP_REPLICA = (
    ApiKey.LEADER_AND_ISR,
    ApiKey.UPDATE_METADATA,
    ApiKey.STOP_REPLICA,
)
FULL, INCREMENTAL = 2, 1


async def _active(zk: ZkClient, controller: ControllerNode) -> None:
    async def is_active() -> bool:
        found = await active_controller(zk)
        return found is not None and found[0] == controller.controller_id and "ready:" in controller.log()

    await eventually(is_active)


def _live_brokers(request) -> list[int]:  # type: ignore[no-untyped-def]
    return sorted(b.id for b in request.live_brokers)


async def test_a_broker_that_registers_gets_metadata_and_a_full_leader_and_isr(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    controller = controllers()
    await _active(zk, controller)
    one = await brokers(1, rack="r1")
    await eventually(lambda: one.requests(UPDATE_METADATA) and one.requests(LEADER_AND_ISR))
    metadata = one.requests(UPDATE_METADATA)[-1]
    assert (metadata.controller_id, metadata.controller_epoch, metadata.broker_epoch) == (9001, 1, one.epoch)
    [registered] = metadata.live_brokers
    assert (registered.id, registered.rack) == (1, "r1")
    assert [(e.host, e.port, e.listener, e.security_protocol) for e in registered.endpoints] == [
        ("127.0.0.1", one.port, "PLAINTEXT", 0)
    ]
    leader_and_isr = one.requests(LEADER_AND_ISR)[-1]
    assert (leader_and_isr.type, leader_and_isr.topic_states, leader_and_isr.broker_epoch) == (
        FULL,
        [],
        one.epoch,
    )
    two = await brokers(2)
    await eventually(lambda: _live_brokers(one.requests(UPDATE_METADATA)[-1]) == [1, 2])
    await eventually(
        lambda: two.requests(UPDATE_METADATA) and _live_brokers(two.requests(UPDATE_METADATA)[-1]) == [1, 2]
    )


async def test_a_new_topic_gets_state_znodes_leaders_and_leader_and_isr(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    fakes = {i: await brokers(i) for i in (1, 2, 3)}
    controller = controllers()
    await _active(zk, controller)
    record = await create_topic(zk, "orders", {0: [1, 2], 1: [2, 3], 2: [3, 1]})
    expected = {0: (1, 0, [1, 2]), 1: (2, 0, [2, 3]), 2: (3, 0, [3, 1])}
    for partition, state in expected.items():
        await eventually(lambda p=partition: leader_epoch_isr(zk, "orders", p))
        assert await leader_epoch_isr(zk, "orders", partition) == state
        assert (await partition_state(zk, "orders", partition)).controller_epoch == 1  # type: ignore[union-attr]
    for broker_id, broker in fakes.items():
        hosted = {p for p, replicas in record.partitions.items() if broker_id in replicas}
        await eventually(lambda b=broker, h=hosted: {p for (_, p) in b.leader_and_isr_states()} == h)
        for (_, p), state in broker.leader_and_isr_states().items():
            assert (state.leader, state.leader_epoch, state.isr, state.replicas, state.is_new) == (
                expected[p][0],
                0,
                expected[p][2],
                record.partitions[p],
                True,
            )
        request = next(r for r in broker.requests(LEADER_AND_ISR) if r.topic_states)
        assert request.type == INCREMENTAL and request.topic_states[0].topic_id == record.topic_id
        assert {leader.broker_id: leader.port for leader in request.live_leaders} == {
            expected[p][0]: fakes[expected[p][0]].port for p in hosted
        }
        await eventually(lambda b=broker: len(b.metadata_states()) == 3)
        assert {p: (s.leader, s.isr) for (_, p), s in broker.metadata_states().items()} == {
            p: (s[0], s[2]) for p, s in expected.items()
        }
    # Partitions added to the assignment are created the same way.
    await add_partitions(zk, "orders", {3: [2, 1]})
    await eventually(lambda: leader_epoch_isr(zk, "orders", 3))
    assert await leader_epoch_isr(zk, "orders", 3) == (2, 0, [2, 1])
    await eventually(lambda: ("orders", 3) in fakes[1].leader_and_isr_states())
    assert ("orders", 3) not in fakes[3].leader_and_isr_states()


async def test_a_dead_broker_loses_leadership_and_isr_membership(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    one, two, three = await brokers(1), await brokers(2), await brokers(3)
    controller = controllers()
    await _active(zk, controller)
    await create_topic(zk, "t", {0: [1, 2], 1: [2, 1], 2: [1], 3: [3, 2]})
    await eventually(lambda: len(two.leader_and_isr_states()) == 3)
    await one.deregister()
    # Led by 1: leader 2 from the surviving ISR, with a new leader epoch.
    await eventually(lambda: leader_epoch_isr(zk, "t", 0), timeout=5)
    await eventually(lambda: state_is(zk, "t", 0, (2, 1, [2])))
    # Followed by 1: it leaves the ISR, the leader stays, the leader epoch moves.
    assert await leader_epoch_isr(zk, "t", 1) == (2, 1, [2])
    # Its only replica died: offline, leader -1, the last ISR member kept.
    assert await leader_epoch_isr(zk, "t", 2) == (-1, 1, [1])
    # Untouched.
    assert await leader_epoch_isr(zk, "t", 3) == (3, 0, [3, 2])
    await eventually(lambda: two.leader_and_isr_states()[("t", 0)].leader == 2)
    assert two.leader_and_isr_states()[("t", 1)].isr == [2]
    await eventually(
        lambda: three.metadata_states().get(("t", 2)) and three.metadata_states()[("t", 2)].leader == -1
    )
    states = three.metadata_states()
    assert states[("t", 0)].offline_replicas == [1] and states[("t", 2)].offline_replicas == [1]
    assert _live_brokers(three.requests(UPDATE_METADATA)[-1]) == [2, 3]
    # It comes back: a full LeaderAndIsr for its partitions, and it leads its offline partition again.
    await one.register()
    await eventually(lambda: state_is(zk, "t", 2, (1, 2, [1])))
    await eventually(
        lambda: ("t", 2) in one.leader_and_isr_states() and one.leader_and_isr_states()[("t", 2)].leader == 1
    )
    full = [r for r in one.requests(LEADER_AND_ISR) if r.type == FULL and r.broker_epoch == one.epoch]
    assert full and {p.partition_index for t in full[-1].topic_states for p in t.partition_states} == {
        0,
        1,
        2,
    }


async def test_a_bounced_broker_is_failed_and_restarted(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    one, _ = await brokers(1), await brokers(2)
    controller = controllers()
    await _active(zk, controller)
    await create_topic(zk, "t", {0: [1, 2]})
    await eventually(lambda: ("t", 0) in one.leader_and_isr_states())
    old_epoch = one.epoch
    # Re-registering at once: the controller sees either a bounce (same id, newer epoch) or a death and a
    # new broker, depending on when its watch reads /brokers/ids; either way the broker is started anew.
    await one.deregister()
    await one.register()
    assert one.epoch > old_epoch
    await eventually(
        lambda: any(r.type == FULL and r.broker_epoch == one.epoch for r in one.requests(LEADER_AND_ISR))
    )
    await eventually(lambda: "bounced [1]" in controller.log() or "new [1]" in controller.log())


async def test_unclean_election_follows_the_topic_config(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    one, two = await brokers(1), await brokers(2)
    controller = controllers()
    await _active(zk, controller)
    await create_topic(zk, "clean", {0: [1, 2]})
    await create_topic(zk, "unclean", {0: [1, 2]}, {"unclean.leader.election.enable": "true"})
    await eventually(lambda: len(one.leader_and_isr_states()) == 2)
    await two.deregister()  # ISR shrinks to [1]
    await eventually(lambda: state_is(zk, "clean", 0, (1, 1, [1])))
    await eventually(lambda: state_is(zk, "unclean", 0, (1, 1, [1])))
    await one.deregister()  # offline
    await eventually(lambda: state_is(zk, "unclean", 0, (-1, 2, [1])))
    await eventually(lambda: state_is(zk, "clean", 0, (-1, 2, [1])))
    await two.register()  # out of sync: only the unclean topic may elect it
    await eventually(lambda: state_is(zk, "unclean", 0, (2, 3, [2])))
    assert await leader_epoch_isr(zk, "clean", 0) == (-1, 2, [1])
    assert "UNCLEAN" in controller.log()


async def test_topic_deletion_stops_replicas_then_removes_the_znodes(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    one, two = await brokers(1), await brokers(2)
    controller = controllers()
    await _active(zk, controller)
    await create_topic(zk, "gone", {0: [1, 2], 1: [2]}, {"retention.ms": "1000"})
    await create_topic(zk, "kept", {0: [1]})
    await eventually(lambda: len(one.leader_and_isr_states()) == 2 and len(two.leader_and_isr_states()) == 2)
    await zk.create(znodes.delete_topic_path("gone"))

    async def removed() -> bool:
        paths = (
            znodes.topic_path("gone"),
            znodes.topic_config_path("gone"),
            znodes.delete_topic_path("gone"),
        )
        return all([await zk.exists(p) is None for p in paths])

    await eventually(removed)
    assert await zk.exists(znodes.topic_path("kept")) is not None
    assert ("gone", 0, -2, True) in one.stop_replicas()
    assert {("gone", 0, -2, True), ("gone", 1, -2, True)} <= set(two.stop_replicas())
    assert one.metadata_states()[("gone", 0)].leader == -2
    assert not any(t == "kept" for t, *_ in one.stop_replicas())
    # The topic can be created again, under a new id.
    record = await create_topic(zk, "gone", {0: [2]})
    await eventually(lambda: state_is(zk, "gone", 0, (2, 0, [2])))
    await eventually(lambda: two.requests(LEADER_AND_ISR)[-1].topic_states[0].topic_id == record.topic_id)


async def test_deletion_waits_for_a_dead_replica_and_for_stop_replica_errors(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    one, two = await brokers(1), await brokers(2)
    controller = controllers()
    await _active(zk, controller)
    await create_topic(zk, "t", {0: [1, 2]})
    await eventually(lambda: ("t", 0) in two.leader_and_isr_states())
    await two.deregister()
    await eventually(lambda: state_is(zk, "t", 0, (1, 1, [1])))
    one.stop_replica_error = ErrorCode.KAFKA_STORAGE_ERROR
    await zk.create(znodes.delete_topic_path("t"))
    await eventually(lambda: ("t", 0, -2, True) in one.stop_replicas())
    await eventually(lambda: "failed to delete" in controller.log())
    assert await zk.exists(znodes.topic_path("t")) is not None
    one.stop_replica_error = ErrorCode.NONE
    await two.register()  # a broker starting resumes the deletion

    async def removed() -> bool:
        return (
            await zk.exists(znodes.topic_path("t")) is None
            and await zk.exists(znodes.delete_topic_path("t")) is None
        )

    await eventually(removed)
    assert ("t", 0, -2, True) in two.stop_replicas()


async def test_deletion_disabled_removes_the_request_and_keeps_the_topic(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    one = await brokers(1)
    controller = controllers(overrides={"delete.topic.enable": "false"})
    await _active(zk, controller)
    await create_topic(zk, "t", {0: [1]})
    await eventually(lambda: ("t", 0) in one.leader_and_isr_states())
    await zk.create(znodes.delete_topic_path("t"))
    await eventually(lambda: _absent(zk, znodes.delete_topic_path("t")))
    assert await zk.exists(znodes.topic_path("t")) is not None
    assert one.stop_replicas() == []


async def _absent(zk: ZkClient, path: str) -> bool:
    return await zk.exists(path) is None


async def test_controlled_shutdown_moves_leadership_away(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    one, two = await brokers(1), await brokers(2)
    controller = controllers()
    await _active(zk, controller)
    await create_topic(zk, "t", {0: [1, 2], 1: [2, 1], 2: [1]})
    await eventually(lambda: len(one.leader_and_isr_states()) == 3)
    client = RawClient(controller.endpoint)
    stale = client.request(
        ApiKey.CONTROLLED_SHUTDOWN, 3, ControlledShutdownRequest(broker_id=1, broker_epoch=one.epoch - 1)
    )
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
    unknown = client.request(
        ApiKey.CONTROLLED_SHUTDOWN, 3, ControlledShutdownRequest(broker_id=7, broker_epoch=-1)
    )
    assert unknown.error_code == ErrorCode.BROKER_NOT_AVAILABLE
    answer = client.request(
        ApiKey.CONTROLLED_SHUTDOWN, 3, ControlledShutdownRequest(broker_id=1, broker_epoch=one.epoch)
    )
    assert answer.error_code == ErrorCode.NONE
    assert answer.remaining_partitions == []  # t-2 has a single replica: it does not count
    assert await leader_epoch_isr(zk, "t", 0) == (2, 1, [2])
    assert await leader_epoch_isr(zk, "t", 1) == (2, 1, [2])
    assert await leader_epoch_isr(zk, "t", 2) == (1, 0, [1])
    await eventually(lambda: ("t", 1, 0, False) in one.stop_replicas())
    await eventually(lambda: two.leader_and_isr_states()[("t", 0)].leader == 2)
    # With nobody else in the ISR, leadership cannot move: the partition is reported back (v0 too).
    await create_topic(zk, "u", {0: [2, 1]})
    await eventually(lambda: state_is(zk, "u", 0, (2, 0, [2])))  # 1 is shutting down: not live for elections
    answer = client.request(ApiKey.CONTROLLED_SHUTDOWN, 0, ControlledShutdownRequest(broker_id=2))
    assert answer.error_code == ErrorCode.NONE
    assert sorted((p.topic_name, p.partition_index) for p in answer.remaining_partitions) == [
        ("t", 0),
        ("t", 1),
        ("u", 0),
    ]
    client.close()


async def test_a_broker_gone_after_its_controlled_shutdown_leaves_the_others_metadata(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    # Its controlled shutdown took it out of every ISR already, so going offline changes no partition;
    # the others must still learn that it is gone (their Metadata answers list live brokers only).
    one, two = await brokers(1), await brokers(2)
    controller = controllers()
    await _active(zk, controller)
    await create_topic(zk, "t", {0: [1, 2], 1: [2, 1]})
    await eventually(lambda: len(two.leader_and_isr_states()) == 2)
    client = RawClient(controller.endpoint)
    answer = client.request(
        ApiKey.CONTROLLED_SHUTDOWN, 3, ControlledShutdownRequest(broker_id=1, broker_epoch=one.epoch)
    )
    client.close()
    assert answer.error_code == ErrorCode.NONE
    await eventually(lambda: state_is(zk, "t", 0, (2, 1, [2])))
    await one.deregister()
    await eventually(lambda: _live_brokers(two.requests(UPDATE_METADATA)[-1]) == [2])
    assert two.metadata_states()[("t", 1)].offline_replicas == [1]


async def test_a_leader_changes_its_isr_through_alter_partition(
    zk: ZkClient, controllers: Callable[..., ControllerNode], brokers: Callable[..., FakeBroker]
) -> None:
    one, two, three = await brokers(1), await brokers(2), await brokers(3)
    controller = controllers()
    await _active(zk, controller)
    record = await create_topic(zk, "t", {0: [1, 2, 3]})
    await eventually(lambda: state_is(zk, "t", 0, (1, 0, [1, 2, 3])))
    client = RawClient(controller.endpoint)

    def alter(version: int, isr: list[int], partition_epoch: int, leader_epoch: int = 0, **kw):  # type: ignore[no-untyped-def]
        data = AlterPartitionRequest.PartitionData(
            partition_index=0, leader_epoch=leader_epoch, partition_epoch=partition_epoch, new_isr=isr
        )
        if version >= 3:
            epochs = kw.get("epochs", {})
            data.new_isr_with_epochs = [
                AlterPartitionRequest.BrokerState(broker_id=b, broker_epoch=epochs.get(b, -1)) for b in isr
            ]
        topic = AlterPartitionRequest.TopicData(topic_name="t", topic_id=record.topic_id, partitions=[data])
        request = AlterPartitionRequest(
            broker_id=1, broker_epoch=kw.get("broker_epoch", one.epoch), topics=[topic]
        )
        return client.request(ApiKey.ALTER_PARTITION, version, request)

    answer = alter(2, [1, 2], 0)
    [result] = answer.topics[0].partitions
    assert answer.topics[0].topic_id == record.topic_id
    assert (result.error_code, result.leader_id, result.leader_epoch, result.isr, result.partition_epoch) == (
        0,
        1,
        0,
        [1, 2],
        1,
    )
    assert await leader_epoch_isr(zk, "t", 0) == (1, 0, [1, 2])
    await eventually(lambda: three.metadata_states()[("t", 0)].isr == [1, 2])
    # A retry of the same change is answered with the state in force; other stale changes are refused.
    assert alter(2, [1, 2], 0).topics[0].partitions[0].error_code == ErrorCode.NONE
    assert alter(2, [1], 0).topics[0].partitions[0].error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert (
        alter(2, [1], 1, leader_epoch=-1).topics[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
    )
    assert alter(2, [1], 1, broker_epoch=one.epoch - 1).error_code == ErrorCode.STALE_BROKER_EPOCH
    # Growing the ISR needs live members, with the broker epochs they registered with (v3).
    stale_member = alter(3, [1, 2, 3], 1, epochs={3: three.epoch - 1})
    assert stale_member.topics[0].partitions[0].error_code == ErrorCode.INELIGIBLE_REPLICA
    assert alter(0, [1, 2, 4], 1).topics[0].partitions[0].error_code == ErrorCode.INELIGIBLE_REPLICA
    grown = alter(3, [1, 2, 3], 1, epochs={2: two.epoch, 3: three.epoch})
    assert (grown.topics[0].partitions[0].error_code, grown.topics[0].partitions[0].isr) == (0, [1, 2, 3])
    assert await leader_epoch_isr(zk, "t", 0) == (1, 0, [1, 2, 3])
    client.close()
