"""The Messages page: browse one partition's records and produce one.

Browsing (``/messages?topic=T&partition=P&from=...``) reads with aiokafka's consumer, assigned the one
partition, without a group (nothing is committed): ``from=offset`` reads forward from ``offset``,
``from=timestamp`` from the first record at or after ``timestamp`` (ListOffsets by time: aiokafka's
``offsets_for_times``), ``from=end`` (the default) the newest ``limit`` records, newest first
(``before=O``: those before offset O). Each record's key, headers and value are shown as
``console.records`` decodes them (``decode``: auto, text, json or hex). What one page reads is capped
(``PAGE_BYTES``) and each consumer is closed when its page is read.

``tail=1`` makes the record list a live section (view ``messages``): each refresh asks the partition's
leader for its end offset (one ListOffsets on the console's admin client) and reads the newest records
again only when it moved, so a tail left open costs the cluster one small request per refresh.

Producing (``POST /messages/produce``): a record (key, value, ``key=value`` header lines, a partition or
the producer's choice) sent by aiokafka's producer with acks=all, started for the request and closed
after it (a human's sends are rare; a producer kept for the console's life would need a shutdown hook);
the outcome in words, with the partition and offset the record got.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from console.app import Console, console_of, fragment, message, page
from console.client import ClusterUnavailable
from console.cluster import ClusterSnapshot
from console.live import Sections, live_page, view
from console.records import (
    FORMATS,
    Shown,
    decode,
    decode_short,
    parse_headers,
    parse_timestamp,
    timestamp_type,
)
from console.render import timestamp as format_timestamp
from tools.admin_client import AdminError
from tools.get_offsets import list_offsets
from tools.partition_leaders import Failure

NAV = ("/messages", "Messages")
routes = web.RouteTableDef()

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
STARTS = {"end": "the end (newest first)", "offset": "an offset", "timestamp": "a time"}
FETCH_BYTES = 1024 * 1024  # per Fetch request (aiokafka's fetch_max_bytes and max_partition_fetch_bytes)
PAGE_BYTES = 4 * 1024 * 1024  # a page stops reading once its records' keys, values and headers hold this
READ_TIMEOUT = 10.0  # seconds for reading one page, consumer start to stop
REQUEST_TIMEOUT_MS = 10_000
LATEST = -1  # ListOffsets' timestamp for the end offset
TAIL_CACHE = "messages.tail"  # console.state: each tail's last read, by (topic, partition, limit)
TAIL_CACHE_SIZE = 8  # tails kept; each holds at most about PAGE_BYTES of records


class BrowseError(Exception):
    """What was asked cannot be shown; the message says why, in words."""


@dataclass(frozen=True)
class Browse:
    """The browse form's query, checked."""

    topic: str | None = None
    partition: int = 0
    start: str = "end"  # one of STARTS
    offset: int | None = None
    timestamp: int | None = None
    timestamp_text: str = ""
    before: int | None = None  # from=end: the newest records before this offset
    limit: int = DEFAULT_LIMIT
    decode: str = "auto"
    tail: bool = False

    def query(self, **changes: Any) -> str:
        """This browse's URL with ``changes`` (None drops a parameter)."""
        params: dict[str, Any] = {
            "topic": self.topic,
            "partition": self.partition,
            "from": self.start,
            "offset": self.offset,
            "timestamp": self.timestamp_text or None,
            "before": self.before,
            "limit": self.limit,
            "decode": self.decode,
            "tail": 1 if self.tail else None,
        }
        params.update(changes)
        return "/messages?" + urlencode({k: v for k, v in params.items() if v is not None})


def _integer(query: Mapping[str, str], name: str, what: str, low: int = 0) -> int | None:
    text = query.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise BrowseError(f"The {what} must be a whole number, not {text!r}") from None
    if value < low:
        raise BrowseError(f"The {what} must be at least {low}")
    return value


def parse_browse(query: Mapping[str, str]) -> Browse:
    """The query as a Browse; BrowseError in words for what does not make sense."""
    topic = query.get("topic", "").strip() or None
    start = query.get("from", "end")
    if start not in STARTS:
        raise BrowseError(f"Browse from one of {', '.join(STARTS)}, not {start!r}")
    decoding = query.get("decode", "auto")
    if decoding not in FORMATS:
        raise BrowseError(f"Decode as one of {', '.join(FORMATS)}, not {decoding!r}")
    limit = _integer(query, "limit", "number of records", 1) or DEFAULT_LIMIT
    tail = query.get("tail") in ("1", "on", "true")
    offset = _integer(query, "offset", "offset")
    timestamp_text = query.get("timestamp", "").strip()
    timestamp = None
    if start == "timestamp" and not tail:
        try:
            timestamp = parse_timestamp(timestamp_text)
        except ValueError as e:
            raise BrowseError(str(e)) from None
    if start == "offset" and offset is None and not tail:
        raise BrowseError("Give the offset to browse from")
    return Browse(
        topic=topic,
        partition=_integer(query, "partition", "partition") or 0,
        # The tail is the newest records, whatever the form said.
        start="end" if tail else start,
        offset=offset,
        timestamp=timestamp,
        timestamp_text=timestamp_text,
        before=None if tail else _integer(query, "before", "offset"),
        limit=min(limit, MAX_LIMIT),
        decode=decoding,
        tail=tail,
    )


@dataclass
class Window:
    """What one page read of a partition: its log start and end offsets and the records shown."""

    begin: int
    end: int
    records: list[Any] = field(default_factory=list)  # aiokafka ConsumerRecords, in the order shown
    newest_first: bool = False
    notes: list[str] = field(default_factory=list)  # what was not as asked, in words


def _consumer(console: Console) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        **console.client.kafka_settings(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_bytes=FETCH_BYTES,
        max_partition_fetch_bytes=FETCH_BYTES,
        fetch_max_wait_ms=100,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
    )


def _record_bytes(record: Any) -> int:
    headers = sum(len(k) + len(v or b"") for k, v in record.headers)
    return max(0, record.serialized_key_size) + max(0, record.serialized_value_size) + headers


async def read_window(console: Console, browse: Browse) -> Window:
    """Reads the records ``browse`` asks for with a consumer of its own, closed before returning."""
    assert browse.topic is not None
    tp = TopicPartition(browse.topic, browse.partition)
    consumer = _consumer(console)
    try:
        async with asyncio.timeout(READ_TIMEOUT):
            await consumer.start()
            consumer.assign([tp])
            return await _read(consumer, tp, browse)
    except TimeoutError:
        raise ClusterUnavailable(
            f"Reading {browse.topic} partition {browse.partition} took over {READ_TIMEOUT:.0f} s"
        ) from None
    except KafkaError as e:
        raise ClusterUnavailable(f"Cannot read {browse.topic} partition {browse.partition}: {e}") from None
    finally:
        with contextlib.suppress(Exception):
            await consumer.stop()


async def _read(consumer: AIOKafkaConsumer, tp: TopicPartition, browse: Browse) -> Window:
    begin = (await consumer.beginning_offsets([tp]))[tp]
    end = (await consumer.end_offsets([tp]))[tp]
    window = Window(begin, end, newest_first=browse.start == "end")
    if browse.start == "end":
        stop = end if browse.before is None else max(begin, min(end, browse.before))
        start = max(begin, stop - browse.limit)
    elif browse.start == "offset":
        assert browse.offset is not None
        start, stop = max(begin, browse.offset), end
        if browse.offset < begin:
            window.notes.append(f"Offset {browse.offset} is before the log start: shown from {begin}.")
        elif browse.offset >= end:
            window.notes.append(
                f"No record at or after offset {browse.offset} yet (the end offset is {end})."
            )
    else:
        assert browse.timestamp is not None
        found = (await consumer.offsets_for_times({tp: browse.timestamp}))[tp]
        if found is None:
            window.notes.append(
                f"No record has a timestamp at or after {format_timestamp(browse.timestamp)}."
            )
            return window
        start, stop = found.offset, end
    records: list[Any] = []
    size = 0
    if start < stop:
        consumer.seek(tp, start)
    deadline = asyncio.get_running_loop().time() + READ_TIMEOUT / 2
    while start < stop and len(records) < browse.limit:
        if asyncio.get_running_loop().time() > deadline:
            # What was read is worth showing; the rest did not come in time.
            window.notes.append(
                f"Stopped reading: the leader sent no more records in {READ_TIMEOUT / 2:.0f} s."
            )
            break
        if size >= PAGE_BYTES:
            window.notes.append(
                f"Stopped reading after {size:,} bytes of records (the console reads at most "
                f"{PAGE_BYTES // 1024 // 1024} MiB a page)."
            )
            break
        batches = await consumer.getmany(tp, timeout_ms=500, max_records=browse.limit - len(records))
        for record in batches.get(tp, []):
            if record.offset >= stop or len(records) >= browse.limit:
                break
            records.append(record)
            size += _record_bytes(record)
        if await consumer.position(tp) >= stop:
            break
    window.records = records[::-1] if window.newest_first else records
    return window


async def _end_offset(console: Console, topic: str, partition: int) -> int:
    """The partition's end offset, asked of its leader through the console's admin client."""
    admin = await console.client.admin()
    results = await list_offsets(admin, [(topic, partition)], LATEST, REQUEST_TIMEOUT_MS)
    result = results.get((topic, partition))
    if isinstance(result, Failure):
        raise BrowseError(f"Cannot read the end of {topic} partition {partition}: {result.message}")
    if not isinstance(result, int):
        raise BrowseError(f"{topic} partition {partition} did not say where it ends")
    return result


async def tail_window(console: Console, browse: Browse) -> Window:
    """The newest records, read again only when the partition's end offset moved; the last read of each
    tailed (topic, partition, limit) is kept, shared by everyone tailing it."""
    assert browse.topic is not None
    end = await _end_offset(console, browse.topic, browse.partition)
    cache: OrderedDict[tuple[str, int, int], tuple[int, Window]] = console.state.setdefault(
        TAIL_CACHE, OrderedDict()
    )
    key = (browse.topic, browse.partition, browse.limit)
    cached = cache.get(key)
    if cached is not None and cached[0] == end:
        window = cached[1]
    else:
        window = await read_window(console, browse)
        cache[key] = (end, window)
        while len(cache) > TAIL_CACHE_SIZE:
            cache.popitem(last=False)
    cache.move_to_end(key)
    return window


@dataclass
class Row:
    offset: int
    timestamp: int
    timestamp_type: str
    key: Shown
    headers: list[tuple[str, Shown]]
    value: Shown


def rows(window: Window, decoding: str) -> list[Row]:
    return [
        Row(
            r.offset,
            r.timestamp,
            timestamp_type(r.timestamp_type),
            decode_short(r.key),
            [(k, decode_short(v)) for k, v in r.headers],
            decode(r.value, decoding),
        )
        for r in window.records
    ]


def pager(window: Window, browse: Browse) -> list[tuple[str, str]]:
    """The links to the pages around this one: (label, URL)."""
    if not window.records or browse.tail:
        return []
    offsets = [r.offset for r in window.records]
    first, last = min(offsets), max(offsets)
    links = []
    if browse.start == "end":
        if browse.before is not None:
            links.append(("Newest", browse.query(before=None)))
        if first > window.begin:
            links.append(("Older", browse.query(before=first)))
    else:
        if first > window.begin:
            links.append(
                (
                    "Previous",
                    browse.query(**{"from": "offset"}, offset=max(window.begin, first - browse.limit)),
                )
            )
        if last + 1 < window.end:
            links.append(("Next", browse.query(**{"from": "offset"}, offset=last + 1)))
    return links


async def records_section(console: Console, query: Mapping[str, str]) -> str:
    """The record list for ``query``: the records, or in words why there are none."""
    try:
        browse = parse_browse(query)
        if browse.topic is None:
            return console.render("messages/_records.html", browse=browse, window=None, rows=[], links=[])
        window = await (tail_window(console, browse) if browse.tail else read_window(console, browse))
    except BrowseError as e:
        return console.render("_message.html", text=str(e), ok=False)
    return console.render(
        "messages/_records.html",
        browse=browse,
        window=window,
        rows=rows(window, browse.decode),
        links=pager(window, browse),
    )


@view("messages")
async def messages_view(console: Console, query: Mapping[str, str]) -> Sections:
    return {"records": await records_section(console, query)}


def _partitions(snapshot: ClusterSnapshot, topic: str | None) -> list[Any]:
    info = snapshot.topics.get(topic or "")
    return info.partitions if info is not None else []


@routes.get("/messages")
async def messages_page(request: web.Request) -> web.Response:
    console = console_of(request)
    try:
        browse = parse_browse(request.query)
        problem = None
    except BrowseError as e:
        browse, problem = Browse(topic=request.query.get("topic") or None), str(e)
    snapshot = await console.snapshots.knowing(browse.topic)
    if browse.topic is not None and browse.topic not in snapshot.topics:
        problem = f"The cluster has no topic {browse.topic!r}"
    elif browse.topic is not None and browse.partition not in {
        p.partition for p in _partitions(snapshot, browse.topic)
    }:
        problem = f"Topic {browse.topic} has no partition {browse.partition}"
    context: dict[str, Any] = {
        "browse": browse,
        "topics": sorted(snapshot.topics.values(), key=lambda t: (t.internal, t.name)),
        "partitions": _partitions(snapshot, browse.topic),
        "formats": FORMATS,
        "starts": STARTS,
        "max_limit": MAX_LIMIT,
        "tail_toggle": browse.query(tail=None)
        if browse.tail
        else browse.query(tail=1, before=None, **{"from": "end"}),
    }
    if problem is None and browse.tail:
        return await live_page(request, "messages/page.html", "Messages", "messages", **context)
    if problem is not None:
        records = console.render("_message.html", text=problem, ok=False)
    else:
        try:
            records = await records_section(console, request.query)
        except (ClusterUnavailable, AdminError) as e:
            records = console.render("_message.html", text=str(e), ok=False)
    return page(request, "messages/page.html", "Messages", sections={"records": records}, **context)


@routes.get("/messages/partitions")
async def partition_select(request: web.Request) -> web.Response:
    """The partition picker for the topic the browse form's topic select has chosen."""
    topic = request.query.get("topic") or None
    snapshot = await console_of(request).snapshots.knowing(topic)
    return fragment(
        request, "messages/_partition_select.html", partitions=_partitions(snapshot, topic), selected=0
    )


async def produce(
    console: Console,
    topic: str,
    value: bytes | None,
    key: bytes | None,
    headers: list[tuple[str, bytes]],
    partition: int | None,
) -> tuple[int, int]:
    """Sends one record with acks=all; its (partition, offset)."""
    producer = AIOKafkaProducer(
        **console.client.kafka_settings(), acks="all", request_timeout_ms=REQUEST_TIMEOUT_MS
    )
    try:
        async with asyncio.timeout(READ_TIMEOUT + REQUEST_TIMEOUT_MS / 1000):
            await producer.start()
            sent = await producer.send_and_wait(
                topic, value, key=key, partition=partition, headers=headers or None
            )
    finally:
        with contextlib.suppress(Exception):
            await producer.stop()
    return sent.partition, sent.offset


@routes.post("/messages/produce")
async def produce_form(request: web.Request) -> web.Response:
    console = console_of(request)
    form = await request.post()
    topic = str(form.get("topic", "")).strip()
    partition_text = str(form.get("partition", "")).strip()
    if not topic:
        return message(request, "Pick the topic to produce to.", ok=False)
    snapshot = await console.snapshots.knowing(topic)
    if topic not in snapshot.topics:
        return message(request, f"The cluster has no topic {topic!r}.", ok=False)
    partition = None
    if partition_text:
        known = {p.partition for p in _partitions(snapshot, topic)}
        if not partition_text.isdigit() or int(partition_text) not in known:
            return message(
                request,
                f"Topic {topic} has no partition {partition_text!r} (it has 0 to {len(known) - 1}).",
                ok=False,
            )
        partition = int(partition_text)
    try:
        headers = parse_headers(str(form.get("headers", "")))
    except ValueError as e:
        return message(request, f"{e}.", ok=False)
    key_text = str(form.get("key", ""))
    key = key_text.encode("utf-8") if key_text else None
    value = None if form.get("tombstone") else str(form.get("value", "")).encode("utf-8")
    try:
        partition, offset = await produce(console, topic, value, key, headers, partition)
    except TimeoutError:
        return message(request, f"Producing to {topic} timed out: is its leader up?", ok=False)
    except KafkaError as e:
        return message(request, f"Producing to {topic} failed: {e}", ok=False)
    console.snapshots.invalidate()
    shown = Browse(topic=topic, partition=partition, start="offset", offset=offset)
    return fragment(
        request,
        "messages/_produced.html",
        topic=topic,
        partition=partition,
        offset=offset,
        href=shown.query(),
    )
