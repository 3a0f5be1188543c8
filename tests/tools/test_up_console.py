"""``samsa up`` runs the web console: it prints ``console=http://HOST:PORT`` after ``bootstrap.servers``
and that URL serves the Cluster page of its cluster; ``--console-port`` chooses the port; ``--no-console``
starts none (no line, no process)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_tools import Up
from tests.support.cluster import ROOT, free_port
from tools.local_cluster_nodes import pid_alive

pytestmark = pytest.mark.integration

STARTED_CONSOLE = re.compile(r"^started console 1 pid=(\d+)$")


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read().decode()


@pytest.fixture
def up_stopped() -> Iterator[list[Up]]:
    """The ``samsa up`` runs of a test, stopped (by PID) at its end whatever happens."""
    runs: list[Up] = []
    try:
        yield runs
    finally:
        for run in runs:
            if run.process is not None:
                run.stop()


def test_up_prints_the_console_url_which_serves_the_cluster_page(
    tmp_path_factory: pytest.TempPathFactory, up_stopped: list[Up]
) -> None:
    port = free_port()
    up = Up(
        tmp_path_factory.mktemp("up-console") / "run",
        brokers=1,
        controllers=1,
        extra=("--console-port", str(port)),
    )
    up_stopped.append(up)
    bootstrap = up.start()
    line = up.wait_for_line(lambda text: text.startswith("console="), 10)
    assert line == f"console=http://127.0.0.1:{port}"
    assert up.lines.index(f"bootstrap.servers={bootstrap}") < up.lines.index(line)
    status, html = get(line.partition("=")[2] + "/")
    assert status == 200
    assert "<title>" in html and "Cluster" in html
    assert bootstrap in html  # broker 1's address, as the Cluster page lists it
    pid = int(next(m.group(1) for text in up.lines if (m := STARTED_CONSOLE.match(text))))
    assert up.stop() == 0
    assert not pid_alive(pid)


def test_up_no_console_starts_no_console(
    tmp_path_factory: pytest.TempPathFactory, up_stopped: list[Up]
) -> None:
    data_dir = tmp_path_factory.mktemp("up-no-console") / "run"
    up = Up(data_dir, brokers=1, controllers=1, extra=("--no-console",))
    up_stopped.append(up)
    up.start()
    state = json.loads((data_dir / "cluster.json").read_text())
    assert [n for n in state["nodes"] if n["role"] == "console"] == []
    assert not any(text.startswith("console=") or STARTED_CONSOLE.match(text) for text in up.lines)


def test_up_refuses_a_busy_console_port_naming_the_flag(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        up = Up(tmp_path / "run", brokers=1, controllers=1, extra=("--console-port", str(port)))
        result = subprocess.run(up.command(), cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert result.stdout == ""  # nothing was started
    assert f"port {port} on 127.0.0.1 (the console) is in use" in result.stderr, result.stderr
    assert "--console-port" in result.stderr and "--no-console" in result.stderr


def test_up_refuses_a_console_port_with_no_console(tmp_path: Path) -> None:
    up = Up(tmp_path / "run", brokers=1, controllers=1, extra=("--console-port", "8080", "--no-console"))
    result = subprocess.run(up.command(), cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert result.returncode == 1 and result.stdout == ""
    assert "--console-port and --no-console" in result.stderr, result.stderr
