"""ConfigChangeListener: applies the config changes announced in ZooKeeper to this broker's logs.

Every broker watches ``/config/changes`` (Kafka's ZkNodeChangeNotificationListener): a sequential
``config_change_<n>`` names an entity (``topics/<t>`` or ``brokers/<id>`` / ``brokers/<default>``)
whose overrides under ``/config`` changed; the broker reads them again and applies them to its logs at
once (LogManager.update_topic_config); a dynamic broker config change also goes to the broker's
reconfigurables (``DynamicBrokerConfig.reconfigure``: listeners, connection limits, thread pools, the
cleaner), and each setting changed is logged saying whether it applied now or at the next restart.
A ``users/<user>`` change reloads that user's SCRAM credentials into the broker's CredentialCache
(Kafka's UserConfigHandler; server_common/scram.py).
A ``clients/<c>``, ``users/<u>`` or ``users/<u>/clients/<c>`` change reloads that entity's client quotas
into the broker's ClientQuotaCache (Kafka's ClientIdConfigHandler / UserConfigHandler).
Notifications older than 15 minutes are deleted, as Kafka does (zk/change_notifications.py follows
them). It also watches ``/config/topics``: a new topic's configs are written before its assignment,
so they reach the log manager before the controller asks this broker to create the topic's logs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from broker.admin_zk import BROKER_ENTITY, DEFAULT_ENTITY, TOPIC_ENTITY, AdminZkClient
from broker.client_quota_cache import ClientQuotaCache, is_quota_entity_type
from broker.dynamic_config import DynamicBrokerConfig
from server_common.scram import CredentialCache
from storage.config import LogConfig
from storage.errors import InvalidConfigError
from storage.log_manager import LogManager
from zk import znodes
from zk.change_notifications import ChangeNotifications, WatchTasks
from zk.client_quotas import ClientQuotaConfigs
from zk.user_configs import USER_ENTITY, UserConfigs, desanitize

log = logging.getLogger(__name__)


class ConfigChangeListener:
    def __init__(
        self, broker_id: int, admin_zk: AdminZkClient, dynamic: DynamicBrokerConfig, log_manager: LogManager
    ) -> None:
        self.broker_id = broker_id
        self.admin_zk = admin_zk
        self.dynamic = dynamic
        self.log_manager = log_manager
        self.topic_overrides: dict[str, dict[str, str]] = {}
        self._lock = asyncio.Lock()  # one change at a time, in sequence order
        self._changes = ChangeNotifications(
            admin_zk.zk, znodes.CONFIG_CHANGES, znodes.CONFIG_CHANGE_PREFIX, self._on_change, lock=self._lock
        )
        self._tasks = WatchTasks("applying a config change", log)
        # SCRAM credentials (users/<user> entity configs; Kafka's UserConfigHandler updating the
        # CredentialProvider), set by the server before start(): loaded there, then kept current.
        self.credentials: CredentialCache | None = None
        # Told (topic, overrides) whenever a topic's configs are applied ({} once it is deleted): the
        # replication throttles' throttled replicas (broker.quota_manager).
        self.topic_listeners: list[Callable[[str, Mapping[str, str]], None]] = []
        # Client quotas (clients/<c>, users/<u>, users/<u>/clients/<c> entity configs; Kafka's
        # ClientIdConfigHandler and UserConfigHandler), set by the server before start(), likewise.
        self.quotas: ClientQuotaCache | None = None

    async def start(self) -> None:
        """Loads every override, applies them, then follows the changes."""
        zk = self.admin_zk.zk
        # What is announced now is in the state read below; later changes are the watch's.
        await self._changes.note_existing()
        await self._load_broker_overrides()
        if self.credentials is not None:
            self.credentials.load(await UserConfigs(zk).all_user_configs())
        if self.quotas is not None:
            await self.quotas.load(ClientQuotaConfigs(zk))
        for topic in await self.admin_zk.entity_names(TOPIC_ENTITY):
            self.topic_overrides[topic] = await self.admin_zk.entity_config(TOPIC_ENTITY, topic)
        self.apply_broker_overrides()
        zk.watch_children(znodes.CONFIG_TOPICS, self._on_topic_configs)
        self._changes.follow(self._tasks)

    async def shutdown(self) -> None:
        await self._tasks.shutdown()

    # -- applying -------------------------------------------------------------------------------

    def apply_topic(
        self, topic: str, overrides: Mapping[str, str], defaults: LogConfig | None = None
    ) -> None:
        """Makes ``overrides`` the topic's config on this broker (its logs change at once)."""
        self.topic_overrides[topic] = dict(overrides)
        for listener in self.topic_listeners:
            listener(topic, overrides)
        try:
            config = LogConfig.from_props(overrides, defaults or self.dynamic.log_defaults())
        except InvalidConfigError as e:
            log.warning("ignoring the invalid configs of topic %s in ZooKeeper: %s", topic, e)
            return
        self.log_manager.update_topic_config(topic, config)

    def apply_broker_overrides(self) -> None:
        """New log defaults from the dynamic broker configs, for every topic without its own value."""
        try:
            defaults = self.dynamic.log_defaults()
        except InvalidConfigError as e:
            log.warning("ignoring invalid dynamic broker configs in ZooKeeper: %s", e)
            return
        self.log_manager.default_config = defaults
        topics = set(self.topic_overrides) | {lg.topic for lg in self.log_manager.all_logs()}
        for topic in sorted(topics):
            self.apply_topic(topic, self.topic_overrides.get(topic, {}), defaults)

    async def _load_broker_overrides(self) -> None:
        self.dynamic.cluster_default = await self.admin_zk.entity_config(BROKER_ENTITY, DEFAULT_ENTITY)
        self.dynamic.per_broker = await self.admin_zk.entity_config(BROKER_ENTITY, str(self.broker_id))

    # -- watches --------------------------------------------------------------------------------

    def _on_topic_configs(self, children: list[str]) -> None:
        new = [t for t in children if t not in self.topic_overrides]
        for topic in set(self.topic_overrides) - set(children):
            del self.topic_overrides[topic]  # the topic was deleted
            for listener in self.topic_listeners:
                listener(topic, {})
        if new:
            self._tasks.spawn(self._load_topics(new))

    async def _load_topics(self, topics: list[str]) -> None:
        async with self._lock:
            for topic in topics:
                self.apply_topic(topic, await self.admin_zk.entity_config(TOPIC_ENTITY, topic))

    async def _on_change(self, path: str, data: bytes) -> None:
        await self._apply_change(*znodes.decode_config_change(data))

    async def _apply_change(self, entity_type: str, name: str) -> None:
        if entity_type == TOPIC_ENTITY:
            log.info("config change for topic %s", name)
            self.apply_topic(name, await self.admin_zk.entity_config(TOPIC_ENTITY, name))
        elif entity_type == BROKER_ENTITY and name in (DEFAULT_ENTITY, str(self.broker_id)):
            log.info("dynamic broker config change (%s)", name)
            before = (dict(self.dynamic.cluster_default), dict(self.dynamic.per_broker))
            await self._load_broker_overrides()
            self.dynamic.log_changes(
                before[0], self.dynamic.cluster_default, f"/config/brokers/{DEFAULT_ENTITY}"
            )
            self.dynamic.log_changes(before[1], self.dynamic.per_broker, f"/config/brokers/{self.broker_id}")
            self.apply_broker_overrides()
            await self.dynamic.reconfigure()  # listeners, connection limits, thread pools, cleaner
        elif entity_type == USER_ENTITY and self.credentials is not None:
            # "<user>" or "<user>/clients/<client-id>" (quotas: below); "<default>" has no credentials.
            if "/" not in name and name != DEFAULT_ENTITY:
                user = desanitize(name)
                log.info("SCRAM credential change for user %s", user)
                self.credentials.update_user(user, await UserConfigs(self.admin_zk.zk).user_config(user))
        if self.quotas is not None and is_quota_entity_type(entity_type):
            await self.quotas.reload(ClientQuotaConfigs(self.admin_zk.zk), entity_type, name)
