"""Kafka's ACL vocabulary: resource types, operations, permission and pattern types (their wire codes),
the ``Authorizer`` interface the servers check requests with, and ``Action``, one check.

The codes are Kafka's (org.apache.kafka.common.resource.ResourceType, acl.AclOperation,
acl.AclPermissionType, resource.PatternType): CreateAcls, DescribeAcls and DeleteAcls carry them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from server_common.principal import KafkaPrincipal

CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name
WILDCARD = "*"  # a LITERAL resource name matching every resource of its type
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


@dataclass(frozen=True, slots=True)
class Action:
    """One authorization check: may the caller do ``operation`` on this resource?"""

    operation: AclOperation
    resource_type: ResourceType
    name: str
    # Kafka's logIfAllowed / logIfDenied: a check made only to filter (Metadata listing every topic)
    # logs nothing when denied.
    log_if_allowed: bool = False
    log_if_denied: bool = True


class Authorizer(Protocol):
    """What a server asks its authorizer (Kafka's org.apache.kafka.server.authorizer.Authorizer)."""

    def authorize(self, principal: KafkaPrincipal, host: str, actions: list[Action]) -> list[bool]:
        """For each action, whether it is allowed."""
        ...

    def authorize_by_resource_type(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether ``operation`` is allowed on some resource of the type (Kafka's
        authorizeByResourceType: an ALLOW on any literal or prefixed name not wholly denied)."""
        ...
