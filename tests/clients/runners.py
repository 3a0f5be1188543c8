"""Runs real Kafka clients against a broker for the integration tests, one small function per client.

Every client runs in a subprocess (its own process group, killed by id on timeout), so a hung client
cannot hang the test and the functions are safe to call from a worker thread: a test whose broker runs
in its own event loop calls them through `asyncio.to_thread`.

Each scenario function returns a structured result or raises:
  * ClientNotInstalled: the client tool is missing (the test skips with that reason);
  * ClientFailed: the client ran and failed; the message carries its stderr.

Non-Python tools come from `make clientdeps` (tests/clients/setup.sh) under .cache/clients, or under
$SAMSA_CLIENTS_DIR when set; kcat comes from Debian.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
JAVA_JARS = ("kafka-clients.jar", "slf4j-api.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar")
DEFAULT_TIMEOUT = 30.0
# The client's own request timeouts get this share of the budget, so that a slow broker is reported
# by the client (with its reason) before the subprocess is killed.
CLIENT_TIMEOUT_SHARE = 0.75
STDERR_TAIL = 4000
PYTHON_MODULES = {"aiokafka": "aiokafka", "kafka-python": "kafka", "confluent-kafka": "confluent_kafka"}


class ClientNotInstalled(Exception):
    """The client tool is not available on this machine; tests skip with this message."""


class ClientFailed(RuntimeError):
    """The client ran and failed (error exit, timeout or unreadable output)."""

    def __init__(self, client: str, reason: str, stderr: str = "") -> None:
        self.client = client
        self.reason = reason
        self.stderr = stderr
        tail = stderr[-STDERR_TAIL:].rstrip()
        super().__init__(f"{client}: {reason}" + (f"\n--- stderr:\n{tail}" if tail else ""))


class Broker(NamedTuple):
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class BootstrapResult:
    """What a client learned from its bootstrap: brokers sorted by node id, topics sorted by name.

    cluster_id and controller_id are None where the client does not expose them (kcat has no cluster id).
    """

    client: str
    brokers: tuple[Broker, ...]
    cluster_id: str | None
    controller_id: int | None
    topics: tuple[str, ...]


def clients_dir() -> Path:
    return Path(os.environ.get("SAMSA_CLIENTS_DIR") or REPO / ".cache" / "clients")


# ---------------------------------------------------------------------------------------------------
# shared helpers


def _run(client: str, argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> str:
    """Runs argv, returns its stdout; raises ClientFailed on a non-zero exit or after `timeout` seconds."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=REPO,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        raise ClientFailed(client, f"timed out after {timeout:g}s", err) from None
    finally:
        # Reached with the process still running only when the caller was interrupted.
        if proc.poll() is None:
            _kill_group(proc)
            proc.wait()
    if proc.returncode != 0:
        raise ClientFailed(client, f"exited with status {proc.returncode}", err)
    return out


def _kill_group(proc: subprocess.Popen[str]) -> None:
    # The JVM and node spawn helper threads/processes; the whole session group goes.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _last_json_line(client: str, out: str) -> dict[str, Any]:
    """The scenario scripts print their result as the last stdout line; clients may log above it."""
    lines = [line for line in out.splitlines() if line.strip()]
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise ClientFailed(client, f"no JSON result on stdout: {out[-STDERR_TAIL:]!r}") from None


def _require_program(client: str, program: str, hint: str) -> str:
    path = shutil.which(program)
    if path is None:
        raise ClientNotInstalled(f"{client}: {program!r} is not on PATH ({hint})")
    return path


def _client_timeout_ms(timeout: float) -> int:
    return max(1000, int(timeout * CLIENT_TIMEOUT_SHARE * 1000))


# Every scenario script takes BOOTSTRAP TIMEOUT_MS [scenario args...]; the Python one takes CLIENT first.
def _script_args(bootstrap: str, timeout: float, args: Sequence[str]) -> list[str]:
    return [bootstrap, str(_client_timeout_ms(timeout)), *args]


def _run_python(
    client: str, script: str, bootstrap: str, timeout: float, args: Sequence[str] = ()
) -> dict[str, Any]:
    module = PYTHON_MODULES[client]
    if importlib.util.find_spec(module) is None:
        raise ClientNotInstalled(f"{client}: Python package {module!r} is missing (pip install -e '.[test]')")
    argv = [sys.executable, str(HERE / "py" / script), client, *_script_args(bootstrap, timeout, args)]
    return _last_json_line(client, _run(client, argv, timeout))


def _run_kafkajs(script: str, bootstrap: str, timeout: float, args: Sequence[str] = ()) -> dict[str, Any]:
    node = _require_program("kafkajs", "node", "install Node.js")
    modules = clients_dir() / "node" / "node_modules"
    if not (modules / "kafkajs" / "package.json").is_file():
        raise ClientNotInstalled(f"kafkajs: not installed under {modules} (run `make clientdeps`)")
    argv = [node, str(HERE / "js" / script), *_script_args(bootstrap, timeout, args)]
    out = _run("kafkajs", argv, timeout, env={"NODE_PATH": str(modules)})
    return _last_json_line("kafkajs", out)


def _run_java(main_source: str, bootstrap: str, timeout: float, args: Sequence[str] = ()) -> dict[str, Any]:
    java = _require_program("java", "java", "install a JDK 17")
    jar_dir = clients_dir() / "java"
    missing = [jar for jar in JAVA_JARS if not (jar_dir / jar).is_file()]
    if missing:
        raise ClientNotInstalled(f"java: {', '.join(missing)} not under {jar_dir} (run `make clientdeps`)")
    classpath = os.pathsep.join(str(jar_dir / jar) for jar in JAVA_JARS)
    argv = [java, "-cp", classpath, str(HERE / "java" / main_source), *_script_args(bootstrap, timeout, args)]
    out = _run("java", argv, timeout)
    return _last_json_line("java", out)


def _bootstrap_result(client: str, raw: Mapping[str, Any]) -> BootstrapResult:
    brokers = sorted(Broker(int(b["node_id"]), str(b["host"]), int(b["port"])) for b in raw["brokers"])
    controller = raw.get("controller_id")
    return BootstrapResult(
        client=client,
        brokers=tuple(brokers),
        cluster_id=raw.get("cluster_id"),
        controller_id=None if controller is None else int(controller),
        topics=tuple(sorted(raw["topics"])),
    )


def _split_host_port(name: str) -> tuple[str, int]:
    host, _, port = name.rpartition(":")
    return host.strip("[]"), int(port)


# ---------------------------------------------------------------------------------------------------
# bootstrap: connect, learn the brokers and the topics


def bootstrap_aiokafka(bootstrap: str, timeout: float = DEFAULT_TIMEOUT) -> BootstrapResult:
    """AIOKafkaAdminClient.describe_cluster() and list_topics()."""
    raw = _run_python("aiokafka", "bootstrap.py", bootstrap, timeout)
    return _bootstrap_result("aiokafka", raw)


def bootstrap_kafka_python(bootstrap: str, timeout: float = DEFAULT_TIMEOUT) -> BootstrapResult:
    """KafkaAdminClient.describe_cluster() and list_topics()."""
    raw = _run_python("kafka-python", "bootstrap.py", bootstrap, timeout)
    return _bootstrap_result("kafka-python", raw)


def bootstrap_confluent_kafka(bootstrap: str, timeout: float = DEFAULT_TIMEOUT) -> BootstrapResult:
    """AdminClient.list_topics() (one Metadata round trip through librdkafka)."""
    raw = _run_python("confluent-kafka", "bootstrap.py", bootstrap, timeout)
    return _bootstrap_result("confluent-kafka", raw)


def bootstrap_kafkajs(bootstrap: str, timeout: float = DEFAULT_TIMEOUT) -> BootstrapResult:
    """kafkajs admin describeCluster() and listTopics() (tests/clients/js/bootstrap.js)."""
    raw = _run_kafkajs("bootstrap.js", bootstrap, timeout)
    return _bootstrap_result("kafkajs", raw)


def bootstrap_java(bootstrap: str, timeout: float = DEFAULT_TIMEOUT) -> BootstrapResult:
    """Java AdminClient describeCluster() and listTopics() (tests/clients/java/Bootstrap.java)."""
    raw = _run_java("Bootstrap.java", bootstrap, timeout)
    return _bootstrap_result("java", raw)


def bootstrap_kcat(bootstrap: str, timeout: float = DEFAULT_TIMEOUT) -> BootstrapResult:
    """`kcat -L -J` (Debian's kcat, an old librdkafka). kcat does not show the cluster id."""
    kcat = _require_program("kcat", "kcat", "Debian package kcat; `make sysdeps`")
    metadata_timeout_s = max(1, int(timeout * CLIENT_TIMEOUT_SHARE))
    out = _run("kcat", [kcat, "-L", "-J", "-b", bootstrap, "-m", str(metadata_timeout_s)], timeout)
    raw = _last_json_line("kcat", out)
    brokers = []
    for b in raw["brokers"]:
        host, port = _split_host_port(b["name"])
        brokers.append({"node_id": b["id"], "host": host, "port": port})
    controller = raw.get("controllerid", -1)
    return _bootstrap_result(
        "kcat",
        {
            "brokers": brokers,
            "cluster_id": None,
            "controller_id": controller if controller >= 0 else None,
            "topics": [t["topic"] for t in raw["topics"]],
        },
    )


BOOTSTRAP: dict[str, Callable[[str, float], BootstrapResult]] = {
    "aiokafka": bootstrap_aiokafka,
    "kafka-python": bootstrap_kafka_python,
    "confluent-kafka": bootstrap_confluent_kafka,
    "kafkajs": bootstrap_kafkajs,
    "java": bootstrap_java,
    "kcat": bootstrap_kcat,
}
CLIENTS = tuple(BOOTSTRAP)
