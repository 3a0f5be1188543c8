"""The part of the RecordBatch v2 codec storage uses, as a typing.Protocol.

Storage never imports `protocol`; the broker passes the `protocol.record_batch` module, which satisfies
`RecordFormat` structurally. Only batch headers are read on the append path; records are decoded only by
the cleaner, by timestamp search inside a batch, and to read transaction markers.
"""

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, TypeAlias

# collections.abc.Buffer arrives in 3.12; these are the buffers storage hands the codec.
Buffer: TypeAlias = bytes | bytearray | memoryview


class BatchHeader(Protocol):
    """The 61-byte v2 batch header, with Kafka's derived properties."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def compression(self) -> int: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def has_delete_horizon(self) -> bool: ...
    @property
    def last_sequence(self) -> int: ...


class Record(Protocol):
    """One decoded record, with absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Any


class RecordFormat(Protocol):
    """What storage needs of `protocol.record_batch`."""

    LOG_OVERHEAD: int
    HEADER_SIZE: int
    CorruptRecordError: type[Exception]

    def read_header(self, buf: Buffer, pos: int = 0) -> BatchHeader: ...

    def iter_headers(
        self, buf: Buffer, pos: int = 0, end: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]: ...

    def crc_ok(self, buf: Buffer, pos: int, header: BatchHeader) -> bool: ...

    def set_base_offset(self, buf: Buffer, pos: int, base_offset: int) -> None: ...

    def set_partition_leader_epoch(self, buf: Buffer, pos: int, epoch: int) -> None: ...

    def set_log_append_time(self, buf: Buffer, pos: int, ts: int) -> None: ...

    def decode_records(self, buf: Buffer, pos: int = 0) -> list[Record]: ...

    def check_records(self, buf: Buffer, pos: int, header: BatchHeader, scratch: memoryview) -> None: ...

    def encode_batch(
        self,
        records: Sequence[Record],
        *,
        base_offset: int,
        compression: int = 0,
        timestamp_type: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = -1,
        last_offset_delta: int | None = None,
        delete_horizon_ms: int | None = None,
    ) -> bytes: ...
