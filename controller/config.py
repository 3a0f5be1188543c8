"""Controller configuration: the settings of a ``samsa controller`` process, parsed and validated.

The definitions reuse the broker's ConfigDef machinery and Kafka's names and defaults: a Kafka controller
ran inside a broker and read the broker's ``server.properties``, so every setting here is the broker
setting the controller code read (``unclean.leader.election.enable``, ``delete.topic.enable``,
``controller.socket.timeout.ms``, ...), plus ``controller.id``, which names this process in
``/controller``. An unknown or invalid setting is an error naming it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from broker.config import (
    INT_MAX,
    ConfigDef,
    ConfigError,
    ConfigType,
    Endpoint,
    at_least,
    one_of,
    parse_endpoints,
    read_properties,
)

_B, _S, _I, _LIST = ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LIST
_POSITIVE = at_least(1)
_NON_NEGATIVE = at_least(0)

CONTROLLER_CONFIG = (
    ConfigDef()
    .define("controller.id", _I, validator=_NON_NEGATIVE, doc="This controller's id, outside the broker ids.")
    # the controller's own Kafka-protocol listener (ControlledShutdown, ApiVersions)
    .define("listeners", _LIST, "PLAINTEXT://:9093")
    .define("advertised.listeners", _LIST, None)
    .define(
        "listener.security.protocol.map",
        _LIST,
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    )
    # how the controller reaches the brokers: the listener of theirs it connects to
    .define("inter.broker.listener.name", _S, None)
    .define("security.inter.broker.protocol", _S, "PLAINTEXT", one_of("PLAINTEXT"))
    .define("controller.socket.timeout.ms", _I, 30000, _POSITIVE)
    # ZooKeeper
    .define("zookeeper.connect", _S, None)
    .define("zookeeper.session.timeout.ms", _I, 18000, _POSITIVE)
    .define("zookeeper.connection.timeout.ms", _I, None)
    # what the controller decides
    .define("unclean.leader.election.enable", _B, False)
    .define("delete.topic.enable", _B, True)
    # its network server
    .define("num.network.threads", _I, 3, _POSITIVE)
    .define("num.io.threads", _I, 8, _POSITIVE)
    .define("queued.max.requests", _I, 500, _POSITIVE)
    .define("socket.send.buffer.bytes", _I, 102400)
    .define("socket.receive.buffer.bytes", _I, 102400)
    .define("socket.request.max.bytes", _I, 104857600, _POSITIVE)
    .define("socket.listen.backlog.size", _I, 50, _POSITIVE)
    .define("max.connections", _I, INT_MAX, _NON_NEGATIVE)
    .define("max.connections.per.ip", _I, INT_MAX, _NON_NEGATIVE)
)

SUPPORTED_SECURITY_PROTOCOLS = ("PLAINTEXT",)


class ControllerConfig:
    """The controller's validated settings, read by Kafka name: ``config["delete.topic.enable"]``."""

    def __init__(self, props: Mapping[str, Any]) -> None:
        self.originals = dict(props)
        self._values = CONTROLLER_CONFIG.parse(props)
        if not self._values["zookeeper.connect"]:
            raise ConfigError("missing required configuration setting zookeeper.connect")
        protocol_map: dict[str, str] = {}
        for item in self._values["listener.security.protocol.map"]:
            listener, _, protocol = item.partition(":")
            if not protocol:
                raise ConfigError(f"listener.security.protocol.map: {item!r} is not LISTENER:PROTOCOL")
            protocol_map[listener.strip().upper()] = protocol.strip().upper()
        self.listeners = parse_endpoints("listeners", self._values["listeners"], protocol_map)
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
            parse_endpoints("advertised.listeners", advertised, protocol_map)
            if advertised
            else list(self.listeners)
        )
        names = {e.listener for e in self.listeners}
        for endpoint in self.advertised_listeners:
            if endpoint.listener not in names:
                raise ConfigError(f"advertised.listeners: {endpoint.listener} is not one of listeners")
        name = self._values["inter.broker.listener.name"]
        if name is not None:
            name = name.upper()
            if name not in protocol_map:
                raise ConfigError(
                    f"inter.broker.listener.name: {name} has no entry in listener.security.protocol.map"
                )
            if protocol_map[name] not in SUPPORTED_SECURITY_PROTOCOLS:
                raise ConfigError(f"inter.broker.listener.name: {name} maps to {protocol_map[name]}")
        self.inter_broker_listener = name
        self.inter_broker_protocol: str = self._values["security.inter.broker.protocol"]

    @classmethod
    def load(cls, path: str | Path | None, overrides: Iterable[str] = ()) -> ControllerConfig:
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

    @property
    def controller_id(self) -> int:
        return self._values["controller.id"]

    @property
    def session_timeout_ms(self) -> int:
        return self._values["zookeeper.session.timeout.ms"]

    @property
    def connection_timeout_ms(self) -> int:
        return self._values["zookeeper.connection.timeout.ms"] or self.session_timeout_ms

    def advertised_endpoint(self, listener: str, bound_port: int) -> Endpoint:
        """What brokers are told (in ``/controller``) for one listener: an empty host becomes this
        machine's name, port 0 the port actually bound."""
        endpoint = next(e for e in self.advertised_listeners if e.listener == listener)
        return Endpoint(
            endpoint.listener,
            endpoint.security_protocol,
            endpoint.host or socket.getfqdn(),
            endpoint.port or bound_port,
        )
