"""Metrics in the compose files: every broker and the controller serve metrics.listener on port 9404 of the
compose network with the prometheus.io labels (docker-compose.yml, and still in the secured variant),
docker-compose.monitoring.yml's Prometheus scrapes exactly those endpoints (config/prometheus.yml) and its
Grafana gets the Samsa dashboard and that Prometheus (config/grafana). Validated by a compose CLI's
``config``, which needs no engine; skipped without one."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.support.cluster import ROOT

pytestmark = pytest.mark.integration

METRICS_PORT = "9404"
SAMSA_SERVICES = {"controller", "broker-1", "broker-2", "broker-3"}
SECRETS = {"SAMSA_ADMIN_PASSWORD": "admin-secret", "SAMSA_BROKER_PASSWORD": "broker-secret"}


def compose(*files: str) -> list[str]:
    if (
        shutil.which("docker")
        and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0
    ):
        cli = ["docker", "compose"]
    elif shutil.which("docker-compose"):
        cli = ["docker-compose"]
    else:
        pytest.skip("no compose CLI (docker compose or docker-compose) to validate the compose files with")
    return [*cli, *(arg for f in files for arg in ("-f", f))]


def config(files: tuple[str, ...], *args: str) -> str:
    import os

    result = subprocess.run(
        [*compose(*files), "config", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **SECRETS},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def service_blocks(resolved: str) -> dict[str, str]:
    """The resolved config's text of each service (compose prints services two spaces in, sorted)."""
    services = ("\n" + resolved).split("\nservices:\n", 1)[1]
    services = re.split(r"\n(?=\S)", services, maxsplit=1)[0]
    return dict(re.findall(r"^  ([a-z0-9-]+):\n((?:    .*\n?|\n)*)", services, re.MULTILINE))


@pytest.mark.parametrize(
    "files",
    [("docker-compose.yml",), ("docker-compose.yml", "docker-compose.secure.yml")],
    ids=["plain", "secure"],
)
def test_every_broker_and_the_controller_serve_metrics_with_scrape_labels(files: tuple[str, ...]) -> None:
    blocks = service_blocks(config(files))
    assert SAMSA_SERVICES <= set(blocks)
    for service in SAMSA_SERVICES:
        block = blocks[service]
        assert f"--override=metrics.listener=http://0.0.0.0:{METRICS_PORT}" in block, service
        assert re.search(r"prometheus\.io/scrape: ['\"]?true", block), service
        assert re.search(rf"prometheus\.io/port: ['\"]?{METRICS_PORT}", block), service
        assert "prometheus.io/path: /metrics" in block, service
        assert f"published: {METRICS_PORT}" not in block and f"{METRICS_PORT}:{METRICS_PORT}" not in block
    assert "metrics.listener" not in blocks["zookeeper"]


def test_the_monitoring_file_adds_prometheus_and_grafana_to_either_cluster() -> None:
    services = config(("docker-compose.yml", "docker-compose.monitoring.yml"), "--services").split()
    assert {"prometheus", "grafana"} | SAMSA_SERVICES <= set(services)
    config(("docker-compose.yml", "docker-compose.secure.yml", "docker-compose.monitoring.yml"), "-q")
    # The base file alone stays as it was (tests/integration/test_docker_compose.py pins its services).
    assert "prometheus" not in config(("docker-compose.yml",), "--services").split()


def test_prometheus_scrapes_exactly_the_samsa_services_and_grafana_finds_it_and_the_dashboard() -> None:
    scraped = re.findall(r'"([a-z0-9-]+):(\d+)"', (ROOT / "config" / "prometheus.yml").read_text())
    assert {host for host, _ in scraped} == SAMSA_SERVICES
    assert {port for _, port in scraped} == {METRICS_PORT}
    monitoring = (ROOT / "docker-compose.monitoring.yml").read_text()
    assert "./config/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in monitoring
    datasource = (ROOT / "config" / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text()
    assert "url: http://prometheus:9090" in datasource
    dashboards = (ROOT / "config" / "grafana" / "provisioning" / "dashboards" / "samsa.yml").read_text()
    path = re.search(r"path: (\S+)", dashboards)
    assert path is not None
    assert f"./docs/grafana:{path.group(1)}:ro" in monitoring
    home = re.search(r"GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH: (\S+)", monitoring)
    assert home is not None and home.group(1).startswith(path.group(1) + "/")
    assert (ROOT / "docs" / "grafana" / home.group(1).rsplit("/", 1)[1]).is_file()
