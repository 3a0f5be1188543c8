"""The Topics pages in a real browser against the package's 3-broker cluster: the list (filtered from the
query string and as one types), creating a topic, a topic's partitions and configs as the cluster has
them, and the actions (config change, preferred-leader election, reassignment, delete) done from the page
and checked with confluent-kafka's AdminClient. Every topic here is named ``topics-page-...``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support.browser import BrowserPage, off_the_loop
from tests.support.cluster import Cluster
from tools import reassign_partitions
from tools import topics as topics_tool

pytestmark = pytest.mark.integration

T = TypeVar("T")


def _admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def _metadata(cluster: Cluster) -> Any:
    """confluent-kafka's view of every topic (called off Playwright's loop)."""
    return off_the_loop(lambda: _admin(cluster).list_topics(timeout=10).topics)


def _configs(cluster: Cluster, topic: str) -> dict[str, Any]:
    """The topic's configs as confluent-kafka's AdminClient describes them."""

    def describe() -> dict[str, Any]:
        admin = _admin(cluster)  # referenced until the answer is in: a dropped client never answers
        resource = ConfigResource("topic", topic)
        configs: dict[str, Any] = admin.describe_configs([resource])[resource].result(timeout=20)
        return configs

    return off_the_loop(describe)


def _make_offsets_topic(cluster: Cluster) -> None:
    """Looking a group's coordinator up makes the brokers create __consumer_offsets (an internal topic)."""
    admin = _admin(cluster)
    for future in admin.describe_consumer_groups(["topics-page-probe"]).values():
        future.result(timeout=30)


def _partitions(cluster: Cluster, topic: str) -> dict[int, Any]:
    return dict(_metadata(cluster)[topic].partitions)


def _tool(main: Callable[[list[str]], int], *argv: str) -> None:
    assert off_the_loop(main, list(argv)) == 0


def test_the_topic_list_shows_a_topic_created_with_the_tool_and_filters_by_name_and_internal(
    console_cluster: Cluster, page: BrowserPage
) -> None:
    name = "topics-page-listed"
    bootstrap = console_cluster.bootstrap
    _tool(topics_tool.main, "--bootstrap-server", bootstrap, "--create", "--topic", name, "--partitions", "2",
          "--replication-factor", "2")  # fmt: skip
    # A group's coordinator lookup creates __consumer_offsets, the internal topic the filter hides.
    admin = _admin(console_cluster)  # referenced until the answer is in: a dropped client never answers
    off_the_loop(
        lambda: [f.result(timeout=30) for f in admin.describe_consumer_groups(["topics-page-probe"]).values()]
    )
    # From the query string (the live stream keeps it).
    page.goto("/topics?name=page-list")
    row = page.page.locator(f'#topic-table tr[data-topic="{name}"]')
    row.wait_for()
    cells = row.locator("td").all_inner_texts()
    assert cells[0] == name and cells[2] == "2" and cells[3] == "2", cells
    assert page.page.locator("#topic-table tbody tr").count() == 1
    assert page.page.get_by_role("link", name=name).get_attribute("href") == f"/topics/{name}"
    # As one types: the list and the URL follow the filter.
    page.page.fill("#topic-filter", "")
    offsets = page.page.locator('#topic-table tr[data-topic="__consumer_offsets"]')
    offsets.wait_for()
    assert offsets.locator("td").nth(1).inner_text() == "yes"
    page.readme_shot("topics")
    page.page.check("#hide-internal")
    offsets.wait_for(state="detached")
    assert "internal=hide" in page.page.url
    row.wait_for()
    page.page.fill("#topic-filter", "topics-page-no-such")
    page.page.get_by_text("No topic matches.").wait_for()
    assert page.page.locator("#topic-filter").input_value() == "topics-page-no-such"


def test_creating_a_topic_in_the_ui_makes_it_exist_in_the_cluster_and_errors_show_in_words(
    console_cluster: Cluster, page: BrowserPage
) -> None:
    name = "topics-page-created"
    page.goto("/topics")
    page.page.fill("#create-name", name)
    page.page.fill("#create-partitions", "3")
    page.page.fill("#create-replication", "2")
    page.page.fill("#create-configs", "retention.ms=3600000\n\ncleanup.policy = compact\n")
    page.page.click("#create-topic button[type=submit]")
    page.page.locator("#create-result .message.ok").filter(has_text=f"Created topic {name}.").wait_for()
    partitions = _partitions(console_cluster, name)
    assert sorted(partitions) == [0, 1, 2]
    assert all(len(p.replicas) == 2 for p in partitions.values())
    configs = _configs(console_cluster, name)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "compact"
    # The list shows it without a reload.
    page.page.locator(f'#topic-table tr[data-topic="{name}"]').wait_for()
    # Kafka's messages, in words.
    page.page.click("#create-topic button[type=submit]")
    page.page.locator("#create-result .message.error").filter(
        has_text=f"Topic '{name}' already exists."
    ).wait_for()
    page.page.fill("#create-name", "topics page bad name")
    page.page.click("#create-topic button[type=submit]")
    page.page.locator("#create-result .message.error").filter(has_text="is illegal").wait_for()
    page.page.fill("#create-name", "topics-page-bad-config")
    page.page.fill("#create-configs", "retention.ms")
    page.page.click("#create-topic button[type=submit]")
    page.page.locator("#create-result .message.error").filter(has_text='format "key=val"').wait_for()


def test_the_topic_page_shows_each_partitions_leader_replicas_and_isr_as_the_cluster_has_them(
    console_cluster: Cluster, page: BrowserPage
) -> None:
    name = "topics-page-leaders"
    off_the_loop(console_cluster.create_topic, name, partitions=3, replication_factor=3)
    partitions = _partitions(console_cluster, name)
    page.goto(f"/topics/{name}")
    rows = page.page.locator("#partition-table tbody tr[data-partition]")
    assert rows.count() == 3
    for index, p in partitions.items():
        row = page.page.locator(f'#partition-table tr[data-partition="{index}"]')
        assert row.get_by_test_id("leader").inner_text() == str(p.leader)
        assert row.get_by_test_id("replicas").inner_text() == ",".join(map(str, p.replicas))
        assert sorted(map(int, row.get_by_test_id("isr").inner_text().split(","))) == sorted(p.isrs)
    assert page.page.get_by_test_id("partition-count").inner_text() == "3"
    assert page.page.locator("#config-table tr[data-config='retention.ms']").count() == 1
    page.readme_shot("topic")


def test_a_config_set_in_the_ui_shows_highlighted_as_non_default_and_goes_back_to_default(
    console_cluster: Cluster, page: BrowserPage
) -> None:
    name = "topics-page-configs"
    off_the_loop(console_cluster.create_topic, name, partitions=1, replication_factor=1)
    page.goto(f"/topics/{name}")
    row = page.page.locator("#config-table tr[data-config='retention.ms']")
    assert "non-default" not in (row.get_attribute("class") or "")
    page.page.fill("#config-key", "retention.ms")
    page.page.fill("#config-value", "123456")
    page.page.click("#config-set")
    page.page.locator("#action-result .message.ok").wait_for()
    page.page.locator("#config-table tr.non-default[data-config='retention.ms']").filter(
        has_text="123456"
    ).wait_for()
    configs = _configs(console_cluster, name)
    assert configs["retention.ms"].value == "123456"
    page.page.click("#config-delete")
    page.page.locator("#action-result .message.ok").filter(has_text="back to its default").wait_for()
    page.page.locator("#config-table tr.non-default[data-config='retention.ms']").wait_for(state="detached")
    # A refusal in the broker's words.
    page.page.fill("#config-key", "retention.ms")
    page.page.fill("#config-value", "soon")
    page.page.click("#config-set")
    page.page.locator("#action-result .message.error").wait_for()


def test_a_preferred_leader_election_started_in_the_ui_completes_and_shows_the_preferred_leader(
    console_cluster: Cluster, page: BrowserPage, tmp_path: Path
) -> None:
    name = "topics-page-election"
    off_the_loop(console_cluster.create_topic, name, partitions=1, replication_factor=3)
    before = _partitions(console_cluster, name)[0]
    leader = before.leader
    # The same replicas with another first: the preferred leader changes, the leader stays.
    others = [r for r in before.replicas if r != leader]
    reordered = [others[0], leader, *others[1:]]
    plan = tmp_path / "reorder.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": name, "partition": 0, "replicas": reordered}]})
    )
    _tool(reassign_partitions.main, "--bootstrap-server", console_cluster.bootstrap, "--execute",
          "--reassignment-json-file", str(plan))  # fmt: skip
    console_cluster.wait(
        lambda: list(_partitions(console_cluster, name)[0].replicas) == reordered, "the replicas reordered"
    )
    assert _partitions(console_cluster, name)[0].leader == leader
    page.goto(f"/topics/{name}")
    cell = page.page.locator('#partition-table tr[data-partition="0"] td.leader')
    page.page.locator('#partition-table tr[data-partition="0"] td.leader.not-preferred').wait_for()
    assert re.fullmatch(rf"{leader} \(preferred {reordered[0]}\)", cell.inner_text())
    page.page.click("#elect-button")
    page.page.locator("#action-result .message.ok").filter(
        has_text=f"Preferred leader elected for {name}-0"
    ).wait_for()
    page.page.locator('#partition-table tr[data-partition="0"] td.leader:not(.not-preferred)').wait_for()
    assert cell.inner_text() == str(reordered[0])
    assert _partitions(console_cluster, name)[0].leader == reordered[0]
    # Again: nothing to do, said so.
    page.page.click("#elect-button")
    page.page.locator("#action-result .message.ok").filter(
        has_text="Already led by their preferred replica"
    ).wait_for()


def test_a_reassignment_started_in_the_ui_completes_and_the_page_shows_the_new_replicas(
    console_cluster: Cluster, page: BrowserPage
) -> None:
    name = "topics-page-reassigned"
    off_the_loop(console_cluster.create_topic, name, partitions=1, replication_factor=2)
    before = list(_partitions(console_cluster, name)[0].replicas)
    (newcomer,) = set(console_cluster.brokers) - set(before)
    target = [newcomer, before[0]]
    page.goto(f"/topics/{name}")
    assert page.page.get_by_test_id("reassignment-state").inner_text().startswith("No reassignment")
    # A wrong list is refused in words, nothing started.
    page.page.fill("#replicas-0", f"{newcomer},{newcomer}")
    page.page.click("#reassign-button")
    page.page.locator("#action-result .message.error").filter(has_text="duplicate").wait_for()
    page.page.fill("#replicas-0", ",".join(map(str, target)))
    page.page.click("#reassign-button")
    page.page.locator("#action-result .message.ok").filter(has_text="Reassignment started").wait_for()
    page.page.get_by_test_id("reassignment-state").filter(has_text="Reassignment complete").wait_for(
        timeout=30_000
    )
    replicas = page.page.locator('#partition-table tr[data-partition="0"]').get_by_test_id("replicas")
    console_cluster.wait(
        lambda: replicas.inner_text() == ",".join(map(str, target)), "the new replicas on the page"
    )
    assert list(_partitions(console_cluster, name)[0].replicas) == target
    row = page.page.locator('#reassignment-table tr[data-partition="0"]')
    assert row.locator("td").last.inner_text() == "done"


def test_deleting_a_topic_asks_for_confirmation_then_removes_it(
    console_cluster: Cluster, page: BrowserPage
) -> None:
    name = "topics-page-deleted"
    off_the_loop(console_cluster.create_topic, name, partitions=1, replication_factor=1)
    page.goto(f"/topics/{name}")
    asked: list[str] = []

    def answer(accept: bool) -> Callable[[Any], None]:
        def on_dialog(dialog: Any) -> None:
            asked.append(dialog.message)
            dialog.accept() if accept else dialog.dismiss()

        return on_dialog

    page.page.once("dialog", answer(False))
    page.page.click("#delete-button")
    assert asked == [f"Delete topic {name}? Its messages are deleted for good."]
    assert page.page.locator("#action-result").inner_text() == ""
    assert name in _metadata(console_cluster)
    page.page.once("dialog", answer(True))
    page.page.click("#delete-button")
    page.page.locator("#action-result .message.ok").filter(has_text=f"Deleted topic {name}.").wait_for()
    console_cluster.wait(lambda: name not in _metadata(console_cluster), "the topic gone from the cluster")
    page.page.locator("#topic-summary .message.error").filter(
        has_text=f"Topic {name} does not exist."
    ).wait_for()
