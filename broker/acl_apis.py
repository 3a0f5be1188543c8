"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), as Kafka 3.9's AclApis serves them.

Each request is first checked as Kafka's request classes check it when parsing (DescribeAclsRequest,
CreateAclsRequest, DeleteAclsRequest ``validate``): an UNKNOWN (or unknown code) resource type,
pattern type, operation or permission type, or in v0 a pattern type other than LITERAL (a v0 filter's
ANY is read as LITERAL), makes Kafka drop the request and close the connection; so does Samsa, logging
the peer. Then the caller needs the Cluster resource: DESCRIBE for DescribeAcls, ALTER for Create and
Delete, else CLUSTER_AUTHORIZATION_FAILED (top level for Describe, each creation / filter for the
others). Without an authorizer (``authorizer.class.name`` unset) the answer is SECURITY_DISABLED.

CreateAcls refuses, per creation, a CLUSTER resource not named ``kafka-cluster`` and an empty resource
name (INVALID_REQUEST, Kafka's messages), then the authorizer's own checks (``/`` in the name, unknown
elements: INVALID_REQUEST "Failed to create ACL"). DeleteAcls answers, per filter, the bindings it
removed, each with its own error if its write failed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from enum import IntEnum
from typing import TypeVar

from broker.authorization import ALLOW_ALL, Authorization
from network.handler_pool import Parked
from network.request_channel import Request
from protocol.api import ApiKey
from protocol.errors import ErrorCode, description
from protocol.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    Message,
)
from server_common.acl_authorizer import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclApiError,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourcePatternFilter,
)
from server_common.acls import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Message | Parked | None]]
E = TypeVar("E", bound=IntEnum)

NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
NO_AUTHORIZER = "No Authorizer is configured."
CLUSTER_NAME_ONLY = f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
EMPTY_RESOURCE_NAME = "Invalid empty resource name"


def _from_code(enum: type[E], code: int) -> E:
    """Kafka's fromCode: a code it does not know is UNKNOWN (0 in every one of these enums)."""
    try:
        return enum(code)
    except ValueError:
        return enum(0)


class InvalidAclRequest(Exception):
    """What Kafka's request classes throw while parsing: the connection is closed."""


def _pattern_filter(resource_type: int, name: str | None, pattern_type: int) -> ResourcePatternFilter:
    return ResourcePatternFilter(
        _from_code(ResourceType, resource_type), name, _from_code(PatternType, pattern_type)
    )


def _entry_filter(
    principal: str | None, host: str | None, operation: int, permission: int
) -> AccessControlEntryFilter:
    return AccessControlEntryFilter(
        principal, host, _from_code(AclOperation, operation), _from_code(AclPermissionType, permission)
    )


def describe_filter(body: DescribeAclsRequest, version: int) -> AclBindingFilter:
    """The request's filter, normalized and validated as Kafka's DescribeAclsRequest does."""
    pattern_type = _from_code(PatternType, body.pattern_type_filter)
    if version == 0:
        if pattern_type == PatternType.ANY:
            pattern_type = PatternType.LITERAL
        elif pattern_type != PatternType.LITERAL:
            raise InvalidAclRequest("Version 0 only supports literal resource pattern types")
    f = AclBindingFilter(
        _pattern_filter(body.resource_type_filter, body.resource_name_filter, pattern_type),
        _entry_filter(body.principal_filter, body.host_filter, body.operation, body.permission_type),
    )
    if f.is_unknown() or f.pattern_filter.resource_type == ResourceType.UNKNOWN:
        raise InvalidAclRequest(f"DescribeAclsRequest contains UNKNOWN elements: {f}")
    return f


def creation_binding(creation: CreateAclsRequest.AclCreation) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            _from_code(ResourceType, creation.resource_type),
            creation.resource_name,
            _from_code(PatternType, creation.resource_pattern_type),
        ),
        AccessControlEntry(
            creation.principal,
            creation.host,
            _from_code(AclOperation, creation.operation),
            _from_code(AclPermissionType, creation.permission_type),
        ),
    )


def creation_bindings(body: CreateAclsRequest, version: int) -> list[AclBinding]:
    """The creations as bindings, validated as Kafka's CreateAclsRequest does."""
    bindings = [creation_binding(c) for c in body.creations]
    if version == 0 and any(b.pattern.pattern_type != PatternType.LITERAL for b in bindings):
        raise InvalidAclRequest("Version 0 only supports literal resource pattern types")
    if any(b.is_unknown() for b in bindings):
        raise InvalidAclRequest("CreatableAcls contain unknown elements")
    return bindings


def delete_filters(body: DeleteAclsRequest, version: int) -> list[AclBindingFilter]:
    """The filters, normalized and validated as Kafka's DeleteAclsRequest does."""
    filters = []
    for item in body.filters:
        pattern_type = _from_code(PatternType, item.pattern_type_filter)
        if version == 0:
            if pattern_type == PatternType.ANY:
                pattern_type = PatternType.LITERAL
            elif pattern_type != PatternType.LITERAL:
                raise InvalidAclRequest(
                    f"Version 0 does not support pattern type {pattern_type.name} "
                    "(only LITERAL and ANY are supported)"
                )
        f = AclBindingFilter(
            _pattern_filter(item.resource_type_filter, item.resource_name_filter, pattern_type),
            _entry_filter(item.principal_filter, item.host_filter, item.operation, item.permission_type),
        )
        if f.is_unknown():
            raise InvalidAclRequest("Filters contain UNKNOWN elements")
        filters.append(f)
    return filters


def _message(error: AclApiError) -> str | None:
    """Kafka's ApiError.fromThrowable: no message for UNKNOWN_SERVER_ERROR or the code's default."""
    if error.code == ErrorCode.UNKNOWN_SERVER_ERROR or not error.message:
        return None
    if error.message == description(error.code):
        return None
    return error.message


def describe_resources(bindings: list[AclBinding]) -> list[DescribeAclsResponse.DescribeAclsResource]:
    """Kafka's DescribeAclsResponse.aclsResources: the bindings grouped by resource pattern."""
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    return [
        DescribeAclsResponse.DescribeAclsResource(
            resource_type=pattern.resource_type,
            resource_name=pattern.name,
            pattern_type=pattern.pattern_type,
            acls=[DescribeAclsResponse.AclDescription(**e.wire_fields()) for e in entries],
        )
        for pattern, entries in grouped.items()
    ]


class AclApis:
    def __init__(self, authorizer: AclAuthorizer | None, authorization: Authorization = ALLOW_ALL) -> None:
        self.authorizer = authorizer
        self.authorization = authorization

    def handlers(self) -> dict[int, Handler]:
        return {
            ApiKey.DESCRIBE_ACLS: self.handle_describe_acls,
            ApiKey.CREATE_ACLS: self.handle_create_acls,
            ApiKey.DELETE_ACLS: self.handle_delete_acls,
        }

    def _refuse(self, request: Request, e: InvalidAclRequest) -> None:
        log.info(
            "closing the connection from %s (client %s): invalid %s v%d: %s",
            request.peer,
            request.client_id,
            request.api.name,
            request.version,
            e,
        )
        request.connection.close()

    def _cluster_allowed(self, request: Request, operation: AclOperation) -> bool:
        return self.authorization.authorize(request, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    # -- DescribeAcls -------------------------------------------------------------------------------

    async def handle_describe_acls(self, request: Request) -> Message | None:
        try:
            binding_filter = describe_filter(request.body, request.version)
        except InvalidAclRequest as e:
            self._refuse(request, e)
            return None
        if not self._cluster_allowed(request, AclOperation.DESCRIBE):
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return DescribeAclsResponse(error_code=denied, error_message=description(denied), resources=[])
        if self.authorizer is None:
            return DescribeAclsResponse(
                error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER_DESCRIBE, resources=[]
            )
        bindings = self.authorizer.acls(binding_filter)
        return DescribeAclsResponse(error_code=ErrorCode.NONE, resources=describe_resources(bindings))

    # -- CreateAcls ---------------------------------------------------------------------------------

    async def handle_create_acls(self, request: Request) -> Message | None:
        try:
            bindings = creation_bindings(request.body, request.version)
        except InvalidAclRequest as e:
            self._refuse(request, e)
            return None
        Result = CreateAclsResponse.AclCreationResult
        if not self._cluster_allowed(request, AclOperation.ALTER):
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return CreateAclsResponse(
                results=[Result(error_code=denied, error_message=description(denied)) for _ in bindings]
            )
        if self.authorizer is None:
            disabled = ErrorCode.SECURITY_DISABLED
            return CreateAclsResponse(
                results=[Result(error_code=disabled, error_message=NO_AUTHORIZER) for _ in bindings]
            )
        if any(
            b.pattern.resource_type == ResourceType.ANY
            or b.pattern.pattern_type in (PatternType.ANY, PatternType.MATCH)
            or b.entry.operation == AclOperation.ANY
            or b.entry.permission_type == AclPermissionType.ANY
            for b in bindings
        ):
            # Kafka's ResourcePattern / AccessControlEntry refuse these (ANY resource type, operation or
            # permission, ANY/MATCH pattern type) while the handler reads the request: an unexpected
            # error for the whole request.
            log.info("CreateAcls from %s names a filter-only resource type or pattern type", request.peer)
            return CreateAclsResponse(
                results=[
                    Result(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=None) for _ in bindings
                ]
            )
        errors: list[AclApiError | None] = [None] * len(bindings)
        valid: list[int] = []
        for i, binding in enumerate(bindings):
            pattern = binding.pattern
            if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
                errors[i] = AclApiError(ErrorCode.INVALID_REQUEST, CLUSTER_NAME_ONLY)
            elif not pattern.name:
                errors[i] = AclApiError(ErrorCode.INVALID_REQUEST, EMPTY_RESOURCE_NAME)
            else:
                valid.append(i)
        created = await self.authorizer.create_acls([bindings[i] for i in valid])
        for i, error in zip(valid, created, strict=True):
            errors[i] = error
        results = []
        for binding, error in zip(bindings, errors, strict=True):
            if error is None:
                log.info("%s from %s added ACL %s", request.principal, request.peer, binding)
                results.append(Result(error_code=ErrorCode.NONE, error_message=None))
            else:
                results.append(Result(error_code=error.code, error_message=_message(error)))
        return CreateAclsResponse(results=results)

    # -- DeleteAcls ---------------------------------------------------------------------------------

    async def handle_delete_acls(self, request: Request) -> Message | None:
        try:
            filters = delete_filters(request.body, request.version)
        except InvalidAclRequest as e:
            self._refuse(request, e)
            return None
        FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
        if not self._cluster_allowed(request, AclOperation.ALTER):
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return DeleteAclsResponse(
                filter_results=[
                    FilterResult(error_code=denied, error_message=description(denied), matching_acls=[])
                    for _ in filters
                ]
            )
        if self.authorizer is None:
            disabled = ErrorCode.SECURITY_DISABLED
            return DeleteAclsResponse(
                filter_results=[
                    FilterResult(error_code=disabled, error_message=NO_AUTHORIZER, matching_acls=[])
                    for _ in filters
                ]
            )
        deleted = await self.authorizer.delete_acls(filters)
        filter_results = []
        for removed in deleted:
            matching = []
            for binding, error in removed:
                if error is None:
                    log.info("%s from %s removed ACL %s", request.principal, request.peer, binding)
                matching.append(
                    DeleteAclsResponse.DeleteAclsMatchingAcl(
                        error_code=ErrorCode.NONE if error is None else error.code,
                        error_message=None if error is None else _message(error),
                        resource_type=binding.pattern.resource_type,
                        resource_name=binding.pattern.name,
                        pattern_type=binding.pattern.pattern_type,
                        **binding.entry.wire_fields(),
                    )
                )
            filter_results.append(
                FilterResult(error_code=ErrorCode.NONE, error_message=None, matching_acls=matching)
            )
        return DeleteAclsResponse(filter_results=filter_results)
