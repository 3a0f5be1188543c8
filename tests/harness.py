"""Starting and stopping real Samsa processes for tests: free ports, readiness, teardown by PID."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Self

ROOT = Path(__file__).resolve().parent.parent


_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1 (the kernel picks it) and that this test run
    has not handed out before: a cluster takes its ports before any of its processes binds, and the
    kernel may offer a just-closed port again (a controller once got its broker's port)."""
    with _handed_out_lock:
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port


@contextlib.contextmanager
def running_zookeeper(workdir: Path) -> Iterator[Any]:
    """A real ZooKeeper (Debian's package) on a free port in ``workdir``, stopped on exit; the calling
    test is skipped, saying why, when ZooKeeper is not installed."""
    import pytest

    from zk.server import ZooKeeperNotInstalled, ZooKeeperServer

    server = ZooKeeperServer(workdir, free_port())
    try:
        server.start()
    except ZooKeeperNotInstalled as e:
        pytest.skip(str(e))
    try:
        yield server
    finally:
        server.stop()


def wait_for_port(host: str, port: int, timeout: float, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process {process.pid} exited with {process.returncode} before listening")
        try:
            socket.create_connection((host, port), 0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout} s")


class ServerProcess:
    """A ``samsa`` server child process on a free port with its own log file, stopped by PID.

    Subclasses give the command line (``_command``) and what the log says once it serves (``READY``).
    """

    ROLE = "server"
    READY: str | None = None

    def __init__(self, workdir: Path, log_name: str) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.log_path = workdir / log_name
        self.process: subprocess.Popen | None = None
        self._log: Any = None

    def _command(self) -> list[str]:
        raise NotImplementedError

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, timeout: float = 20.0) -> Self:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self._log is not None:  # a restart after a kill
            self._log.close()
        self._log = open(self.log_path, "ab")  # handed to the child; closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tools", *self._command()],
            cwd=ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
        )
        try:
            wait_for_port("127.0.0.1", self.port, timeout, self.process)
            if self.READY is not None:
                self._wait_for_log(self.READY, timeout)
        except Exception:
            self.stop()
            raise RuntimeError(f"{self.ROLE} did not start; its log:\n{self.log()}") from None
        return self

    def _wait_for_log(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r} not logged within {timeout} s")
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"process exited with {self.process.returncode}")
            time.sleep(0.02)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: int) -> None:
        """SIGKILL, SIGSTOP, SIGCONT, ... to this process only."""
        if self.alive():
            os.kill(self.pid, sig)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGCONT (in case it is paused), SIGTERM, then SIGKILL if it does not exit in time; returns
        the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        return self.process.returncode


class BrokerProcess(ServerProcess):
    """A ``samsa broker`` with its own log dir."""

    ROLE = "broker"
    READY = "started (cluster"

    def __init__(
        self, workdir: Path, zookeeper: str, broker_id: int = 1, overrides: dict[str, str] | None = None
    ) -> None:
        super().__init__(workdir, "broker.log")
        self.broker_id = broker_id
        self.overrides = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(workdir / "logs"),
            "zookeeper.connect": zookeeper,
            "zookeeper.session.timeout.ms": "6000",
            **(overrides or {}),
        }

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _command(self) -> list[str]:
        return ["broker", *(f"--override={k}={v}" for k, v in self.overrides.items())]


class RawClient:
    """A blocking Kafka-protocol client over one socket, for tests that need exact bytes on the wire."""

    def __init__(self, bootstrap: str, timeout: float = 5.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout)
        self.sock.settimeout(timeout)
        self._correlation_id = 0

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def send(self, api_key: int, version: int, body: object, correlation_id: int | None = None) -> int:
        from protocol.api import api
        from protocol.frame import encode_request

        if correlation_id is None:
            self._correlation_id += 1
            correlation_id = self._correlation_id
        self.sock.sendall(encode_request(api(api_key), version, correlation_id, "raw-test", body))
        return correlation_id

    def read_frame(self) -> bytes:
        from protocol import framing

        try:
            return bytes(framing.read_frame(self.sock.recv_into))
        except ConnectionError:
            raise ConnectionError("the broker closed the connection") from None

    def receive(self, api_key: int, version: int) -> tuple[int, object]:
        from protocol.api import api
        from protocol.frame import decode_response

        return decode_response(self.read_frame(), api(api_key), version)

    def request(self, api_key: int, version: int, body: object) -> object:
        correlation_id = self.send(api_key, version, body)
        received_id, response = self.receive(api_key, version)
        assert received_id == correlation_id
        return response

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True if the broker closes the connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


def fetch_request(
    topic: str,
    partition: int = 0,
    offset: int = 0,
    *,
    max_bytes: int = 1 << 20,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    replica_id: int = -1,
    **partition_fields: Any,
) -> Any:
    """A Fetch of one partition, as a consumer sends it (``max_bytes`` for the response and the
    partition alike); ``partition_fields`` sets the rest of the partition's fields."""
    from protocol.messages import FetchRequest

    return FetchRequest(
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchPartition(
                        partition=partition,
                        fetch_offset=offset,
                        partition_max_bytes=max_bytes,
                        **partition_fields,
                    )
                ],
            )
        ],
    )


def produce_request(
    topic: str, records: bytes, partition: int = 0, *, acks: int = -1, timeout_ms: int = 5000
) -> Any:
    """A Produce of ``records`` (encoded batches) to one partition."""
    from protocol.messages import ProduceRequest

    return ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)],
            )
        ],
    )


class ControllerProcess(ServerProcess):
    """A ``samsa controller`` (it logs nothing when it merely stands by, so readiness is its port)."""

    ROLE = "controller"

    def __init__(
        self, workdir: Path, controller_id: int, zookeeper: str, overrides: dict[str, str] | None = None
    ) -> None:
        super().__init__(workdir, f"controller-{controller_id}.log")
        self.controller_id = controller_id
        self.zookeeper = zookeeper
        self.overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{self.port}", **(overrides or {})}

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _command(self) -> list[str]:
        args = ["controller", "--id", str(self.controller_id), "--zookeeper", self.zookeeper]
        return args + [f"--override={k}={v}" for k, v in self.overrides.items()]


class Cluster:
    """A real cluster for a test: controllers and brokers on one ZooKeeper chroot, all stopped by PID."""

    def __init__(
        self,
        workdir: Path,
        zookeeper: str,
        brokers: int = 3,
        controllers: int = 1,
        broker_overrides: dict[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.zookeeper = zookeeper
        self.brokers = [
            BrokerProcess(workdir / f"broker-{i}", zookeeper, i, broker_overrides)
            for i in range(1, brokers + 1)
        ]
        # A 6 s ZooKeeper session (as the brokers'): a killed controller's /controller vanishes within it.
        session = {"zookeeper.session.timeout.ms": "6000"}
        self.controllers = [
            ControllerProcess(workdir, 9000 + i, zookeeper, session) for i in range(1, controllers + 1)
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.alive())

    def start(self) -> Cluster:
        for broker in self.brokers:
            broker.start()
        for controller in self.controllers:
            controller.start()
        self.wait_for(lambda zk: self._all_registered(zk), "every broker registered and a controller elected")
        return self

    def stop(self) -> None:
        for process in [*self.brokers, *self.controllers]:
            try:
                process.stop()
            except Exception:  # keep stopping the others
                pass

    def broker(self, broker_id: int) -> BrokerProcess:
        return next(b for b in self.brokers if b.broker_id == broker_id)

    # -- ZooKeeper views --------------------------------------------------------------------------

    def wait_for(self, condition: Callable[[Any], Any], what: str, timeout: float = 20.0) -> Any:
        """Polls ``condition(kazoo_client)`` until it returns something truthy."""
        from kazoo.client import KazooClient

        zk = KazooClient(self.zookeeper)
        zk.start(timeout=10)
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                found = condition(zk)
                if found:
                    return found
                time.sleep(0.05)
        finally:
            zk.stop()
            zk.close()
        raise TimeoutError(f"waited {timeout} s for {what}")

    def _all_registered(self, zk: object) -> bool:
        alive = {str(b.broker_id) for b in self.brokers if b.alive()}
        registered = set(zk.get_children("/brokers/ids")) if zk.exists("/brokers/ids") else set()  # type: ignore[attr-defined]
        return alive <= registered and bool(zk.exists("/controller"))  # type: ignore[attr-defined]

    def active_controller(self) -> ControllerProcess:
        from zk import znodes

        def find(zk: object) -> int | None:
            found = zk.exists("/controller") and zk.get("/controller")  # type: ignore[attr-defined]
            return znodes.decode_controller(found[0]) if found else None

        controller_id = self.wait_for(find, "an active controller")
        return next(c for c in self.controllers if c.controller_id == controller_id)

    def partition_state(self, topic: str, partition: int) -> object:
        from zk import znodes

        def read(zk: object) -> object:
            path = znodes.partition_state_path(topic, partition)
            found = zk.exists(path) and zk.get(path)  # type: ignore[attr-defined]
            return znodes.PartitionState.decode(found[0], found[1].version) if found else None

        return self.wait_for(read, f"the state of {topic}-{partition}")

    # -- topics -----------------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int, replication_factor: int = 1, timeout: float = 20.0
    ) -> None:
        """Creates a topic through a broker's CreateTopics and waits until every broker's metadata
        shows a leader for each partition."""
        import asyncio

        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        async def create() -> None:
            admin = AIOKafkaAdminClient(
                bootstrap_servers=self.bootstrap, request_timeout_ms=int(timeout * 1000)
            )
            await admin.start()
            try:
                await admin.create_topics([NewTopic(name, partitions, replication_factor)])
            finally:
                await admin.close()

        asyncio.run(create())
        self.wait_for_leaders(name, partitions, timeout)

    def wait_for_leaders(self, topic: str, partitions: int, timeout: float = 20.0) -> None:
        from protocol.api import ApiKey
        from protocol.messages import MetadataRequest

        deadline = time.monotonic() + timeout
        for broker in self.brokers:
            if not broker.alive():
                continue
            while True:
                client = RawClient(broker.bootstrap)
                request = MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
                )
                response = client.request(ApiKey.METADATA, 9, request)
                client.close()
                found = response.topics[0]
                if (
                    found.error_code == 0
                    and len(found.partitions) == partitions
                    and all(p.leader_id >= 0 for p in found.partitions)
                ):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{topic} has no leaders on broker {broker.broker_id} after {timeout} s"
                    )
                time.sleep(0.05)


class JsonEvents:
    """The JSON objects a subprocess prints on stdout, one a line, collected by a thread as they come
    (the group-member processes of the consumer-group tests report what their consumer sees so)."""

    def __init__(self, stdout: IO[str]) -> None:
        self._events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, args=(stdout,), daemon=True)
        self.reader.start()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self._lock:
                self._events.append(event)

    def all(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._events)

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The events so far whose "event" is ``kind``, in order."""
        with self._lock:
            return [e for e in self._events if e["event"] == kind]
