"""The API version ranges Samsa advertises are Kafka 3.9's (ZooKeeper mode), API by API.

Kafka 3.9's ranges are written out here as data (they are what a Kafka 3.9 broker answers ApiVersions
with; kafka-python keeps the same table to infer a broker's version). An API Samsa does not serve yet
is listed with the issue that builds it; one served below Kafka's floor is listed with its reason.
"""

from __future__ import annotations

from protocol.api import ApiKey
from protocol.api_versions import ADVERTISED_MINIMUM, ADVERTISED_VERSIONS

# The delegation-token APIs, which protocol.api does not name (the vendored Kafka 4 schemas lack them).
CREATE_DELEGATION_TOKEN, RENEW_DELEGATION_TOKEN, EXPIRE_DELEGATION_TOKEN, DESCRIBE_DELEGATION_TOKEN = (
    38,
    39,
    40,
    41,
)

KAFKA_39: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 11),
    ApiKey.FETCH: (0, 17),
    ApiKey.LIST_OFFSETS: (0, 9),
    ApiKey.METADATA: (0, 12),
    ApiKey.LEADER_AND_ISR: (0, 7),
    ApiKey.STOP_REPLICA: (0, 4),
    ApiKey.UPDATE_METADATA: (0, 8),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3),
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    CREATE_DELEGATION_TOKEN: (0, 3),
    RENEW_DELEGATION_TOKEN: (0, 2),
    EXPIRE_DELEGATION_TOKEN: (0, 2),
    DESCRIBE_DELEGATION_TOKEN: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.UPDATE_FEATURES: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
}

# Served by Kafka 3.9 but not (yet) by Samsa, with the issue that builds each.
NOT_SERVED_YET: dict[int, str] = {
    CREATE_DELEGATION_TOKEN: "delegation tokens (no issue yet)",
    RENEW_DELEGATION_TOKEN: "delegation tokens (no issue yet)",
    EXPIRE_DELEGATION_TOKEN: "delegation tokens (no issue yet)",
    DESCRIBE_DELEGATION_TOKEN: "delegation tokens (no issue yet)",
}

# Advertised as Kafka 3.9 does, but served from a higher version (the lower ones are refused).
SERVED_FROM: dict[int, int] = {
    # Magic 0/1 produce requests; see protocol/api_versions.py for why v0 is still advertised.
    ApiKey.PRODUCE: 3,
}


def test_every_api_kafka_39_serves_is_advertised_at_its_range_or_named_as_missing() -> None:
    for key, (low, high) in KAFKA_39.items():
        name = ApiKey(key).name if key in ApiKey._value2member_map_ else str(key)
        if key in NOT_SERVED_YET:
            assert key not in ADVERTISED_VERSIONS, f"{name} is served now: drop it from NOT_SERVED_YET"
            continue
        assert key in ADVERTISED_VERSIONS, f"{name} is not advertised"
        served_low, served_high = ADVERTISED_VERSIONS[key]
        advertised = (ADVERTISED_MINIMUM.get(key, served_low), served_high)
        assert advertised == (low, high), f"{name}: advertised {advertised}, Kafka 3.9 {(low, high)}"
        assert served_low == SERVED_FROM.get(key, low), f"{name} is served from v{served_low}"


def test_samsa_advertises_no_api_kafka_39_does_not_serve() -> None:
    assert set(ADVERTISED_VERSIONS) <= set(KAFKA_39)
