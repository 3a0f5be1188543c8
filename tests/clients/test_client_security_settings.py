"""The security settings the client runners hand each client (runners.Security; py/secure.py for the
Python clients), checked without a broker: what each client is told for TLS, mutual TLS and SASL."""

from __future__ import annotations

import importlib.util
import json
import ssl
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.clients import runners
from tools.certificates import create_ca, issue_certificate


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("pki")
    ca = create_ca(directory)
    client = issue_certificate(ca, directory, "client", client=True)
    return {"ca": str(ca.cert_path), "certificate": str(client.cert_path), "key": str(client.key_path)}


@pytest.fixture
def secure_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """py/secure.py, as the client scripts import it."""
    spec = importlib.util.spec_from_file_location("secure", runners.HERE / "py" / "secure.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("secure", None)


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="security protocol"):
        runners.Security("TLS")
    with pytest.raises(ValueError, match="SASL mechanism"):
        runners.Security("SASL_SSL", mechanism="GSSAPI")
    with pytest.raises(ValueError, match="needs its key"):
        runners.Security("SSL", certificate="c.pem")


def test_librdkafka_settings(pki: dict[str, str]) -> None:
    mtls = runners.Security("SSL", ca=pki["ca"], certificate=pki["certificate"], key=pki["key"])
    assert mtls.librdkafka() == {
        "security.protocol": "ssl",
        "ssl.ca.location": pki["ca"],
        "ssl.certificate.location": pki["certificate"],
        "ssl.key.location": pki["key"],
        "ssl.endpoint.identification.algorithm": "https",
    }
    scram = runners.Security("SASL_PLAINTEXT", mechanism="SCRAM-SHA-512", username="alice", password="pw")
    assert scram.librdkafka() == {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "pw",
    }


def test_java_settings_use_a_pem_trust_store_and_an_inline_pem_key_store(pki: dict[str, str]) -> None:
    props = runners.Security(
        "SASL_SSL",
        ca=pki["ca"],
        certificate=pki["certificate"],
        key=pki["key"],
        mechanism="PLAIN",
        username='a"b',
        password="p\\w",
        verify_hostname=False,
    ).java()
    assert props["security.protocol"] == "SASL_SSL"
    assert (props["ssl.truststore.type"], props["ssl.truststore.location"]) == ("PEM", pki["ca"])
    assert props["ssl.keystore.type"] == "PEM"
    assert props["ssl.keystore.key"].startswith("-----BEGIN PRIVATE KEY-----")  # PKCS#8, as Kafka needs
    assert props["ssl.keystore.certificate.chain"] == Path(pki["certificate"]).read_text()
    assert props["ssl.endpoint.identification.algorithm"] == ""
    assert props["sasl.mechanism"] == "PLAIN"
    assert props["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="a\\"b" password="p\\\\w";'
    )


def test_java_properties_text_escapes_what_properties_load_unescapes() -> None:
    text = runners.java_properties_text({"a.key": "line1\nline2", "b": " lead=x:y#z\\", "c": "tab\there"})
    assert text == "a.key=line1\\nline2\nb=\\ lead\\=x\\:y\\#z\\\\\nc=tab\\there\n"


def test_env_carries_both_forms(pki: dict[str, str]) -> None:
    security = runners.Security("SSL", ca=pki["ca"])
    env = security.env()
    assert json.loads(env[runners.SECURITY_ENV])["ca"] == pki["ca"]
    assert "ssl.truststore.location=" in env[runners.JAVA_PROPERTIES_ENV]
    assert runners._security_env(None) == {}


def test_python_clients_settings(
    pki: dict[str, str], secure_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(runners.SECURITY_ENV, raising=False)
    assert secure_module.kafka_python() == secure_module.aiokafka() == secure_module.librdkafka() == {}
    security = runners.Security(
        "SASL_SSL",
        ca=pki["ca"],
        certificate=pki["certificate"],
        key=pki["key"],
        mechanism="SCRAM-SHA-256",
        username="alice",
        password="pw",
    )
    monkeypatch.setenv(runners.SECURITY_ENV, security.env()[runners.SECURITY_ENV])
    assert secure_module.kafka_python() == {
        "security_protocol": "SASL_SSL",
        "ssl_cafile": pki["ca"],
        "ssl_certfile": pki["certificate"],
        "ssl_keyfile": pki["key"],
        "ssl_password": None,
        "ssl_check_hostname": True,
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "pw",
    }
    aiokafka = secure_module.aiokafka()
    assert isinstance(aiokafka.pop("ssl_context"), ssl.SSLContext)
    assert aiokafka == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "pw",
    }
    assert secure_module.librdkafka() == security.librdkafka()
