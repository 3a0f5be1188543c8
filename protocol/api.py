"""API keys, the header version each request and response uses, and the request/response classes per key."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from functools import cache
from typing import overload

from protocol.messages import Message, message_class
from protocol.schema import Versions, load_message, schema_paths


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    DESCRIBE_TOPIC_PARTITIONS = 75
    LIST_CONFIG_RESOURCES = 74


@dataclass(frozen=True)
class Api:
    """One API: its request and response classes and the versions its schema defines."""

    key: int
    name: str
    request: type[Message]
    response: type[Message]
    valid_versions: Versions
    flexible_versions: Versions

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible_versions

    def request_header_version(self, version: int) -> int:
        if self.key == ApiKey.CONTROLLED_SHUTDOWN and version == 0:
            return 0  # the one request that predates client ids
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        # ApiVersions answers with header v0 at every version, so that a client can read the reply
        # before it knows which versions the broker speaks (KIP-511).
        if self.key == ApiKey.API_VERSIONS:
            return 0
        return 1 if self.is_flexible(version) else 0


@cache
def _apis() -> dict[int, Api]:
    apis: dict[int, Api] = {}
    for name in schema_paths():
        if not name.endswith("Request"):
            continue
        spec = load_message(name)
        if spec.type != "request" or spec.api_key is None:
            continue
        base = name[: -len("Request")]
        apis[spec.api_key] = Api(
            key=spec.api_key,
            name=base,
            request=message_class(name),
            response=message_class(base + "Response"),
            valid_versions=spec.valid_versions,
            flexible_versions=spec.flexible_versions,
        )
    return apis


@overload
def api(key: ApiKey) -> Api: ...
@overload
def api(key: int) -> Api | None: ...
def api(key: int) -> Api | None:
    """The API with this key, or None if Samsa has no schema for it. Every ``ApiKey`` member has one (a
    test checks it), so ``api(ApiKey.FETCH)`` is typed ``Api``."""
    return _apis().get(key)
