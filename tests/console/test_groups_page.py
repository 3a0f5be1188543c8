"""The Consumer groups pages in a real browser: a group a confluent-kafka consumer commits in shows in the
list and on its page with the lag of each partition and a lag chart; resetting its offsets from the page
(a dry-run plan, then execute) changes what ``samsa consumer-groups --describe`` prints; deleting an
empty group removes it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import BrowserPage, off_the_loop
from tests.support.cluster import Cluster
from tools import consumer_groups

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")


def produce(cluster: Cluster, topic: str, counts: list[int]) -> None:
    """``counts[p]`` records into partition p."""
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for partition, count in enumerate(counts):
        for i in range(count):
            producer.produce(topic, value=b"record-%d" % i, partition=partition)
    assert producer.flush(30) == 0


def commit(cluster: Cluster, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commits ``offsets`` in ``group`` as a consumer that never joins it (the group stays Empty)."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[confluent_kafka.TopicPartition(topic, p, o) for p, o in offsets.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()


def joined_consumer(cluster: Cluster, group: str, topic: str, offsets: dict[int, int]) -> Any:
    """A consumer subscribed to ``topic`` in ``group``, once it has its partitions, having committed
    ``offsets``; close it when done."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "client.id": "groups-page-consumer",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    for _ in range(300):
        consumer.poll(0.1)
        if consumer.assignment():
            break
    assert consumer.assignment(), "the consumer got no partitions"
    consumer.commit(
        offsets=[confluent_kafka.TopicPartition(topic, p, o) for p, o in offsets.items()],
        asynchronous=False,
    )
    return consumer


def described_offsets(cluster: Cluster, group: str, capsys: pytest.CaptureFixture[str]) -> dict[int, str]:
    """CURRENT-OFFSET by partition, as ``samsa consumer-groups --describe --group`` prints it."""
    capsys.readouterr()
    code = off_the_loop(
        consumer_groups.main, ["--bootstrap-server", cluster.bootstrap, "--describe", "--group", group]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    lines = [line.split() for line in out.splitlines() if line.strip()]
    header = next(cells for cells in lines if cells[0] == "GROUP")
    rows = [dict(zip(header, cells, strict=False)) for cells in lines if cells[0] == group]
    return {int(r["PARTITION"]): r["CURRENT-OFFSET"] for r in rows}


def test_a_consumer_s_commits_show_in_the_list_and_on_the_group_page_with_each_partition_s_lag(
    console_cluster: Cluster, page: BrowserPage
) -> None:
    topic, group = "groups-page-lag", "groups-page-lag-group"
    off_the_loop(console_cluster.create_topic, topic, partitions=3, replication_factor=3)
    off_the_loop(produce, console_cluster, topic, [5, 3, 4])
    consumer = off_the_loop(joined_consumer, console_cluster, group, topic, {0: 2, 1: 3, 2: 0})
    try:
        page.goto("/groups")
        row = page.page.locator(f'#group-table tr[data-group="{group}"]')
        row.get_by_test_id("lag").filter(has_text="7").wait_for()
        assert "Stable" in row.inner_text()
        assert "consumer" in row.inner_text()
        page.readme_shot("groups")

        row.get_by_role("link", name=group).click()
        page.page.wait_for_url(f"**/groups/{group}")
        for partition, lag in ((0, "3"), (1, "0"), (2, "4")):
            cells = page.page.locator(f'#offset-table tr[data-partition="{topic}-{partition}"]')
            assert cells.get_by_test_id("lag").inner_text() == lag
        assert page.page.get_by_test_id("total-lag").inner_text() == "7"
        assert page.page.get_by_test_id("state").inner_text() == "Stable"
        members = page.page.locator("#member-table").inner_text()
        assert "groups-page-consumer" in members
        assert f"{topic}(0,1,2)" in members

        # The lag chart draws once the page's refreshes have sampled the lag twice.
        page.page.locator("#lag-chart-plot .uplot").wait_for()

        # An active group cannot be reset: Kafka's words.
        page.page.locator("#reset-dry-run").click()
        page.page.locator("#reset-result .message.error").wait_for()
        assert (
            f"Assignments can only be reset if the group '{group}' is inactive, but the current state is "
            "Stable." in page.page.locator("#reset-result").inner_text()
        )
        page.readme_shot("group")
    finally:
        off_the_loop(consumer.close)


def test_resetting_offsets_in_the_ui_shows_the_dry_run_plan_then_changes_what_describe_prints(
    console_cluster: Cluster, page: BrowserPage, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group = "groups-page-reset", "groups-page-reset-group"
    off_the_loop(console_cluster.create_topic, topic, partitions=2, replication_factor=3)
    off_the_loop(produce, console_cluster, topic, [6, 4])
    off_the_loop(commit, console_cluster, group, topic, {0: 6, 1: 4})
    assert described_offsets(console_cluster, group, capsys) == {0: "6", 1: "4"}

    page.page.on("dialog", lambda dialog: dialog.accept())
    page.goto(f"/groups/{group}")
    form = page.page.locator("#reset-form")
    form.locator("select[name=scope]").select_option("topic")
    form.locator("select[name=topic]").select_option(topic)
    form.locator("select[name=scenario]").select_option("offset")
    form.locator("input[name=value]").fill("1")
    page.page.locator("#reset-dry-run").click()
    plan = page.page.locator('#reset-plan[data-executed="no"]')
    plan.wait_for()
    assert [plan.locator(f'tr[data-partition="{topic}-{p}"] td').last.inner_text() for p in (0, 1)] == [
        "1",
        "1",
    ]
    # A dry run changes nothing.
    assert described_offsets(console_cluster, group, capsys) == {0: "6", 1: "4"}

    page.page.locator("#reset-execute").click()
    page.page.locator('#reset-plan[data-executed="yes"]').wait_for()
    assert described_offsets(console_cluster, group, capsys) == {0: "1", 1: "1"}
    # The page's offsets follow without a reload.
    page.page.locator(f'#offset-table tr[data-partition="{topic}-0"]').get_by_test_id("lag").filter(
        has_text="5"
    ).wait_for()


def test_deleting_an_empty_group_in_the_ui_removes_it(console_cluster: Cluster, page: BrowserPage) -> None:
    topic, group = "groups-page-delete", "groups-page-delete-group"
    off_the_loop(console_cluster.create_topic, topic, partitions=1, replication_factor=3)
    off_the_loop(produce, console_cluster, topic, [2])
    off_the_loop(commit, console_cluster, group, topic, {0: 1})

    page.goto("/groups")
    page.page.locator(f'#group-table tr[data-group="{group}"]').wait_for()
    page.goto(f"/groups/{group}")
    page.page.on("dialog", lambda dialog: dialog.accept())
    page.page.locator("#delete-group").click()
    page.page.locator("#delete-result .message.ok").filter(has_text="was deleted").wait_for()

    page.goto("/groups")
    page.page.locator("#group-table, #groups p.muted").first.wait_for()
    assert page.page.locator(f'#group-table tr[data-group="{group}"]').count() == 0
