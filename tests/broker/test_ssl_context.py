"""TLS settings to SSLContexts (key stores PEM, inline PEM and PKCS12; JKS refused), the listener
checks of the server config, and ClientSecurity from a client's properties (Java and librdkafka names)
and for the inter-broker listener."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from broker.config import KafkaConfig
from controller.config import ControllerConfig
from network.client_security import ClientSecurity, jaas_options
from network.ssl_context import SslSettings, client_context, server_context
from server_common.config import ConfigError
from tools.certificates import CertificateAuthority, IssuedCertificate, create_ca, issue_certificate

BASE = {"broker.id": "1", "zookeeper.connect": "zk:2181"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[CertificateAuthority, IssuedCertificate, Path]:
    directory = tmp_path_factory.mktemp("pki")
    ca = create_ca(directory)
    server = issue_certificate(
        ca,
        directory,
        "broker",
        ["localhost"],
        ["127.0.0.1"],
        pkcs12_password="store-pw",
        key_password="key-pw",
    )
    return ca, server, directory


def _settings(**values: str) -> SslSettings:
    return SslSettings.from_getter(lambda name: values.get(name.replace(".", "_")))


def test_certificates_are_written_with_private_keys_0600(pki: tuple) -> None:
    ca, server, _ = pki
    for path in (ca.key_path, server.key_path, server.keystore_pem_path, server.pkcs12_path):
        assert path.stat().st_mode & 0o777 == 0o600, path
    assert server.cert_path.read_text().count("BEGIN CERTIFICATE") == 2  # the leaf and the CA


def test_a_pem_key_store_file_with_an_encrypted_key_loads(pki: tuple) -> None:
    _, server, _ = pki
    ctx = server_context(
        _settings(
            ssl_keystore_type="PEM",
            ssl_keystore_location=str(server.keystore_pem_path),
            ssl_key_password="key-pw",
        )
    )
    assert ctx.verify_mode == ssl.CERT_NONE


def test_an_encrypted_pem_key_without_its_password_is_refused_naming_the_setting(pki: tuple) -> None:
    _, server, _ = pki
    with pytest.raises(ConfigError, match=r"ssl\.key\.password"):
        server_context(
            _settings(ssl_keystore_type="PEM", ssl_keystore_location=str(server.keystore_pem_path))
        )
    with pytest.raises(ConfigError, match=r"ssl\.key\.password"):
        server_context(
            _settings(
                ssl_keystore_type="PEM",
                ssl_keystore_location=str(server.keystore_pem_path),
                ssl_key_password="wrong",
            )
        )


def test_a_pem_key_store_file_may_hold_the_chain_before_the_key(pki: tuple, tmp_path: Path) -> None:
    _, server, _ = pki
    swapped = tmp_path / "swapped.pem"
    swapped.write_text(server.cert_pem + server.key_pem)
    server_context(
        _settings(ssl_keystore_type="PEM", ssl_keystore_location=str(swapped), ssl_key_password="key-pw")
    )


def test_an_inline_pem_key_store_loads(pki: tuple) -> None:
    _, server, _ = pki
    server_context(
        _settings(
            ssl_keystore_type="PEM",
            ssl_keystore_key=server.key_pem,
            ssl_keystore_certificate_chain=server.cert_pem,
            ssl_key_password="key-pw",
        )
    )


def test_a_pkcs12_key_store_loads_also_when_its_type_is_left_at_jks(pki: tuple) -> None:
    _, server, _ = pki
    for kind in ("PKCS12", "JKS"):  # Java's JKS key store reads PKCS#12 files too
        server_context(
            _settings(
                ssl_keystore_type=kind,
                ssl_keystore_location=str(server.pkcs12_path),
                ssl_keystore_password="store-pw",
            )
        )
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        server_context(
            _settings(
                ssl_keystore_type="PKCS12",
                ssl_keystore_location=str(server.pkcs12_path),
                ssl_keystore_password="wrong",
            )
        )


def test_a_java_jks_key_store_is_refused_with_what_to_do(tmp_path: Path) -> None:
    jks = tmp_path / "server.keystore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02" + b"\x00" * 64)
    with pytest.raises(ConfigError, match=r"Java key store \(JKS\).*PKCS12"):
        server_context(_settings(ssl_keystore_location=str(jks), ssl_keystore_password="pw"))


def test_a_missing_key_store_file_is_refused_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location.*cannot be read"):
        server_context(_settings(ssl_keystore_type="PEM", ssl_keystore_location=str(tmp_path / "none.pem")))


def test_client_auth_and_protocols_and_ciphers_apply(pki: tuple) -> None:
    ca, server, _ = pki
    ctx = server_context(
        _settings(
            ssl_keystore_type="PKCS12",
            ssl_keystore_location=str(server.pkcs12_path),
            ssl_keystore_password="store-pw",
            ssl_truststore_type="PEM",
            ssl_truststore_location=str(ca.cert_path),
            ssl_client_auth="required",
            ssl_enabled_protocols="TLSv1.2",
            ssl_cipher_suites="TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        )
    )
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.minimum_version == ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    assert [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"] == [
        "ECDHE-ECDSA-AES128-GCM-SHA256"
    ]
    only13 = server_context(
        _settings(
            ssl_keystore_location=str(server.pkcs12_path),
            ssl_keystore_password="store-pw",
            ssl_cipher_suites="TLS_AES_128_GCM_SHA256",
        )
    )
    assert only13.minimum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(ConfigError, match=r"ssl\.enabled\.protocols"):
        server_context(
            _settings(ssl_keystore_location=str(server.pkcs12_path), ssl_enabled_protocols="TLSv9")
        )
    with pytest.raises(ConfigError, match=r"ssl\.cipher\.suites"):
        server_context(
            _settings(
                ssl_keystore_location=str(server.pkcs12_path),
                ssl_keystore_password="store-pw",
                ssl_cipher_suites="NO_SUCH_SUITE",
            )
        )


def test_a_listener_reads_its_own_prefixed_settings_and_sasl_ssl_ignores_an_unprefixed_client_auth(
    pki: tuple,
) -> None:
    ca, server, _ = pki
    config = KafkaConfig(
        {
            **BASE,
            "listeners": "SSL://:0,SASL_SSL://:0",
            "listener.security.protocol.map": "SSL:SSL,SASL_SSL:SASL_SSL",
            "sasl.enabled.mechanisms": "PLAIN",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": "/elsewhere",
            "listener.name.ssl.ssl.keystore.location": str(server.pkcs12_path),
            "ssl.keystore.password": "store-pw",
            "ssl.client.auth": "required",
            "ssl.truststore.location": str(ca.cert_path),
            "ssl.truststore.type": "PEM",
        }
    )
    ssl_listener = SslSettings.for_listener(config, "SSL", "SSL")
    assert ssl_listener.keystore_location == str(server.pkcs12_path)
    assert ssl_listener.name_of("ssl.keystore.location") == "listener.name.ssl.ssl.keystore.location"
    assert ssl_listener.client_auth == "required"
    assert SslSettings.for_listener(config, "SASL_SSL", "SASL_SSL").client_auth == "none"


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"listeners": "SSL://:9093"}, "ssl.keystore.location"),
        ({"listeners": "SASL_SSL://:9093", "ssl.keystore.location": "/ks"}, "sasl.enabled.mechanisms"),
        (
            {"listeners": "SASL_PLAINTEXT://:9093", "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER"},
            "sasl.enabled.mechanisms",
        ),
    ],
)
def test_a_secured_listener_without_what_it_needs_is_refused_naming_the_setting(
    props: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        KafkaConfig({**BASE, **props})
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        ControllerConfig({"controller.id": "1", "zookeeper.connect": "zk:2181", **props})


def test_secured_listeners_with_what_they_need_are_accepted() -> None:
    config = KafkaConfig(
        {
            **BASE,
            "listeners": "SSL://:1,SASL_SSL://:2,SASL_PLAINTEXT://:3",
            "listener.security.protocol.map": "SSL:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "ssl.keystore.location": "/ks.p12",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        }
    )
    assert [e.security_protocol for e in config.listeners] == ["SSL", "SASL_SSL", "SASL_PLAINTEXT"]


def test_client_properties_in_librdkafka_names(pki: tuple, tmp_path: Path) -> None:
    ca, _, directory = pki
    alice = issue_certificate(ca, directory, "alice", client=True)
    security = ClientSecurity.from_client_properties(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
            "ssl.ca.location": str(ca.cert_path),
            "ssl.certificate.location": str(alice.cert_path),
            "ssl.key.location": str(alice.key_path),
        }
    )
    assert (security.protocol, security.sasl_mechanism, security.username) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "alice",
    )
    assert security.password == "alice-secret" and "alice-secret" not in repr(security)
    assert security.ssl_context is not None and security.check_hostname
    unchecked = ClientSecurity.from_client_properties(
        {"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"}
    )
    assert unchecked.ssl_context is not None and unchecked.ssl_context.verify_mode == ssl.CERT_NONE


def test_client_properties_in_java_names(pki: tuple) -> None:
    ca, server, _ = pki
    truststore = ca.truststore_p12("trust-pw")
    security = ClientSecurity.from_client_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="admin" password="a \\"quoted\\" secret";',
            "ssl.truststore.location": str(truststore),
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.password": "trust-pw",
            "ssl.keystore.location": str(server.pkcs12_path),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.password": "store-pw",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert (security.username, security.password) == ("admin", 'a "quoted" secret')
    assert security.ssl_context is not None and not security.check_hostname
    assert ClientSecurity.from_client_properties({}).protocol == "PLAINTEXT"


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"security.protocol": "TLS"}, "security.protocol"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
        ({"security.protocol": "SSL", "ssl.truststore.location": "/no/such.pem"}, "ssl.truststore.location"),
        ({"security.protocol": "SSL", "ssl.ca.location": "/no/such.pem"}, "ssl.ca.location"),
    ],
)
def test_bad_client_properties_are_refused_naming_the_setting(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        ClientSecurity.from_client_properties(props)


def test_jaas_options_read_quoted_and_bare_values() -> None:
    module, options = jaas_options(
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="a b" password=c;'
    )
    assert module.endswith("ScramLoginModule") and options == {"username": "a b", "password": "c"}
    with pytest.raises(ConfigError):
        jaas_options("username=a")


def test_inter_broker_security_takes_the_listener_settings_and_the_login_module_credentials(
    pki: tuple,
) -> None:
    ca, server, _ = pki
    common = {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(server.pkcs12_path),
        "ssl.keystore.password": "store-pw",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.cert_path),
    }
    config = KafkaConfig(
        {
            **BASE,
            **common,
            "listeners": "CLIENTS://:0,BROKERS://:0",
            "listener.security.protocol.map": "CLIENTS:SASL_SSL,BROKERS:SASL_SSL",
            "inter.broker.listener.name": "BROKERS",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.brokers.scram-sha-512.sasl.jaas.config": (
                'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
                'password="broker-secret";'
            ),
        }
    )
    security = ClientSecurity.for_inter_broker(config)
    assert (security.protocol, security.sasl_mechanism, security.username, security.password) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "broker",
        "broker-secret",
    )
    assert security.ssl_context is not None and security.check_hostname
    plain = ClientSecurity.for_inter_broker(
        KafkaConfig({**BASE, **common, "listeners": "SSL://:0", "security.inter.broker.protocol": "SSL"})
    )
    assert (plain.protocol, plain.sasl_mechanism) == ("SSL", None) and plain.ssl_context is not None
    assert ClientSecurity.for_inter_broker(KafkaConfig(BASE)).protocol == "PLAINTEXT"
    controller = ControllerConfig(
        {
            "controller.id": "1",
            "zookeeper.connect": "zk:2181",
            **common,
            "security.inter.broker.protocol": "SSL",
        }
    )
    assert ClientSecurity.for_inter_broker(controller).protocol == "SSL"


def test_inter_broker_sasl_without_credentials_is_refused_naming_the_setting(pki: tuple) -> None:
    config = KafkaConfig(
        {
            **BASE,
            "listeners": "SASL_PLAINTEXT://:0",
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
        }
    )
    with pytest.raises(ConfigError, match=r"listener\.name\.sasl_plaintext\.plain\.sasl\.jaas\.config"):
        ClientSecurity.for_inter_broker(config)


def test_a_client_context_checks_the_server_name_unless_told_not_to(pki: tuple) -> None:
    ca, _, _ = pki
    assert client_context(
        _settings(ssl_truststore_type="PEM", ssl_truststore_location=str(ca.cert_path))
    ).check_hostname
    assert not client_context(
        _settings(
            ssl_truststore_type="PEM",
            ssl_truststore_location=str(ca.cert_path),
            ssl_endpoint_identification_algorithm="",
        )
    ).check_hostname
