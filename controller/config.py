"""Controller configuration: the settings of a ``samsa controller`` process, parsed and validated.

The definitions use the ConfigDef machinery of ``server_common.config`` and Kafka's names and defaults: a
Kafka controller ran inside a broker and read the broker's ``server.properties``, so every setting here is
the broker setting the controller code read (``unclean.leader.election.enable``, ``delete.topic.enable``,
``controller.socket.timeout.ms``, ...), plus ``controller.id``, which names this process in
``/controller``. Any other Kafka broker setting is logged once and ignored; a name no Kafka setting has, or
an invalid value, is an error naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from server_common.acl_authorizer import check_authorizer_class_name, parse_super_users
from server_common.config import (
    INT_MAX,
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

_B, _S, _I, _L, _LIST = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.LIST,
)
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
    .define("security.inter.broker.protocol", _S, "PLAINTEXT", one_of(*SECURITY_PROTOCOLS))
    .define("controller.socket.timeout.ms", _I, 30000, _POSITIVE)
    # ZooKeeper
    .define("zookeeper.connect", _S, None)
    .define("zookeeper.session.timeout.ms", _I, 18000, _POSITIVE)
    .define("zookeeper.connection.timeout.ms", _I, None)
    # what the controller decides
    .define("unclean.leader.election.enable", _B, False)
    .define("delete.topic.enable", _B, True)
    .define("auto.leader.rebalance.enable", _B, True)
    .define("leader.imbalance.check.interval.seconds", _L, 300, _POSITIVE)
    .define("leader.imbalance.per.broker.percentage", _I, 10, _NON_NEGATIVE)
    # its network server
    .define("num.network.threads", _I, 3, _POSITIVE)
    .define("num.io.threads", _I, 8, _POSITIVE)
    .define("queued.max.requests", _I, 500, _POSITIVE)
    # As the broker's: Kafka's default is -1 (unbounded) (docs/architecture.md, Configuration).
    .define("queued.max.request.bytes", _L, 104857600)
    .define("socket.send.buffer.bytes", _I, 102400)
    .define("socket.receive.buffer.bytes", _I, 102400)
    .define("socket.request.max.bytes", _I, 104857600, _POSITIVE)
    .define("socket.listen.backlog.size", _I, 50, _POSITIVE)
    .define("max.connections", _I, INT_MAX, _NON_NEGATIVE)
    .define("max.connections.per.ip", _I, INT_MAX, _NON_NEGATIVE)
    # only brokers may call the controller: super.users, or ClusterAction ACLs when an authorizer is set
    .define("authorizer.class.name", _S, "", check_authorizer_class_name)
    # Samsa's own (Kafka exposes JMX instead): the Prometheus endpoint, off when empty (docs/operations.md).
    .define(
        "metrics.listener",
        _S,
        "",
        check_metrics_listener,
        "http://HOST:PORT where GET /metrics answers in Prometheus' text format; empty: no endpoint.",
    )
    .define("super.users", _S, None)
    .define("allow.everyone.if.no.acl.found", _B, False)
)
define_security(CONTROLLER_CONFIG)


class ControllerConfig(ServerConfig):
    """The controller's validated settings, read by Kafka name: ``config["delete.topic.enable"]``."""

    DEFINITION = CONTROLLER_CONFIG

    def __init__(self, props: Mapping[str, Any]) -> None:
        super().__init__(props)
        if not self._values["zookeeper.connect"]:
            raise ConfigError("missing required configuration setting zookeeper.connect")
        name = self._values["inter.broker.listener.name"]
        if name is not None:
            name = name.upper()
            if name not in self.protocol_map:
                raise ConfigError(
                    f"inter.broker.listener.name: {name} has no entry in listener.security.protocol.map"
                )
            if self.protocol_map[name] not in SECURITY_PROTOCOLS:
                raise ConfigError(f"inter.broker.listener.name: {name} maps to {self.protocol_map[name]}")
        self.inter_broker_listener = name
        self.inter_broker_protocol: str = self._values["security.inter.broker.protocol"]
        try:  # the controller's own check (controller/apis.py) reads it, authorizer or not
            self.super_users = parse_super_users(self._values["super.users"])
        except ValueError as e:
            raise ConfigError(f"super.users: {e}") from None

    @property
    def controller_id(self) -> int:
        return self._values["controller.id"]

    @property
    def session_timeout_ms(self) -> int:
        return self._values["zookeeper.session.timeout.ms"]

    @property
    def connection_timeout_ms(self) -> int:
        return self._values["zookeeper.connection.timeout.ms"] or self.session_timeout_ms
