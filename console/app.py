"""The console's aiohttp application: the ``Console`` (its cluster client, shared snapshot, metrics
history and templates), the middlewares every request goes through (basic auth, errors in words), the
static files, and the pages' routes (each page module's ``routes``).

Errors: the cluster's (ClusterUnavailable, AdminError) are shown in words, as the page or, for an htmx
request, as the fragment that replaces the action's result; anything else is logged with its traceback
and shown as one sentence, never as a stack trace.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hmac
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from console.client import ClusterUnavailable, ConsoleClient
from console.cluster import SnapshotCache
from console.metrics import MetricsHistory
from console.render import environment, render
from tools.admin_client import AdminError

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
# The page modules, in the navigation's order; each has ``routes: web.RouteTableDef`` and ``NAV`` (path,
# label) or None when it is not in the navigation.
PAGES = ("cluster", "topics", "messages", "groups", "transactions", "security")


@dataclass
class Console:
    client: ConsoleClient
    snapshots: SnapshotCache
    metrics: MetricsHistory
    refresh: float = 2.0  # seconds between live updates
    user: str | None = None
    password: str | None = None
    templates: jinja2.Environment = field(default_factory=environment)
    nav: list[tuple[str, str]] = field(default_factory=list)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    # Things pages keep between requests (a group's lag history, a reassignment being watched), by name.
    state: dict[str, Any] = field(default_factory=dict)

    def render(self, template: str, **context: Any) -> str:
        return render(self.templates, template, nav=self.nav, **context)


CONSOLE = web.AppKey("console", Console)
METRICS_TASK = web.AppKey("metrics_task", asyncio.Task)


def console_of(request: web.Request) -> Console:
    return request.app[CONSOLE]


def page(request: web.Request, template: str, title: str, **context: Any) -> web.Response:
    """A whole page in the layout (``base.html``)."""
    html = console_of(request).render(template, title=title, path=request.path, **context)
    return web.Response(text=html, content_type="text/html")


def fragment(request: web.Request, template: str, **context: Any) -> web.Response:
    """A piece of a page, for htmx to swap in."""
    return web.Response(text=console_of(request).render(template, **context), content_type="text/html")


def message(request: web.Request, text: str, ok: bool = True) -> web.Response:
    """An action's outcome in words (``_message.html``), swapped in where the action's result goes."""
    return fragment(request, "_message.html", text=text, ok=ok)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def basic_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    console = console_of(request)
    if console.user is None:
        return await handler(request)
    header = request.headers.get("Authorization", "")
    scheme, _, encoded = header.partition(" ")
    user, password = "", ""
    if scheme.lower() == "basic":
        with contextlib.suppress(binascii.Error, UnicodeDecodeError):
            user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
    expected = f"{console.user}:{console.password or ''}".encode()
    if not hmac.compare_digest(f"{user}:{password}".encode(), expected):
        return web.Response(
            status=401,
            text="The console asks for a user name and password.",
            headers={"WWW-Authenticate": 'Basic realm="samsa console", charset="UTF-8"'},
        )
    return await handler(request)


@web.middleware
async def errors_in_words(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except (ClusterUnavailable, AdminError) as e:
        log.warning("%s %s: %s", request.method, request.path, e)
        return _failure(request, str(e), 503)
    except Exception as e:
        log.exception("%s %s failed", request.method, request.path)
        return _failure(request, f"The console failed to do this: {type(e).__name__}: {e}", 500)


def _failure(request: web.Request, text: str, status: int) -> web.Response:
    if request.headers.get("HX-Request"):
        # htmx swaps 2xx answers only; the words must reach the page.
        return message(request, text, ok=False)
    html = console_of(request).render("error.html", title="Error", path=request.path, text=text)
    return web.Response(text=html, status=status, content_type="text/html")


def build_app(console: Console) -> web.Application:
    app = web.Application(middlewares=[basic_auth, errors_in_words])
    app[CONSOLE] = console
    from console import live

    app.router.add_routes(live.routes)
    for name in PAGES:
        module = import_module(f"console.pages.{name}")
        app.router.add_routes(module.routes)
        if module.NAV is not None:
            console.nav.append(module.NAV)
    app.router.add_static("/static", STATIC, append_version=True)
    app.on_startup.append(_start)
    app.on_shutdown.append(_stop)
    return app


async def _start(app: web.Application) -> None:
    console = app[CONSOLE]
    if not (STATIC / "vendor" / "htmx.min.js").exists():
        log.warning("%s is missing: run `make console-assets`; pages will not update live", STATIC / "vendor")
    if console.metrics.enabled:
        app[METRICS_TASK] = asyncio.create_task(console.metrics.run())


async def _stop(app: web.Application) -> None:
    console = app[CONSOLE]
    console.stopping.set()
    task = app.get(METRICS_TASK)
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    await console.client.close()
