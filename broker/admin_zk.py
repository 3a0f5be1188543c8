"""AdminZkClient: the ZooKeeper reads and writes behind the admin requests (Kafka's AdminZkClient).

A broker serves CreateTopics, CreatePartitions, DeleteTopics and config changes by writing the znodes
the controller (and every broker) acts on, in Kafka's formats:

- a new topic: ``/config/topics/<t>`` (its config overrides) and ``/brokers/topics/<t>`` (its replica
  assignment with a new topic id), in one ZooKeeper transaction, so that a topic that already exists
  keeps its configs (Kafka writes them one after the other);
- more partitions: ``/brokers/topics/<t>`` rewritten, conditionally on the version read;
- deletion: ``/admin/delete_topics/<t>``;
- a config change: ``/config/<type>/<name>`` (the whole override set), then a sequential
  ``/config/changes/config_change_<n>`` naming the entity, which every broker watches.

A write ZooKeeper cannot store (longer than its jute.maxbuffer) is refused before it is sent, with
POLICY_VIOLATION: Kafka's KRaft controller refuses an operation whose metadata records would not fit
in one batch with that error ("Unable to perform excessively large batch operation."), the nearest
thing Kafka has to a metadata store's size limit.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from protocol.errors import ErrorCode, KafkaError
from server_common.replica_assignment import BrokerMetadata
from zk import znodes
from zk.client import ZkClient, ZkOp, ZkRequestTooLargeError, ZkTransactionError

log = logging.getLogger(__name__)

TOPIC_ENTITY = "topics"
BROKER_ENTITY = "brokers"
DEFAULT_ENTITY = "<default>"  # /config/brokers/<default>: the dynamic defaults of every broker


def entity_config_path(entity_type: str, name: str) -> str:
    return f"{znodes.CONFIG}/{entity_type}/{name}"


def _too_large(what: str, e: ZkRequestTooLargeError) -> KafkaError:
    return KafkaError(
        ErrorCode.POLICY_VIOLATION,
        f"{what} cannot be stored: the ZooKeeper write would be {e.size} bytes, over ZooKeeper's limit "
        f"of {e.limit} bytes (jute.maxbuffer).",
    )


class AdminZkClient:
    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    # -- brokers and topics ---------------------------------------------------------------------

    async def registered_brokers(self) -> list[BrokerMetadata]:
        """The brokers registered in /brokers/ids (the live ones), by id, with their racks."""
        brokers = []
        for child in await self.zk.get_children(znodes.BROKER_IDS) or []:
            found = await self.zk.get(znodes.broker_path(int(child)))
            if found is not None:
                registration = znodes.BrokerRegistration.decode(int(child), found[0])
                brokers.append(BrokerMetadata(registration.id, registration.rack))
        return sorted(brokers, key=lambda b: b.id)

    async def all_topics(self) -> list[str]:
        return await self.zk.get_children(znodes.TOPICS) or []

    async def topic_exists(self, topic: str) -> bool:
        return await self.zk.exists(znodes.topic_path(topic)) is not None

    async def topic_assignment(self, topic: str) -> tuple[znodes.TopicAssignment, int] | None:
        """The topic's assignment and the znode's version, or None if there is no such topic."""
        found = await self.zk.get(znodes.topic_path(topic))
        if found is None:
            return None
        return znodes.TopicAssignment.decode(found[0]), found[1].version

    async def is_queued_for_deletion(self, topic: str) -> bool:
        return await self.zk.exists(znodes.delete_topic_path(topic)) is not None

    async def create_topic(
        self, topic: str, configs: dict[str, str], assignment: dict[int, list[int]]
    ) -> uuid.UUID:
        """Writes the topic's configs and assignment atomically; TOPIC_ALREADY_EXISTS if it exists."""
        new = znodes.TopicAssignment(assignment)
        config_path = znodes.topic_config_path(topic)
        config_op = (
            ZkOp("set", config_path, znodes.encode_config(configs))
            if await self.zk.exists(config_path) is not None
            else ZkOp("create", config_path, znodes.encode_config(configs))
        )
        # The JSON of 10,000 partitions takes milliseconds: off the event loop.
        topic_op = ZkOp("create", znodes.topic_path(topic), await asyncio.to_thread(new.encode))
        try:
            await self.zk.transaction([config_op, topic_op])
        except ZkRequestTooLargeError as e:
            raise _too_large(f"Topic '{topic}' ({len(assignment)} partitions and its configs)", e) from None
        except ZkTransactionError as e:
            if isinstance(e.cause, NodeExistsError) and await self.topic_exists(topic):
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.") from None
            raise KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"Creating topic '{topic}' failed: {e}"
            ) from None
        # The assignment itself only at DEBUG: 10,000 partitions make a quarter-megabyte line.
        log.info(
            "created topic %s (id %s) with %d partitions, replication factor %d and configs %s",
            topic,
            new.topic_id,
            len(assignment),
            len(assignment[0]),
            configs,
        )
        log.debug("topic %s has assignment %s", topic, assignment)
        return new.topic_id

    async def set_topic_assignment(
        self, topic: str, assignment: znodes.TopicAssignment, version: int
    ) -> None:
        try:
            data = await asyncio.to_thread(assignment.encode)
            await self.zk.set(znodes.topic_path(topic), data, version)
        except ZkRequestTooLargeError as e:
            raise _too_large(f"Topic '{topic}' with {len(assignment.partitions)} partitions", e) from None
        except BadVersionError:
            raise KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"The assignment of topic '{topic}' changed while partitions were being added; try again.",
            ) from None
        log.info("topic %s now has %d partitions", topic, len(assignment.partitions))
        log.debug("topic %s now has assignment %s", topic, assignment.partitions)

    async def mark_for_deletion(self, topic: str) -> None:
        """Creates /admin/delete_topics/<t>; a topic already marked stays marked."""
        if not await self.topic_exists(topic):
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic `{topic}` to delete does not exist"
            )
        try:
            await self.zk.create(znodes.delete_topic_path(topic))
        except NodeExistsError:
            log.debug("topic %s is already marked for deletion", topic)
        else:
            log.info("marked topic %s for deletion", topic)

    # -- configs --------------------------------------------------------------------------------

    async def entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        found = await self.zk.get(entity_config_path(entity_type, name))
        return znodes.decode_config(found[0] if found else None)

    async def entity_names(self, entity_type: str) -> list[str]:
        return await self.zk.get_children(f"{znodes.CONFIG}/{entity_type}") or []

    async def change_entity_config(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        """Replaces the entity's overrides and announces the change under /config/changes."""
        path = entity_config_path(entity_type, name)
        data = znodes.encode_config(configs)
        try:
            try:
                await self.zk.set(path, data)
            except NoNodeError:
                try:
                    await self.zk.create(path, data, makepath=True)
                except NodeExistsError:  # created meanwhile by another broker's change
                    await self.zk.set(path, data)
        except ZkRequestTooLargeError as e:
            raise _too_large(f"The configs of {entity_type}/{name}", e) from None
        await self.zk.create(
            f"{znodes.CONFIG_CHANGES}/{znodes.CONFIG_CHANGE_PREFIX}",
            znodes.encode_config_change(entity_type, name),
            sequence=True,
        )
        log.info("changed the configs of %s/%s to %s", entity_type, name, configs)
