"""``samsa.testing``: a real Samsa cluster for your own pytest suite, as fixtures (docs/testing.md).

Installing ``samsa-broker`` registers this module as a pytest plugin (a ``pytest11`` entry point), so the
fixtures are there in every test suite of that environment, with no conftest to write:

    async def test_round_trip(samsa_bootstrap, samsa_topic):
        topic = samsa_topic(partitions=3)
        ...  # any Kafka client, bootstrap_servers=samsa_bootstrap

``samsa_cluster`` (session)
    A running ``samsa.LocalCluster``: ZooKeeper, controllers and brokers as child processes on free
    ports, in a temporary dir, killed by PID at the end. One broker and one controller unless the ini
    options ``samsa_brokers``, ``samsa_controllers``, ``samsa_broker_config`` (lines ``key=value``) or a
    ``samsa`` marker say otherwise. Its node controls are the fault injection: ``broker(id).kill()``,
    ``.stop()``, ``.pause()``, ``.resume()``, ``.start()``, ``.restart()``, ``add_broker()``,
    ``leader(topic, partition)``, ...
``samsa_bootstrap`` (session)
    The cluster's ``bootstrap.servers`` string.
``samsa_topic`` (function)
    A factory: ``samsa_topic(partitions=1, replication_factor=None, config=None, name=None)`` creates a
    topic with a name unique to the test (through CreateTopics, as any admin client) and returns the
    name once every broker knows its leaders; the topics are deleted after the test.

``@pytest.mark.samsa(brokers=3, controllers=1, config={...}, broker_config={2: {...}})`` on a test, a
class or a module (``pytestmark``) gives those tests a cluster of that shape instead: the session's
cluster is a pytest parameter, so tests with equal marker arguments share one cluster, they run after
the unmarked ones, and only one cluster runs at a time. Marker ``config`` is applied over the ini's
``samsa_broker_config``. A marker cannot change the cluster of a whole session (conftest.py markers
apply to nothing): that is what the ini options are for.

Before each test that uses the cluster, nodes an earlier test stopped, killed or paused are started or
resumed again and the cluster is waited for, so a fault test leaves no fault behind.

Importing this module imports nothing of Samsa: the cluster is built on first use of a fixture.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import pytest

if TYPE_CHECKING:
    from tools.local_cluster import LocalCluster

__all__ = ["ClusterSpec", "TopicFactory"]

log = logging.getLogger("samsa.testing")

MARKER = "samsa"
MARKER_ARGS = ("brokers", "controllers", "config", "broker_config")
MARKER_HELP = (
    "samsa(brokers=N, controllers=M, config={key: value}, broker_config={broker_id: {key: value}}): "
    "the shape of the samsa_cluster these tests use (samsa.testing; docs/testing.md)"
)

Settings = tuple[tuple[str, str], ...]


def _settings(mapping: Mapping[Any, Any] | None, where: str) -> Settings:
    if mapping is None:
        return ()
    if not isinstance(mapping, Mapping):
        raise pytest.UsageError(f"{where} must be a dict of settings, not {mapping!r}")
    return tuple(
        sorted((str(k), str(v).lower() if isinstance(v, bool) else str(v)) for k, v in mapping.items())
    )


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    """The shape of a ``samsa_cluster``: hashable and comparable, as pytest compares parameters."""

    brokers: int = 1
    controllers: int = 1
    config: Settings = ()
    broker_config: tuple[tuple[int, Settings], ...] = ()

    def label(self) -> str:
        """The test-id suffix of the tests that use it: ``brokers=3``, ``brokers=1,num.partitions=2``."""
        parts = [f"brokers={self.brokers}"]
        if self.controllers != 1:
            parts.append(f"controllers={self.controllers}")
        parts += [f"{k}={v}" for k, v in self.config]
        parts += [f"b{b}:{k}={v}" for b, settings in self.broker_config for k, v in settings]
        text = ",".join(parts)
        if len(text) > 60:
            import hashlib

            text = f"{text[:50]}~{hashlib.sha1(text.encode()).hexdigest()[:8]}"
        return text


_ACTIVE = pytest.StashKey[tuple[ClusterSpec, "LocalCluster"]]()
_DEFAULT_SPEC = pytest.StashKey[ClusterSpec]()
_clusters = itertools.count(1)


# -- options, marker, spec ------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("samsa_brokers", "samsa.testing: brokers of samsa_cluster (default 1)", default="1")
    parser.addini("samsa_controllers", "samsa.testing: controllers of samsa_cluster (default 1)", default="1")
    parser.addini(
        "samsa_broker_config",
        "samsa.testing: broker settings of samsa_cluster, one key=value a line",
        type="linelist",
        default=[],
    )
    parser.addini(
        "samsa_zookeeper",
        "samsa.testing: host:port of a running ZooKeeper for samsa_cluster (each cluster takes a chroot "
        "of its own); by default each cluster starts its own",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)


def _positive_int(config: pytest.Config, name: str) -> int:
    raw = str(config.getini(name)).strip()
    if not raw.isdigit() or int(raw) < 1:
        raise pytest.UsageError(f"{name} = {raw!r}: expected a whole number of at least 1")
    return int(raw)


def default_spec(config: pytest.Config) -> ClusterSpec:
    """The cluster the ini options describe (what an unmarked test gets)."""
    found = config.stash.get(_DEFAULT_SPEC, None)
    if found is not None:
        return found
    settings = {}
    for line in config.getini("samsa_broker_config"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"samsa_broker_config: {line!r} is not key=value")
        settings[key.strip()] = value.strip()
    spec = ClusterSpec(
        brokers=_positive_int(config, "samsa_brokers"),
        controllers=_positive_int(config, "samsa_controllers"),
        config=_settings(settings, "samsa_broker_config"),
    )
    config.stash[_DEFAULT_SPEC] = spec
    return spec


def spec_of(node: pytest.Item, config: pytest.Config) -> ClusterSpec:
    """The ini's cluster with the ``samsa`` markers of ``node`` applied, farthest (module) first."""
    base = default_spec(config)
    brokers, controllers = base.brokers, base.controllers
    settings = dict(base.config)
    per_broker: dict[int, dict[str, str]] = {}
    for mark in reversed(list(node.iter_markers(MARKER))):
        where = f"@pytest.mark.{MARKER} on {node.nodeid}"
        if mark.args:
            raise pytest.UsageError(f"{where}: give keyword arguments ({', '.join(MARKER_ARGS)})")
        unknown = sorted(set(mark.kwargs) - set(MARKER_ARGS))
        if unknown:
            raise pytest.UsageError(
                f"{where}: unknown arguments {unknown}; it takes {', '.join(MARKER_ARGS)}"
            )
        for name in ("brokers", "controllers"):
            value = mark.kwargs.get(name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise pytest.UsageError(f"{where}: {name}={value!r} must be a whole number of at least 1")
        brokers = mark.kwargs.get("brokers") or brokers
        controllers = mark.kwargs.get("controllers") or controllers
        settings.update(_settings(mark.kwargs.get("config"), f"{where}: config"))
        broker_config = mark.kwargs.get("broker_config") or {}
        if not isinstance(broker_config, Mapping):
            raise pytest.UsageError(f"{where}: broker_config must be {{broker_id: {{key: value}}}}")
        for broker_id, overrides in broker_config.items():
            per_broker.setdefault(int(broker_id), {}).update(
                _settings(overrides, f"{where}: broker_config[{broker_id}]")
            )
    outside = sorted(b for b in per_broker if not 1 <= b <= brokers)
    if outside:
        raise pytest.UsageError(f"{node.nodeid}: broker_config names brokers {outside}, not in 1..{brokers}")
    return ClusterSpec(
        brokers=brokers,
        controllers=controllers,
        config=tuple(sorted(settings.items())),
        broker_config=tuple(sorted((b, tuple(sorted(s.items()))) for b, s in per_broker.items())),
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test whose markers ask for another cluster than the ini's gets it as a session-scoped parameter
    of ``samsa_cluster``: pytest keeps one instance per distinct spec and groups the tests by it."""
    if "samsa_cluster" not in metafunc.fixturenames:
        return
    spec = spec_of(metafunc.definition, metafunc.config)
    if spec != default_spec(metafunc.config):
        metafunc.parametrize("samsa_cluster", [spec], indirect=True, ids=[spec.label()], scope="session")


def _spec_param(item: pytest.Item) -> ClusterSpec | None:
    callspec = getattr(item, "callspec", None)
    found = callspec.params.get("samsa_cluster") if callspec is not None else None
    return found if isinstance(found, ClusterSpec) else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that asked for another cluster run after the others, grouped by cluster, so that each
    cluster starts once and only one runs at a time (pytest alone would interleave them with the tests
    of the default cluster and restart it)."""
    marked = [(item, _spec_param(item)) for item in items]
    if all(spec is None for _, spec in marked):
        return
    order: dict[ClusterSpec | None, int] = {None: 0}
    for _, spec in marked:
        order.setdefault(spec, len(order))
    items[:] = [item for item, _ in sorted(marked, key=lambda pair: order[pair[1]])]


# -- the cluster ------------------------------------------------------------------------------------


def _report(kind: str, text: str) -> None:
    log.log(logging.INFO if kind == "event" else logging.DEBUG, "%s", text)


def _zookeeper_missing() -> str | None:
    """Why no ZooKeeper can be started here (saying what to install), or None."""
    from zk.server import INSTALL_HINT, ZooKeeperNotInstalled, find_classpath, find_java

    try:
        find_classpath()
    except ZooKeeperNotInstalled as e:
        return str(e)
    if find_java() is None:
        return f"java is missing (neither $JAVA_HOME/bin/java nor on the PATH): {INSTALL_HINT}"
    return None


def _chroot_of_own(connect: str, number: int) -> str:
    """``host:port[/path]/samsa-testing-PID-N``, created (a client of a missing chroot warns)."""
    import os

    from kazoo.client import KazooClient

    hosts, _, path = connect.partition("/")
    chroot = f"/{path.strip('/')}/samsa-testing-{os.getpid()}-{number}".replace("//", "/")
    client = KazooClient(hosts=hosts, timeout=10.0)
    try:
        client.start(timeout=10.0)
        client.ensure_path(chroot)
    except Exception as e:
        pytest.fail(
            f"samsa.testing: cannot use the ZooKeeper at {hosts} (samsa_zookeeper): {e}", pytrace=False
        )
    finally:
        client.stop()
        client.close()
    return f"{hosts}{chroot}"


def start_cluster(
    spec: ClusterSpec, config: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> LocalCluster:
    """A started ``LocalCluster`` of ``spec``; fails the calling fixture (no traceback) with the reason
    when it cannot start, e.g. no ZooKeeper installed."""
    number = next(_clusters)
    zookeeper = str(config.getini("samsa_zookeeper")).strip() or None
    if zookeeper is None:
        missing = _zookeeper_missing()
        if missing is not None:
            pytest.fail(f"samsa.testing cannot start a cluster: {missing}", pytrace=False)
    else:
        zookeeper = _chroot_of_own(zookeeper, number)

    from tools.local_cluster import LocalCluster, LocalClusterError, ZooKeeperNotInstalled

    cluster = LocalCluster(
        tmp_path_factory.mktemp(f"samsa-cluster-{number}-"),
        brokers=spec.brokers,
        controllers=spec.controllers,
        zookeeper=zookeeper,
        overrides=dict(spec.config),
        broker_overrides={b: dict(settings) for b, settings in spec.broker_config},
        report=_report,
    )
    try:
        cluster.start()
    except ZooKeeperNotInstalled as e:
        pytest.fail(f"samsa.testing cannot start a cluster: {e}", pytrace=False)
    except LocalClusterError as e:
        pytest.fail(f"samsa.testing: the cluster ({spec.label()}) did not start: {e}", pytrace=False)
    log.info(
        "samsa_cluster %s: bootstrap.servers=%s, data in %s",
        spec.label(),
        cluster.bootstrap,
        cluster.data_dir,
    )
    return cluster


def restore(cluster: LocalCluster) -> None:
    """Undoes what a fault test left: resumes paused nodes, starts stopped or killed ones (ZooKeeper
    first), removes network partitions, then waits until the cluster is ready again."""
    if not any(node.alive for node in cluster.nodes):  # the test stopped the whole cluster
        log.info("samsa.testing: starting the cluster again, stopped by an earlier test")
        cluster.start()
        return
    changed = False
    if cluster.sandbox is not None:
        cluster.heal()
    for node in cluster.nodes:
        if node.alive and node.paused:
            log.info("samsa.testing: resuming %s, paused by an earlier test", node.name)
            node.resume()
            changed = True
        elif node.process is not None and not node.alive:
            log.info("samsa.testing: starting %s (%s after an earlier test)", node.name, node.state)
            node.start(wait=node.ROLE == "zookeeper")
            changed = True
    if changed:
        cluster.wait_ready()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if "samsa_cluster" not in getattr(item, "fixturenames", ()):
        return
    active = item.config.stash.get(_ACTIVE, None)
    if active is None:
        return
    spec, cluster = active
    if (_spec_param(item) or default_spec(item.config)) == spec:
        restore(cluster)


@pytest.fixture(scope="session")
def samsa_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    """A running Samsa cluster (``samsa.LocalCluster``) for the session; see the module's docstring."""
    spec = getattr(request, "param", None) or default_spec(request.config)
    cluster = start_cluster(spec, request.config, tmp_path_factory)
    request.config.stash[_ACTIVE] = (spec, cluster)
    try:
        yield cluster
    finally:
        del request.config.stash[_ACTIVE]
        cluster.stop(graceful=False)  # SIGKILL every node: the data is thrown away with the temp dir


@pytest.fixture(scope="session")
def samsa_bootstrap(samsa_cluster: LocalCluster) -> str:
    """``host:port,...`` of the cluster's brokers, for ``bootstrap.servers``."""
    return samsa_cluster.bootstrap


# -- topics -----------------------------------------------------------------------------------------

T = TypeVar("T")


def off_the_loop(function: Callable[[], T]) -> T:
    """Runs a blocking ``LocalCluster`` call that uses ``asyncio.run`` inside: directly, or on a thread
    of its own when this thread runs an event loop (an async test calling a fixture's function)."""
    import asyncio
    import threading

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = function()
        except BaseException as e:
            outcome["error"] = e

    thread = threading.Thread(target=run, name="samsa-testing")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return cast(T, outcome["value"])


class TopicFactory(Protocol):
    def __call__(
        self,
        partitions: int = 1,
        replication_factor: int | None = None,
        config: Mapping[str, object] | None = None,
        *,
        name: str | None = None,
    ) -> str: ...


def unique_topic_name(test_name: str) -> str:
    import uuid

    base = re.sub(r"[^A-Za-z0-9._-]+", "-", test_name).strip("-.")[:180] or "topic"
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def samsa_topic(samsa_cluster: LocalCluster, request: pytest.FixtureRequest) -> Iterator[TopicFactory]:
    """``samsa_topic(partitions=1, replication_factor=None, config=None, name=None)``: creates a topic
    unique to this test (replication factor: the cluster's default, min(3, brokers)) and returns its name
    once every broker has its leaders; the topics are deleted after the test."""
    created: list[str] = []

    def create(
        partitions: int = 1,
        replication_factor: int | None = None,
        config: Mapping[str, object] | None = None,
        *,
        name: str | None = None,
    ) -> str:
        topic = name or unique_topic_name(request.node.name)
        off_the_loop(lambda: samsa_cluster.create_topic(topic, partitions, replication_factor, config))
        created.append(topic)
        return topic

    yield create
    whole = all(node.alive and not node.paused for node in samsa_cluster.nodes)
    for topic in created:
        if not whole:  # deleting would wait for the replicas on the nodes that are down
            log.info("samsa.testing: keeping topic %s (nodes are down after the test)", topic)
            continue
        try:
            off_the_loop(functools.partial(samsa_cluster.delete_topic, topic, timeout=10.0))
        except Exception as e:
            log.warning("samsa.testing: could not delete topic %s: %s", topic, e)
