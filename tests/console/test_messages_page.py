"""The Messages page in a real browser: records produced by a real client (confluent-kafka) shown with
their key, headers and timestamp, browsed from an offset, a time and the end; JSON pretty-printed and
binary as hex; a record produced from the page's form lands in the cluster; the live tail shows a new
record without a reload."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition

from tests.support.browser import BrowserPage, off_the_loop
from tests.support.cluster import Cluster

pytestmark = pytest.mark.integration

# 2024-01-01T00:00:00Z: the records' own timestamps (CreateTime), one second apart.
BASE_MS = 1_704_067_200_000


def produce(cluster: Cluster, topic: str, records: list[dict[str, Any]], partition: int = 0) -> list[int]:
    """Sends each record (value, key, headers, timestamp) with acks=all; their offsets."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    offsets: list[int] = []

    def delivered(error: Any, msg: Any) -> None:
        assert error is None, error
        offsets.append(msg.offset())

    for record in records:
        producer.produce(topic, partition=partition, on_delivery=delivered, **record)
    assert producer.flush(15) == 0
    return offsets


def consume_one(cluster: Cluster, topic: str, partition: int, offset: int) -> Any:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "messages-page-check",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([ConfluentPartition(topic, partition, offset)])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                return msg
        raise AssertionError(f"no record at {topic}/{partition}@{offset}")
    finally:
        consumer.close()


def offsets_shown(page: BrowserPage) -> list[int]:
    rows = page.page.locator("#record-table tbody tr")
    return [int(rows.nth(i).get_attribute("data-offset") or -1) for i in range(rows.count())]


def row(page: BrowserPage, offset: int) -> Any:
    return page.page.locator(f'#record-table tr[data-offset="{offset}"]')


def test_a_json_record_is_shown_pretty_printed(console_cluster: Cluster, page: BrowserPage) -> None:
    topic = "messages-page-json"
    off_the_loop(console_cluster.create_topic, topic)
    order = {"order": 7, "customer": {"name": "Ada", "city": "Zürich"}, "items": ["tea", "scones"]}
    produce(
        console_cluster,
        topic,
        [
            {
                "value": json.dumps(order, separators=(",", ":")).encode(),
                "key": b"order-7",
                "headers": [("content-type", b"application/json")],
            },
            {"value": b"plain text, not JSON", "key": b"note"},
        ],
    )
    page.goto(f"/messages?topic={topic}&partition=0&from=offset&offset=0")
    value = row(page, 0).locator("pre.value")
    assert "json" in (value.get_attribute("class") or "")
    assert value.inner_text() == json.dumps(order, indent=2, ensure_ascii=False)
    assert row(page, 0).locator("td.key").inner_text() == "order-7"
    assert "content-type = application/json" in row(page, 0).locator("td.headers").inner_text()
    assert row(page, 1).locator("pre.value").inner_text() == "plain text, not JSON"
    # The decode selector applies to the page: as text, the JSON is as it was sent.
    page.goto(f"/messages?topic={topic}&partition=0&from=offset&offset=0&decode=text")
    assert row(page, 0).locator("pre.value").inner_text() == json.dumps(order, separators=(",", ":"))
    page.goto(f"/messages?topic={topic}&partition=0&from=offset&offset=0")
    page.readme_shot("messages")


def test_browsing_from_an_offset_a_time_and_the_end_shows_keys_headers_and_timestamps(
    console_cluster: Cluster, page: BrowserPage
) -> None:
    topic = "messages-page-browse"
    off_the_loop(console_cluster.create_topic, topic)
    produce(
        console_cluster,
        topic,
        [
            {
                "value": f"value {i}".encode(),
                "key": f"k{i}".encode(),
                "headers": [("n", str(i).encode())],
                "timestamp": BASE_MS + i * 1000,
            }
            for i in range(5)
        ],
    )
    # From an offset, through the form: the partition picker follows the topic picked.
    # The page lists the topics of the console's shared snapshot, which may predate this topic by a second.
    for _ in range(20):
        page.goto("/messages")
        if page.page.locator(f'#browse-topic option[value="{topic}"]').count():
            break
        time.sleep(0.25)
    page.page.select_option("#browse-topic", topic)
    page.page.locator('#browse-partition option[value="0"]').wait_for(state="attached")
    page.page.select_option("#browse-from", "offset")
    page.page.fill("#browse-offset", "2")
    page.page.fill("#browse-limit", "2")
    page.page.click("#browse-form button[type=submit]")
    page.page.wait_for_url("**/messages?*offset=2*")
    assert offsets_shown(page) == [2, 3]
    assert row(page, 2).locator("td.key").inner_text() == "k2"
    assert row(page, 2).locator("td.headers").inner_text().strip() == "n = 2"
    assert row(page, 2).locator("td.timestamp").inner_text().split() == [
        "2024-01-01T00:00:02.000Z",
        "CreateTime",
    ]
    page.page.click(".pager a.pager-next")
    page.page.wait_for_url("**offset=4*")
    assert offsets_shown(page) == [4]

    # From the end: the newest first, then the older ones.
    page.goto(f"/messages?topic={topic}&partition=0&from=end&limit=3")
    assert offsets_shown(page) == [4, 3, 2]
    assert row(page, 4).locator("pre.value").inner_text() == "value 4"
    assert "newest first" in page.page.locator("#records-summary").inner_text()
    page.page.click(".pager a.pager-older")
    page.page.wait_for_url("**before=2*")
    assert offsets_shown(page) == [1, 0]

    # From a time: ListOffsets by timestamp finds the first record at or after it.
    page.goto(f"/messages?topic={topic}&partition=0&from=timestamp&timestamp=2024-01-01T00:00:02.500Z")
    assert offsets_shown(page) == [3, 4]
    page.goto(f"/messages?topic={topic}&partition=0&from=timestamp&timestamp=2030-01-01")
    assert "No record has a timestamp at or after 2030-01-01T00:00:00.000Z" in page.page.inner_text(
        "#records"
    )


def test_binary_keys_and_values_are_shown_as_hex(console_cluster: Cluster, page: BrowserPage) -> None:
    topic = "messages-page-binary"
    off_the_loop(console_cluster.create_topic, topic)
    produce(
        console_cluster,
        topic,
        [
            {
                "value": b"\x00\x01\xfe\xffbin<script>",
                "key": b"\xde\xad\xbe\xef",
                "headers": [("raw", b"\xff")],
            }
        ],
    )
    page.goto(f"/messages?topic={topic}&partition=0&from=end")
    value = row(page, 0).locator("pre.value")
    assert "hex" in (value.get_attribute("class") or "")
    assert (
        value.inner_text() == "00000000  00 01 fe ff 62 69 6e 3c  73 63 72 69 70 74 3e     |....bin<script>|"
    )
    assert row(page, 0).locator("td.key").inner_text() == "de ad be ef"
    assert row(page, 0).locator("td.headers").inner_text().strip() == "raw = ff"
    # Asked as text, bytes that are not UTF-8 are still hex, and say why.
    page.goto(f"/messages?topic={topic}&partition=0&from=end&decode=text")
    assert "not valid UTF-8: shown as hex" in row(page, 0).locator("td.value").inner_text()


def test_a_message_produced_from_the_form_is_in_the_cluster_and_on_the_page(
    console_cluster: Cluster, page: BrowserPage
) -> None:
    topic = "messages-page-produce"
    off_the_loop(console_cluster.create_topic, topic, partitions=2)
    page.goto(f"/messages?topic={topic}&partition=1")
    page.page.fill("#produce-partition", "1")
    page.page.fill("#produce-key", "from-the-ui")
    page.page.fill("#produce-headers", "source=console\ntrace=t-1")
    page.page.fill("#produce-value", '{"hello": "cluster"}')
    page.page.click("#produce-form button[type=submit]")
    outcome = page.page.locator("#produced")
    outcome.wait_for()
    assert f"Produced to {topic} partition 1 at offset 0" in outcome.inner_text()

    msg = consume_one(console_cluster, topic, 1, 0)
    assert (msg.key(), msg.value()) == (b"from-the-ui", b'{"hello": "cluster"}')
    assert msg.headers() == [("source", b"console"), ("trace", b"t-1")]

    outcome.get_by_role("link", name="Show it").click()
    page.page.wait_for_url("**from=offset*")
    assert row(page, 0).locator("td.key").inner_text() == "from-the-ui"
    assert row(page, 0).locator("pre.value").inner_text() == '{\n  "hello": "cluster"\n}'

    # A header line without '=' is refused in words, and nothing is sent.
    page.page.fill("#produce-headers", "no separator")
    page.page.click("#produce-form button[type=submit]")
    page.page.locator("#produce-result .message.error").filter(has_text="is not key=value").wait_for()


def test_the_live_tail_shows_a_new_record_without_a_reload(
    console_cluster: Cluster, page: BrowserPage
) -> None:
    topic = "messages-page-tail"
    off_the_loop(console_cluster.create_topic, topic)
    produce(console_cluster, topic, [{"value": b"first", "key": b"before"}])
    page.goto(f"/messages?topic={topic}&partition=0")
    page.page.click("#tail-toggle")
    page.page.wait_for_url("**tail=1*")
    assert offsets_shown(page) == [0]
    page.page.evaluate("window.stillTheSamePage = true")
    produce(console_cluster, topic, [{"value": b"second", "key": b"after"}])
    row(page, 1).wait_for(timeout=15_000)
    assert offsets_shown(page) == [1, 0]
    assert row(page, 1).locator("td.key").inner_text() == "after"
    assert page.page.evaluate("window.stillTheSamePage") is True


def test_a_topic_the_cluster_lacks_is_said_in_words(console_cluster: Cluster, page: BrowserPage) -> None:
    page.goto("/messages?topic=messages-page-nowhere&partition=0")
    assert "The cluster has no topic 'messages-page-nowhere'" in page.page.inner_text("#records")
