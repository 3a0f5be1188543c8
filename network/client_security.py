"""ClientSecurity: how a client side connects to a Kafka listener (security protocol, TLS, SASL).

Built ``from_client_properties`` (a client's settings, in the Java client's names or librdkafka's, as a
``--command-config`` file gives them) or ``for_inter_broker`` (a broker's or controller's own settings
for reaching the brokers' inter-broker listener). ``NetworkClient(..., security=...)`` uses it:
TLS wraps the connection (``ssl_context``, with ``server_hostname`` the host connected to, checked when
``ssl.endpoint.identification.algorithm`` is https), and SASL authenticates on it
(``sasl_mechanism``, ``username``, ``password``).

Java names: ``security.protocol``, ``ssl.truststore.location/type/password``,
``ssl.truststore.certificates``, ``ssl.keystore.location/type/password``, ``ssl.key.password``,
``ssl.keystore.key``/``ssl.keystore.certificate.chain``, ``ssl.endpoint.identification.algorithm``,
``ssl.enabled.protocols``, ``ssl.cipher.suites``, ``sasl.mechanism``, ``sasl.jaas.config`` (the
PlainLoginModule's or ScramLoginModule's ``username``/``password`` options). librdkafka names:
``ssl.ca.location`` (a PEM file of CA certificates), ``ssl.certificate.location`` + ``ssl.key.location``
(+ ``ssl.key.password``), ``ssl.keystore.location`` (PKCS#12), ``sasl.username``/``sasl.password``
(also ``sasl.mechanisms``), ``enable.ssl.certificate.verification`` and
``ssl.endpoint.identification.algorithm`` (librdkafka: ``none`` or ``https``).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from network.jaas import JaasError, parse_single_entry
from network.ssl_context import SSL_SETTINGS, SslSettings, client_context, read_setting_file
from server_common.config import SECURITY_PROTOCOLS, ConfigError

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def jaas_options(text: str, setting: str = "sasl.jaas.config") -> tuple[str, dict[str, str]]:
    """The login module and options of the one JAAS entry of ``setting``, read as Kafka reads it
    (``network.jaas``): ``org.apache.kafka.common.security.scram.ScramLoginModule required
    username="a" password="b";``. ConfigError naming ``setting`` when it does not parse."""
    try:
        entry = parse_single_entry(text)
    except JaasError as e:
        raise ConfigError(f"{setting} is invalid: {e}") from None
    return entry.login_module, dict(entry.options)


@dataclass(frozen=True)
class ClientSecurity:
    """How to connect: ``protocol`` one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def check_hostname(self) -> bool:
        return self.ssl_context is not None and self.ssl_context.check_hostname

    def server_hostname(self, host: str) -> str | None:
        """What ``create_connection``'s ``server_hostname`` is for ``host`` (SNI, and the name checked
        when the context checks host names); None without TLS."""
        return host if self.ssl_context is not None else None

    @classmethod
    def plaintext(cls) -> ClientSecurity:
        return cls()

    @classmethod
    def from_client_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        """From a client's settings (Java client or librdkafka names). ConfigError names a bad one."""
        props = {k.strip(): str(v).strip() for k, v in props.items()}
        protocol = props.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"security.protocol={props['security.protocol']!r}: expected one of "
                f"{', '.join(SECURITY_PROTOCOLS)}"
            )
        ssl_context = _client_ssl_context(props) if protocol in ("SSL", "SASL_SSL") else None
        mechanism = username = password = None
        if protocol.startswith("SASL_"):
            mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "GSSAPI").upper()
            if mechanism not in SASL_MECHANISMS:
                raise ConfigError(
                    f"sasl.mechanism={mechanism}: Samsa's clients support {', '.join(SASL_MECHANISMS)}"
                )
            username, password = props.get("sasl.username"), props.get("sasl.password")
            if props.get("sasl.jaas.config"):
                _, options = jaas_options(props["sasl.jaas.config"])
                username = options.get("username", username)
                password = options.get("password", password)
            if username is None or password is None:
                raise ConfigError(
                    f"security.protocol={protocol} needs a username and password: sasl.jaas.config "
                    '(username="..." password="...") or sasl.username and sasl.password'
                )
        return cls(protocol, ssl_context, mechanism, username, password)

    @classmethod
    def for_inter_broker(cls, config: Any) -> ClientSecurity:
        """How a broker or controller (``config``: its ServerConfig) reaches the brokers' inter-broker
        listener: that listener's security protocol and TLS settings (its key store for mutual TLS),
        and for SASL ``sasl.mechanism.inter.broker.protocol`` with the ``username``/``password`` options
        of the listener's ``listener.name.<l>.<mechanism>.sasl.jaas.config`` (or ``sasl.jaas.config``),
        as Kafka's broker logs in with its own login module's options."""
        listener, protocol = inter_broker_listener_and_protocol(config)
        ssl_context = None
        if protocol in ("SSL", "SASL_SSL"):
            settings = SslSettings.for_listener(config, listener)
            ssl_context = client_context(settings)
        if not protocol.startswith("SASL_"):
            return cls(protocol, ssl_context)
        mechanism = str(config["sasl.mechanism.inter.broker.protocol"]).upper()
        if mechanism not in SASL_MECHANISMS:
            raise ConfigError(
                f"sasl.mechanism.inter.broker.protocol={mechanism}: the inter-broker listener {listener} "
                f"uses {protocol}, and Samsa supports {', '.join(SASL_MECHANISMS)}"
            )
        jaas = config.for_listener(listener, "sasl.jaas.config", mechanism)
        prefixed = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        if not jaas:
            raise ConfigError(
                f"{prefixed} is required: the inter-broker listener {listener} uses {protocol} with "
                f"{mechanism}, and the broker logs in with its username and password options"
            )
        _, options = jaas_options(str(jaas), prefixed)
        if "username" not in options or "password" not in options:
            raise ConfigError(f"{prefixed}: the login module needs username and password options")
        return cls(protocol, ssl_context, mechanism, options["username"], options["password"])


def inter_broker_listener_and_protocol(config: Any) -> tuple[str, str]:
    """The brokers' inter-broker listener and its security protocol, as ``config`` (a broker's or a
    controller's) names them: ``inter.broker.listener.name`` else the listener named after
    ``security.inter.broker.protocol`` (Kafka's rule; a broker takes its first listener with that
    protocol when none is named so)."""
    named = config["inter.broker.listener.name"]
    if named:
        listener = str(named).upper()
        protocol = config.protocol_map.get(listener)
        if protocol is None:
            raise ConfigError(
                f"inter.broker.listener.name: {listener} has no entry in listener.security.protocol.map"
            )
        return listener, protocol
    protocol = str(config["security.inter.broker.protocol"]).upper()
    if protocol in config.protocol_map:
        return protocol, protocol
    for endpoint in config.listeners:
        if endpoint.security_protocol == protocol:
            return endpoint.listener, protocol
    return protocol, protocol


def _client_ssl_context(props: Mapping[str, str]) -> ssl.SSLContext:
    def get(name: str) -> str | None:
        return props.get(name) or None

    # Kafka's client TLS settings: a server's, but for ssl.client.auth.
    values: dict[str, Any] = {name: get(name) for name in SSL_SETTINGS if name != "ssl.client.auth"}
    names: dict[str, str] = {}
    # librdkafka: a PEM CA file, PEM certificate + key files, a PKCS#12 key store.
    if get("ssl.ca.location") and not values["ssl.truststore.location"]:
        values["ssl.truststore.location"] = props["ssl.ca.location"]
        values["ssl.truststore.type"] = "PEM"
        names["ssl.truststore.location"] = "ssl.ca.location"
    if get("ssl.certificate.location") or get("ssl.key.location"):
        if not (get("ssl.certificate.location") and get("ssl.key.location")):
            raise ConfigError("ssl.certificate.location and ssl.key.location must be given together")
        values["ssl.keystore.certificate.chain"] = read_setting_file(
            props["ssl.certificate.location"], "ssl.certificate.location"
        ).decode()
        values["ssl.keystore.key"] = read_setting_file(props["ssl.key.location"], "ssl.key.location").decode()
        values["ssl.keystore.type"] = "PEM"
        names["ssl.keystore.key"] = "ssl.key.location"
        names["ssl.keystore.certificate.chain"] = "ssl.certificate.location"
    elif values["ssl.keystore.location"] and not values["ssl.keystore.type"] and "ssl.ca.location" in props:
        values["ssl.keystore.type"] = "PKCS12"  # librdkafka's key store is always PKCS#12
    algorithm = values["ssl.endpoint.identification.algorithm"]
    if algorithm is not None and algorithm.lower() == "none":  # librdkafka's word for "do not check"
        values["ssl.endpoint.identification.algorithm"] = ""
    elif algorithm is None and "ssl.endpoint.identification.algorithm" in props:
        values["ssl.endpoint.identification.algorithm"] = ""  # Java: an empty value turns it off
    settings = SslSettings.from_getter(values.get, names)
    verification = props.get("enable.ssl.certificate.verification", "true").lower()
    if verification not in ("true", "false"):
        raise ConfigError(f"enable.ssl.certificate.verification={verification!r}: expected true or false")
    return client_context(settings, verify=verification == "true")
