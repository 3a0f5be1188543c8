"""Ending a server's background tasks at shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Task | None]) -> None:
    """Cancels each task (None: none was started) and waits until all have ended. What a task raised
    while it ended is dropped: at shutdown there is nobody left to hand it to."""
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)
