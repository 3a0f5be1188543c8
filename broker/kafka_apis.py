"""KafkaApis: the request handlers, dispatched by api key.

Each handler takes a decoded ``Request`` and returns the response message (or None when the request
gets no response). The ApiVersions response advertises exactly the APIs that have a handler here, at
the ranges of ``broker.api_versions``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable

from broker.api_versions import ADVERTISED_VERSIONS
from broker.metadata_cache import MetadataCache
from broker.network.request_channel import Request
from protocol.api import Api, ApiKey, api
from protocol.errors import ErrorCode
from protocol.messages import (
    ApiVersionsResponse,
    DescribeClusterResponse,
    Message,
    MetadataResponse,
)
from protocol.topic import is_internal, topic_name_error

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Message | None]]

# Kafka leaves authorized-operation fields at INT_MIN when the client did not ask for them.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# KIP-511: what a client may call itself (Kafka answers INVALID_REQUEST otherwise; Samsa only logs).
_SOFTWARE_NAME = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


class KafkaApis:
    def __init__(self, broker_id: int, metadata_cache: MetadataCache) -> None:
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self._handlers: dict[int, Handler] = {
            ApiKey.API_VERSIONS: self.handle_api_versions,
            ApiKey.METADATA: self.handle_metadata,
            ApiKey.DESCRIBE_CLUSTER: self.handle_describe_cluster,
        }
        self._supported: dict[int, tuple[Api, int, int]] = {}
        for key in self._handlers:
            low, high = ADVERTISED_VERSIONS[key]
            definition = api(key)
            assert (
                definition is not None
                and low in definition.valid_versions
                and high in definition.valid_versions
            )
            self._supported[key] = (definition, low, high)
        self._api_versions = [
            ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
            for key, (_, low, high) in sorted(self._supported.items())
        ]

    def supported(self, api_key: int) -> tuple[Api, int, int] | None:
        """(api, lowest, highest version) for an API this broker serves, else None."""
        return self._supported.get(api_key)

    async def handle(self, request: Request) -> Message | None:
        return await self._handlers[request.api.key](request)

    # -- ApiVersions ------------------------------------------------------------------------------

    async def handle_api_versions(self, request: Request) -> Message:
        if request.body is None:
            log.info(
                "ApiVersions v%d from %s is newer than this broker's; answering UNSUPPORTED_VERSION in v0",
                request.requested_version,
                request.peer,
            )
            _, low, high = self._supported[ApiKey.API_VERSIONS]
            return ApiVersionsResponse(
                error_code=ErrorCode.UNSUPPORTED_VERSION,
                api_keys=[
                    ApiVersionsResponse.ApiVersion(
                        api_key=ApiKey.API_VERSIONS, min_version=low, max_version=high
                    )
                ],
            )
        if request.version >= 3:
            body = request.body
            for value in (body.client_software_name, body.client_software_version):
                if not _SOFTWARE_NAME.match(value or ""):
                    log.debug(
                        "client %s at %s sent an unusual software name/version %r",
                        request.client_id,
                        request.peer,
                        value,
                    )
        return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=self._api_versions, throttle_time_ms=0)

    # -- Metadata ---------------------------------------------------------------------------------

    def _broker_list(self, listener: str) -> list[Message]:
        return [
            MetadataResponse.MetadataResponseBroker(node_id=b.id, host=e.host, port=e.port, rack=b.rack)
            for b, e in self.metadata_cache.alive_endpoints(listener)
        ]

    async def handle_metadata(self, request: Request) -> Message:
        body = request.body
        requested = body.topics
        if requested is not None and not requested and request.version == 0:
            requested = None  # in v0 an empty list means every topic
        names = self.metadata_cache.topic_names() if requested is None else [t.name for t in requested]
        topics = []
        for name in names:
            reason = topic_name_error(name)
            error = ErrorCode.INVALID_TOPIC_EXCEPTION if reason else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            topics.append(
                MetadataResponse.MetadataResponseTopic(
                    error_code=error,
                    name=name,
                    is_internal=bool(name) and is_internal(name),
                    partitions=[],
                    topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
                )
            )
        return MetadataResponse(
            throttle_time_ms=0,
            brokers=self._broker_list(request.listener),
            cluster_id=self.metadata_cache.cluster_id,
            controller_id=self.metadata_cache.controller_id,
            topics=topics,
            cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )

    # -- DescribeCluster --------------------------------------------------------------------------

    async def handle_describe_cluster(self, request: Request) -> Message:
        return DescribeClusterResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            endpoint_type=1,  # brokers
            cluster_id=self.metadata_cache.cluster_id,
            controller_id=self.metadata_cache.controller_id,
            brokers=[
                DescribeClusterResponse.DescribeClusterBroker(
                    broker_id=b.id, host=e.host, port=e.port, rack=b.rack
                )
                for b, e in self.metadata_cache.alive_endpoints(request.listener)
            ],
            cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )
