"""KafkaServer: starts the broker's parts in Kafka's order and stops them cleanly on SIGTERM/SIGINT.

Startup: ZooKeeper session and layout, the cluster id (checked against meta.properties), the logs
(recovered off the event loop), the replica manager and request handlers, the listeners bound, the
broker registered in /brokers/ids (which tells the controller it is alive), then requests are served
and the periodic log tasks run. After a ZooKeeper session expires the broker registers again under
the new session (and so with a new broker epoch).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable, Coroutine
from typing import Any

from kazoo.exceptions import NoNodeError

from broker.acl_apis import AclApis
from broker.admin_apis import AdminApis
from broker.alter_partition_manager import AlterPartitionManager
from broker.authorization import ALLOW_ALL, Authorization
from broker.broker_metrics import register_broker_metrics
from broker.client_quota_apis import ClientQuotaApis
from broker.client_quota_cache import ClientQuotaCache
from broker.config import KafkaConfig
from broker.controller_channel import (
    ControllerChannel,
    NoActiveControllerError,
    ZooKeeperUnreachableError,
)
from broker.controller_fence import ControllerFence
from broker.dynamic_config import with_dynamic_overrides
from broker.fetch_apis import FetchApis
from broker.find_coordinator import (
    GROUP_KEY_TYPE,
    TRANSACTION_KEY_TYPE,
    FindCoordinator,
    offsets_topic,
    transaction_topic,
)
from broker.group_apis import CoordinatorTopicReplicas, GroupApis
from broker.kafka_apis import KafkaApis
from broker.log_dir_failure import LogDirFailureChannel, LogDirFailureHandler, usable_log_dirs
from broker.log_dirs import LogDirsApis
from broker.meta_properties import ensure_meta_properties, stored_cluster_id
from broker.metadata_cache import BrokerEndpoint, BrokerInfo, MetadataCache
from broker.producer_id_manager import ProducerIdManager
from broker.quota_manager import QuotaManagers
from broker.replica_fetcher import FetchSettings, ReplicaFetcherManager
from broker.replica_manager import ReplicaManager
from broker.replica_selector import replica_selector_from_config
from broker.scram_apis import ScramApis
from broker.txn_apis import TxnApis
from broker.txn_marker_transport import BrokerTxnMarkerTransport, inter_broker_listener
from broker.write_txn_markers import TxnPartitionApis
from coordinator.transaction_coordinator import TransactionConfig, TransactionCoordinator
from network.client_security import ClientSecurity
from network.sasl_server import sasl_handlers
from network.socket_server import SocketServer, run_until_signalled
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import ControlledShutdownRequest
from protocol.topic import TRANSACTION_STATE_TOPIC
from server_common.acl_authorizer import AclAuthorizer, authorizer_from_config
from server_common.metrics import Metrics, MetricsHttpServer, parse_metrics_listener
from server_common.scram import CredentialCache
from server_common.tasks import cancel_and_wait
from storage.config import LogConfig
from storage.log_manager import LogManager
from zk import znodes
from zk.acls import AclChangeListener, ZkAclStore
from zk.client import ZkClient
from zk.client_quotas import ClientQuotaConfigs
from zk.kafka_zk_client import KafkaZkClient
from zk.user_configs import UserConfigs

log = logging.getLogger(__name__)


def transaction_config(config: KafkaConfig) -> TransactionConfig:
    """The transaction coordinator's settings, from the broker's (Kafka's names)."""
    return TransactionConfig(
        num_partitions=config["transaction.state.log.num.partitions"],
        transactional_id_expiration_ms=config["transactional.id.expiration.ms"],
        transaction_max_timeout_ms=config["transaction.max.timeout.ms"],
        abort_timed_out_transaction_cleanup_interval_ms=config[
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"
        ],
        remove_expired_transactional_id_cleanup_interval_ms=config[
            "transaction.remove.expired.transaction.cleanup.interval.ms"
        ],
        load_buffer_size=config["transaction.state.log.load.buffer.size"],
        required_acks=-1,
        request_timeout_ms=config["request.timeout.ms"],
    )


class KafkaServer:
    """One broker process. Its parts are built in ``startup``, each given what it needs, in dependency
    order; a part is None until built, as a start that fails midway still shuts down what it built."""

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self._session_ms: int = config["zookeeper.session.timeout.ms"]
        # Kafka's bound on waiting for ZooKeeper's connection (a ZooKeeper call waits at most this long).
        self._zk_timeout = (config["zookeeper.connection.timeout.ms"] or self._session_ms) / 1000
        self.zk: ZkClient | None = None
        self.kafka_zk: KafkaZkClient | None = None
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.controller_channel: ControllerChannel | None = None
        self.alter_partition: AlterPartitionManager | None = None
        self.admin: AdminApis | None = None
        self.groups: GroupApis | None = None
        self.txn_markers: BrokerTxnMarkerTransport | None = None
        self.transactions: TransactionCoordinator | None = None
        self.find_coordinator: FindCoordinator | None = None
        self.txn_partitions: TxnPartitionApis | None = None
        self.socket_server: SocketServer | None = None
        self.inter_broker_security: ClientSecurity | None = None  # ClientSecurity.for_inter_broker
        # SCRAM credentials from /config/users, loaded before the listeners serve and kept current by
        # the config change listener; the SASL servers look users up in it.
        self.scram_credentials = CredentialCache()
        # Client quotas from /config/clients and /config/users, loaded and kept current likewise.
        self.client_quota_cache = ClientQuotaCache()
        self.authorization = ALLOW_ALL  # the authorizer's, once one is configured
        # authorizer.class.name: Kafka's AclAuthorizer over the ACLs in ZooKeeper, kept current by the
        # listener of /kafka-acl-changes and /kafka-acl-extended-changes.
        self.authorizer: AclAuthorizer | None = None
        self.acl_listener: AclChangeListener | None = None
        # JBOD: DescribeLogDirs/AlterReplicaLogDirs and the moves between dirs; log dir failures.
        self.log_dirs: LogDirsApis | None = None
        self.log_dir_failures: LogDirFailureChannel | None = None
        self.log_dir_failure_handler: LogDirFailureHandler | None = None
        # The registry every part's metrics go to, served at metrics.listener when it is set.
        self.metrics = Metrics()
        self.metrics_server: MetricsHttpServer | None = None
        self.quotas: QuotaManagers | None = None  # client quotas and replication throttles
        self._tasks: list[asyncio.Task] = []
        self._registration: znodes.BrokerRegistration | None = None
        self._shutting_down = False

    @property
    def prefix(self) -> str:
        return f"[KafkaServer id={self.broker_id}]"

    async def startup(self) -> None:
        config, broker_id = self.config, self.broker_id
        if broker_id < 0:
            raise ValueError("broker.id must be set (generated broker ids are not supported)")
        if not config["zookeeper.connect"]:
            raise ValueError("zookeeper.connect must be set")
        replica_selector = replica_selector_from_config(config["replica.selector.class"])  # KIP-392
        await self._start_metrics_server()
        zk = self.zk = ZkClient(config["zookeeper.connect"], self._session_ms)
        await zk.start(timeout=self._zk_timeout)
        kafka_zk = self.kafka_zk = KafkaZkClient(zk)
        await kafka_zk.create_top_level_paths()
        # Kafka's DynamicBrokerConfig.initialize: the dynamic settings in ZooKeeper over server.properties.
        config = self.config = await with_dynamic_overrides(zk, config)
        # How this broker reaches the other brokers' inter-broker listener and the controller (TLS, SASL
        # with sasl.mechanism.inter.broker.protocol): replica fetchers, markers, verification, controller.
        security = self.inter_broker_security = ClientSecurity.for_inter_broker(config)
        await self._start_authorizer(zk)
        dirs = usable_log_dirs(config.log_dirs)  # JBOD: a dir that cannot be used starts offline
        cluster_id = await kafka_zk.get_or_create_cluster_id(stored_cluster_id(dirs))
        ensure_meta_properties(dirs, broker_id, cluster_id)
        self.log_dir_failures = LogDirFailureChannel(asyncio.get_running_loop())
        logs = self.log_manager = await self._recover_logs(zk)

        metadata_cache = MetadataCache(cluster_id)
        replicas = self.replica_manager = ReplicaManager(
            broker_id, logs, metadata_cache, self._replica_fetchers(), config["replica.lag.time.max.ms"]
        )
        replicas.replica_selector = replica_selector
        # The fetchers report high watermarks that moved (consumers of a follower wait for them, KIP-392)
        # and I/O errors appending (the log dir goes offline).
        if replicas.fetchers is not None:
            replicas.fetchers.settings.on_high_watermark = replicas.fetch_purgatory.check
            replicas.fetchers.settings.on_io_error = replicas.report_io_error
        log_dirs = self.log_dirs = LogDirsApis(replicas, logs, authorization=self.authorization)
        self.log_dir_failure_handler = LogDirFailureHandler(
            broker_id, self.log_dir_failures, replicas, logs, zk, self._halt_on_log_dir_failures
        )
        channel = self.controller_channel = ControllerChannel(
            zk,
            broker_id,
            config["controller.socket.timeout.ms"] / 1000,
            self._zk_timeout,
            security=security,
            listener=inter_broker_listener(config),
        )
        self.alter_partition = AlterPartitionManager(
            channel,
            broker_id,
            lambda: replicas.broker_epoch,
            config["replica.fetch.backoff.ms"],
            replicas.on_high_watermark_may_move,
        )
        # Given after construction: the AlterPartitionManager calls back into the replica manager, so it
        # exists only after it, and ReplicaManager's constructor takes neither of the two.
        replicas.alter_partition = self.alter_partition
        replicas.controller_fence = ControllerFence(kafka_zk, broker_id)
        replicas.controller_fence.start()
        admin = self.admin = AdminApis(
            config,
            kafka_zk,
            metadata_cache,
            replicas,
            logs,
            authorization=self.authorization,
            security=security,
        )
        admin.listener.credentials = self.scram_credentials  # loaded by admin.start(), below
        admin.listener.quotas = self.client_quota_cache  # likewise
        # Before registering: the controller's first LeaderAndIsr may already make this broker lead
        # __consumer_offsets partitions, whose groups the coordinator then loads.
        groups = self.groups = GroupApis(
            config, metadata_cache, replicas, zk, authorization=self.authorization
        )
        # Likewise for __transaction_state and the transaction coordinator.
        txn_config = transaction_config(config)
        markers = self.txn_markers = BrokerTxnMarkerTransport(
            broker_id,
            metadata_cache,
            inter_broker_listener(config),
            txn_config.request_timeout_ms,
            security=security,
        )
        producer_ids = ProducerIdManager(broker_id, zk)
        transactions = self.transactions = TransactionCoordinator(
            broker_id,
            txn_config,
            CoordinatorTopicReplicas(replicas, TRANSACTION_STATE_TOPIC),
            producer_ids,
            markers,
        )
        txn_apis = TxnApis(
            transactions,
            producer_ids,
            lambda topic, partition: metadata_cache.partition(topic, partition) is not None,
            config["offsets.topic.num.partitions"],
            authorization=self.authorization,
        )
        replicas.role_listeners.append(txn_apis.on_role_change)
        finder = self.find_coordinator = FindCoordinator(
            metadata_cache,
            admin.topics.create_internal_topic,
            {
                GROUP_KEY_TYPE: offsets_topic(config, groups.coordinator.partition_for),
                TRANSACTION_KEY_TYPE: transaction_topic(config, transactions.partition_for),
            },
            authorization=self.authorization,
        )
        # WriteTxnMarkers, DescribeProducers, and the produce path's transaction verification (KIP-890).
        txn_partitions = self.txn_partitions = TxnPartitionApis(
            config, metadata_cache, replicas, groups.on_txn_marker_written, authorization=self.authorization
        )
        fetch_apis = FetchApis(
            metadata_cache,
            replicas,
            config["max.incremental.fetch.session.cache.slots"],
            config["fetch.max.bytes"],
            authorization=self.authorization,
        )
        apis = KafkaApis(
            broker_id,
            metadata_cache,
            replicas,
            extra_handlers={
                **admin.handlers(),
                **groups.handlers(),
                **finder.handlers(),
                **txn_apis.handlers(),
                **txn_partitions.handlers(),
                **log_dirs.handlers(),
                **ScramApis(UserConfigs(zk), self.authorization).handlers(),
                **ClientQuotaApis(
                    ClientQuotaConfigs(zk), self.client_quota_cache, self.authorization
                ).handlers(),
                **AclApis(self.authorizer, self.authorization).handlers(),
                **sasl_handlers(),  # SaslHandshake, SaslAuthenticate (network.sasl_server)
            },
            auto_create_topic=admin.auto_create_topic if config["auto.create.topics.enable"] else None,
            features=admin.features,
            fetch_apis=fetch_apis,
            authorization=self.authorization,
        )
        # Quotas (broker/quota_manager.py): client quotas on every response (KafkaApis.handle, Fetch's
        # in FetchApis), replication throttles on the leader's reads and the follower's fetches, fed by
        # the per-broker dynamic configs and the topics' throttled-replica configs.
        quotas = self.quotas = QuotaManagers.from_config(self.client_quota_cache, config)
        apis.quotas = fetch_apis.quotas = quotas
        replicas.leader_quota = quotas.leader
        if replicas.fetchers is not None:
            replicas.fetchers.settings.quota = quotas.follower
        admin.listener.topic_listeners.append(quotas.apply_topic_config)
        admin.dynamic.reconfigurables.append(
            lambda _old, _new: quotas.apply_broker_configs(admin.dynamic.per_broker)
        )
        quotas.register_metrics(self.metrics)
        sockets = self.socket_server = SocketServer(
            config,
            apis,
            apis.supported,
            max_idle_ms=config["connections.max.idle.ms"],
            per_ip_overrides=config.max_connections_per_ip_overrides,
            scram_credentials=self.scram_credentials,
            metrics=self.metrics,
        )
        self._registration = self._advertise(metadata_cache, sockets.bound_ports)
        admin.dynamic.reconfigurables.append(self._reconfigure)  # dynamic broker configs applied live

        await admin.start()
        quotas.apply_broker_configs(admin.dynamic.per_broker)  # as loaded by admin.start()
        groups.startup()
        transactions.startup()
        await self._register()
        zk.add_session_listener(self._on_session_state)
        self.alter_partition.start()
        sockets.start_processing()
        self._start_periodic_tasks(logs, replicas)
        register_broker_metrics(self.metrics, self)
        log.info("%s started (cluster %s); listening on %s", self.prefix, cluster_id, sockets.describe())

    async def _start_metrics_server(self) -> None:
        """The Prometheus endpoint of metrics.listener, first: a broker waiting for ZooKeeper or
        recovering its logs is already visible to its scraper."""
        address = parse_metrics_listener(self.config["metrics.listener"])
        if address is not None:
            self.metrics_server = MetricsHttpServer(self.metrics, *address)
            await self.metrics_server.start()

    async def _start_authorizer(self, zk: ZkClient) -> None:
        """The authorizer authorizer.class.name selects (none: every request allowed), its ACLs loaded
        from ZooKeeper before any request is served (Kafka's AclAuthorizer.configure)."""
        store = ZkAclStore(zk)
        authorizer = self.authorizer = authorizer_from_config(self.config, store)
        if authorizer is None:
            return
        await store.create_paths()
        self.acl_listener = AclChangeListener(zk, authorizer)
        await self.acl_listener.start()
        self.authorization = Authorization(authorizer)

    async def _recover_logs(self, zk: ZkClient) -> LogManager:
        """The log manager over log.dirs, its logs recovered off the event loop, each topic's with the
        overrides of /config/topics (read before the controller can ask for a log)."""
        config = self.config
        defaults = LogConfig.from_broker_props(config.originals)
        topic_configs: dict[str, LogConfig] = {}
        for topic in await zk.get_children(znodes.CONFIG_TOPICS) or []:
            found = await zk.get(znodes.topic_config_path(topic))
            if found is not None:
                topic_configs[topic] = LogConfig.from_props(znodes.decode_config(found[0]), defaults)
        return await asyncio.get_running_loop().run_in_executor(
            None,
            lambda: LogManager(
                config.log_dirs,
                defaults,
                topic_configs=topic_configs,
                recovery_threads_per_data_dir=config["num.recovery.threads.per.data.dir"],
                producer_id_expiration_ms=config["producer.id.expiration.ms"],
                transaction_verification_enabled=config["transaction.partition.verification.enable"],
                cleaner_dedupe_buffer_size=config["log.cleaner.dedupe.buffer.size"],
                cleaner_backoff_ms=config["log.cleaner.backoff.ms"],
                on_dir_failure=self.log_dir_failures.maybe_add_offline_log_dir
                if self.log_dir_failures is not None
                else None,
            ),
        )

    def _halt_on_log_dir_failures(self) -> None:
        """Every log dir failed: the broker stops (Kafka halts), through the SIGTERM path."""
        log.error("%s all log dirs failed: shutting down", self.prefix)
        os.kill(os.getpid(), signal.SIGTERM)

    def _replica_fetchers(self) -> ReplicaFetcherManager:
        config = self.config
        settings = FetchSettings(
            broker_id=self.broker_id,
            max_wait_ms=config["replica.fetch.wait.max.ms"],
            min_bytes=config["replica.fetch.min.bytes"],
            response_max_bytes=config["replica.fetch.response.max.bytes"],
            partition_max_bytes=config["replica.fetch.max.bytes"],
            backoff_ms=config["replica.fetch.backoff.ms"],
            socket_timeout_ms=config["replica.socket.timeout.ms"],
            security=self.inter_broker_security,
        )
        return ReplicaFetcherManager(settings, config["num.replica.fetchers"])

    async def _reconfigure(self, old: KafkaConfig, new: KafkaConfig) -> None:
        """Dynamic broker configs applied live (broker/dynamic_config.py): connection limits and
        num.io.threads, the cleaner, num.replica.fetchers, listeners added or removed, and the advertised
        endpoints rewritten in /brokers/ids/<id> (Kafka's DynamicListenerConfig.reconfigure and
        updateBrokerInfo)."""
        sockets, logs, replicas = self.socket_server, self.log_manager, self.replica_manager
        assert sockets is not None and logs is not None and replicas is not None and self.zk is not None
        self.config = new
        sockets.reconfigure(
            new["max.connections"],
            new["max.connections.per.ip"],
            new.max_connections_per_ip_overrides,
            new["num.io.threads"],
        )
        logs.cleaner.reconfigure(
            new["log.cleaner.threads"], new["log.cleaner.dedupe.buffer.size"], new["log.cleaner.backoff.ms"]
        )
        if replicas.fetchers is not None:
            replicas.fetchers.resize(new["num.replica.fetchers"])
        old_names = {e.listener for e in old.listeners}
        new_names = {e.listener for e in new.listeners}
        if old_names - new_names:
            await sockets.remove_listeners(old_names - new_names)
        sockets.add_listeners([e for e in new.listeners if e.listener not in old_names], new)
        if old_names == new_names and old.advertised_listeners == new.advertised_listeners:
            return
        self._registration = self._advertise(replicas.metadata_cache, sockets.bound_ports)
        try:
            await self.zk.set(znodes.broker_path(self.broker_id), self._registration.encode())
        except NoNodeError:
            return  # the session was lost: the registration made again under the new one is the new one
        log.info("%s registration updated: advertised %s", self.prefix, self._registration.endpoints)

    def _advertise(
        self, metadata_cache: MetadataCache, bound_ports: dict[str, int]
    ) -> znodes.BrokerRegistration:
        """What /brokers/ids/<id> will say of this broker: its advertised endpoints (with the ports
        bound) and rack. Until the controller's first UpdateMetadata, the broker knows of itself only."""
        endpoints: dict[str, BrokerEndpoint] = {}
        protocols: dict[str, str] = {}
        advertised_names = {e.listener for e in self.config.advertised_listeners}
        for listener, port in bound_ports.items():
            if listener not in advertised_names:
                continue  # a listener not advertised (advertised.listeners names a subset)
            advertised = self.config.advertised_endpoint(listener, port)
            endpoints[listener] = BrokerEndpoint(advertised.host, advertised.port)
            protocols[listener] = advertised.security_protocol
        rack = self.config["broker.rack"]
        metadata_cache.add_broker(BrokerInfo(self.broker_id, rack, endpoints))
        return znodes.BrokerRegistration(
            self.broker_id, {k: (e.host, e.port) for k, e in endpoints.items()}, protocols, rack
        )

    async def _register(self) -> None:
        assert (
            self.kafka_zk is not None and self._registration is not None and self.replica_manager is not None
        )
        epoch = await self.kafka_zk.register_broker(
            self._registration, wait_for_old=2 * self._session_ms / 1000
        )
        self.replica_manager.broker_epoch = epoch

    def _on_session_state(self, state: str) -> None:
        if state == "CONNECTED" and self._registration is not None and not self._shutting_down:
            # After LOST kazoo opens a new session, in which the ephemeral registration must be made again.
            self._spawn(self._reregister(), "reregister")

    async def _reregister(self) -> None:
        assert self.zk is not None and self._registration is not None
        found = await self.zk.get(znodes.broker_path(self.broker_id))
        if found is not None and found[1].ephemeralOwner == self.zk.session_id:
            return
        log.info("%s ZooKeeper session renewed; registering again", self.prefix)
        await self._register()

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(coro, name=name))

    # -- periodic work ----------------------------------------------------------------------------

    def _start_periodic_tasks(self, logs: LogManager, replicas: ReplicaManager) -> None:
        config = self.config
        flush_interval = config["log.flush.scheduler.interval.ms"]
        schedule: list[tuple[str, float, Callable[[], object]]] = [
            ("log-retention", config["log.retention.check.interval.ms"], logs.cleanup_logs),
            ("delete-pending", 5_000, logs.delete_pending_dirs),
            (
                "recovery-point-checkpoint",
                config["log.flush.offset.checkpoint.interval.ms"],
                logs.checkpoint_recovery_offsets,
            ),
            (
                "log-start-checkpoint",
                config["log.flush.start.offset.checkpoint.interval.ms"],
                logs.checkpoint_log_start_offsets,
            ),
            (
                "high-watermark-checkpoint",
                config["replica.high.watermark.checkpoint.interval.ms"],
                logs.checkpoint_high_watermarks,
            ),
            ("producer-expiration", 600_000, logs.remove_expired_producers),
        ]
        if flush_interval < 2**62:
            schedule.append(("log-flush", flush_interval, logs.flush_dirty_logs))
        for name, interval_ms, work in schedule:
            if interval_ms > 0:
                self._spawn(self._every(interval_ms / 1000, work, name), name)
        # Kafka's isr-expiration: on the event loop, since it touches partitions and proposes changes.
        lag_ms = config["replica.lag.time.max.ms"]
        self._spawn(
            self._every(lag_ms / 2000, replicas.shrink_lagging_isrs, "isr-expiration", on_loop=True),
            "isr-expiration",
        )
        if config["log.cleaner.enable"]:
            logs.start_cleaner(config["log.cleaner.threads"])

    async def _every(
        self, seconds: float, work: Callable[[], object], name: str, on_loop: bool = False
    ) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(seconds)
            try:
                if on_loop:
                    work()
                else:
                    await loop.run_in_executor(None, work)  # file work (fsync, unlink) stays off the loop
            except Exception:
                log.exception("%s periodic task %s failed", self.prefix, name)

    # -- shutdown ---------------------------------------------------------------------------------

    async def _controlled_shutdown(self) -> None:
        """Asks the active controller to move this broker's leaderships elsewhere before it stops
        (Kafka's controlled shutdown): at most controlled.shutdown.max.retries tries, with
        controlled.shutdown.retry.backoff.ms between them, each bounded by the channel's timeouts (the
        ZooKeeper read of /controller, the connection, the request). When ZooKeeper does not answer the
        rest is skipped, as a ZooKeeper timeout ends Kafka's: no controller can be found without it, and
        the controller moves the leaderships anyway once this broker's registration goes."""
        config, channel = self.config, self.controller_channel
        if not config["controlled.shutdown.enable"] or self.replica_manager is None or channel is None:
            return
        tries = config["controlled.shutdown.max.retries"]
        backoff_ms = config["controlled.shutdown.retry.backoff.ms"]
        request = ControlledShutdownRequest(
            broker_id=self.broker_id, broker_epoch=self.replica_manager.broker_epoch
        )
        for attempt in range(1, tries + 1):
            if attempt > 1:
                log.info(
                    "%s controlled shutdown: waiting %d ms before try %d of %d",
                    self.prefix,
                    backoff_ms,
                    attempt,
                    tries,
                )
                await asyncio.sleep(backoff_ms / 1000)
            log.info(
                "%s controlled shutdown: looking up the active controller in ZooKeeper (try %d of %d, "
                "up to %g s)",
                self.prefix,
                attempt,
                tries,
                channel.zk_timeout,
            )
            try:
                controller = await channel.active_controller()
            except NoActiveControllerError:
                log.info("%s no active controller: shutting down without moving leadership", self.prefix)
                return
            except ZooKeeperUnreachableError as e:
                log.info("%s controlled shutdown: ZooKeeper unreachable (%s), skipping", self.prefix, e)
                return
            log.info(
                "%s controlled shutdown: asking controller %d at %s:%d (try %d of %d, up to %g s)",
                self.prefix,
                controller.id,
                controller.host,
                controller.port,
                attempt,
                tries,
                channel.request_timeout,
            )
            try:
                response = await channel.send(ApiKey.CONTROLLED_SHUTDOWN, 3, request, controller)
            except (OSError, TimeoutError) as e:
                log.warning("%s controlled shutdown: try %d of %d failed: %s", self.prefix, attempt, tries, e)
                continue
            if response.error_code == ErrorCode.NONE and not response.remaining_partitions:
                log.info("%s controlled shutdown succeeded", self.prefix)
                return
            log.info(
                "%s controlled shutdown: try %d of %d: error %s, still leading %s",
                self.prefix,
                attempt,
                tries,
                ErrorCode(response.error_code).name,
                [(p.topic_name, p.partition_index) for p in response.remaining_partitions],
            )
        log.warning(
            "%s controlled shutdown did not complete in %d tries; shutting down anyway", self.prefix, tries
        )

    async def shutdown(self) -> None:
        """Controlled shutdown (bounded: see _controlled_shutdown), then the local shutdown, which waits
        on nothing remote: tasks are cancelled, the logs flushed and closed with their checkpoints and
        the clean shutdown marker, and the ZooKeeper session closed (kazoo gives up on a ZooKeeper it
        cannot reach within max(session timeout, 10 s))."""
        log.info("%s shutting down", self.prefix)
        self._shutting_down = True
        try:
            await self._controlled_shutdown()
        except Exception:
            log.exception("%s controlled shutdown failed", self.prefix)
        await cancel_and_wait(self._tasks)
        if self.socket_server is not None:
            await self.socket_server.shutdown()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        if self.replica_manager is not None and self.replica_manager.fetchers is not None:
            await self.replica_manager.fetchers.shutdown()
        if self.log_dirs is not None:
            await self.log_dirs.shutdown()
        if self.log_dir_failure_handler is not None:
            await self.log_dir_failure_handler.shutdown()
        if self.alter_partition is not None:
            await self.alter_partition.shutdown()
        if self.controller_channel is not None:
            await self.controller_channel.close()
        if self.find_coordinator is not None:
            await self.find_coordinator.shutdown()
        if self.txn_partitions is not None:
            await self.txn_partitions.shutdown()
        if self.groups is not None:
            await self.groups.shutdown()
        if self.transactions is not None:
            await self.transactions.shutdown()
        if self.txn_markers is not None:
            await self.txn_markers.shutdown()
        if self.admin is not None:
            await self.admin.shutdown()
        if self.acl_listener is not None:
            await self.acl_listener.shutdown()
        if self.replica_manager is not None:
            self.replica_manager.shutdown()
        if self.log_manager is not None:
            log.info("%s flushing and closing the logs (checkpoints, clean shutdown marker)", self.prefix)
            await asyncio.get_running_loop().run_in_executor(None, self.log_manager.shutdown)
        if self.zk is not None:
            log.info("%s closing the ZooKeeper session", self.prefix)
            await self.zk.close()  # ends the session: the registration disappears at once
        log.info("%s shut down completed", self.prefix)

    async def run(self) -> None:
        """Starts, serves until SIGTERM or SIGINT, then shuts down."""
        await run_until_signalled(self.startup, self.shutdown)
