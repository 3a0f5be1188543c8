"""DynamicBrokerConfig: the broker's settings as they stand, server.properties under ZooKeeper overrides.

Kafka lets some broker settings change at runtime, stored in ``/config/brokers/<id>`` (this broker) and
``/config/brokers/<default>`` (every broker); per-broker beats cluster default beats server.properties.
Samsa accepts the settings it can apply while running: the log defaults behind topic configs
(``log.retention.ms``, ``log.segment.bytes``, ``message.max.bytes``, ... — Kafka's DynamicLogConfig),
which apply at once to every topic without an override of its own. Others are refused as Kafka refuses
a setting that is not dynamic.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.config import KafkaConfig
from server_common.config import ConfigError
from storage.config import BROKER_SYNONYMS, LogConfig, broker_synonyms
from storage.errors import InvalidConfigError

# log.message.format.version is the one log default Kafka does not let change at runtime.
RECONFIGURABLE: frozenset[str] = frozenset(
    name
    for broker_name in BROKER_SYNONYMS
    if broker_name != "log.message.format.version"
    for name in broker_synonyms(broker_name)
)


class DynamicConfigError(ValueError):
    """A dynamic broker config change that cannot be made (Kafka answers INVALID_REQUEST)."""


class DynamicBrokerConfig:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.static: dict[str, str] = {k: str(v) for k, v in config.originals.items()}
        self.cluster_default: dict[str, str] = {}  # /config/brokers/<default>
        self.per_broker: dict[str, str] = {}  # /config/brokers/<broker.id>

    def effective_props(self) -> dict[str, str]:
        return {**self.static, **self.cluster_default, **self.per_broker}

    def log_defaults(self) -> LogConfig:
        """The topic config defaults the dynamic settings make."""
        return LogConfig.from_broker_props(self.effective_props())

    def validate(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Checks a new override set for this broker (``per_broker``) or for every broker."""
        fixed = sorted(set(props) - RECONFIGURABLE)
        if fixed:
            raise DynamicConfigError(
                f"Cannot update these configs dynamically: {', '.join(fixed)} (Samsa changes only the log "
                f"defaults at runtime: {', '.join(sorted(RECONFIGURABLE))})"
            )
        if per_broker:
            merged = {**self.static, **self.cluster_default, **props}
        else:
            merged = {**self.static, **props, **self.per_broker}
        try:
            KafkaConfig(merged)
            LogConfig.from_broker_props(merged)
        except (ConfigError, InvalidConfigError) as e:
            raise DynamicConfigError(str(e)) from None
