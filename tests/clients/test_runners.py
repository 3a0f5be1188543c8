"""Checks the runner plumbing without a broker: missing tools are reported as ClientNotInstalled,
a hung client is killed at its timeout, and a refused connection is a ClientFailed carrying stderr."""

import socket
import sys
import time
from pathlib import Path

import pytest

from tests.clients import runners


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("client", ["kafkajs", "java"])
def test_missing_cached_tool_is_not_installed(
    client: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAMSA_CLIENTS_DIR", str(tmp_path))
    with pytest.raises(runners.ClientNotInstalled, match="make clientdeps"):
        runners.BOOTSTRAP[client]("127.0.0.1:1", 5)


def test_missing_program_is_not_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(runners.ClientNotInstalled, match="kcat"):
        runners.bootstrap_kcat("127.0.0.1:1", 5)


def test_hung_client_is_killed_at_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(runners.ClientFailed, match="timed out"):
        runners._run("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], 0.5)
    assert time.monotonic() - started < 10


def test_refused_connection_is_client_failed_with_stderr() -> None:
    with pytest.raises(runners.ClientFailed) as failure:
        runners.bootstrap_aiokafka(f"127.0.0.1:{_closed_port()}", 10)
    assert "stderr" in str(failure.value)
    assert failure.value.stderr


def test_kcat_broker_names_split_into_host_and_port() -> None:
    assert runners._split_host_port("127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert runners._split_host_port("[::1]:9093") == ("::1", 9093)
