"""Finalized features (KIP-584) as a Kafka 3.9 broker in ZooKeeper mode keeps them.

The cluster's finalized features live in the ``/feature`` znode (Kafka's FeatureZNode:
``{"features":{...},"version":2,"status":1}``); its data version is the finalized-features epoch.
Kafka's controller creates the znode (enabled, with its brokers' default finalized features) when it is
elected; here, where any broker serves admin requests, the first broker to start creates it the same
way. Every broker watches it (Kafka's FinalizedFeatureChangeListener) and reports it in ApiVersions v3+:
``supported_features`` (what this broker supports), ``finalized_features`` and
``finalized_features_epoch`` (-1 until the znode is read).

A Kafka 3.9 broker in ZooKeeper mode supports no features (KafkaServer builds its BrokerFeatures with
``createEmpty()``; ``metadata.version``, ``kraft.version`` and ``transaction.version`` are KRaft-mode
features), so its controller writes an empty feature map and refuses every UpdateFeatures upgrade with
INVALID_REQUEST ("the provided feature is not supported"); only deleting a finalized feature someone
wrote into the znode can succeed. Samsa supports the same (none) and answers UpdateFeatures v0-1 with
the checks of Kafka's ``KafkaController.validateFeatureUpdate``, writing the znode with a conditional
set on its version (several brokers may serve UpdateFeatures at once). One departure: Kafka 3.9's
ZooKeeper controller ignores v1's ``validate_only``; Samsa honours it (KRaft does too) and writes nothing.
UpdateFeatures needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED, before any other check).
"""

from __future__ import annotations

import asyncio
import logging

from kazoo.exceptions import BadVersionError, NodeExistsError
from kazoo.protocol.states import ZnodeStat

from broker.authorization import ALLOW_ALL, Authorization
from network.request_channel import Request
from protocol.errors import ErrorCode
from protocol.messages import (
    ApiVersionsResponse,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from server_common.acls import CLUSTER_NAME, AclOperation, ResourceType
from zk import znodes
from zk.client import ZkClient

log = logging.getLogger(__name__)

UNKNOWN_FINALIZED_FEATURES_EPOCH = -1
# Kafka 3.9 ZooKeeper mode: BrokerFeatures.createEmpty(). name -> (min, max) supported version.
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {}
# UpdateFeaturesRequest's upgrade types (FeatureUpdate.UpgradeType).
UPGRADE_UNKNOWN, UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 0, 1, 2, 3
_UPGRADE_TYPES = (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE)
_WRITE_ATTEMPTS = 5


class FeatureUpdateError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def upgrade_type(update: UpdateFeaturesRequest.FeatureUpdateKey, version: int) -> int:
    """v0's ``allow_downgrade`` read as v1's upgrade type (UpdateFeaturesRequest.featureUpdates)."""
    if version == 0:
        return SAFE_DOWNGRADE if update.allow_downgrade else UPGRADE
    return update.upgrade_type if update.upgrade_type in _UPGRADE_TYPES else UPGRADE_UNKNOWN


def validate_feature_update(
    feature: str,
    level: int,
    kind: int,
    existing: int | None,
    supported: dict[str, tuple[int, int]],
) -> int | None:
    """The feature's new finalized level (None: delete it), or FeatureUpdateError: Kafka's
    KafkaController.validateFeatureUpdate and newFinalizedVersionOrIncompatibilityError."""

    def refuse(message: str) -> FeatureUpdateError:
        return FeatureUpdateError(ErrorCode.INVALID_REQUEST, message)

    if not feature:
        raise refuse("Feature name can not be empty.")
    if kind == UPGRADE_UNKNOWN:
        raise refuse("Received unknown upgrade type.")
    if level < 1 and kind != UPGRADE:  # a deletion
        if existing is None:
            raise refuse("Can not delete non-existing finalized feature.")
        return None
    if level < 1:
        raise refuse(
            f"Can not provide versionLevel: {level} less than 1 without setting the SAFE downgradeType in "
            "the request."
        )
    if existing is not None:
        if level == existing:
            verb = "downgrade" if kind == SAFE_DOWNGRADE else "upgrade"
            raise refuse(
                f"Can not {verb} a finalized feature from existing versionLevel:{existing} to the same value."
            )
        if level < existing and kind != SAFE_DOWNGRADE:
            raise refuse(
                f"Can not downgrade finalized feature from existing versionLevel:{existing} to provided "
                f"versionLevel:{level} without setting the downgradeType to SAFE in the request."
            )
        if kind != UPGRADE and level > existing:
            raise refuse(
                f"When the downgradeType is set to SAFE in the request, the provided versionLevel:{level} "
                f"can not be greater than existing versionLevel:{existing}."
            )
    versions = supported.get(feature)
    if versions is None:
        raise refuse(
            "Could not apply finalized feature update because the provided feature is not supported."
        )
    low, high = versions
    if not low <= level <= high:
        raise refuse(
            f"Could not apply finalized feature update because the provided versionLevel:{level} is lower "
            f"than the supported minVersion:{low}."
            if level < low
            else f"Could not apply finalized feature update because the provided versionLevel:{level} is "
            f"higher than the supported maxVersion:{high}."
        )
    return level


class FinalizedFeatures:
    """The ``/feature`` znode as this broker last read it, and the UpdateFeatures handler."""

    def __init__(
        self,
        zk: ZkClient,
        supported: dict[str, tuple[int, int]] | None = None,
        *,
        authorization: Authorization = ALLOW_ALL,
    ) -> None:
        self.zk = zk
        self.authorization = authorization
        self.supported = dict(SUPPORTED_FEATURES if supported is None else supported)
        self.features: dict[str, int] = {}
        self.epoch = UNKNOWN_FINALIZED_FEATURES_EPOCH
        self._changed = asyncio.Event()

    async def start(self) -> None:
        """Creates ``/feature`` if no one has (Kafka's controller enableFeatureVersioning), enables a
        disabled one, then follows it."""
        try:
            await self.zk.create(znodes.FEATURE, znodes.encode_feature_znode(self._default_finalized()))
            log.info("created %s with the default finalized features", znodes.FEATURE)
        except NodeExistsError:
            found = await self.zk.get(znodes.FEATURE)
            if found is not None:
                try:
                    status, _ = znodes.decode_feature_znode(found[0])
                except ValueError as e:
                    log.error("%s is malformed: %s", znodes.FEATURE, e)
                else:
                    if status == znodes.FEATURE_STATUS_DISABLED:
                        try:
                            await self.zk.set(
                                znodes.FEATURE, znodes.encode_feature_znode({}), found[1].version
                            )
                        except BadVersionError:
                            pass  # someone else changed it; the watch reads what they wrote
        self.zk.watch_data(znodes.FEATURE, self._on_change)

    def _default_finalized(self) -> dict[str, int]:
        """BrokerFeatures.defaultFinalizedFeatures: each supported feature at its highest version."""
        return {name: 0 if name == "kraft.version" else high for name, (_, high) in self.supported.items()}

    def _on_change(self, data: bytes | None, stat: ZnodeStat | None) -> None:
        if data is None or stat is None:
            self.features, self.epoch = {}, UNKNOWN_FINALIZED_FEATURES_EPOCH
            self._changed.set()
            return
        try:
            status, features = znodes.decode_feature_znode(data)
        except ValueError as e:
            log.error("ignoring the malformed %s (version %d): %s", znodes.FEATURE, stat.version, e)
            return
        if status == znodes.FEATURE_STATUS_DISABLED:
            features = {}
        incompatible = {
            name: level
            for name, level in features.items()
            if name not in self.supported or not self.supported[name][0] <= level <= self.supported[name][1]
        }
        if incompatible:
            # Kafka's broker exits here (FinalizedFeatureChangeListener); Samsa keeps serving and says so.
            log.error(
                "finalized features %s in %s are not supported by this broker (supported: %s)",
                incompatible,
                znodes.FEATURE,
                self.supported,
            )
        if stat.version < self.epoch:
            return
        self.features, self.epoch = features, stat.version
        log.info("finalized features %s at epoch %d", features, stat.version)
        self._changed.set()

    async def _wait_for_epoch(self, epoch: int, timeout_s: float) -> None:
        """Kafka's featureCache.waitUntilFeatureEpochOrThrow."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.epoch < epoch:
            self._changed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"the finalized features did not reach epoch {epoch}")
            await asyncio.wait_for(self._changed.wait(), remaining)

    # -- ApiVersions ------------------------------------------------------------------------------

    def fill_api_versions(self, response: ApiVersionsResponse) -> None:
        """ApiVersionsResponse v3+'s feature fields."""
        response.supported_features = [
            ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, (low, high) in sorted(self.supported.items())
        ]
        response.finalized_features_epoch = self.epoch
        response.finalized_features = [
            ApiVersionsResponse.FinalizedFeatureKey(
                name=name, max_version_level=level, min_version_level=level
            )
            for name, level in sorted(self.features.items())
        ]

    # -- UpdateFeatures ---------------------------------------------------------------------------

    async def handle_update_features(self, request: Request) -> UpdateFeaturesResponse:
        body: UpdateFeaturesRequest = request.body
        if not self.authorization.authorize(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
            # Kafka: ApiError(CLUSTER_AUTHORIZATION_FAILED), its default message, no per-feature results.
            return self._response(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", {})
        validate_only = request.version >= 1 and body.validate_only
        names = [u.feature for u in body.feature_updates]
        if len(set(names)) != len(names):
            duplicate = next(n for n in names if names.count(n) > 1)
            return self._response(
                ErrorCode.INVALID_REQUEST, f"Feature {duplicate} appears more than once in the request.", {}
            )
        for attempt in range(_WRITE_ATTEMPTS):
            found = await self.zk.get(znodes.FEATURE)
            if found is None:
                return self._response(ErrorCode.INVALID_REQUEST, "Feature versioning system is disabled.", {})
            data, stat = found
            try:
                status, existing = znodes.decode_feature_znode(data)
            except ValueError as e:
                return self._response(ErrorCode.FEATURE_UPDATE_FAILED, str(e), {})
            if status == znodes.FEATURE_STATUS_DISABLED:
                existing = {}
            target = dict(existing)
            results: dict[str, tuple[int, str | None]] = {}
            for update in body.feature_updates:
                kind = upgrade_type(update, request.version)
                try:
                    level = validate_feature_update(
                        update.feature,
                        update.max_version_level,
                        kind,
                        existing.get(update.feature),
                        self.supported,
                    )
                except FeatureUpdateError as e:
                    results[update.feature] = (e.code, e.message)
                    continue
                if level is None:
                    target.pop(update.feature, None)
                else:
                    target[update.feature] = level
                results[update.feature] = (ErrorCode.NONE, None)
            if validate_only or target == existing:
                return self._response(ErrorCode.NONE, None, results)
            try:
                new = await self.zk.set(znodes.FEATURE, znodes.encode_feature_znode(target), stat.version)
            except BadVersionError:
                log.info(
                    "%s changed while UpdateFeatures was applied (attempt %d); retrying",
                    znodes.FEATURE,
                    attempt,
                )
                continue
            except Exception as e:
                log.warning("UpdateFeatures failed to write %s: %s", znodes.FEATURE, e)
                return self._response(ErrorCode.NONE, None, _failed(results))
            log.info("finalized features changed from %s to %s (epoch %d)", existing, target, new.version)
            try:
                await self._wait_for_epoch(new.version, max(body.timeout_ms, 0) / 1000)
            except TimeoutError as e:
                log.warning("UpdateFeatures: %s", e)
                return self._response(ErrorCode.NONE, None, _failed(results))
            return self._response(ErrorCode.NONE, None, results)
        return self._response(ErrorCode.NONE, None, _failed(results))

    @staticmethod
    def _response(
        error: int, message: str | None, results: dict[str, tuple[int, str | None]]
    ) -> UpdateFeaturesResponse:
        return UpdateFeaturesResponse(
            throttle_time_ms=0,
            error_code=error,
            error_message=message,
            results=[
                UpdateFeaturesResponse.UpdatableFeatureResult(
                    feature=name, error_code=code, error_message=text
                )
                for name, (code, text) in results.items()
            ],
        )


def _failed(results: dict[str, tuple[int, str | None]]) -> dict[str, tuple[int, str | None]]:
    """Kafka: the updates that were valid fail with FEATURE_UPDATE_FAILED when the znode write fails."""
    return {
        name: (
            ErrorCode.FEATURE_UPDATE_FAILED,
            "Unable to update finalized features due to an unexpected server error.",
        )
        if code == ErrorCode.NONE
        else (code, text)
        for name, (code, text) in results.items()
    }
