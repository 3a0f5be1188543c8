"""The Consumer groups page (to be built)."""

from __future__ import annotations

from aiohttp import web

from console.app import page

NAV = ("/groups", "Consumer groups")
routes = web.RouteTableDef()


@routes.get("/groups")
async def groups_page(request: web.Request) -> web.Response:
    return page(request, "placeholder.html", "Consumer groups")
