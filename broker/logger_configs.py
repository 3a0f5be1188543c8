"""BROKER_LOGGER config resources: the broker's loggers and their levels, as Kafka 3.9 serves them
(ConfigHelper for DescribeConfigs, RuntimeLoggerManager for IncrementalAlterConfigs) over log4j.

Samsa's loggers are Python's: ``root`` and every logger created so far (``broker.server``,
``storage.log``, ...), reported at their effective level in log4j's names (TRACE, DEBUG, INFO, WARN,
ERROR, FATAL); SET changes a logger's level, DELETE unsets it (it inherits its parent's again). As in
Kafka, the change lasts until the broker restarts.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from broker.config_entries import ConfigEntry, ConfigSource
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import IncrementalAlterConfigsRequest
from server_common.config import ConfigType

log = logging.getLogger(__name__)

ROOT_LOGGER = "root"
TRACE = 5  # below DEBUG, as log4j's TRACE
_TO_KAFKA = {TRACE: "TRACE", logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARN"}
_TO_KAFKA.update({logging.ERROR: "ERROR", logging.CRITICAL: "FATAL"})
_FROM_KAFKA = {name: level for level, name in _TO_KAFKA.items()}
VALID_LOG_LEVELS_STRING = ", ".join(sorted(_FROM_KAFKA))
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def kafka_level(level: int) -> str:
    """A Python level as log4j names it (the nearest at or above it)."""
    for threshold in sorted(_TO_KAFKA):
        if level <= threshold:
            return _TO_KAFKA[threshold]
    return "FATAL"


def _existing(name: str) -> logging.Logger | None:
    if name == ROOT_LOGGER:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def logger_levels() -> dict[str, str]:
    """Kafka's Log4jController.loggers: root, then every logger at its effective level."""
    levels = {ROOT_LOGGER: kafka_level(logging.getLogger().level)}
    for name, logger in sorted(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            levels[name] = kafka_level(logger.getEffectiveLevel())
    return levels


def check_node_id(name: str, broker_id: int, describe: bool) -> None:
    """The resource names this broker (the messages of ConfigHelper / RuntimeLoggerManager)."""
    if describe and not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    try:
        requested = int(name)
    except ValueError:
        kind = "Broker" if describe else "Node"
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"{kind} id must be an integer, but it is: {name}"
        ) from None
    if requested != broker_id:
        message = (
            f"Unexpected broker id, expected {broker_id} but received {name}"
            if describe
            else f"Unexpected node id. Expected {broker_id}, but received {name}"
        )
        raise KafkaError(ErrorCode.INVALID_REQUEST, message)


def logger_entries() -> list[ConfigEntry]:
    """DescribeConfigs of BROKER_LOGGER: each logger, writable, with no type (Kafka sets none)."""
    return [
        ConfigEntry(
            name, level, ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, False, False, ConfigType.UNKNOWN, None
        )
        for name, level in logger_levels().items()
    ]


def alter_loggers(ops: Sequence[IncrementalAlterConfigsRequest.AlterableConfig], validate_only: bool) -> None:
    """RuntimeLoggerManager.applyChangesForResource: every operation checked, then (unless
    ``validate_only``) applied."""
    for op in ops:
        name, kind = op.name, op.config_operation
        if kind in (SET, DELETE):
            if _existing(name) is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
            if kind == SET and op.value not in _FROM_KAFKA:
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG,
                    f"Cannot set the log level of {name} to {op.value} as it is not a supported log level. "
                    f"Valid log levels are {VALID_LOG_LEVELS_STRING}",
                )
            if kind == DELETE and name == ROOT_LOGGER:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"Removing the log level of the {ROOT_LOGGER} logger is not allowed",
                )
        elif kind in (APPEND, SUBTRACT):
            verb = "APPEND" if kind == APPEND else "SUBTRACT"
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"{verb} operation is not allowed for the BROKER_LOGGER resource"
            )
        else:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Unknown operation type {kind} is not allowed for the BROKER_LOGGER resource",
            )
    if validate_only:
        return
    for op in ops:
        logger = _existing(op.name)
        assert logger is not None
        if op.config_operation == SET:
            assert op.value is not None
            logger.setLevel(_FROM_KAFKA[op.value])
            log.warning("Updated the log level of %s to %s", op.name, op.value)
        else:
            logger.setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", op.name)
