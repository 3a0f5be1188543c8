"""ListenerSecurity: what a listener's connections need for their security protocol (Kafka's
ChannelBuilder): the SSLContext and principal mapper of a TLS listener, and for a SASL listener the
factory of each connection's SASL authenticator (``network.sasl_server.authenticator_factory``).

``SocketServer`` builds one per listener at start (a bad key store, trust store or rule stops the
server with a ``ConfigError`` naming the setting, as Kafka's broker fails to start) and the processor
uses it for every connection the listener accepts: the TLS handshake (within ``ssl_handshake_timeout``),
then the principal (``User:<DN>`` mapped by ``ssl.principal.mapping.rules`` from the client certificate
on an SSL listener; SASL's on SASL listeners).
"""

from __future__ import annotations

import importlib
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from network.ssl_context import SslSettings, server_context
from network.ssl_principal import SslPrincipalMapper
from server_common.config import ConfigError, Endpoint

# How long a TLS client may take to complete its handshake before the connection is closed.
SSL_HANDSHAKE_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class ListenerSecurity:
    listener: str
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: SslPrincipalMapper | None = None
    # For SASL listeners: connection -> its authenticator (network.sasl_server.SaslServerAuthenticator)
    authenticator_factory: Callable[[Any], Any] | None = None
    ssl_handshake_timeout: float = SSL_HANDSHAKE_TIMEOUT_SECONDS

    @property
    def uses_tls(self) -> bool:
        return self.ssl_context is not None

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


PLAINTEXT = ListenerSecurity("PLAINTEXT")


def listener_security(config: Any, endpoint: Endpoint, scram_credentials: Any = None) -> ListenerSecurity:
    """The security of one listener of a server (``config``: its ServerConfig). ``scram_credentials``
    is the server's SCRAM credential lookup (``server_common.scram.ScramCredentialLookup``), which the
    SASL authenticators of SCRAM mechanisms ask."""
    listener, protocol = endpoint.listener, endpoint.security_protocol
    ssl_context = mapper = factory = None
    if protocol in ("SSL", "SASL_SSL"):
        ssl_context = server_context(SslSettings.for_listener(config, listener, protocol))
    if protocol == "SSL":
        rules = config.for_listener(listener, "ssl.principal.mapping.rules")
        try:
            mapper = SslPrincipalMapper(rules)
        except ValueError as e:
            raise ConfigError(f"ssl.principal.mapping.rules={rules!r} is invalid: {e}") from None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        # network.sasl_server is imported only when a SASL listener is configured.
        sasl_server = importlib.import_module("network.sasl_server")
        factory = sasl_server.authenticator_factory(config, listener, scram_credentials)
    return ListenerSecurity(listener, protocol, ssl_context, mapper, factory)
