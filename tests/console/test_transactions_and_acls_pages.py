"""The Transactions page and the ACLs and users page in a real browser, on the package's cluster (which has
no authorizer): a real transactional producer's open transaction listed as Ongoing with its partitions,
then as CompleteCommit once committed, without a reload; the ACLs section saying in words that the
cluster has no authorizer; a SCRAM user added with ``samsa configs`` listed with its mechanism and
iterations."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import BrowserPage, off_the_loop
from tests.support.cluster import Cluster
from tools import configs

pytestmark = pytest.mark.integration

TOPIC = "txn-page-topic"
TRANSACTIONAL_ID = "txn-page-producer"


def _open_transaction(cluster: Cluster) -> Any:
    """A confluent-kafka transactional producer with a transaction begun, one record in each of the topic's
    two partitions, flushed (the coordinator has added both partitions), and left open."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": TRANSACTIONAL_ID, "linger.ms": 0}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for partition in (0, 1):
        producer.produce(TOPIC, value=b"in a transaction", partition=partition)
    assert producer.flush(30) == 0
    return producer


def test_an_open_transaction_shows_as_ongoing_with_its_partitions_then_as_committed_without_a_reload(
    console_cluster: Cluster, page: BrowserPage
) -> None:
    off_the_loop(console_cluster.create_topic, TOPIC, partitions=2, replication_factor=3)
    producer = off_the_loop(_open_transaction, console_cluster)
    try:
        page.goto("/transactions")
        row = page.page.locator(f'#transaction-table tr[data-transaction="{TRANSACTIONAL_ID}"]')
        row.and_(page.page.locator('[data-state="Ongoing"]')).wait_for()
        text = row.inner_text()
        assert f"{TOPIC}-0" in text and f"{TOPIC}-1" in text
        cells = row.locator("td")
        # The coordinator is one of the brokers; the epoch and start time come from DescribeTransactions.
        assert int(cells.nth(4).inner_text()) in console_cluster.brokers
        assert cells.nth(3).inner_text() != "—" and cells.nth(6).inner_text().endswith("Z")
        assert page.page.get_by_test_id("transactions-Ongoing").inner_text() != "0"
        page.readme_shot("transactions")
        off_the_loop(producer.commit_transaction, 30)
        row.and_(page.page.locator('[data-state="CompleteCommit"]')).wait_for()
        assert "CompleteCommit" in row.inner_text()
    finally:
        off_the_loop(producer.flush, 5)


def test_the_transactions_filter_keeps_the_chosen_state(console_cluster: Cluster, page: BrowserPage) -> None:
    page.goto("/transactions?state=PrepareEpochFence&id=no-such-transactional-id")
    assert page.page.get_by_test_id("no-transactions").inner_text() == "No transaction matches the filter."
    page.goto("/transactions?state=Nonsense")
    assert "Unknown transaction state 'Nonsense'" in page.page.locator("#transactions").inner_text()


def test_without_an_authorizer_the_acls_say_so_and_scram_users_are_listed(
    console_cluster: Cluster, page: BrowserPage
) -> None:
    code = off_the_loop(
        configs.main,
        [
            "--bootstrap-server", console_cluster.bootstrap, "--alter",
            "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]",
            "--entity-type", "users", "--entity-name", "acls-page-alice",
        ],
    )  # fmt: skip
    assert code == 0
    page.goto("/security")
    disabled = page.page.get_by_test_id("security-disabled")
    assert "no authorizer" in disabled.inner_text() and "SECURITY_DISABLED" in disabled.inner_text()
    user = page.page.locator('#user-table tr[data-user="acls-page-alice"]')
    assert user.locator("td").all_inner_texts() == ["acls-page-alice", "SCRAM-SHA-256", "8,192"]
    assert "alice-secret" not in page.page.content()
