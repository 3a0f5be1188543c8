"""Live pages: one mechanism for every page that updates without reloading.

A page's live parts are named sections, rendered by a *view* (``@view("cluster")``: an async function of
the console and the page's query that returns ``{section: html}``). The page handler renders the sections
into the page at once (``live_page``), so a page shows its data on first load; then the page's
``sse-connect="/events/<view>?<query>"`` opens a server-sent event stream that renders the sections again
every ``Console.refresh`` seconds and sends, as an event named for it, each section whose HTML changed,
which htmx swaps in (``sse-swap``). Charts are sections too: their data rides in a ``data-series``
attribute that ``static/console.js`` draws with uPlot.

The layout's ``cluster-error`` section carries the cluster's unavailability in words; while it is shown
the other sections keep their last content.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import urlencode

from aiohttp import web

from console.app import Console, console_of, page
from console.client import ClusterUnavailable
from tools.admin_client import AdminError

log = logging.getLogger(__name__)

Sections = dict[str, str]
View = Callable[[Console, Mapping[str, str]], Awaitable[Sections]]
VIEWS: dict[str, View] = {}
ERROR_SECTION = "cluster-error"

routes = web.RouteTableDef()


def view(name: str) -> Callable[[View], View]:
    """Registers a page's view under ``name`` (the ``/events/<name>`` stream)."""

    def register(fn: View) -> View:
        if name in VIEWS:
            raise ValueError(f"view {name!r} is registered twice")
        VIEWS[name] = fn
        return fn

    return register


async def sections(console: Console, name: str, query: Mapping[str, str]) -> Sections:
    """The view's sections, plus the error section (empty, or the cluster's failure in words)."""
    try:
        rendered = await VIEWS[name](console, query)
    except (ClusterUnavailable, AdminError) as e:
        return {ERROR_SECTION: console.render("_cluster_error.html", text=str(e))}
    return {**rendered, ERROR_SECTION: ""}


async def live_page(
    request: web.Request,
    template: str,
    title: str,
    view_name: str,
    query: Mapping[str, str] | None = None,
    **context: object,
) -> web.Response:
    """The page of view ``view_name`` with its sections rendered in, and its event stream's URL; the view's
    ``query`` is the request's unless given (a page whose subject is in its path)."""
    query = dict(request.query if query is None else query)
    rendered = await sections(console_of(request), view_name, query)
    events = f"/events/{view_name}" + (f"?{urlencode(query)}" if query else "")
    response = page(request, template, title, sections=rendered, events=events, **context)
    if rendered.get(ERROR_SECTION):
        # The cluster's failure is on the page in words, which keeps its live stream and recovers by itself;
        # the status says so to anything that is not a browser (monitors, curl -f).
        response.set_status(503)
    return response


def event(name: str, html: str) -> bytes:
    """One server-sent event; each line of the HTML a ``data:`` line (the client joins them with \\n)."""
    lines = "".join(f"data: {line}\n" for line in html.split("\n"))
    return f"event: {name}\n{lines}\n".encode()


@routes.get("/events/{view}")
async def stream(request: web.Request) -> web.StreamResponse:
    console = console_of(request)
    name = request.match_info["view"]
    if name not in VIEWS:
        raise web.HTTPNotFound(text=f"No live view {name!r}")
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    query = dict(request.query)
    sent: Sections = {}
    with contextlib.suppress(ConnectionResetError, asyncio.CancelledError):
        while not console.stopping.is_set():
            try:
                current = await sections(console, name, query)
            except Exception:
                log.exception("live view %s failed", name)
                current = {
                    ERROR_SECTION: console.render(
                        "_cluster_error.html", text="The console failed to update this page; see its log."
                    )
                }
            for section, html in current.items():
                if sent.get(section) != html:
                    await response.write(event(section, html))
                    sent[section] = html
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(console.stopping.wait(), console.refresh)
            # aiohttp does not cancel a handler whose client left, and a page whose sections do not
            # change writes nothing that could fail: without this, every closed tab kept a loop
            # rendering (and reading the cluster) for as long as the console ran.
            if request.transport is None or request.transport.is_closing():
                break
    return response
