"""JBOD in process: DescribeLogDirs and AlterReplicaLogDirs over a ReplicaManager with two log dirs, a
log dir failure taking its partitions offline (KAFKA_STORAGE_ERROR, never re-created elsewhere) and the
controller's handling of the KAFKA_STORAGE_ERROR answers to its LeaderAndIsr."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker.log_dir_failure import LogDirFailureChannel, LogDirFailureHandler
from broker.log_dirs import INVALID_OFFSET_LAG, LogDirsApis
from broker.metadata_cache import BrokerInfo, MetadataCache
from broker.replica_manager import ReplicaManager
from controller.context import ControllerContext, PartitionReplica, TopicPartition
from controller.log_dir_events import (
    LeaderAndIsrResponseReceived,
    on_leader_and_isr_response,
    partition_errors,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import (
    AlterReplicaLogDirsRequest,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    LeaderAndIsrResponse,
)
from protocol.record_batch import Record, encode_batch
from storage.config import LogConfig
from storage.log_manager import LogManager
from tests.broker.controller_requests import leader_and_isr, stop_replica
from zk import znodes

TOPIC = "jbod"


@pytest.fixture
def dirs(tmp_path: Path) -> list[str]:
    return [str(tmp_path / "a"), str(tmp_path / "b")]


@pytest.fixture
def logs(dirs: list[str]) -> Iterator[LogManager]:
    manager = LogManager(dirs, LogConfig.from_props({"segment.bytes": 2000}))
    try:
        yield manager
    finally:
        manager.shutdown()


def records(n: int) -> memoryview:
    batch = encode_batch(
        [Record(i, int(time.time() * 1000), None, b"v" * 20) for i in range(n)], base_offset=0
    )
    return memoryview(bytearray(batch))


async def leading(logs: LogManager, partitions: int = 4) -> ReplicaManager:
    cache = MetadataCache("cluster")
    cache.add_broker(BrokerInfo(1, None))
    manager = ReplicaManager(1, logs, cache)
    for p in range(partitions):  # in order (the LeaderAndIsr prepares logs on parallel threads)
        logs.get_or_create_log(TOPIC, p)
    await manager.become_leader_or_follower(leader_and_isr(TOPIC, {p: [1] for p in range(partitions)}), 6)
    return manager


def request(body: object) -> SimpleNamespace:
    return SimpleNamespace(body=body, version=4)


def described(response: DescribeLogDirsResponse) -> dict[str, dict]:
    return {
        r.log_dir: {
            "error": r.error_code,
            "total": r.total_bytes,
            "usable": r.usable_bytes,
            "partitions": {(t.name, p.partition_index): p for t in r.topics for p in t.partitions},
        }
        for r in response.results
    }


async def test_describe_log_dirs_lists_sizes_per_dir(logs: LogManager, dirs: list[str]) -> None:
    manager = await leading(logs)
    assert manager.append_records([(TOPIC, 0, records(5))], 1)[(TOPIC, 0)].error == ErrorCode.NONE
    apis = LogDirsApis(manager, logs)
    result = described(await apis.handle_describe_log_dirs(request(DescribeLogDirsRequest(topics=None))))
    assert set(result) == set(dirs)
    # Partitions spread over the dirs (the one with the fewest first).
    assert sorted(result[dirs[0]]["partitions"]) == [(TOPIC, 0), (TOPIC, 2)]
    assert sorted(result[dirs[1]]["partitions"]) == [(TOPIC, 1), (TOPIC, 3)]
    p0 = result[dirs[0]]["partitions"][(TOPIC, 0)]
    assert p0.partition_size == logs.get_log(TOPIC, 0).size > 0
    assert (p0.offset_lag, p0.is_future_key) == (0, False)
    assert result[dirs[0]]["error"] == ErrorCode.NONE
    assert 0 < result[dirs[0]]["usable"] <= result[dirs[0]]["total"]
    # Only what is asked for; a topic with a log in the dir but no partition asked is listed empty.
    only = DescribeLogDirsRequest(
        topics=[DescribeLogDirsRequest.DescribableLogDirTopic(topic=TOPIC, partitions=[1])]
    )
    response = await apis.handle_describe_log_dirs(request(only))
    assert sorted(described(response)[dirs[1]]["partitions"]) == [(TOPIC, 1)]
    assert [(t.name, t.partitions) for t in response.results[0].topics] == [(TOPIC, [])]


def alter(path: str, partitions: list[int], topic: str = TOPIC) -> AlterReplicaLogDirsRequest:
    return AlterReplicaLogDirsRequest(
        dirs=[
            AlterReplicaLogDirsRequest.AlterReplicaLogDir(
                path=path,
                topics=[
                    AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(name=topic, partitions=partitions)
                ],
            )
        ]
    )


def alter_errors(response: object) -> dict[tuple[str, int], int]:
    return {(t.topic_name, p.partition_index): p.error_code for t in response.results for p in t.partitions}  # type: ignore[attr-defined]


async def test_alter_replica_log_dirs_moves_a_replica_online(logs: LogManager, dirs: list[str]) -> None:
    manager = await leading(logs)
    apis = LogDirsApis(manager, logs)
    apis.movers.chunk_bytes = 200
    for _ in range(20):
        manager.append_records([(TOPIC, 0, records(3))], 1)
    response = await apis.handle_alter_replica_log_dirs(request(alter(dirs[1], [0, 1])))
    assert alter_errors(response) == {(TOPIC, 0): ErrorCode.NONE, (TOPIC, 1): ErrorCode.NONE}  # 1 is there
    future = logs.get_future_log(TOPIC, 0)
    assert future is not None
    lag = described(await apis.handle_describe_log_dirs(request(DescribeLogDirsRequest(topics=None))))
    moving = lag[dirs[1]]["partitions"][(TOPIC, 0)]
    assert moving.is_future_key and moving.offset_lag == 60 - future.log_end_offset
    for _ in range(20):  # producing while it moves
        assert manager.append_records([(TOPIC, 0, records(3))], 1)[(TOPIC, 0)].error == ErrorCode.NONE
        await asyncio.sleep(0)
    for _ in range(500):
        if not apis.movers.moving((TOPIC, 0)):
            break
        await asyncio.sleep(0.01)
    moved = logs.get_log(TOPIC, 0)
    assert os.path.dirname(moved.dir) == dirs[1] and moved.log_end_offset == 120
    assert manager.get_partition(TOPIC, 0).log is moved
    assert manager.append_records([(TOPIC, 0, records(1))], 1)[(TOPIC, 0)].error == ErrorCode.NONE
    assert moved.log_end_offset == 121
    after = described(await apis.handle_describe_log_dirs(request(DescribeLogDirsRequest(topics=None))))
    assert (TOPIC, 0) not in after[dirs[0]]["partitions"]
    assert not after[dirs[1]]["partitions"][(TOPIC, 0)].is_future_key
    await apis.shutdown()


async def test_alter_replica_log_dirs_errors(logs: LogManager, dirs: list[str]) -> None:
    manager = await leading(logs, partitions=2)
    apis = LogDirsApis(manager, logs)
    assert alter_errors(await apis.handle_alter_replica_log_dirs(request(alter("/not/a/log/dir", [0])))) == {
        (TOPIC, 0): ErrorCode.LOG_DIR_NOT_FOUND
    }
    # No replica here yet: REPLICA_NOT_AVAILABLE, and its log goes to that dir when it comes.
    assert alter_errors(await apis.handle_alter_replica_log_dirs(request(alter(dirs[0], [7], "later")))) == {
        ("later", 7): ErrorCode.REPLICA_NOT_AVAILABLE
    }
    assert os.path.dirname(logs.get_or_create_log("later", 7).dir) == dirs[0]
    long_name = "x" * 240
    assert alter_errors(
        await apis.handle_alter_replica_log_dirs(request(alter(dirs[0], [0], long_name)))
    ) == {(long_name, 0): ErrorCode.INVALID_TOPIC_EXCEPTION}
    logs.handle_log_dir_failure(dirs[1])
    assert alter_errors(await apis.handle_alter_replica_log_dirs(request(alter(dirs[1], [0])))) == {
        (TOPIC, 0): ErrorCode.KAFKA_STORAGE_ERROR
    }
    offline = described(await apis.handle_describe_log_dirs(request(DescribeLogDirsRequest(topics=None))))
    assert offline[dirs[1]]["error"] == ErrorCode.KAFKA_STORAGE_ERROR and not offline[dirs[1]]["partitions"]


async def test_a_failed_dir_takes_its_partitions_offline(logs: LogManager, dirs: list[str]) -> None:
    manager = await leading(logs)
    channel = LogDirFailureChannel(asyncio.get_running_loop())
    logs.on_dir_failure = channel.maybe_add_offline_log_dir
    halted: list[bool] = []
    LogDirFailureHandler(1, channel, manager, logs, None, lambda: halted.append(True))
    apis = LogDirsApis(manager, logs)
    # An append that meets an I/O error: KAFKA_STORAGE_ERROR, the dir offline at once.
    broken = logs.get_log(TOPIC, 1)

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(5, "Input/output error")

    broken.append_as_leader = fail  # type: ignore[method-assign]
    result = manager.append_records([(TOPIC, 1, records(1)), (TOPIC, 0, records(1))], 1)
    assert result[(TOPIC, 1)].error == ErrorCode.KAFKA_STORAGE_ERROR
    assert result[(TOPIC, 0)].error == ErrorCode.NONE
    assert logs.offline_dirs == {dirs[1]} and logs.offline_partitions == {(TOPIC, 1), (TOPIC, 3)}
    assert manager.get_partition(TOPIC, 3) is None
    for tp in ((TOPIC, 1), (TOPIC, 3)):
        with pytest.raises(KafkaError) as refused:
            manager.leader_partition(*tp)
        assert refused.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    # The controller's next LeaderAndIsr: KAFKA_STORAGE_ERROR for them, no log made in the other dir.
    _, errors, _ = await manager.become_leader_or_follower(
        leader_and_isr(TOPIC, {p: [1] for p in range(4)}, leader_epoch=1), 6
    )
    assert errors == {
        (TOPIC, 0): ErrorCode.NONE,
        (TOPIC, 1): ErrorCode.KAFKA_STORAGE_ERROR,
        (TOPIC, 2): ErrorCode.NONE,
        (TOPIC, 3): ErrorCode.KAFKA_STORAGE_ERROR,
    }
    assert not {f"{TOPIC}-1", f"{TOPIC}-3"} & set(os.listdir(dirs[0]))
    # StopReplica of a partition on the failed dir: KAFKA_STORAGE_ERROR, as Kafka answers for an offline one.
    _, stopped = await manager.stop_replicas(stop_replica(TOPIC, [1, 2], delete=False), 3)
    assert stopped == {(TOPIC, 1): ErrorCode.KAFKA_STORAGE_ERROR, (TOPIC, 2): ErrorCode.NONE}
    result_dirs = described(await apis.handle_describe_log_dirs(request(DescribeLogDirsRequest(topics=None))))
    assert result_dirs[dirs[1]]["error"] == ErrorCode.KAFKA_STORAGE_ERROR
    assert not halted
    logs.maybe_handle_io_error(dirs[0], "flush failed", OSError(5, "EIO"))
    assert halted == [True]  # no log dir left: the broker stops


def test_offset_lag_of_a_replica_with_no_current_log(logs: LogManager) -> None:
    apis = LogDirsApis(SimpleNamespace(get_partition=lambda *_: None), logs)  # type: ignore[arg-type]
    log = logs.get_or_create_log(TOPIC, 0)
    logs.async_delete(TOPIC, 0)
    assert apis.offset_lag(log, is_future=False) == INVALID_OFFSET_LAG


def test_log_dir_event_znode_is_kafkas() -> None:
    data = znodes.encode_log_dir_event(3)
    assert data == b'{"version":1,"broker":3,"event":1}'
    assert znodes.decode_log_dir_event(data) == 3
    assert znodes.decode_log_dir_event(b"junk") is None
    assert znodes.LOG_DIR_EVENT_NOTIFICATION in znodes.PERSISTENT_PATHS


async def test_the_controller_learns_offline_replicas_from_leader_and_isr_answers() -> None:
    context = ControllerContext(epoch=1)
    context.live_brokers = {1: SimpleNamespace(epoch=5), 2: SimpleNamespace(epoch=6)}  # type: ignore[dict-item]
    topic_id = uuid.uuid4()
    context.add_topic(TOPIC, topic_id, {0: [1, 2], 1: [2, 1]})
    tp0, tp1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    response = LeaderAndIsrResponse(
        error_code=0,
        topics=[
            LeaderAndIsrResponse.LeaderAndIsrTopicError(
                topic_id=topic_id,
                partition_errors=[
                    LeaderAndIsrResponse.LeaderAndIsrPartitionError(partition_index=0, error_code=56),
                    LeaderAndIsrResponse.LeaderAndIsrPartitionError(partition_index=1, error_code=0),
                ],
            )
        ],
    )
    errors = partition_errors(context, response)
    assert errors == {tp0: ErrorCode.KAFKA_STORAGE_ERROR, tp1: ErrorCode.NONE}
    offline: list[list[PartitionReplica]] = []

    async def become_offline(replicas: list[PartitionReplica]) -> None:
        offline.append(replicas)

    event = LeaderAndIsrResponseReceived(1, 0, errors)
    await on_leader_and_isr_response(context, event, become_offline, "")
    assert offline == [[PartitionReplica(tp0, 1)]]
    assert not context.is_replica_online(1, partition=tp0) and context.is_replica_online(1, partition=tp1)
    assert context.is_replica_online(1)
    _, offline_replicas = context.online_and_offline_replicas()
    assert offline_replicas == [PartitionReplica(tp0, 1)]
    await on_leader_and_isr_response(context, event, become_offline, "")
    assert len(offline) == 1  # known already: nothing new


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
async def test_describe_log_dirs_answers_every_kafka_39_version(
    logs: LogManager, dirs: list[str], version: int
) -> None:
    manager = await leading(logs, partitions=2)
    apis = LogDirsApis(manager, logs)
    body = DescribeLogDirsRequest.decode(DescribeLogDirsRequest(topics=None).encode(version), version)
    response = await apis.handle_describe_log_dirs(request(body))
    decoded = DescribeLogDirsResponse.decode(response.encode(version), version)  # type: ignore[union-attr]
    result = described(decoded)
    assert sorted(result[dirs[0]]["partitions"]) == [(TOPIC, 0)]
    assert sorted(result[dirs[1]]["partitions"]) == [(TOPIC, 1)]
    assert (result[dirs[0]]["total"] > 0) == (version >= 4)  # total/usable bytes: v4


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_alter_replica_log_dirs_answers_every_kafka_39_version(
    logs: LogManager, dirs: list[str], version: int
) -> None:
    manager = await leading(logs, partitions=1)
    apis = LogDirsApis(manager, logs)
    body = AlterReplicaLogDirsRequest.decode(alter(dirs[0], [0]).encode(version), version)
    response = await apis.handle_alter_replica_log_dirs(request(body))
    decoded = type(response).decode(response.encode(version), version)  # type: ignore[union-attr]
    assert alter_errors(decoded) == {(TOPIC, 0): ErrorCode.NONE}  # already there
    await apis.shutdown()
