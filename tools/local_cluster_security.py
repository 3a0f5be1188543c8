"""The secure mode of a ``LocalCluster`` (``samsa up --secure``, ``LocalCluster(secure=True)``) and of the
secured docker compose variant (``python -m tools.local_cluster_security``).

Everything it needs is made at run time in ``DIR/security/`` (kept across runs, wiped with the data dir):

    ca.pem, ca-key.pem               a CA of the cluster's own (tools/certificates.py)
    broker-1.pem, broker-1-key.pem   each node's certificate (SANs: its host, localhost, 127.0.0.1) and key,
    broker-1-keystore.pem            and both in one file: Kafka's ``ssl.keystore.type=PEM`` key store
    credentials.json                 the generated passwords of the users below (mode 0600)

Every broker and controller then has one listener, ``SASL_SSL://host:port`` (TLS, server certificates
only), with SCRAM-SHA-512 as its only SASL mechanism, for clients and between servers alike
(``security.inter.broker.protocol=SASL_SSL``, ``sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512``); the
ACL authorizer is on (``authorizer.class.name=kafka.security.authorizer.AclAuthorizer``) and nobody but
the super users may do anything until ACLs say so. Two users exist, both super users:

- ``admin``: the user's; its client settings are written to ``DIR/client.properties`` in librdkafka's
  names (``security.protocol``, ``sasl.mechanism``, ``sasl.username``, ``sasl.password``,
  ``ssl.ca.location``: confluent-kafka, kcat ``-F`` and every ``samsa`` tool's ``--command-config`` read
  it) and to ``DIR/client-java.properties`` in the Java client's (``sasl.jaas.config``, a PEM trust store);
- ``broker``: the servers' own, in each node's ``listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config``
  (Kafka's broker takes the login module's username and password as its client credentials).

Their SCRAM credentials (4096 iterations) are written to ZooKeeper (``/config/users/<user>``, Kafka's
format, zk/user_configs.py) before any broker starts, as Kafka's docs have ``kafka-configs.sh
--zookeeper`` do for the inter-broker user.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import secrets
import ssl
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from network.client_security import ClientSecurity

SECURITY_DIR = "security"
CREDENTIALS_FILE = "credentials.json"
CLIENT_PROPERTIES = "client.properties"
JAVA_CLIENT_PROPERTIES = "client-java.properties"
LISTENER = "SASL_SSL"
MECHANISM = "SCRAM-SHA-512"
ITERATIONS = 4096
ADMIN_USER = "admin"
BROKER_USER = "broker"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
# Always in a node's certificate besides its own host: clients on the same machine may use either.
LOCAL_NAMES = ("localhost", "127.0.0.1")


def _quoted(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def jaas_config(username: str, password: str) -> str:
    """A ScramLoginModule JAAS entry (values quoted, ``\\`` and ``"`` escaped as JAAS reads them)."""
    return f"{SCRAM_LOGIN_MODULE} required username={_quoted(username)} password={_quoted(password)};"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _write_private(path: Path, text: str) -> None:
    """Writes a file only its owner may read (it holds a password)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, 0o600)


def write_properties(path: Path, properties: Mapping[str, str], header: str) -> None:
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{key}={value}" for key, value in properties.items()]
    _write_private(path, "\n".join(lines) + "\n")


class SecureSetup:
    """The CA, certificates, users and settings of a secured cluster, in ``directory``."""

    def __init__(self, directory: str | Path, passwords: Mapping[str, str] | None = None) -> None:
        self.directory = Path(directory).resolve()
        self._given_passwords = dict(passwords or {})
        self._passwords: dict[str, str] | None = None

    # -- users -----------------------------------------------------------------------------------

    @property
    def passwords(self) -> dict[str, str]:
        """{user: password}: given, else those an earlier run generated, else new ones (``prepare``
        saves them)."""
        if self._passwords is None:
            saved = self._saved_passwords()
            self._passwords = {
                user: self._given_passwords.get(user) or saved.get(user) or secrets.token_urlsafe(18)
                for user in (ADMIN_USER, BROKER_USER)
            }
        return self._passwords

    def _saved_passwords(self) -> dict[str, str]:
        try:
            found = json.loads((self.directory / CREDENTIALS_FILE).read_text())
            return {str(k): str(v) for k, v in found.items()}
        except (OSError, ValueError, AttributeError):
            return {}

    @property
    def admin_password(self) -> str:
        return self.passwords[ADMIN_USER]

    @property
    def broker_password(self) -> str:
        return self.passwords[BROKER_USER]

    @property
    def super_users(self) -> str:
        return f"User:{ADMIN_USER};User:{BROKER_USER}"

    # -- certificates ----------------------------------------------------------------------------

    @property
    def ca_path(self) -> Path:
        return self.directory / "ca.pem"

    def keystore_path(self, node: str) -> Path:
        return self.directory / f"{node}-keystore.pem"

    def prepare(self, nodes: Mapping[str, Iterable[str]]) -> None:
        """The CA (made once) and a certificate for each node {name: hosts} whose certificate is missing
        or does not name all its hosts (a node moved to another address); the users' passwords."""
        from tools.certificates import create_ca, issue_certificate, load_ca

        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        ca = load_ca(self.directory) if self.ca_path.exists() else create_ca(self.directory, "Samsa local CA")
        for node, hosts in nodes.items():
            wanted = set(hosts) | set(LOCAL_NAMES)
            if wanted <= self._certificate_names(node):
                continue
            issue_certificate(
                ca,
                self.directory,
                node,
                hosts=sorted(h for h in wanted if not _is_ip(h)),
                ips=sorted(h for h in wanted if _is_ip(h)),
            )
        if self._saved_passwords() != self.passwords:
            _write_private(self.directory / CREDENTIALS_FILE, json.dumps(self.passwords, indent=1) + "\n")

    def _certificate_names(self, node: str) -> set[str]:
        """The DNS names and addresses the node's certificate is valid for (empty: no certificate)."""
        from cryptography import x509

        if not self.keystore_path(node).exists():
            return set()
        try:
            cert = x509.load_pem_x509_certificate((self.directory / f"{node}.pem").read_bytes())
            sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except (OSError, ValueError, x509.ExtensionNotFound):
            return set()
        names = set(sans.get_values_for_type(x509.DNSName))
        return names | {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}

    # -- settings --------------------------------------------------------------------------------

    def listener(self, host: str, port: int) -> str:
        return f"{LISTENER}://{host}:{port}"

    def server_settings(self, node: str, listener_names: Iterable[str] | None = None) -> dict[str, str]:
        """A broker's or controller's settings besides ``listeners`` (Kafka's names). Without
        ``listener_names`` its one listener is named ``SASL_SSL`` and is the inter-broker one
        (``security.inter.broker.protocol``); else each listener named gets the broker user's JAAS
        configuration, and ``inter.broker.listener.name`` is the caller's to set (Kafka refuses both)."""
        if listener_names is None:
            names, inter_broker = [LISTENER], {"security.inter.broker.protocol": LISTENER}
        else:
            names, inter_broker = list(listener_names), {}
        jaas = jaas_config(BROKER_USER, self.broker_password)
        return {
            **inter_broker,
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            **{f"listener.name.{name.lower()}.{MECHANISM.lower()}.sasl.jaas.config": jaas for name in names},
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystore_path(node)),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_path),
            "authorizer.class.name": AUTHORIZER,
            "super.users": self.super_users,
        }

    def client_properties(
        self, bootstrap: str | None = None, ca_location: str | None = None
    ) -> dict[str, str]:
        """The admin's client settings in librdkafka's names (``ca_location``: where clients find the
        CA's certificate, if not where it is made)."""
        props = {"bootstrap.servers": bootstrap} if bootstrap else {}
        return {
            **props,
            "security.protocol": LISTENER,
            "sasl.mechanism": MECHANISM,
            "sasl.username": ADMIN_USER,
            "sasl.password": self.admin_password,
            "ssl.ca.location": ca_location or str(self.ca_path),
        }

    def java_client_properties(
        self, bootstrap: str | None = None, ca_location: str | None = None
    ) -> dict[str, str]:
        """The admin's client settings in the Java client's names."""
        props = {"bootstrap.servers": bootstrap} if bootstrap else {}
        return {
            **props,
            "security.protocol": LISTENER,
            "sasl.mechanism": MECHANISM,
            "sasl.jaas.config": jaas_config(ADMIN_USER, self.admin_password),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": ca_location or str(self.ca_path),
        }

    def write_client_files(
        self, directory: str | Path, bootstrap: str | None = None, ca_location: str | None = None
    ) -> Path:
        """``client.properties`` (librdkafka's names) and ``client-java.properties`` in ``directory``;
        returns the first's path."""
        directory = Path(directory)
        path = directory / CLIENT_PROPERTIES
        write_properties(
            path,
            self.client_properties(bootstrap, ca_location),
            "The admin (a super user) of a secured Samsa cluster, in librdkafka's names: confluent-kafka,\n"
            "kcat -F, and every samsa tool's --command-config. Written by samsa up --secure.",
        )
        write_properties(
            directory / JAVA_CLIENT_PROPERTIES,
            self.java_client_properties(bootstrap, ca_location),
            "The admin (a super user) of a secured Samsa cluster, in the Java client's names\n"
            "(kafka-*.sh --command-config). Written by samsa up --secure.",
        )
        return path

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context trusting the cluster's CA (the readiness probes')."""
        return ssl.create_default_context(cafile=str(self.ca_path))

    def client_security(self) -> ClientSecurity:
        """The admin's ``network.client_security.ClientSecurity`` (LocalCluster's own requests)."""
        from network.client_security import ClientSecurity

        return ClientSecurity.from_client_properties(self.client_properties())

    # -- ZooKeeper -------------------------------------------------------------------------------

    def write_credentials(self, zookeeper_connect: str, timeout: float = 30.0) -> list[str]:
        """Stores the users' SCRAM credentials in ZooKeeper unless the stored ones already match their
        passwords; returns the users written."""
        return asyncio.run(write_scram_credentials(zookeeper_connect, self.passwords, timeout))


async def write_scram_credentials(
    zookeeper_connect: str, passwords: Mapping[str, str], timeout: float = 30.0
) -> list[str]:
    """SCRAM-SHA-512 credentials of ``passwords`` in ZooKeeper (``/config/users/<user>``, with the change
    notification brokers watch), each left alone if it already verifies its password."""
    from zk.client import ZkClient
    from zk.user_configs import UserConfigs

    zk = ZkClient(zookeeper_connect, int(timeout * 1000), operation_timeout=timeout)
    await zk.start(timeout=timeout)
    written = []
    try:
        users = UserConfigs(zk)
        for user, password in passwords.items():
            found = await users.scram_credential(MECHANISM, user)
            if found is not None and found.verify_password(MECHANISM, password):
                continue
            await users.set_scram_password(user, password, MECHANISM, ITERATIONS)
            written.append(user)
    finally:
        await zk.close()
    return written


# -- the docker compose variant's one-shot setup -------------------------------------------------------


def _node_hosts(parser: argparse.ArgumentParser, items: list[str], flag: str) -> dict[str, list[str]]:
    nodes: dict[str, list[str]] = {}
    for item in items:
        name, sep, hosts = item.partition("=")
        if not sep or not name or not hosts:
            parser.error(f"{flag} {item!r} is not NAME=HOST[,HOST...]")
        nodes[name] = [h.strip() for h in hosts.split(",") if h.strip()]
    return nodes


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.local_cluster_security --dir DIR --zookeeper HOST:PORT --broker NAME=HOST,...
    --controller NAME=HOST,... --listener-name INTERNAL ...``: what a secured cluster of separately
    started servers (docker-compose.secure.yml) needs before they start: the CA and each node's
    certificate in DIR (kept if there), the admin's and the brokers' SCRAM credentials in ZooKeeper
    (passwords from ``SAMSA_ADMIN_PASSWORD`` and ``SAMSA_BROKER_PASSWORD``, else generated and kept in
    DIR), each node's secured settings in ``DIR/NAME.properties`` (for ``--config``; a broker's start with
    ``--base-config``'s; mode 0600: the broker user's password is in them), and ``DIR/client.properties``
    for clients (``--bootstrap`` in it)."""
    parser = argparse.ArgumentParser(
        prog="python -m tools.local_cluster_security",
        description="Certificates, SCRAM users, server and client settings of a secured Samsa cluster.",
    )
    parser.add_argument("--dir", required=True, help="where the CA, certificates and settings go")
    parser.add_argument("--zookeeper", required=True, metavar="HOST:PORT[/CHROOT]")
    parser.add_argument("--broker", action="append", default=[], metavar="NAME=HOST[,HOST...]",
                        help="a broker: its certificate names these hosts (repeatable)")  # fmt: skip
    parser.add_argument("--controller", action="append", default=[], metavar="NAME=HOST[,HOST...]",
                        help="a controller: its certificate names these hosts (repeatable)")  # fmt: skip
    parser.add_argument("--listener-name", action="append", default=[], metavar="NAME",
                        help="a SASL_SSL listener of the servers (repeatable; default SASL_SSL)")  # fmt: skip
    parser.add_argument("--base-config", metavar="FILE", help="a brokers' server.properties to start from")
    parser.add_argument("--bootstrap", help="bootstrap.servers written to client.properties")
    parser.add_argument(
        "--ca-location",
        metavar="PATH",
        help="the CA certificate's path in client.properties (default: DIR/ca.pem)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="for ZooKeeper (default 60 s)")
    args = parser.parse_args(argv)
    brokers = _node_hosts(parser, args.broker, "--broker")
    controllers = _node_hosts(parser, args.controller, "--controller")
    passwords = {
        ADMIN_USER: os.environ.get("SAMSA_ADMIN_PASSWORD", ""),
        BROKER_USER: os.environ.get("SAMSA_BROKER_PASSWORD", ""),
    }
    setup = SecureSetup(args.dir, {user: pw for user, pw in passwords.items() if pw})
    setup.prepare({**brokers, **controllers})
    base = Path(args.base_config).read_text(encoding="utf-8").rstrip("\n") + "\n" if args.base_config else ""
    for node in [*brokers, *controllers]:
        settings = setup.server_settings(node, args.listener_name or None)
        header = f"{node}'s security settings, written by python -m tools.local_cluster_security"
        lines = [f"# {header}", *(f"{k}={v}" for k, v in settings.items())]
        _write_private(
            setup.directory / f"{node}.properties",
            (base if node in brokers else "") + "\n".join(lines) + "\n",
        )
    written = setup.write_credentials(args.zookeeper, args.timeout)
    path = setup.write_client_files(args.dir, args.bootstrap, args.ca_location)
    users = ", ".join(written) or "nobody (they were current)"
    print(f"certificates and settings in {setup.directory}; SCRAM credentials written for {users}")
    print(f"client.properties={path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
