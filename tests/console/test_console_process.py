"""``samsa console`` as a user runs it: the installed command in a process of its own, its URL read from
the ``console=`` line it prints (``--port 0``: a free port), stopped by PID.

- against the package's running cluster it serves the pages;
- against a bootstrap address where nothing listens it keeps running and its page says why in words
  (status 503, no stack trace);
- SIGTERM stops it with exit code 0; ``--help`` describes it; ``--user`` without a password is refused.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import ROOT, Cluster, free_port
from zk.server import terminate

pytestmark = pytest.mark.integration

SAMSA = str(Path(sys.executable).parent / "samsa")


class ConsoleProcess:
    """``samsa console ... --port 0``; ``url`` from its first line; stdout and stderr kept by a thread."""

    def __init__(self, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if k != "SAMSA_CONSOLE_PASSWORD"}
        self.process = subprocess.Popen(
            [SAMSA, "console", "--port", "0", *args],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.output: list[str] = []
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self.output.append(line.rstrip("\n"))
                lines.put(line.rstrip("\n"))
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        while True:
            try:
                line = lines.get(timeout=20)
            except queue.Empty:
                raise AssertionError(f"no console= line after 20 s: {self.output}") from None
            if line is None:
                raise AssertionError(f"samsa console ended: {self.output}")
            if line.startswith("console="):
                self.url = line.partition("=")[2]
                return

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=15) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def terminate(self, timeout: float = 15.0) -> int:
        """SIGTERM by PID, and its exit code (SIGKILL if it does not exit in time)."""
        return terminate(self.process, timeout)


@pytest.fixture
def consoles() -> Iterator[list[ConsoleProcess]]:
    started: list[ConsoleProcess] = []
    try:
        yield started
    finally:
        for console in started:
            console.terminate()


def test_the_console_process_serves_the_pages_of_a_running_cluster(
    console_cluster: Cluster, consoles: list[ConsoleProcess]
) -> None:
    console = ConsoleProcess("--bootstrap-server", console_cluster.bootstrap)
    consoles.append(console)
    assert console.url.startswith("http://127.0.0.1:")  # localhost unless --host says otherwise
    status, html = console.get("/")
    assert status == 200
    for broker in console_cluster.brokers.values():
        assert broker.address in html
    for path in ("/topics", "/groups", "/static/console.css"):
        assert console.get(path)[0] == 200, path


def test_against_a_bootstrap_address_where_nothing_listens_the_page_says_so_in_words_and_it_keeps_running(
    consoles: list[ConsoleProcess],
) -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    console = ConsoleProcess("--bootstrap-server", nowhere)
    consoles.append(console)
    for _ in range(2):  # a second request is answered too: the failure did not end anything
        status, html = console.get("/")
        assert status == 503
        assert f"Cannot reach the cluster at {nowhere}" in html
        assert "Traceback" not in html and "File &#34;" not in html
    assert console.process.poll() is None
    assert "Traceback" not in "\n".join(console.output)


def test_sigterm_stops_the_console_with_code_0(consoles: list[ConsoleProcess]) -> None:
    console = ConsoleProcess("--bootstrap-server", f"127.0.0.1:{free_port()}")
    consoles.append(console)
    assert console.terminate() == 0


def test_help_describes_the_flags() -> None:
    result = subprocess.run([SAMSA, "console", "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    for flag in ("--bootstrap-server", "--metrics", "--host", "--port", "--user", "--password"):
        assert flag in result.stdout, flag
    assert "--command-config" in result.stdout


def test_user_without_a_password_is_refused() -> None:
    env = {k: v for k, v in os.environ.items() if k != "SAMSA_CONSOLE_PASSWORD"}
    result = subprocess.run(
        [SAMSA, "console", "--bootstrap-server", "127.0.0.1:9092", "--port", "0", "--user", "alice"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert result.returncode == 2
    assert "--user needs --password" in result.stderr
    assert "console=" not in result.stdout
