"""server_common.tasks.cancel_and_wait: shutdown ends every task, started or not, whatever it raises."""

from __future__ import annotations

import asyncio

from server_common.tasks import cancel_and_wait


async def test_cancels_running_tasks_and_waits_for_their_cleanup() -> None:
    cleaned: list[str] = []

    async def worker(name: str) -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(0)  # cleanup that itself awaits
            cleaned.append(name)

    tasks = [asyncio.create_task(worker(n)) for n in "ab"]
    await asyncio.sleep(0)
    await cancel_and_wait([tasks[0], None, tasks[1]])
    assert cleaned == ["a", "b"] and all(t.done() for t in tasks)


async def test_a_task_that_already_failed_or_finished_does_not_stop_the_others() -> None:
    async def fail() -> None:
        raise RuntimeError("boom")

    failed, finished = asyncio.create_task(fail()), asyncio.create_task(asyncio.sleep(0))
    sleeping = asyncio.create_task(asyncio.sleep(3600))
    await asyncio.sleep(0.01)
    await cancel_and_wait([failed, finished, sleeping])
    assert sleeping.cancelled()
    await cancel_and_wait([])
