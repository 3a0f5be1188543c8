"""The controller's settings: Kafka's names and defaults, overrides, and errors that name the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.config import ControllerConfig
from controller.main import main
from server_common.config import ConfigError

REQUIRED = {"controller.id": "9001", "zookeeper.connect": "zk:2181/samsa"}


def test_defaults_are_kafkas() -> None:
    config = ControllerConfig(REQUIRED)
    assert config.controller_id == 9001
    assert config["zookeeper.session.timeout.ms"] == 18000
    assert config.connection_timeout_ms == 18000
    assert config["controller.socket.timeout.ms"] == 30000
    assert config["unclean.leader.election.enable"] is False
    assert config["delete.topic.enable"] is True
    assert config.inter_broker_listener is None and config.inter_broker_protocol == "PLAINTEXT"
    assert [str(e) for e in config.listeners] == ["PLAINTEXT://:9093"]


def test_a_file_with_overrides(tmp_path: Path) -> None:
    path = tmp_path / "controller.properties"
    path.write_text("controller.id=9001\nzookeeper.connect=a:1\ndelete.topic.enable=false\n")
    config = ControllerConfig.load(path, ["zookeeper.connect=b:2/c", "listeners=PLAINTEXT://127.0.0.1:0"])
    assert config["zookeeper.connect"] == "b:2/c" and config["delete.topic.enable"] is False
    # Port 0 binds an ephemeral port, which is what /controller then advertises.
    assert str(config.advertised_endpoint("PLAINTEXT", 40123)) == "PLAINTEXT://127.0.0.1:40123"


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"zookeeper.connect": "zk:2181"}, "controller.id"),
        ({"controller.id": "1"}, "zookeeper.connect"),
        ({**REQUIRED, "controller.id": "-1"}, "controller.id"),
        # A name no Kafka setting has (a Kafka setting the controller does not use is logged, not refused).
        ({**REQUIRED, "controller.idd": "1"}, "controller.idd"),
        ({**REQUIRED, "unclean.leader.election.enable": "yes"}, "unclean.leader.election.enable"),
        ({**REQUIRED, "zookeeper.session.timeout.ms": "0"}, "zookeeper.session.timeout.ms"),
        ({**REQUIRED, "listeners": "PLAINTEXT:/nohost"}, "listeners"),
        ({**REQUIRED, "listeners": "SSL://:9093"}, "listeners"),
        ({**REQUIRED, "inter.broker.listener.name": "INTERNAL"}, "inter.broker.listener.name"),
        ({**REQUIRED, "security.inter.broker.protocol": "TLS"}, "security.inter.broker.protocol"),
    ],
)
def test_bad_settings_are_refused_by_name(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        ControllerConfig(props)


def test_the_command_line_maps_its_options_and_reports_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--zookeeper", "zk:1", "--override", "no.such=1", "--id", "9001"]) == 1
    assert "no.such" in capsys.readouterr().err
    assert main(["--zookeeper", "zk:1"]) == 1
    assert "controller.id" in capsys.readouterr().err
