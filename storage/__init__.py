"""The partition log on disk, laid out as Kafka lays it out. Knows nothing of sockets or ZooKeeper.

Modules: config (LogConfig), checkpoints (text checkpoint files), leader_epoch (epoch cache), index
(.index/.timeindex), txn_index (.txnindex), segment (LogSegment), producer_state (idempotence and
transactions), append (batch validation), fetch (read results), log (Log), cleaner (compaction),
log_manager (LogManager over log.dirs), record_format (the injected batch codec), errors.
"""

from storage.append import LogAppendInfo
from storage.cleaner import CleanerStats, LogCleaner
from storage.config import LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTxnStateError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    OutOfOrderSequenceError,
    RecordListTooLargeError,
    StorageError,
    TransactionCoordinatorFencedError,
    UnexpectedAppendOffsetError,
)
from storage.fetch import FetchDataInfo, LogOffsetMetadata
from storage.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Log,
    TimestampAndOffset,
)
from storage.log_manager import LogManager
from storage.producer_state import AppendOrigin
from storage.record_format import RecordFormat

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendOrigin",
    "CleanerStats",
    "CorruptRecordError",
    "FetchDataInfo",
    "InvalidConfigError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTxnStateError",
    "Log",
    "LogAppendInfo",
    "LogCleaner",
    "LogConfig",
    "LogManager",
    "LogOffsetMetadata",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "OffsetsOutOfOrderError",
    "OutOfOrderSequenceError",
    "RecordFormat",
    "RecordListTooLargeError",
    "StorageError",
    "TimestampAndOffset",
    "TransactionCoordinatorFencedError",
    "UnexpectedAppendOffsetError",
]
