"""The Transactions page (to be built)."""

from __future__ import annotations

from aiohttp import web

from console.app import page

NAV = ("/transactions", "Transactions")
routes = web.RouteTableDef()


@routes.get("/transactions")
async def transactions_page(request: web.Request) -> web.Response:
    return page(request, "placeholder.html", "Transactions")
