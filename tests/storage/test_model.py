"""Property test: random appends, truncations, rolls, log-start moves and reopenings (clean and after a
simulated kill) against an in-memory model of batches; reads must agree at every step."""

import shutil
import tempfile

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol import record_batch as rb
from storage.config import LogConfig
from storage.log import Log
from tests.storage.helpers import Clock, read_all

CONFIG = LogConfig.from_props({"segment.bytes": 700, "index.interval.bytes": 150, "segment.index.bytes": 120})


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="samsa-model-")
        self.path = f"{self.dir}/m-0"
        self.clock = Clock()
        self.log = Log(self.path, CONFIG, time_ms=self.clock)
        self.batches: list[tuple[int, list[bytes]]] = []  # (base offset, values)
        self.start = 0
        self.end = 0

    def teardown(self) -> None:
        if not self.log.closed:
            self.log.close_handlers()
        shutil.rmtree(self.dir, ignore_errors=True)

    def model_records(self) -> list[tuple[int, bytes]]:
        return [
            (base + i, v)
            for base, values in self.batches
            for i, v in enumerate(values)
            if base + i >= self.start
        ]

    @rule(values=st.lists(st.binary(min_size=0, max_size=120), min_size=1, max_size=6))
    def append(self, values):
        records = [rb.Record(i, 1000 + i, None, v) for i, v in enumerate(values)]
        info = self.log.append_as_leader(bytearray(rb.encode_batch(records, base_offset=0)), leader_epoch=0)
        assert info.first_offset == self.end
        self.batches.append((self.end, values))
        self.end += len(values)

    @precondition(lambda self: self.end > 0)
    @rule(data=st.data())
    def truncate(self, data):
        target = data.draw(st.integers(min_value=0, max_value=self.end))
        self.log.truncate_to(target)
        if target >= self.end:
            return
        kept = [(b, v) for b, v in self.batches if b + len(v) - 1 < target]
        kept_end = kept[-1][0] + len(kept[-1][1]) if kept else 0
        self.start = min(self.start, target)
        self.end = max(kept_end, self.start)
        self.batches = kept if kept_end >= self.start else []

    @rule()
    def roll(self):
        self.log.roll()

    @precondition(lambda self: self.end > self.start)
    @rule(data=st.data())
    def delete_records(self, data):
        target = data.draw(st.integers(min_value=self.start, max_value=self.end))
        self.log.update_high_watermark(self.end)
        self.log.delete_records_before(target)
        self.start = target

    @rule(clean=st.booleans())
    def reopen(self, clean):
        if clean:
            self.log.close()
        else:
            self.log.close_handlers()  # a kill: nothing trimmed or snapshotted
        self.log = Log(
            self.path, CONFIG, time_ms=self.clock, log_start_offset=self.start, had_clean_shutdown=clean
        )

    @precondition(lambda self: self.end > self.start)
    @rule(data=st.data(), max_bytes=st.integers(min_value=1, max_value=2000))
    def read_at(self, data, max_bytes):
        offset = data.draw(st.integers(min_value=self.start, max_value=self.end - 1))
        fetched = self.log.read(offset, max_bytes)
        view = fetched.records
        header = rb.read_header(view, 0)
        assert header.base_offset <= offset <= header.last_offset
        assert fetched.length >= header.size  # min_one_message
        expected = dict(self.model_records())
        for pos, _ in rb.iter_headers(view):
            for r in rb.decode_records(view, pos):
                if r.offset >= self.start:
                    assert r.value == expected[r.offset]

    @invariant()
    def agrees_with_model(self):
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.start
        assert [(r.offset, r.value) for r in read_all(self.log)] == self.model_records()


LogModel.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
TestLogModel = LogModel.TestCase


@pytest.mark.slow
class TestLogModelSoak(LogModel.TestCase):
    settings = settings(max_examples=1500, stateful_step_count=40, deadline=None)
