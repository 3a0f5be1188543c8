"""``samsa dump-log``: Kafka 3.9's kafka-dump-log.sh (DumpLogSegments) for Samsa's log files.

``--files F1,F2,...`` dumps each file by its suffix, reading it directly (a stopped broker's files, or a
running one's: nothing is written):

- ``.log`` (and ``.checkpoint``): ``Log starting offset: N``, then one line per batch
  (``baseOffset: .. lastOffset: .. count: .. baseSequence: .. lastSequence: .. producerId: ..
  producerEpoch: .. partitionLeaderEpoch: .. isTransactional: .. isControl: .. deleteHorizonMs: ..
  position: .. CreateTime: .. size: .. magic: .. compresscodec: .. crc: .. isvalid: ..``) and, with
  ``--deep-iteration`` or ``--print-data-log``, one per record (``| offset: .. CreateTime: ..
  keySize: .. valueSize: .. sequence: .. headerKeys: [..]`` then ``key: .. payload: ..`` with
  ``--print-data-log``; ``--skip-record-metadata`` drops the metadata). ``--max-bytes`` reads only the
  first N bytes. A partial batch at the end: ``Found N invalid bytes at the end of F``.
- ``.index``: ``offset: O position: P`` per entry; ``.timeindex``: ``timestamp: T offset: O``; both
  checked against the log (mismatches listed on stderr at the end); ``--verify-index-only`` prints only
  the problems, ``--index-sanity-check`` runs the check a broker runs at startup
  (``F passed sanity check.``).
- ``.snapshot`` (producer state), ``.txnindex`` (aborted transactions): one line per entry.
- ``leader-epoch-checkpoint`` (Samsa's addition; Kafka's tool fails on a name without a dot):
  ``epoch: E startOffset: O`` per entry.

Decoders: ``--key-decoder-class`` / ``--value-decoder-class`` (Kafka's StringDecoder by default),
``--offsets-decoder`` (``__consumer_offsets``), ``--transaction-log-decoder`` (``__transaction_state``);
see ``tools/dump_log_parsers.py``. Any decoder option implies ``--print-data-log``, which implies
``--deep-iteration``. Where Kafka's tool dies with an exception (a missing file, a corrupt batch
header), this prints the message on stderr and exits with 1.
"""

from __future__ import annotations

import argparse
import mmap
import os
import re
import struct
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any, NamedTuple

from crc32c import crc32c

from protocol import compression, record_batch
from protocol.compression import DecompressionError
from protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, CorruptRecordError, Record
from storage.producer_state import decrement_sequence
from tools.dump_log_parsers import (
    DEFAULT_DECODER,
    DecoderParser,
    DumpError,
    MessageParser,
    OffsetsParser,
    TransactionLogParser,
    check_decoder_class,
    scala_map_order,
)
from tools.usage import UsageError, UsageParser

DESCRIPTION = (
    "This tool helps to parse a log file and dump its contents to the console, useful for debugging a "
    "seemingly corrupt log segment."
)
INT_MAX = 2**31 - 1
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
RECORD_INDENT = "|"

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_SUFFIX = ".snapshot"
KRAFT_SNAPSHOT_SUFFIX = ".checkpoint"
KRAFT_BOOTSTRAP_FILE = "bootstrap.checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

_HEADER_SIZE_UP_TO_MAGIC = 17  # offset, length, partition leader epoch, magic
_MIN_ENTRY_SIZE = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0: the smallest length a batch may declare
_HEADER = struct.Struct(">qiibIhiqqqhii")
_LOG_PREFIX = struct.Struct(">qi")
_LEGACY_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_ABORTED_TXN = struct.Struct(">bxqqqq")  # Kafka reads the int16 version's first byte as the version
_ABORTED_TXN_SIZE = 34
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_KRAFT_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")

TIMESTAMP_TYPES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}
# Kafka's ControlRecordType.
CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}


# -- options -------------------------------------------------------------------------------------------


@dataclass
class Options:
    files: list[str]
    print_data_log: bool = False
    deep_iteration: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_bytes: int = INT_MAX
    key_decoder: str = DEFAULT_DECODER
    value_decoder: str = DEFAULT_DECODER
    offsets_decoder: bool = False
    transaction_log_decoder: bool = False
    skip_record_metadata: bool = False

    def message_parser(self, out: IO[str]) -> MessageParser:
        if self.offsets_decoder:
            return OffsetsParser()
        if self.transaction_log_decoder:
            return TransactionLogParser()
        return DecoderParser(self.key_decoder, self.value_decoder, out)


def _int_option(name: str) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"Cannot parse argument '{text}' of option {name}") from None
        if not -(2**31) <= value <= INT_MAX:
            raise argparse.ArgumentTypeError(f"Cannot parse argument '{text}' of option {name}")
        return value

    return parse


def _parser() -> UsageParser:
    p = UsageParser(prog="samsa dump-log", description=DESCRIPTION)
    p.add_argument(
        "--files",
        metavar="file1, file2, ...",
        help="REQUIRED: The comma separated list of data and index log files to be dumped.",
    )
    p.add_argument(
        "--print-data-log",
        action="store_true",
        help="If set, printing the messages content when dumping data logs. Automatically set if any "
        "decoder option is specified.",
    )
    p.add_argument(
        "--verify-index-only",
        action="store_true",
        help="If set, just verify the index log without printing its content.",
    )
    p.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="If set, just checks the index sanity without printing its content. This is the same check "
        "that is executed on broker startup to determine if an index needs rebuilding or not.",
    )
    p.add_argument(
        "--max-message-size",
        type=_int_option("max-message-size"),
        default=DEFAULT_MAX_MESSAGE_SIZE,
        metavar="size",
        help="Size of largest message. (default: 5242880)",
    )
    p.add_argument(
        "--max-bytes",
        type=_int_option("max-bytes"),
        default=INT_MAX,
        metavar="size",
        help="Limit the amount of total batches read in bytes avoiding reading the whole .log file(s). "
        "(default: 2147483647)",
    )
    p.add_argument(
        "--deep-iteration",
        action="store_true",
        help="If set, uses deep instead of shallow iteration. Automatically set if print-data-log is "
        "enabled.",
    )
    for side in ("value", "key"):
        p.add_argument(
            f"--{side}-decoder-class",
            nargs="?",
            const=DEFAULT_DECODER,
            default=None,
            metavar="class",
            help=f"If set, used to deserialize the {'messages' if side == 'value' else 'keys'}: "
            "org.apache.kafka.tools.api.StringDecoder (default), IntegerDecoder, LongDecoder or "
            "DefaultDecoder (hex).",
        )
    p.add_argument(
        "--offsets-decoder",
        action="store_true",
        help="If set, log data will be parsed as offset data from the __consumer_offsets topic.",
    )
    p.add_argument(
        "--transaction-log-decoder",
        action="store_true",
        help="If set, log data will be parsed as transaction metadata from the __transaction_state topic.",
    )
    p.add_argument(
        "--cluster-metadata-decoder",
        action="store_true",
        help="Kafka's KRaft metadata log decoder: Samsa runs with ZooKeeper and has no metadata log.",
    )
    p.add_argument(
        "--remote-log-metadata-decoder",
        action="store_true",
        help="Kafka's tiered storage metadata decoder: Samsa has no tiered storage.",
    )
    p.add_argument(
        "--skip-record-metadata",
        action="store_true",
        help="Whether to skip printing metadata for each record.",
    )
    p.add_argument("--version", action="store_true", help="Display Samsa's version.")
    return p


def parse_options(argv: list[str]) -> Options:
    """Raises UsageError for a command line Kafka's tool refuses."""
    return options_from(_parser().parse_args(argv))


def options_from(args: argparse.Namespace) -> Options:
    if args.files is None:
        raise UsageError('Missing required argument "[files]"')
    if args.cluster_metadata_decoder or args.remote_log_metadata_decoder:
        which = "cluster-metadata" if args.cluster_metadata_decoder else "remote-log-metadata"
        raise UsageError(
            f"--{which}-decoder: Samsa keeps its metadata in ZooKeeper and has no such log to decode"
        )
    for name in (args.key_decoder_class, args.value_decoder_class):
        if name is not None:
            try:
                check_decoder_class(name)
            except DumpError as e:
                raise UsageError(str(e)) from None
    decoder_given = (
        args.offsets_decoder
        or args.transaction_log_decoder
        or args.key_decoder_class is not None
        or args.value_decoder_class is not None
    )
    print_data_log = args.print_data_log or decoder_given
    return Options(
        # Java's String.split drops trailing empty strings.
        files=_java_split(args.files),
        print_data_log=print_data_log,
        deep_iteration=args.deep_iteration or print_data_log,
        verify_index_only=args.verify_index_only,
        index_sanity_check=args.index_sanity_check,
        max_message_size=args.max_message_size,
        max_bytes=args.max_bytes,
        key_decoder=args.key_decoder_class or DEFAULT_DECODER,
        value_decoder=args.value_decoder_class or DEFAULT_DECODER,
        offsets_decoder=args.offsets_decoder,
        transaction_log_decoder=args.transaction_log_decoder,
        skip_record_metadata=args.skip_record_metadata,
    )


def _java_split(text: str) -> list[str]:
    parts = text.split(",")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


# -- paths as java.io.File shows them ------------------------------------------------------------------


def java_path(path: str) -> str:
    """``new File(path).toString``: repeated separators collapsed, a trailing one dropped."""
    normalized = re.sub(r"/+", "/", path)
    return normalized[:-1] if len(normalized) > 1 and normalized.endswith("/") else normalized


def java_absolute_path(path: str) -> str:
    """``File.getAbsolutePath``: the working directory prefixed, nothing else resolved."""
    shown = java_path(path)
    return shown if shown.startswith("/") else java_path(os.getcwd() + "/" + shown)


def _base_offset_of(name: str) -> int:
    """The number before a file name's first dot (Kafka's ``name.split("\\.")(0).toLong``)."""
    prefix = name.split(".")[0]
    try:
        return int(prefix)
    except ValueError:
        raise DumpError(f'java.lang.NumberFormatException: For input string: "{prefix}"') from None


def _sibling(path: str, suffix: str) -> str:
    directory = os.path.dirname(java_absolute_path(path))
    return os.path.join(directory, os.path.basename(path).split(".")[0] + suffix)


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise DumpError(f"java.nio.file.NoSuchFileException: {java_path(path)}") from None
    except OSError as e:
        raise DumpError(f"{java_path(path)} ({e.strerror})") from None


class _LogFile:
    """A log file's bytes, mapped read-only (or empty)."""

    def __init__(self, path: str) -> None:
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                self.data: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        except FileNotFoundError:
            raise DumpError(f"java.nio.file.NoSuchFileException: {java_path(path)}") from None
        except OSError as e:
            raise DumpError(f"{java_path(path)} ({e.strerror})") from None
        self.path = path
        self.size = size

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()

    def __enter__(self) -> _LogFile:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


# -- batches as Kafka's FileLogInputStream finds them ------------------------------------------------


class FileBatch(NamedTuple):
    position: int
    offset: int  # the base offset of a v2 batch, the (last) offset of a legacy entry
    size: int  # log overhead included
    magic: int


def iter_file_batches(log: _LogFile, start: int, end: int) -> Iterator[FileBatch]:
    """The batches in ``[start, end)``, stopping before one that does not fit (Kafka's nextBatch)."""
    data, pos = log.data, start
    while pos < end - _HEADER_SIZE_UP_TO_MAGIC:
        offset, length = _LOG_PREFIX.unpack_from(data, pos)
        if length < _MIN_ENTRY_SIZE:
            raise DumpError(
                f"org.apache.kafka.common.errors.CorruptRecordException: Found record size {length} "
                f"smaller than minimum record overhead ({_MIN_ENTRY_SIZE}) in file {java_path(log.path)}."
            )
        if pos > end - LOG_OVERHEAD - length:
            return
        magic = data[pos + 16]
        yield FileBatch(pos, offset, LOG_OVERHEAD + length, magic - 256 if magic > 127 else magic)
        pos += LOG_OVERHEAD + length


def _v2_header(log: _LogFile, batch: FileBatch) -> BatchHeader:
    if batch.position + HEADER_SIZE > log.size:
        raise DumpError(
            f"org.apache.kafka.common.KafkaException: Failed to load record batch at position "
            f"{batch.position} from {java_path(log.path)}"
        )
    return BatchHeader._make(_HEADER.unpack_from(log.data, batch.position))


def _compression_name(codec: int) -> str:
    try:
        return compression.CODEC_NAMES[codec]
    except KeyError:
        raise DumpError(f"java.lang.IllegalArgumentException: Unknown compression type id: {codec}") from None


def _v2_records(log: _LogFile, batch: FileBatch, header: BatchHeader) -> list[Record]:
    """A v2 batch's records as Kafka's iterator reads them: decompressed, the CRC not checked."""
    if header.records_count <= 0:
        return []
    payload = memoryview(log.data)[batch.position + HEADER_SIZE : batch.position + batch.size]
    try:
        data = compression.decompress(header.compression, payload) if header.compression else bytes(payload)
        records, consumed = record_batch._decode_record_list(data, header.records_count, header)
    except (CorruptRecordError, DecompressionError, IndexError, ValueError) as e:
        raise DumpError(
            f"org.apache.kafka.common.InvalidRecordException: the batch at position {batch.position} of "
            f"{java_path(log.path)} does not read: {e or type(e).__name__}"
        ) from None
    finally:
        payload.release()
    if consumed != len(data):
        raise DumpError(
            "org.apache.kafka.common.InvalidRecordException: Incorrect declared batch size, records still "
            f"remaining in file (batch at position {batch.position} of {java_path(log.path)})"
        )
    return records


def _optional_long(value: int | None) -> str:
    """Java's OptionalLong.toString."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _bool(value: bool) -> str:
    return "true" if value else "false"


class _LegacyEntry(NamedTuple):
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    crc: int
    valid: bool
    attributes: int


def _legacy_entry(data: Any, pos: int, size: int) -> _LegacyEntry:
    """One v0/v1 message (log overhead included in ``size``)."""
    end = pos + size
    offset, _, crc, magic, attributes = _LEGACY_PREFIX.unpack_from(data, pos)
    valid = size - LOG_OVERHEAD >= _MIN_ENTRY_SIZE and zlib.crc32(data[pos + 16 : end]) == crc
    p = pos + _LEGACY_PREFIX.size
    timestamp, timestamp_type = -1, -1
    if magic >= 1:
        (timestamp,) = _I64.unpack_from(data, p)
        p += 8
        timestamp_type = (attributes & 0x08) >> 3
    key, p = _legacy_bytes(data, p, end)
    value, p = _legacy_bytes(data, p, end)
    return _LegacyEntry(offset, timestamp, timestamp_type, key, value, crc, valid, attributes)


def _legacy_bytes(data: Any, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError("a legacy message is shorter than its fields")
    (length,) = _I32.unpack_from(data, pos)
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordError("a legacy message's key or value overruns it")
    return bytes(data[pos : pos + length]), pos + length


def _legacy_records(log: _LogFile, batch: FileBatch, wrapper: _LegacyEntry) -> list[_LegacyEntry]:
    """The records of a v0/v1 entry: itself, or the messages its compressed value holds (inner offsets
    made absolute for magic 1, the wrapper's timestamp for LogAppendTime), as Kafka's deep iterator."""
    codec = wrapper.attributes & 0x07
    if not codec:
        return [wrapper]
    try:
        if wrapper.value is None:
            raise CorruptRecordError("a compressed message has a null value")
        if codec == compression.LZ4 and batch.magic == 0:
            data = compression.decompress_lz4_lenient(wrapper.value)
        else:
            data = compression.decompress(codec, wrapper.value)
        inner = []
        pos = 0
        while len(data) - pos >= LOG_OVERHEAD:
            (length,) = _I32.unpack_from(data, pos + 8)
            if length < _MIN_ENTRY_SIZE or pos + LOG_OVERHEAD + length > len(data):
                break
            inner.append(_legacy_entry(data, pos, LOG_OVERHEAD + length))
            pos += LOG_OVERHEAD + length
    except (CorruptRecordError, DecompressionError, struct.error, IndexError) as e:
        raise DumpError(
            f"org.apache.kafka.common.errors.CorruptRecordException: the message at position "
            f"{batch.position} of {java_path(log.path)} does not read: {e}"
        ) from None
    if batch.magic == 1 and inner:
        base = wrapper.offset - inner[-1].offset
        inner = [e._replace(offset=base + e.offset) for e in inner]
    if wrapper.timestamp_type == 1:
        inner = [e._replace(timestamp=wrapper.timestamp, timestamp_type=1) for e in inner]
    return inner


# -- the dump ------------------------------------------------------------------------------------------


@dataclass
class _Problems:
    """What Kafka's tool collects while dumping and prints on stderr at the end, keyed by absolute path;
    ``*_puts`` record every put into Kafka's Scala maps, whose iteration order they decide."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    index_puts: list[str] = field(default_factory=list)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive_puts: list[str] = field(default_factory=list)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    last_offsets: dict[str, int] = field(default_factory=dict)  # the last record offset seen per log

    def print(self, err: IO[str]) -> None:
        lines = []
        for name in scala_map_order(self.index_puts):
            lines.append(f"Mismatches in :{name}")
            # Kafka prepends to an immutable List: the latest first.
            lines += [
                f"  Index offset: {i}, log offset: {o}" for i, o in reversed(self.index_mismatches[name])
            ]
        for name in scala_map_order(self.time_mismatches):
            lines.append(f"Found timestamp mismatch in :{name}")
            lines += [f"  Index timestamp: {i}, log timestamp: {t}" for i, t in self.time_mismatches[name]]
        for name in scala_map_order(self.time_out_of_order):
            lines.append(f"Found out of order timestamp in :{name}")
            lines += [
                f"  Index timestamp: {i}, Previously indexed timestamp: {p}"
                for i, p in self.time_out_of_order[name]
            ]
        for name in scala_map_order(self.time_not_found):
            lines.append("The following indexed offsets are not found in the log.")
            lines += [f"Indexed offset: {i}, found log offset: {o}" for i, o in self.time_not_found[name]]
        for name in scala_map_order(self.non_consecutive_puts):
            lines.append(f"Non-consecutive offsets in {name}")
            lines += [f"  {a} is followed by {b}" for a, b in reversed(self.non_consecutive[name])]
        if lines:
            err.write("\n".join(lines) + "\n")


def dump(options: Options, out: IO[str], err: IO[str]) -> None:
    """Dumps every file of ``options.files`` as Kafka's DumpLogSegments.main; raises DumpError where it
    stops with an exception (what was printed so far stays printed)."""
    problems = _Problems()
    for arg in options.files:
        shown = java_path(arg)
        out.write(f"Dumping {shown}\n")
        name = os.path.basename(shown)
        if name == LEADER_EPOCH_CHECKPOINT:
            _dump_leader_epoch_checkpoint(arg, out)
            continue
        suffix = name[name.rfind(".") :] if "." in name else ""
        if suffix in (LOG_SUFFIX, KRAFT_SNAPSHOT_SUFFIX):
            # Kafka makes the parser for every log file (and prints the decoders' deprecation lines).
            _dump_log(arg, options, options.message_parser(out), problems, out)
        elif suffix == INDEX_SUFFIX:
            _dump_index(arg, options, problems, out)
        elif suffix == TIME_INDEX_SUFFIX:
            _dump_time_index(arg, options, problems, out)
        elif suffix == PRODUCER_SNAPSHOT_SUFFIX:
            _dump_producer_snapshot(arg, out, err)
        elif suffix == TXN_INDEX_SUFFIX:
            _dump_txn_index(arg, out)
        else:
            out.flush()
            err.write(f"Ignoring unknown file {shown}\n")
    out.flush()
    problems.print(err)


def _dump_log(
    path: str, options: Options, parser: MessageParser | None, problems: _Problems, out: IO[str]
) -> None:
    name = os.path.basename(java_path(path))
    if name.endswith(LOG_SUFFIX):
        out.write(f"Log starting offset: {_base_offset_of(name)}\n")
    elif name == KRAFT_BOOTSTRAP_FILE:
        out.write("KRaft bootstrap snapshot\n")
    else:
        match = _KRAFT_SNAPSHOT_NAME.match(name)
        if match is None:
            raise DumpError("java.util.NoSuchElementException: No value present")
        out.write(f"Snapshot end offset: {int(match[1])}, epoch: {int(match[2])}\n")
    absolute = java_absolute_path(path)
    if options.max_bytes < 0:
        raise DumpError(f"java.lang.IllegalArgumentException: Invalid size: {options.max_bytes}")
    problems.last_offsets[absolute] = -1
    with _LogFile(path) as log:
        end = min(log.size, options.max_bytes)
        valid_bytes = 0
        for batch in iter_file_batches(log, 0, end):
            lines: list[str] = []
            try:
                _batch_lines(log, batch, valid_bytes, options, parser, problems, absolute, lines)
            finally:
                # What was made before an error is printed, as Kafka prints as it goes.
                if lines:
                    out.write("\n".join(lines) + "\n")
            valid_bytes += batch.size
        trailing = end - valid_bytes
        if trailing > 0 and options.max_bytes == INT_MAX:
            out.write(f"Found {trailing} invalid bytes at the end of {name}\n")


def _batch_lines(
    log: _LogFile,
    batch: FileBatch,
    position: int,
    options: Options,
    parser: MessageParser | None,
    problems: _Problems,
    absolute: str,
    lines: list[str],
) -> None:
    """Appends the lines of one batch (and of its records with deep iteration) to ``lines``."""
    last_offset = problems.last_offsets.get(absolute, -1)
    try:
        if batch.magic >= 2:
            header = _v2_header(log, batch)
            lines.append(_v2_batch_line(log, batch, header, position))
            if options.deep_iteration:
                for record in _v2_records(log, batch, header):
                    if last_offset != -1 and record.offset != last_offset + 1:
                        problems.non_consecutive.setdefault(absolute, []).append((last_offset, record.offset))
                        problems.non_consecutive_puts.append(absolute)
                    last_offset = record.offset
                    lines.append(_v2_record_line(record, batch, header, options, parser))
        else:
            wrapper = _legacy_entry_or_fail(log, batch)
            lines.append(_legacy_batch_line(batch, wrapper, position))
            if options.deep_iteration:
                for entry in _legacy_records(log, batch, wrapper):
                    if last_offset != -1 and entry.offset != last_offset + 1:
                        problems.non_consecutive.setdefault(absolute, []).append((last_offset, entry.offset))
                        problems.non_consecutive_puts.append(absolute)
                    last_offset = entry.offset
                    lines.append(_legacy_record_line(entry, wrapper.timestamp_type, options, parser))
    finally:
        problems.last_offsets[absolute] = last_offset


def _v2_batch_line(log: _LogFile, batch: FileBatch, header: BatchHeader, position: int) -> str:
    valid = (
        batch.size >= HEADER_SIZE
        and crc32c(memoryview(log.data)[batch.position + 21 : batch.position + batch.size]) == header.crc
    )
    delete_horizon = header.base_timestamp if header.has_delete_horizon else None
    return (
        f"baseOffset: {batch.offset} lastOffset: {batch.offset + header.last_offset_delta} "
        f"count: {header.records_count} baseSequence: {header.base_sequence} "
        f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
        f"producerEpoch: {header.producer_epoch} partitionLeaderEpoch: {header.partition_leader_epoch} "
        f"isTransactional: {_bool(header.is_transactional)} isControl: {_bool(header.is_control)} "
        f"deleteHorizonMs: {_optional_long(delete_horizon)} position: {position} "
        f"{TIMESTAMP_TYPES[header.timestamp_type]}: {header.max_timestamp} size: {batch.size} "
        f"magic: {header.magic} compresscodec: {_compression_name(header.compression)} crc: {header.crc} "
        f"isvalid: {_bool(valid)}"
    )


def _record_sequence(header: BatchHeader, offset_delta: int) -> int:
    """Kafka's DefaultRecord sequence: the batch's base sequence plus the delta, wrapping at int max."""
    if header.base_sequence < 0:
        return -1
    return (header.base_sequence + offset_delta) & INT_MAX


def _v2_record_line(
    record: Record, batch: FileBatch, header: BatchHeader, options: Options, parser: MessageParser | None
) -> str:
    prefix = f"{RECORD_INDENT} "
    parts = []
    if not options.skip_record_metadata:
        key_size = -1 if record.key is None else len(record.key)
        value_size = -1 if record.value is None else len(record.value)
        header_keys = ",".join(name for name, _ in record.headers)
        parts.append(
            f"{prefix}offset: {record.offset} {TIMESTAMP_TYPES[header.timestamp_type]}: {record.timestamp} "
            f"keySize: {key_size} valueSize: {value_size} "
            f"sequence: {_record_sequence(header, record.offset - batch.offset)} headerKeys: [{header_keys}]"
        )
        prefix = " "
        if header.is_control:
            parts.append(_control_text(record))
    if options.print_data_log and not header.is_control and parser is not None:
        key, payload = parser.parse(record.offset, record.key, record.value)
        if key is not None:
            parts.append(f"{prefix}key: {key}")
            prefix = " "
        if payload is not None:
            parts.append(f" payload: {payload}")
    return "".join(parts)


def _control_text(record: Record) -> str:
    key = record.key
    if key is None or len(key) < 4:
        raise DumpError(
            "org.apache.kafka.common.InvalidRecordException: Invalid value size found for end control "
            f"record key. Must have at least 4 bytes, but found only {0 if key is None else len(key)}"
        )
    version, type_id = struct.unpack_from(">hh", key)
    if version < 0:
        raise DumpError(
            f"org.apache.kafka.common.InvalidRecordException: Invalid version found for control record: "
            f"{version}. May indicate data corruption"
        )
    control_type = CONTROL_TYPES.get(type_id, "UNKNOWN")
    value = record.value or b""
    if control_type in ("ABORT", "COMMIT"):
        if len(value) < 6:
            raise DumpError(
                "org.apache.kafka.common.InvalidRecordException: Invalid value size found for end "
                f"transaction marker. Must have at least 6 bytes, but found only {len(value)}"
            )
        marker_version, coordinator_epoch = struct.unpack_from(">hi", value)
        if marker_version < 0:
            raise DumpError(
                "org.apache.kafka.common.InvalidRecordException: Invalid version found for end transaction "
                f"marker: {marker_version}. May indicate data corruption"
            )
        return f" endTxnMarker: {control_type} coordinatorEpoch: {coordinator_epoch}"
    if control_type == "SNAPSHOT_HEADER" and len(value) >= 10:
        version, timestamp = struct.unpack_from(">hq", value)
        return f' SnapshotHeader {{"version":{version},"lastContainedLogTimestamp":{timestamp}}}'
    if control_type == "SNAPSHOT_FOOTER" and len(value) >= 2:
        return f' SnapshotFooter {{"version":{_I16.unpack_from(value)[0]}}}'
    if control_type == "KRAFT_VERSION" and len(value) >= 4:
        version, kraft_version = struct.unpack_from(">hh", value)
        return f' KRaftVersion {{"version":{version},"kRaftVersion":{kraft_version}}}'
    # LEADER_CHANGE and unknown types as Kafka prints them; KRaft voters records (which only KRaft's
    # metadata log holds) likewise.
    return f" controlType: {control_type}({type_id})"


def _legacy_entry_or_fail(log: _LogFile, batch: FileBatch) -> _LegacyEntry:
    try:
        return _legacy_entry(log.data, batch.position, batch.size)
    except (CorruptRecordError, struct.error) as e:
        raise DumpError(
            f"org.apache.kafka.common.errors.CorruptRecordException: the message at position "
            f"{batch.position} of {java_path(log.path)} does not read: {e}"
        ) from None


def _legacy_batch_line(batch: FileBatch, wrapper: _LegacyEntry, position: int) -> str:
    return (
        f"offset: {batch.offset} position: {position} {TIMESTAMP_TYPES[wrapper.timestamp_type]}: "
        f"{wrapper.timestamp} size: {batch.size} magic: {batch.magic} "
        f"compresscodec: {_compression_name(wrapper.attributes & 0x07)} crc: {wrapper.crc} "
        f"isvalid: {_bool(wrapper.valid)}"
    )


def _legacy_record_line(
    entry: _LegacyEntry, timestamp_type: int, options: Options, parser: MessageParser | None
) -> str:
    """A record line of a v0/v1 entry; the timestamp type is the batch's (the wrapper's), as Kafka prints."""
    prefix = f"{RECORD_INDENT} "
    parts = []
    if not options.skip_record_metadata:
        key_size = -1 if entry.key is None else len(entry.key)
        value_size = -1 if entry.value is None else len(entry.value)
        # Kafka's line for these ends with a stray "}".
        parts.append(
            f"{prefix}offset: {entry.offset} {TIMESTAMP_TYPES[timestamp_type]}: {entry.timestamp} "
            f"keySize: {key_size} valueSize: {value_size} isValid: {_bool(entry.valid)} crc: {entry.crc}}}"
        )
        prefix = " "
    if options.print_data_log and parser is not None:
        key, payload = parser.parse(entry.offset, entry.key, entry.value)
        if key is not None:
            parts.append(f"{prefix}key: {key}")
        if payload is not None:
            parts.append(f" payload: {payload}")
    return "".join(parts)


# -- indexes ---------------------------------------------------------------------------------------


class _Index:
    """An offset or time index read as Kafka opens an existing one: every whole slot of the file counts
    as an entry (a preallocated index ends in zero slots, which the dump stops at)."""

    def __init__(self, path: str, entry: struct.Struct) -> None:
        self.path = path
        self.data = _read_file(path)
        self.entry_struct = entry
        self.length = len(self.data)
        self.entries = self.length // entry.size
        self.base_offset = _base_offset_of(os.path.basename(java_path(path)))

    def offset_entry(self, n: int) -> tuple[int, int]:
        rel, position = _OFFSET_ENTRY.unpack_from(self.data, n * 8)
        return self.base_offset + rel, position

    def time_entry(self, n: int) -> tuple[int, int]:
        timestamp, rel = _TIME_ENTRY.unpack_from(self.data, n * 12)
        return timestamp, self.base_offset + rel

    def lookup(self, target: int) -> int:
        """Kafka's OffsetIndex.lookup: the position of the largest entry at or below ``target`` (its
        binary search over every slot, warm section first), 0 when there is none."""
        n = self.entries
        if n == 0:
            return 0
        first_hot = max(0, n - 1 - 8192 // 8)
        if self.offset_entry(first_hot)[0] < target:
            slot = self._search(target, first_hot, n - 1)
        elif self.offset_entry(0)[0] > target:
            return 0
        else:
            slot = self._search(target, 0, first_hot)
        return self.offset_entry(slot)[1]

    def _search(self, target: int, lo: int, hi: int) -> int:
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            found = self.offset_entry(mid)[0]
            if found > target:
                hi = mid - 1
            elif found < target:
                lo = mid
            else:
                return mid
        return lo


def _offset_index_sanity_check(index: _Index) -> None:
    last_offset = index.offset_entry(index.entries - 1)[0] if index.entries else index.base_offset
    absolute = java_absolute_path(index.path)
    if index.entries and last_offset < index.base_offset:
        raise DumpError(
            f"org.apache.kafka.common.errors.CorruptIndexException: Corrupt index found, index file "
            f"{absolute} has non-zero size but the last offset is {last_offset} which is less than the "
            f"base offset {index.base_offset}"
        )
    if index.length % 8:
        raise DumpError(
            f"org.apache.kafka.common.errors.CorruptIndexException: Index file {absolute} is corrupt, "
            f"found {index.length} bytes which is neither positive nor a multiple of 8"
        )


def _time_index_sanity_check(index: _Index) -> None:
    absolute = java_absolute_path(index.path)
    if index.entries:
        last_timestamp, last_offset = index.time_entry(index.entries - 1)
        first_timestamp = index.time_entry(0)[0]
        if last_timestamp < first_timestamp:
            raise DumpError(
                f"org.apache.kafka.common.errors.CorruptIndexException: Corrupt time index found, time "
                f"index file ({absolute}) has non-zero size but the last timestamp is {last_timestamp} "
                f"which is less than the first timestamp {first_timestamp}"
            )
        if last_offset < index.base_offset:
            raise DumpError(
                f"org.apache.kafka.common.errors.CorruptIndexException: Corrupt time index found, time "
                f"index file ({absolute}) has non-zero size but the last offset is {last_offset} which "
                f"is less than the first offset {index.base_offset}"
            )
    if index.length % 12:
        raise DumpError(
            f"org.apache.kafka.common.errors.CorruptIndexException: Time index file {absolute} is corrupt, "
            f"found {index.length} bytes which is neither positive nor a multiple of 12"
        )


def _slice_end(log: _LogFile, position: int, size: int) -> int:
    if position > log.size:
        raise DumpError(
            f"java.lang.IllegalArgumentException: Slice from position {position} exceeds end position of "
            f"FileRecords(file= {java_absolute_path(log.path)}, start=0, end={log.size})"
        )
    return position + min(size, log.size - position)


def _dump_index(path: str, options: Options, problems: _Problems, out: IO[str]) -> None:
    with _LogFile(_sibling(path, LOG_SUFFIX)) as log:
        index = _Index(path, _OFFSET_ENTRY)
        if index.entries == 0:
            out.write(f"{java_path(path)} is empty.\n")
            return
        if options.index_sanity_check:
            _offset_index_sanity_check(index)
            out.write(f"{java_path(path)} passed sanity check.\n")
            return
        absolute = java_absolute_path(path)
        for i in range(index.entries):
            offset, position = index.offset_entry(i)
            if offset == index.base_offset and i > 0:
                break  # the zero slots of a preallocated index
            end = _slice_end(log, position, options.max_message_size)
            first = next(iter_file_batches(log, position, end), None)
            if first is None:
                raise DumpError("java.util.NoSuchElementException (no batch at the indexed position)")
            first_last_offset = _last_offset(log, first)
            if first_last_offset != offset:
                problems.index_mismatches.setdefault(absolute, []).append((offset, first_last_offset))
                problems.index_puts.append(absolute)
            if not options.verify_index_only:
                out.write(f"offset: {offset} position: {position}\n")


def _last_offset(log: _LogFile, batch: FileBatch) -> int:
    if batch.magic >= 2:
        return batch.offset + _v2_header(log, batch).last_offset_delta
    return batch.offset


def _dump_time_index(path: str, options: Options, problems: _Problems, out: IO[str]) -> None:
    with _LogFile(_sibling(path, LOG_SUFFIX)) as log:
        index = _Index(_sibling(path, INDEX_SUFFIX), _OFFSET_ENTRY)
        time_index = _Index(path, _TIME_ENTRY)
        if options.index_sanity_check:
            _time_index_sanity_check(time_index)
            out.write(f"{java_path(path)} passed sanity check.\n")
            return
        absolute = java_absolute_path(path)
        previous = -1
        for i in range(time_index.entries):
            timestamp, offset = time_index.time_entry(i)
            if offset == time_index.base_offset and i > 0:
                break
            position = index.lookup(offset)
            found = None
            for batch in iter_file_batches(log, position, _slice_end(log, position, INT_MAX)):
                if _last_offset(log, batch) >= offset:
                    found = batch
                    break
            if found is None:
                problems.time_not_found.setdefault(absolute, []).append((offset, -1))
            elif (found_last := _last_offset(log, found)) != offset:
                problems.time_not_found.setdefault(absolute, []).append((offset, found_last))
            else:
                max_timestamp = max([-1, *_batch_timestamps(log, found)])
                if max_timestamp != timestamp:
                    problems.time_mismatches.setdefault(absolute, []).append((timestamp, max_timestamp))
                if previous >= timestamp:
                    problems.time_out_of_order.setdefault(absolute, []).append((timestamp, previous))
            if not options.verify_index_only:
                out.write(f"timestamp: {timestamp} offset: {offset}\n")
            previous = timestamp


def _batch_timestamps(log: _LogFile, batch: FileBatch) -> list[int]:
    if batch.magic >= 2:
        header = _v2_header(log, batch)
        return [r.timestamp for r in _v2_records(log, batch, header)]
    wrapper = _legacy_entry_or_fail(log, batch)
    return [e.timestamp for e in _legacy_records(log, batch, wrapper)]


# -- producer snapshots, transaction indexes, leader epochs -----------------------------------------------


def _dump_producer_snapshot(path: str, out: IO[str], err: IO[str]) -> None:
    data = _read_file(path)
    try:
        entries = read_producer_snapshot(data)
    except DumpError as e:
        out.flush()
        err.write(f"{e}\n")
        return
    lines = []
    for pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch, txn_first in entries:
        line = (
            f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coordinator_epoch} "
            f"currentTxnFirstOffset: {_optional_long(txn_first if txn_first >= 0 else None)} "
            f"lastTimestamp: {timestamp} "
        )
        if last_offset >= 0:
            line += (
                f"firstSequence: {decrement_sequence(last_seq, delta)} lastSequence: {last_seq} "
                f"lastOffset: {last_offset} offsetDelta: {delta} timestamp: {timestamp}"
            )
        lines.append(line + "\n")
    out.write("".join(lines))


def read_producer_snapshot(data: bytes) -> list[tuple[int, ...]]:
    """The entries of a producer state snapshot (Kafka's ProducerStateManager.readSnapshot), as tuples
    (producer id, epoch, last sequence, last offset, offset delta, timestamp, coordinator epoch, current
    txn first offset); DumpError with Kafka's CorruptSnapshotException message."""
    prefix = "Snapshot failed schema validation: "
    if len(data) < 2:
        raise DumpError(prefix + "Error reading field 'version': java.nio.BufferUnderflowException")
    if len(data) < 6:
        raise DumpError(prefix + "Error reading field 'crc': java.nio.BufferUnderflowException")
    if len(data) < 10:
        raise DumpError(prefix + "Error reading field 'producer_entries': java.nio.BufferUnderflowException")
    version, crc, count = struct.unpack_from(">hIi", data)
    if count < 0:
        raise DumpError(
            prefix + f"Error reading field 'producer_entries': Array size {count} cannot be negative"
        )
    available = len(data) - 10
    if count > available:
        raise DumpError(
            prefix + f"Error reading field 'producer_entries': Error reading array of size {count}, "
            f"only {available} bytes available"
        )
    if available < count * _SNAPSHOT_ENTRY.size:
        raise DumpError(prefix + "Error reading field 'producer_entries': java.nio.BufferUnderflowException")
    if version != 1:
        raise DumpError(f"Snapshot contained an unknown file version {version}")
    computed = crc32c(data[6:])
    if crc != computed:
        raise DumpError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}"
        )
    return [_SNAPSHOT_ENTRY.unpack_from(data, 10 + i * _SNAPSHOT_ENTRY.size) for i in range(count)]


def _dump_txn_index(path: str, out: IO[str]) -> None:
    _base_offset_of(os.path.basename(java_path(path)))
    if not os.path.exists(path):
        return  # Kafka's TransactionIndex reads a missing file as empty
    data = _read_file(path)
    lines: list[str] = []
    for pos in range(0, len(data) - _ABORTED_TXN_SIZE + 1, _ABORTED_TXN_SIZE):
        version, pid, first, last, lso = _ABORTED_TXN.unpack_from(data, pos)
        if version > 0:
            out.write("".join(lines))
            raise DumpError(
                f"org.apache.kafka.common.KafkaException: Unexpected aborted transaction version {version} "
                f"in transaction index {java_absolute_path(path)}, current version is 0"
            )
        lines.append(
            f"version: {version} producerId: {pid} firstOffset: {first} lastOffset: {last} "
            f"lastStableOffset: {lso}\n"
        )
    out.write("".join(lines))


def _dump_leader_epoch_checkpoint(path: str, out: IO[str]) -> None:
    """Samsa's addition: the entries of a leader-epoch-checkpoint (version 0 text: version line, count
    line, "epoch startOffset" lines)."""
    text = _read_file(path).decode("utf-8", "replace")
    lines = text.splitlines()
    try:
        if int(lines[0]) != 0:
            raise DumpError(f"Unrecognized version of the checkpoint file {java_path(path)}: {lines[0]}")
        count = int(lines[1])
        entries = [tuple(int(f) for f in line.split()) for line in lines[2 : 2 + count]]
        if len(entries) != count or any(len(e) != 2 for e in entries):
            raise ValueError
    except (IndexError, ValueError):
        raise DumpError(f"Malformed line in checkpoint file ({java_path(path)})") from None
    out.write("".join(f"epoch: {epoch} startOffset: {start}\n" for epoch, start in entries))


# -- the command ------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    parser = _parser()
    if not argv or "--help" in argv:
        # Kafka's CommandLineUtils.printUsageAndExit: the description and the help on stderr, exit 1.
        print(DESCRIPTION, file=sys.stderr)
        parser.print_help(sys.stderr)
        return 1
    try:
        args = parser.parse_args(argv)
        if args.version:
            print(_version())
            return 0
        options = options_from(args)
    except UsageError as e:
        print(e, file=sys.stderr)
        parser.print_help(sys.stderr)
        return 1
    try:
        dump(options, sys.stdout, sys.stderr)
    except DumpError as e:
        sys.stdout.flush()
        print(e, file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as a shell tool does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("samsa-broker")
    except PackageNotFoundError:
        return "unknown"
