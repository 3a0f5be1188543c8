"""LogManager: layout over several log dirs, checkpoints, clean shutdown marker, deletion, periodic tasks,
the descriptors a log holds, and logs that cannot be created."""

import os

import pytest

from protocol.errors import ErrorCode
from storage.checkpoints import OffsetCheckpointFile
from storage.config import LogConfig
from storage.errors import KafkaStorageError, LogDirInUseError
from storage.log_loader import LogLoader
from storage.log_manager import LogManager
from tests.storage.helpers import batch, descriptors_limited, open_descriptors


@pytest.fixture
def dirs(tmp_path):
    return [str(tmp_path / "d1"), str(tmp_path / "d2")]


def manager(dirs, clock, **kwargs):
    return LogManager(dirs, LogConfig.from_props({"segment.bytes": 1000}), time_ms=clock, **kwargs)


def test_new_partitions_go_to_the_dir_with_fewest(dirs, clock):
    lm = manager(dirs, clock)
    logs = [lm.get_or_create_log("t", p) for p in range(4)]
    assert [os.path.dirname(lg.dir) for lg in logs] == [dirs[0], dirs[1], dirs[0], dirs[1]]
    assert os.path.basename(logs[3].dir) == "t-3"
    assert lm.get_or_create_log("t", 3) is logs[3]
    assert lm.get_log("t", 9) is None
    lm.shutdown()


def test_dir_lock(dirs, clock):
    lm = manager(dirs, clock)
    with pytest.raises(LogDirInUseError):
        manager(dirs, clock)
    lm.shutdown()
    manager(dirs, clock).shutdown()


def test_clean_shutdown_writes_checkpoints_and_marker_and_restart_skips_recovery(dirs, clock, monkeypatch):
    lm = manager(dirs, clock)
    log = lm.get_or_create_log("orders", 0)
    for _ in range(30):
        log.append_as_leader(batch(1, value_size=50), leader_epoch=1)
    log.update_high_watermark(20)
    log.delete_records_before(5)
    lm.shutdown()
    d = os.path.dirname(log.dir)
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    assert OffsetCheckpointFile(os.path.join(d, "recovery-point-offset-checkpoint")).read() == {
        ("orders", 0): 30
    }
    assert OffsetCheckpointFile(os.path.join(d, "log-start-offset-checkpoint")).read() == {("orders", 0): 5}
    assert OffsetCheckpointFile(os.path.join(d, "replication-offset-checkpoint")).read() == {
        ("orders", 0): 20
    }

    scanned = []
    monkeypatch.setattr(LogLoader, "_recover", lambda self, start, rp: scanned.append(rp))
    lm2 = manager(dirs, clock)
    assert scanned == []
    again = lm2.get_log("orders", 0)
    assert (again.log_start_offset, again.log_end_offset, again.high_watermark) == (5, 30, 20)
    assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    lm2.shutdown()


def test_unclean_start_recovers_from_the_recovery_point(dirs, clock):
    lm = manager(dirs, clock)
    log = lm.get_or_create_log("t", 0)
    for _ in range(30):
        log.append_as_leader(batch(1, value_size=50), leader_epoch=0)
    lm.flush_dirty_logs()  # flushes rolled segments: recovery point moves to the last roll
    lm.checkpoint_recovery_offsets()
    rolled_to = log.active_segment.base_offset
    assert log.recovery_point == rolled_to
    with open(log.active_segment.log_path, "ab") as f:
        f.write(b"\x00" * 100)  # torn tail
    log.close_handlers()
    for fd in lm._lock_fds:
        os.close(fd)
    lm2 = manager(dirs, clock)
    again = lm2.get_log("t", 0)
    assert again.log_end_offset == 30
    lm2.shutdown()


def test_async_delete_renames_then_removes(dirs, clock):
    lm = manager(dirs, clock)
    log = lm.get_or_create_log("gone", 0)
    log.append_as_leader(batch(1), leader_epoch=0)
    renamed = lm.async_delete("gone", 0)
    assert renamed.endswith("-delete") and ".gone-0" not in renamed
    assert os.path.basename(renamed).startswith("gone-0.")
    assert lm.get_log("gone", 0) is None and os.path.isdir(renamed)
    assert lm.delete_pending_dirs() == 0
    clock.advance(60_000)
    assert lm.cleanup_logs() == 0
    assert not os.path.exists(renamed)
    lm.shutdown()


def test_leftover_delete_dirs_are_removed_at_start(dirs, clock):
    os.makedirs(os.path.join(dirs[0], "x-0.abc-delete"))
    lm = manager(dirs, clock)
    assert not os.path.exists(os.path.join(dirs[0], "x-0.abc-delete"))
    lm.shutdown()


def test_periodic_retention_and_topic_config(dirs, clock):
    lm = manager(dirs, clock)
    log = lm.get_or_create_log("t", 0)
    for _ in range(30):
        log.append_as_leader(batch(1, value_size=50, timestamp=clock.now), leader_epoch=0)
    log.update_high_watermark(30)
    assert lm.cleanup_logs() == 0  # within the default week of retention.ms
    lm.update_topic_config("t", LogConfig.from_props({"segment.bytes": 1000, "retention.bytes": 1000}))
    assert lm.cleanup_logs() > 0
    assert log.log_start_offset > 0
    lm.checkpoint_log_start_offsets()
    lm.shutdown()


def test_topic_configs_and_cleaner_wiring(dirs, clock):
    compact = LogConfig.from_props(
        {"cleanup.policy": "compact", "segment.bytes": 500, "min.cleanable.dirty.ratio": 0.01}
    )
    lm = manager(dirs, clock, topic_configs={"c": compact})
    log = lm.get_or_create_log("c", 0)
    assert log.config.compact
    for r in range(10):
        for k in range(5):
            log.append_as_leader(batch([b"v%d" % r], keys=[b"k%d" % k]), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    assert lm.cleaner.clean_once() is not None
    lm.shutdown()


def test_a_new_log_holds_one_descriptor(dirs, clock):
    """Its segment file's, as a Kafka log's FileRecords; the indexes are mapped without one."""
    lm = manager(dirs, clock)
    before = open_descriptors(dirs)
    for p in range(50):
        lm.get_or_create_log("t", p)
    assert open_descriptors(dirs) - before == 50
    lm.shutdown()
    assert open_descriptors(dirs) < before


def test_the_dir_counts_follow_deletions(dirs, clock):
    lm = manager(dirs, clock)
    first, second = lm.get_or_create_log("t", 0), lm.get_or_create_log("t", 1)
    assert [os.path.dirname(lg.dir) for lg in (first, second)] == dirs
    lm.async_delete("t", 0)
    assert os.path.dirname(lm.get_or_create_log("t", 2).dir) == dirs[0]  # d1 became the emptiest
    lm.shutdown()
    again = manager(dirs, clock)  # counted again from the dirs at start
    assert os.path.dirname(again.get_or_create_log("t", 3).dir) == dirs[0]
    again.shutdown()


@pytest.mark.parametrize("spare", [0, 1], ids=["no descriptor", "one descriptor"])
def test_a_log_that_cannot_be_created_leaves_nothing_behind(dirs, clock, spare):
    """Out of descriptors before the segment opens, or after (its index cannot be mapped): the error
    is the broker's KAFKA_STORAGE_ERROR, nothing stays open, no directory is left for the next start,
    and creation works again once descriptors are free."""
    lm = manager(dirs[:1], clock)
    before = open_descriptors(dirs)
    with descriptors_limited(spare), pytest.raises(KafkaStorageError, match="Too many open files") as refused:
        lm.get_or_create_log("t", 0)
    assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert open_descriptors(dirs) == before
    assert not os.path.exists(os.path.join(dirs[0], "t-0")) and lm.get_log("t", 0) is None
    assert lm.get_or_create_log("t", 0).log_end_offset == 0
    lm.shutdown()
