"""docker-compose.yml and the Dockerfile.

- The compose file is validated by a compose CLI's ``config`` (which needs no engine): schema,
  interpolation, the services and volumes.
- For real: testcontainers builds the image, brings the compose file up (ZooKeeper, a controller, three
  brokers, healthchecks waited for), and clients on the host create a topic, produce and consume through
  the advertised EXTERNAL listeners. That needs a Docker engine with the compose plugin; without one it is
  skipped with the reason (these development machines have the docker CLI but no engine). It takes
  minutes, so it is in the slow tier.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.support.cluster import ROOT, free_port


def docker_engine_missing() -> str | None:
    """Why the compose stack cannot run here, or None if it can."""
    if shutil.which("docker") is None:
        return "no Docker engine: the docker CLI is not installed"
    if not Path("/var/run/docker.sock").exists() and not os.environ.get("DOCKER_HOST"):
        return "no Docker engine: /var/run/docker.sock does not exist and DOCKER_HOST is not set"
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "no Docker engine: `docker info` did not answer within 30 s"
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["no output"])[-1]
        return f"no Docker engine: `docker info` failed: {reason}"
    if not has_compose_plugin():
        return "the docker compose plugin is not installed (testcontainers runs `docker compose`)"
    return None


def has_compose_plugin() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30).returncode == 0


def compose_cli() -> list[str] | None:
    """A compose CLI: the docker plugin or Debian's docker-compose; `config` needs no engine."""
    if has_compose_plugin():
        return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


MISSING = docker_engine_missing()

pytestmark = pytest.mark.integration


def test_compose_file_is_valid_and_names_the_cluster() -> None:
    cli = compose_cli()
    if cli is None:
        pytest.skip("no compose CLI (docker compose or docker-compose) to validate docker-compose.yml with")

    def config(*args: str) -> list[str]:
        result = subprocess.run(
            [*cli, "-f", "docker-compose.yml", "config", *args], cwd=ROOT, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        return sorted(result.stdout.split())

    assert config("-q") == []
    assert config("--services") == ["broker-1", "broker-2", "broker-3", "console", "controller", "zookeeper"]
    assert config("--volumes") == [
        "broker-1-data", "broker-2-data", "broker-3-data", "zookeeper-data", "zookeeper-datalog",
    ]  # fmt: skip


def test_compose_console_service_serves_the_console_of_the_brokers_on_the_hosts_loopback() -> None:
    cli = compose_cli()
    if cli is None:
        pytest.skip("no compose CLI (docker compose or docker-compose) to validate docker-compose.yml with")
    result = subprocess.run(
        [*cli, "-f", "docker-compose.yml", "config"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    block = result.stdout.split("\n  console:\n", 1)[1].split("\n  controller:\n", 1)[0]
    for arg in (
        "- console",
        "- --bootstrap-server=broker-1:29092,broker-2:29092,broker-3:29092",
        "- --host=0.0.0.0",
        "- --port=8080",
        "- --metrics=http://broker-1:9404/metrics,http://broker-2:9404/metrics,http://broker-3:9404/metrics",
    ):
        assert arg in block, arg
    # published on 8080 of the host's loopback only (short or long syntax, as the CLI prints it)
    assert "127.0.0.1:8080:8080" in block or ("published: 8080" in block and "host_ip: 127.0.0.1" in block)


@pytest.mark.slow
# skipif marks are evaluated before the slow tier's skip, so the reason printed is the real one
@pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
def test_compose_cluster_serves_clients_on_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    from testcontainers.compose import DockerCompose

    ports = [free_port() for _ in range(3)]
    for n, port in enumerate(ports, start=1):
        monkeypatch.setenv(f"SAMSA_BROKER_{n}_PORT", str(port))
    console_port = free_port()
    monkeypatch.setenv("SAMSA_CONSOLE_PORT", str(console_port))
    monkeypatch.setenv("COMPOSE_PROJECT_NAME", f"samsa-test-{uuid.uuid4().hex[:8]}")
    bootstrap = ",".join(f"localhost:{port}" for port in ports)

    def samsa(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tools", *args],
            cwd=ROOT,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )

    # wait=True: `docker compose up --wait` returns once every healthcheck passes
    with DockerCompose(ROOT, compose_file_name="docker-compose.yml", build=True, wait=True) as compose:
        for service in ("zookeeper", "controller", "broker-1", "broker-2", "broker-3", "console"):
            container = compose.get_container(service)
            assert (container.State, container.Health) == ("running", "healthy"), service
        created = samsa(
            "topics", "--bootstrap-server", bootstrap, "--create", "--topic", "compose",
            "--partitions", "3", "--replication-factor", "1",
        )  # fmt: skip
        assert created.returncode == 0, created
        lines = [f"k{i}:v{i}" for i in range(30)]
        produced = samsa(
            "console-producer", "--bootstrap-server", bootstrap, "--topic", "compose",
            "--property", "parse.key=true", "--property", "key.separator=:", "--compression-codec", "lz4",
            stdin="\n".join(lines) + "\n",
        )  # fmt: skip
        assert produced.returncode == 0 and "ERROR" not in produced.stderr, produced
        consumed = samsa(
            "console-consumer", "--bootstrap-server", bootstrap, "--topic", "compose", "--from-beginning",
            "--max-messages", "30", "--timeout-ms", "60000",
            "--property", "print.key=true", "--property", "key.separator=:",
        )  # fmt: skip
        assert sorted(consumed.stdout.splitlines()) == sorted(lines), (consumed, compose.get_logs())
        described = samsa("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", "compose")
        assert "PartitionCount: 3" in described.stdout, described
        # the console (its vendor files built into the image by the Dockerfile's npm stage)
        with urllib.request.urlopen(f"http://127.0.0.1:{console_port}/topics", timeout=30) as page:
            assert "compose" in page.read().decode()
        vendor = f"http://127.0.0.1:{console_port}/static/vendor/htmx.min.js"
        with urllib.request.urlopen(vendor, timeout=30) as script:
            assert script.status == 200
