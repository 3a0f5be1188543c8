"""The ACLs and users page (to be built)."""

from __future__ import annotations

from aiohttp import web

from console.app import page

NAV = ("/security", "ACLs and users")
routes = web.RouteTableDef()


@routes.get("/security")
async def security_page(request: web.Request) -> web.Response:
    return page(request, "placeholder.html", "ACLs and users")
