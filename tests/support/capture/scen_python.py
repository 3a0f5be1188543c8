"""Capture scenarios for the three Python clients: a broad walk over the APIs each client has.

Usage: python scen_python.py CLIENT BOOTSTRAP, CLIENT one of aiokafka, kafka-python, confluent-kafka.
Prints `VERSION ...` first, then one `OK|FAIL|SKIP step detail` line per step; steps fail freely (the
reference broker lacks some APIs and has bugs): what matters is the requests they put on the wire.
Run by capture.py with a recording proxy in front of the reference broker.
"""

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

TOPIC_PARTITIONS = 3
HEADERS = [("trace", b"t-1"), ("empty", b"")]
# Compressible but small: librdkafka skips compression when it does not shrink the batch.
PAYLOAD = b"samsa-vector " * 8
CODECS = ("gzip", "snappy", "lz4", "zstd")
# Tansu's first rebalance waits about the rebalance timeout; keep it short.
GROUP_TIMEOUT_MS = 10000
CONSUME_DEADLINE_S = 40.0


def report(status: str, name: str, detail: object = "") -> None:
    print(status, name, " ".join(str(detail).split())[:200], flush=True)


def step(name: str, fn: Callable[[], Any]) -> bool:
    try:
        result = fn()
    except Exception as e:
        report("FAIL", name, f"{type(e).__name__}: {e}")
        return False
    report("OK", name, result)
    return True


async def astep(name: str, coro: Awaitable[Any], timeout: float = 20.0) -> bool:
    try:
        result = await asyncio.wait_for(coro, timeout)
    except Exception as e:
        report("FAIL", name, f"{type(e).__name__}: {e}")
        return False
    report("OK", name, result)
    return True


def keyed(n: int) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), f"v{i}".encode()) for i in range(n)]


# ---------------------------------------------------------------------------------------------------


async def aiokafka_scenario(bs: str) -> None:
    import aiokafka
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    print("VERSION aiokafka", aiokafka.__version__, flush=True)
    topic, group = "vec-aiokafka", "vec-aiokafka-grp"
    admin = AIOKafkaAdminClient(bootstrap_servers=bs, client_id="vec-admin", request_timeout_ms=10000)
    await admin.start()
    await astep("create_topics", admin.create_topics([NewTopic(topic, TOPIC_PARTITIONS, 1)]))
    await astep("create_partitions", admin.create_partitions({topic: NewPartitions(TOPIC_PARTITIONS + 1)}))
    await astep("describe_configs", admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]))
    await astep(
        "alter_configs",
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "600000"})]),
    )
    await astep("describe_cluster", admin.describe_cluster())
    await astep("list_topics", admin.list_topics())
    await astep("describe_topics", admin.describe_topics([topic]))

    async def produce(name: str, **conf: Any) -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=bs, client_id=f"vec-{name}", request_timeout_ms=10000, **conf
        )
        await astep(f"{name}_start", producer.start())
        for key, value in keyed(5):
            await astep(name, producer.send_and_wait(topic, value, key=key, headers=HEADERS), 10)
        await producer.stop()

    await produce("produce")
    for codec in CODECS:
        producer = AIOKafkaProducer(
            bootstrap_servers=bs, client_id=f"vec-{codec}", compression_type=codec, linger_ms=20
        )
        await producer.start()
        futures = [await producer.send(topic, PAYLOAD, key=b"c", partition=0) for _ in range(5)]
        await astep(f"produce_{codec}", asyncio.gather(*futures), 10)
        await producer.stop()
    await produce("produce_idempotent", enable_idempotence=True)

    txn = AIOKafkaProducer(bootstrap_servers=bs, client_id="vec-txn", transactional_id="vec-aiokafka-tx")
    if await astep("txn_start", txn.start()):

        async def transaction() -> None:
            async with txn.transaction():
                await txn.send_and_wait(topic, b"txn", key=b"t", partition=1)
                await txn.send_offsets_to_transaction({TopicPartition(topic, 0): 1}, group + "-tx")

        await astep("txn", transaction())
    await astep("txn_stop", txn.stop())

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bs,
        client_id="vec-consumer",
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
        rebalance_timeout_ms=GROUP_TIMEOUT_MS,
        session_timeout_ms=GROUP_TIMEOUT_MS,
        heartbeat_interval_ms=1000,
        request_timeout_ms=15000,
    )
    await consumer.start()

    async def consume() -> int:
        got, deadline = 0, time.monotonic() + CONSUME_DEADLINE_S
        while got < 10 and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=1000)
            got += sum(len(msgs) for msgs in batches.values())
        await consumer.commit()
        return got

    await astep("consume_commit", consume(), CONSUME_DEADLINE_S + 10)
    tp0 = TopicPartition(topic, 0)
    await astep("committed", consumer.committed(tp0))
    await astep("offsets_for_times", consumer.offsets_for_times({tp0: 0}))
    await astep("beginning_offsets", consumer.beginning_offsets([tp0]))
    await astep("end_offsets", consumer.end_offsets([tp0]))
    await astep("consumer_stop", consumer.stop())

    await astep("list_groups", admin.list_consumer_groups())
    await astep("describe_groups", admin.describe_consumer_groups([group]))
    await astep("list_group_offsets", admin.list_consumer_group_offsets(group, partitions=[tp0]))
    # Tansu drops the connection on DeleteRecords; the request is on the wire before that.
    await astep("delete_records", admin.delete_records({tp0: RecordsToDelete(1)}, timeout_ms=3000), 8)
    await astep("delete_topics", admin.delete_topics([topic]))
    # Tansu's OffsetFetch v3 all-topics reply is malformed, so this goes last.
    await astep("list_group_offsets_all", admin.list_consumer_group_offsets(group), 8)
    await admin.close()


# ---------------------------------------------------------------------------------------------------


def kafka_python_scenario(bs: str) -> None:
    import kafka
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic, OffsetSpec
    from kafka.codec import has_lz4, has_snappy, has_zstd
    from kafka.structs import OffsetAndMetadata

    print("VERSION kafka-python", kafka.__version__, flush=True)
    topic, group = "vec-kafka-python", "vec-kafka-python-grp"
    admin = KafkaAdminClient(bootstrap_servers=bs, client_id="vec-admin", request_timeout_ms=8000)
    step("create_topics", lambda: admin.create_topics([NewTopic(topic, TOPIC_PARTITIONS, 1)]))
    step("create_partitions", lambda: admin.create_partitions({topic: NewPartitions(TOPIC_PARTITIONS + 1)}))
    resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    step("describe_configs", lambda: admin.describe_configs([resource]))
    step("describe_configs_synonyms", lambda: admin.describe_configs([resource], include_synonyms=True))
    step(
        "incremental_alter_configs",
        lambda: admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "600000"})],
            incremental=True,
            raise_on_unknown=False,
        ),
    )
    step(
        "alter_configs",
        lambda: admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "600000"})],
            incremental=False,
            raise_on_unknown=False,
        ),
    )
    step("describe_cluster", admin.describe_cluster)
    step("list_topics", admin.list_topics)
    step("describe_topics", lambda: admin.describe_topics([topic]))
    step("describe_topic_partitions", lambda: admin.describe_topic_partitions([topic]))

    def produce(name: str, n: int = 5, **conf: Any) -> None:
        producer = KafkaProducer(
            bootstrap_servers=bs, client_id=f"vec-{name}", request_timeout_ms=10000, **conf
        )
        for key, value in keyed(n):
            step(name, lambda k=key, v=value: producer.send(topic, v, key=k, headers=HEADERS).get(timeout=10))
        producer.close(timeout=5)

    produce("produce", enable_idempotence=False)
    available = {"gzip": True, "snappy": has_snappy(), "lz4": has_lz4(), "zstd": has_zstd()}
    for codec in CODECS:
        if not available[codec]:
            report("SKIP", f"produce_{codec}", "codec library not importable")
            continue
        producer = KafkaProducer(
            bootstrap_servers=bs,
            client_id=f"vec-{codec}",
            compression_type=codec,
            linger_ms=20,
            enable_idempotence=False,
        )
        futures = [producer.send(topic, PAYLOAD, key=b"c", partition=0) for _ in range(5)]
        step(f"produce_{codec}", lambda fs=futures: [f.get(timeout=10) for f in fs])
        producer.close(timeout=5)
    produce("produce_idempotent", enable_idempotence=True)

    txn = KafkaProducer(bootstrap_servers=bs, client_id="vec-txn", transactional_id="vec-kafka-python-tx")
    step("txn_init", txn.init_transactions)
    step("txn_begin", txn.begin_transaction)
    step("txn_send", lambda: txn.send(topic, b"txn", key=b"t", partition=1).get(timeout=10))
    step(
        "txn_send_offsets",
        lambda: txn.send_offsets_to_transaction(
            {TopicPartition(topic, 0): OffsetAndMetadata(1, None, -1)}, group + "-tx"
        ),
    )
    step("txn_commit", txn.commit_transaction)
    step("txn_close", lambda: txn.close(timeout=5))

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bs,
        client_id="vec-consumer",
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
        max_poll_interval_ms=GROUP_TIMEOUT_MS,
        session_timeout_ms=GROUP_TIMEOUT_MS,
        heartbeat_interval_ms=1000,
        request_timeout_ms=15000,
    )

    def consume() -> int:
        got, deadline = 0, time.monotonic() + CONSUME_DEADLINE_S
        while got < 10 and time.monotonic() < deadline:
            got += sum(len(msgs) for msgs in consumer.poll(timeout_ms=1000).values())
        consumer.commit()
        return got

    step("consume_commit", consume)
    tp0 = TopicPartition(topic, 0)
    step("committed", lambda: consumer.committed(tp0))
    step("offsets_for_times", lambda: consumer.offsets_for_times({tp0: 0}))
    step("beginning_offsets", lambda: consumer.beginning_offsets([tp0]))
    step("end_offsets", lambda: consumer.end_offsets([tp0]))
    step("consumer_close", consumer.close)

    step("list_groups", admin.list_groups)
    step("describe_groups", lambda: admin.describe_groups([group]))
    step("list_group_offsets", lambda: admin.list_group_offsets({group: [tp0]}))
    step(
        "list_partition_offsets",
        lambda: admin.list_partition_offsets(
            {tp0: OffsetSpec.EARLIEST, TopicPartition(topic, 1): OffsetSpec.LATEST}
        ),
    )
    step(
        "alter_group_offsets", lambda: admin.alter_group_offsets(group, {tp0: OffsetAndMetadata(2, None, -1)})
    )
    step("delete_records", lambda: admin.delete_records({tp0: 1}, timeout_ms=3000))
    step("delete_groups", lambda: admin.delete_groups([group + "-tx"]))
    step("delete_topics", lambda: admin.delete_topics([topic]))
    step("list_group_offsets_all", lambda: admin.list_group_offsets({group: None}))
    admin.close()


# ---------------------------------------------------------------------------------------------------


def confluent_kafka_scenario(bs: str) -> None:
    import confluent_kafka
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourceType,
    )

    print(
        "VERSION confluent-kafka",
        confluent_kafka.__version__,
        "librdkafka",
        confluent_kafka.libversion()[0],
        flush=True,
    )
    topic, group = "vec-confluent-kafka", "vec-confluent-kafka-grp"
    admin = AdminClient({"bootstrap.servers": bs, "client.id": "vec-admin"})

    def wait(futures: dict[Any, Any] | Any) -> Any:
        if isinstance(futures, dict):
            return {k: f.result(timeout=15) for k, f in futures.items()}
        return futures.result(timeout=15)

    step("create_topics", lambda: wait(admin.create_topics([NewTopic(topic, TOPIC_PARTITIONS, 1)])))
    time.sleep(1)
    step(
        "create_partitions",
        lambda: wait(admin.create_partitions([NewPartitions(topic, TOPIC_PARTITIONS + 1)])),
    )
    step(
        "describe_configs", lambda: wait(admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]))
    )
    step(
        "alter_configs",
        lambda: wait(
            admin.alter_configs(
                [ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.ms": "600000"})]
            )
        ),
    )
    step(
        "incremental_alter_configs",
        lambda: wait(
            admin.incremental_alter_configs(
                [
                    ConfigResource(
                        ResourceType.TOPIC,
                        topic,
                        incremental_configs=[
                            ConfigEntry("retention.ms", "600000", incremental_operation=AlterConfigOpType.SET)
                        ],
                    )
                ]
            )
        ),
    )
    step("describe_cluster", lambda: wait(admin.describe_cluster()))
    step("list_topics", lambda: admin.list_topics(timeout=10))

    def produce(
        name: str, conf: dict[str, Any], n: int = 5, value: bytes | None = None, **kw: Any
    ) -> list[Any]:
        producer = confluent_kafka.Producer({"bootstrap.servers": bs, "client.id": f"vec-{name}", **conf})
        errors: list[Any] = []
        for key, v in keyed(n):
            producer.produce(
                topic,
                value=value or v,
                key=key,
                headers=HEADERS,
                on_delivery=lambda err, _msg: errors.append(err),
                **kw,
            )
        left = producer.flush(15)
        if left or any(errors):
            raise RuntimeError(f"{left} undelivered, errors {[e for e in errors if e]}")
        return errors

    step("produce", lambda: produce("produce", {"enable.idempotence": False}))
    for codec in CODECS:
        step(
            f"produce_{codec}",
            lambda c=codec: produce(
                c,
                {"compression.type": c, "linger.ms": 20, "enable.idempotence": False},
                value=PAYLOAD,
                partition=0,
            ),
        )
    step("produce_idempotent", lambda: produce("idempotent", {"enable.idempotence": True}))

    def transaction() -> None:
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bs, "client.id": "vec-txn", "transactional.id": "vec-confluent-kafka-tx"}
        )
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce(topic, value=b"txn", key=b"t", partition=1)
        meta = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": group + "-tx"})
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, 1)], meta.consumer_group_metadata(), 15
        )
        producer.commit_transaction(15)
        meta.close()

    step("txn", transaction)

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bs,
            "client.id": "vec-consumer",
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "session.timeout.ms": GROUP_TIMEOUT_MS,
        }
    )
    consumer.subscribe([topic])

    def consume() -> int:
        got, deadline = 0, time.monotonic() + CONSUME_DEADLINE_S
        while got < 10 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            got += msg is not None and not msg.error()
        consumer.commit(asynchronous=False)
        return got

    step("consume_commit", consume)
    tp0 = TopicPartition(topic, 0)
    step("committed", lambda: consumer.committed([tp0], 10))
    step("offsets_for_times", lambda: consumer.offsets_for_times([TopicPartition(topic, 0, 0)], 10))
    step("watermarks", lambda: consumer.get_watermark_offsets(tp0, 10))
    step("consumer_close", consumer.close)

    step("list_groups", lambda: wait(admin.list_consumer_groups()))
    step("describe_groups", lambda: wait(admin.describe_consumer_groups([group])))
    step(
        "list_group_offsets",
        lambda: wait(admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [tp0])])),
    )
    step(
        "alter_group_offsets",
        lambda: wait(
            admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 2)])]
            )
        ),
    )
    step(
        "list_offsets",
        lambda: wait(
            admin.list_offsets(
                {tp0: OffsetSpec.earliest(), TopicPartition(topic, 1): OffsetSpec.for_timestamp(0)}
            )
        ),
    )
    # After the DeleteRecords connection drop librdkafka does not get this one out, so it goes first.
    step(
        "list_group_offsets_all",
        lambda: wait(
            admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=5)
        ),
    )
    step(
        "delete_records", lambda: wait(admin.delete_records([TopicPartition(topic, 0, 1)], request_timeout=5))
    )
    step("delete_groups", lambda: wait(admin.delete_consumer_groups([group + "-tx"])))
    step("delete_topics", lambda: wait(admin.delete_topics([topic])))


def main() -> None:
    client, bs = sys.argv[1], sys.argv[2]
    if client == "aiokafka":
        asyncio.run(aiokafka_scenario(bs))
    elif client == "kafka-python":
        kafka_python_scenario(bs)
    elif client == "confluent-kafka":
        confluent_kafka_scenario(bs)
    else:
        sys.exit(f"unknown client {client!r}")


if __name__ == "__main__":
    main()
