"""The broker's own metrics, registered once the broker has started (``register_broker_metrics``).

What the produce and fetch paths count is kept as plain numbers in ``BrokerTopicStats`` (Kafka's
BrokerTopicStats: a ``TopicStats`` per topic and one over all topics), which the replica manager owns
from its construction on; the replica fetchers count what they copy (``FetcherStats``) and a partition
its committed ISR changes (``IsrStats``). Nothing here runs on those paths but attribute additions:
the Prometheus families are built from the numbers when a scrape comes, and the gauges (partition
counts, under-replicated partitions, log sizes and offsets, fetcher lag) are read then from the live
state, on the event loop.

Names are what the Prometheus JMX exporter's example Kafka rules make of Kafka's MBeans (lower case,
``kafka_<domain>_<type>_<name>``; a ``...PerSec`` meter is a counter, exposed with ``_total``). A
BrokerTopicMetrics counter has a series per topic (label ``topic``) and the series over all topics
without the label, as Kafka has both MBeans; ``replicationbytesin``/``replicationbytesout`` exist over
all topics only, as in Kafka.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import CounterMetricFamily, Metric

import storage.log
from coordinator.coordinator_metrics import register_group_metrics
from protocol.errors import ErrorCode
from server_common.metrics import Metrics
from zk.zk_metrics import register_zookeeper_metrics

if TYPE_CHECKING:
    from broker.replica_manager import ReplicaManager
    from broker.server import KafkaServer
    from storage.log_manager import LogManager

# Produce errors Kafka's ReplicaManager.appendToLocalLog does not count as FailedProduceRequests ("it is
# supposed to indicate un-expected failures of a broker in handling a produce request").
EXPECTED_PRODUCE_ERRORS = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
# Likewise for fetches (ReplicaManager.readFromLog); an offset out of range is answered, not a failure.
EXPECTED_FETCH_ERRORS = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.INCONSISTENT_TOPIC_ID,
        ErrorCode.OFFSET_OUT_OF_RANGE,
    }
)
# How often the per-topic series of topics this broker neither hosts nor knows are dropped (at a scrape).
TOPIC_PRUNE_INTERVAL_S = 30.0


class TopicStats:
    """Kafka's BrokerTopicMetrics meters of one topic (or of all topics), as running totals."""

    __slots__ = (
        "bytes_in",
        "bytes_out",
        "bytes_rejected",
        "failed_fetch_requests",
        "failed_produce_requests",
        "fetch_message_conversions",
        "messages_in",
        "produce_message_conversions",
        "total_fetch_requests",
        "total_produce_requests",
    )

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.bytes_rejected = 0
        self.failed_produce_requests = 0
        self.failed_fetch_requests = 0
        self.total_produce_requests = 0
        self.total_fetch_requests = 0
        self.produce_message_conversions = 0
        self.fetch_message_conversions = 0


class BrokerTopicStats:
    """The BrokerTopicMetrics of a broker: ``topic(name)`` per topic, ``all_topics`` over all of them,
    and the replication bytes sent to followers (``replication_bytes_out``; what this broker's own
    fetchers copy is ``FetcherStats.bytes_in``). A caller counts into both the topic's and
    ``all_topics``: a topic's series may be dropped (``prune``), the total never goes back."""

    def __init__(self) -> None:
        self.all_topics = TopicStats()
        self.topics: dict[str, TopicStats] = {}
        self.replication_bytes_out = 0
        self._pruned_at = time.monotonic()

    def topic(self, name: str) -> TopicStats:
        found = self.topics.get(name)
        if found is None:
            found = self.topics[name] = TopicStats()
        return found

    def produce_failed(self, topic: str, error: int, size: int) -> None:
        """An append to ``topic`` refused with ``error`` (``size`` bytes of records), counted in the
        topic's TotalProduceRequests (a topic nobody knows gets no series: Kafka answers it before the
        append); a record batch above max.message.bytes counts as BytesRejected, an unexpected error as
        FailedProduceRequests. ``all_topics.total_produce_requests`` is the caller's to count."""
        if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return
        stats = self.topic(topic)
        stats.total_produce_requests += 1
        if error == ErrorCode.MESSAGE_TOO_LARGE:
            stats.bytes_rejected += size
            self.all_topics.bytes_rejected += size
        if error not in EXPECTED_PRODUCE_ERRORS:
            stats.failed_produce_requests += 1
            self.all_topics.failed_produce_requests += 1

    def produce_converted(self, topic: str, records: int) -> None:
        """``records`` produced to ``topic`` were rebuilt before the append (the topic's compression.type
        or record checks): Kafka's ProduceMessageConversionsPerSec, which counts the records its
        LogValidator rebuilds."""
        self.topic(topic).produce_message_conversions += records
        self.all_topics.produce_message_conversions += records

    def fetch_converted(self, topic: str, records: int) -> None:
        """``records`` of ``topic`` were down-converted for a Fetch v0-3 (FetchMessageConversionsPerSec)."""
        self.topic(topic).fetch_message_conversions += records
        self.all_topics.fetch_message_conversions += records

    def fetch_failed(self, topic: str, error: int) -> None:
        if error not in EXPECTED_FETCH_ERRORS:
            self.topic(topic).failed_fetch_requests += 1
            self.all_topics.failed_fetch_requests += 1

    def prune_due(self) -> bool:
        """Whether TOPIC_PRUNE_INTERVAL_S have passed since the last ``prune``."""
        return time.monotonic() - self._pruned_at >= TOPIC_PRUNE_INTERVAL_S

    def prune(self, keep: Callable[[str], bool]) -> None:
        """Drops the series of the topics ``keep`` refuses: deleted, or never there (a produce to an
        unknown topic counts too). The totals over all topics keep what they counted."""
        self._pruned_at = time.monotonic()
        for name in [t for t in self.topics if not keep(t)]:
            del self.topics[name]


class _TopicCounter:
    """A BrokerTopicMetrics meter as a Prometheus counter: a series per topic and the series over all
    topics without the ``topic`` label (Kafka's two MBeans, one name after the JMX exporter)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        stats: BrokerTopicStats,
        field: str,
        before_collect: Callable[[], None],
    ) -> None:
        self.name = name
        self.documentation = documentation
        self._stats = stats
        self._field = field
        self._before_collect = before_collect

    def collect(self) -> Metric:
        self._before_collect()
        family = CounterMetricFamily(self.name, self.documentation, labels=("topic",))
        field = self._field
        family.add_metric((), getattr(self._stats.all_topics, field))  # no labels: the total
        for topic, stats in list(self._stats.topics.items()):
            family.add_metric((topic,), getattr(stats, field))
        return family


class _ReadCounter:
    """A counter whose running total lives elsewhere and is read when scraped."""

    def __init__(self, name: str, documentation: str, read: Callable[[], float]) -> None:
        self.name = name
        self.documentation = documentation
        self._read = read

    def collect(self) -> Metric:
        return CounterMetricFamily(self.name, self.documentation, value=self._read())


# (exposed name's stem, TopicStats field, what it counts): Kafka's BrokerTopicMetrics meters.
TOPIC_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("messagesin", "messages_in", "Records appended to the leader logs (MessagesInPerSec)."),
    ("bytesin", "bytes_in", "Bytes of record batches appended to the leader logs (BytesInPerSec)."),
    ("bytesout", "bytes_out", "Bytes of records sent to consumers, not followers (BytesOutPerSec)."),
    (
        "bytesrejected",
        "bytes_rejected",
        "Bytes of produced records refused for a batch above max.message.bytes (BytesRejectedPerSec).",
    ),
    (
        "failedproducerequests",
        "failed_produce_requests",
        "Partition appends that failed unexpectedly (FailedProduceRequestsPerSec).",
    ),
    (
        "failedfetchrequests",
        "failed_fetch_requests",
        "Partition reads that failed unexpectedly (FailedFetchRequestsPerSec).",
    ),
    (
        "totalproducerequests",
        "total_produce_requests",
        "Partition appends, failed or not, clients' and coordinators' (TotalProduceRequestsPerSec).",
    ),
    (
        "totalfetchrequests",
        "total_fetch_requests",
        "Partition reads of Fetch requests, consumers' and followers' (TotalFetchRequestsPerSec).",
    ),
    (
        "producemessageconversions",
        "produce_message_conversions",
        "Produced records rebuilt before the append: recompressed to the topic's compression.type, or "
        "rewritten by its record checks (ProduceMessageConversionsPerSec).",
    ),
    (
        "fetchmessageconversions",
        "fetch_message_conversions",
        "Records down-converted to magic 0 or 1 for Fetch v0-3 (FetchMessageConversionsPerSec).",
    ),
)


def register_broker_metrics(metrics: Metrics, server: KafkaServer) -> None:
    """Defines the broker's metrics in ``metrics``, reading ``server``'s parts."""
    replicas = server.replica_manager
    logs = server.log_manager
    if replicas is None or logs is None:
        return
    register_topic_metrics(metrics, replicas)
    register_replica_manager_metrics(metrics, replicas)
    register_log_metrics(metrics, logs)
    if server.zk is not None:
        register_zookeeper_metrics(metrics, server.zk)
    if server.groups is not None:
        register_group_metrics(metrics, server.groups.coordinator, replicas)


def register_topic_metrics(metrics: Metrics, replicas: ReplicaManager) -> None:
    """BrokerTopicMetrics: the replica manager's ``topic_stats`` and its fetchers' replication bytes."""
    stats = replicas.topic_stats
    known = replicas.metadata_cache.contains

    def prune() -> None:
        if stats.prune_due():
            hosted = {p.topic for p in replicas.partitions()}
            stats.prune(lambda topic: topic in hosted or known(topic))

    for stem, field, documentation in TOPIC_COUNTERS:
        name = f"kafka_server_brokertopicmetrics_{stem}"
        metrics.define(_TopicCounter(name, documentation, stats, field, prune))
    metrics.define(
        _ReadCounter(
            "kafka_server_brokertopicmetrics_replicationbytesout",
            "Bytes of records sent to followers' fetchers, over all topics (ReplicationBytesOutPerSec).",
            lambda: stats.replication_bytes_out,
        ),
    )
    fetchers = replicas.fetchers
    metrics.define(
        _ReadCounter(
            "kafka_server_brokertopicmetrics_replicationbytesin",
            "Bytes of records this broker's replica fetchers appended, over all topics "
            "(ReplicationBytesInPerSec).",
            lambda: fetchers.stats.bytes_in if fetchers is not None else 0,
        ),
    )


def register_replica_manager_metrics(metrics: Metrics, replicas: ReplicaManager) -> None:
    """ReplicaManager's gauges and ISR meters, the per-partition UnderReplicated gauge, and the replica
    fetchers' lag."""
    offline = replicas.log_manager.offline_partitions

    def leaders() -> Iterator[tuple[int, int, int]]:
        """(ISR size, replicas, effective min ISR) of each partition this broker leads."""
        for p in replicas.partitions():
            lg = p.log
            if p.is_leader and lg is not None:
                size = len(p.replicas)
                yield len(p.isr), size, min(lg.config.min_insync_replicas, size)

    metrics.gauge(
        "kafka_server_replicamanager_partitioncount",
        "Partitions hosted on this broker, offline ones included (PartitionCount).",
        lambda: len(replicas.partitions()) + len(offline),
    )
    metrics.gauge(
        "kafka_server_replicamanager_leadercount",
        "Partitions this broker leads (LeaderCount).",
        lambda: sum(1 for _ in leaders()),
    )
    metrics.gauge(
        "kafka_server_replicamanager_underreplicatedpartitions",
        "Partitions led here whose ISR is smaller than their replica set (UnderReplicatedPartitions).",
        lambda: sum(1 for isr, size, _ in leaders() if isr < size),
    )
    metrics.gauge(
        "kafka_server_replicamanager_underminisrpartitioncount",
        "Partitions led here whose ISR is below min.insync.replicas (UnderMinIsrPartitionCount).",
        lambda: sum(1 for isr, _, min_isr in leaders() if isr < min_isr),
    )
    metrics.gauge(
        "kafka_server_replicamanager_atminisrpartitioncount",
        "Partitions led here whose ISR is exactly min.insync.replicas (AtMinIsrPartitionCount).",
        lambda: sum(1 for isr, _, min_isr in leaders() if isr == min_isr),
    )
    metrics.gauge(
        "kafka_server_replicamanager_offlinereplicacount",
        "Replicas here whose log dir failed (OfflineReplicaCount).",
        lambda: len(offline),
    )
    isr = replicas.isr_stats
    metrics.define(
        _ReadCounter(
            "kafka_server_replicamanager_isrshrinks",
            "Committed ISR changes of partitions led here that removed replicas (IsrShrinksPerSec).",
            lambda: isr.shrinks,
        ),
    )
    metrics.define(
        _ReadCounter(
            "kafka_server_replicamanager_isrexpands",
            "Committed ISR changes of partitions led here that added replicas (IsrExpandsPerSec).",
            lambda: isr.expands,
        ),
    )

    def under_replicated() -> Iterable[tuple[tuple[str, str], int]]:
        for p in replicas.partitions():
            flag = int(p.is_leader and p.log is not None and len(p.isr) < len(p.replicas))
            yield (p.topic, str(p.partition)), flag

    metrics.gauge(
        "kafka_cluster_partition_underreplicated",
        "1 when this broker leads the partition and its ISR is smaller than its replica set "
        "(kafka.cluster:type=Partition,name=UnderReplicated).",
        under_replicated,
        ("topic", "partition"),
    )

    fetchers = replicas.fetchers

    def lags() -> Iterable[tuple[tuple[str, str], int]]:
        if fetchers is None:
            return []
        return [((topic, str(index)), lag) for (topic, index), lag in fetchers.lags()]

    metrics.gauge(
        "kafka_server_replicafetchermanager_maxlag",
        "The largest lag, in records, of a partition this broker follows (MaxLag, clientId=Replica).",
        lambda: [(("Replica",), max((lag for _, lag in lags()), default=0))],
        ("clientid",),
    )
    metrics.gauge(
        "kafka_server_fetcherlagmetrics_consumerlag",
        "Records between a followed partition's leader high watermark and this replica's log end, as of "
        "its last fetch (FetcherLagMetrics ConsumerLag).",
        lags,
        ("topic", "partition"),
    )


def register_log_metrics(metrics: Metrics, logs: LogManager) -> None:
    """kafka.log:type=Log gauges per partition log, and LogFlushStats' flush time."""

    def per_log(read: Callable[[storage.log.Log], int]) -> Callable[[], list[tuple[tuple[str, str], int]]]:
        return lambda: [((lg.topic, str(lg.partition)), read(lg)) for lg in logs.all_logs() if not lg.closed]

    labels = ("topic", "partition")
    metrics.gauge(
        "kafka_log_log_size", "Bytes in the log's segments (Size).", per_log(lambda lg: lg.size), labels
    )
    metrics.gauge(
        "kafka_log_log_numlogsegments",
        "Segments of the log (NumLogSegments).",
        per_log(lambda lg: lg.num_segments),
        labels,
    )
    metrics.gauge(
        "kafka_log_log_logstartoffset",
        "The log's start offset (LogStartOffset).",
        per_log(lambda lg: lg.log_start_offset),
        labels,
    )
    metrics.gauge(
        "kafka_log_log_logendoffset",
        "The log's end offset (LogEndOffset).",
        per_log(lambda lg: lg.log_end_offset),
        labels,
    )
    flushes = metrics.histogram(
        "kafka_log_logflushstats_logflushrateandtimems",
        "Time of each log flush (fsync of segments, indexes, snapshots) in ms (LogFlushRateAndTimeMs).",
    ).labels()
    lock = threading.Lock()  # flushes run on executor threads, several at once

    def timed(ms: float) -> None:
        with lock:
            flushes.observe(ms)

    storage.log.flush_timer = timed
