"""JBOD requests: DescribeLogDirs and AlterReplicaLogDirs, and the movement of replicas between log dirs.

DescribeLogDirs (Kafka's ReplicaManager.describeLogDirs) lists every dir of log.dirs: an offline one
with KAFKA_STORAGE_ERROR and nothing else, an online one with its total and usable bytes (v4, from
statvfs) and, per partition asked for (all when ``topics`` is null), the log's size, whether it is a
future log (a replica moving here), and its offset lag: for the current log max(high watermark - log
end, 0), for a future log how far it is behind the current log's end.

AlterReplicaLogDirs (Kafka's ReplicaManager.alterReplicaLogDirs) moves a replica to another dir of the
same broker while it serves: a future log `<topic>-<partition>.<uuid>-future` is created in the
destination and ``ReplicaAlterLogDirsManager`` copies the current log into it (Kafka's
ReplicaAlterLogDirsThread, here a task on the event loop reading the current log in chunks); once the
copy has caught up, the swap happens on the event loop, where appends run, so nothing is appended
between the last check and the swap: the future log becomes the partition's log and the old one is
deleted. Errors, as Kafka's: LOG_DIR_NOT_FOUND (not one of log.dirs), KAFKA_STORAGE_ERROR (the dir or
the partition is offline), REPLICA_NOT_AVAILABLE (no replica here yet: the dir is remembered and the
log created there when the LeaderAndIsr comes). A move to another dir replaces a move in progress.

Authorization, as Kafka 3.9's KafkaApis: DescribeLogDirs needs DESCRIBE on the cluster (else no dirs and,
v3+, CLUSTER_AUTHORIZATION_FAILED), AlterReplicaLogDirs ALTER on the cluster (else every partition is
CLUSTER_AUTHORIZATION_FAILED and nothing moves).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import defaultdict
from collections.abc import Awaitable, Callable

from broker.authorization import ALLOW_ALL, Authorization
from broker.replica_manager import ReplicaManager
from network.handler_pool import Parked
from network.request_channel import Request
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    Message,
)
from server_common.acls import CLUSTER_NAME, AclOperation, ResourceType
from storage.errors import StorageError
from storage.log import Log
from storage.log_manager import LogManager

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Message | Parked | None]]
TopicPartition = tuple[str, int]

INVALID_OFFSET_LAG = -1  # DescribeLogDirsResponse.INVALID_OFFSET_LAG: no current log to compare with
# Kafka refuses to move a partition whose future dir name would pass 255 characters (KAFKA-4893).
MAX_DIR_NAME_LENGTH = 255
COPY_CHUNK_BYTES = 1024 * 1024
IDLE_BACKOFF_S = 0.05


def dir_space(directory: str) -> tuple[int, int]:
    """(total bytes, usable bytes) of the file system holding ``directory`` (Kafka's FileStore
    getTotalSpace/getUsableSpace: usable is what an unprivileged user may still write)."""
    stat = os.statvfs(directory)
    return stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize


class ReplicaAlterLogDirsManager:
    """Copies each moving replica's current log into its future log and swaps them when caught up."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        log_manager: LogManager,
        chunk_bytes: int = COPY_CHUNK_BYTES,
    ) -> None:
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.chunk_bytes = chunk_bytes
        self._tasks: dict[TopicPartition, asyncio.Task[None]] = {}
        # Completed swaps, by partition: for tests and DescribeLogDirs' callers that wait.
        self.moved: dict[TopicPartition, str] = {}

    def moving(self, tp: TopicPartition) -> bool:
        task = self._tasks.get(tp)
        return task is not None and not task.done()

    def start(self, tp: TopicPartition) -> None:
        if not self.moving(tp):
            self._tasks[tp] = asyncio.get_running_loop().create_task(
                self._move(tp), name=f"alter-log-dirs-{tp[0]}-{tp[1]}"
            )

    def stop(self, tp: TopicPartition) -> None:
        task = self._tasks.pop(tp, None)
        if task is not None:
            task.cancel()

    async def shutdown(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _move(self, tp: TopicPartition) -> None:
        try:
            while True:
                current = self.log_manager.get_log(*tp)
                future = self.log_manager.get_future_log(*tp)
                if current is None or future is None or current.closed or future.closed:
                    return  # deleted, offline, or abandoned
                try:
                    done = self.copy_step(tp, current, future)
                except OSError as e:
                    failed = future.dir if self._writing else current.dir
                    self.log_manager.maybe_handle_io_error(
                        failed, f"Error while moving {tp[0]}-{tp[1]} between log dirs", e
                    )
                    return
                except StorageError as e:
                    log.warning("moving %s-%d between log dirs: %s; retrying", tp[0], tp[1], e)
                    await asyncio.sleep(IDLE_BACKOFF_S)
                    continue
                if done:
                    return
                await asyncio.sleep(0 if self._copied else IDLE_BACKOFF_S)
        finally:
            if self._tasks.get(tp) is asyncio.current_task():
                del self._tasks[tp]

    _writing = False
    _copied = False

    def copy_step(self, tp: TopicPartition, current: Log, future: Log) -> bool:
        """One step of the copy, on the event loop: truncate the future log where it diverged from the
        current one (a follower's current log may have been truncated), copy one chunk, or, when caught
        up, swap. True when the move is complete."""
        self._writing = self._copied = False
        if future.log_end_offset < current.log_start_offset:
            self._writing = True
            future.truncate_fully_and_start_at(current.log_start_offset)
        latest = future.latest_epoch
        if latest is not None and future.log_end_offset > future.log_start_offset:
            _, end = current.end_offset_for_epoch(latest)
            if end < 0:
                self._writing = True
                future.truncate_fully_and_start_at(current.log_start_offset)
            elif end < future.log_end_offset:
                self._writing = True
                future.truncate_to(end)
        if future.log_end_offset > current.log_end_offset:
            self._writing = True
            future.truncate_to(current.log_end_offset)
        if future.log_end_offset == current.log_end_offset:
            partition = self.replica_manager.get_partition(*tp)
            if partition is None or partition.log is not current:
                return False  # a LeaderAndIsr is setting the partition up: swap on a later step
            # Kafka's abortAndPauseCleaning: the cleaner stops between batches; swap once it is out.
            current.abort_cleaning_event.set()
            if not current.cleaner_lock.acquire(blocking=False):
                return False
            try:
                self._writing = True
                _, swapped = self.log_manager.replace_current_with_future_log(*tp)
            finally:
                current.cleaner_lock.release()
            partition.log = swapped
            self.moved[tp] = self.log_manager.dir_of(swapped)
            return True
        info = current.read(future.log_end_offset, self.chunk_bytes, None, True)
        records = bytes(info.records)
        if records:
            self._writing = True
            future.append_as_follower(records)
            future.update_high_watermark(min(current.high_watermark, future.log_end_offset))
            self._copied = True
        return False


class LogDirsApis:
    # A class default too: tests build the handlers without the constructor.
    authorization: Authorization = ALLOW_ALL

    def __init__(
        self,
        replica_manager: ReplicaManager,
        log_manager: LogManager,
        *,
        authorization: Authorization = ALLOW_ALL,
    ) -> None:
        self.authorization = authorization
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.movers = ReplicaAlterLogDirsManager(replica_manager, log_manager)

    def handlers(self) -> dict[int, Handler]:
        """api key -> handler, merged into KafkaApis."""
        return {
            ApiKey.DESCRIBE_LOG_DIRS: self.handle_describe_log_dirs,
            ApiKey.ALTER_REPLICA_LOG_DIRS: self.handle_alter_replica_log_dirs,
        }

    async def shutdown(self) -> None:
        await self.movers.shutdown()

    def _may(self, request: Request, operation: AclOperation) -> bool:
        return self.authorization.authorize(request, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    # -- DescribeLogDirs --------------------------------------------------------------------------

    async def handle_describe_log_dirs(self, request: Request) -> Message | Parked | None:
        body: DescribeLogDirsRequest = request.body
        if not self._may(request, AclOperation.DESCRIBE):
            return DescribeLogDirsResponse(
                throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[]
            )
        wanted: set[TopicPartition] | None = None
        if body.topics is not None:
            wanted = {(t.topic, p) for t in body.topics for p in t.partitions}
        return DescribeLogDirsResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, results=self.describe_log_dirs(wanted)
        )

    def offset_lag(self, lg: Log, is_future: bool) -> int:
        """Kafka's getLogEndOffsetLag."""
        current = self.log_manager.get_log(lg.topic, lg.partition)
        if current is None:
            return INVALID_OFFSET_LAG
        if is_future:
            return current.log_end_offset - lg.log_end_offset
        return max(current.high_watermark - lg.log_end_offset, 0)

    def describe_log_dirs(
        self, wanted: set[TopicPartition] | None
    ) -> list[DescribeLogDirsResponse.DescribeLogDirsResult]:
        results = []
        by_dir = self.log_manager.logs_by_dir()
        for directory in self.log_manager.log_dirs:
            if directory in self.log_manager.offline_dirs:
                log.warning("Unable to describe replica dirs for %s: it is offline", directory)
                results.append(
                    DescribeLogDirsResponse.DescribeLogDirsResult(
                        error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=directory, topics=[]
                    )
                )
                continue
            try:
                total, usable = dir_space(directory)
            except OSError as e:
                self.log_manager.maybe_handle_io_error(directory, "Error reading the file system", e)
                results.append(
                    DescribeLogDirsResponse.DescribeLogDirsResult(
                        error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=directory, topics=[]
                    )
                )
                continue
            # Kafka groups the dir's logs by topic and filters the partitions inside each group: a topic
            # with a log here but none of its partitions asked for is listed with no partitions.
            topics: dict[str, list[DescribeLogDirsResponse.DescribeLogDirsPartition]] = defaultdict(list)
            for lg in by_dir.get(directory, []):
                partitions = topics[lg.topic]
                if wanted is not None and (lg.topic, lg.partition) not in wanted:
                    continue
                is_future = self.log_manager.is_future(lg)
                try:
                    size = lg.size
                except OSError:
                    continue
                partitions.append(
                    DescribeLogDirsResponse.DescribeLogDirsPartition(
                        partition_index=lg.partition,
                        partition_size=size,
                        offset_lag=self.offset_lag(lg, is_future),
                        is_future_key=is_future,
                    )
                )
            results.append(
                DescribeLogDirsResponse.DescribeLogDirsResult(
                    error_code=ErrorCode.NONE,
                    log_dir=directory,
                    topics=[
                        DescribeLogDirsResponse.DescribeLogDirsTopic(name=name, partitions=parts)
                        for name, parts in sorted(topics.items())
                    ],
                    total_bytes=total,
                    usable_bytes=usable,
                )
            )
        return results

    # -- AlterReplicaLogDirs ----------------------------------------------------------------------

    async def handle_alter_replica_log_dirs(self, request: Request) -> Message | Parked | None:
        body: AlterReplicaLogDirsRequest = request.body
        if not self._may(request, AclOperation.ALTER):
            # AlterReplicaLogDirsRequest.getErrorResponse: a result per topic of each dir asked for.
            return AlterReplicaLogDirsResponse(
                throttle_time_ms=0,
                results=[
                    AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult(
                        topic_name=topic.name,
                        partitions=[
                            AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult(
                                partition_index=index, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                            )
                            for index in topic.partitions
                        ],
                    )
                    for entry in body.dirs
                    for topic in entry.topics
                ],
            )
        wanted: dict[TopicPartition, str] = {}
        for entry in body.dirs:
            for topic in entry.topics:
                for index in topic.partitions:
                    wanted[(topic.name, index)] = entry.path
        errors = self.alter_replica_log_dirs(wanted)
        by_topic: dict[str, list[AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult]] = (
            defaultdict(list)
        )
        for (name, index), code in errors.items():
            by_topic[name].append(
                AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult(
                    partition_index=index, error_code=code
                )
            )
        return AlterReplicaLogDirsResponse(
            throttle_time_ms=0,
            results=[
                AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult(topic_name=t, partitions=ps)
                for t, ps in by_topic.items()
            ],
        )

    def alter_replica_log_dirs(self, wanted: dict[TopicPartition, str]) -> dict[TopicPartition, int]:
        errors: dict[TopicPartition, int] = {}
        for tp, destination in wanted.items():
            errors[tp] = self._alter_replica_log_dir(tp, destination)
            if errors[tp] != ErrorCode.NONE:
                log.warning(
                    "Unable to alter the log dir of %s-%d to %s: %s",
                    tp[0],
                    tp[1],
                    destination,
                    ErrorCode(errors[tp]).name,
                )
        return errors

    def _alter_replica_log_dir(self, tp: TopicPartition, destination: str) -> int:
        manager = self.log_manager
        if len(f"{tp[0]}-{tp[1]}.{'0' * 32}-future") > MAX_DIR_NAME_LENGTH:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        try:
            path = manager.check_log_dir(destination)
        except StorageError as e:
            return e.error_code
        if tp in manager.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR
        future = manager.get_future_log(*tp)
        if future is not None and manager.dir_of(future) != path:
            # A new destination: the move in progress stops (Kafka's futureReplicaDirChanged).
            self.movers.stop(tp)
            manager.abandon_future_log(*tp)
        manager.set_preferred_dir(tp[0], tp[1], path)
        partition = self.replica_manager.get_partition(*tp)
        if partition is None or partition.log is None:
            return ErrorCode.REPLICA_NOT_AVAILABLE
        if manager.offline_dirs:
            # Kafka creates no future log while a dir is offline: the partition may have a log there.
            return ErrorCode.KAFKA_STORAGE_ERROR
        try:
            created = manager.create_future_log(tp[0], tp[1], path)
        except StorageError as e:
            return e.error_code
        if created is not None:
            self.movers.start(tp)
        return ErrorCode.NONE
