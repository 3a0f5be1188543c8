"""What security costs: produce and consume 1 KiB over SASL_SSL next to PLAINTEXT on the same broker, and
authenticating many new connections at once.

It starts one broker as ``samsa up --secure`` does (``LocalCluster(secure=True)``: a SASL_SSL listener
with SCRAM-SHA-512 and the ACL authorizer on) and gives it a PLAINTEXT listener too, whose anonymous
clients are super users like the admin (so both listeners pay the same authorizer cost). Then, in one
run, alternating the listeners within each repetition:

- produce ``--messages`` messages of 1 KiB (acks=1, linger 5 ms) to a fresh 6-partition topic and consume them
  back in a new group, with librdkafka's rdkafka_performance (the binary the shared ``run-bench``
  builds; run-bench itself cannot be pointed at a SASL_SSL-only port: its admin client takes no
  security settings), the secure runs with the admin's ``client.properties`` as ``-X`` settings;
  messages per second as rdkafka_performance reports them and the broker's CPU seconds per million
  messages (``/proc/<pid>/stat``);
- open ``--connections`` connections at once, each a Samsa ``NetworkClient`` sending ApiVersions (on
  SASL_SSL after the TLS handshake and a SCRAM-SHA-512 authentication): wall seconds until all are
  answered and the broker's CPU seconds.

Medians of ``--reps``, every repetition kept in ``bench/results/security-<date>.json``.

    .venv/bin/python bench/security.py [--messages 300000] [--connections 200] [--reps 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare import RESULTS, free_port_run
from bench.fetch_sessions import cpu_seconds
from network.client import NetworkClient
from network.client_security import ClientSecurity
from protocol.api import ApiKey, api
from protocol.messages import ApiVersionsRequest
from tools.local_cluster import LocalCluster

API_VERSIONS = api(ApiKey.API_VERSIONS)
HOST = "127.0.0.1"
PERF = Path(os.environ.get("KBENCH_HOME", Path.home() / ".cache" / "kbench")) / "rdkafka_performance"
PRODUCED = re.compile(r"(\d+) messages produced \((\d+) bytes\), (\d+) delivered.*?(\d+) failed\) in (\d+)ms")
CONSUMED = re.compile(r"(\d+) messages \((\d+) bytes\) consumed in (\d+)ms")


def rdkafka_performance(args: list[str], pattern: re.Pattern[str], timeout: float = 300) -> re.Match[str]:
    out = subprocess.run([str(PERF), *args], capture_output=True, text=True, timeout=timeout)
    found = list(pattern.finditer(out.stdout + out.stderr))
    if not found:
        raise RuntimeError(f"rdkafka_performance {' '.join(args[:2])}: {(out.stdout + out.stderr)[-600:]}")
    return found[-1]


def produce_consume(
    cluster: LocalCluster, pid: int, bootstrap: str, settings: dict[str, str], messages: int, topic: str
) -> dict[str, float]:
    cluster.create_topic(topic, partitions=6, replication_factor=1)
    extra = [arg for key, value in settings.items() for arg in ("-X", f"{key}={value}")]
    before = cpu_seconds(pid)
    produce = f"-P -t {topic} -b {bootstrap} -s 1024 -c {messages} -a 1 -X linger.ms=5 -i 1000000".split()
    m = rdkafka_performance([*produce, *extra], PRODUCED)
    produce_cpu = cpu_seconds(pid) - before
    delivered, failed, produce_ms = int(m.group(3)), int(m.group(4)), int(m.group(5))
    if delivered < messages or failed:
        raise RuntimeError(f"only {delivered}/{messages} delivered, {failed} failed")
    before = cpu_seconds(pid)
    consume = f"-C -G {topic}-group -t {topic} -b {bootstrap} -c {messages} -i 1000000".split()
    m = rdkafka_performance([*consume, *extra], CONSUMED)
    consume_cpu = cpu_seconds(pid) - before
    consumed, consume_ms = int(m.group(1)), int(m.group(3))
    return {
        "produce_msg_s": delivered / max(produce_ms, 1) * 1000,
        "produce_cpu_s_per_m": produce_cpu / messages * 1e6,
        "consume_msg_s": consumed / max(consume_ms, 1) * 1000,
        "consume_cpu_s_per_m": consume_cpu / messages * 1e6,
    }


async def _connect_all(port: int, security: ClientSecurity | None, count: int) -> float:
    clients = [
        NetworkClient(
            HOST, port, f"bench-auth-{i}", security=security, connect_timeout=120, request_timeout=120
        )
        for i in range(count)
    ]
    start = time.perf_counter()
    try:
        await asyncio.gather(*(c.send(API_VERSIONS, 0, ApiVersionsRequest()) for c in clients))
        return time.perf_counter() - start
    finally:
        await asyncio.gather(*(c.close() for c in clients))


def connection_storm(pid: int, port: int, security: ClientSecurity | None, count: int) -> dict[str, float]:
    before = cpu_seconds(pid)
    wall = asyncio.run(_connect_all(port, security, count))
    time.sleep(0.5)  # the broker finishes closing them
    return {"wall_s": wall, "broker_cpu_s": cpu_seconds(pid) - before}


def summarize(runs: list[dict[str, float]]) -> dict[str, Any]:
    return {
        key: {"median": statistics.median(r[key] for r in runs), "all": [r[key] for r in runs]}
        for key in runs[0]
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    if not os.access(PERF, os.X_OK):
        sys.exit(f"{PERF} is missing: run ../shared/bench/run-bench once (it builds rdkafka_performance)")
    secure_port = free_port_run(2)
    plain_port = secure_port + 1
    listeners = f"SASL_SSL://{HOST}:{secure_port},PLAINTEXT://{HOST}:{plain_port}"
    results: dict[str, list[dict[str, float]]] = {"PLAINTEXT": [], "SASL_SSL": []}
    storms: dict[str, list[dict[str, float]]] = {"PLAINTEXT": [], "SASL_SSL": []}
    with tempfile.TemporaryDirectory(prefix="samsa-bench-security-") as tmp:
        cluster = LocalCluster(
            Path(tmp) / "cluster",
            brokers=1,
            host=HOST,
            broker_ports=[secure_port],
            secure=True,
            broker_overrides={
                1: {
                    "listeners": listeners,
                    "advertised.listeners": listeners,
                    "super.users": "User:admin;User:broker;User:ANONYMOUS",
                }
            },
        )
        with cluster:
            pid = cluster.brokers[1].pid
            assert pid is not None
            secure_settings = {
                k: v for k, v in cluster.client_properties().items() if k != "bootstrap.servers"
            }
            security = cluster.client_security()
            targets = {
                "PLAINTEXT": (f"{HOST}:{plain_port}", {}, plain_port, None),
                "SASL_SSL": (f"{HOST}:{secure_port}", secure_settings, secure_port, security),
            }
            for rep in range(args.reps):
                for name, (bootstrap, settings, port, client_security) in targets.items():
                    run = produce_consume(
                        cluster, pid, bootstrap, settings, args.messages, f"sec-{name}-{rep}"
                    )
                    results[name].append(run)
                    storm = connection_storm(pid, port, client_security, args.connections)
                    storms[name].append(storm)
                    print(
                        f"# rep {rep + 1} {name}: {json.dumps(run)} connections: {json.dumps(storm)}",
                        flush=True,
                    )
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "messages": args.messages,
        "connections": args.connections,
        "load1": os.getloadavg()[0],
        **{name: {**summarize(results[name]), "connections": summarize(storms[name])} for name in results},
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"security-{time.strftime('%Y-%m-%d-%H%M')}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(f"# written to {out}")


if __name__ == "__main__":
    main()
