"""A process's metrics: the registry of a broker or a controller, and its Prometheus endpoint.

Built on ``prometheus_client``: its registry, metric families and text exposition. What the hot paths
touch is Samsa's own: a counter or histogram child here is a plain object whose ``inc``/``observe`` adds
to a Python number (no lock, no label lookup: the event loop is the only writer, and a caller keeps the
child it got from ``labels`` once). The families are built from those numbers when Prometheus scrapes,
and gauges are read then from the state they describe (``gauge``), on the event loop where that state
lives: ``MetricsHttpServer`` answers on the loop, not in a thread.

Names follow what Kafka users already scrape through the Prometheus JMX exporter with its example Kafka
rules: ``kafka_<domain>_<type>_<name>`` in lower case, e.g. ``kafka_server_brokertopicmetrics_messagesin``
(a counter, exposed with ``_total``), labels for the MBean's keys (``topic``, ``request``, ``partition``).
docs/operations.md lists every metric and the MBean it stands for.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

log = logging.getLogger(__name__)

# Milliseconds, as Kafka's request times are (RequestMetrics' *TimeMs): from 0.1 ms to a minute.
TIME_MS_BUCKETS: tuple[float, ...] = (
    0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
)  # fmt: skip
# Bytes, for request and response sizes.
SIZE_BUCKETS: tuple[float, ...] = tuple(float(4**i) for i in range(3, 14))  # 64 B .. 64 MiB

LabelValues = tuple[str, ...]
# What a gauge's function returns: one value (a gauge without labels) or (label values, value) pairs.
GaugeReading = float | int | Iterable[tuple[LabelValues, float | int]]


class CounterChild:
    """One labelled series of a counter."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: float = 0

    def inc(self, amount: float = 1) -> None:
        self.value += amount


class HistogramChild:
    """One labelled series of a histogram: a count per bucket (not cumulative until scraped) and a sum."""

    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above the largest bound (+Inf)
        self.sum: float = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self._bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)


class _Family:
    def __init__(self, name: str, documentation: str, labelnames: Sequence[str]) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._children: dict[LabelValues, Any] = {}

    def _child(self, values: LabelValues, make: Callable[[], Any]) -> Any:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name} takes labels {self.labelnames}, given {values}")
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = make()
        return child

    def remove(self, *values: str) -> None:
        """Forgets a series (a topic deleted, a partition no longer here)."""
        self._children.pop(tuple(values), None)

    def remove_matching(self, predicate: Callable[[LabelValues], bool]) -> None:
        for values in [v for v in self._children if predicate(v)]:
            del self._children[values]


class Counter(_Family):
    """A monotonic count; exposed as ``<name>_total``."""

    def labels(self, *values: str) -> CounterChild:
        return self._child(tuple(values), CounterChild)

    def collect(self) -> Metric:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in self._children.items():
            family.add_metric(values, child.value)
        return family


class Histogram(_Family):
    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], buckets: Sequence[float]
    ) -> None:
        super().__init__(name, documentation, labelnames)
        self.bounds = tuple(sorted(buckets))

    def labels(self, *values: str) -> HistogramChild:
        return self._child(tuple(values), lambda: HistogramChild(self.bounds))

    def collect(self) -> Metric:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, child in self._children.items():
            cumulative, buckets = 0, []
            for bound, count in zip((*self.bounds, math.inf), child.counts, strict=True):
                cumulative += count
                buckets.append((_le(bound), cumulative))
            family.add_metric(values, buckets, child.sum)
        return family


def _le(bound: float) -> str:
    return "+Inf" if bound == math.inf else repr(float(bound))


class _Gauge:
    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], read: Callable[[], GaugeReading]
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._read = read

    def collect(self) -> Metric:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
        reading = self._read()
        if isinstance(reading, int | float):
            family.add_metric((), reading)
        else:
            for values, value in reading:
                family.add_metric(values, value)
        return family


class Family(Protocol):
    """What the registry holds: a metric's name and how to collect it."""

    name: str

    def collect(self) -> Metric: ...


class Metrics:
    """The metrics of one broker or controller process (a registry of its own, so that tests may run
    several in one interpreter). Every metric is defined once, by the module that owns it; defining a
    name twice is an error."""

    def __init__(self, *, process: bool = True) -> None:
        """``process``: also the process's RSS, CPU, open fds, start time (``process_*``), the Python GC
        (``python_gc_*``) and platform, as prometheus_client's collectors give them."""
        self.registry = CollectorRegistry(auto_describe=False)
        self._families: dict[str, Any] = {}
        self._collector = _Collector(self._families)
        self.registry.register(self._collector)
        if process:
            ProcessCollector(registry=self.registry)
            GCCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)

    def define(self, family: Family) -> Any:
        """Registers a family of one's own: one whose numbers live elsewhere and are read when scraped
        (a counter kept by the code that counts, a family with series of several label sets)."""
        if family.name in self._families:
            raise ValueError(f"metric {family.name} is already defined")
        self._families[family.name] = family
        return family

    def counter(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Counter:
        return self.define(Counter(name, documentation, labelnames))

    def histogram(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        buckets: Sequence[float] = TIME_MS_BUCKETS,
    ) -> Histogram:
        return self.define(Histogram(name, documentation, labelnames, buckets))

    def gauge(
        self,
        name: str,
        documentation: str,
        read: Callable[[], GaugeReading],
        labelnames: Sequence[str] = (),
    ) -> None:
        """A gauge read when scraped: ``read()`` returns its value, or (label values, value) pairs."""
        self.define(_Gauge(name, documentation, labelnames, read))

    def unregister(self, name: str) -> None:
        self._families.pop(name, None)

    def __contains__(self, name: str) -> bool:
        return name in self._families

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric, as a scrape gets it."""
        return generate_latest(self.registry)

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """One sample's value by its exposed name (``..._total``, ``..._bucket``, ``..._count``), or None:
        what tests and tools read without parsing the text."""
        return self.registry.get_sample_value(name, labels or {})


class _Collector:
    def __init__(self, families: dict[str, Any]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        for family in list(self._families.values()):
            try:
                yield family.collect()
            except Exception:
                # One broken gauge must not take the whole scrape down.
                log.exception("metric %s could not be collected", family.name)


class MetricsHttpServer:
    """Serves ``GET /metrics`` (Prometheus' text format) on the event loop; any other path is 404.

    A scrape is a few kilobytes once every few seconds, so HTTP/1.0 with one response per connection
    is all it needs (Prometheus, curl and browsers all speak it); the answer is rendered on the loop so
    that every gauge reads the state it describes between two events, never while it changes.
    """

    def __init__(self, metrics: Metrics, host: str, port: int) -> None:
        self.metrics = metrics
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        """Binds and serves; returns the port bound (``port`` 0 picks a free one)."""
        self._server = await asyncio.start_server(self._serve, self.host or None, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics served at http://%s:%d/metrics", self.host or "0.0.0.0", self.port)
        return self.port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await asyncio.wait_for(reader.readline(), 10)
            while (await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b"\n", b""):
                pass  # the headers: nothing in them changes the answer
            parts = request_line.split()
            path = parts[1].split(b"?", 1)[0] if len(parts) >= 2 else b""
            if len(parts) >= 2 and parts[0] in (b"GET", b"HEAD") and path in (b"/metrics", b"/"):
                body = self.metrics.render()
                head = f"HTTP/1.0 200 OK\r\nContent-Type: {CONTENT_TYPE_LATEST}\r\n"
            else:
                body = b"not found: the metrics are at /metrics\n"
                head = "HTTP/1.0 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\n"
            writer.write(f"{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
            if parts[:1] != [b"HEAD"]:
                writer.write(body)
            await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None


def parse_metrics_listener(value: str | None) -> tuple[str, int] | None:
    """``metrics.listener`` (``http://HOST:PORT``; empty: no endpoint) as (host, port)."""
    if not value:
        return None
    text = value.strip()
    if not text.startswith("http://"):
        raise ValueError(f"metrics.listener must be http://HOST:PORT, not {value!r}")
    host, sep, port = text[len("http://") :].rstrip("/").rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"metrics.listener must be http://HOST:PORT, not {value!r}")
    return host.strip("[]"), int(port)


def check_metrics_listener(value: Any) -> None:
    """The validator of the ``metrics.listener`` setting."""
    parse_metrics_listener(value)
