"""The Cluster page in a real browser: brokers, controller and partition counts as the cluster has them,
updated live when a broker stops and starts again."""

from __future__ import annotations

import pytest

from tests.support.browser import BrowserPage, off_the_loop
from tests.support.cluster import Cluster

pytestmark = pytest.mark.integration


def test_the_cluster_page_lists_every_broker_with_its_address_and_the_controller(
    console_cluster: Cluster, page: BrowserPage
) -> None:
    page.goto("/")
    rows = page.page.locator("#broker-table tbody tr")
    assert rows.count() == 3
    for broker in console_cluster.brokers.values():
        row = page.page.locator(f'#broker-table tr[data-broker="{broker.id}"]')
        assert broker.address in row.inner_text()
        assert "up" in row.inner_text()
    # The controller as a Kafka client sees it: the broker Metadata names (Samsa's brokers name one of
    # themselves and forward to the controller process), marked in its row.
    controller = page.page.get_by_test_id("controller").inner_text()
    assert int(controller) in console_cluster.brokers
    assert "yes" in page.page.locator(f'#broker-table tr[data-broker="{controller}"]').inner_text()
    assert page.page.get_by_test_id("offline").inner_text() == "0"
    page.readme_shot("cluster")


def test_a_stopped_broker_shows_down_and_under_replicated_partitions_without_a_reload(
    console_cluster: Cluster, page: BrowserPage
) -> None:
    off_the_loop(console_cluster.create_topic, "cluster-page-replicated", partitions=3, replication_factor=3)
    page.goto("/")
    page.page.get_by_test_id("under-replicated").filter(has_text="0").wait_for()
    broker = console_cluster.broker(3)
    off_the_loop(broker.stop)
    try:
        page.page.locator('#broker-table tr[data-broker="3"] td.down').wait_for(timeout=60_000)
        assert page.page.get_by_test_id("under-replicated").inner_text() != "0"
    finally:
        off_the_loop(broker.start)
    page.page.locator('#broker-table tr[data-broker="3"] td.up').wait_for(timeout=60_000)
