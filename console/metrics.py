"""MetricsHistory: the brokers' Prometheus endpoints (``--metrics``), scraped every ``interval`` seconds,
and the cluster's throughput over the last ``window`` seconds (15 minutes) for the live charts.

The names are the JMX exporter's for Kafka's BrokerTopicMetrics (docs/operations.md), which Samsa's
brokers serve and an Apache Kafka cluster's exporter serves too: the all-topics series (no ``topic``
label) of each broker, summed over brokers, as rates between two scrapes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

log = logging.getLogger(__name__)

# chart series -> the counter summed over brokers
SERIES = {
    "bytes_in": "kafka_server_brokertopicmetrics_bytesin_total",
    "bytes_out": "kafka_server_brokertopicmetrics_bytesout_total",
    "messages_in": "kafka_server_brokertopicmetrics_messagesin_total",
}


@dataclass
class Point:
    at: float  # seconds since the epoch
    rates: dict[str, float]  # series -> per second since the previous scrape


class MetricsHistory:
    def __init__(self, urls: list[str], interval: float = 5.0, window: float = 900.0) -> None:
        self.urls = urls
        self.interval = interval
        self.points: deque[Point] = deque(maxlen=max(2, int(window / interval)))
        self.errors: dict[str, str] = {}  # url -> why its last scrape failed
        self._last: tuple[float, dict[str, float]] | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.urls)

    async def run(self) -> None:
        """Scrapes until cancelled."""
        timeout = aiohttp.ClientTimeout(total=max(1.0, self.interval - 0.5))
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                await self.scrape(session)
                await asyncio.sleep(self.interval)

    async def scrape(self, session: aiohttp.ClientSession) -> None:
        totals = dict.fromkeys(SERIES, 0.0)
        texts = await asyncio.gather(*(self._get(session, url) for url in self.urls))
        for text in texts:
            if text is None:
                continue
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    for series, name in SERIES.items():
                        if sample.name == name and "topic" not in sample.labels:
                            totals[series] += sample.value
        now = time.time()
        if self._last is not None and not self.errors:
            then, before = self._last
            elapsed = now - then
            if elapsed > 0:
                rates = {s: max(0.0, (totals[s] - before[s]) / elapsed) for s in SERIES}
                self.points.append(Point(now, rates))
        self._last = None if self.errors else (now, totals)

    async def _get(self, session: aiohttp.ClientSession, url: str) -> str | None:
        try:
            async with session.get(url) as answer:
                answer.raise_for_status()
                text = await answer.text()
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            if url not in self.errors:
                log.warning("cannot scrape %s: %s", url, e)
            self.errors[url] = str(e) or type(e).__name__
            return None
        self.errors.pop(url, None)
        return text

    def series(self) -> dict[str, list[float]]:
        """uPlot's data: [times, then one list of rates per series]."""
        points = list(self.points)
        return {"x": [p.at for p in points], **{s: [p.rates[s] for p in points] for s in SERIES}}
