"""LogManager: every partition log of a broker across its log.dirs (Kafka's LogManager).

Each log dir holds `<topic>-<partition>` directories, a `.lock` (flock, so two brokers cannot share a
dir), the checkpoints recovery-point-offset-checkpoint, log-start-offset-checkpoint,
replication-offset-checkpoint (high watermarks) and cleaner-offset-checkpoint, and after a clean
shutdown the `.kafka_cleanshutdown` marker, which lets the next start skip recovery. New partitions go
to the dir holding the fewest (counted as logs come and go, so a creation costs the same whatever the
number of logs). A log that cannot be created (no space, no descriptors left) raises KafkaStorageError
and leaves no directory behind. Deleting a log renames its directory `<topic>-<partition>.<uuid>-delete`
and removes it after file.delete.delay.ms.

The broker schedules the periodic work by calling plain methods: cleanup_logs (retention,
log.retention.check.interval.ms), flush_dirty_logs (fsync, may block: run it off the event loop),
checkpoint_* (log.flush.offset.checkpoint.interval.ms and friends), remove_expired_producers, and the
cleaner (start_cleaner runs its own threads).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    OffsetCheckpointFile,
)
from storage.cleaner import LogCleaner
from storage.config import LogConfig
from storage.errors import CorruptCheckpointError, KafkaStorageError, LogDirInUseError
from storage.log import DEFAULT_PRODUCER_ID_EXPIRATION_MS, Log, now_ms, parse_topic_partition
from storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, segment_path

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"

TopicPartition = tuple[str, int]


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
        self._lock_fds: list[int] = []
        self.cleaner = LogCleaner(
            self.all_logs,
            dedupe_buffer_size=cleaner_dedupe_buffer_size,
            backoff_ms=cleaner_backoff_ms,
            time_ms=time_ms,
        )
        for directory in self.log_dirs:
            os.makedirs(directory, exist_ok=True)
            self._lock_fds.append(self._lock_dir(directory))
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
        jobs = []
        for directory in self.log_dirs:
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
                    log.warning("Ignoring future replica directory %s", path)
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
        workers = max(1, threads_per_dir * len(self.log_dirs))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="log-recovery") as pool:
            loaded = list(pool.map(lambda job: (job, self._open_log(*job[1:5])), jobs))
        for (tp, path, _, _, _, high_watermark), opened in loaded:
            if tp in self._logs:
                raise ValueError(
                    f"Duplicate log directories for {tp[0]}-{tp[1]}: {self._logs[tp].dir} and {path}"
                )
            opened.update_high_watermark(high_watermark)
            self._logs[tp] = opened
            self._logs_per_dir[os.path.dirname(path)] += 1
        for directory in self.log_dirs:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, CLEAN_SHUTDOWN_FILE))

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

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The partition's log, created in the log dir with the fewest partitions if missing. Creating
        one is blocking I/O (a directory, the segment and its preallocated indexes): the broker runs it
        off the event loop. Raises KafkaStorageError when the disk refuses."""
        with self._lock:
            existing = self._logs.get((topic, partition))
            if existing is not None:
                return existing
            if config is not None:
                self._topic_configs[topic] = config
            directory = min(self.log_dirs, key=self._logs_per_dir.__getitem__)
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
                    _remove_new_log_dir(path)
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
            for (t, _), lg in self._logs.items():
                if t == topic:
                    lg.update_config(config)

    def async_delete(self, topic: str, partition: int) -> str | None:
        """Removes the log: its directory is renamed `<topic>-<partition>.<uuid>-delete` now and removed
        after file.delete.delay.ms. Returns the renamed path (None if there was no such log)."""
        with self._lock:
            removed = self._logs.pop((topic, partition), None)
            if removed is not None:
                self._logs_per_dir[os.path.dirname(removed.dir)] -= 1
        if removed is None:
            return None
        removed.close_handlers()
        self.cleaner.remove_checkpoint(removed)
        target = f"{removed.dir}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.rename(removed.dir, target)
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
            shutil.rmtree(path, ignore_errors=True)
        return len(due)

    # --- periodic tasks ------------------------------------------------------------------------------

    def cleanup_logs(self) -> int:
        """Retention of every log, then removal of files and directories whose delete delay passed;
        returns the number of segments deleted by retention."""
        deleted = 0
        for lg in self.all_logs():
            if not lg.closed:
                deleted += lg.delete_old_segments()
                lg.delete_pending_files()
        self.delete_pending_dirs()
        return deleted

    def flush_dirty_logs(self) -> int:
        """fsyncs segments rolled since the last flush, and whole logs past flush.ms; returns how many
        logs were flushed. Blocks on the disk: call it off the event loop."""
        return sum(1 for lg in self.all_logs() if not lg.closed and lg.flush_if_due())

    def _write_checkpoint(self, name: str, value: Callable[[Log], int]) -> None:
        for directory in self.log_dirs:
            offsets = {(lg.topic, lg.partition): value(lg) for lg in self.logs_in_dir(directory)}
            OffsetCheckpointFile(os.path.join(directory, name)).write(offsets)

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
        for lg in self.all_logs():
            lg.flush()
            lg.close()
        self.checkpoint_recovery_offsets()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        self.delete_pending_dirs()
        for directory in self.log_dirs:
            with open(os.path.join(directory, CLEAN_SHUTDOWN_FILE), "wb") as f:
                os.fsync(f.fileno())
        for fd in self._lock_fds:
            os.close(fd)
        self._lock_fds.clear()
