"""Quota arithmetic against Kafka's (ClientQuotaManagerTest, ClientRequestQuotaManagerTest,
ReplicationQuotaManagerTest, RateTest), with D1's ClientQuotaCache behind the managers."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from broker.client_quota_cache import ClientQuotaCache, QuotaEntity
from broker.quota_manager import (
    ALL_REPLICAS,
    ClientQuotaManager,
    ClientRequestQuotaManager,
    QuotaManagers,
    Rate,
    ReplicationQuotaManager,
    parse_throttled_replicas,
    set_throttle_time,
    throttle_time_ms,
)
from protocol.api import ApiKey, api
from protocol.messages import MetadataResponse, ProduceResponse
from server_common.principal import ANONYMOUS


class Clock:
    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def sleep(self, ms: float) -> None:
        self.now += ms


def produce_manager(cache: ClientQuotaCache, clock: Clock) -> ClientQuotaManager:
    return ClientQuotaManager("Produce", "producer_byte_rate", cache, 11, 1, clock)


def test_quota_violation_throttle_time_matches_kafka() -> None:
    # ClientQuotaManagerTest.testQuotaViolation: 400 B/s for 10 s under a 500 B/s quota, then a spike.
    cache = ClientQuotaCache()
    cache.update(QuotaEntity.of(user="", client_id=""), {"producer_byte_rate": "500"})
    clock = Clock()
    manager = produce_manager(cache, clock)
    for _ in range(10):
        assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 400) == 0
        clock.sleep(1000)
    clock.sleep(500)
    # 400*10 + 2300 = 6300 B over 10.5 s = 600 B/s; (600 - 500) / 500 * 10500 ms = 2100 ms.
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 2300) == 2100
    clock.sleep(2100)
    for _ in range(10):
        manager.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 400)
        clock.sleep(1000)
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 0) == 0


def test_rate_window_counts_at_least_num_minus_one_full_windows() -> None:
    # Rate.windowSize: 1 s into an 11 x 1 s window, the rate is over 10 s (+ the part elapsed).
    rate = Rate(1000, 11)
    rate.record(1000, 0)
    assert rate.window_size(0) == 10_000
    assert rate.measure(0) == pytest.approx(100.0)
    assert rate.window_size(500) == 10_500
    rate.record(1000, 12_000)  # far later: the old samples are obsolete
    assert rate.measure(12_000) == pytest.approx(1000 / 10.0)


def test_simple_rate_window_is_elapsed_time_at_least_one_window() -> None:
    rate = Rate(1000, 11, simple=True)
    rate.record(500, 0)
    assert rate.window_size(0) == 1000
    assert rate.measure(0) == pytest.approx(500.0)
    rate.record(500, 3000)
    assert rate.window_size(4000) == 4000
    assert rate.measure(4000) == pytest.approx(250.0)


def test_throttle_time_rounds_half_up_as_java() -> None:
    assert throttle_time_ms(600, 500, 10_500) == 2100
    assert throttle_time_ms(100.25, 100, 2000) == 5  # 4.99... -> 5
    assert throttle_time_ms(1000.5, 1000, 1000) == 1  # 0.5 -> 1 (Math.round)


def test_no_quota_records_nothing_throttles_nothing() -> None:
    cache = ClientQuotaCache()
    manager = produce_manager(cache, Clock())
    assert not manager.enabled
    assert manager.maybe_record_and_get_throttle_time_ms("u", "c", 10**9) == 0
    assert manager.sensors == {}
    assert manager.max_value_in_quota_window("u", "c") == math.inf


def test_user_quota_is_shared_by_the_users_client_ids() -> None:
    cache = ClientQuotaCache()
    cache.update(QuotaEntity.of(user="alice"), {"producer_byte_rate": "1000"})
    clock = Clock()
    manager = produce_manager(cache, clock)
    assert manager.record_and_get_throttle_time_ms("alice", "c1", 5000) == 0  # 500 B/s
    # the other client id of alice adds to the same sensor: 10500 B over 10 s
    assert manager.record_and_get_throttle_time_ms("alice", "c2", 5500) == 500
    assert set(manager.sensors) == {("alice", "")}
    # bob has no quota (users-only quotas: tags (bob, ""), unlimited)
    assert manager.record_and_get_throttle_time_ms("bob", "c1", 10**9) == 0


def test_client_id_default_quota_applies_per_client_id() -> None:
    cache = ClientQuotaCache()
    cache.update(QuotaEntity.of(client_id=""), {"producer_byte_rate": "100"})
    manager = produce_manager(cache, Clock())
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "a", 1000) == 0
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "b", 1000) == 0
    assert manager.record_and_get_throttle_time_ms("ANONYMOUS", "a", 1000) > 0


def test_quota_change_applies_to_existing_sensor() -> None:
    cache = ClientQuotaCache()
    cache.update(QuotaEntity.of(client_id="c"), {"producer_byte_rate": "100"})
    manager = produce_manager(cache, Clock())
    assert manager.record_and_get_throttle_time_ms("u", "c", 2000) > 0
    cache.update(QuotaEntity.of(client_id="c"), {"producer_byte_rate": "1000000"})
    assert manager.record_and_get_throttle_time_ms("u", "c", 0) == 0


def test_request_quota_throttle_is_bounded_by_one_window() -> None:
    # ClientRequestQuotaManager: boundedThrottleTime(e, quotaWindowSizeSeconds * 1000).
    cache = ClientQuotaCache()
    cache.update(QuotaEntity.of(client_id="c"), {"request_percentage": "1"})
    manager = ClientRequestQuotaManager(cache, 11, 1, Clock())
    assert manager.record_and_get_throttle_time_ms("u", "c", 1000) == 1000


def test_unrecord_takes_back_a_throttled_fetch() -> None:
    cache = ClientQuotaCache()
    cache.update(QuotaEntity.of(client_id="c"), {"consumer_byte_rate": "100"})
    clock = Clock()
    manager = ClientQuotaManager("Fetch", "consumer_byte_rate", cache, 11, 1, clock)
    assert manager.record_and_get_throttle_time_ms("u", "c", 5000) > 0
    manager.unrecord("u", "c", 5000)
    assert manager.record_and_get_throttle_time_ms("u", "c", 0) == 0


def test_max_value_in_quota_window() -> None:
    # getMaxValueInQuotaWindow: bound * (num samples - 1) * window seconds.
    cache = ClientQuotaCache()
    cache.update(QuotaEntity.of(client_id="c"), {"consumer_byte_rate": "1000"})
    manager = ClientQuotaManager("Fetch", "consumer_byte_rate", cache, 11, 1, Clock())
    assert manager.max_value_in_quota_window("u", "c") == 10_000


def test_idle_sensors_expire_after_an_hour() -> None:
    cache = ClientQuotaCache()
    cache.update(QuotaEntity.of(client_id=""), {"producer_byte_rate": "100"})
    clock = Clock()
    manager = produce_manager(cache, clock)
    manager.record_and_get_throttle_time_ms("u", "old", 1)
    clock.sleep(3_601_000)
    manager.record_and_get_throttle_time_ms("u", "new", 1)
    assert set(manager.sensors) == {("", "new")}


def test_replication_quota_exceeded_only_over_bound() -> None:
    # ReplicationQuotaManagerTest.shouldExceedQuotaThenReturnBackBelowBoundAsTimePasses (shape).
    clock = Clock(0)
    quota = ReplicationQuotaManager("LeaderReplication", 11, 1, clock)
    quota.update_quota(100)
    quota.record(1)
    assert not quota.is_quota_exceeded()
    quota.record(200)  # 201 B in the first 1 s window
    assert quota.is_quota_exceeded()
    clock.sleep(3000)  # 201 B / 3 s = 67 B/s
    assert not quota.is_quota_exceeded()
    quota.update_quota(None)
    quota.record(10**9)
    assert not quota.is_quota_exceeded()


def test_throttled_replicas_parsing_keeps_this_brokers_partitions() -> None:
    assert parse_throttled_replicas("*", 1) == ALL_REPLICAS
    assert parse_throttled_replicas("0:1,1:2,2:1", 1) == frozenset({0, 2})
    assert parse_throttled_replicas("0:2", 1) == frozenset()
    with pytest.raises(ValueError):
        parse_throttled_replicas("0-1", 1)


def test_topic_config_marks_and_clears_throttled_partitions() -> None:
    managers = QuotaManagers(ClientQuotaCache(), broker_id=2)
    managers.apply_topic_config(
        "t",
        {"leader.replication.throttled.replicas": "0:1,1:2", "follower.replication.throttled.replicas": "*"},
    )
    assert managers.leader.is_throttled("t", 1) and not managers.leader.is_throttled("t", 0)
    assert managers.follower.is_throttled("t", 7)
    managers.apply_topic_config("t", {})
    assert not managers.leader.is_throttled("t", 1) and not managers.follower.is_throttled("t", 7)


def test_broker_rates_come_from_the_per_broker_config() -> None:
    managers = QuotaManagers(ClientQuotaCache(), broker_id=1)
    managers.apply_broker_configs(
        {"leader.replication.throttled.rate": "1000", "follower.replication.throttled.rate": "2000"}
    )
    assert managers.leader.bound == 1000 and managers.follower.bound == 2000
    managers.apply_broker_configs({})
    assert managers.leader.bound is None and managers.follower.bound is None


def test_set_throttle_time_on_responses() -> None:
    response = ProduceResponse(responses=[], throttle_time_ms=0)
    set_throttle_time(response, 123)
    assert response.throttle_time_ms == 123
    metadata = MetadataResponse()
    set_throttle_time(metadata, 5)
    set_throttle_time(None, 5)


class _Connection:
    def __init__(self) -> None:
        self.throttled_for: list[float] = []

    def throttle(self, seconds: float) -> None:
        self.throttled_for.append(seconds)


def _request(api_key: int, size: int, client_id: str = "c", acks: int = 1) -> SimpleNamespace:
    return SimpleNamespace(
        api=api(api_key),
        connection=_Connection(),
        principal=ANONYMOUS,
        client_id=client_id,
        size=size,
        body=SimpleNamespace(acks=acks),
        peer="peer",
        dequeued_at=0.0,
        api_local_done_at=0.0,
    )


def test_produce_over_quota_gets_throttle_time_and_muted_connection() -> None:
    cache = ClientQuotaCache()
    managers = QuotaManagers(cache, broker_id=1)
    assert not managers.enabled
    cache.update(QuotaEntity.of(client_id="c"), {"producer_byte_rate": "1000"})
    assert managers.enabled
    request = _request(ApiKey.PRODUCE, 100_000)
    response = managers.respond(request, ProduceResponse(responses=[], throttle_time_ms=0))  # type: ignore[arg-type]
    assert response.throttle_time_ms > 0
    assert request.connection.throttled_for == [response.throttle_time_ms / 1000]
    # acks=0: no response, but the connection is still muted for the bandwidth
    quiet = _request(ApiKey.PRODUCE, 100_000, acks=0)
    assert managers.respond(quiet, None) is None  # type: ignore[arg-type]
    assert quiet.connection.throttled_for


def test_exempt_requests_are_never_throttled() -> None:
    cache = ClientQuotaCache()
    cache.update(QuotaEntity.of(client_id=""), {"request_percentage": "0.0001"})
    managers = QuotaManagers(cache, broker_id=1)
    request = _request(ApiKey.LEADER_AND_ISR, 10)
    request.dequeued_at = 1.0
    request.api_local_done_at = 2.0
    managers.respond(request, None)  # type: ignore[arg-type]
    assert not request.connection.throttled_for
    assert managers.request.sensors == {}
