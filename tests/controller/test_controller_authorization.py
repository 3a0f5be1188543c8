"""Only brokers may call the controller (controller/apis.py): with an authorizer, CLUSTER_ACTION on the
Cluster (super users included); without one, membership of ``super.users`` when it is set; with neither,
everyone (a plaintext controller, as before). A refused request gets CLUSTER_AUTHORIZATION_FAILED in its
API's own response; ApiVersions is answered to anyone."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from controller.apis import ControllerApis
from controller.config import ControllerConfig
from network.request_channel import Request
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode
from protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    ApiVersionsRequest,
    ControlledShutdownRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)
from server_common.acl_authorizer import AccessControlEntry, AclAuthorizer, ResourcePattern
from server_common.acls import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType
from server_common.config import ConfigError
from server_common.principal import KafkaPrincipal

BROKER = KafkaPrincipal("User", "broker")
ALICE = KafkaPrincipal("User", "alice")


class FakeController:
    prefix = "[Controller id=9001]"

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def controlled_shutdown(self, broker_id: int, epoch: int) -> list[Any]:
        self.calls.append("controlled_shutdown")
        return []

    async def alter_partition(self, broker_id: int, epoch: int, changes: Any) -> dict[Any, Any]:
        self.calls.append("alter_partition")
        return {}

    async def elect_leaders(self, partitions: Any, election_type: Any) -> dict[Any, Any]:
        self.calls.append("elect_leaders")
        return {}

    async def alter_partition_reassignments(self, reassignments: Any) -> dict[Any, Any]:
        self.calls.append("alter_partition_reassignments")
        return {}

    async def list_partition_reassignments(self, partitions: Any) -> dict[Any, Any]:
        self.calls.append("list_partition_reassignments")
        return {}


# (api key, version, body, the response's error code)
REQUESTS: list[tuple[ApiKey, int, Any, Any]] = [
    (
        ApiKey.CONTROLLED_SHUTDOWN,
        3,
        ControlledShutdownRequest(broker_id=1, broker_epoch=5),
        lambda r: r.error_code,
    ),
    (
        ApiKey.ALTER_PARTITION,
        3,
        AlterPartitionRequest(broker_id=1, broker_epoch=5, topics=[]),
        lambda r: r.error_code,
    ),
    (
        ApiKey.ELECT_LEADERS,
        2,
        ElectLeadersRequest(
            election_type=0,
            topic_partitions=[ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0])],
            timeout_ms=1000,
        ),
        lambda r: (
            r.error_code,
            [p.error_code for t in r.replica_election_results for p in t.partition_result],
        ),
    ),
    (
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        0,
        AlterPartitionReassignmentsRequest(timeout_ms=1000, topics=[]),
        lambda r: r.error_code,
    ),
    (
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        0,
        ListPartitionReassignmentsRequest(timeout_ms=1000, topics=None),
        lambda r: r.error_code,
    ),
]
DENIED = {
    ApiKey.CONTROLLED_SHUTDOWN: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ApiKey.ALTER_PARTITION: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ApiKey.ELECT_LEADERS: (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
}


def _request(key: ApiKey, version: int, body: Any, principal: KafkaPrincipal) -> Request:
    connection = SimpleNamespace(
        principal=principal, client_ip="10.0.0.7", peer="10.0.0.7:5555", listener="SASL_SSL"
    )
    definition = api(key)
    assert definition is not None
    return Request(connection, definition, version, 1, "test", body, 0, version)  # type: ignore[arg-type]


def _call(apis: ControllerApis, key: ApiKey, version: int, body: Any, principal: KafkaPrincipal) -> Any:
    return asyncio.run(apis.handle(_request(key, version, body, principal)))


@pytest.mark.parametrize(("key", "version", "body", "code"), REQUESTS, ids=[r[0].name for r in REQUESTS])
def test_only_super_users_may_call_a_controller_without_an_authorizer(
    key: ApiKey, version: int, body: Any, code: Any, caplog: pytest.LogCaptureFixture
) -> None:
    controller = FakeController()
    apis = ControllerApis(controller, super_users=[BROKER])  # type: ignore[arg-type]
    assert code(_call(apis, key, version, body, BROKER)) in (ErrorCode.NONE, (ErrorCode.NONE, []))
    assert len(controller.calls) == 1
    with caplog.at_level(logging.INFO):
        denied = _call(apis, key, version, body, ALICE)
    assert code(denied) == DENIED[key]
    assert len(controller.calls) == 1  # never reached the controller
    assert "Principal = User:alice is Denied Operation = ClusterAction from host = 10.0.0.7" in caplog.text
    assert "10.0.0.7:5555" in caplog.text


@pytest.mark.parametrize(("key", "version", "body", "code"), REQUESTS, ids=[r[0].name for r in REQUESTS])
def test_the_authorizer_decides_by_cluster_action_on_the_cluster(
    key: ApiKey, version: int, body: Any, code: Any
) -> None:
    authorizer = AclAuthorizer(super_users=[BROKER])
    broker_two = KafkaPrincipal("User", "broker-two")
    authorizer.add_acls(
        ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL),
        AccessControlEntry(str(broker_two), "*", AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW),
        AccessControlEntry(str(ALICE), "*", AclOperation.ALTER, AclPermissionType.ALLOW),
    )
    controller = FakeController()
    apis = ControllerApis(controller, authorizer=authorizer, super_users=[])  # type: ignore[arg-type]
    for principal in (BROKER, broker_two):  # a super user; an ACL
        assert code(_call(apis, key, version, body, principal)) in (ErrorCode.NONE, (ErrorCode.NONE, []))
    assert code(_call(apis, key, version, body, ALICE)) == DENIED[key]  # ALTER is not CLUSTER_ACTION
    assert len(controller.calls) == 2


def test_a_controller_with_neither_lets_everyone_call_it_and_api_versions_is_for_anyone() -> None:
    controller = FakeController()
    apis = ControllerApis(controller)  # type: ignore[arg-type]
    key, version, body, code = REQUESTS[0]
    assert code(_call(apis, key, version, body, ALICE)) == ErrorCode.NONE
    strict = ControllerApis(controller, super_users=[BROKER])  # type: ignore[arg-type]
    response = _call(strict, ApiKey.API_VERSIONS, 3, ApiVersionsRequest(), ALICE)
    assert response.error_code == ErrorCode.NONE and response.api_keys


def test_controller_config_reads_super_users_and_refuses_a_bad_one() -> None:
    base = {"controller.id": "9001", "zookeeper.connect": "127.0.0.1:2181"}
    config = ControllerConfig({**base, "super.users": "User:admin; User:broker"})
    assert config.super_users == {KafkaPrincipal("User", "admin"), BROKER}
    assert ControllerConfig(base).super_users == frozenset()
    with pytest.raises(ConfigError, match=r"super\.users"):
        ControllerConfig({**base, "super.users": "admin"})
