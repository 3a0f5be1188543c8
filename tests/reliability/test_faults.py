"""The fault tooling on its own: per-node addresses, partitions both ways on new and open
connections, healing, and cleanup of the namespace, its processes and cgroups."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.faults import Sandbox

pytestmark = pytest.mark.integration

SERVER = """
import socket, sys
s = socket.socket()
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen()
print("ready", flush=True)
while True:
    c, (host, _) = s.accept()
    c.sendall(host.encode() + b"\\n")
    c.close()
"""
# Connects to HOST:PORT, prints the address the server saw us as, or "blocked".
CLIENT = """
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), 1.0)
    c.settimeout(1.0)
    print(c.recv(64).decode().strip())
except OSError:
    print("blocked")
"""
# Connects first, then makes an exchange over the same connection for every line read from stdin,
# which gives the seconds to wait for the answer.
LONG_LIVED = """
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), 1.0)
print("connected", flush=True)
for line in sys.stdin:
    c.settimeout(float(line))
    try:
        c.sendall(b"ping")
        print("answered" if c.recv(64) else "closed", flush=True)
    except OSError:
        print("blocked", flush=True)
"""
ECHO = """
import socket
s = socket.socket()
s.bind(("0.0.0.0", 7001))
s.listen()
print("ready", flush=True)
c, _ = s.accept()
while data := c.recv(64):
    c.sendall(data)
"""


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox() as box:
        if box.partition_unavailable is not None:
            pytest.skip(f"network partitions unavailable: {box.partition_unavailable}")
        yield box


def _spawn(sandbox: Sandbox, node: str, script: str, *args: str) -> subprocess.Popen[str]:
    with sandbox.as_node(node):
        process = subprocess.Popen(
            [sys.executable, "-c", script, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
    assert process.stdout is not None
    process.stdout.readline()  # "ready" / "connected"
    return process


def _connect(sandbox: Sandbox, node: str, to: str, port: int = 7000) -> str:
    with sandbox.as_node(node):
        done = subprocess.run(
            [sys.executable, "-c", CLIENT, sandbox.address(to), str(port)], capture_output=True, text=True
        )
    return done.stdout.strip()


def test_nodes_have_their_own_addresses_and_partitions_cut_both_ways(sandbox: Sandbox) -> None:
    servers = [_spawn(sandbox, node, SERVER, "7000") for node in ("a", "b", "c")]
    try:
        a, b, c = (sandbox.address(n) for n in "abc")
        assert len({a, b, c, "127.0.0.1"}) == 4
        # A connection a node opens comes from its own address.
        assert _connect(sandbox, "a", "b") == a
        assert _connect(sandbox, "b", "a") == b
        sandbox.partition(["a"], ["b"])
        assert _connect(sandbox, "a", "b") == "blocked"
        assert _connect(sandbox, "b", "a") == "blocked"
        assert _connect(sandbox, "c", "b") == c  # others are not affected
        assert _connect(sandbox, "a", "c") == a
        sandbox.heal()
        assert _connect(sandbox, "a", "b") == a
        assert _connect(sandbox, "b", "a") == b
    finally:
        for server in servers:
            server.kill()
            server.wait()


def test_a_partition_cuts_connections_that_were_already_open(sandbox: Sandbox) -> None:
    echo = _spawn(sandbox, "server", ECHO)
    client = _spawn(sandbox, "client", LONG_LIVED, sandbox.address("server"), "7001")
    assert client.stdin is not None and client.stdout is not None
    try:

        def exchange(timeout: float = 1.0) -> str:
            client.stdin.write(f"{timeout}\n")  # type: ignore[union-attr]
            client.stdin.flush()  # type: ignore[union-attr]
            return client.stdout.readline().strip()  # type: ignore[union-attr]

        assert exchange() == "answered"
        sandbox.partition(["client"], ["server"])
        assert exchange() == "blocked"
        sandbox.heal()
        # TCP retransmits (with backoff, hence the longer wait) and the same connection carries on.
        assert exchange(timeout=10) == "answered"
    finally:
        for process in (client, echo):
            process.kill()
            process.wait()


def test_leaving_the_sandbox_removes_the_namespace_its_processes_and_cgroups() -> None:
    home = os.readlink("/proc/thread-self/ns/net")
    with Sandbox() as box:
        if box.unavailable is not None:
            pytest.skip(box.unavailable)
        name = box.name
        assert os.readlink("/proc/thread-self/ns/net") != home
        with box.as_node("n"):
            stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        cgroups = box._cgroups
    assert stray.wait(timeout=10) == -9
    assert name not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert cgroups is None or not Path(cgroups).exists()
    assert os.readlink("/proc/thread-self/ns/net") == home
