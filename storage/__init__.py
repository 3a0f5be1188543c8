"""The partition log on disk, laid out as Kafka lays it out. Knows nothing of sockets or ZooKeeper; reads
and writes record batches with protocol.record_batch.

Modules: config (LogConfig), checkpoints (text checkpoint files), leader_epoch (epoch cache), index
(.index/.timeindex), txn_index (.txnindex), segment (LogSegment), producer_state (idempotence and
transactions), log_validator (LogValidator: every check of appended batches), fetch (read results, sent
as they are), log_loader (LogLoader: opening and recovery), log (the running Log), cleaner
(compaction), log_manager (LogManager over log.dirs), errors (each with its Kafka error code).
"""

from storage.cleaner import CleanerStats, LogCleaner
from storage.config import LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTopicError,
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
    LogAppendInfo,
    TimestampAndOffset,
)
from storage.log_loader import LogLoader
from storage.log_manager import LogManager
from storage.log_validator import LogValidator
from storage.producer_state import AppendOrigin

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
    "InvalidTopicError",
    "InvalidTxnStateError",
    "Log",
    "LogAppendInfo",
    "LogCleaner",
    "LogConfig",
    "LogLoader",
    "LogManager",
    "LogOffsetMetadata",
    "LogValidator",
    "MessageTooLargeError",
    "OffsetOutOfRangeError",
    "OffsetsOutOfOrderError",
    "OutOfOrderSequenceError",
    "RecordListTooLargeError",
    "StorageError",
    "TimestampAndOffset",
    "TransactionCoordinatorFencedError",
    "UnexpectedAppendOffsetError",
]
