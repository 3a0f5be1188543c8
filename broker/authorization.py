"""Authorization: what every API handler asks before it acts (Kafka's AuthHelper).

A handler holds an ``Authorization`` (the server's, or ``ALLOW_ALL`` when no authorizer is set, which
answers yes without looking at the request) and asks it about the request's principal and address:
``authorize`` one resource, ``filter_authorized`` (or ``filter_unauthorized``) a set of names,
``authorized_operations`` for the ``authorized_operations`` bitfields of Metadata, DescribeCluster and
DescribeGroups.
"""

from __future__ import annotations

from collections.abc import Iterable

from network.request_channel import Request
from server_common.acls import AclOperation, Action, Authorizer, ResourceType

# The operations valid on each resource type (Kafka's AclEntry.supportedOperations), in the order of
# their codes; ``authorized_operations`` reports those allowed.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.WRITE, AclOperation.DESCRIBE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def operations_bitfield(operations: Iterable[AclOperation]) -> int:
    """Kafka's Utils.to32BitField: bit ``code`` set for each operation."""
    return sum(1 << op for op in set(operations))


class Authorization:
    """The questions handlers ask about a request, answered by the server's authorizer (None: allow all)."""

    def __init__(self, authorizer: Authorizer | None) -> None:
        self.authorizer = authorizer

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def authorize(
        self,
        request: Request,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_denied: bool = True,
    ) -> bool:
        if self.authorizer is None:
            return True
        # As Kafka's AuthHelper: a grant is logged (at DEBUG) for checks that decide, not for those
        # that only report (``authorized_operations``).
        action = Action(operation, resource_type, name, log_if_allowed=True, log_if_denied=log_if_denied)
        return self.authorizer.authorize(request.principal, request.client_ip, [action])[0]

    def filter_authorized(
        self,
        request: Request,
        operation: AclOperation,
        resource_type: ResourceType,
        names: Iterable[str],
        *,
        log_if_denied: bool = True,
    ) -> set[str]:
        """The names among ``names`` the request may do ``operation`` on."""
        unique = list(dict.fromkeys(names))
        if self.authorizer is None:
            return set(unique)
        actions = [
            Action(operation, resource_type, n, log_if_allowed=True, log_if_denied=log_if_denied)
            for n in unique
        ]
        allowed = self.authorizer.authorize(request.principal, request.client_ip, actions)
        return {n for n, ok in zip(unique, allowed, strict=True) if ok}

    def filter_unauthorized(
        self, request: Request, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
    ) -> set[str]:
        """The names among ``names`` the request may not do ``operation`` on (Kafka's per-topic
        TOPIC_AUTHORIZATION_FAILED); none without an authorizer."""
        unique = list(dict.fromkeys(names))
        allowed = self.filter_authorized(request, operation, resource_type, unique)
        return {n for n in unique if n not in allowed}

    def authorize_by_resource_type(
        self, request: Request, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize_by_resource_type(
            request.principal, request.client_ip, operation, resource_type
        )

    def authorized_operations(self, request: Request, resource_type: ResourceType, name: str) -> int:
        """The bitfield of the operations on this resource the request's principal may do."""
        supported = SUPPORTED_OPERATIONS[resource_type]
        if self.authorizer is None:
            return operations_bitfield(supported)
        actions = [Action(op, resource_type, name, log_if_denied=False) for op in supported]
        allowed = self.authorizer.authorize(request.principal, request.client_ip, actions)
        return operations_bitfield(op for op, ok in zip(supported, allowed, strict=True) if ok)


ALLOW_ALL = Authorization(None)
