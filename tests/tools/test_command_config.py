"""--command-config FILE (tools/command_config.py): the client settings file every connecting `samsa` tool
takes, read as Kafka's tools read it (a Java properties file, Java client or librdkafka names), and how a
bad one is reported. The tools over a real SASL_SSL listener: tests/clients/test_secure_clients.py."""

from __future__ import annotations

import argparse
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest

from tools import command_config, console, leader_election, reassign_partitions, replica_verification, topics
from tools import consumer_groups as consumer_groups_tool
from tools import transactions as transactions_tool
from tools.admin_client import AdminError
from tools.certificates import CertificateAuthority, create_ca, issue_certificate
from tools.consumer_groups import options as consumer_groups_options
from tools.transactions import options as transactions_options


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return create_ca(tmp_path_factory.mktemp("ca"))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return path


def test_java_client_settings_give_tls_and_scram(tmp_path: Path, ca: CertificateAuthority) -> None:
    path = write(
        tmp_path,
        "# the admin's settings\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="admin" \\\n'
        '    password="admin-secret";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca.cert_path}\n",
    )
    security = command_config.client_security(path)
    assert security is not None
    assert (security.protocol, security.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (security.username, security.password) == ("admin", "admin-secret")
    assert isinstance(security.ssl_context, ssl.SSLContext)
    assert security.ssl_context.check_hostname  # Kafka's default: ssl.endpoint.identification.algorithm=https


def test_librdkafka_settings_give_the_same(tmp_path: Path, ca: CertificateAuthority) -> None:
    path = write(
        tmp_path,
        "security.protocol=sasl_ssl\nsasl.mechanisms=PLAIN\nsasl.username=bob\nsasl.password=bob-secret\n"
        f"ssl.ca.location={ca.cert_path}\n",
    )
    security = command_config.client_security(path)
    assert security is not None
    assert (security.protocol, security.sasl_mechanism, security.username) == ("SASL_SSL", "PLAIN", "bob")
    assert security.ssl_context is not None


def test_mutual_tls_settings_load_the_client_key(tmp_path: Path, ca: CertificateAuthority) -> None:
    client = issue_certificate(ca, tmp_path, "client", client=True)
    path = write(
        tmp_path,
        "security.protocol=SSL\nssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca.cert_path}\nssl.keystore.type=PEM\n"
        f"ssl.keystore.location={client.keystore_pem_path}\n",
    )
    security = command_config.client_security(path)
    assert security is not None and security.uses_tls and not security.uses_sasl


def test_no_file_or_no_security_settings_is_plaintext(tmp_path: Path) -> None:
    assert command_config.client_security(None) is None
    assert command_config.client_security(write(tmp_path, "client.id=x\nrequest.timeout.ms=5000\n")) is None
    assert (
        command_config.client_security(write(tmp_path, "security.protocol=PLAINTEXT\n")).protocol
        == "PLAINTEXT"
    )


def test_unreadable_file_is_an_admin_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.properties"
    with pytest.raises(command_config.CommandConfigError, match=r"nope\.properties: No such file") as raised:
        command_config.client_security(missing)
    assert isinstance(raised.value, AdminError)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("security.protocol=TLS\n", "security.protocol"),
        (
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.username=a\nsasl.password=b\n",
            "GSSAPI",
        ),
        ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n", "username and password"),
        (
            "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=/nonexistent.pem\n",
            "truststore",
        ),
    ],
)
def test_bad_setting_is_an_error_naming_it(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(command_config.CommandConfigError, match=named):
        command_config.client_security(write(tmp_path, text))


def test_aiokafka_keywords(tmp_path: Path, ca: CertificateAuthority) -> None:
    props = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": "pw",
        "ssl.ca.location": str(ca.cert_path),
    }
    kwargs = command_config.aiokafka_security(command_config.security_from(props))
    assert kwargs["security_protocol"] == "SASL_SSL"
    assert isinstance(kwargs["ssl_context"], ssl.SSLContext)
    assert (kwargs["sasl_mechanism"], kwargs["sasl_plain_username"], kwargs["sasl_plain_password"]) == (
        "SCRAM-SHA-256",
        "alice",
        "pw",
    )
    plain = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "a",
        "sasl.password": "b",
    }
    assert "ssl_context" not in command_config.aiokafka_security(command_config.security_from(plain))
    assert command_config.aiokafka_security(None) == {}


def test_console_tools_take_client_properties_from_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "bootstrap.servers=ignored:1\nlinger.ms=7\nacks=1\nunknown.thing=1\n")
    assert console._config_file_kwargs(str(path), console.PRODUCER_PROPERTIES) == {"linger_ms": 7, "acks": 1}


# -- every tool takes it ------------------------------------------------------------------------------

PARSERS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "topics": topics._parser,
    "consumer-groups": consumer_groups_options.parser,
    "transactions": transactions_options.parser,
    "console-producer": console._producer_parser,
    "console-consumer": console._consumer_parser,
    "reassign-partitions": reassign_partitions._parser,
    "leader-election": leader_election._parser,
    "replica-verification": replica_verification._parser,
}
REQUIRED: dict[str, list[str]] = {
    "transactions": ["list"],
    "console-producer": ["--bootstrap-server", "a:1", "--topic", "t"],
    "console-consumer": ["--bootstrap-server", "a:1", "--topic", "t"],
}
KAFKA_39_NAMES = {
    "console-producer": "--producer.config",
    "console-consumer": "--consumer.config",
    "leader-election": "--admin.config",
}


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_every_tool_parses_command_config(tool: str) -> None:
    parser = PARSERS[tool]()
    names = ["--command-config"] + ([KAFKA_39_NAMES[tool]] if tool in KAFKA_39_NAMES else [])
    for name in names:
        args = parser.parse_args([name, "client.properties", *REQUIRED.get(tool, [])])
        assert args.command_config == "client.properties"


# Each tool's main with a --command-config file that does not exist: exit 1, the file named, no traceback.
MAINS: dict[str, tuple[Callable[[list[str]], int], list[str]]] = {
    "topics": (topics.main, ["--bootstrap-server", "127.0.0.1:1", "--list"]),
    "consumer-groups": (consumer_groups_tool.main, ["--bootstrap-server", "127.0.0.1:1", "--list"]),
    "transactions": (transactions_tool.main, ["--bootstrap-server", "127.0.0.1:1", "{config}", "list"]),
    "reassign-partitions": (reassign_partitions.main, ["--bootstrap-server", "127.0.0.1:1", "--list"]),
    "leader-election": (
        leader_election.main,
        ["--bootstrap-server", "127.0.0.1:1", "--election-type", "preferred", "--all-topic-partitions"],
    ),
    "replica-verification": (replica_verification.main, ["--bootstrap-server", "127.0.0.1:1", "--once"]),
    "console-producer": (console.producer_main, ["--bootstrap-server", "127.0.0.1:1", "--topic", "t"]),
    "console-consumer": (console.consumer_main, ["--bootstrap-server", "127.0.0.1:1", "--topic", "t"]),
}


@pytest.mark.parametrize("tool", sorted(MAINS))
def test_every_tool_reports_an_unreadable_command_config(
    tool: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    main, argv = MAINS[tool]
    missing = str(tmp_path / "missing.properties")
    option = ["--command-config", missing]
    if "{config}" in argv:
        i = argv.index("{config}")
        argv = [*argv[:i], *option, *argv[i + 1 :]]
    else:
        argv = [*argv, *option]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    said = out + err + caplog.text
    assert "missing.properties: No such file or directory" in said
    assert "Traceback" not in said
