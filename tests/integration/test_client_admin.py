"""Topic administration with kafkajs's and the Java client's admin APIs against a real cluster (the
Python clients' admin APIs are covered in tests/broker/test_admin_clients.py; kcat has none)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.clients import runners
from tests.support.cluster import Cluster

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("admin", [runners.admin_kafkajs, runners.admin_java], ids=["kafkajs", "java"])
def test_create_describe_grow_and_delete_a_topic(cluster: Cluster, admin: Callable[..., dict]) -> None:
    try:
        seen = admin(cluster.bootstrap, "admin-round-trip")
    except runners.ClientNotInstalled as e:
        pytest.skip(str(e))
    assert seen["listed"] is True
    assert seen["partitions"] == 3 and all(leader in (1, 2, 3) for leader in seen["leaders"])
    assert seen["retention_ms"] == "3600000"
    assert seen["partitions_after_growth"] == 5
    assert seen["listed_after_delete"] is False
