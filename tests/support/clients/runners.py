"""Runs real Kafka clients against a broker for the integration tests, one small function per client.

Every client runs in a subprocess (its own process group, killed by id on timeout), so a hung client
cannot hang the test and the functions are safe to call from a worker thread: a test whose broker runs
in its own event loop calls them through `asyncio.to_thread`.

Scenarios: bootstrap_<client> (connect, list brokers and topics), produce_<client> (send `count` keyed
records with headers and timestamps where the client allows, report where the broker put each one),
consume_<client> (read every partition from the beginning without a group) and consume_group_<client>
(subscribe in a consumer group, read, commit, leave; CONSUME_GROUP); check_round_trip compares
what was produced with what was consumed; transactions_<client> (TRANSACTIONS) runs the transactions
scenario of py/transactions.py through the client's transactional API. CLIENTS lists the clients,
CODECS the codecs each supports.

Each scenario function returns a structured result or raises:
  * ClientNotInstalled: the client tool (or the codec library it needs) is missing (the test skips);
  * ClientFailed: the client ran and failed; the message carries its stderr.

Security: every scenario takes `security=Security(...)` (keyword; None or PLAINTEXT: none), how the
client connects to a secured listener: TLS trusting a CA (PEM), a client certificate and key for mutual
TLS, a SASL mechanism (PLAIN, SCRAM-SHA-256/512) with a username and password. Each client gets it in its
own terms: the Python scripts and kafkajs read it from $SAMSA_CLIENT_SECURITY (JSON, see
py/secure.py and js/secure.js), the Java client loads $SAMSA_CLIENT_PROPERTIES (its own properties:
`ssl.truststore.type=PEM`, the key store inline as `ssl.keystore.key`/`ssl.keystore.certificate.chain`,
`sasl.jaas.config`), kcat gets librdkafka's `-X` settings. A test that starts a client script itself
(the group members of the consumer-group tests) passes `security.env()` in its environment.

Non-Python tools come from `make clientdeps` (tests/support/clients/setup.sh) under .cache/clients, or under
$SAMSA_CLIENTS_DIR when set; kcat comes from Debian.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
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
# security settings

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SECURITY_ENV = "SAMSA_CLIENT_SECURITY"  # JSON of Security, for the Python and kafkajs scripts
JAVA_PROPERTIES_ENV = "SAMSA_CLIENT_PROPERTIES"  # Java client properties (text), for the Java programs
JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclass(frozen=True)
class Security:
    """How a client connects: Kafka's security protocol; for TLS the CA it trusts (PEM file), and for
    mutual TLS its own certificate and key (PEM files; the key PKCS#8, encrypted with key_password or
    not); for SASL the mechanism, username and password. verify_hostname: the server certificate must
    name the host connected to (Kafka's ssl.endpoint.identification.algorithm=https, every client's
    default)."""

    protocol: str = "PLAINTEXT"
    ca: str | None = None
    certificate: str | None = None
    key: str | None = None
    key_password: str | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    verify_hostname: bool = True

    def __post_init__(self) -> None:
        if self.protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"security protocol {self.protocol!r} is not one of {SECURITY_PROTOCOLS}")
        if self.sasl and self.mechanism not in SASL_MECHANISMS:
            raise ValueError(f"SASL mechanism {self.mechanism!r} is not one of {SASL_MECHANISMS}")
        if (self.certificate is None) != (self.key is None):
            raise ValueError("a client certificate needs its key and a key its certificate")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def librdkafka(self) -> dict[str, str]:
        """librdkafka's settings (confluent-kafka, kcat)."""
        conf = {"security.protocol": self.protocol.lower()}
        if self.tls:
            if self.ca is not None:
                conf["ssl.ca.location"] = self.ca
            if self.certificate is not None and self.key is not None:
                conf["ssl.certificate.location"] = self.certificate
                conf["ssl.key.location"] = self.key
            if self.key_password is not None:
                conf["ssl.key.password"] = self.key_password
            conf["ssl.endpoint.identification.algorithm"] = "https" if self.verify_hostname else "none"
        if self.sasl:
            assert self.mechanism is not None
            conf["sasl.mechanisms"] = self.mechanism
            conf["sasl.username"] = self.username or ""
            conf["sasl.password"] = self.password or ""
        return conf

    def java(self) -> dict[str, str]:
        """The Java client's settings: the trust store a PEM file, the key store PEM inline (a PEM key
        store given by location must hold key and chain in one file; inline they stay two files)."""
        props = {"security.protocol": self.protocol}
        if self.tls:
            if self.ca is not None:
                props["ssl.truststore.type"] = "PEM"
                props["ssl.truststore.location"] = self.ca
            if self.certificate is not None and self.key is not None:
                props["ssl.keystore.type"] = "PEM"
                props["ssl.keystore.key"] = Path(self.key).read_text()
                props["ssl.keystore.certificate.chain"] = Path(self.certificate).read_text()
            if self.key_password is not None:
                props["ssl.key.password"] = self.key_password
            props["ssl.endpoint.identification.algorithm"] = "https" if self.verify_hostname else ""
        if self.sasl:
            assert self.mechanism is not None
            props["sasl.mechanism"] = self.mechanism
            props["sasl.jaas.config"] = (
                f"{JAAS_MODULES[self.mechanism]} required "
                f"username={_jaas_quoted(self.username or '')} password={_jaas_quoted(self.password or '')};"
            )
        return props

    def env(self) -> dict[str, str]:
        """The environment a client script reads these settings from."""
        return {
            SECURITY_ENV: json.dumps(dataclasses.asdict(self)),
            JAVA_PROPERTIES_ENV: java_properties_text(self.java()),
        }


def _jaas_quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_properties_text(props: Mapping[str, str]) -> str:
    """``props`` in java.util.Properties' format (what Properties.load reads back unchanged)."""

    def escape(text: str, key: bool) -> str:
        out = []
        for i, ch in enumerate(text):
            if ch == "\\":
                out.append("\\\\")
            elif ch == "\n":
                out.append("\\n")
            elif ch == "\r":
                out.append("\\r")
            elif ch == "\t":
                out.append("\\t")
            elif ch in "=:#!" or (ch == " " and (key or i == 0)):
                out.append("\\" + ch)
            else:
                out.append(ch)
        return "".join(out)

    return "".join(f"{escape(k, True)}={escape(v, False)}\n" for k, v in props.items())


def _security_env(security: Security | None) -> dict[str, str]:
    return {} if security is None else security.env()


# ---------------------------------------------------------------------------------------------------
# shared helpers


def _run(client: str, argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> str:
    """Runs argv, returns its stdout; raises ClientFailed on a non-zero exit or after `timeout` seconds."""
    return _run_with_stderr(client, argv, timeout, env)[0]


def _run_with_stderr(
    client: str, argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """As _run, for clients that report on stderr: returns (stdout, stderr)."""
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
    return out, err


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


def python_argv(client: str, script: str) -> list[str]:
    """The command line that runs py/SCRIPT with ``client`` (its arguments follow)."""
    module = PYTHON_MODULES[client]
    if importlib.util.find_spec(module) is None:
        raise ClientNotInstalled(f"{client}: Python package {module!r} is missing (pip install -e '.[test]')")
    return [sys.executable, str(HERE / "py" / script), client]


def kafkajs_argv(script: str) -> tuple[list[str], dict[str, str]]:
    """The command line that runs js/SCRIPT, and the environment it needs (NODE_PATH)."""
    node = _require_program("kafkajs", "node", "install Node.js")
    modules = clients_dir() / "node" / "node_modules"
    if not (modules / "kafkajs" / "package.json").is_file():
        raise ClientNotInstalled(f"kafkajs: not installed under {modules} (run `make clientdeps`)")
    return [node, str(HERE / "js" / script)], {"NODE_PATH": str(modules)}


def java_argv(main_source: str) -> list[str]:
    """The command line that runs java/MAIN_SOURCE as a single-file program on the client's jars."""
    java = _require_program("java", "java", "install a JDK 17")
    jar_dir = clients_dir() / "java"
    missing = [jar for jar in JAVA_JARS if not (jar_dir / jar).is_file()]
    if missing:
        raise ClientNotInstalled(f"java: {', '.join(missing)} not under {jar_dir} (run `make clientdeps`)")
    classpath = os.pathsep.join(str(jar_dir / jar) for jar in JAVA_JARS)
    return [java, "-cp", classpath, str(HERE / "java" / main_source)]


def _run_python(
    client: str,
    script: str,
    bootstrap: str,
    timeout: float,
    args: Sequence[str] = (),
    *,
    security: Security | None = None,
) -> dict[str, Any]:
    return _run_script(client, python_argv(client, script), {}, bootstrap, timeout, args, security)


def _run_kafkajs(
    script: str,
    bootstrap: str,
    timeout: float,
    args: Sequence[str] = (),
    *,
    security: Security | None = None,
) -> dict[str, Any]:
    argv, env = kafkajs_argv(script)
    return _run_script("kafkajs", argv, env, bootstrap, timeout, args, security)


def _run_java(
    main_source: str,
    bootstrap: str,
    timeout: float,
    args: Sequence[str] = (),
    *,
    security: Security | None = None,
) -> dict[str, Any]:
    return _run_script("java", java_argv(main_source), {}, bootstrap, timeout, args, security)


def _run_script(
    client: str,
    argv: list[str],
    env: Mapping[str, str],
    bootstrap: str,
    timeout: float,
    args: Sequence[str],
    security: Security | None,
) -> dict[str, Any]:
    """Runs a scenario script (ARGV BOOTSTRAP TIMEOUT_MS ARGS..., ``env`` and the security settings in
    its environment); the JSON object its last line prints."""
    argv = [*argv, *_script_args(bootstrap, timeout, args)]
    out = _run(client, argv, timeout, env={**env, **_security_env(security)})
    return _last_json_line(client, out)


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


def _kcat() -> str:
    return _require_program("kcat", "kcat", "Debian package kcat; `make sysdeps`")


def _kcat_timeout_s(timeout: float) -> str:
    """kcat's -m: its metadata (and producer flush) timeout, in whole seconds."""
    return str(max(1, int(timeout * CLIENT_TIMEOUT_SHARE)))


def _kcat_security(security: Security | None) -> list[str]:
    """kcat's -X arguments for ``security``."""
    if security is None:
        return []
    return [arg for key, value in security.librdkafka().items() for arg in ("-X", f"{key}={value}")]


def _kcat_metadata(
    bootstrap: str, timeout: float, *args: str, security: Security | None = None
) -> dict[str, Any]:
    """`kcat -L -J` with extra arguments (`-t TOPIC`)."""
    argv = [_kcat(), "-L", "-J", "-b", bootstrap, "-m", _kcat_timeout_s(timeout), *_kcat_security(security)]
    out = _run("kcat", [*argv, *args], timeout)
    return _last_json_line("kcat", out)


def _split_host_port(name: str) -> tuple[str, int]:
    host, _, port = name.rpartition(":")
    return host.strip("[]"), int(port)


# ---------------------------------------------------------------------------------------------------
# bootstrap: connect, learn the brokers and the topics


def bootstrap_aiokafka(
    bootstrap: str, timeout: float = DEFAULT_TIMEOUT, *, security: Security | None = None
) -> BootstrapResult:
    """AIOKafkaAdminClient.describe_cluster() and list_topics()."""
    raw = _run_python("aiokafka", "bootstrap.py", bootstrap, timeout, security=security)
    return _bootstrap_result("aiokafka", raw)


def bootstrap_kafka_python(
    bootstrap: str, timeout: float = DEFAULT_TIMEOUT, *, security: Security | None = None
) -> BootstrapResult:
    """KafkaAdminClient.describe_cluster() and list_topics()."""
    raw = _run_python("kafka-python", "bootstrap.py", bootstrap, timeout, security=security)
    return _bootstrap_result("kafka-python", raw)


def bootstrap_confluent_kafka(
    bootstrap: str, timeout: float = DEFAULT_TIMEOUT, *, security: Security | None = None
) -> BootstrapResult:
    """AdminClient.list_topics() (one Metadata round trip through librdkafka)."""
    raw = _run_python("confluent-kafka", "bootstrap.py", bootstrap, timeout, security=security)
    return _bootstrap_result("confluent-kafka", raw)


def bootstrap_kafkajs(
    bootstrap: str, timeout: float = DEFAULT_TIMEOUT, *, security: Security | None = None
) -> BootstrapResult:
    """kafkajs admin describeCluster() and listTopics() (tests/support/clients/js/bootstrap.js)."""
    raw = _run_kafkajs("bootstrap.js", bootstrap, timeout, security=security)
    return _bootstrap_result("kafkajs", raw)


def bootstrap_java(
    bootstrap: str, timeout: float = DEFAULT_TIMEOUT, *, security: Security | None = None
) -> BootstrapResult:
    """Java AdminClient describeCluster() and listTopics() (tests/support/clients/java/Bootstrap.java)."""
    raw = _run_java("Bootstrap.java", bootstrap, timeout, security=security)
    return _bootstrap_result("java", raw)


def admin_kafkajs(
    bootstrap: str, topic: str, timeout: float = DEFAULT_TIMEOUT, *, security: Security | None = None
) -> dict[str, Any]:
    """kafkajs's admin client: create (3 partitions, retention.ms), list, describe topic and config, grow
    to 5 partitions, delete (tests/support/clients/js/admin.js); returns what each step saw."""
    return _run_kafkajs("admin.js", bootstrap, timeout, [topic], security=security)


def admin_java(
    bootstrap: str, topic: str, timeout: float = DEFAULT_TIMEOUT, *, security: Security | None = None
) -> dict[str, Any]:
    """The same with the Java AdminClient (tests/support/clients/java/Admin.java)."""
    return _run_java("Admin.java", bootstrap, timeout, [topic], security=security)


def bootstrap_kcat(
    bootstrap: str, timeout: float = DEFAULT_TIMEOUT, *, security: Security | None = None
) -> BootstrapResult:
    """`kcat -L -J` (Debian's kcat, an old librdkafka). kcat does not show the cluster id."""
    raw = _kcat_metadata(bootstrap, timeout, security=security)
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


BOOTSTRAP: dict[str, Callable[..., BootstrapResult]] = {
    "aiokafka": bootstrap_aiokafka,
    "kafka-python": bootstrap_kafka_python,
    "confluent-kafka": bootstrap_confluent_kafka,
    "kafkajs": bootstrap_kafkajs,
    "java": bootstrap_java,
    "kcat": bootstrap_kcat,
}
CLIENTS = tuple(BOOTSTRAP)


# ---------------------------------------------------------------------------------------------------
# produce and consume

# 10,000 records take a few seconds with any client; the budget covers a JVM start and a slow broker.
RECORDS_TIMEOUT = 120.0
ALL_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODECS: dict[str, tuple[str, ...]] = {
    "aiokafka": ALL_CODECS,  # snappy, lz4 and zstd through cramjam
    "kafka-python": ALL_CODECS,  # snappy, lz4 and zstd need python-snappy, lz4 and zstandard installed
    "confluent-kafka": ALL_CODECS,
    "kafkajs": ("none", "gzip"),  # the others need codec plug-ins kafkajs does not ship
    "java": ALL_CODECS,
    "kcat": ALL_CODECS,
}
KAFKA_PYTHON_CODEC_PACKAGES = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}
# Explicit timestamps start an hour before the run: old enough to be distinct from the time of sending,
# recent enough that retention (by a segment's largest timestamp) never deletes them during a test.
TIMESTAMP_BASE_AGE_MS = 3_600_000
# Compressible filler, so that librdkafka (which sends a batch uncompressed when compression does not
# shrink it) really compresses; values come out between 100 and 200 bytes.
PADDING = b"the quick brown fox jumps over the lazy dog " * 5
KCAT_LINGER_MS = 10
KCAT_DELIVERY = re.compile(r"Message delivered to partition (\d+) \(offset (-?\d+)\)")

Header = tuple[str, bytes | None]  # a consumed header's value may be null


@dataclass(frozen=True)
class ProducedRecord:
    """A record as sent and where the broker acknowledged it.

    timestamp is None when the client cannot set one (it stamps the time of sending). offset is None with
    acks=0 (the broker acknowledges nothing; what clients report then is not an offset), partition is None
    when the client does not report it either (aiokafka with acks=0).
    """

    key: bytes
    value: bytes
    headers: tuple[Header, ...]
    timestamp: int | None
    partition: int | None
    offset: int | None


@dataclass(frozen=True)
class ProduceResult:
    """records are in the order sent. seconds is the client's own time from the first send to the last
    acknowledgement (without process start); window_ms is the wall clock around the whole run, which
    bounds the timestamps a client stamps itself."""

    client: str
    topic: str
    codec: str
    acks: int
    idempotent: bool
    records: tuple[ProducedRecord, ...]
    seconds: float
    window_ms: tuple[int, int]


@dataclass(frozen=True)
class ConsumedRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp: int


@dataclass(frozen=True)
class ConsumeResult:
    """records are in the order the client returned them; seconds as in ProduceResult."""

    client: str
    topic: str
    records: tuple[ConsumedRecord, ...]
    seconds: float


class _Outgoing(NamedTuple):
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int | None


def _outgoing(client: str, count: int, *, per_record: bool) -> list[_Outgoing]:
    """Record i: key `key-<i>`, value `value-<i>` plus padding, headers seq=<i> and client=<name>, timestamp
    base + i. Without per_record (kcat) only the client header, the same for all, and no timestamp."""
    base = _now_ms() - TIMESTAMP_BASE_AGE_MS
    records = []
    for i in range(count):
        seq = (("seq", str(i).encode()),) if per_record else ()
        head = f"value-{i} ".encode()
        records.append(
            _Outgoing(
                key=f"key-{i}".encode(),
                value=head + PADDING[: 100 + i * 7919 % 101 - len(head)],
                headers=(*seq, ("client", client.encode())),
                timestamp=base + i if per_record else None,
            )
        )
    return records


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _check_codec(client: str, codec: str) -> None:
    if codec not in CODECS[client]:
        raise ValueError(f"{client} has no {codec} codec (it has {', '.join(CODECS[client])})")
    if client == "kafka-python" and codec in KAFKA_PYTHON_CODEC_PACKAGES:
        from kafka import codec as kafka_codec

        if not getattr(kafka_codec, f"has_{codec}")():
            raise ClientNotInstalled(
                f"kafka-python: {codec} needs the Python package {KAFKA_PYTHON_CODEC_PACKAGES[codec]!r}"
            )


Placement = tuple[int | None, int | None]  # (partition, offset) as the client reports them


def _produced(
    client: str, records: Sequence[_Outgoing], placed: Mapping[int, Placement], acks: int
) -> tuple[ProducedRecord, ...]:
    """Joins the records sent with {record index: (partition, offset)} from the client."""
    if sorted(placed) != list(range(len(records))):
        found = len(placed.keys() & range(len(records)))
        raise ClientFailed(client, f"acknowledgements for {found} of {len(records)} records")
    return tuple(
        ProducedRecord(r.key, r.value, r.headers, r.timestamp, placed[i][0], placed[i][1] if acks else None)
        for i, r in enumerate(records)
    )


# launch(bootstrap, timeout, args, security=...) runs a client script and returns its JSON result.
Launcher = Callable[..., dict[str, Any]]


def _produce_with_script(
    client: str,
    launch: Launcher,
    bootstrap: str,
    topic: str,
    count: int,
    codec: str,
    acks: int,
    idempotent: bool,
    timeout: float,
    security: Security | None,
) -> ProduceResult:
    """The scripts read the records from a file, one per line: key, value, timestamp, then header
    name/value pairs, tab-separated; they print {"acks": [[index, partition, offset|null]...], "seconds"}."""
    _check_codec(client, codec)
    records = _outgoing(client, count, per_record=True)
    started = _now_ms()
    with tempfile.TemporaryDirectory(prefix="samsa-produce-") as tmp:
        path = Path(tmp) / "records.tsv"
        with path.open("wb") as f:
            for r in records:
                headers = b"".join(b"\t" + name.encode() + b"\t" + value for name, value in r.headers)
                f.write(b"%s\t%s\t%d%s\n" % (r.key, r.value, r.timestamp, headers))
        raw = launch(
            bootstrap,
            timeout,
            ["produce", topic, codec, str(acks), str(int(idempotent)), str(path)],
            security=security,
        )
    placed = {int(i): (p, o) for i, p, o in raw["acks"]}
    return ProduceResult(
        client,
        topic,
        codec,
        acks,
        idempotent,
        _produced(client, records, placed, acks),
        raw["seconds"],
        (started, _now_ms()),
    )


def _consume_with_script(
    client: str,
    launch: Launcher,
    bootstrap: str,
    topic: str,
    args: Sequence[str],
    timeout: float,
    security: Security | None,
) -> ConsumeResult:
    """The scripts print {"records": [[partition, offset, timestamp, key, value, [[name, value]...]]...],
    "seconds"}, every string base64; they return what they have at their deadline. args: the mode and
    its arguments ("consume" PARTITIONS EXPECTED or "consume-group" GROUP EXPECTED)."""
    raw = launch(bootstrap, timeout, [args[0], topic, *args[1:]], security=security)
    records = tuple(
        ConsumedRecord(
            partition=int(p),
            offset=int(o),
            key=_unbase64(key),
            value=_unbase64(value),
            headers=tuple((base64.b64decode(n).decode(), _unbase64(v)) for n, v in headers),
            timestamp=int(ts),
        )
        for p, o, ts, key, value, headers in raw["records"]
    )
    return ConsumeResult(client, topic, records, raw["seconds"])


def _unbase64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


_PYTHON_RECORDS = "records.py"


@dataclass(frozen=True)
class _ScriptedClient:
    """A client driven by its records script (py/records.py, js/records.js, java/Records.java)."""

    name: str
    launch: Launcher

    def produce(
        self,
        bootstrap: str,
        topic: str,
        count: int,
        *,
        codec: str = "none",
        acks: int = -1,
        idempotent: bool = False,
        timeout: float = RECORDS_TIMEOUT,
        security: Security | None = None,
    ) -> ProduceResult:
        return _produce_with_script(
            self.name, self.launch, bootstrap, topic, count, codec, acks, idempotent, timeout, security
        )

    def consume(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        expected: int,
        *,
        timeout: float = RECORDS_TIMEOUT,
        security: Security | None = None,
    ) -> ConsumeResult:
        return self._consume(bootstrap, topic, ["consume", str(partitions), str(expected)], timeout, security)

    def consume_group(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        expected: int,
        *,
        timeout: float = RECORDS_TIMEOUT,
        security: Security | None = None,
    ) -> ConsumeResult:
        return self._consume(bootstrap, topic, ["consume-group", group, str(expected)], timeout, security)

    def _consume(
        self, bootstrap: str, topic: str, args: list[str], timeout: float, security: Security | None
    ) -> ConsumeResult:
        return _consume_with_script(self.name, self.launch, bootstrap, topic, args, timeout, security)


# How each script drives its client:
# - aiokafka: AIOKafkaProducer.send() for every record, then the futures awaited; AIOKafkaConsumer
#   without a group: assign(), seek_to_beginning(), getmany().
# - kafka-python: KafkaProducer.send(), flush(), then the futures read (idempotence is on by default:
#   `idempotent` sets it either way); KafkaConsumer without a group: assign(), seek_to_beginning(), poll().
# - confluent-kafka: Producer.produce() with a delivery callback per record, then flush();
#   Consumer.assign() at OFFSET_BEGINNING, consume() in batches, no commits.
# - kafkajs: producer.send() in chunks of 2,000 records, the default partitioner wrapped to learn each
#   record's partition (offsets follow from each partition's base offset); it has no assign(), so
#   consuming is its own Fetch through the client's cluster object.
# - java: KafkaProducer.send() with a callback per record, then flush() (idempotence on by default);
#   KafkaConsumer without group.id: assign(), seekToBeginning(), poll().
# consume_group (every script): subscribe to the topic in GROUP (earliest where the group has no offset),
# poll until EXPECTED records or the deadline, commit what was read synchronously, close (leaving the
# group); kafkajs through consumer.run() with its own commits.
_aiokafka = _ScriptedClient("aiokafka", partial(_run_python, "aiokafka", _PYTHON_RECORDS))
_kafka_python = _ScriptedClient("kafka-python", partial(_run_python, "kafka-python", _PYTHON_RECORDS))
_confluent_kafka = _ScriptedClient(
    "confluent-kafka", partial(_run_python, "confluent-kafka", _PYTHON_RECORDS)
)
_kafkajs = _ScriptedClient("kafkajs", partial(_run_kafkajs, "records.js"))
_java = _ScriptedClient("java", partial(_run_java, "Records.java"))
produce_aiokafka, consume_aiokafka = _aiokafka.produce, _aiokafka.consume
produce_kafka_python, consume_kafka_python = _kafka_python.produce, _kafka_python.consume
produce_confluent_kafka, consume_confluent_kafka = _confluent_kafka.produce, _confluent_kafka.consume
produce_kafkajs, consume_kafkajs = _kafkajs.produce, _kafkajs.consume
produce_java, consume_java = _java.produce, _java.consume
consume_group_aiokafka = _aiokafka.consume_group
consume_group_kafka_python = _kafka_python.consume_group
consume_group_confluent_kafka = _confluent_kafka.consume_group
consume_group_kafkajs = _kafkajs.consume_group
consume_group_java = _java.consume_group


def produce_kcat(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    codec: str = "none",
    acks: int = -1,
    idempotent: bool = False,
    timeout: float = RECORDS_TIMEOUT,
    security: Security | None = None,
) -> ProduceResult:
    """`kcat -P -K '\\t' -l FILE`. kcat cannot set a header or timestamp per record: every record carries
    the header client=kcat and the time of sending. Its delivery reports (-v -v -v, on stderr) name a
    partition and offset but not the record: each partition's reports are matched, in order, to the
    records that librdkafka's default partitioner (CRC32 of the key) sends there."""
    kcat = _kcat()
    _check_codec("kcat", codec)
    (topic_metadata,) = _kcat_metadata(bootstrap, timeout, "-t", topic, security=security)["topics"]
    partitions = len(topic_metadata["partitions"])
    records = _outgoing("kcat", count, per_record=False)
    started = _now_ms()
    with tempfile.TemporaryDirectory(prefix="samsa-produce-") as tmp:
        path = Path(tmp) / "records.tsv"
        path.write_bytes(b"".join(r.key + b"\t" + r.value + b"\n" for r in records))
        argv = [kcat, "-P", "-b", bootstrap, "-t", topic, "-K", "\\t", "-l", str(path), "-H", "client=kcat"]
        argv += ["-v", "-v", "-v", "-m", _kcat_timeout_s(timeout), *_kcat_security(security)]
        for key, value in {
            "compression.codec": codec,
            "acks": acks,
            "enable.idempotence": str(idempotent).lower(),
            "linger.ms": KCAT_LINGER_MS,
            "message.timeout.ms": _client_timeout_ms(timeout),
        }.items():
            argv += ["-X", f"{key}={value}"]
        clock = time.monotonic()
        _, err = _run_with_stderr("kcat", argv, timeout)
        seconds = time.monotonic() - clock
    placed = _kcat_placements([r.key for r in records], partitions, err)
    return ProduceResult(
        "kcat",
        topic,
        codec,
        acks,
        idempotent,
        _produced("kcat", records, placed, acks),
        seconds,
        (started, _now_ms()),
    )


def _kcat_placements(keys: Sequence[bytes], partitions: int, stderr: str) -> dict[int, Placement]:
    """{record index: (partition, offset)} from kcat's delivery reports, which come in order per partition."""
    waiting: dict[int, deque[int]] = defaultdict(deque)
    for i, key in enumerate(keys):
        waiting[zlib.crc32(key) % partitions].append(i)
    placed: dict[int, Placement] = {}
    for match in KCAT_DELIVERY.finditer(stderr):
        partition, offset = int(match[1]), int(match[2])
        if not waiting[partition]:
            raise ClientFailed(
                "kcat", f"more delivery reports for partition {partition} than records", stderr
            )
        placed[waiting[partition].popleft()] = (partition, offset if offset >= 0 else None)
    return placed


def consume_kcat(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    *,
    timeout: float = RECORDS_TIMEOUT,
    security: Security | None = None,
) -> ConsumeResult:
    """`kcat -C -o beginning -c EXPECTED -J`: kcat reads every partition of the topic (whatever
    `partitions` says) and fails by timing out when fewer records than expected come."""
    kcat = _kcat()
    argv = [kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-c", str(expected), "-J", "-q"]
    argv += ["-m", _kcat_timeout_s(timeout), *_kcat_security(security)]
    clock = time.monotonic()
    out = _run("kcat", argv, timeout)
    return _kcat_consumed(topic, out, time.monotonic() - clock)


def consume_group_kcat(
    bootstrap: str,
    topic: str,
    group: str,
    expected: int,
    *,
    timeout: float = RECORDS_TIMEOUT,
    security: Security | None = None,
) -> ConsumeResult:
    """`kcat -G GROUP TOPIC -c EXPECTED -J`: librdkafka's group consumer (earliest where the group has
    no offset), its offsets committed by librdkafka's auto-commit, finally when kcat closes it."""
    argv = [_kcat(), "-b", bootstrap, "-G", group, "-c", str(expected), "-J", "-q"]
    argv += ["-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=10000"]
    argv += ["-m", _kcat_timeout_s(timeout), *_kcat_security(security), topic]
    clock = time.monotonic()
    out = _run("kcat", argv, timeout)
    return _kcat_consumed(topic, out, time.monotonic() - clock)


def _kcat_consumed(topic: str, out: str, seconds: float) -> ConsumeResult:
    records = []
    for line in out.splitlines():
        m = json.loads(line)
        flat = m.get("headers") or []
        records.append(
            ConsumedRecord(
                partition=m["partition"],
                offset=m["offset"],
                key=_encode(m["key"]),
                value=_encode(m["payload"]),
                headers=tuple((flat[i], _encode(flat[i + 1])) for i in range(0, len(flat), 2)),
                timestamp=m["ts"],
            )
        )
    return ConsumeResult("kcat", topic, tuple(records), seconds)


def _encode(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


PRODUCE: dict[str, Callable[..., ProduceResult]] = {
    "aiokafka": produce_aiokafka,
    "kafka-python": produce_kafka_python,
    "confluent-kafka": produce_confluent_kafka,
    "kafkajs": produce_kafkajs,
    "java": produce_java,
    "kcat": produce_kcat,
}
CONSUME_GROUP: dict[str, Callable[..., ConsumeResult]] = {
    "aiokafka": consume_group_aiokafka,
    "kafka-python": consume_group_kafka_python,
    "confluent-kafka": consume_group_confluent_kafka,
    "kafkajs": consume_group_kafkajs,
    "java": consume_group_java,
    "kcat": consume_group_kcat,
}
CONSUME: dict[str, Callable[..., ConsumeResult]] = {
    "aiokafka": consume_aiokafka,
    "kafka-python": consume_kafka_python,
    "confluent-kafka": consume_confluent_kafka,
    "kafkajs": consume_kafkajs,
    "java": consume_java,
    "kcat": consume_kcat,
}


# ---------------------------------------------------------------------------------------------------
# the round-trip check

MAX_PROBLEMS_SHOWN = 20
# A timestamp the client stamps itself may come from a clock read a little before the run's window.
CLOCK_SLACK_MS = 1000


def check_round_trip(produced: ProduceResult, consumed: ConsumeResult) -> None:
    """Raises AssertionError listing what differs: every record read back once; per partition, offsets
    contiguous from 0 in the order read, the records in the order sent, at the offsets acknowledged, with
    keys, values, headers and timestamps intact (a timestamp the client stamped itself within the run)."""
    read: dict[int, list[ConsumedRecord]] = defaultdict(list)
    for c in consumed.records:
        read[c.partition].append(c)
    # A record whose partition the client did not report belongs where its (unique) key was read.
    read_in = {c.key: c.partition for c in consumed.records}
    sent: dict[int, list[ProducedRecord]] = defaultdict(list)
    problems: list[str] = []
    for r in produced.records:
        partition = read_in.get(r.key) if r.partition is None else r.partition
        if partition is None:
            problems.append(f"key {r.key!r} (partition not reported) was not read")
        else:
            sent[partition].append(r)
    for partition in sorted(sent.keys() | read.keys()):
        problems += _partition_problems(partition, sent[partition], read[partition], produced.window_ms)
    if problems:
        shown = "\n  ".join(problems[:MAX_PROBLEMS_SHOWN])
        more = (
            f"\n  ... and {len(problems) - MAX_PROBLEMS_SHOWN} more"
            if len(problems) > MAX_PROBLEMS_SHOWN
            else ""
        )
        raise AssertionError(
            f"{produced.client} ({produced.codec}, acks={produced.acks}) -> {consumed.client}: "
            f"{len(produced.records)} records sent, {len(consumed.records)} read; "
            f"{len(problems)} problems:\n  {shown}{more}"
        )


def _partition_problems(
    partition: int, sent: list[ProducedRecord], read: list[ConsumedRecord], window_ms: tuple[int, int]
) -> list[str]:
    where = f"partition {partition}"
    problems = []
    if len(sent) != len(read):
        problems.append(f"{where}: {len(sent)} records sent, {len(read)} read")
    offsets = [c.offset for c in read]
    if offsets != list(range(len(read))):
        first = next(i for i, o in enumerate(offsets) if o != i)
        problems.append(
            f"{where}: offsets read are not 0, 1, 2...: position {first} has offset {offsets[first]}"
        )
    acked = [s.offset for s in sent if s.offset is not None]
    if acked != sorted(set(acked)):
        problems.append(f"{where}: acknowledged offsets are not increasing in the order sent")
    low, high = window_ms[0] - CLOCK_SLACK_MS, window_ms[1] + CLOCK_SLACK_MS
    for position, (s, c) in enumerate(zip(sent, read, strict=False)):
        at = f"{where} position {position} (key {s.key!r})"
        if s.offset is not None and s.offset != c.offset:
            problems.append(f"{at}: acknowledged at offset {s.offset}, read at {c.offset}")
        if (c.key, c.value) != (s.key, s.value):
            problems.append(f"{at}: read key {c.key!r} value {_short(c.value)}, sent value {_short(s.value)}")
        if c.headers != s.headers:
            problems.append(f"{at}: headers {c.headers} read, {s.headers} sent")
        if s.timestamp is not None and c.timestamp != s.timestamp:
            problems.append(f"{at}: timestamp {c.timestamp} read, {s.timestamp} sent")
        if s.timestamp is None and not low <= c.timestamp <= high:
            problems.append(f"{at}: timestamp {c.timestamp} is outside the run's window {window_ms}")
    return problems


def _short(value: bytes | None) -> str:
    return repr(value if value is None or len(value) <= 40 else value[:40] + b"...")


# ---------------------------------------------------------------------------------------------------
# transactions: one scenario per client through its transactional API (py/transactions.py describes it;
# js/transactions.js and java/Transactions.java are its twins and print the same JSON)

# The scenario starts five producers, three consumers and a group, and waits out commits: several times
# the budget of a produce run; each client operation has its own, shorter timeout inside the script.
TRANSACTIONS_TIMEOUT = 240.0


@dataclass(frozen=True)
class TxnRecord:
    """A record sent in a transaction: where the script sent it and the offset its producer acknowledged
    (None where the client does not say)."""

    partition: int
    value: str
    offset: int | None


@dataclass(frozen=True)
class Transaction:
    """One transaction of the scenario in the order run; outcome "commit" or "abort" ("crashed", left open
    by its producer, is "abort": the next producer's init aborts it)."""

    name: str
    outcome: str
    records: tuple[TxnRecord, ...]


@dataclass(frozen=True)
class TxnRead:
    """What a consumer of one isolation level read from the beginning of the data topic: (partition,
    offset, value) in the order returned, its position per partition afterwards (None when the client
    has no position to tell), and the end offsets its client's ListOffsets gives at that isolation level
    (read_committed: the last stable offset)."""

    records: tuple[tuple[int, int, str], ...]
    positions: dict[int, int] | None
    end_offsets: dict[int, int] | None


@dataclass(frozen=True)
class TransactionsResult:
    """The scenario's outcome. offset_after_abort / offset_after_commit: the group's committed offset of
    the input partition after the aborted and the committed send-offsets transactions (None: none).
    fenced_step / fenced_error: where the fenced producer failed and the client's error (None: it did
    not fail). read_*_open: the reads while "crashed" was open, read_committed / read_uncommitted at the
    end. notes: what the client does differently from the others."""

    client: str
    txns: tuple[Transaction, ...]
    input_read: tuple[int, ...]
    offset_after_abort: int | None
    offset_after_commit: int | None
    fenced_step: str | None
    fenced_error: str | None
    read_committed: TxnRead
    read_uncommitted: TxnRead
    read_committed_open: TxnRead
    read_uncommitted_open: TxnRead
    notes: tuple[str, ...]


def _transactions_result(client: str, raw: Mapping[str, Any]) -> TransactionsResult:
    def by_partition(offsets: Mapping[str, Any] | None) -> dict[int, int] | None:
        return None if offsets is None else {int(p): int(o) for p, o in offsets.items()}

    def read(side: Mapping[str, Any]) -> TxnRead:
        return TxnRead(
            records=tuple((int(p), int(o), str(v)) for p, o, v in side["records"]),
            positions=by_partition(side.get("positions")),
            end_offsets=by_partition(side.get("end_offsets")),
        )

    fenced = raw.get("fenced")
    offsets = raw["offsets"]
    return TransactionsResult(
        client=client,
        txns=tuple(
            Transaction(
                t["name"],
                t["outcome"],
                tuple(TxnRecord(int(p), str(v), None if o is None else int(o)) for p, v, o in t["records"]),
            )
            for t in raw["txns"]
        ),
        input_read=tuple(int(o) for o in offsets["input_read"]),
        offset_after_abort=offsets.get("after_abort"),
        offset_after_commit=offsets.get("after_commit"),
        fenced_step=None if fenced is None else fenced["step"],
        fenced_error=None if fenced is None else fenced["error"],
        read_committed=read(raw["read_committed"]),
        read_uncommitted=read(raw["read_uncommitted"]),
        read_committed_open=read(raw["read_committed_open"]),
        read_uncommitted_open=read(raw["read_uncommitted_open"]),
        notes=tuple(raw.get("notes") or ()),
    )


def _transactions_with(
    client: str,
    launch: Launcher,
    bootstrap: str,
    data_topic: str,
    input_topic: str,
    group: str,
    transactional_id: str,
    partitions: int,
    timeout: float,
    security: Security | None,
) -> TransactionsResult:
    raw = launch(
        bootstrap,
        timeout,
        [data_topic, input_topic, group, transactional_id, str(partitions)],
        security=security,
    )
    return _transactions_result(client, raw)


def _transactions_scenario(client: str, launch: Launcher) -> Callable[..., TransactionsResult]:
    def scenario(
        bootstrap: str,
        data_topic: str,
        input_topic: str,
        group: str,
        transactional_id: str,
        partitions: int,
        *,
        timeout: float = TRANSACTIONS_TIMEOUT,
        security: Security | None = None,
    ) -> TransactionsResult:
        """Runs the transactions scenario: records to DATA_TOPIC (record i of a transaction to partition
        i % partitions), six input records seeded to INPUT_TOPIC partition 0 and read in GROUP."""
        return _transactions_with(
            client,
            launch,
            bootstrap,
            data_topic,
            input_topic,
            group,
            transactional_id,
            partitions,
            timeout,
            security,
        )

    scenario.__name__ = f"transactions_{client.replace('-', '_')}"
    return scenario


# - aiokafka, kafka-python, confluent-kafka: py/transactions.py with the client's producer and consumers;
# - kafkajs: js/transactions.js (no initTransactions, group-only consumers: see its notes);
# - java: java/Transactions.java, KafkaProducer/KafkaConsumer of kafka-clients.
transactions_aiokafka = _transactions_scenario(
    "aiokafka", partial(_run_python, "aiokafka", "transactions.py")
)
transactions_kafka_python = _transactions_scenario(
    "kafka-python", partial(_run_python, "kafka-python", "transactions.py")
)
transactions_confluent_kafka = _transactions_scenario(
    "confluent-kafka", partial(_run_python, "confluent-kafka", "transactions.py")
)
transactions_kafkajs = _transactions_scenario("kafkajs", partial(_run_kafkajs, "transactions.js"))
transactions_java = _transactions_scenario("java", partial(_run_java, "Transactions.java"))

TRANSACTIONS: dict[str, Callable[..., TransactionsResult]] = {
    "aiokafka": transactions_aiokafka,
    "kafka-python": transactions_kafka_python,
    "confluent-kafka": transactions_confluent_kafka,
    "kafkajs": transactions_kafkajs,
    "java": transactions_java,
}
