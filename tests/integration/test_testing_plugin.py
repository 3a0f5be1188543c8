"""``samsa.testing`` as a user meets it: a wheel of samsa-broker installed into a fresh virtualenv outside
this repository, a small user test suite written there (aiokafka; no conftest of ours, the plugin comes
from the wheel's ``pytest11`` entry point), and pytest run on it as a subprocess. The suite must pass and
leave no process behind: it writes the PID of every node of its clusters to a file, and each must be
gone once pytest has exited.

The wheel is built from a copy of the packages (a build in place would write ``build/`` into the
repository) with pip's build isolation, as ``pip install`` from a checkout does, and installed with
its dependencies from PyPI through pip's cache; one virtualenv serves the whole session.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import pytest

from tools.local_cluster_nodes import command_line, pid_alive
from zk.server import INSTALL_HINT, ZooKeeperNotInstalled, find_classpath, find_java

ROOT = Path(__file__).resolve().parents[2]
SUITE_TIMEOUT = 180.0

# -- the user's test suite --------------------------------------------------------------------------

USER_FILES = {
    "pytest.ini": """
        [pytest]
        # Every broker of samsa_cluster gets these settings (samsa.testing's ini option).
        samsa_broker_config =
            num.partitions=2
        """,
    "conftest.py": """
        import os

        import pytest


        @pytest.fixture(autouse=True)
        def record_cluster_pids(request):
            # For the suite's runner: the PID of every node of each cluster used, before and after each
            # test (a test may restart a node), so that it can check they are all gone at the end.
            def record():
                if "samsa_cluster" in request.fixturenames:
                    cluster = request.getfixturevalue("samsa_cluster")
                    with open(os.environ["SAMSA_PIDS_FILE"], "a") as f:
                        for name, pid in cluster.pids().items():
                            f.write(f"{pid} {name}\\n")

            record()
            yield
            record()
        """,
    "test_basics.py": """
        import asyncio
        import sys
        from pathlib import Path

        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        import samsa


        def test_the_plugin_is_the_installed_one(samsa_cluster, samsa_bootstrap):
            assert Path(samsa.__file__).resolve().is_relative_to(Path(sys.prefix).resolve())
            assert isinstance(samsa_cluster, samsa.LocalCluster)
            assert sorted(samsa_cluster.brokers) == [1]
            assert samsa_bootstrap == samsa_cluster.bootstrap


        async def produce(bootstrap, topic, values):
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
            await producer.start()
            try:
                for value in values:
                    await producer.send_and_wait(topic, str(value).encode(), key=str(value).encode())
            finally:
                await producer.stop()


        def test_produce_and_consume_in_a_group(samsa_bootstrap, samsa_topic):
            topic = samsa_topic(partitions=3)

            async def main():
                await produce(samsa_bootstrap, topic, range(30))
                consumer = AIOKafkaConsumer(
                    topic, bootstrap_servers=samsa_bootstrap, group_id="users", auto_offset_reset="earliest"
                )
                await consumer.start()
                seen = set()
                try:
                    async with asyncio.timeout(30):
                        while len(seen) < 30:
                            for records in (await consumer.getmany(timeout_ms=500)).values():
                                seen.update(int(r.value) for r in records)
                finally:
                    await consumer.stop()
                return seen

            assert asyncio.run(main()) == set(range(30))


        def test_topics_from_inside_an_event_loop_are_unique(samsa_bootstrap, samsa_topic):
            async def main():
                # The factory blocks, but works from a running loop (as in an async test).
                first, second = samsa_topic(), samsa_topic(partitions=4, config={"retention.ms": 60000})
                producer = AIOKafkaProducer(bootstrap_servers=samsa_bootstrap)
                await producer.start()
                try:
                    return first, second, await producer.partitions_for(second)
                finally:
                    await producer.stop()

            first, second, partitions = asyncio.run(main())
            assert first != second and "unique" in first
            assert partitions == {0, 1, 2, 3}


        def test_the_ini_broker_config_reaches_the_brokers(samsa_bootstrap):
            async def main():
                producer = AIOKafkaProducer(bootstrap_servers=samsa_bootstrap)
                await producer.start()
                try:
                    await producer.send_and_wait("auto-created", b"x")  # created on first use
                    return await producer.partitions_for("auto-created")
                finally:
                    await producer.stop()

            assert asyncio.run(main()) == {0, 1}  # num.partitions=2 in pytest.ini
        """,
    "test_failover.py": """
        import asyncio

        import pytest
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        pytestmark = pytest.mark.samsa(brokers=3)


        def test_the_consumer_carries_on_after_the_leader_is_killed(
            samsa_cluster, samsa_bootstrap, samsa_topic
        ):
            assert sorted(samsa_cluster.brokers) == [1, 2, 3]
            topic = samsa_topic(replication_factor=3, config={"min.insync.replicas": 2})

            async def main():
                bootstrap = samsa_bootstrap
                producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
                consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
                await producer.start()
                await consumer.start()
                seen = []

                async def consume_until(count):
                    async with asyncio.timeout(60):
                        while len(set(seen)) < count:
                            for records in (await consumer.getmany(timeout_ms=500)).values():
                                seen.extend(int(r.value) for r in records)

                try:
                    for i in range(50):
                        await producer.send_and_wait(topic, str(i).encode())
                    await consume_until(50)
                    leader = samsa_cluster.leader(topic, 0)
                    samsa_cluster.broker(leader).kill()  # SIGKILL: no controlled shutdown
                    for i in range(50, 100):
                        await producer.send_and_wait(topic, str(i).encode())
                    await consume_until(100)
                    return leader, samsa_cluster.leader(topic, 0), seen
                finally:
                    await consumer.stop()
                    await producer.stop()

            killed, leader, seen = asyncio.run(main())
            assert leader not in (killed, -1)
            assert list(dict.fromkeys(seen)) == list(range(100))  # every record, in order
        """,
}


def write_user_suite(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in USER_FILES.items():
        (directory / name).write_text(textwrap.dedent(text).lstrip())


# -- the wheel and the virtualenv -------------------------------------------------------------------


def copy_sources(destination: Path) -> None:
    """pyproject.toml, README.md and the packages its ``packages.find`` includes."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    destination.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, destination / name)
    for entry in sorted(ROOT.iterdir()):
        if (entry / "__init__.py").is_file() and any(fnmatch.fnmatch(entry.name, p) for p in patterns):
            shutil.copytree(
                entry, destination / entry.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )


def run(command: list[str], timeout: float, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd
    )
    if result.returncode != 0:
        raise AssertionError(
            f"{' '.join(command)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        )
    return result


@pytest.fixture(scope="session")
def user_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the samsa-broker wheel (and pytest) installed, for the whole session."""
    work = tmp_path_factory.mktemp("samsa-wheel")
    started = time.monotonic()
    copy_sources(work / "src")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    run([*pip, "wheel", "-q", "--no-deps", "--wheel-dir", str(work / "dist"), str(work / "src")], 180)
    (wheel,) = (work / "dist").glob("samsa_broker-*.whl")
    built = time.monotonic()
    venv = work / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], 60)
    python = venv / "bin" / "python"
    run([*pip, "--python", str(python), "install", "-q", str(wheel), "pytest"], 180)
    print(f"wheel built in {built - started:.1f} s, virtualenv ready in {time.monotonic() - built:.1f} s")
    return venv


def user_env(venv: Path, **extra: str) -> dict[str, str]:
    """The environment of a shell with the virtualenv activated: nothing of this run's Python or pytest
    settings leaks in."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "PYTHON", "COV_"))
        and k not in ("VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")
    }
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **extra}


def run_user_suite(venv: Path, suite: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    command = [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-rs", f"--basetemp={suite}.tmp", *args]
    return subprocess.run(
        command,
        cwd=suite,
        env=user_env(venv, **env),
        capture_output=True,
        text=True,
        timeout=SUITE_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="session")
def zookeeper_installed() -> None:
    """Skips (printing why) when there is no ZooKeeper to start: the one reason to skip."""
    try:
        find_classpath()
        missing = None if find_java() is not None else f"java is missing: {INSTALL_HINT}"
    except ZooKeeperNotInstalled as e:
        missing = str(e)
    if missing is not None:
        print(f"skipped: {missing}")
        pytest.skip(missing)


# -- the tests --------------------------------------------------------------------------------------


def test_importing_the_plugin_loads_nothing_of_samsa() -> None:
    """pytest imports the plugin in every run of every environment with samsa-broker installed."""
    probe = (
        "import sys, pytest; before = set(sys.modules); import samsa.testing; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    loaded = run([sys.executable, "-c", probe], 60, cwd=ROOT).stdout.split()
    heavy = ("tools", "protocol", "zk", "broker", "controller", "network", "storage", "kazoo", "aiokafka")
    assert [m for m in loaded if m.split(".")[0] in heavy] == []
    assert {"samsa", "samsa.testing"} <= set(loaded)


@pytest.mark.integration
def test_a_user_suite_passes_and_leaves_no_process(
    zookeeper_installed: None, user_venv: Path, tmp_path: Path
) -> None:
    suite = tmp_path / "user-suite"
    write_user_suite(suite)
    pids_file = tmp_path / "pids.txt"
    started = time.monotonic()
    result = run_user_suite(user_venv, suite, SAMSA_PIDS_FILE=str(pids_file))
    took = time.monotonic() - started
    output = f"{result.stdout}\n{result.stderr}"
    print(f"user suite ran in {took:.1f} s:\n{output}")
    assert result.returncode == 0, output
    assert "5 passed" in result.stdout, output

    recorded: dict[int, str] = {}
    for line in pids_file.read_text().splitlines():
        pid, name = line.split()
        recorded[int(pid)] = name
    # Two clusters: ZooKeeper, a controller and 1 broker; ZooKeeper, a controller and 3 brokers, one of
    # which was killed by the failover test.
    assert len(recorded) >= 8, recorded
    left = {
        pid: name for pid, name in recorded.items() if pid_alive(pid) and f"{suite}.tmp" in command_line(pid)
    }
    assert left == {}, f"processes left running after the user suite: {left}"


@pytest.mark.integration
def test_without_zookeeper_the_fixture_fails_saying_what_to_install(user_venv: Path, tmp_path: Path) -> None:
    suite = tmp_path / "user-suite"
    write_user_suite(suite)
    empty = tmp_path / "no-zookeeper"
    empty.mkdir()
    result = run_user_suite(
        user_venv,
        suite,
        "test_basics.py::test_the_plugin_is_the_installed_one",
        ZOOKEEPER_HOME=str(empty),
        SAMSA_PIDS_FILE=str(tmp_path / "pids.txt"),
    )
    output = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 1, output
    assert "1 error" in result.stdout, output
    assert "samsa.testing cannot start a cluster" in result.stdout, output
    assert "apt-get install zookeeper" in result.stdout, output
    assert "Traceback" not in result.stdout, output
