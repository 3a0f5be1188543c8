"""Broker configuration: Kafka's ``server.properties`` names, types and defaults, parsed and validated.

``KafkaConfig.load(path, overrides)`` reads a Java-properties file, applies ``key=value`` overrides and
checks every setting against the definitions below; an unknown or invalid setting is an error naming
it. Values are read back by their Kafka name: ``config["num.io.threads"]``.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Self

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A setting is unknown, missing or invalid. The message names the setting."""


class ConfigType(Enum):
    BOOLEAN = "boolean"
    STRING = "string"
    INT = "int"
    SHORT = "short"
    LONG = "long"
    DOUBLE = "double"
    LIST = "list"
    PASSWORD = "password"


_NO_DEFAULT = object()


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any
    validator: Callable[[str, Any], None] | None = None
    doc: str = ""


def at_least(minimum: float) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise ConfigError(f"{name}={value} is invalid: the value must be at least {minimum}")

    return check


def one_of(*allowed: str) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        values = value if isinstance(value, list) else [value]
        for v in values:
            if v is not None and v not in allowed:
                raise ConfigError(f"{name}={v} is invalid: expected one of {', '.join(allowed)}")

    return check


def _parse_value(key: ConfigKey, raw: Any) -> Any:
    """Kafka's ConfigDef.parseType: strings are trimmed, numbers range-checked by type."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    t = key.type
    try:
        if t is ConfigType.BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return text.lower() == "true"
        if t in (ConfigType.STRING, ConfigType.PASSWORD):
            return text
        if t in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
            value = int(text)
            bits = {ConfigType.SHORT: 15, ConfigType.INT: 31, ConfigType.LONG: 63}[t]
            if not -(2**bits) <= value < 2**bits:
                raise ValueError(f"out of range for a {t.value}")
            return value
        if t is ConfigType.DOUBLE:
            return float(text)
        if t is ConfigType.LIST:
            return [item.strip() for item in text.split(",") if item.strip()] if text else []
    except ValueError as e:
        raise ConfigError(f"{key.name}={raw!r} is invalid: {e}") from None
    raise AssertionError(t)


class ConfigDef:
    """A set of known settings with their types, defaults and validators."""

    def __init__(self) -> None:
        self.keys: dict[str, ConfigKey] = {}

    def define(
        self,
        name: str,
        type: ConfigType,
        default: Any = _NO_DEFAULT,
        validator: Callable[[str, Any], None] | None = None,
        doc: str = "",
    ) -> ConfigDef:
        self.keys[name] = ConfigKey(name, type, default, validator, doc)
        return self

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(props) - set(self.keys))
        if unknown:
            raise ConfigError(
                f"unknown configuration setting{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}"
            )
        values: dict[str, Any] = {}
        for name, key in self.keys.items():
            if name in props:
                value = _parse_value(key, props[name])
            elif key.default is _NO_DEFAULT:
                raise ConfigError(f"missing required configuration setting {name}")
            else:
                value = _parse_value(key, key.default)
            if key.validator is not None:
                key.validator(name, value)
            values[name] = value
        return values


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

# Kafka's broker settings (ZooKeeper mode, Kafka 3.x names and defaults) that Samsa accepts. A setting
# not listed here is rejected at start rather than silently ignored.
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
    .define("security.inter.broker.protocol", _S, "PLAINTEXT", one_of("PLAINTEXT", "SASL_PLAINTEXT"))
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
    .define("log.segment.bytes", _I, 1073741824, at_least(14))
    .define("log.roll.ms", _L, None)
    .define("log.roll.hours", _I, 168, _POSITIVE)
    .define("log.roll.jitter.ms", _L, None)
    .define("log.roll.jitter.hours", _I, 0, _NON_NEGATIVE)
    .define("log.retention.ms", _L, None)
    .define("log.retention.minutes", _I, None)
    .define("log.retention.hours", _I, 168)
    .define("log.retention.bytes", _L, -1)
    .define("log.retention.check.interval.ms", _L, 300000, _POSITIVE)
    .define("log.index.size.max.bytes", _I, 10485760, at_least(4))
    .define("log.index.interval.bytes", _I, 4096, _NON_NEGATIVE)
    .define("log.flush.interval.messages", _L, LONG_MAX, _POSITIVE)
    .define("log.flush.interval.ms", _L, None)
    .define("log.flush.scheduler.interval.ms", _L, LONG_MAX)
    .define("log.flush.offset.checkpoint.interval.ms", _I, 60000, _NON_NEGATIVE)
    .define("log.flush.start.offset.checkpoint.interval.ms", _I, 60000, _NON_NEGATIVE)
    .define("log.segment.delete.delay.ms", _L, 60000, _NON_NEGATIVE)
    .define("log.cleanup.policy", _LIST, "delete", one_of("delete", "compact"))
    .define("log.cleaner.enable", _B, True)
    .define("log.cleaner.threads", _I, 1, _NON_NEGATIVE)
    .define("log.cleaner.min.cleanable.ratio", _D, 0.5)
    .define("log.cleaner.min.compaction.lag.ms", _L, 0, _NON_NEGATIVE)
    .define("log.cleaner.max.compaction.lag.ms", _L, LONG_MAX, _POSITIVE)
    .define("log.cleaner.delete.retention.ms", _L, 86400000, _NON_NEGATIVE)
    .define("log.cleaner.backoff.ms", _L, 15000, _NON_NEGATIVE)
    .define("log.cleaner.dedupe.buffer.size", _L, 134217728)
    .define("log.message.timestamp.type", _S, "CreateTime", one_of("CreateTime", "LogAppendTime"))
    .define("log.message.timestamp.before.max.ms", _L, LONG_MAX, _NON_NEGATIVE)
    .define("log.message.timestamp.after.max.ms", _L, LONG_MAX, _NON_NEGATIVE)
    .define("log.message.timestamp.difference.max.ms", _L, LONG_MAX, _NON_NEGATIVE)
    .define("log.message.downconversion.enable", _B, True)
    .define("log.message.format.version", _S, "3.0-IV1")
    .define("log.preallocate", _B, False)
    .define("message.max.bytes", _I, 1048588, _NON_NEGATIVE)
    .define(
        "compression.type",
        _S,
        "producer",
        one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    )
    # replication
    .define("min.insync.replicas", _I, 1, _POSITIVE)
    .define("unclean.leader.election.enable", _B, False)
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
    .define("auto.leader.rebalance.enable", _B, True)
    .define("leader.imbalance.check.interval.seconds", _L, 300, _POSITIVE)
    .define("leader.imbalance.per.broker.percentage", _I, 10)
    .define("controlled.shutdown.enable", _B, True)
    .define("controlled.shutdown.max.retries", _I, 3)
    .define("controlled.shutdown.retry.backoff.ms", _L, 5000)
    .define("controller.socket.timeout.ms", _I, 30000)
    # fetch and purgatories
    .define("fetch.max.bytes", _I, 57671680, _NON_NEGATIVE)
    .define("fetch.purgatory.purge.interval.requests", _I, 1000)
    .define("producer.purgatory.purge.interval.requests", _I, 1000)
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
    # SASL
    .define("sasl.enabled.mechanisms", _LIST, "GSSAPI")
    .define("sasl.mechanism.inter.broker.protocol", _S, "GSSAPI")
    .define("listener.name.sasl_plaintext.plain.sasl.jaas.config", _P, None)
)

_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[0-9a-fA-F:.]+\]|[^:/\s]*):(-?\d+)$")
SUPPORTED_SECURITY_PROTOCOLS = ("PLAINTEXT",)


@dataclass(frozen=True)
class Endpoint:
    """A listener: its name, the security protocol it maps to, and host:port (host "" binds all)."""

    listener: str
    security_protocol: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


def parse_endpoints(name: str, items: Iterable[str], protocol_map: Mapping[str, str]) -> list[Endpoint]:
    endpoints: list[Endpoint] = []
    for item in items:
        m = _LISTENER.match(item)
        if not m:
            raise ConfigError(f"{name}: {item!r} is not of the form LISTENER_NAME://host:port")
        listener, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if listener not in protocol_map:
            raise ConfigError(f"{name}: listener {listener} has no entry in listener.security.protocol.map")
        if not 0 <= port <= 65535:
            raise ConfigError(f"{name}: port {port} of {listener} is out of range")
        if any(e.listener == listener for e in endpoints):
            raise ConfigError(f"{name}: listener {listener} appears more than once")
        endpoints.append(Endpoint(listener, protocol_map[listener], host, port))
    return endpoints


def read_properties(text: str) -> dict[str, str]:
    """Java .properties: `key=value` or `key: value` lines, `#`/`!` comments, backslash continuations."""
    props: dict[str, str] = {}
    logical = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not logical and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            logical += stripped[:-1]
            continue
        logical += stripped
        m = re.match(r"^((?:\\.|[^=:\s])+)\s*[=:\s]\s*(.*)$", logical)
        key, value = (m.group(1), m.group(2)) if m else (logical, "")
        props[key.replace("\\", "")] = value
        logical = ""
    return props


class ServerConfig:
    """The validated settings of a Samsa server process (a broker or a controller), read by Kafka
    name: ``config["num.io.threads"]``. Subclasses name their ConfigDef; the listeners, their security
    protocols and what is advertised for them are parsed and checked here for both."""

    DEFINITION: ConfigDef

    def __init__(self, props: Mapping[str, Any]) -> None:
        self.originals = dict(props)
        self._values = self.DEFINITION.parse(props)
        self.protocol_map: dict[str, str] = {}
        for item in self._values["listener.security.protocol.map"]:
            listener, _, protocol = item.partition(":")
            if not protocol:
                raise ConfigError(f"listener.security.protocol.map: {item!r} is not LISTENER:PROTOCOL")
            self.protocol_map[listener.strip().upper()] = protocol.strip().upper()
        self.listeners = parse_endpoints("listeners", self._values["listeners"], self.protocol_map)
        if not self.listeners:
            raise ConfigError("listeners must name at least one listener")
        for endpoint in self.listeners:
            if endpoint.security_protocol not in SUPPORTED_SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"listeners: {endpoint.listener} uses {endpoint.security_protocol}, which Samsa does not "
                    f"support (supported: {', '.join(SUPPORTED_SECURITY_PROTOCOLS)})"
                )
        advertised = self._values["advertised.listeners"]
        self.advertised_listeners = (
            parse_endpoints("advertised.listeners", advertised, self.protocol_map)
            if advertised
            else list(self.listeners)
        )
        names = {e.listener for e in self.listeners}
        for endpoint in self.advertised_listeners:
            if endpoint.listener not in names:
                raise ConfigError(f"advertised.listeners: {endpoint.listener} is not one of listeners")

    @classmethod
    def load(cls, path: str | Path | None, overrides: Iterable[str] = ()) -> Self:
        """Reads a properties file (optional) and applies ``key=value`` overrides over it."""
        props = read_properties(Path(path).read_text(encoding="utf-8")) if path else {}
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--override {item!r} is not of the form key=value")
            props[key.strip()] = value
        return cls(props)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def advertised_endpoint(self, listener: str, bound_port: int = 0) -> Endpoint:
        """The address told to others for a listener: an empty host becomes this machine's name, and
        port 0 (an ephemeral port) the port actually bound."""
        endpoint = next(e for e in self.advertised_listeners if e.listener == listener)
        return Endpoint(
            endpoint.listener,
            endpoint.security_protocol,
            endpoint.host or socket.getfqdn(),
            endpoint.port or bound_port,
        )


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
