"""The Topics page (to be built)."""

from __future__ import annotations

from aiohttp import web

from console.app import page

NAV = ("/topics", "Topics")
routes = web.RouteTableDef()


@routes.get("/topics")
async def topics_page(request: web.Request) -> web.Response:
    return page(request, "placeholder.html", "Topics")
