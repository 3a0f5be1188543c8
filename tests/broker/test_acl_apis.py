"""DescribeAcls, CreateAcls and DeleteAcls against the handlers (Kafka's AclApis and the request classes'
validation): SECURITY_DISABLED without an authorizer, the Cluster DESCRIBE / ALTER checks, per-creation
and per-filter results, and the requests Kafka refuses by closing the connection."""

from __future__ import annotations

from typing import Any

import pytest

from broker.acl_apis import AclApis
from broker.authorization import Authorization
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest, Message
from server_common.acl_authorizer import AccessControlEntry, AclAuthorizer, ResourcePattern
from server_common.acls import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType
from server_common.principal import KafkaPrincipal
from tests.support.handler_requests import FakeConnection, handler_request

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
Creation = CreateAclsRequest.AclCreation
Filter = DeleteAclsRequest.DeleteAclsFilter


def request(key: ApiKey, body: Message, version: int = 3, who: str = "admin") -> Any:
    return handler_request(
        key, version, body, FakeConnection(KafkaPrincipal("User", who), "10.0.0.9", port=5000)
    )


async def create(handlers: AclApis, *creations: Creation, who: str = "admin") -> Any:
    """The CreateAcls response to ``creations`` asked by ``who``."""
    return await handlers.handle_create_acls(
        request(ApiKey.CREATE_ACLS, CreateAclsRequest(creations=list(creations)), who=who)
    )


def apis() -> tuple[AclApis, AclAuthorizer]:
    authorizer = AclAuthorizer(super_users="User:admin")
    return AclApis(authorizer, Authorization(authorizer)), authorizer


def creation(
    name: str = "t",
    rt: RT = RT.TOPIC,
    pt: PT = PT.LITERAL,
    op: Op = Op.READ,
    perm: Perm = Perm.ALLOW,
    principal: str = "User:alice",
) -> Creation:
    return Creation(
        resource_type=rt,
        resource_name=name,
        resource_pattern_type=pt,
        principal=principal,
        host="*",
        operation=op,
        permission_type=perm,
    )


def describe(
    rt: RT = RT.ANY, name: str | None = None, pt: PT = PT.ANY, op: Op = Op.ANY, perm: Perm = Perm.ANY
) -> DescribeAclsRequest:
    return DescribeAclsRequest(
        resource_type_filter=rt,
        resource_name_filter=name,
        pattern_type_filter=pt,
        principal_filter=None,
        host_filter=None,
        operation=op,
        permission_type=perm,
    )


def delete(rt: RT = RT.ANY, name: str | None = None, pt: PT = PT.ANY, principal: str | None = None) -> Filter:
    return Filter(
        resource_type_filter=rt,
        resource_name_filter=name,
        pattern_type_filter=pt,
        principal_filter=principal,
        host_filter=None,
        operation=Op.ANY,
        permission_type=Perm.ANY,
    )


async def test_without_an_authorizer_every_acl_api_answers_security_disabled() -> None:
    handlers = AclApis(None)
    described = await handlers.handle_describe_acls(request(ApiKey.DESCRIBE_ACLS, describe()))
    assert described.error_code == ErrorCode.SECURITY_DISABLED
    assert described.error_message == "No Authorizer is configured on the broker"
    created = await handlers.handle_create_acls(
        request(ApiKey.CREATE_ACLS, CreateAclsRequest(creations=[creation(), creation("u")]))
    )
    assert [(r.error_code, r.error_message) for r in created.results] == [
        (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    ] * 2
    deleted = await handlers.handle_delete_acls(
        request(ApiKey.DELETE_ACLS, DeleteAclsRequest(filters=[delete()]))
    )
    assert deleted.filter_results[0].error_code == ErrorCode.SECURITY_DISABLED


async def test_create_describe_delete_round_trip() -> None:
    handlers, authorizer = apis()
    created = await create(
        handlers,
        creation("t"),
        creation("t", op=Op.WRITE),
        creation("pay", pt=PT.PREFIXED),
        creation(CLUSTER_NAME, RT.CLUSTER, op=Op.IDEMPOTENT_WRITE),
    )
    assert [r.error_code for r in created.results] == [ErrorCode.NONE] * 4
    assert len(authorizer.acls()) == 4

    described = await handlers.handle_describe_acls(request(ApiKey.DESCRIBE_ACLS, describe(RT.TOPIC)))
    assert described.error_code == ErrorCode.NONE
    by_resource = {(r.resource_type, r.resource_name, r.pattern_type): r.acls for r in described.resources}
    assert set(by_resource) == {(RT.TOPIC, "t", PT.LITERAL), (RT.TOPIC, "pay", PT.PREFIXED)}
    assert {a.operation for a in by_resource[(RT.TOPIC, "t", PT.LITERAL)]} == {Op.READ, Op.WRITE}
    matched = await handlers.handle_describe_acls(
        request(ApiKey.DESCRIBE_ACLS, describe(RT.TOPIC, "payments", PT.MATCH))
    )
    assert [(r.resource_name, r.pattern_type) for r in matched.resources] == [("pay", PT.PREFIXED)]

    deleted = await handlers.handle_delete_acls(
        request(
            ApiKey.DELETE_ACLS,
            DeleteAclsRequest(
                filters=[delete(RT.TOPIC, "t", PT.LITERAL), delete(RT.GROUP), delete(RT.CLUSTER)]
            ),
        )
    )
    first, second, third = deleted.filter_results
    assert first.error_code == ErrorCode.NONE and {m.operation for m in first.matching_acls} == {
        Op.READ,
        Op.WRITE,
    }
    assert all(m.error_code == ErrorCode.NONE and m.resource_name == "t" for m in first.matching_acls)
    assert second.matching_acls == []
    assert [(m.resource_type, m.operation) for m in third.matching_acls] == [
        (RT.CLUSTER, Op.IDEMPOTENT_WRITE)
    ]
    assert [b.pattern for b in authorizer.acls()] == [ResourcePattern(RT.TOPIC, "pay", PT.PREFIXED)]


async def test_creations_kafka_refuses_one_by_one() -> None:
    handlers, authorizer = apis()
    created = await create(
        handlers,
        creation("other-cluster", RT.CLUSTER, op=Op.ALTER),
        creation(""),
        creation("a/b"),
        creation("fine"),
    )
    assert [(r.error_code, r.error_message) for r in created.results] == [
        (ErrorCode.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (ErrorCode.INVALID_REQUEST, "Invalid empty resource name"),
        (ErrorCode.INVALID_REQUEST, "Failed to create ACL"),
        (ErrorCode.NONE, None),
    ]
    assert [b.pattern.name for b in authorizer.acls()] == ["fine"]


async def test_a_creation_with_a_filter_only_value_fails_the_whole_request_as_kafka() -> None:
    handlers, authorizer = apis()
    created = await create(handlers, creation("ok"), creation("t", pt=PT.MATCH))
    assert [(r.error_code, r.error_message) for r in created.results] == [
        (ErrorCode.UNKNOWN_SERVER_ERROR, None)
    ] * 2
    assert authorizer.acls() == []


async def test_the_cluster_resource_gates_each_api() -> None:
    handlers, authorizer = apis()
    authorizer.add_acls(
        ResourcePattern(RT.CLUSTER, CLUSTER_NAME, PT.LITERAL),
        AccessControlEntry("User:reader", "*", Op.DESCRIBE, Perm.ALLOW),
    )
    denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    described = await handlers.handle_describe_acls(request(ApiKey.DESCRIBE_ACLS, describe(), who="nobody"))
    assert described.error_code == denied and described.resources == []
    allowed = await handlers.handle_describe_acls(request(ApiKey.DESCRIBE_ACLS, describe(), who="reader"))
    assert allowed.error_code == ErrorCode.NONE and len(allowed.resources) == 1
    created = await create(handlers, creation(), creation("u"), who="reader")
    assert [r.error_code for r in created.results] == [denied, denied]
    deleted = await handlers.handle_delete_acls(
        request(ApiKey.DELETE_ACLS, DeleteAclsRequest(filters=[delete()]), who="reader")
    )
    assert [r.error_code for r in deleted.filter_results] == [denied]
    assert len(authorizer.acls()) == 1


@pytest.mark.parametrize(
    ("key", "body", "version"),
    [
        (ApiKey.DESCRIBE_ACLS, describe(pt=PT.PREFIXED), 0),
        (ApiKey.DESCRIBE_ACLS, describe(rt=RT.UNKNOWN), 3),
        (ApiKey.DESCRIBE_ACLS, describe(op=Op.UNKNOWN), 2),
        (ApiKey.DESCRIBE_ACLS, describe(rt=99), 1),  # type: ignore[arg-type]
        (ApiKey.CREATE_ACLS, CreateAclsRequest(creations=[creation(pt=PT.PREFIXED)]), 0),
        (ApiKey.CREATE_ACLS, CreateAclsRequest(creations=[creation(perm=Perm.UNKNOWN)]), 2),
        (ApiKey.DELETE_ACLS, DeleteAclsRequest(filters=[delete(pt=PT.MATCH)]), 0),
        (ApiKey.DELETE_ACLS, DeleteAclsRequest(filters=[delete(rt=RT.UNKNOWN)]), 1),
    ],
    ids=[
        "describe-v0-prefixed",
        "describe-unknown-type",
        "describe-unknown-operation",
        "describe-unknown-code",
        "create-v0-prefixed",
        "create-unknown-permission",
        "delete-v0-match",
        "delete-unknown-type",
    ],
)
async def test_requests_kafka_cannot_parse_close_the_connection(
    key: ApiKey, body: object, version: int
) -> None:
    handlers, _ = apis()
    handler = handlers.handlers()[key]
    req = request(key, body, version)
    assert await handler(req) is None
    assert req.connection.closed


async def test_v0_filters_read_any_as_literal() -> None:
    handlers, authorizer = apis()
    authorizer.add_acls(
        ResourcePattern(RT.TOPIC, "t", PT.LITERAL), AccessControlEntry("User:a", "*", Op.READ, Perm.ALLOW)
    )
    authorizer.add_acls(
        ResourcePattern(RT.TOPIC, "t", PT.PREFIXED), AccessControlEntry("User:a", "*", Op.READ, Perm.ALLOW)
    )
    described = await handlers.handle_describe_acls(
        request(ApiKey.DESCRIBE_ACLS, describe(RT.TOPIC, "t"), version=0)
    )
    assert [r.pattern_type for r in described.resources] == [PT.LITERAL]
    deleted = await handlers.handle_delete_acls(
        request(ApiKey.DELETE_ACLS, DeleteAclsRequest(filters=[delete(RT.TOPIC, "t")]), version=0)
    )
    assert [m.pattern_type for m in deleted.filter_results[0].matching_acls] == [PT.LITERAL]
    assert [b.pattern.pattern_type for b in authorizer.acls()] == [PT.PREFIXED]
