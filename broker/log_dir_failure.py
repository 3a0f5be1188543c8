"""Log dir failure: an I/O error on a log dir takes the whole dir offline while the broker serves on
(Kafka's LogDirFailureChannel and ReplicaManager.handleLogDirFailure, ZooKeeper mode).

Whoever meets an OSError on a log dir (the log manager's periodic work on its threads, the produce and
fetch paths on the event loop, a replica move) reports it to ``LogDirFailureChannel``, once per dir.
On the event loop the handler then, at once:

- drops the dir's logs from the log manager (descriptors released, nothing more written there); their
  partitions are offline: every request for them answers KAFKA_STORAGE_ERROR and a LeaderAndIsr does
  not create them again in another dir (their data is on the failed disk);
- removes those partitions from the replica manager (fetchers stop, waiting produces and fetches end,
  moves between dirs stop);
- writes ``/log_dir_event_notification/log_dir_event_<seq>`` (``{"version":1,"broker":<id>,"event":1}``)
  in ZooKeeper. The controller (``controller.log_dir_events``) answers with a LeaderAndIsr for all the
  broker's partitions, learns the offline ones from their KAFKA_STORAGE_ERROR, and elects new leaders.

When no log dir is left the broker shuts down, as Kafka does.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Awaitable, Callable

from broker.replica_manager import ReplicaManager
from storage.errors import KafkaStorageError
from storage.log_manager import LogManager
from zk import znodes
from zk.client import ZkClient

log = logging.getLogger(__name__)

# Between attempts to write the ZooKeeper notification when ZooKeeper does not answer.
NOTIFY_RETRY_S = 1.0


class LogDirFailureChannel:
    """Where I/O errors on log dirs are reported, from any thread; each dir is handled once, on the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self.offline_dirs: set[str] = set()
        self._handler: Callable[[str], None] | None = None
        self._pending: list[str] = []

    def set_handler(self, handler: Callable[[str], None]) -> None:
        """``handler(dir)`` runs on the loop for each dir taken offline (also those reported before)."""
        self._handler = handler
        pending, self._pending = self._pending, []
        for directory in pending:
            self._loop.call_soon(handler, directory)

    def maybe_add_offline_log_dir(self, directory: str, message: str, error: BaseException) -> None:
        """Kafka's maybeAddOfflineLogDir: the first report of a dir queues its handling."""
        with self._lock:
            if directory in self.offline_dirs:
                return
            self.offline_dirs.add(directory)
        log.error("%s: log dir %s goes offline (%s)", message, directory, error)
        if self._handler is None:
            self._pending.append(directory)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._handler(directory)  # on the loop already: offline before anything else reads the dir
        else:
            self._loop.call_soon_threadsafe(self._handler, directory)


class LogDirFailureHandler:
    """Takes a failed dir's partitions offline, tells the controller, and halts when no dir is left."""

    def __init__(
        self,
        broker_id: int,
        channel: LogDirFailureChannel,
        replica_manager: ReplicaManager,
        log_manager: LogManager,
        zk: ZkClient | None,
        halt: Callable[[], None],
        on_partitions_offline: Callable[[list[tuple[str, int]]], None] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.channel = channel
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.zk = zk
        self.halt = halt
        self.on_partitions_offline = on_partitions_offline
        self._tasks: set[asyncio.Task[None]] = set()
        channel.set_handler(self.handle)

    def handle(self, directory: str) -> None:
        offline = self.log_manager.handle_log_dir_failure(directory)
        self.replica_manager.mark_partitions_offline(offline)
        if self.on_partitions_offline is not None:
            self.on_partitions_offline(offline)
        log.error(
            "Broker %d stopped serving %d replicas in the failed log dir %s",
            self.broker_id,
            len(offline),
            directory,
        )
        if not self.log_manager.live_log_dirs:
            log.error("Shutdown broker because all log dirs in %s have failed", self.log_manager.log_dirs)
            self.halt()
            return
        if self.zk is not None:
            self._spawn(self._notify_controller(self.zk))

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _notify_controller(self, zk: ZkClient) -> None:
        """Writes the log dir event notification, retrying until ZooKeeper takes it."""
        path = f"{znodes.LOG_DIR_EVENT_NOTIFICATION}/{znodes.LOG_DIR_EVENT_PREFIX}"
        while True:
            try:
                created = await zk.create(path, znodes.encode_log_dir_event(self.broker_id), sequence=True)
            except Exception as e:  # ZooKeeper unreachable or session moving: try again
                log.warning("Cannot write the log dir event notification (%s); retrying", e)
                await asyncio.sleep(NOTIFY_RETRY_S)
                continue
            log.info("Wrote log dir event notification %s", created)
            return

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass


def usable_log_dirs(log_dirs: list[str]) -> list[str]:
    """The dirs of log.dirs that exist or can be made, for meta.properties; the others start offline
    (the log manager finds them so too). None usable: KafkaStorageError, the broker cannot start."""
    usable = []
    for directory in log_dirs:
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            log.error("Failed to create or validate data directory %s: %s", directory, e)
            continue
        usable.append(directory)
    if not usable:
        raise KafkaStorageError(f"None of the specified log dirs from log.dirs {log_dirs} is usable")
    return usable
