"""Following sequential change notifications in ZooKeeper (Kafka's ZkNodeChangeNotificationListener).

A writer announces a change with a persistent sequential ``<prefix><seq>`` under a notification znode
(``/config/changes/config_change_<seq>``, ``/kafka-acl-changes/acl_changes_<seq>``, ...). Each
follower notes the notifications there when it starts (what they announce is in the state it then
loads), watches the znode, and hands every later notification's data to its handler once, in sequence
order; notifications older than the expiration (15 minutes, as Kafka) are deleted by whichever
follower sees them. Used by broker/config_listener.py (config and SCRAM changes) and zk/acls.py (ACL
changes).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from server_common.tasks import cancel_and_wait
from zk.client import ZkClient

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000


class WatchTasks:
    """The tasks ZooKeeper watch callbacks (plain functions on the event loop) start: kept until they
    end, a failure logged as ``<what> failed``, all cancelled at shutdown."""

    def __init__(self, what: str, logger: logging.Logger = log) -> None:
        self.what = what
        self.log = logger
        self._tasks: set[asyncio.Task] = set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.log.error("%s failed", self.what, exc_info=task.exception())

    async def shutdown(self) -> None:
        await cancel_and_wait(self._tasks)


class ChangeNotifications:
    """The notifications ``<prefix><seq>`` under ``root``: ``handle(path, data)`` runs for each one not
    seen yet, in sequence order, under ``lock`` (the owner's, when other work of its must not
    interleave). What ``handle`` raises ends the pass with that notification still unseen: the next
    watch event tries it again."""

    def __init__(
        self,
        zk: ZkClient,
        root: str,
        prefix: str,
        handle: Callable[[str, bytes], Awaitable[None]],
        *,
        lock: asyncio.Lock | None = None,
    ) -> None:
        self.zk = zk
        self.root = root
        self.prefix = prefix
        self.handle = handle
        self.lock = lock or asyncio.Lock()
        self.last_seen = -1

    def is_change(self, child: str) -> bool:
        return child.startswith(self.prefix) and child[len(self.prefix) :].isdigit()

    def sequence(self, child: str) -> int:
        return int(child[len(self.prefix) :])

    async def _changes(self) -> list[str]:
        children = await self.zk.get_children(self.root) or []
        return sorted((c for c in children if self.is_change(c)), key=self.sequence)

    async def note_existing(self) -> None:
        """Marks the notifications there now as seen (call before loading the state they announce)."""
        self.last_seen = max(map(self.sequence, await self._changes()), default=-1)

    def follow(
        self, tasks: WatchTasks, process: Callable[[], Coroutine[Any, Any, None]] | None = None
    ) -> None:
        """Watches ``root``: a new notification starts a pass in ``tasks`` (``process``, the owner's
        way to call ``self.process``, else ``self.process()``)."""
        run = process or self.process

        def on_changes(children: list[str]) -> None:
            if any(self.is_change(c) and self.sequence(c) > self.last_seen for c in children):
                tasks.spawn(run())

        self.zk.watch_children(self.root, on_changes)

    async def process(self, expiration_ms: float = CHANGE_EXPIRATION_MS) -> None:
        """Hands the notifications not yet seen to ``handle``, in order, and deletes the expired ones."""
        async with self.lock:
            now = time.time() * 1000
            for child in await self._changes():
                path = f"{self.root}/{child}"
                if self.sequence(child) > self.last_seen:
                    found = await self.zk.get(path)
                    if found is None:
                        log.warning("read null data from %s", path)
                    else:
                        await self.handle(path, found[0])
                    self.last_seen = self.sequence(child)
                    stat = found[1] if found else None
                else:
                    stat = await self.zk.exists(path)
                if stat is not None and now - stat.ctime > expiration_ms:
                    log.debug("Purging change notification %s", path)
                    await self.zk.delete(path)
