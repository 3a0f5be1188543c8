"""ConfigAdmin: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and brokers, in
Kafka's ZooKeeper-mode semantics (ZkAdminManager).

- DescribeConfigs lists every topic config (overrides from ``/config/topics/<t>`` over the broker's
  defaults) or every broker setting, as ``config_entries`` builds them.
- AlterConfigs replaces a resource's whole override set; IncrementalAlterConfigs changes it by SET,
  DELETE, APPEND and SUBTRACT (the last two on list configs only). Topic changes are checked with
  storage's LogConfig: an unknown name or a bad value is INVALID_CONFIG (Kafka 3.3+ answers a topic's
  ConfigException so, KAFKA-13899); a malformed request (nulls, duplicates, a wrong broker id) and a
  refused broker setting (checked first, in Kafka 3.9's ConfigAdminManager.preprocess) are
  INVALID_REQUEST. Broker resources are this broker's id (per-broker
  overrides) or "" (the cluster-wide defaults); the settings Kafka 3.9 marks dynamic may change, with
  Kafka's checks (``dynamic_config``).
- A change is written to ZooKeeper with its change notification, and applied to this broker at once;
  the other brokers apply it when they see the notification.

Authorization, as Kafka 3.9's ConfigHelper and KafkaApis: DescribeConfigs needs DESCRIBE_CONFIGS, the
alters ALTER_CONFIGS, on the topic for a topic and on the cluster for a broker or broker logger; a
resource refused is TOPIC_ / CLUSTER_AUTHORIZATION_FAILED and the others go on. Where Kafka checks
matters, as it decides which error a bad request from an unauthorized principal gets: a broker change
is validated first (ConfigAdminManager.preprocess) and authorized just before it is written; a topic
change is authorized right after the request's own form (duplicate keys, nulls) is checked; a broker
logger change is authorized first (RuntimeLoggerManager).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from broker.admin_zk import BROKER_ENTITY, DEFAULT_ENTITY, TOPIC_ENTITY, AdminZkClient
from broker.authorization import ALLOW_ALL, Authorization
from broker.config import BROKER_CONFIG
from broker.config_entries import (
    ConfigDescriber,
    ConfigEntry,
    ConfigSource,
    ResourceType,
    broker_defaults,
    check_topic_configs,
)
from broker.config_listener import ConfigChangeListener
from broker.dynamic_config import DynamicBrokerConfig, DynamicConfigError
from broker.logger_configs import alter_loggers, check_node_id, logger_entries
from broker.metadata_cache import MetadataCache
from network.request_channel import Request
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    Message,
)
from protocol.topic import topic_name_error
from server_common.acls import CLUSTER_NAME, AclOperation
from server_common.acls import ResourceType as AclResourceType
from server_common.config import ConfigDef, ConfigType
from storage.config import TOPIC_CONFIG, LogConfig
from storage.errors import InvalidConfigError

log = logging.getLogger(__name__)

# AlterConfigs and IncrementalAlterConfigs name their resources and answer for each alike.
_Resource = TypeVar(
    "_Resource", AlterConfigsRequest.AlterConfigsResource, IncrementalAlterConfigsRequest.AlterConfigsResource
)
_Result = TypeVar(
    "_Result",
    AlterConfigsResponse.AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse.AlterConfigsResourceResponse,
)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# ConfigResource.Type ids Samsa does not serve but Kafka authorizes (KIP-714 client metrics, KIP-848
# group configs): asked about, they are authorized as Kafka does, then refused as unsupported.
CLIENT_METRICS_RESOURCE, GROUP_RESOURCE = 16, 32
# The resource types authorized before their override set is computed: a broker's change is authorized
# once validated (in _alter_broker); the other types are refused as unsupported, AlterConfigs' broker
# loggers before authorization, as Kafka's preprocess does.
_LEGACY_CHECKED = frozenset({ResourceType.TOPIC, CLIENT_METRICS_RESOURCE})
_INCREMENTAL_CHECKED = frozenset({ResourceType.TOPIC, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE})
_DENIED_ERRORS = {
    AclResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    AclResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    AclResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
}


def acl_resource(resource_type: int, name: str) -> tuple[AclResourceType, str] | None:
    """The ACL resource whose DESCRIBE_CONFIGS / ALTER_CONFIGS a config resource needs (Kafka's
    ConfigHelper and KafkaApis): the cluster for brokers, broker loggers and client metrics, the topic
    or group itself; None for a type Kafka refuses as unknown."""
    if resource_type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER, CLIENT_METRICS_RESOURCE):
        return AclResourceType.CLUSTER, CLUSTER_NAME
    if resource_type == ResourceType.TOPIC:
        return AclResourceType.TOPIC, name
    if resource_type == GROUP_RESOURCE:
        return AclResourceType.GROUP, name
    return None


class _Denied(Exception):
    """A resource the principal may not describe or alter: its error and (Kafka sets none) no message."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message


def resource_label(resource_type: int, name: str) -> str:
    return f"ConfigResource(type={_type_name(resource_type)}, name='{name}')"


class ConfigAdmin:
    # A class default too: tests build the handlers without the constructor.
    authorization: Authorization = ALLOW_ALL

    def __init__(
        self,
        broker_id: int,
        config_value: Callable[[str], object],
        admin_zk: AdminZkClient,
        metadata_cache: MetadataCache,
        dynamic: DynamicBrokerConfig,
        listener: ConfigChangeListener,
        *,
        authorization: Authorization = ALLOW_ALL,
    ) -> None:
        self.authorization = authorization
        self.broker_id = broker_id
        self.config_value = config_value
        self.admin_zk = admin_zk
        self.metadata_cache = metadata_cache
        self.dynamic = dynamic
        self.listener = listener
        self.describer = ConfigDescriber(dynamic)

    # -- authorization --------------------------------------------------------------------------

    def _refusal(
        self, request: Request, operation: AclOperation, resource_type: int, name: str
    ) -> ErrorCode | None:
        """The error for a config resource the principal may not describe / alter (``operation``), None
        when it may (or the type is one Kafka refuses as unknown, which is answered so)."""
        target = acl_resource(resource_type, name)
        if target is None or self.authorization.authorize(request, operation, *target):
            return None
        return _DENIED_ERRORS[target[0]]

    def _check_alter(self, request: Request, resource_type: int, name: str) -> None:
        """Raises ``_Denied`` (no message, as Kafka's configsAuthorizationApiError) unless the principal
        may ALTER_CONFIGS the resource."""
        error = self._refusal(request, AclOperation.ALTER_CONFIGS, resource_type, name)
        if error is not None:
            raise _Denied(error)

    # -- DescribeConfigs ------------------------------------------------------------------------

    async def handle_describe_configs(self, request: Request) -> Message:
        body = request.body
        results = []
        for resource in body.resources:
            result = DescribeConfigsResponse.DescribeConfigsResult(
                error_code=ErrorCode.NONE,
                error_message=None,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=[],
            )
            try:
                denied = self._refusal(
                    request, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
                )
                if denied is not None:
                    raise KafkaError(denied)  # with the error's own message, as Kafka's ConfigHelper
                entries = await self._describe(resource.resource_type, resource.resource_name)
            except KafkaError as e:
                result.error_code, result.error_message = e.code, e.message
                results.append(result)
                continue
            keys = resource.configuration_keys
            result.configs = [
                DescribeConfigsResponse.DescribeConfigsResourceResult(
                    name=entry.name,
                    value=entry.value,
                    read_only=entry.read_only,
                    # v0 has no source, only whether the value is the default.
                    is_default=entry.source == ConfigSource.DEFAULT_CONFIG,
                    config_source=entry.source,
                    is_sensitive=entry.sensitive,
                    synonyms=[
                        DescribeConfigsResponse.DescribeConfigsSynonym(name=n, value=v, source=s)
                        for n, v, s in entry.synonyms
                    ]
                    if body.include_synonyms
                    else [],
                    config_type=entry.type,
                    documentation=entry.doc if body.include_documentation else None,
                )
                for entry in entries
                if keys is None or entry.name in keys
            ]
            results.append(result)
        return DescribeConfigsResponse(throttle_time_ms=0, results=results)

    async def _describe(self, resource_type: int, name: str) -> list[ConfigEntry]:
        if resource_type == ResourceType.TOPIC:
            problem = topic_name_error(name)
            if problem:
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
            if not self.metadata_cache.contains(name):
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
            overrides = await self.admin_zk.entity_config(TOPIC_ENTITY, name)
            try:
                return self.describer.topic_entries(overrides)
            except InvalidConfigError as e:
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG, f"The configs of topic '{name}' are invalid: {e}"
                ) from None
        if resource_type == ResourceType.BROKER:
            if not name:
                return self.describer.broker_entries(self.config_value, per_broker=False)
            if self._broker_id(name) != self.broker_id:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"Unexpected broker id, expected {self.broker_id} or empty string, but received {name}",
                )
            return self.describer.broker_entries(self.config_value, per_broker=True)
        if resource_type == ResourceType.BROKER_LOGGER:
            check_node_id(name, self.broker_id, describe=True)
            return logger_entries()
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {_type_name(resource_type)}")

    # -- AlterConfigs ---------------------------------------------------------------------------

    async def handle_alter_configs(self, request: Request) -> Message:
        body = request.body
        responses = await self._alter_each(
            request,
            body.resources,
            self._check_replacement,
            self._replacement_props,
            body.validate_only,
            AlterConfigsResponse.AlterConfigsResourceResponse,
        )
        return AlterConfigsResponse(throttle_time_ms=0, responses=responses)

    async def handle_incremental_alter_configs(self, request: Request) -> Message:
        body = request.body
        responses = await self._alter_each(
            request,
            body.resources,
            self._check_incremental_ops,
            self._incremental_props,
            body.validate_only,
            IncrementalAlterConfigsResponse.AlterConfigsResourceResponse,
        )
        return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)

    async def _alter_each(
        self,
        request: Request,
        resources: Sequence[_Resource],
        check_form: Callable[[_Resource], None],
        new_props: Callable[[_Resource], Awaitable[dict[str, str]]],
        validate_only: bool,
        result: type[_Result],
    ) -> list[_Result]:
        """Each resource's outcome: its form checked (``check_form``), its new override set
        (``new_props``) checked and, unless ``validate_only``, stored; a refused resource does not stop
        the others. Authorization where Kafka checks it (see the module's doc)."""
        responses = []
        for resource in resources:
            error, message = ErrorCode.NONE, None
            kind, name = resource.resource_type, resource.resource_name
            try:
                check_form(resource)
                incremental = isinstance(resource, IncrementalAlterConfigsRequest.AlterConfigsResource)
                if kind == ResourceType.BROKER_LOGGER and isinstance(
                    resource, IncrementalAlterConfigsRequest.AlterConfigsResource
                ):
                    denied = self._refusal(request, AclOperation.ALTER_CONFIGS, kind, name)
                    if denied is not None:
                        # RuntimeLoggerManager throws ClusterAuthorizationException with its message.
                        raise KafkaError(denied)
                    check_node_id(name, self.broker_id, describe=False)
                    alter_loggers(resource.configs, validate_only)
                else:
                    if kind in (_INCREMENTAL_CHECKED if incremental else _LEGACY_CHECKED):
                        self._check_alter(request, kind, name)
                    props = await new_props(resource)
                    await self._alter(request, kind, name, props, validate_only)
            except KafkaError as e:
                error, message = e.code, e.message
            except _Denied as e:
                error, message = e.code, e.message
            responses.append(
                result(
                    error_code=error,
                    error_message=message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
        return responses

    @staticmethod
    def _check_replacement(resource: AlterConfigsRequest.AlterConfigsResource) -> None:
        """AlterConfigs' form (Kafka's ConfigAdminManager.preprocess): no null values."""
        nulls = [c.name for c in resource.configs if c.value is None]
        if nulls:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}")

    async def _replacement_props(self, resource: AlterConfigsRequest.AlterConfigsResource) -> dict[str, str]:
        """AlterConfigs' override set: the request's, which replaces the resource's whole set (its nulls
        were refused by ``_check_replacement``)."""
        return {c.name: c.value for c in resource.configs if c.value is not None}

    @staticmethod
    def _check_incremental_ops(resource: IncrementalAlterConfigsRequest.AlterConfigsResource) -> None:
        """Kafka's ConfigAdminManager.preprocess: duplicate keys, unknown operations, null values."""
        ops = resource.configs
        names = [op.name for op in ops]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys : {','.join(duplicates)}"
            )
        for op in ops:
            if op.config_operation not in _OP_NAMES:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST, f"Unknown config operation {op.config_operation} for {op.name}"
                )
        nulls = [
            f"{_OP_NAMES[op.config_operation]}:{op.name}"
            for op in ops
            if op.value is None and op.config_operation != DELETE
        ]
        if nulls:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}")

    async def _incremental_props(
        self, resource: IncrementalAlterConfigsRequest.AlterConfigsResource
    ) -> dict[str, str]:
        """The resource's override set after the request's operations (checked by
        ``_check_incremental_ops`` before)."""
        ops = resource.configs
        kind, name = resource.resource_type, resource.resource_name
        if kind == ResourceType.TOPIC:
            if not name:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
            current = await self.admin_zk.entity_config(TOPIC_ENTITY, name)
            return apply_incremental_ops(current, ops, TOPIC_CONFIG, LogConfig().to_props())
        if kind == ResourceType.BROKER:
            entity = str(self.broker_id) if self._is_per_broker(name) else DEFAULT_ENTITY
            current = await self.admin_zk.entity_config(BROKER_ENTITY, entity)
            return apply_incremental_ops(current, ops, BROKER_CONFIG, broker_defaults())
        raise _unsupported(kind)

    async def _alter(
        self, request: Request, resource_type: int, name: str, props: dict[str, str], validate_only: bool
    ) -> None:
        if resource_type == ResourceType.TOPIC:
            await self._alter_topic(name, props, validate_only)
        elif resource_type == ResourceType.BROKER:
            await self._alter_broker(request, name, props, validate_only)
        else:
            raise _unsupported(resource_type)

    async def _alter_topic(self, topic: str, props: dict[str, str], validate_only: bool) -> None:
        # Kafka 3.9's ZkAdminManager.alterTopicConfigs, in its order.
        if not topic:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
        if not self.metadata_cache.contains(topic):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
        problem = topic_name_error(topic)
        if problem:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        if not await self.admin_zk.topic_exists(topic):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{topic}' does not exist.")
        resource = resource_label(ResourceType.TOPIC, topic)
        check_topic_configs(props, self.dynamic.log_defaults(), ErrorCode.INVALID_CONFIG, resource)
        if validate_only:
            return
        await self.admin_zk.change_entity_config(TOPIC_ENTITY, topic, props)
        self.listener.apply_topic(topic, props)

    async def _alter_broker(
        self, request: Request, name: str, props: dict[str, str], validate_only: bool
    ) -> None:
        per_broker = self._is_per_broker(name)
        try:
            self.dynamic.validate(props, per_broker)
        except DynamicConfigError as e:
            # Kafka 3.9's ConfigAdminManager.preprocess turns the ConfigException into INVALID_REQUEST.
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid config value for resource {resource_label(ResourceType.BROKER, name)}: {e}",
            ) from None
        # Validated (Kafka's preprocess), then authorized (its processing step).
        self._check_alter(request, ResourceType.BROKER, name)
        if validate_only:
            return
        entity = str(self.broker_id) if per_broker else DEFAULT_ENTITY
        before = self.dynamic.per_broker if per_broker else self.dynamic.cluster_default
        await self.admin_zk.change_entity_config(BROKER_ENTITY, entity, props)
        self.dynamic.log_changes(before, props, f"/config/brokers/{entity}")
        if per_broker:
            self.dynamic.per_broker = dict(props)
        else:
            self.dynamic.cluster_default = dict(props)
        self.listener.apply_broker_overrides()

    def _is_per_broker(self, name: str) -> bool:
        """True for this broker's id, False for "" (every broker); INVALID_REQUEST for another id."""
        if not name:
            return False
        if self._broker_id(name) != self.broker_id:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {self.broker_id}, but received {name}",
            )
        return True

    @staticmethod
    def _broker_id(name: str) -> int:
        try:
            return int(name)
        except ValueError:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
            ) from None


def _unsupported(resource_type: int) -> KafkaError:
    return KafkaError(
        ErrorCode.INVALID_REQUEST,
        "AlterConfigs is only supported for topics and brokers, but resource type is "
        + _type_name(resource_type),
    )


def _type_name(resource_type: int) -> str:
    try:
        return ResourceType(resource_type).name
    except ValueError:
        return f"UNKNOWN({resource_type})"


def apply_incremental_ops(
    current: Mapping[str, str],
    ops: Sequence[IncrementalAlterConfigsRequest.AlterableConfig],
    definition: ConfigDef,
    defaults: Mapping[str, str],
) -> dict[str, str]:
    """IncrementalAlterConfigs' SET, DELETE, APPEND and SUBTRACT over ``current`` (APPEND adds only
    values not already there; a list not yet set starts from its default). Only a DELETE may come
    without a value: the handler refuses the others before."""
    props = dict(current)
    for op in ops:
        name, value, kind = op.name, op.value, op.config_operation
        if kind == DELETE:
            props.pop(name, None)
            continue
        assert value is not None
        if kind == SET:
            props[name] = value
        else:
            if name not in definition.keys:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown config name: {name}")
            if definition.type_of(name) is not ConfigType.LIST:
                verb = "append" if kind == APPEND else "subtract"
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {name}"
                )
            old = [v for v in props.get(name, defaults.get(name, "")).split(",") if v]
            given = [v for v in value.split(",") if v]
            new = (
                old + [v for v in given if v not in old]
                if kind == APPEND
                else [v for v in old if v not in given]
            )
            props[name] = ",".join(new)
    return props
