"""``--command-config FILE``: the client settings of every ``samsa`` tool that connects, as Kafka's tools
take them (kafka-topics.sh, kafka-consumer-groups.sh, ... ``--command-config``; the console tools'
``--producer.config`` / ``--consumer.config``).

The file is a Java properties file of client settings, in the Java client's names or librdkafka's (so
the ``client.properties`` that ``samsa up --secure`` writes serves as it is)::

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="admin" password="admin-secret";
    ssl.truststore.type=PEM
    ssl.truststore.location=/path/to/ca.pem

``client_security`` turns it into a ``network.client_security.ClientSecurity`` (TLS context, SASL
mechanism and credentials) for the tools on Samsa's own ``AdminClient``/``NetworkClient``;
``aiokafka_security`` gives the same as aiokafka's keywords for the console tools. What the file holds
besides security settings is returned by ``read_command_config`` for the tools that use more of it (the
console tools' producer/consumer properties); the admin tools ignore it, as Kafka's Admin client only
warns about settings it does not know.

A file that cannot be read, or a bad setting in it, is a ``CommandConfigError`` (an ``AdminError``: each
tool reports it as it reports a failed request; Kafka's tools fail the same way, from the Admin client's
constructor).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from network.client_security import ClientSecurity
from server_common.config import ConfigError, read_properties
from tools.admin_client import AdminError

# Kafka's help text for the option (TopicCommand, ConsumerGroupCommand, ...).
HELP = "Property file containing configs to be passed to Admin Client."
# Settings that say how to connect, not what to do: ClientSecurity's part of a client config.
SECURITY_PREFIXES = ("ssl.", "sasl.")
SECURITY_SETTINGS = frozenset({"security.protocol", "enable.ssl.certificate.verification"})


class CommandConfigError(AdminError):
    """The --command-config file cannot be read, or a setting in it is bad (the message names it)."""


def add_argument(parser: argparse.ArgumentParser, *names: str, help: str = HELP) -> None:
    """Adds ``--command-config FILE`` (or the names given) to a tool's parser, as ``args.command_config``."""
    parser.add_argument(
        *(names or ("--command-config",)),
        dest="command_config",
        metavar="command config property file",
        help=help,
    )


def read_command_config(path: str | Path | None) -> dict[str, str]:
    """The settings of the file (Java properties), {} for None."""
    if path is None:
        return {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise CommandConfigError(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise CommandConfigError(f"{path} is not a properties file (UTF-8 text): {e}") from None
    return read_properties(text)


def is_security_setting(name: str) -> bool:
    return name in SECURITY_SETTINGS or name.startswith(SECURITY_PREFIXES)


def security_from(props: Mapping[str, str], source: str = "--command-config") -> ClientSecurity | None:
    """The ClientSecurity of a client config (None when it says nothing about security: PLAINTEXT)."""
    settings = {k: v for k, v in props.items() if is_security_setting(k)}
    if not settings:
        return None
    try:
        return ClientSecurity.from_client_properties(settings)
    except ConfigError as e:
        raise CommandConfigError(f"{source}: {e}") from None


def client_security(path: str | Path | None) -> ClientSecurity | None:
    """The ClientSecurity of a --command-config file (None without one, or for a plaintext one)."""
    return security_from(read_command_config(path), str(path))


def aiokafka_security(security: ClientSecurity | None) -> dict[str, Any]:
    """aiokafka's keywords (producer, consumer, admin) for ``security``: {} for PLAINTEXT."""
    if security is None or security.protocol == "PLAINTEXT":
        return {}
    kwargs: dict[str, Any] = {"security_protocol": security.protocol}
    if security.uses_tls:
        kwargs["ssl_context"] = security.ssl_context
    if security.uses_sasl:
        kwargs["sasl_mechanism"] = security.sasl_mechanism
        kwargs["sasl_plain_username"] = security.username
        kwargs["sasl_plain_password"] = security.password
    return kwargs
