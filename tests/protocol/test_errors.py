"""Checks protocol.errors against two independent copies of Kafka's error table.

kafka-python 3.0.12 (kafka.errors) stops at code 127 and keeps a few names of its own; kio 0.6.5
(kio.schema.errors) is generated from Kafka 4.x's table and carries its retriability and messages.
"""

import ast
import copy
import inspect
import pickle

import kafka.errors
import kio.schema.errors
import pytest

from protocol.errors import ErrorCode, KafkaError, description, retriable

# Where kafka-python's name differs from Kafka's. Kafka 2.6 renamed NOT_LEADER_FOR_PARTITION to
# NOT_LEADER_OR_FOLLOWER; the others are kafka-python's own spellings.
KAFKA_PYTHON_NAMES = {
    ErrorCode.UNKNOWN_SERVER_ERROR: "UNKNOWN",
    ErrorCode.NONE: "NO_ERROR",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_FOR_PARTITION",
    ErrorCode.MESSAGE_TOO_LARGE: "MESSAGE_SIZE_TOO_LARGE",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "INVALID_TOPIC",
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: "INVALID_REPLICATION_ASSIGNMENT",
}

# Kafka's CorruptRecordException is a RetriableException; kafka-python marks CORRUPT_MESSAGE fatal.
KAFKA_PYTHON_RETRIABLE_DIFFERS = {ErrorCode.CORRUPT_MESSAGE}

# Kafka 4.x codes that kafka-python 3.0.12's table does not have yet.
NOT_IN_KAFKA_PYTHON = set(range(128, 134))


def kafka_python_table() -> dict[int, list[type]]:
    table: dict[int, list[type]] = {}
    for cls in vars(kafka.errors).values():
        if inspect.isclass(cls) and issubclass(cls, kafka.errors.KafkaError):
            errno = getattr(cls, "errno", None)
            if errno is not None:
                table.setdefault(errno, []).append(cls)
    return table


def kio_messages() -> dict[int, str]:
    """Kafka's message per code, from the docstrings of kio's generated enum (absent at runtime)."""
    (enum_class,) = [
        node
        for node in ast.parse(inspect.getsource(kio.schema.errors)).body
        if isinstance(node, ast.ClassDef) and node.name == "ErrorCode"
    ]
    messages = {}
    for member, doc in zip(enum_class.body, [*enum_class.body[1:], None], strict=True):
        if isinstance(member, ast.Assign) and isinstance(member.value, ast.Tuple):
            code = ast.literal_eval(member.value)[0]
            is_doc = isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
            messages[code] = doc.value.value if is_doc else ""
    return messages


def test_codes_and_names_match_kafka_python() -> None:
    table = kafka_python_table()
    assert set(table) == {code.value for code in ErrorCode} - NOT_IN_KAFKA_PYTHON
    for errno, classes in table.items():
        code = ErrorCode(errno)
        names = {cls.message for cls in classes}
        assert names == {KAFKA_PYTHON_NAMES.get(code, code.name)}, (errno, names)


def test_retriable_matches_kafka_python() -> None:
    for errno, classes in kafka_python_table().items():
        code = ErrorCode(errno)
        expected = {cls.retriable for cls in classes}
        if code in KAFKA_PYTHON_RETRIABLE_DIFFERS:
            assert expected == {not retriable(code)}
        else:
            assert expected == {retriable(code)}, code


def test_matches_kafka_4_table_from_kio() -> None:
    theirs = {member.value: member for member in kio.schema.errors.ErrorCode}
    assert set(theirs) == {code.value for code in ErrorCode}
    messages = kio_messages()
    for code in ErrorCode:
        assert theirs[code].name.upper() == code.name
        assert theirs[code].retriable == retriable(code), code
        assert messages[code] == description(code), code


def test_codes_fit_int16_and_are_unique() -> None:
    values = [code.value for code in ErrorCode]
    assert len(values) == len(set(values))
    assert all(-(2**15) <= value < 2**15 for value in values)
    assert max(values) == 133


def test_lookups() -> None:
    assert retriable(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert retriable(6)
    assert not retriable(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    assert description(ErrorCode.REQUEST_TIMED_OUT) == "The request timed out."
    assert description(ErrorCode.NONE) == ""
    assert all(description(code) for code in ErrorCode if code is not ErrorCode.NONE)


def test_unknown_code_reads_as_unknown_server_error() -> None:
    assert not retriable(999)
    assert description(999) == description(ErrorCode.UNKNOWN_SERVER_ERROR)


def test_kafka_error_defaults_to_kafka_message() -> None:
    err = KafkaError(ErrorCode.NOT_COORDINATOR)
    assert err.code is ErrorCode.NOT_COORDINATOR
    assert err.message == "This is not the correct coordinator."
    assert err.retriable
    assert str(err) == "NOT_COORDINATOR: This is not the correct coordinator."


def test_kafka_error_takes_int_and_own_message() -> None:
    err = KafkaError(29, "Not authorized to access topics: [t]")
    assert err.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert err.message == "Not authorized to access topics: [t]"
    assert not err.retriable


def test_kafka_error_survives_pickle_and_copy() -> None:
    err = KafkaError(ErrorCode.INVALID_REQUEST, "bad")
    for clone in (pickle.loads(pickle.dumps(err)), copy.copy(err)):
        assert (clone.code, clone.message) == (ErrorCode.INVALID_REQUEST, "bad")


def test_kafka_error_rejects_none_and_unknown_codes() -> None:
    with pytest.raises(ValueError):
        KafkaError(ErrorCode.NONE)
    with pytest.raises(ValueError):
        KafkaError(999)
