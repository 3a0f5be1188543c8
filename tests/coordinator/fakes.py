"""A stand-in for the broker's ``__consumer_offsets`` replicas: real ``storage.Log``s in a temp dir,
led or not as a test says, with appends that can be held back (not yet replicated) or made to fail,
and transaction markers written as the WriteTxnMarkers handler writes them."""

from __future__ import annotations

import asyncio
from pathlib import Path

from coordinator.group_metadata_manager import AppendResult
from protocol import record_batch
from protocol.errors import ErrorCode
from protocol.topic import GROUP_METADATA_TOPIC
from storage.config import LogConfig
from storage.errors import StorageError
from storage.log import Log
from storage.producer_state import AppendOrigin


class FakeOffsetsTopic:
    def __init__(self, directory: Path, partitions: int) -> None:
        config = LogConfig.from_props({"cleanup.policy": "compact"})
        self.logs = {
            p: Log(str(directory / f"{GROUP_METADATA_TOPIC}-{p}"), config) for p in range(partitions)
        }
        self.leading: set[int] = set()
        self.hold = False  # acks=-1 appends wait for release() (replication not done yet)
        self.fail_with: int | None = None  # the next appends fail with this error
        self.held: list[tuple[asyncio.Future[AppendResult], AppendResult]] = []
        self.appends = 0

    def leader_log(self, partition: int) -> Log | None:
        return self.logs[partition] if partition in self.leading else None

    def append(
        self, partition: int, records: bytes, required_acks: int, timeout_ms: int
    ) -> asyncio.Future[AppendResult]:
        self.appends += 1
        future: asyncio.Future[AppendResult] = asyncio.get_running_loop().create_future()
        if self.fail_with is not None:
            future.set_result(AppendResult(self.fail_with))
        elif partition not in self.leading:
            future.set_result(AppendResult(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        else:
            log = self.logs[partition]
            try:
                info = log.append_as_leader(bytearray(records), 0, AppendOrigin.COORDINATOR)
            except StorageError as e:  # refused by the log (a fenced producer epoch): as the broker answers
                future.set_result(AppendResult(e.error_code))
                return future
            log.maybe_increment_high_watermark(log.log_end_offset)
            result = AppendResult(ErrorCode.NONE, info.first_offset)
            if self.hold and required_acks == -1:
                self.held.append((future, result))
            else:
                future.set_result(result)
        return future

    def write_marker(
        self, partition: int, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int = 0
    ) -> int:
        """Appends a transaction marker as the WriteTxnMarkers handler does (the coordinator's origin);
        returns its offset. The group coordinator is not told: a test calls its completion itself."""
        marker = record_batch.encode_control_batch(
            base_offset=0,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            commit=commit,
            coordinator_epoch=coordinator_epoch,
            timestamp=0,
        )
        log = self.logs[partition]
        info = log.append_as_leader(bytearray(marker), 0, AppendOrigin.COORDINATOR)
        log.maybe_increment_high_watermark(log.log_end_offset)
        return info.first_offset

    def release(self, reverse: bool = False) -> None:
        """Replication catches up: the held appends complete (in reverse order if asked)."""
        held, self.held = self.held, []
        for future, result in reversed(held) if reverse else held:
            future.set_result(result)

    def records(self, partition: int) -> list[record_batch.Record]:
        log = self.logs[partition]
        data = bytes(log.read(log.log_start_offset, 1 << 30).records)
        return [
            r for pos, _ in record_batch.iter_headers(data) for r in record_batch.decode_records(data, pos)
        ]

    def close(self) -> None:
        for log in self.logs.values():
            log.close()
