"""DescribeClientQuotas (48) and AlterClientQuotas (49), versions 0-1, as a Kafka 3.9 broker in
ZooKeeper mode serves them (KafkaApis.handleDescribe/AlterClientQuotasRequest, ZkAdminManager
.describeClientQuotas/alterClientQuotas; KIP-546).

Authorization: Describe needs DESCRIBE_CONFIGS on the cluster, Alter ALTER_CONFIGS on the cluster;
refused, Describe answers CLUSTER_AUTHORIZATION_FAILED at the top (no entries) and Alter that error for
every entry.

Describe reads ZooKeeper (zk/client_quotas.py), not this broker's cache, and answers the entities with
at least one quota that the filter matches. A filter component names an entity type (``user``,
``client-id``, ``ip``) and how its name matches: exactly (0, with ``match``), the default (1), or any
name including the default (2, "specified"); ``strict`` leaves out the entities that have a part no
component names. Refused with INVALID_REQUEST: a type given twice, an empty type, ``ip`` with ``user``
or ``client-id``; UNSUPPORTED_VERSION: another type ("Custom entity type 'x' not supported").

Alter applies each entry's ops (``remove``, or set ``value``) to its entity's node, and writes the change
with its notification unless ``validate_only``. Per entry, INVALID_REQUEST with Kafka's messages for: an
empty entity, an unknown entity type, an empty name, ``ip`` with a user or client id, a key that is not
a quota config (``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate``), a byte rate that is not an integer. The byte rates are stored as integers,
the others as Java prints a double. Entries naming one entity are applied in order and answered once.

Departures from Kafka 3.9's ZooKeeper mode:
- values are checked as Kafka 3.9's KRaft controller does (ClientQuotaControlManager): a value that is
  not greater than 0 (or is NaN or infinite) is INVALID_REQUEST "Quota <key> must be greater than 0",
  and an entity naming one type twice "Invalid client quota entity, duplicate entity entry <type>"
  (ZooKeeper mode stores either);
- ``ip`` entities (connection-rate quotas, ``connection_creation_rate``) are refused with
  INVALID_REQUEST: Samsa does not limit connection rates (``max.connection.creation.rate`` is accepted
  and ignored), so it keeps no such quota; a Describe of ``ip`` finds none;
- a filter component with an unknown match type, or an exact match without a name, is INVALID_REQUEST
  (Kafka fails the whole request with UNKNOWN_SERVER_ERROR);
- removing or setting a SCRAM credential through AlterClientQuotas is INVALID_REQUEST "Invalid
  configuration key" (Kafka's ZooKeeper mode fails with UNKNOWN_SERVER_ERROR "Unexpected config type").

The broker that serves an Alter updates its ClientQuotaCache at once; the others (and it again) when
they see the change notification.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable

from broker.authorization import ALLOW_ALL, Authorization
from broker.client_quota_cache import ClientQuotaCache
from network.handler_pool import Parked
from network.request_channel import Request
from protocol.api import ApiKey
from protocol.errors import ErrorCode, KafkaError, description
from protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    Message,
)
from server_common.acls import CLUSTER_NAME, AclOperation, ResourceType
from zk.client_quotas import (
    DEFAULT,
    LONG_QUOTAS,
    QUOTA_CONFIGS,
    ClientQuotaConfigs,
    QuotaEntity,
    java_double,
    quota_configs,
)
from zk.user_configs import desanitize, sanitize

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Message | Parked | None]]

# ClientQuotaEntity's entity types, and DescribeClientQuotasRequest's match types.
USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
EPSILON = 1e-6  # ZkAdminManager's tolerance for a LONG quota sent as a double

NO_IP_QUOTAS = (
    "Samsa has no connection rate quotas: ip entities are not supported (max.connection.creation.rate "
    "is not enforced either)"
)

# A filter component's match: ("exact", name), ("default", None) or ("specified", None).
_Match = tuple[str, str | None]


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def _names(entity: QuotaEntity) -> dict[str, str | None]:
    """The entity as the wire names it: type -> name, None for the default (user first)."""
    names: dict[str, str | None] = {}
    if entity.user is not None:
        names[USER] = None if entity.user == DEFAULT else desanitize(entity.user)
    if entity.client_id is not None:
        names[CLIENT_ID] = None if entity.client_id == DEFAULT else desanitize(entity.client_id)
    return names


def _matches(match: _Match | None, part: str | None, strict: bool) -> bool:
    """ZkAdminManager's ``matches`` over an entity part in ZooKeeper's form (None: absent)."""
    if match is None:
        return part is None or not strict
    kind, name = match
    if kind == "exact":
        return part is not None and part != DEFAULT and desanitize(part) == name
    if kind == "default":
        return part == DEFAULT
    return part is not None  # "specified": any name, the default included (as Kafka's ZooKeeper mode)


def parse_filter(components: list[DescribeClientQuotasRequest.ComponentData]) -> dict[str, _Match]:
    """The filter's components by entity type; KafkaError for one Kafka refuses."""
    found: dict[str, _Match] = {}
    for c in components:
        if c.entity_type in (USER, CLIENT_ID, IP):
            if c.entity_type in found:
                what = {USER: "user", CLIENT_ID: "client", IP: "ip"}[c.entity_type]
                raise _invalid(f"Duplicate {what} filter component entity type")
        elif c.entity_type == "":
            raise _invalid("Unexpected empty filter component entity type")
        else:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION, f"Custom entity type '{c.entity_type}' not supported"
            )
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise _invalid(f"An exact match of {c.entity_type} needs a name")
            found[c.entity_type] = ("exact", c.match)
        elif c.match_type == MATCH_DEFAULT:
            found[c.entity_type] = ("default", None)
        elif c.match_type == MATCH_SPECIFIED:
            found[c.entity_type] = ("specified", None)
        else:
            raise _invalid(f"Unexpected match type: {c.match_type}")
    if IP in found and (USER in found or CLIENT_ID in found):
        raise _invalid(
            "Invalid entity filter component combination, IP filter component should not be used with "
            "user or clientId filter component."
        )
    return found


def describe_matching(
    configs: dict[QuotaEntity, dict[str, str]], components: dict[str, _Match], strict: bool
) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The entities of ``configs`` (all of ZooKeeper's) that the filter matches and that have a quota,
    with their quotas as doubles, sorted by user then client id."""
    if IP in components:
        return []  # Samsa keeps no ip quotas
    found = []
    for entity, config in configs.items():
        quotas = quota_configs(config)
        if not quotas:
            continue
        if not (
            _matches(components.get(USER), entity.user, strict)
            and _matches(components.get(CLIENT_ID), entity.client_id, strict)
        ):
            continue
        values = {}
        for key, value in quotas.items():
            try:
                values[key] = float(value)
            except ValueError:
                raise KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"Unexpected client quota configuration value: {key} -> {value}",
                ) from None
        found.append((entity, values))
    return sorted(found, key=lambda e: (e[0].user or "", e[0].client_id or ""))


def parse_entity(entity: list[AlterClientQuotasRequest.EntityData]) -> QuotaEntity:
    """ZkAdminManager.parseAndSanitizeQuotaEntity (with KRaft's duplicate check)."""
    if not entity:
        raise _invalid("Invalid empty client quota entity")
    names: dict[str, str | None] = {}
    for e in entity:
        if e.entity_type in names:
            raise _invalid(f"Invalid client quota entity, duplicate entity entry {e.entity_type}")
        if e.entity_type not in (USER, CLIENT_ID, IP):
            raise _invalid(f"Unhandled client quota entity type: {e.entity_type}")
        if e.entity_name is not None and e.entity_name == "":
            raise _invalid(f"Empty {e.entity_type} not supported")
        names[e.entity_type] = e.entity_name
    if IP in names:
        if USER in names or CLIENT_ID in names:
            raise _invalid(
                "Invalid quota entity combination, IP entity should not be used with user/client ID entity."
            )
        raise _invalid(NO_IP_QUOTAS)

    def zk_name(kind: str) -> str | None:
        if kind not in names:
            return None
        name = names[kind]
        return DEFAULT if name is None else sanitize(name)

    return QuotaEntity(zk_name(USER), zk_name(CLIENT_ID))


def apply_ops(config: dict[str, str], ops: list[AlterClientQuotasRequest.OpData]) -> dict[str, str]:
    """The entity's configs with the ops applied, values as Kafka stores them; KafkaError for a bad op."""
    for op in ops:
        if op.key not in QUOTA_CONFIGS:
            raise _invalid(f"Invalid configuration key {op.key}")
        if op.remove:
            config.pop(op.key, None)
            continue
        value = float(op.value)
        if math.isnan(value) or math.isinf(value) or value <= 0.0:
            raise _invalid(f"Quota {op.key} must be greater than 0")
        if op.key in LONG_QUOTAS:
            if value > 2**63 - 1:
                raise _invalid(f"Proposed value for {op.key} is too large for a LONG.")
            integral = int(value + EPSILON)
            if abs(integral - value) > EPSILON:
                raise _invalid(f"Configuration {op.key} must be a LONG value")
            config[op.key] = str(integral)
        else:
            config[op.key] = java_double(value)
    return config


class ClientQuotaApis:
    def __init__(
        self,
        configs: ClientQuotaConfigs,
        cache: ClientQuotaCache | None = None,
        authorization: Authorization = ALLOW_ALL,
    ) -> None:
        self.configs = configs
        self.cache = cache
        self.authorization = authorization

    def handlers(self) -> dict[int, Handler]:
        return {
            ApiKey.DESCRIBE_CLIENT_QUOTAS: self.handle_describe,
            ApiKey.ALTER_CLIENT_QUOTAS: self.handle_alter,
        }

    # -- DescribeClientQuotas ---------------------------------------------------------------------

    async def handle_describe(self, request: Request) -> Message:
        body: DescribeClientQuotasRequest = request.body
        if not self.authorization.authorize(
            request, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            return _describe_error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        try:
            components = parse_filter(list(body.components))
            found = describe_matching(
                {} if IP in components else await self.configs.all_entity_configs(), components, body.strict
            )
        except KafkaError as e:
            log.info("refused a DescribeClientQuotas from %s: %s", request.peer, e.message)
            return _describe_error(e.code, e.message)
        except Exception as e:  # ZooKeeper unreachable and the like
            log.error("DescribeClientQuotas from %s failed: %s", request.peer, e)
            return _describe_error(ErrorCode.UNKNOWN_SERVER_ERROR, None)
        entries = [
            DescribeClientQuotasResponse.EntryData(
                entity=[
                    DescribeClientQuotasResponse.EntityData(entity_type=t, entity_name=n)
                    for t, n in _names(entity).items()
                ],
                values=[
                    DescribeClientQuotasResponse.ValueData(key=k, value=v) for k, v in sorted(values.items())
                ],
            )
            for entity, values in found
        ]
        return DescribeClientQuotasResponse(error_code=ErrorCode.NONE, error_message=None, entries=entries)

    # -- AlterClientQuotas ------------------------------------------------------------------------

    async def handle_alter(self, request: Request) -> Message:
        body: AlterClientQuotasRequest = request.body
        if not self.authorization.authorize(
            request, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return AlterClientQuotasResponse(
                entries=[
                    AlterClientQuotasResponse.EntryData(
                        error_code=denied,
                        error_message=description(denied),
                        entity=[
                            AlterClientQuotasResponse.EntityData(
                                entity_type=e.entity_type, entity_name=e.entity_name
                            )
                            for e in entry.entity
                        ],
                    )
                    for entry in body.entries
                ]
            )
        # One result per distinct entity (Kafka answers a map keyed by entity): the last one's.
        results: dict[tuple[tuple[str, str | None], ...], AlterClientQuotasResponse.EntryData] = {}
        for entry in body.entries:
            code, message = await self._alter_entry(entry, body.validate_only, request.peer)
            key = tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity))
            results.pop(key, None)
            results[key] = AlterClientQuotasResponse.EntryData(
                error_code=code,
                error_message=message,
                entity=[
                    AlterClientQuotasResponse.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity
                ],
            )
        return AlterClientQuotasResponse(entries=list(results.values()))

    async def _alter_entry(
        self, entry: AlterClientQuotasRequest.EntryData, validate_only: bool, peer: str
    ) -> tuple[int, str | None]:
        try:
            entity = parse_entity(list(entry.entity))
            ops = list(entry.ops)
            if validate_only:
                apply_ops(await self.configs.entity_config(entity), ops)
                return ErrorCode.NONE, None
            written = await self.configs.alter(entity, lambda config: apply_ops(config, ops))
        except KafkaError as e:
            log.info("refused a client quota alteration from %s: %s", peer, e.message)
            return e.code, e.message
        except Exception as e:
            log.error("altering client quotas (request from %s) failed: %s", peer, e)
            return ErrorCode.UNKNOWN_SERVER_ERROR, description(ErrorCode.UNKNOWN_SERVER_ERROR)
        log.info(
            "client quotas of %s altered (request from %s): now %s", entity, peer, quota_configs(written)
        )
        if self.cache is not None:
            self.cache.update(entity, written)
        return ErrorCode.NONE, None


def _describe_error(code: int, message: str | None) -> DescribeClientQuotasResponse:
    """DescribeClientQuotasRequest.getErrorResponse: the error, no entries."""
    return DescribeClientQuotasResponse(
        error_code=code, error_message=message or description(code), entries=None
    )
