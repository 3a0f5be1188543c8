"""Quota enforcement: Kafka's ClientQuotaManager, ClientRequestQuotaManager and ReplicationQuotaManager.

Client quotas (KIP-13, KIP-55, KIP-124): the bound of a (user, client id) comes from the
``ClientQuotaCache`` (broker/client_quota_cache.py: ZooKeeper's ``/config/users`` and ``/config/clients``
with Kafka's 8-level precedence), which also says which clients *share* a sensor (its metric tags). A
sensor is Kafka's ``Rate`` over a ``SampledStat``: ``quota.window.num`` (11) samples of
``quota.window.size.seconds`` (1 s); the rate is the samples' sum over the elapsed window, counted as
at least ``num - 1`` full windows (``Rate.windowSize``). A value is recorded first, then the rate is
measured; above the bound the throttle time is Kafka's ``QuotaUtils.throttleTime``: ``(rate - bound) /
bound * window`` ms, rounded — the time for the rate to come back to the bound if nothing more came.
The request quota (``request_percentage``, percent of one handler thread) bounds it by one window
(``boundedThrottleTime``); the byte rates do not.

Throttling is KIP-219's: the response goes out at once carrying ``throttle_time_ms`` and the broker
mutes the connection (stops reading from it) for that long (``Connection.throttle``). KafkaApis calls
``QuotaManagers.respond`` for every response (broker/kafka_apis.py); Fetch does its part in
broker/fetch_apis.py, as Kafka's handleFetchRequest: a consumer fetch that violates a quota gets an empty
response (its session untouched, its bytes unrecorded) and is bounded up front to what one quota window
allows (``getMaxValueInQuotaWindow``).

Replication throttles (KIP-73): ``leader.replication.throttled.rate`` /
``follower.replication.throttled.rate`` (per-broker dynamic configs, bytes/s) bound the bytes of the
partitions a topic's
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas`` name
(``partition:broker`` entries for this broker, or ``*``). A leader leaves out the records of a throttled
partition whose follower is not in the ISR while its rate is over the bound; a follower leaves such a
partition out of its fetch. Their rate is Kafka's ``SimpleRate`` (window: the elapsed time, at least
one sample window) over ``replication.quota.window.num`` (11) x ``replication.quota.window.size.seconds``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from network.handler_pool import Parked
from protocol.api import ApiKey
from server_common.futures import then
from server_common.metrics import Metrics

if TYPE_CHECKING:
    from network.request_channel import Request

log = logging.getLogger(__name__)

# Kafka's defaults (ClientQuotaManagerConfig, ReplicationQuotaManagerConfig).
DEFAULT_NUM_QUOTA_SAMPLES = 11
DEFAULT_QUOTA_WINDOW_SIZE_SECONDS = 1
# Sensors of a client idle this long are dropped (ClientQuotaManager.InactiveSensorExpirationTimeSeconds).
INACTIVE_SENSOR_EXPIRATION_SECONDS = 3600
_SWEEP_INTERVAL_SECONDS = 60.0
# Kafka's throttle-time sensor uses the broker's default metric config: metrics.num.samples (2) windows
# of metrics.sample.window.ms (30 s).
_THROTTLE_AVG_SAMPLES = 2
_THROTTLE_AVG_WINDOW_MS = 30_000.0
# ClientRequestQuotaManager.NanosToPercentagePerSecond, for seconds: percent of one thread.
_SECONDS_TO_PERCENTAGE = 100.0

# Quota types of the ClientQuotaCache (zk/client_quotas.py names).
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"

# Broker dynamic configs (QuotaConfigs) and topic configs of the replication throttles.
LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"

# The APIs Kafka answers with sendResponseExemptThrottle (inter-broker and controller requests): their
# handler time counts as exempt-request-time, never against a client's request quota. A follower's Fetch
# is exempt too (broker/fetch_apis.py).
EXEMPT_APIS = frozenset(
    {
        ApiKey.LEADER_AND_ISR,
        ApiKey.STOP_REPLICA,
        ApiKey.UPDATE_METADATA,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.ALTER_PARTITION,
    }
)


def java_round(value: float) -> int:
    """Java's Math.round: half up."""
    return math.floor(value + 0.5)


class QuotaLookup(Protocol):
    """What the managers ask of the ClientQuotaCache (broker/client_quota_cache.py)."""

    on_change: list[Callable[[Any], None]]

    def resolve(self, user: str, client_id: str, quota_type: str) -> Any: ...

    def quotas_enabled(self, quota_type: str) -> bool: ...


# -- Kafka's sampled stats ---------------------------------------------------------------------------


class _Sample:
    __slots__ = ("count", "last_event", "start", "value")

    def __init__(self, now: float) -> None:
        self.start = now
        self.last_event = now
        self.value = 0.0
        self.count = 0

    def reset(self, now: float) -> None:
        self.start = now
        self.last_event = now
        self.value = 0.0
        self.count = 0


class SampledSum:
    """Kafka's SampledStat with WindowedSum's update and combine (times in ms): ``num_samples``
    windows of ``window_ms``, plus one overlapping sample as Kafka 3.9 keeps."""

    __slots__ = ("current", "num_samples", "samples", "window_ms")

    def __init__(self, window_ms: float, num_samples: int) -> None:
        self.window_ms = window_ms
        self.num_samples = num_samples
        self.samples: list[_Sample] = []
        self.current = 0

    def record(self, value: float, now: float) -> None:
        samples = self.samples
        if not samples:
            samples.append(_Sample(now))
        sample = samples[self.current]
        if now - sample.start >= self.window_ms:  # Sample.isComplete (no event window)
            self.current = current = (self.current + 1) % (self.num_samples + 1)
            if current >= len(samples):
                sample = _Sample(now)
                samples.append(sample)
            else:
                sample = samples[current]
                sample.reset(now)
        sample.value += value
        sample.count += 1
        sample.last_event = now

    def purge_obsolete(self, now: float) -> None:
        expire_age = self.num_samples * self.window_ms
        for sample in self.samples:
            if now - sample.last_event >= expire_age:
                sample.reset(now)

    def oldest(self, now: float) -> _Sample:
        if not self.samples:
            self.samples.append(_Sample(now))
        return min(self.samples, key=lambda s: s.start)

    def total(self, now: float) -> float:
        self.purge_obsolete(now)
        return sum(s.value for s in self.samples)

    def count(self, now: float) -> int:
        self.purge_obsolete(now)
        return sum(s.count for s in self.samples)


class Rate:
    """Kafka's Rate (per second) over a windowed sum; ``simple``: Kafka's SimpleRate, the replication
    quotas' (the window is the time elapsed since the oldest sample, at least one sample window)."""

    __slots__ = ("simple", "stat")

    def __init__(self, window_ms: float, num_samples: int, *, simple: bool = False) -> None:
        self.stat = SampledSum(window_ms, num_samples)
        self.simple = simple

    def record(self, value: float, now_ms: float) -> None:
        self.stat.record(value, now_ms)

    def window_size(self, now_ms: float) -> float:
        """Rate.windowSize / SimpleRate.windowSize, in ms."""
        stat = self.stat
        stat.purge_obsolete(now_ms)
        elapsed = now_ms - stat.oldest(now_ms).start
        if self.simple:
            return max(elapsed, stat.window_ms)
        full_windows = int(elapsed // stat.window_ms)
        min_full_windows = stat.num_samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * stat.window_ms
        return max(elapsed, 1.0)

    def measure(self, now_ms: float) -> float:
        """The rate per second."""
        total = self.stat.total(now_ms)
        return total / (self.window_size(now_ms) / 1000.0)


class Avg:
    """Kafka's Avg over sampled windows (0 where Kafka says NaN: nothing recorded in the window)."""

    __slots__ = ("stat",)

    def __init__(self, window_ms: float = _THROTTLE_AVG_WINDOW_MS, num_samples: int = _THROTTLE_AVG_SAMPLES):
        self.stat = SampledSum(window_ms, num_samples)

    def record(self, value: float, now_ms: float) -> None:
        self.stat.record(value, now_ms)

    def measure(self, now_ms: float) -> float:
        count = self.stat.count(now_ms)
        return self.stat.total(now_ms) / count if count else 0.0


def throttle_time_ms(value: float, bound: float, window_ms: float) -> int:
    """QuotaUtils.throttleTime: how long until a rate of ``value`` over ``window_ms`` comes back to
    ``bound`` with nothing more recorded."""
    return java_round((value - bound) / bound * window_ms)


def now_ms() -> float:
    return time.monotonic() * 1000.0


# -- client quotas -------------------------------------------------------------------------------------


class ClientSensors:
    """The quota sensor and throttle-time sensor of one set of metric tags (user, client id)."""

    __slots__ = ("bound", "client_id", "last_used", "rate", "throttle_time", "user")

    def __init__(self, user: str, client_id: str, window_ms: float, num_samples: int, now: float) -> None:
        self.user = user
        self.client_id = client_id
        self.rate = Rate(window_ms, num_samples)
        self.throttle_time = Avg()
        self.bound: float | None = None
        self.last_used = now


class ClientQuotaManager:
    """One quota type's sensors (Kafka's ClientQuotaManager): Produce (``producer_byte_rate``),
    Fetch (``consumer_byte_rate``); ClientRequestQuotaManager below for Request."""

    metric_attribute = "byte_rate"

    def __init__(
        self,
        quota_type: str,
        cache_type: str,
        cache: QuotaLookup,
        num_samples: int = DEFAULT_NUM_QUOTA_SAMPLES,
        window_seconds: int = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
        clock: Callable[[], float] = now_ms,
    ) -> None:
        self.quota_type = quota_type  # Kafka's QuotaType name: the MBean type and the metric's
        self.cache_type = cache_type
        self.cache = cache
        self.num_samples = num_samples
        self.window_seconds = window_seconds
        self.window_ms = window_seconds * 1000.0
        self.clock = clock
        self.sensors: dict[tuple[str, str], ClientSensors] = {}
        self.queue_size = 0  # connections muted now (Kafka's delay queue size)
        self._last_sweep = clock()

    @property
    def enabled(self) -> bool:
        """Kafka's quotasEnabled: nothing is recorded or throttled until some quota was set."""
        return self.cache.quotas_enabled(self.cache_type)

    def sensors_for(self, user: str, client_id: str, now: float) -> ClientSensors:
        resolved = self.cache.resolve(user, client_id, self.cache_type)
        key = (resolved.user_tag, resolved.client_id_tag)
        sensors = self.sensors.get(key)
        if sensors is None:
            if now - self._last_sweep > _SWEEP_INTERVAL_SECONDS * 1000:
                self.expire(now)
            sensors = self.sensors[key] = ClientSensors(
                resolved.user_tag, resolved.client_id_tag, self.window_ms, self.num_samples, now
            )
        sensors.bound = resolved.limit
        sensors.last_used = now
        return sensors

    def expire(self, now: float) -> None:
        """Drops the sensors idle for an hour (Kafka's sensor expiry)."""
        self._last_sweep = now
        deadline = now - INACTIVE_SENSOR_EXPIRATION_SECONDS * 1000
        for key in [k for k, s in self.sensors.items() if s.last_used < deadline]:
            del self.sensors[key]

    def record_and_get_throttle_time_ms(
        self, user: str, client_id: str, value: float, now: float | None = None
    ) -> int:
        """recordAndGetThrottleTimeMs: records ``value``; the throttle time if the rate is now over the
        bound, else 0."""
        if now is None:
            now = self.clock()
        sensors = self.sensors_for(user, client_id, now)
        rate = sensors.rate
        rate.record(value, now)
        bound = sensors.bound
        if bound is None:
            return 0
        measured = rate.measure(now)
        if measured <= bound:
            return 0
        return self.throttle_time(measured, bound, rate.window_size(now))

    def maybe_record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float) -> int:
        if not self.enabled:
            return 0
        return self.record_and_get_throttle_time_ms(user, client_id, value)

    def throttle_time(self, measured: float, bound: float, window_ms: float) -> int:
        return throttle_time_ms(measured, bound, window_ms)

    def record_no_throttle(self, user: str, client_id: str, value: float, now: float | None = None) -> None:
        if now is None:
            now = self.clock()
        self.sensors_for(user, client_id, now).rate.record(value, now)

    def unrecord(self, user: str, client_id: str, value: float, now: float | None = None) -> None:
        """unrecordQuotaSensor: takes back a value recorded (a throttled fetch sends nothing)."""
        self.record_no_throttle(user, client_id, -value, now)

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """getMaxValueInQuotaWindow: the most one request may take without being throttled for sure."""
        if not self.enabled:
            return math.inf
        bound = self.cache.resolve(user, client_id, self.cache_type).limit
        if bound is None:
            return math.inf
        return bound * (self.num_samples - 1) * self.window_seconds

    def throttle(self, request: Request, throttle_ms: int) -> None:
        """Mutes the request's connection for ``throttle_ms`` (KIP-219) and records the throttle time."""
        if throttle_ms <= 0:
            return
        now = self.clock()
        self.sensors_for(request.principal.name, request.client_id or "", now).throttle_time.record(
            throttle_ms, now
        )
        request.throttle_time_ms = throttle_ms  # the request log's throttleTime (acks=0 has no response)
        request.connection.throttle(throttle_ms / 1000.0)
        self.queue_size += 1
        try:
            asyncio.get_running_loop().call_later(throttle_ms / 1000.0, self._throttle_done)
        except RuntimeError:  # no loop (unit tests)
            self.queue_size -= 1
        log.debug(
            "%s quota: connection %s (user %s, client %s) throttled for %d ms",
            self.quota_type,
            request.peer,
            request.principal.name,
            request.client_id,
            throttle_ms,
        )

    def _throttle_done(self) -> None:
        self.queue_size -= 1

    def readings(self, attribute: str) -> list[tuple[tuple[str, str], float]]:
        """(user, client id) tags -> the rate or the average throttle time, for the gauges."""
        now = self.clock()
        if attribute == "throttle_time":
            return [((s.user, s.client_id), s.throttle_time.measure(now)) for s in self.sensors.values()]
        return [((s.user, s.client_id), s.rate.measure(now)) for s in self.sensors.values()]


class ClientRequestQuotaManager(ClientQuotaManager):
    """The request quota (``request_percentage``; Kafka's ClientRequestQuotaManager): a request's handler
    time as percent of one thread; the throttle time is bounded by one quota window. Requests exempt
    from it (inter-broker) count in ``exempt_request_time``."""

    metric_attribute = "request_time"

    def __init__(
        self,
        cache: QuotaLookup,
        num_samples: int = DEFAULT_NUM_QUOTA_SAMPLES,
        window_seconds: int = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
        clock: Callable[[], float] = now_ms,
    ) -> None:
        super().__init__("Request", REQUEST_PERCENTAGE, cache, num_samples, window_seconds, clock)
        self.max_throttle_time_ms = window_seconds * 1000
        self.exempt = Rate(self.window_ms, num_samples)

    def throttle_time(self, measured: float, bound: float, window_ms: float) -> int:
        return min(throttle_time_ms(measured, bound, window_ms), self.max_throttle_time_ms)

    def maybe_record_request(self, request: Request) -> int:
        """maybeRecordAndGetThrottleTimeMs(request): the handler time so far (dequeued until the handler
        returned, or until now for a response made in the handler)."""
        if not self.enabled:
            return 0
        return self.record_and_get_throttle_time_ms(
            request.principal.name, request.client_id or "", thread_time_percentage(request)
        )

    def maybe_record_exempt(self, request: Request) -> None:
        if self.enabled:
            self.exempt.record(thread_time_percentage(request), self.clock())


def thread_time_percentage(request: Request) -> float:
    """Kafka's nanosToPercentage(requestThreadTimeNanos): the request's handler time, in percent-seconds
    of one thread (``api_local_done_at - dequeued_at``; now when the handler has not returned yet)."""
    start = request.dequeued_at
    if not start:
        return 0.0
    done = request.api_local_done_at or time.monotonic()
    return max(done - start, 0.0) * _SECONDS_TO_PERCENTAGE


# -- replication quotas --------------------------------------------------------------------------------

ALL_REPLICAS = "*"


class ReplicationQuotaManager:
    """Kafka's ReplicationQuotaManager: one byte-rate bound (None: unlimited, Kafka's Long.MaxValue) for
    the partitions marked throttled."""

    def __init__(
        self,
        replication_type: str,
        num_samples: int = DEFAULT_NUM_QUOTA_SAMPLES,
        window_seconds: int = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
        clock: Callable[[], float] = now_ms,
    ) -> None:
        self.replication_type = replication_type  # LeaderReplication, FollowerReplication, AlterLogDirs...
        self.rate = Rate(window_seconds * 1000.0, num_samples, simple=True)
        self.bound: float | None = None
        self.clock = clock
        # topic -> the throttled partitions of this broker, or ALL_REPLICAS.
        self.throttled: dict[str, frozenset[int] | str] = {}

    def update_quota(self, bound: float | None) -> None:
        if bound != self.bound:
            shown = "none" if bound is None else f"{bound:.0f} B/s"
            log.info("%s throttle: %s", self.replication_type, shown)
        self.bound = bound

    def is_quota_exceeded(self) -> bool:
        bound = self.bound
        if bound is None:
            return False
        return self.rate.measure(self.clock()) > bound

    def is_throttled(self, topic: str, partition: int) -> bool:
        partitions = self.throttled.get(topic)
        if partitions is None:
            return False
        return partitions == ALL_REPLICAS or partition in partitions

    def record(self, value: int) -> None:
        self.rate.record(value, self.clock())

    def mark_throttled(self, topic: str, partitions: frozenset[int] | str) -> None:
        self.throttled[topic] = partitions

    def remove_throttle(self, topic: str) -> None:
        self.throttled.pop(topic, None)

    @property
    def upper_bound(self) -> float:
        return math.inf if self.bound is None else self.bound

    def byte_rate(self) -> float:
        return self.rate.measure(self.clock())


def parse_throttled_replicas(value: str, broker_id: int) -> frozenset[int] | str:
    """A ``*.replication.throttled.replicas`` value as this broker reads it (ConfigHandler's
    parseThrottledPartitions): ``*``, or the partitions of the ``partition:broker`` entries naming this
    broker. ValueError on a malformed entry."""
    value = value.strip()
    if value == ALL_REPLICAS:
        return ALL_REPLICAS
    partitions = set()
    for entry in filter(None, (e.strip() for e in value.split(","))):
        partition, sep, broker = entry.partition(":")
        if not sep:
            raise ValueError(f"{entry!r} is not partition:broker")
        if int(broker.strip()) == broker_id:
            partitions.add(int(partition.strip()))
    return frozenset(partitions)


def _rate_setting(props: Mapping[str, str], name: str) -> float | None:
    value = props.get(name)
    if value is None or value == "":
        return None
    try:
        rate = int(str(value).strip())
    except ValueError:
        log.warning("ignoring %s=%r: not a number of bytes per second", name, value)
        return None
    return None if rate >= 2**63 - 1 else float(rate)


class QuotaManagers:
    """The broker's quota managers (Kafka's QuotaFactory.QuotaManagers) and where they meet the
    requests."""

    def __init__(
        self,
        cache: QuotaLookup,
        broker_id: int,
        num_samples: int = DEFAULT_NUM_QUOTA_SAMPLES,
        window_seconds: int = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
        replication_num_samples: int = DEFAULT_NUM_QUOTA_SAMPLES,
        replication_window_seconds: int = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
        alter_log_dirs_num_samples: int = DEFAULT_NUM_QUOTA_SAMPLES,
        alter_log_dirs_window_seconds: int = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS,
    ) -> None:
        self.cache = cache
        self.broker_id = broker_id
        self.produce = ClientQuotaManager("Produce", PRODUCER_BYTE_RATE, cache, num_samples, window_seconds)
        self.fetch = ClientQuotaManager("Fetch", CONSUMER_BYTE_RATE, cache, num_samples, window_seconds)
        self.request = ClientRequestQuotaManager(cache, num_samples, window_seconds)
        self.leader = ReplicationQuotaManager(
            "LeaderReplication", replication_num_samples, replication_window_seconds
        )
        self.follower = ReplicationQuotaManager(
            "FollowerReplication", replication_num_samples, replication_window_seconds
        )
        self.alter_log_dirs = ReplicationQuotaManager(
            "AlterLogDirsReplication", alter_log_dirs_num_samples, alter_log_dirs_window_seconds
        )
        # Any client quota ever set (Kafka's quotasEnabled of any type): until then a response costs one
        # attribute check.
        self.enabled = False
        cache.on_change.append(self._on_quota_change)
        self._on_quota_change(None)

    @classmethod
    def from_config(cls, cache: QuotaLookup, config: Any) -> QuotaManagers:
        return cls(
            cache,
            config.broker_id,
            config["quota.window.num"],
            config["quota.window.size.seconds"],
            config["replication.quota.window.num"],
            config["replication.quota.window.size.seconds"],
            config["alter.log.dirs.replication.quota.window.num"],
            config["alter.log.dirs.replication.quota.window.size.seconds"],
        )

    def _on_quota_change(self, _entity: Any) -> None:
        cache = self.cache
        self.enabled = any(
            cache.quotas_enabled(t) for t in (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
        )

    # -- client quotas at response time --------------------------------------------------------------

    def respond(self, request: Request, response: Any) -> Any:
        """The response to ``request`` after its quotas: recorded, and if violated the connection muted
        and ``throttle_time_ms`` set. A parked response is handled once it is ready. Fetch is left to
        FetchApis (it answers a violating consumer with an empty response)."""
        key = request.api.key
        if key == ApiKey.FETCH:
            return response
        if key in EXEMPT_APIS:
            self.request.maybe_record_exempt(request)
            return response
        # A parked response (network.handler_pool.Parked) is recorded when it is ready, as Kafka's
        # response callbacks do.
        if isinstance(response, Parked):
            return Parked(then(response.response, partial(self._respond_now, request)))
        return self._respond_now(request, response)

    def _respond_now(self, request: Request, response: Any) -> Any:
        user, client_id = request.principal.name, request.client_id or ""
        bandwidth = 0
        if request.api.key == ApiKey.PRODUCE:
            if self.produce.enabled:
                bandwidth = self.produce.record_and_get_throttle_time_ms(user, client_id, request.size)
            if request.body is not None and request.body.acks == 0:
                # Kafka exempts acks=0 from the request quota (no response to carry a throttle time).
                self.request.maybe_record_exempt(request)
                self.produce.throttle(request, bandwidth)
                return response
        requested = self.request.maybe_record_request(request)
        throttle_ms = max(bandwidth, requested)
        if throttle_ms > 0:
            if bandwidth > requested:
                self.produce.throttle(request, bandwidth)
            else:
                self.request.throttle(request, requested)
            set_throttle_time(response, throttle_ms)
        return response

    # -- replication throttles -----------------------------------------------------------------------

    def apply_broker_configs(self, per_broker: Mapping[str, str]) -> None:
        """This broker's dynamic configs (Kafka's BrokerConfigHandler: the per-broker entity only)."""
        self.leader.update_quota(_rate_setting(per_broker, LEADER_THROTTLED_RATE))
        self.follower.update_quota(_rate_setting(per_broker, FOLLOWER_THROTTLED_RATE))
        self.alter_log_dirs.update_quota(_rate_setting(per_broker, ALTER_LOG_DIRS_RATE))

    def apply_topic_config(self, topic: str, overrides: Mapping[str, str]) -> None:
        """A topic's throttled-replica configs (Kafka's TopicConfigHandler.updateThrottledList)."""
        for name, manager in (
            (LEADER_THROTTLED_REPLICAS, self.leader),
            (FOLLOWER_THROTTLED_REPLICAS, self.follower),
        ):
            value = str(overrides.get(name) or "").strip()
            if not value:
                manager.remove_throttle(topic)
                continue
            try:
                manager.mark_throttled(topic, parse_throttled_replicas(value, self.broker_id))
            except ValueError as e:
                log.warning("ignoring %s of topic %s: %s", name, topic, e)
                manager.remove_throttle(topic)

    def remove_topic(self, topic: str) -> None:
        self.leader.remove_throttle(topic)
        self.follower.remove_throttle(topic)

    # -- metrics -------------------------------------------------------------------------------------

    def register_metrics(self, metrics: Metrics) -> None:
        """Kafka's quota sensors, per user and client id: ``kafka.server:type=Produce|Fetch|Request,
        user=..,client-id=..`` attributes byte-rate / request-time and throttle-time; queue-size;
        exempt-request-time; the replication byte rates."""
        labels = ("user", "client_id")
        for manager in (self.produce, self.fetch, self.request):
            prefix = f"kafka_server_{manager.quota_type.lower()}"
            attribute = manager.metric_attribute
            metrics.gauge(
                f"{prefix}_{attribute}",
                f"{manager.quota_type} quota: "
                + ("handler time, percent of one thread" if attribute == "request_time" else "bytes/s")
                + " per user/client-id (Kafka's quota sensor; tags as the quota applies)",
                partial(manager.readings, attribute),
                labels,
            )
            metrics.gauge(
                f"{prefix}_throttle_time",
                f"{manager.quota_type} quota: average throttle time (ms) per user/client-id",
                partial(manager.readings, "throttle_time"),
                labels,
            )
            metrics.gauge(
                f"{prefix}_queue_size",
                f"{manager.quota_type} quota: connections muted now",
                partial(_queue_size, manager),
            )
        metrics.gauge(
            "kafka_server_request_exempt_request_time",
            "Handler time of requests exempt from the request quota (inter-broker), percent of one thread",
            partial(_exempt_rate, self.request),
        )
        for replication in (self.leader, self.follower, self.alter_log_dirs):
            metrics.gauge(
                f"kafka_server_{replication.replication_type.lower()}_byte_rate",
                f"{replication.replication_type}: bytes/s of throttled partitions",
                replication.byte_rate,
            )


def _queue_size(manager: ClientQuotaManager) -> float:
    return manager.queue_size


def _exempt_rate(manager: ClientRequestQuotaManager) -> float:
    return manager.exempt.measure(manager.clock())


def set_throttle_time(response: Any, throttle_ms: int) -> None:
    """Sets ``throttle_time_ms`` on a response that has it (every version carries the field in the
    message; the encoder leaves it out where the version has none)."""
    if response is None:
        return
    try:
        response.throttle_time_ms = throttle_ms
    except AttributeError:
        pass


def throttled_partitions_size(quota: ReplicationQuotaManager, sizes: Iterable[tuple[str, int, int]]) -> int:
    """KafkaApis.sizeOfThrottledPartitions: the bytes of the throttled partitions of a response."""
    return sum(size for topic, partition, size in sizes if size and quota.is_throttled(topic, partition))
