"""Broker configuration: Kafka's ``server.properties`` names, types and defaults, parsed and validated.

``KafkaConfig.load(path, overrides)`` reads a Java-properties file, applies ``key=value`` overrides and
checks every setting against the definitions below (with the machinery of ``server_common.config``); a
Kafka 3.9 setting not defined here is logged once and ignored, a name no Kafka setting has or an invalid
value is an error naming it. Values are read back by their Kafka name:
``config["num.io.threads"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from server_common.acl_authorizer import check_authorizer_class_name
from server_common.config import (
    INT_MAX,
    LONG_MAX,
    SECURITY_PROTOCOLS,
    ConfigDef,
    ConfigError,
    ConfigType,
    ServerConfig,
    at_least,
    one_of,
)
from server_common.metrics import check_metrics_listener
from server_common.security_config import define_security
from storage.config import COMPRESSION_TYPES, CREATE_TIME, LOG_APPEND_TIME, LogConfig

_B, _S, _I, _L, _D, _LIST, _P = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
    ConfigType.PASSWORD,
)
_POSITIVE = at_least(1)
_NON_NEGATIVE = at_least(0)
# The broker settings behind topic configs default to what the topic configs default to, as Kafka's
# KafkaConfig takes LogConfig's defaults.
_LOG_DEFAULTS = LogConfig()

# Kafka's broker settings (ZooKeeper mode, Kafka 3.x names and defaults) that Samsa implements. Any other
# Kafka 3.9 setting is accepted and logged as not implemented; a name Kafka does not have is rejected.
BROKER_CONFIG = (
    ConfigDef()
    # server basics
    .define("broker.id", _I, -1, at_least(-1), "This broker's id; -1 asks for one to be generated.")
    .define("broker.rack", _S, None)
    .define("listeners", _LIST, "PLAINTEXT://:9092")
    .define("advertised.listeners", _LIST, None)
    .define(
        "listener.security.protocol.map",
        _LIST,
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    )
    .define("inter.broker.listener.name", _S, None)
    .define("security.inter.broker.protocol", _S, "PLAINTEXT", one_of(*SECURITY_PROTOCOLS))
    .define("reserved.broker.max.id", _I, 1000, _NON_NEGATIVE)
    .define("broker.id.generation.enable", _B, True)
    # network and request handling
    .define("num.network.threads", _I, 3, _POSITIVE)
    .define("num.io.threads", _I, 8, _POSITIVE)
    .define("background.threads", _I, 10, _POSITIVE)
    .define("queued.max.requests", _I, 500, _POSITIVE)
    # Kafka's default is -1 (unbounded); Samsa bounds it (docs/architecture.md, Configuration).
    .define("queued.max.request.bytes", _L, 104857600)
    .define("socket.send.buffer.bytes", _I, -1)
    .define("socket.receive.buffer.bytes", _I, -1)
    .define("socket.request.max.bytes", _I, 104857600, _POSITIVE)
    .define("socket.listen.backlog.size", _I, 50, _POSITIVE)
    .define("connections.max.idle.ms", _L, 600000)
    .define("max.connections", _I, INT_MAX, _NON_NEGATIVE)
    .define("max.connections.per.ip", _I, INT_MAX, _NON_NEGATIVE)
    .define("max.connections.per.ip.overrides", _S, "")
    .define("request.timeout.ms", _I, 30000, _NON_NEGATIVE)
    # Samsa's own (Kafka exposes JMX instead): the Prometheus endpoint, off when empty (docs/operations.md).
    .define(
        "metrics.listener",
        _S,
        "",
        check_metrics_listener,
        "http://HOST:PORT where GET /metrics answers in Prometheus' text format; empty: no endpoint.",
    )
    # Samsa's own: requests slower than this (ms) go to kafka.request.logger at INFO (network/request_log.py).
    .define("samsa.request.log.slow.ms", _L, 0, at_least(0), "Slow request log threshold in ms; 0: off.")
    # ZooKeeper
    .define("zookeeper.connect", _S, None)
    .define("zookeeper.session.timeout.ms", _I, 18000, _POSITIVE)
    .define("zookeeper.connection.timeout.ms", _I, None)
    .define("zookeeper.max.in.flight.requests", _I, 10, _POSITIVE)
    .define("zookeeper.set.acl", _B, False)
    # logs
    .define("log.dir", _S, "/tmp/kafka-logs")
    .define("log.dirs", _S, None)
    .define("num.partitions", _I, 1, _POSITIVE)
    .define("default.replication.factor", _I, 1, _POSITIVE)
    .define("num.recovery.threads.per.data.dir", _I, 1, _POSITIVE)
    .define("auto.create.topics.enable", _B, True)
    .define("delete.topic.enable", _B, True)
    .define("log.segment.bytes", _I, _LOG_DEFAULTS.segment_bytes, at_least(14))
    .define("log.roll.ms", _L, None)
    .define("log.roll.hours", _I, 168, _POSITIVE)
    .define("log.roll.jitter.ms", _L, None)
    .define("log.roll.jitter.hours", _I, 0, _NON_NEGATIVE)
    .define("log.retention.ms", _L, None)
    .define("log.retention.minutes", _I, None)
    .define("log.retention.hours", _I, 168)
    .define("log.retention.bytes", _L, _LOG_DEFAULTS.retention_bytes)
    .define("log.retention.check.interval.ms", _L, 300000, _POSITIVE)
    .define("log.index.size.max.bytes", _I, _LOG_DEFAULTS.segment_index_bytes, at_least(4))
    .define("log.index.interval.bytes", _I, _LOG_DEFAULTS.index_interval_bytes, _NON_NEGATIVE)
    .define("log.flush.interval.messages", _L, _LOG_DEFAULTS.flush_messages, _POSITIVE)
    .define("log.flush.interval.ms", _L, None)
    .define("log.flush.scheduler.interval.ms", _L, LONG_MAX)
    .define("log.flush.offset.checkpoint.interval.ms", _I, 60000, _NON_NEGATIVE)
    .define("log.flush.start.offset.checkpoint.interval.ms", _I, 60000, _NON_NEGATIVE)
    .define("log.segment.delete.delay.ms", _L, _LOG_DEFAULTS.file_delete_delay_ms, _NON_NEGATIVE)
    .define("log.cleanup.policy", _LIST, _LOG_DEFAULTS.cleanup_policy, one_of("delete", "compact"))
    .define("log.cleaner.enable", _B, True)
    .define("log.cleaner.threads", _I, 1, _NON_NEGATIVE)
    .define("log.cleaner.min.cleanable.ratio", _D, _LOG_DEFAULTS.min_cleanable_dirty_ratio)
    .define("log.cleaner.min.compaction.lag.ms", _L, _LOG_DEFAULTS.min_compaction_lag_ms, _NON_NEGATIVE)
    .define("log.cleaner.max.compaction.lag.ms", _L, _LOG_DEFAULTS.max_compaction_lag_ms, _POSITIVE)
    .define("log.cleaner.delete.retention.ms", _L, _LOG_DEFAULTS.delete_retention_ms, _NON_NEGATIVE)
    .define("log.cleaner.backoff.ms", _L, 15000, _NON_NEGATIVE)
    .define("log.cleaner.dedupe.buffer.size", _L, 134217728)
    .define(
        "log.message.timestamp.type",
        _S,
        _LOG_DEFAULTS.message_timestamp_type,
        one_of(CREATE_TIME, LOG_APPEND_TIME),
    )
    .define("log.message.timestamp.before.max.ms", _L, LONG_MAX, _NON_NEGATIVE)
    .define("log.message.timestamp.after.max.ms", _L, LONG_MAX, _NON_NEGATIVE)
    .define(
        "log.message.timestamp.difference.max.ms",
        _L,
        _LOG_DEFAULTS.message_timestamp_difference_max_ms,
        _NON_NEGATIVE,
    )
    .define("log.message.downconversion.enable", _B, _LOG_DEFAULTS.message_downconversion_enable)
    .define("log.message.format.version", _S, _LOG_DEFAULTS.message_format_version)
    .define("log.preallocate", _B, _LOG_DEFAULTS.preallocate)
    .define("message.max.bytes", _I, _LOG_DEFAULTS.max_message_bytes, _NON_NEGATIVE)
    .define(
        "compression.type",
        _S,
        _LOG_DEFAULTS.compression_type,
        one_of(*COMPRESSION_TYPES),
    )
    # KIP-390: the levels the broker compresses with when a topic's compression.type is not producer.
    .define("compression.gzip.level", _I, -1)
    .define("compression.lz4.level", _I, 9)
    .define("compression.zstd.level", _I, 3)
    # replication
    .define("min.insync.replicas", _I, _LOG_DEFAULTS.min_insync_replicas, _POSITIVE)
    .define("unclean.leader.election.enable", _B, _LOG_DEFAULTS.unclean_leader_election_enable)
    .define("replica.lag.time.max.ms", _L, 30000)
    .define("replica.fetch.max.bytes", _I, 1048576, _NON_NEGATIVE)
    .define("replica.fetch.min.bytes", _I, 1)
    .define("replica.fetch.wait.max.ms", _I, 500)
    .define("replica.fetch.response.max.bytes", _I, 10485760, _NON_NEGATIVE)
    .define("replica.fetch.backoff.ms", _I, 1000, _NON_NEGATIVE)
    .define("replica.socket.timeout.ms", _I, 30000)
    .define("replica.socket.receive.buffer.bytes", _I, 65536)
    .define("replica.high.watermark.checkpoint.interval.ms", _L, 5000)
    .define("num.replica.fetchers", _I, 1, _POSITIVE)
    # KIP-392: which replica a consumer with a client.rack is told to read from (None: the leader).
    .define("replica.selector.class", _S, None)
    .define("auto.leader.rebalance.enable", _B, True)
    .define("leader.imbalance.check.interval.seconds", _L, 300, _POSITIVE)
    .define("leader.imbalance.per.broker.percentage", _I, 10)
    .define("controlled.shutdown.enable", _B, True)
    .define("controlled.shutdown.max.retries", _I, 3)
    .define("controlled.shutdown.retry.backoff.ms", _L, 5000)
    .define("controller.socket.timeout.ms", _I, 30000)
    # fetch and purgatories
    .define("fetch.max.bytes", _I, 57671680, _NON_NEGATIVE)
    # KIP-227: how many incremental fetch sessions the broker keeps.
    .define("max.incremental.fetch.session.cache.slots", _I, 1000, _NON_NEGATIVE)
    .define("fetch.purgatory.purge.interval.requests", _I, 1000)
    .define("producer.purgatory.purge.interval.requests", _I, 1000)
    # quotas (Kafka's ClientQuotaManagerConfig / ReplicationQuotaManagerConfig; broker/quota_manager.py)
    .define("quota.window.num", _I, 11, _POSITIVE)
    .define("quota.window.size.seconds", _I, 1, _POSITIVE)
    .define("replication.quota.window.num", _I, 11, _POSITIVE)
    .define("replication.quota.window.size.seconds", _I, 1, _POSITIVE)
    .define("alter.log.dirs.replication.quota.window.num", _I, 11, _POSITIVE)
    .define("alter.log.dirs.replication.quota.window.size.seconds", _I, 1, _POSITIVE)
    # consumer groups and offsets
    .define("group.initial.rebalance.delay.ms", _I, 3000)
    .define("group.min.session.timeout.ms", _I, 6000)
    .define("group.max.session.timeout.ms", _I, 1800000)
    .define("group.max.size", _I, INT_MAX, _POSITIVE)
    .define("offsets.topic.num.partitions", _I, 50, _POSITIVE)
    .define("offsets.topic.replication.factor", ConfigType.SHORT, 3, _POSITIVE)
    .define("offsets.topic.segment.bytes", _I, 104857600, _POSITIVE)
    .define("offsets.topic.compression.codec", _I, 0)
    .define("offsets.retention.minutes", _I, 10080, _POSITIVE)
    .define("offsets.retention.check.interval.ms", _L, 600000, _POSITIVE)
    .define("offsets.commit.timeout.ms", _I, 5000, _POSITIVE)
    .define("offsets.commit.required.acks", _S, "-1")
    .define("offsets.load.buffer.size", _I, 5242880, _POSITIVE)
    .define("offset.metadata.max.bytes", _I, 4096)
    # transactions and idempotence
    .define("transaction.state.log.num.partitions", _I, 50, _POSITIVE)
    .define("transaction.state.log.replication.factor", _S, "3")
    .define("transaction.state.log.min.isr", _I, 2, _POSITIVE)
    .define("transaction.state.log.segment.bytes", _I, 104857600, _POSITIVE)
    .define("transaction.state.log.load.buffer.size", _I, 5242880, _POSITIVE)
    .define("transactional.id.expiration.ms", _I, 604800000, _POSITIVE)
    .define("transaction.max.timeout.ms", _I, 900000, _POSITIVE)
    .define("transaction.abort.timed.out.transaction.cleanup.interval.ms", _I, 10000, _POSITIVE)
    .define("transaction.remove.expired.transaction.cleanup.interval.ms", _I, 3600000, _POSITIVE)
    .define("producer.id.expiration.ms", _I, 86400000, _NON_NEGATIVE)
    .define("transaction.partition.verification.enable", _B, True)
    .define("listener.name.sasl_plaintext.plain.sasl.jaas.config", _P, None)
    # authorization (Kafka's AclAuthorizer reads these from the broker's configuration)
    .define("authorizer.class.name", _S, "", check_authorizer_class_name)
    .define("super.users", _S, None)
    .define("allow.everyone.if.no.acl.found", _B, False)
)
define_security(BROKER_CONFIG)


class KafkaConfig(ServerConfig):
    """The broker's settings."""

    DEFINITION = BROKER_CONFIG

    def __init__(self, props: Mapping[str, Any]) -> None:
        super().__init__(props)
        self.max_connections_per_ip_overrides = self._parse_ip_overrides(
            self._values["max.connections.per.ip.overrides"]
        )

    @staticmethod
    def _parse_ip_overrides(text: str) -> dict[str, int]:
        overrides: dict[str, int] = {}
        for item in filter(None, (s.strip() for s in text.split(","))):
            host, _, count = item.rpartition(":")
            if not host or not count.isdigit():
                raise ConfigError(f"max.connections.per.ip.overrides: {item!r} is not host:count")
            overrides[host] = int(count)
        return overrides

    @property
    def broker_id(self) -> int:
        return self._values["broker.id"]

    @property
    def log_dirs(self) -> list[str]:
        dirs = self._values["log.dirs"] or self._values["log.dir"]
        return [d.strip() for d in dirs.split(",") if d.strip()]
