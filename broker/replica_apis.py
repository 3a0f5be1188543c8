"""ReplicaApis: the base of the handlers that answer from this broker's replicas (Produce, ListOffsets,
DescribeProducers): what they read (the metadata cache, the replica manager) and the authorization
they ask (``ALLOW_ALL`` when no authorizer is set)."""

from __future__ import annotations

from broker.authorization import ALLOW_ALL, Authorization
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager


class ReplicaApis:
    def __init__(
        self,
        metadata_cache: MetadataCache,
        replica_manager: ReplicaManager,
        *,
        authorization: Authorization = ALLOW_ALL,
    ) -> None:
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.authorization = authorization
