"""LogManager: every partition log of a broker across its log.dirs (Kafka's LogManager).

Each log dir holds `<topic>-<partition>` directories, a `.lock` (flock, so two brokers cannot share a
dir), the checkpoints recovery-point-offset-checkpoint, log-start-offset-checkpoint,
replication-offset-checkpoint (high watermarks) and cleaner-offset-checkpoint, and after a clean
shutdown the `.kafka_cleanshutdown` marker, which lets the next start skip recovery. New partitions go
to the dir holding the fewest (counted as logs come and go, so a creation costs the same whatever the
number of logs). A log that cannot be created (no space, no descriptors left) raises KafkaStorageError
and leaves no directory behind. Deleting a log renames its directory `<topic>-<partition>.<uuid>-delete`
and removes it after file.delete.delay.ms.

JBOD (Kafka's LogDirFailureChannel): an I/O error (OSError) on a log dir, met by the periodic work
here (flush, retention, checkpoints) or reported by the broker (appends, reads, rolls), takes the whole
dir offline through ``on_dir_failure``: ``handle_log_dir_failure`` then drops its logs (their
partitions answer KAFKA_STORAGE_ERROR and are never re-created in another dir), and the broker tells the
controller. A dir that cannot be opened at startup starts offline (all of them: the broker cannot
start). A replica moves between dirs through a future log, `<topic>-<partition>.<uuid>-future` in the
destination dir, swapped in by ``replace_current_with_future_log``.

The broker schedules the periodic work by calling plain methods: cleanup_logs (retention,
log.retention.check.interval.ms), flush_dirty_logs (fsync, may block: run it off the event loop),
checkpoint_* (log.flush.offset.checkpoint.interval.ms and friends), remove_expired_producers, and the
cleaner (start_cleaner runs its own threads).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from protocol.errors import ErrorCode
from storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    OffsetCheckpointFile,
)
from storage.cleaner import LogCleaner
from storage.config import LogConfig
from storage.errors import CorruptCheckpointError, KafkaStorageError, LogDirInUseError, StorageError
from storage.log import DEFAULT_PRODUCER_ID_EXPIRATION_MS, Log, now_ms, parse_topic_partition
from storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, segment_path

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"

TopicPartition = tuple[str, int]


class LogDirNotFoundError(StorageError):
    """A path that is not one of log.dirs (Kafka's LogDirNotFoundException)."""

    error_code = ErrorCode.LOG_DIR_NOT_FOUND


# (log dir, what failed, the error): a log dir met an I/O error and must go offline.
DirFailureCallback = Callable[[str, str, BaseException], None]


# Errors of the process, not of a disk: a log that cannot be created for these leaves its dir online.
_PROCESS_LIMITS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


def _remove_new_log_dir(path: str) -> None:
    """Removes the directory of a new log that could not be created. Its files go by name: listing a
    directory takes a descriptor, and running out of them may be why the log could not be created."""
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(segment_path(path, 0, suffix))
    try:
        os.rmdir(path)
    except OSError:
        shutil.rmtree(path, ignore_errors=True)  # something else in it: needs a listing after all


class LogManager:
    """Opens (and recovers) every log of `log_dirs` on construction; run that off the event loop when
    logs may be large."""

    def __init__(
        self,
        log_dirs: Sequence[str],
        default_config: LogConfig,
        *,
        topic_configs: Mapping[str, LogConfig] | None = None,
        recovery_threads_per_data_dir: int = 1,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        cleaner_dedupe_buffer_size: int = 128 * 1024 * 1024,
        cleaner_backoff_ms: int = 15_000,
        time_ms: Callable[[], int] = now_ms,
        transaction_verification_enabled: bool = True,
        on_dir_failure: DirFailureCallback | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._producer_id_expiration_ms = producer_id_expiration_ms
        # transaction.partition.verification.enable (KIP-890): the broker's logs refuse unverified
        # transactional batches from clients.
        self._transaction_verification_enabled = transaction_verification_enabled
        self._time_ms = time_ms
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, Log] = {}
        self._logs_per_dir = dict.fromkeys(self.log_dirs, 0)
        self._pending_dir_deletes: list[tuple[int, str]] = []
        self._closing_with_dir: dict[str, Log] = {}  # replaced logs, closed when their dir is removed
        self._lock_fds: list[int] = []
        self._dir_lock_fds: dict[str, int] = {}
        # JBOD: future logs (replicas moving to another dir), dirs offline, partitions whose log was in
        # an offline dir (never re-created elsewhere: their data is there), preferred dirs of
        # partitions not hosted yet (AlterReplicaLogDirs before the LeaderAndIsr).
        self._future_logs: dict[TopicPartition, Log] = {}
        self.offline_dirs: set[str] = set()
        self.offline_partitions: set[TopicPartition] = set()
        self._preferred_dirs: dict[TopicPartition, str] = {}
        self.on_dir_failure = on_dir_failure
        self.cleaner = LogCleaner(
            self.all_logs,
            dedupe_buffer_size=cleaner_dedupe_buffer_size,
            backoff_ms=cleaner_backoff_ms,
            time_ms=time_ms,
        )
        for directory in self.log_dirs:
            try:
                os.makedirs(directory, exist_ok=True)
                fd = self._dir_lock_fds[directory] = self._lock_dir(directory)
                self._lock_fds.append(fd)
            except LogDirInUseError:
                raise
            except OSError as e:  # Kafka: the dir starts offline, the broker starts on the others
                log.error("Failed to create or validate data directory %s: %s", directory, e)
                self.offline_dirs.add(directory)
        if len(self.offline_dirs) == len(self.log_dirs):
            raise KafkaStorageError(f"None of the specified log dirs from log.dirs {self.log_dirs} is usable")
        self._load_logs(recovery_threads_per_data_dir)

    # --- startup -------------------------------------------------------------------------------------

    @staticmethod
    def _lock_dir(directory: str) -> int:
        fd = os.open(os.path.join(directory, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirInUseError(
                f"Failed to acquire lock on file .lock in {directory}: it is in use"
            ) from None
        return fd

    @staticmethod
    def _read_checkpoint(directory: str, name: str) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(os.path.join(directory, name)).read()
        except CorruptCheckpointError as e:
            log.warning("Ignoring %s: %s", name, e)
            return {}

    def _load_logs(self, threads_per_dir: int) -> None:
        """Opens every log of the online dirs. A dir that meets an I/O error meanwhile starts offline,
        as in Kafka, its logs left unopened (the broker starts on the others; all of them: it cannot)."""
        jobs = []
        for directory in self.live_log_dirs:
            try:
                jobs.extend(self._log_jobs(directory))
            except OSError as e:
                self._fail_at_startup(directory, e)
        workers = max(1, threads_per_dir * len(self.live_log_dirs))

        def open_job(job: tuple) -> Log | OSError:
            try:
                return self._open_log(*job[1:5])
            except OSError as e:
                return e

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="log-recovery") as pool:
            loaded = list(zip(jobs, pool.map(open_job, jobs), strict=True))
        for (_, path, *_), opened in loaded:
            if isinstance(opened, OSError):
                self._fail_at_startup(os.path.dirname(path), opened)
        for (tp, path, _, _, _, high_watermark), opened in loaded:
            if isinstance(opened, OSError):
                continue
            if os.path.dirname(path) in self.offline_dirs:
                with contextlib.suppress(Exception):
                    opened.close_handlers()
                continue
            if tp in self._logs:
                raise ValueError(
                    f"Duplicate log directories for {tp[0]}-{tp[1]}: {self._logs[tp].dir} and {path}"
                )
            opened.update_high_watermark(high_watermark)
            self._logs[tp] = opened
            self._logs_per_dir[os.path.dirname(path)] += 1
        if not self.live_log_dirs:
            raise KafkaStorageError(f"None of the specified log dirs from log.dirs {self.log_dirs} is usable")
        for directory in self.live_log_dirs:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, CLEAN_SHUTDOWN_FILE))

    def _fail_at_startup(self, directory: str, error: OSError) -> None:
        if directory not in self.offline_dirs:
            log.error("Error while loading log dir %s: %s; it starts offline", directory, error)
            self.offline_dirs.add(directory)
            fd = self._dir_lock_fds.pop(directory, None)
            if fd is not None:
                self._lock_fds.remove(fd)
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _log_jobs(self, directory: str) -> list[tuple]:
        """(partition, path, clean shutdown?, recovery point, log start, high watermark) of each log."""
        jobs = []
        marker = os.path.join(directory, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        recovery_points = self._read_checkpoint(directory, RECOVERY_POINT_CHECKPOINT)
        log_starts = self._read_checkpoint(directory, LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = self._read_checkpoint(directory, REPLICATION_CHECKPOINT)
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                log.info("Removing %s left from a topic deletion", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):
                # A move between log dirs the broker did not finish: the current log holds every
                # record, so the copy is dropped (AlterReplicaLogDirs starts it again if asked).
                log.warning("Removing the unfinished future replica directory %s", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            try:
                tp = parse_topic_partition(name)
            except ValueError:
                log.warning("Ignoring %s: not a log directory", path)
                continue
            jobs.append(
                (
                    tp,
                    path,
                    clean,
                    recovery_points.get(tp, 0),
                    log_starts.get(tp, 0),
                    high_watermarks.get(tp, 0),
                )
            )
        return jobs

    def _open_log(self, path: str, clean: bool, recovery_point: int, log_start_offset: int) -> Log:
        topic, _ = parse_topic_partition(os.path.basename(path))
        return Log(
            path,
            self.config_for(topic),
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            had_clean_shutdown=clean,
            producer_id_expiration_ms=self._producer_id_expiration_ms,
            time_ms=self._time_ms,
            transaction_verification_enabled=self._transaction_verification_enabled,
        )

    # --- logs ----------------------------------------------------------------------------------------

    # --- log dirs (JBOD) ------------------------------------------------------------------------------

    @property
    def live_log_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def check_log_dir(self, directory: str) -> str:
        """The absolute path of a log dir that is online; LogDirNotFoundError when it is not one of
        log.dirs, KafkaStorageError when it is offline (Kafka's isLogDirOnline)."""
        path = os.path.abspath(directory)
        if path not in self.log_dirs:
            raise LogDirNotFoundError(f"Failed to find log dir {directory}.")
        if path in self.offline_dirs:
            raise KafkaStorageError(f"Log directory {path} is offline")
        return path

    def maybe_handle_io_error(self, directory: str, message: str, error: BaseException) -> None:
        """Reports an I/O error on ``directory`` (Kafka's LogDirFailureChannel.maybeAddOfflineLogDir): the
        broker takes it offline. Without a callback (tools, tests) the dir is taken offline here."""
        directory = os.path.abspath(directory)
        if directory not in self._logs_per_dir:
            directory = os.path.dirname(directory)  # a log's own directory: its parent is the log dir
        if directory in self.offline_dirs:
            return
        log.error("%s in dir %s: %s", message, directory, error)
        if self.on_dir_failure is not None:
            self.on_dir_failure(directory, message, error)
        else:
            self.handle_log_dir_failure(directory)

    def handle_log_dir_failure(self, directory: str) -> list[TopicPartition]:
        """Takes ``directory`` offline: its logs and future logs are dropped (descriptors released, nothing
        written: the disk failed), their partitions remembered as offline. Returns the partitions whose
        current log was there."""
        directory = os.path.abspath(directory)
        with self._lock:
            if directory in self.offline_dirs or directory not in self._logs_per_dir:
                return []
            self.offline_dirs.add(directory)
            gone = [(tp, lg) for tp, lg in self._logs.items() if os.path.dirname(lg.dir) == directory]
            futures = [
                (tp, lg) for tp, lg in self._future_logs.items() if os.path.dirname(lg.dir) == directory
            ]
            for tp, _ in gone:
                del self._logs[tp]
                self.offline_partitions.add(tp)
            for tp, _ in futures:
                del self._future_logs[tp]
            self._logs_per_dir[directory] = 0
            self._pending_dir_deletes = [
                item for item in self._pending_dir_deletes if os.path.dirname(item[1]) != directory
            ]
            replaced = [
                self._closing_with_dir.pop(path)
                for path in list(self._closing_with_dir)
                if os.path.dirname(path) == directory
            ]
            fd = self._dir_lock_fds.pop(directory, None)
            if fd is not None:
                self._lock_fds.remove(fd)
        for lg in [lg for _, lg in gone + futures] + replaced:
            try:
                lg.close_handlers()
            except Exception:  # the disk failed: release what can be released
                log.debug("closing %s after its dir failed", lg.name, exc_info=True)
            with contextlib.suppress(Exception):
                self.cleaner.remove_checkpoint(lg)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        log.error(
            "Log dir %s is offline: %d logs (%s) and %d future logs dropped; %d log dirs remain online",
            directory,
            len(gone),
            ", ".join(lg.name for _, lg in gone[:5]) + (" ..." if len(gone) > 5 else ""),
            len(futures),
            len(self.live_log_dirs),
        )
        return [tp for tp, _ in gone]

    def dir_of(self, lg: Log) -> str:
        return os.path.dirname(lg.dir)

    def logs_by_dir(self) -> dict[str, list[Log]]:
        """Each log dir's current and future logs (offline dirs: none)."""
        found: dict[str, list[Log]] = {d: [] for d in self.log_dirs}
        with self._lock:
            for lg in (*self._logs.values(), *self._future_logs.values()):
                found.setdefault(os.path.dirname(lg.dir), []).append(lg)
        return found

    def is_future(self, lg: Log) -> bool:
        return self._future_logs.get((lg.topic, lg.partition)) is lg

    def get_future_log(self, topic: str, partition: int) -> Log | None:
        return self._future_logs.get((topic, partition))

    def set_preferred_dir(self, topic: str, partition: int, directory: str) -> None:
        """Where the partition's log goes when it is created (AlterReplicaLogDirs before LeaderAndIsr)."""
        with self._lock:
            if (topic, partition) not in self._logs:
                self._preferred_dirs[(topic, partition)] = os.path.abspath(directory)

    def create_future_log(self, topic: str, partition: int, directory: str) -> Log | None:
        """The future log of a replica moving to ``directory``, created there if missing, starting at the
        current log's start offset. None when the current log is already in ``directory`` (nothing to
        move). Raises KafkaStorageError when the disk refuses, or when a future log exists in another
        dir (the caller abandons it first)."""
        directory = self.check_log_dir(directory)
        tp = (topic, partition)
        with self._lock:
            current = self._logs.get(tp)
            if current is None:
                raise KafkaStorageError(f"No log of {topic}-{partition} on this broker")
            existing = self._future_logs.get(tp)
            if existing is not None:
                if os.path.dirname(existing.dir) == directory:
                    return existing
                raise KafkaStorageError(
                    f"The future log of {topic}-{partition} is in {os.path.dirname(existing.dir)}"
                )
            if os.path.dirname(current.dir) == directory:
                return None
            path = os.path.join(directory, f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}")
            try:
                future = Log(
                    path,
                    self.config_for(topic),
                    had_clean_shutdown=True,
                    producer_id_expiration_ms=self._producer_id_expiration_ms,
                    time_ms=self._time_ms,
                    transaction_verification_enabled=False,  # it copies: batches are checked already
                )
                if current.log_start_offset > 0:
                    future.truncate_fully_and_start_at(current.log_start_offset)
            except OSError as e:
                shutil.rmtree(path, ignore_errors=True)
                self.maybe_handle_io_error(
                    directory, f"Error creating the future log of {topic}-{partition}", e
                )
                raise KafkaStorageError(
                    f"Error while creating future log for {topic}-{partition}: {e}"
                ) from e
            self._future_logs[tp] = future
            self._logs_per_dir[directory] += 1
            log.info("Created future log of %s-%d in %s", topic, partition, directory)
            return future

    def abandon_future_log(self, topic: str, partition: int) -> None:
        """Drops a move in progress: the future log is closed and its directory removed."""
        with self._lock:
            future = self._future_logs.pop((topic, partition), None)
            if future is not None:
                self._logs_per_dir[os.path.dirname(future.dir)] -= 1
        if future is None:
            return
        with contextlib.suppress(Exception):
            future.close_handlers()
        shutil.rmtree(future.dir, ignore_errors=True)
        log.info("Abandoned the future log of %s-%d in %s", topic, partition, os.path.dirname(future.dir))

    def replace_current_with_future_log(self, topic: str, partition: int) -> tuple[Log, Log]:
        """Swaps in a caught-up future log (Kafka's replaceCurrentWithFutureLog): the future log is closed,
        its directory renamed `<topic>-<partition>` and opened again as the current log (with the current
        log's high watermark); the old current log is renamed `-delete` and removed after
        file.delete.delay.ms. The caller makes sure nothing appends meanwhile (it runs on the event
        loop, where appends run). Returns (old current, new current)."""
        tp = (topic, partition)
        with self._lock:
            future = self._future_logs[tp]
            current = self._logs[tp]
            if future.log_end_offset != current.log_end_offset:
                raise ValueError(f"the future log of {topic}-{partition} has not caught up")
            high_watermark = current.high_watermark
            recovery_point = future.log_end_offset
            log_start = future.log_start_offset
            future.close()
            target = os.path.join(os.path.dirname(future.dir), f"{topic}-{partition}")
            os.rename(future.dir, target)
            del self._future_logs[tp]
            swapped = Log(
                target,
                self.config_for(topic),
                log_start_offset=log_start,
                recovery_point=recovery_point,
                had_clean_shutdown=True,
                producer_id_expiration_ms=self._producer_id_expiration_ms,
                time_ms=self._time_ms,
                transaction_verification_enabled=self._transaction_verification_enabled,
            )
            swapped.update_high_watermark(high_watermark)
            # Epochs the copy could not see (a leader epoch begun without a batch yet).
            for entry in current.leader_epoch_cache.entries:
                latest = swapped.latest_epoch
                if latest is None or entry.epoch > latest:
                    swapped.leader_epoch_cache.assign(entry.epoch, entry.start_offset)
            self._logs[tp] = swapped
            self._logs_per_dir[os.path.dirname(current.dir)] -= 1
            self.cleaner.remove_checkpoint(current)
            doomed = f"{current.dir}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
            os.rename(current.dir, doomed)
            # Its descriptors stay open until the directory goes: a fetch response read before the swap
            # may still be sending from them (zero copy).
            self._closing_with_dir[doomed] = current
            self._pending_dir_deletes.append((self._time_ms() + current.config.file_delete_delay_ms, doomed))
        log.info(
            "The current replica of %s-%d is replaced with the future replica: %s -> %s",
            topic,
            partition,
            os.path.dirname(current.dir),
            os.path.dirname(target),
        )
        return current, swapped

    # --- logs ----------------------------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        with self._lock:
            return list(self._logs.values())

    def logs_in_dir(self, directory: str) -> list[Log]:
        directory = os.path.abspath(directory)
        return [lg for lg in self.all_logs() if os.path.dirname(lg.dir) == directory]

    def get_or_create_log(
        self, topic: str, partition: int, config: LogConfig | None = None, *, is_new: bool = True
    ) -> Log:
        """The partition's log, created in the log dir with the fewest partitions if missing. Creating
        one is blocking I/O (a directory, the segment and its preallocated indexes): the broker runs it
        off the event loop. Raises KafkaStorageError when the disk refuses, and (as Kafka) when a
        replica that is not new (LeaderAndIsr's is_new) has no log while a log dir is offline: its
        log may be on that dir, and an empty one elsewhere would lose its records."""
        with self._lock:
            existing = self._logs.get((topic, partition))
            if existing is not None:
                return existing
            if (topic, partition) in self.offline_partitions:
                raise KafkaStorageError(f"Can not create log for {topic}-{partition}: its log dir is offline")
            if not is_new and self.offline_dirs:
                raise KafkaStorageError(
                    f"Can not create log for {topic}-{partition} because log directories "
                    f"{','.join(sorted(self.offline_dirs))} are offline"
                )
            live = self.live_log_dirs
            if not live:
                raise KafkaStorageError(f"Can not create log for {topic}-{partition}: no log dir is online")
            if config is not None:
                self._topic_configs[topic] = config
            directory = self._preferred_dirs.pop((topic, partition), None) or ""
            if directory not in live:
                directory = min(live, key=self._logs_per_dir.__getitem__)
            path = os.path.join(directory, f"{topic}-{partition}")
            existed = os.path.isdir(path)
            try:
                created = Log(
                    path,
                    self.config_for(topic),
                    had_clean_shutdown=True,
                    producer_id_expiration_ms=self._producer_id_expiration_ms,
                    time_ms=self._time_ms,
                    transaction_verification_enabled=self._transaction_verification_enabled,
                )
            except OSError as e:
                if not existed:  # a half-made directory would be loaded as a log at the next start
                    with contextlib.suppress(OSError):
                        _remove_new_log_dir(path)
                if e.errno not in _PROCESS_LIMITS:  # the disk refused (no space, I/O error): as Kafka
                    self.maybe_handle_io_error(
                        directory, f"Error while creating log for {topic}-{partition}", e
                    )
                raise KafkaStorageError(
                    f"Error while creating log for {topic}-{partition} in {directory}: {e}"
                ) from e
            self._logs[(topic, partition)] = created
            self._logs_per_dir[directory] += 1
            # Per log at DEBUG: the broker logs one line per LeaderAndIsr, however many logs it creates.
            log.debug("Created log for partition %s-%d in %s", topic, partition, directory)
            return created

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """A topic config change (AlterConfigs, /config/topics) applies to its logs at once."""
        with self._lock:
            self._topic_configs[topic] = config
            for (t, _), lg in (*self._logs.items(), *self._future_logs.items()):
                if t == topic:
                    lg.update_config(config)

    def async_delete(self, topic: str, partition: int) -> str | None:
        """Removes the log: its directory is renamed `<topic>-<partition>.<uuid>-delete` now and removed
        after file.delete.delay.ms. Returns the renamed path (None if there was no such log)."""
        self.abandon_future_log(topic, partition)
        with self._lock:
            removed = self._logs.pop((topic, partition), None)
            if removed is not None:
                self._logs_per_dir[os.path.dirname(removed.dir)] -= 1
            self.offline_partitions.discard((topic, partition))
        if removed is None:
            return None
        removed.close_handlers()
        self.cleaner.remove_checkpoint(removed)
        target = f"{removed.dir}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        try:
            os.rename(removed.dir, target)
        except OSError as e:
            self.maybe_handle_io_error(removed.dir, f"Error deleting the log of {topic}-{partition}", e)
            return None
        with self._lock:
            self._pending_dir_deletes.append((self._time_ms() + removed.config.file_delete_delay_ms, target))
        return target

    def delete_pending_dirs(self) -> int:
        """Removes deleted partitions' directories whose file.delete.delay.ms has passed."""
        now = self._time_ms()
        with self._lock:
            due = [item for item in self._pending_dir_deletes if item[0] <= now]
            self._pending_dir_deletes = [item for item in self._pending_dir_deletes if item not in due]
        for _, path in due:
            replaced = self._closing_with_dir.pop(path, None)
            if replaced is not None:
                with contextlib.suppress(Exception):
                    replaced.close_handlers()
            shutil.rmtree(path, ignore_errors=True)
        return len(due)

    # --- periodic tasks ------------------------------------------------------------------------------

    def cleanup_logs(self) -> int:
        """Retention of every log, then removal of files and directories whose delete delay passed;
        returns the number of segments deleted by retention."""
        deleted = 0
        for lg in self.all_logs():
            if not lg.closed:
                try:
                    deleted += lg.delete_old_segments()
                    lg.delete_pending_files()
                except OSError as e:
                    self.maybe_handle_io_error(lg.dir, f"Error while deleting segments of {lg.name}", e)
        self.delete_pending_dirs()
        return deleted

    def flush_dirty_logs(self) -> int:
        """fsyncs segments rolled since the last flush, and whole logs past flush.ms; returns how many
        logs were flushed. Blocks on the disk: call it off the event loop."""
        flushed = 0
        for lg in self.all_logs():
            try:
                flushed += 1 if not lg.closed and lg.flush_if_due() else 0
            except OSError as e:
                self.maybe_handle_io_error(lg.dir, f"Error while flushing log {lg.name}", e)
        return flushed

    def _write_checkpoint(self, name: str, value: Callable[[Log], int]) -> None:
        for directory in self.live_log_dirs:
            offsets = {(lg.topic, lg.partition): value(lg) for lg in self.logs_in_dir(directory)}
            try:
                OffsetCheckpointFile(os.path.join(directory, name)).write(offsets)
            except OSError as e:
                self.maybe_handle_io_error(directory, f"Error while writing {name}", e)

    def checkpoint_recovery_offsets(self) -> None:
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset)

    def checkpoint_high_watermarks(self) -> None:
        self._write_checkpoint(REPLICATION_CHECKPOINT, lambda lg: lg.high_watermark)

    def remove_expired_producers(self) -> int:
        return sum(len(lg.remove_expired_producers()) for lg in self.all_logs() if not lg.closed)

    def start_cleaner(self, num_threads: int = 1) -> None:
        self.cleaner.start(num_threads)

    # --- shutdown ------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stops the cleaner, flushes and closes every log, writes the checkpoints and the clean
        shutdown marker of each dir, and releases the dir locks."""
        self.cleaner.shutdown()
        with self._lock:
            futures = list(self._future_logs)
        for topic, partition in futures:  # an unfinished move is dropped (see _load_logs)
            self.abandon_future_log(topic, partition)
        for lg in self.all_logs():
            try:
                lg.flush()
                lg.close()
            except OSError as e:
                self.maybe_handle_io_error(lg.dir, f"Error while closing log {lg.name}", e)
        self.checkpoint_recovery_offsets()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        self.delete_pending_dirs()
        for directory in self.live_log_dirs:
            try:
                with open(os.path.join(directory, CLEAN_SHUTDOWN_FILE), "wb") as f:
                    os.fsync(f.fileno())
            except OSError as e:
                log.error("Cannot write the clean shutdown marker in %s: %s", directory, e)
        for fd in self._lock_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._lock_fds.clear()
        self._dir_lock_fds.clear()
