"""The live mechanism's event streams (console/live.py) without a cluster or a browser: a stream whose
client has gone stops rendering its view, even when nothing on the page changes (aiohttp does not cancel
the handler, and an unchanged page writes nothing that could fail)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import aiohttp
from aiohttp import web

from console.app import Console, build_app
from console.client import ConsoleClient
from console.cluster import SnapshotCache
from console.live import Sections, view
from console.metrics import MetricsHistory

RENDERS = {"count": 0}


@view("test-unchanging")
async def unchanging(console: Console, query: Mapping[str, str]) -> Sections:
    RENDERS["count"] += 1
    return {"section": "always the same"}


async def renders_after_the_client_left() -> int:
    client = ConsoleClient("127.0.0.1:1")  # never used: the view reads nothing
    console = Console(
        client=client, snapshots=SnapshotCache(client), metrics=MetricsHistory([]), refresh=0.05
    )
    runner = web.AppRunner(build_app(console))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        async with aiohttp.ClientSession() as session:
            response = await session.get(f"http://127.0.0.1:{port}/events/test-unchanging")
            assert (await response.content.readline()).startswith(b"event: ")
            response.close()
        await asyncio.sleep(0.3)  # the server notices the closed connection
        before = RENDERS["count"]
        await asyncio.sleep(0.5)  # ten refreshes
        return RENDERS["count"] - before
    finally:
        console.stopping.set()
        await runner.cleanup()


def test_a_stream_whose_client_left_stops_rendering_its_view() -> None:
    assert asyncio.run(renders_after_the_client_left()) == 0
