"""Truncation (follower divergence) and full truncation, with epochs, producer state and indexes."""

from tests.storage.helpers import batch, read_all


def test_truncate_to_within_and_across_segments(make_log):
    log = make_log({"segment.bytes": 400, "index.interval.bytes": 1})
    for i in range(30):
        log.append_as_leader(batch(1, value_size=50), leader_epoch=i // 10)
    log.update_high_watermark(30)
    assert log.truncate_to(15)
    assert log.log_end_offset == 15
    assert [r.offset for r in read_all(log)] == list(range(15))
    assert all(s.base_offset <= 15 for s in log.segments)
    assert log.high_watermark == 15
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 10)]
    for segment in log.segments:
        index = segment.offset_index
        assert index.entries == 0 or index.last_offset < 15
    assert not log.truncate_to(20)
    info = log.append_as_leader(batch(1), leader_epoch=3)
    assert info.first_offset == 15


def test_truncate_at_segment_base(make_log):
    log = make_log({"segment.bytes": 300})
    for _ in range(12):
        log.append_as_leader(batch(1, value_size=50), leader_epoch=0)
    base = log.segments[2].base_offset
    log.truncate_to(base)
    assert log.log_end_offset == base
    log.append_as_leader(batch(1), leader_epoch=0)
    assert [r.offset for r in read_all(log)] == list(range(base + 1))


def test_truncate_restores_producer_state(make_log):
    log = make_log({"segment.bytes": 300})
    for seq in range(8):
        log.append_as_leader(
            batch(1, value_size=50, producer_id=3, producer_epoch=0, base_sequence=seq), leader_epoch=0
        )
    log.truncate_to(5)
    assert log.producer_state.last_entry(3).last_seq == 4
    log.append_as_leader(batch(1, producer_id=3, producer_epoch=0, base_sequence=5), leader_epoch=0)


def test_truncate_fully_and_start_at(make_log):
    log = make_log({"segment.bytes": 300})
    for _ in range(10):
        log.append_as_leader(batch(1, value_size=50), leader_epoch=2)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset, log.num_segments) == (1000, 1000, 1)
    assert log.active_segment.base_offset == 1000
    assert log.leader_epoch_cache.entries == []
    info = log.append_as_leader(batch(1), leader_epoch=3)
    assert info.first_offset == 1000
    log.close()
    again = type(log)(log.dir, log.config, log_start_offset=1000, had_clean_shutdown=True)
    assert (again.log_start_offset, again.log_end_offset) == (1000, 1001)
    again.close()


def test_truncate_below_log_start(make_log):
    log = make_log({"segment.bytes": 300})
    for _ in range(10):
        log.append_as_leader(batch(1, value_size=50), leader_epoch=0)
    log.update_high_watermark(10)
    start = log.segments[1].base_offset
    log.delete_records_before(start)
    log.truncate_to(start - 1)
    assert log.log_end_offset == start - 1 == log.log_start_offset
