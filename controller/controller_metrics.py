"""The controller process's own metrics (``register_controller_metrics``).

Owner: issue 20's controller-metrics work (KafkaController, ControllerEventManager, elections).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from server_common.metrics import Metrics

if TYPE_CHECKING:
    from controller.server import ControllerServer


def register_controller_metrics(metrics: Metrics, server: ControllerServer) -> None:
    """Defines the controller's metrics in ``metrics``, reading ``server``'s parts."""
