"""server.properties: Kafka's names and defaults, overrides, and errors that name the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import KafkaConfig
from server_common.config import ConfigError, read_properties

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_are_kafkas() -> None:
    config = KafkaConfig({"broker.id": "0"})
    assert config["num.network.threads"] == 3
    assert config["num.io.threads"] == 8
    assert config["socket.request.max.bytes"] == 104857600
    assert config["connections.max.idle.ms"] == 600000
    assert config["queued.max.requests"] == 500
    assert config["log.segment.bytes"] == 1073741824
    assert config.log_dirs == ["/tmp/kafka-logs"]
    assert [str(e) for e in config.listeners] == ["PLAINTEXT://:9092"]


def test_the_shipped_server_properties_load() -> None:
    config = KafkaConfig.load(ROOT / "config" / "server.properties")
    assert config.broker_id == 1


def test_java_properties_syntax() -> None:
    text = "# comment\n! also a comment\n\na=1\nb : two\nc three\nd=x\\\n  y\ne=\n"
    assert read_properties(text) == {"a": "1", "b": "two", "c": "three", "d": "xy", "e": ""}


def test_overrides_win(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nnum.io.threads=4\n")
    config = KafkaConfig.load(path, ["num.io.threads=2", "log.dirs=/a,/b"])
    assert config["num.io.threads"] == 2
    assert config.log_dirs == ["/a", "/b"]


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"no.such.setting": "1"}, "no.such.setting"),
        ({"num.io.threads": "many"}, "num.io.threads"),
        ({"num.io.threads": "0"}, "num.io.threads"),
        ({"socket.request.max.bytes": "99999999999"}, "socket.request.max.bytes"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable"),
        ({"listeners": "PLAINTEXT:/nohost"}, "listeners"),
        ({"listeners": "SSL://:9093"}, "listeners"),
        ({"listeners": "SSL://:9093"}, "ssl.keystore.location"),
        ({"listeners": "SASL_SSL://:9093", "ssl.keystore.location": "/ks"}, "sasl.enabled.mechanisms"),
        ({"listeners": "SASL_PLAINTEXT://:9093", "sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled"),
        ({"listeners": "FOO://:9093"}, "listeners"),
        ({"listeners": "PLAINTEXT://:1,PLAINTEXT://:2"}, "listeners"),
        ({"advertised.listeners": "OTHER://h:1"}, "advertised.listeners"),
        ({"log.message.timestamp.type": "Now"}, "log.message.timestamp.type"),
        ({"max.connections.per.ip.overrides": "host"}, "max.connections.per.ip.overrides"),
    ],
)
def test_bad_settings_fail_naming_the_setting(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        KafkaConfig({"broker.id": "1", **props})


def test_bad_override_syntax() -> None:
    with pytest.raises(ConfigError, match="key=value"):
        KafkaConfig.load(None, ["broker.id"])


def test_listeners_and_advertised_listeners() -> None:
    config = KafkaConfig(
        {
            "broker.id": "1",
            "listeners": "PLAINTEXT://0.0.0.0:9092,INTERNAL://127.0.0.1:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "advertised.listeners": "PLAINTEXT://broker1.example:19092,INTERNAL://127.0.0.1:9093",
        }
    )
    assert [(e.listener, e.host, e.port) for e in config.listeners] == [
        ("PLAINTEXT", "0.0.0.0", 9092),
        ("INTERNAL", "127.0.0.1", 9093),
    ]
    assert config.advertised_endpoint("PLAINTEXT").host == "broker1.example"
    assert config.advertised_endpoint("PLAINTEXT").port == 19092


def test_ipv6_listener() -> None:
    config = KafkaConfig({"broker.id": "1", "listeners": "PLAINTEXT://[::1]:9092"})
    assert config.listeners[0].host == "::1"


def test_per_ip_overrides() -> None:
    config = KafkaConfig({"broker.id": "1", "max.connections.per.ip.overrides": "10.0.0.1:5, host-b:0"})
    assert config.max_connections_per_ip_overrides == {"10.0.0.1": 5, "host-b": 0}
