"""Every real client completes its bootstrap (ApiVersions, Metadata, DescribeCluster where it uses it)
against a real ``samsa broker`` process."""

from __future__ import annotations

import pytest

from tests.support.clients import runners
from tools.local_cluster import BrokerNode

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("client", runners.CLIENTS)
def test_client_bootstraps(broker: BrokerNode, client: str) -> None:
    try:
        result = runners.BOOTSTRAP[client](broker.bootstrap)
    except runners.ClientNotInstalled as e:
        pytest.skip(str(e))
    assert [(b.node_id, b.host, b.port) for b in result.brokers] == [(1, "127.0.0.1", broker.port)]
    assert result.topics == ()
    if result.cluster_id is not None:  # kcat does not print it
        assert result.cluster_id in broker.log()
    assert broker.alive
    assert "WARNING" not in broker.log(), broker.log()
