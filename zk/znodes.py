"""Kafka's ZooKeeper layout: the paths and the JSON stored at each (as Kafka 3.x's ``ZkData`` writes them),
so that Kafka's own tools could read a Samsa cluster's ZooKeeper and the other way round."""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
BROKER_SEQUENCE_ID = "/brokers/seqid"
TOPICS = "/brokers/topics"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_USERS = "/config/users"  # SCRAM credentials (and, in Kafka, user quotas): zk/user_configs.py
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
# JBOD: a broker whose log dir failed writes a sequential child here; the controller watches it.
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1
CLUSTER_ID = "/cluster/id"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"

# Created at startup by whoever gets there first, so that watches and children listings can be set.
PERSISTENT_PATHS = (
    BROKER_IDS,
    TOPICS,
    CONFIG_TOPICS,
    CONFIG_BROKERS,
    CONFIG_USERS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
    "/cluster",
    BROKER_SEQUENCE_ID,
)

LEADER_NONE = -1  # no leader: the partition is offline


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _load(data: bytes) -> Any:
    return json.loads(data.decode())


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


@dataclass(frozen=True)
class BrokerRegistration:
    """``/brokers/ids/<id>`` (ephemeral), version 5 of Kafka's format."""

    id: int
    endpoints: dict[str, tuple[str, int]]  # listener -> (host, port)
    security_protocols: dict[str, str]  # listener -> security protocol
    rack: str | None = None

    def encode(self) -> bytes:
        plaintext = next(
            (self.endpoints[name] for name, proto in self.security_protocols.items() if proto == "PLAINTEXT"),
            (None, -1),
        )
        body: dict[str, Any] = {
            "version": 5,
            "host": plaintext[0],
            "port": plaintext[1],
            "endpoints": [f"{name}://{host}:{port}" for name, (host, port) in self.endpoints.items()],
            "jmx_port": -1,
            "timestamp": str(int(time.time() * 1000)),
            "listener_security_protocol_map": dict(self.security_protocols),
            "features": {},
        }
        if self.rack is not None:
            body["rack"] = self.rack
        return _dump(body)

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        body = _load(data)
        endpoints: dict[str, tuple[str, int]] = {}
        for item in body.get("endpoints", []):
            listener, _, address = item.partition("://")
            host, _, port = address.rpartition(":")
            endpoints[listener] = (host.strip("[]"), int(port))
        protocols = body.get("listener_security_protocol_map") or {name: name for name in endpoints}
        return cls(broker_id, endpoints, protocols, body.get("rack"))


@dataclass
class TopicAssignment:
    """``/brokers/topics/<topic>``: partition -> replicas (the first is the preferred leader), topic id."""

    partitions: dict[int, list[int]]
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        return _dump(
            {
                "version": 3,
                "topic_id": topic_id_string(self.topic_id),
                "partitions": {str(p): r for p, r in sorted(self.partitions.items())},
                "adding_replicas": {str(p): r for p, r in self.adding_replicas.items()},
                "removing_replicas": {str(p): r for p, r in self.removing_replicas.items()},
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> TopicAssignment:
        body = _load(data)
        topic_id = parse_topic_id(body["topic_id"]) if body.get("topic_id") else uuid.uuid4()
        return cls(
            {int(p): list(r) for p, r in body.get("partitions", {}).items()},
            topic_id,
            {int(p): list(r) for p, r in (body.get("adding_replicas") or {}).items()},
            {int(p): list(r) for p, r in (body.get("removing_replicas") or {}).items()},
        )


def topic_id_string(topic_id: uuid.UUID) -> str:
    """Kafka prints a Uuid as base64url without padding (22 characters)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def parse_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


@dataclass(frozen=True)
class PartitionState:
    """``/brokers/topics/<t>/partitions/<p>/state``: the leader, its epoch, the ISR and the controller
    epoch that wrote it. ``zk_version`` (the node's version) guards conditional updates."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1

    def encode(self) -> bytes:
        return _dump(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": 1,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
            }
        )

    @classmethod
    def decode(cls, data: bytes, zk_version: int) -> PartitionState:
        body = _load(data)
        return cls(
            body["leader"], body["leader_epoch"], tuple(body["isr"]), body["controller_epoch"], zk_version
        )


def encode_controller(controller_id: int, endpoints: list[str] | None = None) -> bytes:
    """Kafka's /controller, plus ``endpoints``: the controller process's own listener (Samsa's
    controller is not a broker, so brokers could not find it otherwise; Kafka's readers ignore it)."""
    body: dict[str, Any] = {
        "version": 1,
        "brokerid": controller_id,
        "timestamp": str(int(time.time() * 1000)),
    }
    if endpoints:
        body["endpoints"] = endpoints
    return _dump(body)


def decode_controller(data: bytes) -> int:
    return int(_load(data)["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    """Kafka's /controller_epoch: the epoch as a decimal number, no JSON."""
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


def decode_controller_endpoint(data: bytes, listener: str | None = None) -> tuple[str, int] | None:
    """(host, port) of the active controller's listener named ``listener`` (a broker's inter-broker
    listener, any case) if /controller names one, else of its first listener; None without any."""
    endpoints = _load(data).get("endpoints") or []
    if not endpoints:
        return None
    chosen = next(
        (e for e in endpoints if listener and e.partition("://")[0].upper() == listener.upper()), endpoints[0]
    )
    host, _, port = chosen.partition("://")[2].rpartition(":")
    return host.strip("[]"), int(port)


def encode_config(config: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": config})


def decode_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    return {k: str(v) for k, v in (_load(data).get("config") or {}).items()}


def encode_config_change(entity_type: str, entity_name: str) -> bytes:
    return _dump({"version": 2, "entity_path": f"{entity_type}/{entity_name}"})


def decode_config_change(data: bytes) -> tuple[str, str]:
    entity_type, _, name = _load(data)["entity_path"].partition("/")
    return entity_type, name


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return _load(data)["id"]


def encode_partitions(partitions: list[tuple[str, int]]) -> bytes:
    """The body of an ISR change notification or a preferred replica election."""
    return _dump({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_partitions(data: bytes) -> list[tuple[str, int]]:
    return [(item["topic"], int(item["partition"])) for item in _load(data).get("partitions", [])]


def encode_producer_id_block(broker_id: int, block_start: int, block_end: int) -> bytes:
    return _dump(
        {"version": 1, "broker": broker_id, "block_start": str(block_start), "block_end": str(block_end)}
    )


def decode_producer_id_block(data: bytes) -> tuple[int, int, int]:
    body = _load(data)
    return int(body["broker"]), int(body["block_start"]), int(body["block_end"])


# -- /feature (Kafka's FeatureZNode, KIP-584) ------------------------------------------------------

FEATURE = "/feature"
FEATURE_ZNODE_V1, FEATURE_ZNODE_V2 = 1, 2  # V2 (IBP 3.3+) drops each feature's min_version_level
FEATURE_STATUS_DISABLED, FEATURE_STATUS_ENABLED = 0, 1


def encode_feature_znode(features: dict[str, int], status: int = FEATURE_STATUS_ENABLED) -> bytes:
    """``{"features":{name:{"max_version_level":n}},"version":2,"status":1}`` (FeatureZNode.encode)."""
    return _dump(
        {
            "features": {name: {"max_version_level": level} for name, level in features.items()},
            "version": FEATURE_ZNODE_V2,
            "status": status,
        }
    )


def decode_feature_znode(data: bytes) -> tuple[int, dict[str, int]]:
    """(status, finalized features) of a FeatureZNode of version 1 or 2; ValueError if malformed, with
    Kafka's FeatureZNode.decode checks."""
    try:
        body = _load(data)
    except ValueError as e:
        raise ValueError(f"Failed to parse feature information: {data!r}") from e
    version = body.get("version")
    if not isinstance(version, int) or not FEATURE_ZNODE_V1 <= version <= FEATURE_ZNODE_V2:
        raise ValueError(f"Unsupported version: {version} of feature information: {data!r}")
    status = body.get("status")
    if status not in (FEATURE_STATUS_DISABLED, FEATURE_STATUS_ENABLED):
        raise ValueError(f"Malformed status: {status} found in feature information: {data!r}")
    raw = body.get("features")
    if not isinstance(raw, dict):
        raise ValueError(f"Features map can not be absent in: {data!r}")
    features: dict[str, int] = {}
    for name, levels in raw.items():
        if not isinstance(levels, dict) or "max_version_level" not in levels:
            raise ValueError(f"max_version_level absent in [{levels}]")
        if version == FEATURE_ZNODE_V1 and "min_version_level" not in levels:
            raise ValueError(f"min_version_level absent in [{levels}]")
        level = int(levels["max_version_level"])
        if level < 1:
            raise ValueError(f"Expected maxValue >= 1, but received maxValue: {level}")
        features[name] = level
    return status, features


def encode_log_dir_event(broker_id: int) -> bytes:
    """A log dir failure event of ``broker_id`` (Kafka's LogDirEventNotificationSequenceZNode)."""
    return _dump({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int | None:
    """The broker id of a log dir failure event; None if the node is not one."""
    try:
        body = _load(data)
        return int(body["broker"]) if body.get("event") == LOG_DIR_FAILURE_EVENT else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
