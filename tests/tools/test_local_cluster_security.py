"""The secure mode of LocalCluster / ``samsa up --secure`` without starting a process: the CA and node
certificates it makes (and keeps), the users' passwords (kept, private), every node's settings (they parse
as a broker's and a controller's, and give the servers' own client the inter-broker user), the admin's
``client.properties`` in librdkafka's names (confluent-kafka accepts it), the TLS readiness probe, and a
plain cluster left exactly as it was."""

from __future__ import annotations

import ssl
import stat
import threading
from pathlib import Path

import pytest
from cryptography import x509

from broker.config import KafkaConfig
from controller.config import ControllerConfig
from network.client_security import ClientSecurity
from server_common.config import read_properties
from tools import up
from tools.local_cluster import LocalCluster
from tools.local_cluster_security import (
    ADMIN_USER,
    AUTHORIZER,
    BROKER_USER,
    CLIENT_PROPERTIES,
    CREDENTIALS_FILE,
    JAVA_CLIENT_PROPERTIES,
    SecureSetup,
)
from tools.probe import answers_api_versions

ZK = "127.0.0.1:1/unused"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _names(cert_path: Path) -> set[str]:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(sans.get_values_for_type(x509.DNSName)) | {
        str(ip) for ip in sans.get_values_for_type(x509.IPAddress)
    }


def test_secure_setup_makes_a_ca_and_certificates_naming_each_node_host_and_keeps_them(
    tmp_path: Path,
) -> None:
    setup = SecureSetup(tmp_path / "security")
    setup.prepare({"broker-1": ["127.0.0.2"], "controller-9001": ["ctl.example"]})
    directory = tmp_path / "security"
    assert _mode(directory) == 0o700
    assert _names(directory / "broker-1.pem") == {"127.0.0.2", "127.0.0.1", "localhost"}
    assert _names(directory / "controller-9001.pem") == {"ctl.example", "127.0.0.1", "localhost"}
    for private in ("ca-key.pem", "broker-1-key.pem", "broker-1-keystore.pem", CREDENTIALS_FILE):
        assert _mode(directory / private) == 0o600, private
    passwords = setup.passwords
    assert set(passwords) == {ADMIN_USER, BROKER_USER} and len(set(passwords.values())) == 2

    # A later run keeps the CA, the certificates that still fit and the passwords...
    ca, cert = (directory / "ca.pem").read_bytes(), (directory / "broker-1.pem").read_bytes()
    again = SecureSetup(directory)
    again.prepare({"broker-1": ["127.0.0.2"], "controller-9001": ["ctl.example"]})
    assert (directory / "ca.pem").read_bytes() == ca and (directory / "broker-1.pem").read_bytes() == cert
    assert again.passwords == passwords
    # ...and reissues the certificate of a node that moved, from the same CA.
    again.prepare({"broker-1": ["127.0.0.3"]})
    assert "127.0.0.3" in _names(directory / "broker-1.pem")
    assert (directory / "ca.pem").read_bytes() == ca


def test_secure_node_settings_parse_and_the_servers_connect_as_the_broker_user(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "run", brokers=2, controllers=1, zookeeper=ZK, secure=True)
    assert cluster.security is not None
    cluster.security.prepare(
        {n.name: [n.host] for n in [*cluster.controllers.values(), *cluster.brokers.values()]}
    )
    broker_props = cluster.broker(1).config()
    controller_props = next(iter(cluster.controllers.values())).config()
    for props, config_class in ((broker_props, KafkaConfig), (controller_props, ControllerConfig)):
        config = config_class(props)
        assert [e.security_protocol for e in config.listeners] == ["SASL_SSL"]
        assert props["authorizer.class.name"] == AUTHORIZER
        assert props["super.users"] == f"User:{ADMIN_USER};User:{BROKER_USER}"
        assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
        security = ClientSecurity.for_inter_broker(config)
        assert (security.protocol, security.sasl_mechanism, security.username) == (
            "SASL_SSL",
            "SCRAM-SHA-512",
            BROKER_USER,
        )
        assert security.password == cluster.security.broker_password
        assert security.ssl_context is not None and security.check_hostname
    assert isinstance(ControllerConfig(controller_props).super_users, frozenset)
    assert broker_props["listeners"] == f"SASL_SSL://127.0.0.1:{cluster.broker(1).port}"
    assert broker_props["ssl.keystore.location"].endswith("security/broker-1-keystore.pem")


def test_overrides_still_win_over_the_secure_settings(tmp_path: Path) -> None:
    cluster = LocalCluster(
        tmp_path / "run",
        zookeeper=ZK,
        secure=True,
        overrides={"super.users": "User:root", "allow.everyone.if.no.acl.found": "true"},
    )
    assert cluster.broker(1).config()["super.users"] == "User:root"
    controller = next(iter(cluster.controllers.values())).config()
    assert controller["super.users"] == "User:root"
    assert controller["allow.everyone.if.no.acl.found"] == "true"


def test_client_properties_are_librdkafka_names_readable_by_confluent_kafka_and_private(
    tmp_path: Path,
) -> None:
    setup = SecureSetup(tmp_path / "security")
    setup.prepare({})
    path = setup.write_client_files(tmp_path, "127.0.0.1:9092")
    assert path == tmp_path / CLIENT_PROPERTIES and _mode(path) == 0o600
    props = read_properties(path.read_text())
    assert props == {
        "bootstrap.servers": "127.0.0.1:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": ADMIN_USER,
        "sasl.password": setup.admin_password,
        "ssl.ca.location": str(tmp_path / "security" / "ca.pem"),
    }
    security = ClientSecurity.from_client_properties(props)
    assert (security.protocol, security.username, security.password) == (
        "SASL_SSL",
        ADMIN_USER,
        setup.admin_password,
    )
    java = read_properties((tmp_path / JAVA_CLIENT_PROPERTIES).read_text())
    assert java["ssl.truststore.type"] == "PEM" and 'username="admin"' in java["sasl.jaas.config"]
    assert ClientSecurity.from_client_properties(java).password == setup.admin_password
    confluent_kafka = pytest.importorskip("confluent_kafka")
    producer = confluent_kafka.Producer(props)  # an unknown librdkafka property would raise here
    producer.flush(0)


def test_plain_cluster_settings_are_unchanged(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "run", zookeeper=ZK)
    props = cluster.broker(1).config()
    assert props["listeners"].startswith("PLAINTEXT://")
    assert not any(k.startswith(("ssl.", "sasl.", "listener.name.")) for k in props)
    assert "authorizer.class.name" not in props
    assert cluster.client_properties_path is None and cluster.client_security() is None
    assert cluster.client_properties() == {"bootstrap.servers": cluster.bootstrap}
    assert not (tmp_path / "run" / "security").exists()


def test_samsa_up_takes_secure() -> None:
    assert up._up_parser().parse_args(["--secure"]).secure is True
    assert up._up_parser().parse_args([]).secure is False


def test_probe_speaks_tls_with_the_clusters_ca_and_checks_the_host(tmp_path: Path) -> None:
    """The readiness probe of a secure node: TLS checked against the CA and the host; a plaintext
    probe of a TLS port gets no answer."""
    import socket

    setup = SecureSetup(tmp_path / "security")
    setup.prepare({"broker-1": ["127.0.0.1"]})
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(setup.keystore_path("broker-1"))
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:  # answers one ApiVersions v0 request per TLS connection
        from protocol.api import ApiKey, api
        from protocol.frame import encode_response
        from protocol.framing import read_frame
        from protocol.messages import ApiVersionsResponse

        for _ in range(2):
            conn, _ = listener.accept()
            try:
                with server_context.wrap_socket(conn, server_side=True) as tls:
                    read_frame(tls.recv_into)
                    definition = api(ApiKey.API_VERSIONS)
                    assert definition is not None
                    answer = ApiVersionsResponse(error_code=0, api_keys=[])
                    tls.sendall(b"".join(bytes(p) for p in encode_response(definition, 0, 1, answer)))
            except (OSError, ValueError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        assert answers_api_versions("127.0.0.1", port, timeout=5, ssl_context=setup.ssl_context())
        assert not answers_api_versions("127.0.0.1", port, timeout=2)  # plaintext on a TLS port
    finally:
        listener.close()
        thread.join(5)
