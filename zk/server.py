"""Starts a standalone ZooKeeper server from Debian's ``zookeeper`` package, for ``samsa up`` and tests.

The server runs as ``java -cp zookeeper.jar ... ZooKeeperServerMain zoo.cfg`` (no init scripts), with
the admin HTTP server off (it would claim port 8080) and the txn log written without fsync (ZooKeeper
survives its own kill -9, not an OS crash: fine for development). Readiness is ``srvr`` answering with
a ``Mode:`` line; ``ruok`` answers before the database is loaded.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
LOG_BINDING_JAR = Path("/usr/share/java/slf4j-simple.jar")


class ZooKeeperNotInstalled(RuntimeError):
    pass


def four_letter_word(host: str, port: int, word: bytes, timeout: float = 0.5) -> bytes:
    with socket.create_connection((host, port), timeout) as s:
        s.settimeout(timeout)
        s.sendall(word)
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
        return b"".join(chunks)


class ZooKeeperServer:
    """One standalone server; ``start()`` returns once it serves, ``stop()`` ends it by PID."""

    def __init__(self, data_dir: Path, port: int, host: str = "127.0.0.1", tick_ms: int = 500) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.host = host
        self.tick_ms = tick_ms
        self.process: subprocess.Popen | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def _write_config(self) -> Path:
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_ms}",
                    f"minSessionTimeout={2 * self.tick_ms}",
                    "maxSessionTimeout=60000",
                    f"dataDir={self.data_dir.resolve() / 'data'}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "maxClientCnxns=0",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=*",
                    "forceSync=no",
                    "preAllocSize=4096",
                    "autopurge.purgeInterval=0",
                    "",
                ]
            )
        )
        return config

    def start(self, timeout: float = 30.0) -> None:
        java = shutil.which("java")
        if not ZOOKEEPER_JAR.exists() or java is None:
            raise ZooKeeperNotInstalled(f"{ZOOKEEPER_JAR} or java is missing: apt-get install zookeeper")
        config = self._write_config()
        classpath = f"{ZOOKEEPER_JAR}:{LOG_BINDING_JAR}" if LOG_BINDING_JAR.exists() else str(ZOOKEEPER_JAR)
        command = [
            java,
            "-Xms16m",
            "-Xmx128m",
            "-Xss512k",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:CICompilerCount=1",
            "-XX:-UsePerfData",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            classpath,
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(config),
        ]
        log = open(self.data_dir / "zookeeper.log", "ab")  # handed to the child
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        (self.data_dir / "zookeeper.pid").write_text(f"{self.process.pid}\n")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with {self.process.returncode}; see {self.data_dir}/zookeeper.log"
                )
            try:
                if b"Mode:" in four_letter_word(self.host, self.port, b"srvr"):
                    return
            except OSError:
                pass
            time.sleep(0.03)
        self.stop()
        raise TimeoutError(f"ZooKeeper on {self.connect_string} was not serving after {timeout} s")

    def stop(self, timeout: float = 5.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.kill(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
