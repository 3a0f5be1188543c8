"""The Cluster page: brokers (id, address, rack, controller, partitions led, log size, up or down), the
active controller, the under-replicated, under-min-ISR and offline partition counts, and, when the
console has the brokers' metrics, the throughput in and out over the last 15 minutes."""

from __future__ import annotations

import json
from collections.abc import Mapping

from aiohttp import web

from console.app import Console
from console.live import Sections, live_page, view

NAV = ("/", "Cluster")
routes = web.RouteTableDef()

CHART_LABELS = {"bytes_in": "Bytes in/s", "bytes_out": "Bytes out/s", "messages_in": "Messages in/s"}


@view("cluster")
async def cluster_view(console: Console, query: Mapping[str, str]) -> Sections:
    snapshot = await console.snapshots.get()
    metrics = console.metrics
    return {
        "summary": console.render("cluster/_summary.html", snapshot=snapshot),
        "brokers": console.render("cluster/_brokers.html", snapshot=snapshot),
        "throughput": console.render(
            "cluster/_throughput.html",
            enabled=metrics.enabled,
            errors=metrics.errors,
            series=json.dumps(metrics.series()),
            labels=json.dumps(CHART_LABELS),
        ),
    }


@routes.get("/")
async def cluster_page(request: web.Request) -> web.Response:
    return await live_page(request, "cluster/page.html", "Cluster", "cluster")
