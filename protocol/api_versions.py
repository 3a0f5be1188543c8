"""The API versions Samsa advertises in ApiVersions, once a handler exists for the API.

Every client negotiates ``min(client max, broker max)`` per API, so these ranges decide what Samsa must
implement. They are Kafka 3.9's (ZooKeeper mode), API by API (``tests/protocol/test_kafka39_ranges.py``
pins them and names the APIs not served yet), so clients that infer a broker's version from them
(kafka-python) take Samsa for Kafka 3.9. The versions Kafka 4 dropped (KIP-896) are decoded through
``protocol.schema.KAFKA39_FLOORS``.

The low ends matter even though no current client uses them: librdkafka before 2.11.1 (Debian's kcat)
turns features on only when the advertised range *contains* specific old versions (Produce 3 and 7,
Fetch 4 and 10, ApiVersions 0, FindCoordinator 0, OffsetCommit 2, OffsetFetch 1, the group APIs 0,
ListOffsets 1, InitProducerId 0, SaslHandshake 0 and 1, SaslAuthenticate 0); otherwise it silently falls
back to magic-0 message sets. See docs/architecture.md and the research notes on client versions.

Produce is served from v3 but advertised from v0, as Kafka 3.9 advertises it: the same librdkafka
compresses with gzip, snappy and lz4 only when the advertised range includes Produce v0 (KAFKA-18659;
Kafka 4 advertises 0 too). A Produce below v3 (magic 0/1 message sets) is refused like any unsupported
version (the connection is closed). Fetch v0-3 is served, its records down-converted to magic 0/1
(``protocol.down_convert``).
"""

from __future__ import annotations

from protocol.api import ApiKey

ADVERTISED_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 11),
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
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.UPDATE_FEATURES: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
}

# The lowest version named in the ApiVersions response where it differs from the lowest one served.
ADVERTISED_MINIMUM: dict[int, int] = {ApiKey.PRODUCE: 0}
