"""Fixtures of the pipeline tests: one real Samsa cluster (a controller and a broker) and one local[2]
SparkSession for the whole run, and a maker of fresh topics.

Tests that need PySpark, pyarrow or Java skip, saying which is missing, when the ``pipeline`` extra or
a JRE is not installed.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.cluster import Cluster
from zk.server import ZooKeeperServer

_topics = itertools.count()


@pytest.fixture(scope="session")
def samsa(tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer) -> Iterator[Cluster]:
    """A running cluster shared by the pipeline tests; each test works on topics of its own."""
    chroot = f"{zookeeper_server.connect_string}/samsa-pipeline"
    # The cleaner looks for work every 100 ms instead of 15 s, for the compaction test. One broker holds
    # __transaction_state (the topic sink's transactions) as Kafka's single-broker server.properties
    # has it: one replica, min.insync 1 (the default 2 could never be met).
    overrides = {
        "log.cleaner.backoff.ms": "100",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
    }
    running = Cluster(
        tmp_path_factory.mktemp("pipeline-cluster"), chroot, 1, broker_overrides=overrides
    ).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def new_topic(samsa: Cluster) -> Callable[..., str]:
    """Creates a topic with a name no other test uses and waits for its leaders."""

    def create(partitions: int = 1, prefix: str = "t") -> str:
        name = f"{prefix}-{next(_topics)}"
        samsa.create_topic(name, partitions)
        return name

    return create


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one SparkSession of the test run: local[2], UI off, loopback, ports chosen free."""
    pytest.importorskip("pyspark", reason="PySpark is not installed (pip install -e '.[pipeline]')")
    if shutil.which("java") is None:
        pytest.skip("no Java runtime on PATH (the Makefile installs one with ZooKeeper)")
    from pipeline import spark as pipeline_spark

    session = pipeline_spark.session("samsa-pipeline-tests", quick_start=True)
    try:
        yield session
    finally:
        pipeline_spark.stop(session)
