"""The broker's own metrics, registered once the broker has started (``register_broker_metrics``).

Owner: issue 20's broker-metrics work (BrokerTopicMetrics, ReplicaManager, replica fetchers, logs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from server_common.metrics import Metrics

if TYPE_CHECKING:
    from broker.server import KafkaServer


def register_broker_metrics(metrics: Metrics, server: KafkaServer) -> None:
    """Defines the broker's metrics in ``metrics``, reading ``server``'s parts."""
