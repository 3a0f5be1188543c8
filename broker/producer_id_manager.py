"""ProducerIdManager: producer ids for idempotent producers, from blocks allocated through ZooKeeper.

As Kafka's ZooKeeper-mode ProducerIdManager: ``/latest_producer_id_block`` holds the last block handed
out (``{"version":1,"broker":<id>,"block_start":"<first>","block_end":"<last>"}``). A broker takes the
next 1000 ids by writing the following block conditionally on the node's version; a concurrent writer
makes the write fail and the broker reads again and retries. Ids are unique across the cluster and
never reused, also across restarts (an unused rest of a block is simply skipped).
"""

from __future__ import annotations

import asyncio
import logging

from kazoo.exceptions import BadVersionError, NodeExistsError

from protocol.errors import ErrorCode, KafkaError
from zk import znodes
from zk.client import ZkClient

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000
LONG_MAX = 2**63 - 1


class ProducerIdManager:
    def __init__(self, broker_id: int, zk: ZkClient) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self._next = 0
        self._last = -1  # the current block's last id; below _next means no ids left
        self._lock = asyncio.Lock()

    async def generate_producer_id(self) -> int:
        async with self._lock:
            if self._next > self._last:
                self._next, self._last = await self._allocate_block()
            producer_id = self._next
            self._next += 1
            return producer_id

    async def _allocate_block(self) -> tuple[int, int]:
        while True:
            found = await self.zk.get(znodes.PRODUCER_ID_BLOCK)
            if found is not None and found[0]:
                _, _, previous_end = znodes.decode_producer_id_block(found[0])
                if previous_end > LONG_MAX - BLOCK_SIZE:
                    raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "Have exhausted all producerIds.")
                start = previous_end + 1
            else:
                start = 0
            end = start + BLOCK_SIZE - 1
            data = znodes.encode_producer_id_block(self.broker_id, start, end)
            try:
                if found is None:
                    await self.zk.create(znodes.PRODUCER_ID_BLOCK, data)
                else:
                    await self.zk.set(znodes.PRODUCER_ID_BLOCK, data, found[1].version)
            except (BadVersionError, NodeExistsError):
                log.debug("another broker took a producer id block at the same time; reading again")
                continue
            log.info("broker %d acquired producer id block [%d, %d]", self.broker_id, start, end)
            return start, end
