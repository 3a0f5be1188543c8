"""Synthetic website activity: page views, searches and clicks, as the pipeline's input events.

Each event is one JSON record keyed by its user::

    {"event_id": "...", "type": "page_view", "user": "u0042", "page": "/products/7",
     "referrer": "/search", "latency_ms": 85, "event_time": 1700000000123}

``event_time`` is epoch milliseconds. Most events carry a time just before "now"; some are out of order
(up to ``disorder_ms`` older, within the job's watermark) and a few are late (``late_ms`` older, past the
watermark, so the job drops them), as real trackers' events are.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass

EVENT_TYPES = ("page_view", "search", "click")
PAGES = ("/", "/search", "/cart", "/checkout", "/help", *(f"/products/{i}" for i in range(1, 21)))
EXTERNAL_REFERRERS = ("https://news.example", "https://social.example", "https://mail.example", "")
# Median latency per event type, ms: a search costs more than a page, a click (an ad beacon) less.
_MEDIAN_LATENCY_MS = {"page_view": 80.0, "search": 150.0, "click": 25.0}


@dataclass(frozen=True)
class Event:
    event_id: str
    type: str
    user: str
    page: str
    referrer: str
    latency_ms: int
    event_time: int

    def key(self) -> bytes:
        return self.user.encode()

    def value(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()


class ActivityGenerator:
    """A reproducible stream of events for a given seed: popular pages are visited more (Zipf-like),
    each user wanders from page to page, and latencies are log-normal."""

    def __init__(
        self,
        seed: int | None = None,
        users: int = 1000,
        disorder_fraction: float = 0.1,
        disorder_ms: int = 8_000,
        late_fraction: float = 0.01,
        late_ms: int = 60_000,
    ) -> None:
        self.random = random.Random(seed)
        self.users = [f"u{i:05d}" for i in range(users)]
        self.disorder_fraction, self.disorder_ms = disorder_fraction, disorder_ms
        self.late_fraction, self.late_ms = late_fraction, late_ms
        self._page_weights = [1 / (rank + 1) for rank in range(len(PAGES))]
        self._last_page: dict[str, str] = {}

    def _delay_ms(self) -> int:
        draw = self.random.random()
        if draw < self.late_fraction:
            return self.random.randint(self.late_ms // 4, self.late_ms)
        if draw < self.late_fraction + self.disorder_fraction:
            return self.random.randint(1, self.disorder_ms)
        return 0

    def next_event(self, now_ms: int) -> Event:
        """One event that happened at (or, for out-of-order and late ones, before) ``now_ms``."""
        user = self.random.choice(self.users)
        kind = self.random.choices(EVENT_TYPES, weights=(0.7, 0.2, 0.1))[0]
        previous = self._last_page.get(user)
        if kind == "search":
            page = "/search"
        elif kind == "click" and previous is not None:
            page = previous
        else:
            page = self.random.choices(PAGES, weights=self._page_weights)[0]
        referrer = previous if previous is not None else self.random.choice(EXTERNAL_REFERRERS)
        self._last_page[user] = page
        latency = int(self.random.lognormvariate(0, 0.6) * _MEDIAN_LATENCY_MS[kind]) + 1
        return Event(
            event_id=f"{self.random.getrandbits(64):016x}",
            type=kind,
            user=user,
            page=page,
            referrer=referrer,
            latency_ms=latency,
            event_time=now_ms - self._delay_ms(),
        )
