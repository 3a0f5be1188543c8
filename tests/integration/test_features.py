"""Finalized features (KIP-584) on a real broker as a Kafka 3.9 ZooKeeper-mode broker keeps them: the
``/feature`` znode, ApiVersions v3+ (read by kafka-python's describe_features), and UpdateFeatures v0-1
(kafka-python's update_features, and the raw request for what the client cannot say)."""

from __future__ import annotations

import json

import pytest

from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsRequest, UpdateFeaturesRequest
from tests.support.raw_client import RawClient
from tools.local_cluster import BrokerNode

pytestmark = pytest.mark.integration

SAFE_DOWNGRADE = 2


def api_versions(raw: RawClient) -> object:
    body = ApiVersionsRequest(client_software_name="samsa-test", client_software_version="1")
    return raw.request(ApiKey.API_VERSIONS, 3, body)


def update(
    raw: RawClient, version: int, *updates: UpdateFeaturesRequest.FeatureUpdateKey, validate_only=False
):  # type: ignore[no-untyped-def]
    body = UpdateFeaturesRequest(timeout_ms=10000, feature_updates=list(updates), validate_only=validate_only)
    return raw.request(ApiKey.UPDATE_FEATURES, version, body)


def test_finalized_features_as_a_kafka_39_zookeeper_broker_keeps_them(broker: BrokerNode) -> None:
    from kafka import KafkaAdminClient

    zk = broker.cluster.zk()
    data, stat = zk.get("/feature")
    # Kafka's controller writes this at election: feature versioning enabled, no finalized features
    # (a ZooKeeper-mode Kafka 3.9 broker supports none).
    assert json.loads(data) == {"features": {}, "version": 2, "status": 1}
    raw = RawClient(broker.bootstrap)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        response = api_versions(raw)
        assert (response.supported_features, response.finalized_features) == ([], [])  # type: ignore[attr-defined]
        assert response.finalized_features_epoch == stat.version  # type: ignore[attr-defined]
        assert admin.describe_features() == {}

        # Kafka 3.9 refuses every upgrade: the broker supports no feature.
        outcome = admin.update_features({"metadata.version": 21})["metadata.version"]
        assert "InvalidRequest" in outcome and "the provided feature is not supported" in outcome
        refused = update(
            raw,
            1,
            UpdateFeaturesRequest.FeatureUpdateKey(
                feature="metadata.version", max_version_level=21, upgrade_type=1
            ),
        )
        assert refused.error_code == ErrorCode.NONE
        assert [(r.feature, r.error_code) for r in refused.results] == [
            ("metadata.version", ErrorCode.INVALID_REQUEST)
        ]
        assert "the provided feature is not supported" in refused.results[0].error_message
        assert zk.get("/feature")[1].version == stat.version

        # A finalized feature written into the znode reaches ApiVersions with the znode's version as epoch.
        zk.set("/feature", b'{"features":{"x.version":{"max_version_level":2}},"version":2,"status":1}')
        epoch = zk.get("/feature")[1].version
        broker.cluster.wait(lambda: api_versions(raw).finalized_features_epoch == epoch, "the new epoch", 10)  # type: ignore[attr-defined]
        finalized = api_versions(raw).finalized_features  # type: ignore[attr-defined]
        assert [(f.name, f.min_version_level, f.max_version_level) for f in finalized] == [
            ("x.version", 2, 2)
        ]
        assert admin.describe_features() == {"x.version": {"finalized": (2, 2), "finalized_epoch": epoch}}

        # Deleting it (v0: allow_downgrade at level 0; v1 validate_only writes nothing).
        delete_v1 = UpdateFeaturesRequest.FeatureUpdateKey(
            feature="x.version", max_version_level=0, upgrade_type=SAFE_DOWNGRADE
        )
        checked = update(raw, 1, delete_v1, validate_only=True)
        assert [(r.feature, r.error_code) for r in checked.results] == [("x.version", ErrorCode.NONE)]
        assert zk.get("/feature")[1].version == epoch
        delete_v0 = UpdateFeaturesRequest.FeatureUpdateKey(
            feature="x.version", max_version_level=0, allow_downgrade=True
        )
        deleted = update(raw, 0, delete_v0)
        assert [(r.feature, r.error_code) for r in deleted.results] == [("x.version", ErrorCode.NONE)]
        data, stat = zk.get("/feature")
        assert (json.loads(data), stat.version) == ({"features": {}, "version": 2, "status": 1}, epoch + 1)
        assert api_versions(raw).finalized_features == []  # type: ignore[attr-defined]
        again = update(raw, 0, delete_v0)
        assert "Can not delete non-existing finalized feature." in again.results[0].error_message
    finally:
        admin.close()
        raw.close()
