"""AlterPartitionManager: sends the ISR changes this broker's leaders propose to the controller.

Only the controller writes partition state, so a leader that grows or shrinks its ISR asks it with an
AlterPartition request (Kafka 2.7+, KIP-497). Changes queue per partition; one request is in flight at
a time and carries everything queued meanwhile. A change the controller could not be reached for is
sent again; a refused one is dropped (the partition may propose again later) and the next
LeaderAndIsr or UpdateMetadata brings the state in force.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from broker.controller_channel import ControllerChannel
from broker.partition import Partition
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import AlterPartitionRequest, AlterPartitionResponse
from server_common.tasks import cancel_and_wait

log = logging.getLogger(__name__)

_VERSION = 1  # topic names (v2+ address topics by id)


class AlterPartitionManager:
    def __init__(
        self,
        channel: ControllerChannel,
        broker_id: int,
        broker_epoch: Callable[[], int],
        retry_backoff_ms: int,
        on_committed: Callable[[Partition], None],
    ) -> None:
        self._on_committed = on_committed
        self._channel = channel
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._backoff = retry_backoff_ms / 1000
        self._queued: dict[tuple[str, int], Partition] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="alter-partition")

    def submit(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        """Proposes ``new_isr`` for a partition this broker leads (one change per partition at a time)."""
        partition.pending_isr = new_isr
        self._queued[partition.key] = partition
        log.info(
            "proposing ISR %s -> %s for %s-%d (leader epoch %d)",
            list(partition.isr),
            list(new_isr),
            partition.topic,
            partition.partition,
            partition.leader_epoch,
        )
        self._wakeup.set()

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            batch = {tp: p for tp, p in self._queued.items() if p.pending_isr is not None and p.is_leader}
            self._queued.clear()
            if not batch:
                continue
            try:
                response = await self._channel.send(ApiKey.ALTER_PARTITION, _VERSION, self._request(batch))
            except (OSError, TimeoutError) as e:
                log.info("AlterPartition to the controller failed (%s); retrying", e)
                for tp, partition in batch.items():
                    self._queued.setdefault(tp, partition)
                await asyncio.sleep(self._backoff)
                self._wakeup.set()
                continue
            self._apply(batch, response)

    def _request(self, batch: dict[tuple[str, int], Partition]) -> AlterPartitionRequest:
        by_topic: dict[str, list[Partition]] = {}
        for partition in batch.values():
            by_topic.setdefault(partition.topic, []).append(partition)
        return AlterPartitionRequest(
            broker_id=self._broker_id,
            broker_epoch=self._broker_epoch(),
            topics=[
                AlterPartitionRequest.TopicData(
                    topic_name=topic,
                    partitions=[
                        AlterPartitionRequest.PartitionData(
                            partition_index=p.partition,
                            leader_epoch=p.leader_epoch,
                            new_isr=list(p.pending_isr or ()),
                            partition_epoch=p.partition_epoch,
                        )
                        for p in partitions
                    ],
                )
                for topic, partitions in by_topic.items()
            ],
        )

    def _apply(self, batch: dict[tuple[str, int], Partition], response: AlterPartitionResponse) -> None:
        if response.error_code != ErrorCode.NONE:
            log.warning("AlterPartition refused as a whole: %s", ErrorCode(response.error_code).name)
            for refused in batch.values():
                refused.pending_isr = None
            return
        answered = set()
        for topic in response.topics:
            for p in topic.partitions:
                partition = batch.get((topic.topic_name, p.partition_index))
                if partition is None:
                    continue
                answered.add(partition.key)
                if p.error_code == ErrorCode.NONE:
                    if partition.on_isr_committed(p.leader_epoch, tuple(p.isr), p.partition_epoch):
                        self._on_committed(partition)
                else:
                    log.info(
                        "ISR change for %s-%d refused: %s",
                        partition.topic,
                        partition.partition,
                        ErrorCode(p.error_code).name,
                    )
                    partition.pending_isr = None
        for tp, partition in batch.items():
            if tp not in answered:
                partition.pending_isr = None

    async def shutdown(self) -> None:
        await cancel_and_wait([self._task])
