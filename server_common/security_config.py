"""The TLS and SASL settings a Samsa server process reads, with Kafka 3.9's names and defaults.

Brokers and controllers both serve secured listeners and connect to secured listeners of others, so
both define these (``define_security``); each may be given per listener as
``listener.name.<listener>.<setting>`` (a SASL mechanism's as ``listener.name.<listener>.<mechanism>.
<setting>``), read with ``ServerConfig.for_listener``.
"""

from __future__ import annotations

from server_common.config import ConfigDef, ConfigType, at_least, one_of

_B, _S, _I, _L, _LIST, _P = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.LIST,
    ConfigType.PASSWORD,
)

KEYSTORE_TYPES = ("JKS", "PKCS12", "PEM")
SSL_CLIENT_AUTH = ("required", "requested", "none")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def define_security(definition: ConfigDef) -> ConfigDef:
    """Adds the TLS and SASL settings (Kafka's SslConfigs, BrokerSecurityConfigs and SaslConfigs)."""
    return (
        definition
        # TLS: the key store (PKCS12 or PEM; Kafka's default type JKS cannot be read here)
        .define("ssl.keystore.type", _S, "JKS", one_of(*KEYSTORE_TYPES))
        .define("ssl.keystore.location", _S, None)
        .define("ssl.keystore.password", _P, None)
        .define("ssl.key.password", _P, None)
        .define("ssl.keystore.key", _P, None)
        .define("ssl.keystore.certificate.chain", _P, None)
        # TLS: the trust store
        .define("ssl.truststore.type", _S, "JKS", one_of(*KEYSTORE_TYPES))
        .define("ssl.truststore.location", _S, None)
        .define("ssl.truststore.password", _P, None)
        .define("ssl.truststore.certificates", _P, None)
        # TLS: the handshake
        .define("ssl.protocol", _S, "TLSv1.3")
        .define("ssl.enabled.protocols", _LIST, "TLSv1.2,TLSv1.3")
        .define("ssl.cipher.suites", _LIST, "")
        .define("ssl.client.auth", _S, "none", one_of(*SSL_CLIENT_AUTH))
        .define("ssl.endpoint.identification.algorithm", _S, "https")
        .define("ssl.principal.mapping.rules", _S, "DEFAULT")
        # SASL
        .define("sasl.enabled.mechanisms", _LIST, "GSSAPI")
        .define("sasl.mechanism.inter.broker.protocol", _S, "GSSAPI")
        .define("sasl.jaas.config", _P, None)
        .define("sasl.server.max.receive.size", _I, 524288, at_least(1))
        # KIP-368: 0 means a session never expires
        .define("connections.max.reauth.ms", _L, 0, at_least(0))
        # How long the server waits before answering a failed authentication and closing the connection
        .define("connection.failed.authentication.delay.ms", _I, 100, at_least(0))
    )
