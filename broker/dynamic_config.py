"""DynamicBrokerConfig: the broker's settings as they stand, server.properties under ZooKeeper overrides.

Kafka lets the settings it marks dynamic change at runtime (Kafka 3.9's DynamicBrokerConfig), stored in
``/config/brokers/<id>`` (this broker) and ``/config/brokers/<default>`` (every broker; the empty
resource name in the request); per-broker beats cluster default beats server.properties. Samsa accepts
the same settings with Kafka's checks:

- a setting Kafka does not let change at runtime: "Cannot update these configs dynamically";
- a security setting without its listener prefix (``ssl.keystore.location`` rather than
  ``listener.name.<l>.ssl.keystore.location``): refused, as Kafka refuses it;
- a per-broker setting (listeners, advertised.listeners, the per-listener security settings) at the
  cluster default: "broker id must be specified";
- a password (``sasl.jaas.config``, ``ssl.*.password``, ...): Kafka stores it encrypted with
  ``password.encoder.secret``; Samsa has no password encoder and refuses it as Kafka does without one;
- thread pools may change at most to double or half at once (DynamicThreadPool);
- every value is checked with the broker's own definitions (and the merged result as a whole: listeners,
  log defaults), so a bad value is INVALID_REQUEST naming it.

What Samsa applies at once (``reconfigure``: the change notification reaches every broker, which reads
its settings again and hands the old and new configuration to each reconfigurable, as Kafka's
DynamicBrokerConfig.updateCurrentConfig does):

- the log defaults behind topic configs (``log.retention.ms``, ``log.segment.bytes``,
  ``message.max.bytes``, ... — Kafka's DynamicLogConfig), to every topic without an override of its own;
- ``advertised.listeners``: the broker rewrites its registration ``/brokers/ids/<id>`` (same session,
  same broker epoch); the controller, which watches each registration, sends UpdateMetadata to every
  broker, so Metadata everywhere gives the new address (Kafka's BrokerModifications);
- ``listeners``: a listener added is bound and accepts at once, a listener removed stops accepting and
  its connections are closed (Kafka's DynamicListenerConfig, with ``listener.security.protocol.map``
  naming the new listener's protocol; an existing listener's host, port and protocol do not change
  until restart, as in Kafka);
- ``max.connections``, ``max.connections.per.ip``, ``max.connections.per.ip.overrides``: from the next
  connection accepted (open connections stay);
- ``num.io.threads``: workers added, or removed after the request they handle;
- ``num.replica.fetchers``: partitions whose fetcher changes move to it, fetchers beyond the number stop
  (Kafka's resizeThreadPool);
- ``log.cleaner.threads``, ``log.cleaner.backoff.ms``, ``log.cleaner.dedupe.buffer.size``: the cleaner's
  threads started or retired after their cleaning, the others from the next cleaning.

Accepted and stored but without effect, because Samsa has no such structure: ``num.network.threads``
(every processor runs on the one event loop) and ``background.threads`` (periodic work runs as event-loop
tasks and in the default executor). Applied when the broker next starts (at startup the broker reads
its dynamic settings from ZooKeeper before it builds anything: ``with_dynamic_overrides``, Kafka's
DynamicBrokerConfig.initialize): ``num.recovery.threads.per.data.dir`` (Samsa recovers logs only at
startup), ``producer.id.expiration.ms`` and ``transaction.partition.verification.enable`` (given to each
log when it is loaded). Settings Kafka
knows and Samsa does not implement (the SSL/SASL ones, ``log.cleaner.io.*``,
``max.connection.creation.rate``, metric reporters, remote storage) are accepted, stored, reported and
ignored, as the same names in server.properties are. Each change is logged saying which of these it is.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Mapping

from broker.admin_zk import DEFAULT_ENTITY
from broker.config import BROKER_CONFIG, KafkaConfig
from server_common.config import ConfigError, ConfigType, is_kafka_setting
from server_common.kafka_config_names import KAFKA_DYNAMIC_ONLY_BROKER_CONFIG_NAMES
from storage.config import BROKER_SYNONYMS, LogConfig, broker_synonyms
from storage.errors import InvalidConfigError
from zk import znodes
from zk.client import ZkClient

log = logging.getLogger(__name__)

# The log defaults Samsa applies at once (DynamicLogConfig: every topic config's broker synonyms but
# log.message.format.version).
RECONFIGURABLE: frozenset[str] = frozenset(
    name
    for broker_name in BROKER_SYNONYMS
    if broker_name != "log.message.format.version"
    for name in broker_synonyms(broker_name)
)

# Kafka 3.9's DynamicBrokerConfig lists (names only).
SSL_RECONFIGURABLE = frozenset(  # SslConfigs.RECONFIGURABLE_CONFIGS: per listener only
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
    }
)
LOG_CLEANER_RECONFIGURABLE = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "message.max.bytes",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
    }
)
THREAD_POOLS = frozenset(
    {"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads"}
)
LISTENER_RECONFIGURABLE = frozenset(  # DynamicListenerConfig.ReconfigurableConfigs
    {
        "advertised.listeners",
        "listeners",
        "listener.security.protocol.map",
        "principal.builder.class",
        "ssl.protocol",
        "ssl.provider",
        "ssl.cipher.suites",
        "ssl.enabled.protocols",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.endpoint.identification.algorithm",
        "ssl.secure.random.implementation",
        "ssl.client.auth",
        "ssl.engine.factory.class",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.jaas.config",
        "sasl.enabled.mechanisms",
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        "max.connections",
        "max.connection.creation.rate",
        "num.network.threads",
    }
)
SOCKET_SERVER_RECONFIGURABLE = frozenset(
    {
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "max.connections",
        "max.connection.creation.rate",
    }
)
OTHER_RECONFIGURABLE = frozenset(
    {
        "metric.reporters",
        "producer.id.expiration.ms",  # DynamicProducerStateManagerConfig
        "transaction.partition.verification.enable",
        "remote.log.index.file.cache.total.size.bytes",  # DynamicRemoteLogConfig
        "remote.fetch.max.wait.ms",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.fetch.max.bytes.per.second",
    }
)
# QuotaConfigs.brokerQuotaConfigs: dynamic only (no server.properties name).
BROKER_QUOTAS = KAFKA_DYNAMIC_ONLY_BROKER_CONFIG_NAMES
ALL_DYNAMIC: frozenset[str] = (
    SSL_RECONFIGURABLE
    | LOG_CLEANER_RECONFIGURABLE
    | RECONFIGURABLE
    | THREAD_POOLS
    | LISTENER_RECONFIGURABLE
    | SOCKET_SERVER_RECONFIGURABLE
    | OTHER_RECONFIGURABLE
)
_CLUSTER_LEVEL_LISTENER = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)
PER_BROKER_ONLY: frozenset[str] = (SSL_RECONFIGURABLE | LISTENER_RECONFIGURABLE) - _CLUSTER_LEVEL_LISTENER
# Kafka's DynamicPasswordConfigs (the dynamic settings of type PASSWORD), matched as name suffixes.
PASSWORDS = frozenset(
    {
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.certificates",
        "sasl.jaas.config",
    }
)
_LISTENER_PREFIXED = re.compile(r"^listener\.name\.[^.]*\.(.*)$")
_SASL_MECHANISM_SETTINGS = frozenset(
    {
        "sasl.jaas.config",
        "sasl.login.callback.handler.class",
        "sasl.login.class",
        "sasl.server.callback.handler.class",
        "connections.max.reauth.ms",
    }
)


class DynamicConfigError(ValueError):
    """A dynamic broker config change that cannot be made (Kafka answers INVALID_REQUEST)."""


def base_name(name: str) -> str:
    """A per-listener setting's name without ``listener.name.<l>.`` (and a SASL mechanism prefix)."""
    m = _LISTENER_PREFIXED.match(name)
    if m is None:
        return name
    rest = m.group(1)
    _, _, setting = rest.partition(".")
    return setting if setting in _SASL_MECHANISM_SETTINGS else rest


def is_dynamic(name: str) -> bool:
    """True for a setting Kafka 3.9 lets change at runtime (Kafka's DynamicConfig.Broker)."""
    if name in ALL_DYNAMIC or name in BROKER_QUOTAS:
        return True
    return _LISTENER_PREFIXED.match(name) is not None and is_kafka_setting(name)


def is_password(name: str) -> bool:
    """Kafka's DynamicBrokerConfig.isPasswordConfig (a suffix match, as listener-prefixed names are)."""
    return any(name.endswith(p) for p in PASSWORDS) or BROKER_CONFIG.type_of(name) is ConfigType.PASSWORD


# What Samsa applies while running besides the log defaults (see the module docstring).
APPLIED_LIVE: frozenset[str] = frozenset(
    {
        "advertised.listeners",
        "listeners",
        "listener.security.protocol.map",  # for listeners added (an existing one's may not change)
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "num.io.threads",
        "num.replica.fetchers",
        "log.cleaner.threads",
        "log.cleaner.backoff.ms",
        "log.cleaner.dedupe.buffer.size",
    }
)
# Accepted and stored; no such structure in Samsa's asyncio design.
NO_EFFECT: frozenset[str] = frozenset({"num.network.threads", "background.threads"})

# A reconfigurable: called with the configuration in force before and after a change.
Reconfigurable = Callable[[KafkaConfig, KafkaConfig], Awaitable[None] | None]


def applied_at_once(name: str) -> bool:
    """Whether Samsa applies a dynamic setting while running (else when the broker next starts)."""
    return name in RECONFIGURABLE or name in APPLIED_LIVE


def _inter_broker_listener(config: KafkaConfig) -> str:
    named = config["inter.broker.listener.name"]
    if named:
        return str(named).upper()
    protocol = config["security.inter.broker.protocol"]
    return next(
        (e.listener for e in config.listeners if e.security_protocol == protocol),
        config.listeners[0].listener,
    )


def _names(names: set[str] | list[str]) -> str:
    return ", ".join(sorted(names))


class DynamicBrokerConfig:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.static: dict[str, str] = {k: str(v) for k, v in config.originals.items()}
        self.cluster_default: dict[str, str] = {}  # /config/brokers/<default>
        self.per_broker: dict[str, str] = {}  # /config/brokers/<broker.id>
        self.current = config  # the configuration in force (server.properties under the overrides)
        self.reconfigurables: list[Reconfigurable] = []

    def effective_props(self) -> dict[str, str]:
        return {**self.static, **self.cluster_default, **self.per_broker}

    def log_defaults(self) -> LogConfig:
        """The topic config defaults the dynamic settings make."""
        return LogConfig.from_broker_props(self.effective_props())

    def validate(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Checks a new override set for this broker (``per_broker``) or for every broker (Kafka's
        DynamicBrokerConfig.validate: validateConfigs, then the merged configuration as a whole)."""
        unknown = {
            n for n in props if n not in BROKER_CONFIG.keys and not is_kafka_setting(n) and not is_dynamic(n)
        }
        if unknown:
            raise DynamicConfigError(
                f"Unknown broker configs (not settings of Samsa or Apache Kafka): {_names(unknown)}"
            )
        fixed = {n for n in props if not is_dynamic(n)}
        if fixed:
            raise DynamicConfigError(f"Cannot update these configs dynamically: {_names(fixed)}")
        unprefixed = {n for n in props if n in SSL_RECONFIGURABLE}
        if unprefixed:
            raise DynamicConfigError(
                "These security configs can be dynamically updated only per-listener using the listener "
                f"prefix: {_names(unprefixed)}"
            )
        for name, value in props.items():
            key = BROKER_CONFIG.keys.get(base_name(name))
            if key is not None:
                try:
                    key.parse(value)
                except ValueError as e:
                    raise DynamicConfigError(f"{name}={value!r} is invalid: {e}") from None
        if not per_broker:
            broker_only = {
                n
                for n in props
                if n in PER_BROKER_ONLY
                or (_LISTENER_PREFIXED.match(n) is not None and base_name(n) not in _CLUSTER_LEVEL_LISTENER)
            }
            if broker_only:
                raise DynamicConfigError(
                    f"Cannot update these configs at default cluster level, broker id must be specified: "
                    f"{_names(broker_only)}"
                )
        passwords = {n for n in props if is_password(n)}
        if passwords:
            if not per_broker:
                raise DynamicConfigError(
                    f"Password config can be defined only at broker level: {_names(passwords)}"
                )
            raise DynamicConfigError(
                "Password encoder secret not configured (Samsa stores no dynamic passwords): "
                + _names(passwords)
            )
        if per_broker:
            merged = {**self.static, **self.cluster_default, **props}
        else:
            merged = {**self.static, **props, **self.per_broker}
        try:
            new = KafkaConfig(merged)
            LogConfig.from_broker_props(merged)
        except (ConfigError, InvalidConfigError) as e:
            raise DynamicConfigError(str(e)) from None
        current = (
            KafkaConfig(self.effective_props()) if (self.cluster_default or self.per_broker) else self.config
        )
        _validate_listeners(current, new)
        for name in sorted(THREAD_POOLS & set(props)):
            old, value = current[name], new[name]
            if value == old:
                continue
            problem = f"Dynamic thread count update validation failed for {name}={value}"
            if value < old / 2:
                raise DynamicConfigError(f"{problem}, value should be at least half the current value {old}")
            if value > old * 2:
                raise DynamicConfigError(
                    f"{problem}, value should not be greater than double the current value {old}"
                )

    async def reconfigure(self) -> None:
        """Applies the overrides as they now stand: the new configuration goes to every reconfigurable
        with the one it replaces (each changes what it owns if its settings differ). An override set that
        no longer makes a valid configuration is logged and the configuration in force kept."""
        try:
            new = KafkaConfig(self.effective_props())
        except ConfigError as e:
            log.error("dynamic broker configs make an invalid configuration; not applied: %s", e)
            return
        new.originals = dict(self.config.originals)
        old, self.current = self.current, new
        for reconfigurable in list(self.reconfigurables):
            try:
                result = reconfigurable(old, new)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("applying dynamic broker configs failed (%r)", reconfigurable)

    def log_changes(self, before: Mapping[str, str], after: Mapping[str, str], scope: str) -> None:
        """Says, for each setting changed, whether it applies now or when the broker restarts."""
        for name in sorted(set(before) | set(after)):
            if before.get(name) == after.get(name):
                continue
            shown = "[hidden]" if is_password(name) else after.get(name, "(deleted)")
            if applied_at_once(name):
                log.info("dynamic broker config %s (%s) = %s: applied now", name, scope, shown)
            elif name in NO_EFFECT:
                log.warning(
                    "dynamic broker config %s (%s) = %s: stored; no effect in Samsa, which has no such "
                    "thread pool (its network I/O and periodic work run on one event loop)",
                    name,
                    scope,
                    shown,
                )
            elif name not in BROKER_CONFIG.keys and base_name(name) not in BROKER_CONFIG.keys:
                log.warning(
                    "dynamic broker config %s (%s) = %s: stored; a Kafka setting Samsa does not implement",
                    name,
                    scope,
                    shown,
                )
            else:
                log.warning(
                    "dynamic broker config %s (%s) = %s: stored; Samsa applies it when the broker restarts",
                    name,
                    scope,
                    shown,
                )


def _validate_listeners(old: KafkaConfig, new: KafkaConfig) -> None:
    """Kafka's DynamicListenerConfig.validateReconfiguration (the rest KafkaConfig itself checks)."""
    old_protocols = {e.listener: e.security_protocol for e in old.listeners}
    for endpoint in new.listeners:
        before = old_protocols.get(endpoint.listener)
        if before is not None and before != endpoint.security_protocol:
            raise DynamicConfigError(
                f"Security protocol cannot be updated for existing listener {endpoint.listener}"
            )
    inter_broker = _inter_broker_listener(new)
    if inter_broker not in {e.listener for e in new.advertised_listeners}:
        raise DynamicConfigError(
            f"Advertised listener must be specified for inter-broker listener {inter_broker}"
        )


async def with_dynamic_overrides(zk: ZkClient, config: KafkaConfig) -> KafkaConfig:
    """The broker's configuration with its dynamic settings from ZooKeeper over server.properties (Kafka's
    DynamicBrokerConfig.initialize, before the broker builds anything). Invalid or non-dynamic stored
    settings are logged and ignored, as Kafka's fromPersistentProps does. ``originals`` stay the static
    settings (DescribeConfigs tells the sources apart)."""
    tiers: list[dict[str, str]] = []
    for entity in (DEFAULT_ENTITY, str(config.broker_id)):
        found = await zk.get(f"{znodes.CONFIG_BROKERS}/{entity}")
        stored = znodes.decode_config(found[0]) if found is not None else {}
        kept = {}
        for name, value in stored.items():
            if not is_dynamic(name):
                log.error("non-dynamic config %s in /config/brokers/%s is ignored", name, entity)
            else:
                kept[name] = value
        tiers.append(kept)
    if not any(tiers):
        return config
    merged = {k: str(v) for k, v in config.originals.items()}
    for tier in tiers:
        for name, value in tier.items():
            candidate = {**merged, name: value}
            try:
                KafkaConfig(candidate)
            except ConfigError as e:
                log.error(
                    "dynamic broker config %s=%r in ZooKeeper is invalid and ignored: %s", name, value, e
                )
                continue
            merged = candidate
    new = KafkaConfig(merged)
    new.originals = dict(config.originals)
    applied = {n: v for tier in tiers for n, v in tier.items() if n in merged and merged[n] == v}
    if applied:
        log.info("dynamic broker configs from ZooKeeper: %s", _names(list(applied)))
    return new
