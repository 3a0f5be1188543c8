"""How ``samsa dump-log`` turns a record's key and value into text: Kafka 3.9's DumpLogSegments parsers.

- ``DecoderParser``: ``--key-decoder-class`` / ``--value-decoder-class``, Kafka's ``org.apache.kafka.
  tools.api`` decoders (``StringDecoder``, the default; ``IntegerDecoder``, ``LongDecoder``,
  ``DefaultDecoder``) and their deprecated ``kafka.serializer`` names (which print Kafka's deprecation
  line). A null key or value prints nothing.
- ``OffsetsParser``: ``--offsets-decoder``, the records of ``__consumer_offsets`` as Kafka's
  ``OffsetsMessageParser`` prints them: ``{"type":"<key version>","data":{...}}`` for the key and
  ``{"version":"<value version>","data":{...}}`` (or ``<DELETE>``) for the value, the data written as
  Kafka's generated JsonConverters write them (schema order, the fields of that version, bytes in
  base64; a consumer group's member subscription and assignment decoded).
- ``TransactionLogParser``: ``--transaction-log-decoder``, ``__transaction_state`` as Kafka's
  ``TransactionLog.formatRecordKeyAndValue``: ``transaction_metadata::transactionalId=...`` and
  ``producerId:..,producerEpoch:..,state=..,partitions=[..],txnLastUpdateTimestamp=..,txnTimeoutMs=..``.
  Kafka keeps the partitions in a Scala ``mutable.HashSet`` and prints them in its iteration order,
  which ``scala_hash_order`` reproduces (Java's hash codes, Scala 2.13's table).

A parser's ``parse(offset, key, value)`` returns (key text, payload text), either None when Kafka prints
none; it raises ``DumpError`` where Kafka's tool stops with an exception.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from coordinator import offsets_records, transaction_records
from protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from protocol.primitives import DecodeError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_INT_MASK = 0xFFFFFFFF


class DumpError(Exception):
    """What stops Kafka's DumpLogSegments with an exception: printed on stderr, exit code 1."""


class MessageParser(Protocol):
    def parse(self, offset: int, key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]: ...


# -- --key-decoder-class / --value-decoder-class -------------------------------------------------------

_API = "org.apache.kafka.tools.api."
_DEPRECATED = "kafka.serializer."
DECODER_NAMES = ("StringDecoder", "IntegerDecoder", "LongDecoder", "DefaultDecoder")
DEFAULT_DECODER = _API + "StringDecoder"


def _string_decoder(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _integer_decoder(data: bytes) -> str:
    if len(data) < 4:
        raise DumpError("java.nio.BufferUnderflowException (IntegerDecoder needs 4 bytes)")
    return str(_I32.unpack_from(data)[0])


def _long_decoder(data: bytes) -> str:
    if len(data) < 8:
        raise DumpError("java.nio.BufferUnderflowException (LongDecoder needs 8 bytes)")
    return str(_I64.unpack_from(data)[0])


def _default_decoder(data: bytes) -> str:
    # Kafka prints the Java byte array object itself ("[B@1b6d3586"), which says nothing of the bytes;
    # Samsa prints them in hex.
    return data.hex()


_DECODERS = {
    "StringDecoder": _string_decoder,
    "IntegerDecoder": _integer_decoder,
    "LongDecoder": _long_decoder,
    "DefaultDecoder": _default_decoder,
}


def check_decoder_class(name: str) -> None:
    """Raises DumpError for a class Samsa does not have (Kafka loads any class on its classpath)."""
    short = name.removeprefix(_API).removeprefix(_DEPRECATED)
    if name not in (_API + short, _DEPRECATED + short) or short not in _DECODERS:
        known = ", ".join(_API + n for n in DECODER_NAMES)
        raise DumpError(f"java.lang.ClassNotFoundException: {name} (the decoders Samsa knows: {known})")


class DecoderParser:
    """Kafka's DecoderMessageParser. Made once per dumped log file, as Kafka makes it, so that the
    deprecation lines of ``kafka.serializer.*`` names come out where Kafka prints them."""

    def __init__(self, key_decoder: str, value_decoder: str, out: Any) -> None:
        # Kafka builds the value decoder first.
        self._value = self._decoder(value_decoder, out)
        self._key = self._decoder(key_decoder, out)

    @staticmethod
    def _decoder(name: str, out: Any) -> Any:
        check_decoder_class(name)
        if name.startswith(_DEPRECATED):
            short = name.removeprefix(_DEPRECATED)
            out.write(f"{name} is deprecated. Please use {_API}{short} instead\n")
        return _DECODERS[name.rsplit(".", 1)[1]]

    def parse(self, offset: int, key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
        key_text = None if key is None else self._key(key)
        return key_text, (None if value is None else self._value(value))


# -- JSON as Jackson writes it ------------------------------------------------------------------------

_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def json_string(text: str) -> str:
    """A JSON string as Jackson writes one: quotes, backslashes and control characters escaped
    (``\\u00XX`` upper case), everything else as is."""
    out = ['"']
    for ch in text:
        if ch in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[ch])
        elif ch < " ":
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def json_value(value: Any) -> str:
    """Compact JSON of str / int / bool / None / bytes (base64, as Jackson's BinaryNode) / list / dict."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return json_string(base64.b64encode(bytes(value)).decode("ascii"))
    if isinstance(value, dict):
        return "{" + ",".join(f"{json_string(k)}:{json_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(json_value(v) for v in value) + "]"
    raise TypeError(f"no JSON for {type(value).__name__}")


def _camel(name: str) -> str:
    """Kafka's FieldSpec.camelCaseName: the schema name with its first letter in lower case."""
    return name[:1].lower() + name[1:]


def message_json(message: Any, version: int) -> dict[str, Any]:
    """A decoded protocol message (protocol.messages) as Kafka's generated JsonConverter writes it at
    ``version``: the fields of that version in schema order, tagged fields only when not default."""
    node: dict[str, Any] = {}
    for spec in message._specs:
        if version not in spec.versions:
            continue
        value = getattr(message, spec.attr)
        if version in spec.tagged_versions and value == _default_of(spec):
            continue
        if spec.is_array and spec.is_struct:
            node[_camel(spec.name)] = None if value is None else [message_json(v, version) for v in value]
        elif spec.is_struct:
            node[_camel(spec.name)] = None if value is None else message_json(value, version)
        else:
            node[_camel(spec.name)] = value
    return node


def _default_of(spec: Any) -> Any:
    if spec.default in (None, "null"):
        return None if spec.default == "null" else ([] if spec.is_array else None)
    try:
        return int(spec.default, 0)
    except ValueError:
        return spec.default


# -- --offsets-decoder ---------------------------------------------------------------------------------

CONSUMER_PROTOCOL_TYPE = "consumer"
# Kafka 3.9's GroupCoordinatorRecordSerde: key versions 3-8 are KIP-848 consumer group records.
_NEW_GROUP_RECORD_TYPES = range(3, 9)


class OffsetsParser:
    """Kafka's OffsetsMessageParser (``--offsets-decoder``)."""

    def parse(self, offset: int, key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
        if key is None:
            raise DumpError(
                f"Failed to decode message at offset {offset} using offset topic decoder "
                "(message had a missing key)"
            )
        try:
            return self._parse(offset, key, value)
        except _UnknownRecordType as e:
            return f"Unknown record type {e.record_type} at offset {offset}, skipping.", None
        except _RecordError as e:
            return f"Error at offset {offset}, skipping. {e}", None

    def _parse(self, offset: int, key: bytes, value: bytes | None) -> tuple[str, str]:
        record_type = _read_version(key, "key")
        if record_type in _NEW_GROUP_RECORD_TYPES:
            raise _RecordError(
                f"Could not read record with version {record_type} from key's buffer due to: "
                "KIP-848 consumer group records are not read by Samsa."
            )
        if record_type not in (0, 1, 2):
            raise _UnknownRecordType(record_type)
        try:
            decoded_key = offsets_records.decode_key(key)
        except (DecodeError, offsets_records.UnknownRecordError) as e:
            raise _RecordError(
                f"Could not read record with version {record_type} from key's buffer due to: {e}."
            ) from None
        if isinstance(decoded_key, offsets_records.OffsetCommitKey):
            key_data: dict[str, Any] = {
                "group": decoded_key.group,
                "topic": decoded_key.topic,
                "partition": decoded_key.partition,
            }
        else:
            key_data = {"group": decoded_key.group}
        key_text = json_value({"type": str(record_type), "data": key_data})
        if value is None:
            return key_text, "<DELETE>"
        version = _read_version(value, "value")
        name = "OffsetCommitValue" if record_type in (0, 1) else "GroupMetadataValue"
        if version < 0 or version > 4:
            raise _RecordError(
                f"Could not read record with version {version} from value's buffer due to: "
                f"Can't read version {version} of {name}."
            )
        try:
            if record_type in (0, 1):
                data = _offset_commit_json(offsets_records.decode_offset_commit_value(value), version)
            else:
                data = _group_metadata_json(offsets_records.decode_group_metadata_value(value), version)
        except (DecodeError, offsets_records.UnknownRecordError) as e:
            raise _RecordError(
                f"Could not read record with version {version} from value's buffer due to: {e}."
            ) from None
        return key_text, json_value({"version": str(version), "data": data})


class _UnknownRecordType(Exception):
    def __init__(self, record_type: int) -> None:
        super().__init__(record_type)
        self.record_type = record_type


class _RecordError(Exception):
    pass


def _read_version(buf: bytes, name: str) -> int:
    if len(buf) < 2:
        raise _RecordError(f"Could not read version from {name}'s buffer.")
    return int(_I16.unpack_from(buf)[0])


def _offset_commit_json(value: Any, version: int) -> dict[str, Any]:
    data: dict[str, Any] = {"offset": value.offset}
    if version >= 3:
        data["leaderEpoch"] = value.leader_epoch
    data["metadata"] = value.metadata
    data["commitTimestamp"] = value.commit_timestamp
    if version == 1:
        data["expireTimestamp"] = value.expire_timestamp
    return data


def _group_metadata_json(value: offsets_records.GroupMetadataValue, version: int) -> dict[str, Any]:
    data: dict[str, Any] = {
        "protocolType": value.protocol_type,
        "generation": value.generation,
        "protocol": value.protocol,
        "leader": value.leader,
    }
    if version >= 2:
        data["currentStateTimestamp"] = value.current_state_timestamp
    consumer = value.protocol_type == CONSUMER_PROTOCOL_TYPE
    members = []
    for m in value.members:
        member: dict[str, Any] = {"memberId": m.member_id}
        if version >= 3:
            member["groupInstanceId"] = m.group_instance_id
        member["clientId"] = m.client_id
        member["clientHost"] = m.client_host
        if version >= 1:
            member["rebalanceTimeout"] = m.rebalance_timeout
        member["sessionTimeout"] = m.session_timeout
        # Kafka decodes the embedded consumer protocol, keeping the bytes (base64) when that fails.
        subscription = _embedded(m.subscription, ConsumerProtocolSubscription) if consumer else None
        assignment = _embedded(m.assignment, ConsumerProtocolAssignment) if consumer else None
        member["subscription"] = m.subscription if subscription is None else subscription
        member["assignment"] = m.assignment if assignment is None else assignment
        members.append(member)
    data["members"] = members
    return data


def _embedded(data: bytes, message_class: Any) -> dict[str, Any] | None:
    """A consumer protocol subscription or assignment (int16 version, then the message) as JSON; None
    when it does not read (Kafka then keeps the bytes)."""
    if len(data) < 2:
        return None
    version = _I16.unpack_from(data)[0]
    if version < 0:
        return None
    try:
        # Kafka reads any version with the newest layout it knows (ConsumerProtocol's compatibility rule).
        message = message_class.decode(memoryview(data)[2:], min(version, 3))
    except (DecodeError, ValueError, struct.error, IndexError):
        return None
    return message_json(message, version)


# -- --transaction-log-decoder -------------------------------------------------------------------------

# Kafka's TransactionState ids and names.
TRANSACTION_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)


class TransactionLogParser:
    """Kafka's TransactionLogMessageParser (``--transaction-log-decoder``)."""

    def parse(self, offset: int, key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
        if key is None:
            raise DumpError(f"java.lang.NullPointerException: record at offset {offset} has no key")
        if len(key) < 2:
            raise DumpError(f"java.nio.BufferUnderflowException: the key at offset {offset} has no version")
        key_version = _I16.unpack_from(key)[0]
        if key_version != transaction_records.TRANSACTION_LOG_KEY_VERSION:
            return f"unknown::version={key_version}", None
        try:
            transactional_id = transaction_records.decode_key(key)
        except (DecodeError, transaction_records.UnknownRecordError) as e:
            raise DumpError(f"the key at offset {offset} does not read: {e}") from None
        key_text = f"transaction_metadata::transactionalId={transactional_id}"
        if value is None:
            return key_text, "<DELETE>"
        if len(value) < 2:
            raise DumpError(f"java.nio.BufferUnderflowException: the value at offset {offset} has no version")
        version = _I16.unpack_from(value)[0]
        if version not in (0, 1):
            raise DumpError(f"Unknown version {version} from the transaction log message value")
        try:
            txn = transaction_records.decode_value(value)
        except (DecodeError, transaction_records.UnknownRecordError) as e:
            raise DumpError(f"the value at offset {offset} does not read: {e}") from None
        if not 0 <= txn.transaction_status < len(TRANSACTION_STATES):
            raise DumpError(
                f"Unknown transaction state id {txn.transaction_status} from the transaction status message"
            )
        state = TRANSACTION_STATES[txn.transaction_status]
        partitions: list[str] = []
        if state != "Empty" and txn.transaction_partitions:
            partitions = transaction_partitions_order(txn.transaction_partitions)
        text = (
            f"producerId:{txn.producer_id},producerEpoch:{txn.producer_epoch},state={state},"
            f"partitions=[{','.join(partitions)}],"
            f"txnLastUpdateTimestamp={txn.transaction_last_update_timestamp_ms},"
            f"txnTimeoutMs={txn.transaction_timeout_ms}"
        )
        return key_text, text


# -- Scala 2.13 hash table order --------------------------------------------------------------------------


def _int32(value: int) -> int:
    value &= _INT_MASK
    return value - (1 << 32) if value & 0x80000000 else value


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, int arithmetic)."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _INT_MASK
    return _int32(h)


def topic_partition_hash(topic: str, partition: int) -> int:
    """Kafka's TopicPartition.hashCode."""
    return _int32(31 * (31 + partition) + java_string_hash(topic))


class ScalaHashTable:
    """The iteration order of Scala 2.13's ``mutable.HashSet`` / ``mutable.HashMap`` (one algorithm):
    the table is indexed by ``h ^ (h >>> 16)`` masked to its power-of-two length (16 at first, doubled
    when an add would reach 3/4 full), every bucket is kept sorted by that improved hash (equal hashes
    in insertion order), and iteration walks the buckets in order."""

    def __init__(self) -> None:
        self._table: list[list[tuple[int, Any]]] = [[] for _ in range(16)]
        self._size = 0

    @property
    def _threshold(self) -> int:
        return int(len(self._table) * 0.75)

    def _grow(self, new_length: int) -> None:
        table: list[list[tuple[int, Any]]] = [[] for _ in range(new_length)]
        for bucket in self._table:
            for node in bucket:
                table[node[0] & (new_length - 1)].append(node)
        self._table = table

    def size_hint(self, size: int) -> None:
        capacity = int((size + 1) / 0.75)
        target = 8
        while target < capacity:
            target *= 2
        target = min(target, 1 << 30)
        if target > len(self._table):
            self._grow(target)

    def add(self, key: Any, java_hash: int, check_growth: bool = True) -> bool:
        if check_growth and self._size + 1 >= self._threshold:
            self._grow(len(self._table) * 2)
        h = java_hash & _INT_MASK
        improved = _int32(h ^ (h >> 16))
        bucket = self._table[improved & (len(self._table) - 1)]
        i = 0
        while i < len(bucket) and bucket[i][0] <= improved:
            if bucket[i][0] == improved and bucket[i][1] == key:
                return False
            i += 1
        bucket.insert(i, (improved, key))
        self._size += 1
        return True

    def add_all(self, items: Sequence[tuple[Any, int]]) -> None:
        """``++=`` of an immutable Set of these (key, hash) pairs: a size hint, then each added (without
        the growth check when the set has more than four elements: an immutable.HashSet)."""
        self.size_hint(len(items))
        for key, java_hash in items:
            self.add(key, java_hash, check_growth=len(items) <= 4)

    def __iter__(self) -> Any:
        for bucket in self._table:
            for _, key in bucket:
                yield key


def transaction_partitions_order(partitions: Iterable[tuple[str, Sequence[int]]]) -> list[str]:
    """``topic-partition`` names in the order Kafka prints a transaction's partitions: each topic's
    partitions added as a set to a mutable.HashSet, as TransactionMetadata.addPartitions does."""
    table = ScalaHashTable()
    for topic, ids in partitions:
        distinct = list(dict.fromkeys(ids))
        table.add_all([((topic, p), topic_partition_hash(topic, p)) for p in distinct])
    return [f"{topic}-{partition}" for topic, partition in table]


def scala_map_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of a Scala mutable.HashMap whose String keys were put in this order (each put
    checks growth first, even for a key already there)."""
    table = ScalaHashTable()
    for key in keys:
        table.add(key, java_string_hash(key))
    return list(table)
