"""LeaderEpochFileCache: assign, truncation from both ends, end_offset_for (OffsetsForLeaderEpoch)."""

from storage.checkpoints import EpochEntry
from storage.leader_epoch import LeaderEpochFileCache


def test_assign_ignores_repeats_and_persists(tmp_path):
    cache = LeaderEpochFileCache(str(tmp_path))
    cache.assign(0, 0)
    cache.assign(0, 5)
    cache.assign(2, 10)
    assert cache.entries == [EpochEntry(0, 0), EpochEntry(2, 10)]
    assert LeaderEpochFileCache(str(tmp_path)).entries == cache.entries
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n2 10\n"


def test_assign_removes_non_monotonic_entries(tmp_path):
    cache = LeaderEpochFileCache(str(tmp_path))
    cache.assign(1, 0)
    cache.assign(2, 10)
    cache.assign(3, 20)
    cache.assign(4, 15)  # a later epoch starting earlier: entries at/after 15 go
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(4, 15)]
    cache.assign(4, 12)  # same epoch, earlier start: moved back
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(4, 12)]


def test_end_offset_for(tmp_path):
    cache = LeaderEpochFileCache(str(tmp_path))
    assert cache.end_offset_for(0, 100) == (-1, -1)
    cache.assign(1, 0)
    cache.assign(3, 10)
    cache.assign(5, 30)
    assert cache.end_offset_for(5, 100) == (5, 100)  # latest epoch: the log end
    assert cache.end_offset_for(3, 100) == (3, 30)
    assert cache.end_offset_for(4, 100) == (3, 30)  # unknown epoch in between: floor epoch, next start
    assert cache.end_offset_for(0, 100) == (0, 0)  # below every epoch
    assert cache.end_offset_for(6, 100) == (-1, -1)  # above every epoch
    assert cache.end_offset_for(-1, 100) == (-1, -1)


def test_truncate_from_end_and_start(tmp_path):
    cache = LeaderEpochFileCache(str(tmp_path))
    for epoch, start in [(0, 0), (1, 10), (2, 20), (3, 30)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(20)
    assert cache.entries == [EpochEntry(0, 0), EpochEntry(1, 10)]
    cache.truncate_from_start(15)
    assert cache.entries == [EpochEntry(1, 15)]
    assert cache.epoch_for_offset(16) == 1
    assert cache.epoch_for_offset(3) is None
    assert LeaderEpochFileCache(str(tmp_path)).entries == [EpochEntry(1, 15)]
    cache.clear_and_flush()
    assert LeaderEpochFileCache(str(tmp_path)).entries == []
