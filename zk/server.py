"""Starts a standalone ZooKeeper server, for ``LocalCluster`` (``samsa up``, the tests) and nothing else.

The ZooKeeper is Debian's ``zookeeper`` package (``/usr/share/java/zookeeper.jar``), or an unpacked Apache
ZooKeeper release named by ``ZOOKEEPER_HOME`` (its ``lib/*.jar``), which wins when set; Java is
``$JAVA_HOME/bin/java`` or ``java`` on the PATH. The server runs as ``java -cp ... ZooKeeperServerMain
zoo.cfg`` (no init scripts), with
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
from collections.abc import Callable
from pathlib import Path

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
LOG_BINDING_JAR = Path("/usr/share/java/slf4j-simple.jar")


INSTALL_HINT = (
    "install Debian's zookeeper package (apt-get install zookeeper, which brings Java too), or set "
    "ZOOKEEPER_HOME to an unpacked Apache ZooKeeper release (and have Java 11 or later)"
)


def terminate(process: subprocess.Popen, timeout: float) -> int:
    """SIGTERM by PID, SIGKILL if it has not exited after ``timeout`` s; its exit code."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
    return process.returncode


class ZooKeeperNotInstalled(RuntimeError):
    pass


def find_java() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(Path(java_home) / "bin" / "java", os.X_OK):
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def find_classpath() -> tuple[str, str | None]:
    """ZooKeeper's classpath and, for a release, its logback configuration; ZooKeeperNotInstalled
    (saying what to install) when there is no ZooKeeper."""
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        lib = Path(home) / "lib"
        if not any(lib.glob("zookeeper-*.jar")):
            raise ZooKeeperNotInstalled(f"ZOOKEEPER_HOME={home} has no lib/zookeeper-*.jar: {INSTALL_HINT}")
        logback = Path(home) / "conf" / "logback.xml"
        return f"{lib}/*", str(logback) if logback.exists() else None
    if not ZOOKEEPER_JAR.exists():
        raise ZooKeeperNotInstalled(
            f"ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing): {INSTALL_HINT}"
        )
    jars = [ZOOKEEPER_JAR, LOG_BINDING_JAR] if LOG_BINDING_JAR.exists() else [ZOOKEEPER_JAR]
    return ":".join(map(str, jars)), None


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

    def __init__(
        self,
        data_dir: Path,
        port: int,
        host: str = "127.0.0.1",
        tick_ms: int = 500,
        preexec_fn: Callable[[], object] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.host = host
        self.tick_ms = tick_ms
        self.preexec_fn = preexec_fn  # run in the child before exec (LocalCluster: die with the parent)
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
        classpath, logback = find_classpath()
        java = find_java()
        if java is None:
            raise ZooKeeperNotInstalled(
                f"java is missing (neither $JAVA_HOME/bin/java nor on the PATH): {INSTALL_HINT}"
            )
        config = self._write_config()
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
            *([f"-Dlogback.configurationFile={logback}"] if logback else []),
            "-cp",
            classpath,
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(config),
        ]
        log = open(self.data_dir / "zookeeper.log", "ab")  # handed to the child
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=self.preexec_fn,
            )
        finally:
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
        if self.process is not None:
            terminate(self.process, timeout)
