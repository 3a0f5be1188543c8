"""Producer id blocks allocated through a real ZooKeeper, as Kafka's ZooKeeper-mode ProducerIdManager:
blocks of 1000 in /latest_producer_id_block, taken with conditional writes, never handed out twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from broker.producer_id_manager import BLOCK_SIZE, LONG_MAX, ProducerIdManager
from protocol.errors import ErrorCode, KafkaError
from zk import znodes
from zk.client import ZkClient

pytestmark = pytest.mark.integration


@pytest.fixture
async def zk(zookeeper: str) -> AsyncIterator[ZkClient]:
    client = ZkClient(zookeeper, 4000, operation_timeout=10)
    await client.start()
    try:
        yield client
    finally:
        await client.close()


async def block(zk: ZkClient) -> tuple[int, int, int]:
    found = await zk.get(znodes.PRODUCER_ID_BLOCK)
    assert found is not None
    return znodes.decode_producer_id_block(found[0])


async def test_ids_come_from_blocks_of_a_thousand(zk: ZkClient) -> None:
    manager = ProducerIdManager(7, zk)
    ids = [await manager.generate_producer_id() for _ in range(BLOCK_SIZE)]
    assert ids == list(range(BLOCK_SIZE))
    assert await block(zk) == (7, 0, 999)
    assert await manager.generate_producer_id() == 1000
    assert await block(zk) == (7, 1000, 1999)


async def test_a_restarted_broker_never_reuses_ids(zk: ZkClient) -> None:
    first = ProducerIdManager(1, zk)
    assert await first.generate_producer_id() == 0
    # The rest of the first block is lost with the old process, as in Kafka.
    assert await ProducerIdManager(1, zk).generate_producer_id() == 1000


async def test_an_empty_block_node_starts_at_zero(zk: ZkClient) -> None:
    await zk.create(znodes.PRODUCER_ID_BLOCK, b"")  # Kafka creates the path empty at startup
    assert await ProducerIdManager(2, zk).generate_producer_id() == 0
    assert await block(zk) == (2, 0, 999)


async def test_concurrent_brokers_get_disjoint_blocks(zk: ZkClient) -> None:
    managers = [ProducerIdManager(b, zk) for b in range(1, 6)]

    async def take(manager: ProducerIdManager) -> list[int]:
        return [await manager.generate_producer_id() for _ in range(1500)]

    results = await asyncio.gather(*(take(m) for m in managers))
    every = [i for ids in results for i in ids]
    assert len(set(every)) == len(every) == 5 * 1500
    # Each broker took two whole blocks; nothing was skipped or taken twice.
    assert (await block(zk))[2] == 10 * BLOCK_SIZE - 1
    assert all(ids[0] % BLOCK_SIZE == 0 for ids in results)


async def test_exhausted_ids_are_an_error(zk: ZkClient) -> None:
    await zk.create(
        znodes.PRODUCER_ID_BLOCK, znodes.encode_producer_id_block(1, LONG_MAX - 1500, LONG_MAX - 500)
    )
    with pytest.raises(KafkaError) as e:
        await ProducerIdManager(1, zk).generate_producer_id()
    assert e.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
