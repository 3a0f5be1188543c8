"""The console's browser tests: one real 3-broker cluster with metrics and ``samsa console`` (started
by LocalCluster, as ``samsa up`` starts it) for the whole package, a headless Chromium per module, and a fresh
page per test, which must end without errors in the browser's console. Each test's last screen is saved
under .cache/artifacts/console/ (SAMSA_ARTIFACTS)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import BrowserPage, chromium_or_skip, launched_browser
from tests.support.cluster import Cluster
from zk.server import ZooKeeperServer

# The console's live sections update every second in these tests.
REFRESH = "1"


@pytest.fixture(scope="package")
def console_cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper_server: ZooKeeperServer
) -> Iterator[Cluster]:
    """Three brokers (metrics on) and the console; a test's topics and groups carry its own names."""
    chromium_or_skip()
    cluster = Cluster(
        tmp_path_factory.mktemp("console"),
        f"{zookeeper_server.connect_string}/samsa-console",
        brokers=3,
        broker_overrides={
            "num.partitions": 3,
            "default.replication.factor": 3,
            "offsets.topic.replication.factor": 3,
        },
        console=True,
    )
    assert cluster.console_node is not None
    cluster.console_node.overrides["refresh"] = REFRESH
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium per module: Playwright's sync API keeps an event loop running in the test thread
    while it is up, which a module's own asyncio tests and cluster fixtures must not meet."""
    with launched_browser() as running:
        yield running


@pytest.fixture
def page(console_cluster: Cluster, browser: Any, request: pytest.FixtureRequest) -> Iterator[BrowserPage]:
    """A new page on the console; after the test, its screenshot is saved and its errors must be none."""
    assert console_cluster.console_node is not None
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = BrowserPage(context.new_page(), console_cluster.console_node.url)
    try:
        yield page
        page.screenshot(request.node.name)
        assert page.errors == [], page.errors
    finally:
        context.close()
