"""LogValidator: every check of the batches appended to a log (Kafka's LogValidator, with the request
checks of its ProduceRequest and ReplicaManager), in one place.

Three stages, each where it costs least and as Kafka orders them:

- `validate_produce`, per partition of a Produce request, before any log is looked up: no writes to
  internal topics, record batches of magic 2 only, zstd only from Produce v7. Reads a byte or a
  header per batch.
- `validate_compressed`, for a producer's compressed batches: a codec Kafka defines, and a payload that
  decompresses into the records its header declares. It decompresses, so the broker runs it on a
  worker thread, never on its event loop.
- `validate_append`, inside `Log` on every append: framing, max.message.bytes, CRC32C, the v2 rules a
  producer's batch must follow (base offset 0, a count matching the offset delta, no control batch, a
  sequence with a producer id, no trailing partial batch), segment.bytes, keys on a compacted topic and
  message.timestamp.difference.max.ms. Only batch headers are read, except for the keys of a compacted
  topic.

Failures raise the StorageError subclass whose `error_code` the broker answers with.
"""

from __future__ import annotations

import logging
import mmap
import threading

from protocol import record_batch
from protocol.compression import ZSTD, BytesLike
from protocol.record_batch import BatchHeader
from protocol.topic import is_internal
from storage.config import LONG_MAX, LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTopicError,
    MessageTooLargeError,
    RecordListTooLargeError,
    UnsupportedCompressionTypeError,
)
from storage.producer_state import AppendOrigin

log = logging.getLogger(__name__)

# Kafka's codec ids are 0 (none) to 4 (zstd); 5-7 fit in the attributes' three bits but mean nothing.
MAX_CODEC_ID = 4
# Produce v7 is the first a zstd batch may come in (KIP-110).
ZSTD_MIN_PRODUCE_VERSION = 7
# What one compressed batch may decompress to: a payload that expands beyond it (a compression bomb) is
# refused without being held in memory. Kafka has no such bound; 64 MiB is 64 of its 1 MiB batches.
MAX_DECOMPRESSED_BATCH_BYTES = 64 << 20
# Scratch pages a thread keeps resident after a check; beyond this they go back to the kernel.
_SCRATCH_KEPT_BYTES = 4 << 20
_scratch = threading.local()

ValidBatches = list[tuple[int, BatchHeader]]


class LogValidator:
    """The checks of appended batches; stateless, so its stages are static methods."""

    @staticmethod
    def validate_produce(topic: str, records: BytesLike | None, produce_version: int) -> bool:
        """The checks a Produce request's records for `topic` pass before they reach a log; True when
        they hold a compressed batch, which `validate_compressed` must check off the event loop."""
        if is_internal(topic):
            raise InvalidTopicError(f"{topic} is internal")
        if records is None or not len(records):
            return False
        if record_batch.has_legacy_entries(records):
            raise InvalidRecordError(f"Produce v{produce_version} takes record batches of magic 2 only")
        try:
            codecs = {h.compression for _, h in record_batch.iter_headers(records)}
        except record_batch.CorruptRecordError:
            return False  # broken framing: validate_append refuses it with its own message
        if produce_version < ZSTD_MIN_PRODUCE_VERSION and ZSTD in codecs:
            raise UnsupportedCompressionTypeError("zstd needs Produce v7+")
        return any(codecs)

    @staticmethod
    def validate_compressed(records: BytesLike, partition: str) -> None:
        """A producer's compressed batches: a codec Kafka defines, and a payload that decompresses into
        the records its header declares, so that no consumer is handed a batch it cannot read. Batches
        that fail their CRC are left to `validate_append`, which refuses them."""
        scratch = None
        try:
            for pos, header in record_batch.iter_headers(records):
                codec = header.compression
                if codec == 0:
                    continue
                if codec > MAX_CODEC_ID:
                    raise UnsupportedCompressionTypeError(
                        f"The batch at byte {pos} in the append to {partition} uses compression codec id "
                        f"{codec}, which is not one of Kafka's (0-{MAX_CODEC_ID})"
                    )
                if record_batch.crc_ok(records, pos, header):
                    scratch = scratch or _thread_scratch()
                    record_batch.check_records(records, pos, header, scratch.view)
        except record_batch.CorruptRecordError as e:
            raise CorruptRecordError(f"Invalid compressed batch in the append to {partition}: {e}") from None
        finally:
            if scratch is not None:
                scratch.release()

    @staticmethod
    def validate_append(
        buf: memoryview, config: LogConfig, origin: AppendOrigin, partition: str, now_ms: int
    ) -> tuple[ValidBatches, int]:
        """The (position, header) of each complete batch, and how many bytes they span. A trailing partial
        batch is dropped, as Kafka trims invalid bytes (logged as a warning only when a client sent it)."""
        batches: ValidBatches = []
        max_size = config.max_message_bytes
        client = origin is AppendOrigin.CLIENT
        crc_ok = record_batch.crc_ok
        overhead = record_batch.LOG_OVERHEAD
        add = batches.append
        valid = 0
        try:
            for pos, header in record_batch.iter_headers(buf):
                size = header.batch_length + overhead
                # The codec already refused lengths below a header (CorruptRecordError).
                if size > max_size or not crc_ok(buf, pos, header):
                    _reject_batch(pos, header, size, max_size, partition)
                if client and (
                    header.base_offset
                    or header.records_count != header.last_offset_delta + 1
                    or header.records_count <= 0
                    or header.is_control
                    or (header.producer_id >= 0 and header.base_sequence < 0)
                ):
                    _reject_client_batch(header, partition)
                add((pos, header))
                valid = pos + size
        except record_batch.CorruptRecordError as e:
            raise CorruptRecordError(f"Invalid batch in the append to {partition}: {e}") from None
        if valid < len(buf):
            if client:
                # Appending the whole batches would acknowledge records the client did not send whole.
                raise CorruptRecordError(
                    f"The records of the append to {partition} end in {len(buf) - valid} bytes that are "
                    f"not a whole batch ({len(buf)} bytes sent)"
                )
            # A fetch cut at its byte limit routinely ends in part of a batch.
            log.debug(
                "Appending only %d bytes of %d to %s: trailing partial batch", valid, len(buf), partition
            )
        if valid > config.segment_bytes:
            raise RecordListTooLargeError(
                f"Message batch size is {valid} bytes in append to partition {partition} which exceeds "
                f"the maximum configured segment size of {config.segment_bytes}"
            )
        if client and config.compact:
            _require_keys(buf, batches, partition)
        if not config.log_append_time and config.message_timestamp_difference_max_ms < LONG_MAX:
            _validate_timestamps(batches, config.message_timestamp_difference_max_ms, now_ms, partition)
        return batches, valid


class _Scratch:
    """A thread's anonymous mapping that compressed batches are decompressed into: pages cost memory
    only once written, and those beyond `_SCRATCH_KEPT_BYTES` are handed back after each use."""

    def __init__(self) -> None:
        self._map = mmap.mmap(-1, MAX_DECOMPRESSED_BATCH_BYTES)
        self.view = memoryview(self._map)

    def release(self) -> None:
        self._map.madvise(mmap.MADV_DONTNEED, _SCRATCH_KEPT_BYTES)


def _thread_scratch() -> _Scratch:
    found: _Scratch | None = getattr(_scratch, "value", None)
    if found is None:
        found = _scratch.value = _Scratch()
    return found


def _reject_batch(pos: int, header: BatchHeader, size: int, max_size: int, partition: str) -> None:
    if size > max_size:
        raise MessageTooLargeError(
            f"The batch of {size} bytes at byte {pos} in the append to {partition} is larger than "
            f"max.message.bytes {max_size}"
        )
    raise CorruptRecordError(
        f"Record is corrupt (stored crc = {header.crc}) in the batch at byte {pos} of the append to "
        f"{partition}"
    )


def _reject_client_batch(header: BatchHeader, partition: str) -> None:
    """Raises the InvalidRecordError a client batch deserves (called only when one check failed)."""
    if header.base_offset != 0:
        raise InvalidRecordError(
            f"The baseOffset of the record batch in the append to {partition} should be 0, "
            f"but it is {header.base_offset}"
        )
    if header.records_count <= 0 or header.records_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [0, {header.last_offset_delta}] and count of records "
            f"{header.records_count} in the append to {partition}"
        )
    if header.is_control:
        raise InvalidRecordError(f"Clients are not allowed to write control records in {partition}")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {header.base_sequence} in record batch with producerId "
            f"{header.producer_id} in {partition}"
        )


def _require_keys(buf: memoryview, batches: ValidBatches, partition: str) -> None:
    try:
        for pos, _ in batches:
            for record in record_batch.decode_records(buf, pos):
                if record.key is None:
                    raise InvalidRecordError(
                        f"Compacted topic cannot accept message without key in {partition}"
                    )
    except record_batch.CorruptRecordError as e:
        raise CorruptRecordError(f"Invalid batch in the append to {partition}: {e}") from None


def _validate_timestamps(batches: ValidBatches, max_diff: int, now_ms: int, partition: str) -> None:
    for _, header in batches:
        for ts in (header.base_timestamp, header.max_timestamp):
            if abs(ts - now_ms) > max_diff:
                raise InvalidTimestampError(
                    f"Timestamp {ts} of a batch of {header.records_count} records in {partition} is out of "
                    f"range. The timestamp should be within [{now_ms - max_diff}, {now_ms + max_diff}]"
                )
