"""Exceptions raised by storage; each carries the Kafka error code the broker answers with (`error_code`)."""

from protocol.errors import ErrorCode


class StorageError(Exception):
    """Base of every storage exception; `error_code` is the Kafka error the broker answers with."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR
    # KIP-467: (index in its batch, message) of each record that got the batch refused; empty when the
    # refusal is not about particular records. Set on the instance by the log validator.
    record_errors: tuple[tuple[int, str | None], ...] = ()


class CorruptRecordError(StorageError):
    """A batch failed its framing or CRC check (Kafka's CorruptRecordException)."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(StorageError):
    """A batch is well formed but not acceptable (Kafka's InvalidRecordException)."""

    error_code = ErrorCode.INVALID_RECORD


class InvalidTopicError(StorageError):
    """A client writes to an internal topic, which only the broker's coordinators may write."""

    error_code = ErrorCode.INVALID_TOPIC_EXCEPTION


class UnsupportedCompressionTypeError(StorageError):
    """A batch names a compression codec Kafka does not define."""

    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class MessageTooLargeError(StorageError):
    """A batch is larger than max.message.bytes (Kafka's RecordTooLargeException)."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class RecordListTooLargeError(StorageError):
    """The batches of one append are larger than segment.bytes (Kafka's RecordBatchTooLargeException)."""

    error_code = ErrorCode.RECORD_LIST_TOO_LARGE


class InvalidTimestampError(StorageError):
    """A CreateTime timestamp is further from now than message.timestamp.difference.max.ms."""

    error_code = ErrorCode.INVALID_TIMESTAMP


class OffsetOutOfRangeError(StorageError):
    """A read or log-start move names an offset outside what the log holds."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class OutOfOrderSequenceError(StorageError):
    """An idempotent batch's first sequence does not follow the producer's last one."""

    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(StorageError):
    """A batch carries an epoch older than the producer's current one (KIP-588)."""

    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(StorageError):
    """A non-transactional batch arrives while the producer has a transaction open."""

    error_code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(StorageError):
    """A transaction marker carries an older coordinator epoch than one already written."""

    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class UnexpectedAppendOffsetError(StorageError):
    """A follower append starts below the log end offset (the fetcher should truncate first)."""


class OffsetsOutOfOrderError(StorageError):
    """A follower append whose batches' offsets do not increase."""


class InvalidConfigError(StorageError, ValueError):
    """A topic config value is invalid; `key` names the bad setting."""

    error_code = ErrorCode.INVALID_CONFIG

    def __init__(self, key: str, value: object, reason: str) -> None:
        super().__init__(f"Invalid value {value!r} for configuration {key}: {reason}")
        self.key = key
        self.value = value


class CorruptIndexError(StorageError):
    """An index file fails its sanity check; the segment rebuilds it from the log."""


class CorruptSnapshotError(StorageError):
    """A producer-state snapshot fails its CRC or framing; it is deleted and an older one used."""


class CorruptCheckpointError(StorageError):
    """A checkpoint file cannot be parsed; the message names the file and line."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class LogDirInUseError(StorageError):
    """Another process holds the log dir's .lock."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class KafkaStorageError(StorageError):
    """A partition's log cannot be created, opened or written: the disk refused (no space, no
    descriptors left, permissions). The broker answers KAFKA_STORAGE_ERROR for that partition and
    serves the others."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR
