"""The Transactions page (read-only, live): every transaction the brokers coordinate, from ListTransactions
sent to every broker (transactional id, producer id, state, coordinator), each described by its
coordinator with DescribeTransactions (producer epoch, timeout, start time, partitions) — both through
``tools.transactions.admin.TransactionsAdmin``, the library of ``samsa transactions``.

The query filters the list: ``state`` (one of Kafka's transaction states, filtered by the brokers) and
``id`` (a part of the transactional id). At most ``MAX_DESCRIBED`` transactions are described on each
refresh, the open ones first: the list stays complete, the rest show no details.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from aiohttp import web

from console.app import Console
from console.live import Sections, live_page, view
from tools.transactions.admin import (
    STATES,
    RequestError,
    TransactionDescription,
    TransactionListing,
    TransactionsAdmin,
    tp_string,
)

NAV = ("/transactions", "Transactions")
routes = web.RouteTableDef()

MAX_DESCRIBED = 100
# The states of a transaction under way: listed (and described) first.
OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
STATE_ORDER = (*OPEN_STATES, "CompleteCommit", "CompleteAbort", "Empty")


@dataclass(frozen=True)
class TransactionRow:
    """One transaction as the page shows it: its listing, the broker that listed it, and its
    description (or why it could not be described; neither when it was not asked for)."""

    listing: TransactionListing
    coordinator: int
    description: TransactionDescription | None = None
    error: str | None = None

    @property
    def open(self) -> bool:
        return self.listing.state in OPEN_STATES

    @property
    def partitions(self) -> list[str]:
        if self.description is None:
            return []
        return [tp_string(tp) for tp in sorted(self.description.topic_partitions)]

    def open_for_ms(self, now_ms: int) -> int | None:
        """How long the transaction under way has been open (None when none is)."""
        d = self.description
        if d is None or d.transaction_start_time_ms is None or not self.open:
            return None
        return max(0, now_ms - d.transaction_start_time_ms)


def _order(row: TransactionRow) -> tuple[int, str]:
    state = row.listing.state
    return (
        STATE_ORDER.index(state) if state in STATE_ORDER else len(STATE_ORDER),
        row.listing.transactional_id,
    )


async def read_transactions(
    admin: TransactionsAdmin, state: str = "", part: str = "", limit: int = MAX_DESCRIBED
) -> list[TransactionRow]:
    """The transactions listed by every broker (in ``state`` if given, whose id contains ``part``), open
    ones first, the first ``limit`` of them described by their coordinators."""
    listed = await admin.list_transactions(states=[state] if state else [])
    rows = sorted(
        (
            TransactionRow(listing, broker)
            for broker, listings in listed.items()
            for listing in listings
            if part in listing.transactional_id
        ),
        key=_order,
    )
    wanted = {row.listing.transactional_id for row in rows[:limit]}
    described = await admin.describe_transactions(wanted) if wanted else {}
    result = []
    for row in rows:
        found = described.get(row.listing.transactional_id)
        if isinstance(found, TransactionDescription):
            row = TransactionRow(row.listing, row.coordinator, found)
        elif isinstance(found, RequestError):
            row = TransactionRow(row.listing, row.coordinator, None, str(found))
        result.append(row)
    return result


def _duration(ms: int | None) -> str:
    """``1h 2m``, ``3m 4s``, ``5.6 s``; an em dash when unknown."""
    if ms is None:
        return "—"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m"


@view("transactions")
async def transactions_view(console: Console, query: Mapping[str, str]) -> Sections:
    state = query.get("state", "")
    part = query.get("id", "").strip()
    if state and state not in STATES:
        text = f"Unknown transaction state {state!r}: one of {', '.join(sorted(STATES))}."
        return {"transactions": console.render("_message.html", text=text, ok=False), "summary": ""}
    admin = TransactionsAdmin(await console.client.admin())
    try:
        rows = await read_transactions(admin, state, part)
    except RequestError as e:
        # A broker's ListTransactions failed: said in words where the list goes.
        return {"transactions": console.render("_message.html", text=str(e), ok=False), "summary": ""}
    now_ms = time.time_ns() // 1_000_000
    counts = Counter(row.listing.state for row in rows)
    return {
        "summary": console.render(
            "transactions/_summary.html", counts=counts, states=STATE_ORDER, total=len(rows)
        ),
        "transactions": console.render(
            "transactions/_table.html",
            rows=rows,
            now_ms=now_ms,
            duration=_duration,
            limit=MAX_DESCRIBED,
            filtered=bool(state or part),
        ),
    }


@routes.get("/transactions")
async def transactions_page(request: web.Request) -> web.Response:
    return await live_page(
        request,
        "transactions/page.html",
        "Transactions",
        "transactions",
        states=STATE_ORDER,
        state=request.query.get("state", ""),
        part=request.query.get("id", ""),
    )
