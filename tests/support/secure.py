"""A one-broker cluster with a SASL_PLAINTEXT listener (named ``SASL``) beside its PLAINTEXT one, for the
integration tests of SASL, SCRAM and ACLs: ``sasl_cluster`` builds it (not started: each fixture starts
it as it needs), ``SecuredBroker`` hands out the addresses and confluent-kafka settings per user.

The PLAINTEXT listener is the inter-broker one and the tests' administrator (``User:ANONYMOUS``, a super
user when the authorizer is on); the SASL listener's PLAIN users are ``PLAIN_USERS``, each with the
password ``<user>-secret``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.support.cluster import Cluster, free_port

__all__ = [
    "ACL_AUTHORIZER",
    "PLAIN_JAAS",
    "PLAIN_USERS",
    "SecuredBroker",
    "allow",
    "create_acls",
    "sasl_cluster",
]

ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
PLAIN_USERS = ("alice", "bob")
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{user}="{user}-secret"' for user in PLAIN_USERS)
    + ";"
)


class SecuredBroker:
    """Broker 1 of ``cluster``, its PLAINTEXT address ``bootstrap`` and its SASL one ``sasl_bootstrap``."""

    def __init__(self, cluster: Cluster, zookeeper: str, sasl_port: int) -> None:
        self.cluster = cluster
        self.zookeeper = zookeeper
        self.broker = cluster.broker(1)
        self.sasl_port = sasl_port
        self.bootstrap = f"{self.broker.host}:{self.broker.port}"
        self.sasl_bootstrap = f"{self.broker.host}:{sasl_port}"

    def as_user(
        self, user: str, mechanism: str = "PLAIN", password: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        """confluent-kafka settings for ``user`` on the SASL listener (password ``<user>-secret``)."""
        return {
            "bootstrap.servers": self.sasl_bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": f"{user}-secret" if password is None else password,
            **extra,
        }

    def superuser(self) -> dict[str, Any]:
        """confluent-kafka settings for the PLAINTEXT listener (unauthenticated)."""
        return {"bootstrap.servers": self.bootstrap}

    def admin(self, user: str | None = None) -> Any:
        """confluent-kafka's AdminClient as ``user`` on the SASL listener (None: the super user)."""
        from confluent_kafka import admin

        return admin.AdminClient(self.superuser() if user is None else self.as_user(user))

    def command_config(self, user: str) -> str:
        """A tools' --command-config file for ``user`` on the SASL listener (PLAIN)."""
        path = Path(self.broker.directory) / f"{user}.properties"
        path.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{user}" password="{user}-secret";\n'
        )
        return str(path)


def sasl_cluster(
    workdir: Path,
    zookeeper: str,
    mechanisms: str = "PLAIN",
    authorizer: bool = True,
    overrides: Mapping[str, str] | None = None,
) -> SecuredBroker:
    """A one-broker ``Cluster`` in ``workdir`` (not started) with the SASL listener offering
    ``mechanisms`` (PLAIN: ``PLAIN_JAAS``'s users) and, with ``authorizer``, Kafka's AclAuthorizer with
    ``User:ANONYMOUS`` (the PLAINTEXT listener: the cluster's own tools and controller) a super user."""
    cluster = Cluster(workdir, zookeeper, brokers=1)
    broker = cluster.broker(1)
    sasl_port = free_port()
    settings = {
        "listeners": f"PLAINTEXT://{broker.host}:{broker.port},SASL://{broker.host}:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.sasl.sasl.enabled.mechanisms": mechanisms,
    }
    if "PLAIN" in mechanisms.split(","):
        settings["listener.name.sasl.plain.sasl.jaas.config"] = PLAIN_JAAS
    if authorizer:
        settings["authorizer.class.name"] = ACL_AUTHORIZER
        settings["super.users"] = "User:ANONYMOUS"
    broker.overrides.update({**settings, **(overrides or {})})
    return SecuredBroker(cluster, zookeeper, sasl_port)


def allow(
    resource_type: Any, name: str, operation: Any, pattern: Any = None, principal: str = "User:alice"
) -> Any:
    """confluent-kafka's AclBinding allowing ``principal`` ``operation`` on a resource from any host."""
    from confluent_kafka import admin

    return admin.AclBinding(
        resource_type,
        name,
        pattern or admin.ResourcePatternType.LITERAL,
        principal,
        "*",
        operation,
        admin.AclPermissionType.ALLOW,
    )


def create_acls(secured: SecuredBroker, bindings: Iterable[Any], timeout: float = 20) -> None:
    """Creates ``bindings`` as the super user, waiting for every one."""
    client = secured.admin()  # kept: the futures fail once their client is collected
    for future in client.create_acls(list(bindings), request_timeout=timeout).values():
        future.result()
