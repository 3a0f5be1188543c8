"""JBOD in the LogManager: partitions spread over log dirs, a log dir taken offline after an I/O error (its
logs dropped, its partitions never re-created elsewhere), dirs unusable at startup, and replicas moved
between dirs through a future log swapped in when caught up."""

import os
import types

import pytest

from broker.log_dirs import ReplicaAlterLogDirsManager
from protocol.errors import ErrorCode
from storage.config import LogConfig
from storage.errors import KafkaStorageError
from storage.log import parse_topic_partition
from storage.log_manager import DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, LogDirNotFoundError, LogManager
from tests.storage.helpers import batch


@pytest.fixture
def dirs(tmp_path):
    return [str(tmp_path / "d1"), str(tmp_path / "d2")]


def manager(dirs, clock, **kwargs):
    return LogManager(dirs, LogConfig.from_props({"segment.bytes": 1000}), time_ms=clock, **kwargs)


def test_parse_topic_partition_of_future_and_deleted_dirs():
    uid = "0123456789abcdef0123456789abcdef"
    assert parse_topic_partition(f"my-topic-3.{uid}-future") == ("my-topic", 3)
    assert parse_topic_partition(f"my-topic-3.{uid}-delete") == ("my-topic", 3)
    assert parse_topic_partition("my-topic-3") == ("my-topic", 3)


def test_new_partitions_spread_over_the_live_dirs(dirs, clock):
    lm = manager(dirs, clock)
    placed = [os.path.dirname(lm.get_or_create_log("t", p).dir) for p in range(4)]
    assert placed == [dirs[0], dirs[1], dirs[0], dirs[1]]
    lm.handle_log_dir_failure(dirs[0])
    assert lm.live_log_dirs == [dirs[1]]
    assert os.path.dirname(lm.get_or_create_log("u", 0).dir) == dirs[1]
    lm.shutdown()


def test_a_failed_dir_drops_its_logs_and_their_partitions_stay_offline(dirs, clock):
    lm = manager(dirs, clock)
    a = lm.get_or_create_log("t", 0)
    b = lm.get_or_create_log("t", 1)
    a.append_as_leader(batch(3), leader_epoch=0)
    b.append_as_leader(batch(3), leader_epoch=0)
    assert lm.handle_log_dir_failure(dirs[0]) == [("t", 0)]
    assert lm.handle_log_dir_failure(dirs[0]) == []  # once
    assert lm.get_log("t", 0) is None and a.closed
    assert lm.offline_partitions == {("t", 0)}
    # Its data is on the failed disk: a LeaderAndIsr must not make an empty log elsewhere.
    with pytest.raises(KafkaStorageError):
        lm.get_or_create_log("t", 0)
    assert lm.get_log("t", 1) is b
    lm.checkpoint_high_watermarks()  # the offline dir is skipped
    with pytest.raises(KafkaStorageError) as offline:
        lm.check_log_dir(dirs[0])
    assert offline.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(LogDirNotFoundError) as unknown:
        lm.check_log_dir("/nowhere")
    assert unknown.value.error_code == ErrorCode.LOG_DIR_NOT_FOUND
    lm.shutdown()
    assert not os.path.exists(os.path.join(dirs[0], ".kafka_cleanshutdown"))
    assert os.path.exists(os.path.join(dirs[1], ".kafka_cleanshutdown"))


def test_an_io_error_in_a_checkpoint_reports_the_dir(dirs, clock, tmp_path):
    reported = []
    lm = manager(dirs, clock, on_dir_failure=lambda d, msg, e: reported.append((d, type(e))))
    lm.get_or_create_log("t", 0)
    lm.get_or_create_log("t", 1)
    os.rename(dirs[0], str(tmp_path / "gone"))
    with open(dirs[0], "w") as f:  # the dir is now a file: every new file in it fails (ENOTDIR)
        f.write("x")
    lm.checkpoint_high_watermarks()
    assert [d for d, _ in reported] == [dirs[0]]
    assert issubclass(reported[0][1], OSError)


def test_without_a_callback_an_io_error_takes_the_dir_offline(dirs, clock, tmp_path):
    lm = manager(dirs, clock)
    lg = lm.get_or_create_log("t", 0)
    lm.maybe_handle_io_error(lg.dir, "append failed", OSError(5, "EIO"))
    assert lm.offline_dirs == {dirs[0]} and lm.offline_partitions == {("t", 0)}


def test_an_unusable_dir_at_startup_starts_offline(dirs, clock, tmp_path):
    with open(dirs[1], "w") as f:
        f.write("not a dir")
    lm = manager(dirs, clock)
    assert lm.offline_dirs == {dirs[1]}
    assert os.path.dirname(lm.get_or_create_log("t", 0).dir) == dirs[0]
    assert os.path.dirname(lm.get_or_create_log("t", 1).dir) == dirs[0]
    lm.shutdown()
    os.rename(dirs[0], dirs[0] + ".x")
    with open(dirs[0], "w") as f:
        f.write("not a dir either")
    with pytest.raises(KafkaStorageError):
        manager(dirs, clock)


def test_alter_log_dir_creates_a_named_future_log(dirs, clock):
    lm = manager(dirs, clock)
    current = lm.get_or_create_log("t", 0)
    assert lm.create_future_log("t", 0, dirs[0]) is None  # already there
    future = lm.create_future_log("t", 0, dirs[1])
    assert future is not None and lm.is_future(future) and not lm.is_future(current)
    name = os.path.basename(future.dir)
    assert name.startswith("t-0.") and name.endswith(FUTURE_DIR_SUFFIX)
    assert os.path.dirname(future.dir) == dirs[1]
    assert lm.create_future_log("t", 0, dirs[1]) is future
    assert {d: [lg.name for lg in logs] for d, logs in lm.logs_by_dir().items()} == {
        dirs[0]: ["t-0"],
        dirs[1]: ["t-0"],
    }
    lm.abandon_future_log("t", 0)
    assert not os.path.exists(future.dir) and lm.get_future_log("t", 0) is None
    lm.shutdown()


def _partition_of(log_manager):
    return types.SimpleNamespace(
        get_partition=lambda topic, index: types.SimpleNamespace(log=log_manager.get_log(topic, index))
    )


def test_a_moved_replica_holds_every_record_and_survives_a_restart(dirs, clock):
    lm = manager(dirs, clock)
    current = lm.get_or_create_log("t", 0)
    for i in range(40):  # several segments
        current.append_as_leader(batch(2, value_size=40), leader_epoch=i // 10)
    current.update_high_watermark(current.log_end_offset)
    before = [bytes(current.read(o, 1 << 20).records) for o in (0,)]
    future = lm.create_future_log("t", 0, dirs[1])
    holder = types.SimpleNamespace(log=current)
    rm = types.SimpleNamespace(get_partition=lambda topic, index: holder)
    mover = ReplicaAlterLogDirsManager(rm, lm, chunk_bytes=300)  # type: ignore[arg-type]
    steps = 0
    while not mover.copy_step(("t", 0), lm.get_log("t", 0), future):
        steps += 1
        if steps == 3:  # appends go on during the copy
            current.append_as_leader(batch(1), leader_epoch=4)
        assert steps < 1000
    swapped = lm.get_log("t", 0)
    assert holder.log is swapped and swapped is not current
    assert os.path.dirname(swapped.dir) == dirs[1] and os.path.basename(swapped.dir) == "t-0"
    assert swapped.log_end_offset == 81 and swapped.high_watermark == 80
    assert swapped.latest_epoch == 4
    assert bytes(swapped.read(0, 1 << 20).records)[: len(before[0])] == before[0]
    assert next(n for n in os.listdir(dirs[0]) if n.startswith("t-0")).endswith(DELETE_DIR_SUFFIX)
    lm.shutdown()
    again = manager(dirs, clock)
    reopened = again.get_log("t", 0)
    assert os.path.dirname(reopened.dir) == dirs[1] and reopened.log_end_offset == 81
    again.shutdown()


def test_the_copy_follows_a_truncation_of_the_current_log(dirs, clock):
    lm = manager(dirs, clock)
    current = lm.get_or_create_log("t", 0)
    for _ in range(10):
        current.append_as_leader(batch(1), leader_epoch=0)
    future = lm.create_future_log("t", 0, dirs[1])
    holder = types.SimpleNamespace(log=None)  # no partition serves it yet: no swap
    rm = types.SimpleNamespace(get_partition=lambda topic, index: holder)
    mover = ReplicaAlterLogDirsManager(rm, lm)  # type: ignore[arg-type]
    assert not mover.copy_step(("t", 0), current, future)
    assert future.log_end_offset == 10
    current.truncate_to(6)
    for _ in range(6):
        current.append_as_follower(_with_epoch(batch(1), base_offset=current.log_end_offset, epoch=1))
    while future.log_end_offset != current.log_end_offset or future.latest_epoch != 1:
        mover.copy_step(("t", 0), current, future)
    assert future.end_offset_for_epoch(0) == (0, 6)
    lm.shutdown()


def _with_epoch(buf: bytearray, base_offset: int, epoch: int) -> bytearray:
    from protocol import record_batch as rb

    out = bytearray(
        rb.encode_batch([rb.Record(base_offset, 1_700_000_000_000, None, b"x")], base_offset=base_offset)
    )
    out[12:16] = epoch.to_bytes(4, "big")  # partitionLeaderEpoch, then the CRC (over what follows) stays
    return out


def test_an_unfinished_move_is_dropped_at_startup(dirs, clock):
    lm = manager(dirs, clock)
    lm.get_or_create_log("t", 0).append_as_leader(batch(3), leader_epoch=0)
    future = lm.create_future_log("t", 0, dirs[1])
    path = future.dir
    lm.shutdown()  # drops it too; make one as a crash would leave it
    os.makedirs(path)
    again = manager(dirs, clock)
    assert not os.path.exists(path)
    assert again.get_log("t", 0).log_end_offset == 3
    again.shutdown()


def test_a_preferred_dir_places_a_new_partition(dirs, clock):
    lm = manager(dirs, clock)
    lm.set_preferred_dir("t", 0, dirs[1])
    assert os.path.dirname(lm.get_or_create_log("t", 0).dir) == dirs[1]
    lm.shutdown()


def test_with_a_dir_offline_only_new_replicas_get_a_log(dirs, clock):
    with open(dirs[1], "w") as f:  # offline from the start: what it held is unknown
        f.write("not a dir")
    lm = manager(dirs, clock)
    with pytest.raises(KafkaStorageError):
        lm.get_or_create_log("t", 0, is_new=False)  # its log may be on the offline dir
    assert os.path.dirname(lm.get_or_create_log("t", 0, is_new=True).dir) == dirs[0]
    assert lm.get_or_create_log("t", 0, is_new=False) is lm.get_log("t", 0)  # hosted: found
    lm.shutdown()


def test_a_log_the_disk_refuses_to_create_takes_its_dir_offline(dirs, clock, tmp_path):
    lm = manager(dirs, clock)
    os.rename(dirs[0], str(tmp_path / "gone"))
    with open(dirs[0], "w") as f:
        f.write("not a dir")
    with pytest.raises(KafkaStorageError):
        lm.get_or_create_log("t", 0)
    assert lm.offline_dirs == {dirs[0]}
    assert os.path.dirname(lm.get_or_create_log("t", 0).dir) == dirs[1]  # not hosted before: new
    lm.shutdown()


def test_a_dir_whose_logs_cannot_be_read_at_startup_starts_offline(dirs, clock):
    lm = manager(dirs, clock)
    lm.get_or_create_log("t", 0).append_as_leader(batch(3), leader_epoch=0)  # in dirs[0]
    lm.get_or_create_log("t", 1).append_as_leader(batch(3), leader_epoch=0)  # in dirs[1]
    lm.shutdown()
    os.makedirs(os.path.join(dirs[0], "u-0", "00000000000000000000.log"))  # unreadable: a directory
    again = manager(dirs, clock)
    assert again.offline_dirs == {dirs[0]}
    assert again.get_log("t", 0) is None and again.get_log("t", 1).log_end_offset == 3
    with pytest.raises(KafkaStorageError):
        again.get_or_create_log("t", 0, is_new=False)
    again.shutdown()
