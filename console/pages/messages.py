"""The Messages page (to be built)."""

from __future__ import annotations

from aiohttp import web

from console.app import page

NAV = ("/messages", "Messages")
routes = web.RouteTableDef()


@routes.get("/messages")
async def messages_page(request: web.Request) -> web.Response:
    return page(request, "placeholder.html", "Messages")
