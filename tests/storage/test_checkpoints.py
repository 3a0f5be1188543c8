"""Checkpoint files: Kafka's text format, atomic replacement, errors naming file and line."""

import pytest

from storage.checkpoints import EpochEntry, LeaderEpochCheckpointFile, OffsetCheckpointFile
from storage.errors import CorruptCheckpointError


def test_offset_checkpoint_format_and_round_trip(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    f = OffsetCheckpointFile(str(path))
    f.write({("b-topic", 1): 42, ("a-topic", 0): 7})
    assert path.read_text() == "0\n2\na-topic 0 7\nb-topic 1 42\n"
    assert f.read() == {("a-topic", 0): 7, ("b-topic", 1): 42}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_missing_or_empty_checkpoint_is_empty(tmp_path):
    assert OffsetCheckpointFile(str(tmp_path / "nope")).read() == {}
    (tmp_path / "empty").write_text("")
    assert OffsetCheckpointFile(str(tmp_path / "empty")).read() == {}


def test_leader_epoch_checkpoint_format(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    f = LeaderEpochCheckpointFile(str(path))
    f.write([EpochEntry(0, 0), EpochEntry(3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert f.read() == [EpochEntry(0, 0), EpochEntry(3, 120)]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("1\n0\n", "unrecognized version 1"),
        ("0\n2\nt 0 1\n", "expected 2 entries"),
        ("0\n1\nt x 1\n", "line 3"),
        ("zero\n", "malformed version"),
    ],
)
def test_corrupt_checkpoints_are_reported(tmp_path, text, fragment):
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError, match=fragment):
        OffsetCheckpointFile(str(path)).read()


def test_rewrite_replaces_whole_file(tmp_path):
    f = OffsetCheckpointFile(str(tmp_path / "cp"))
    f.write({("t", p): p for p in range(100)})
    f.write({("t", 0): 1})
    assert f.read() == {("t", 0): 1}
