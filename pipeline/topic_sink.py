"""The exactly-once topic sink of a streaming query: each micro-batch's rows are produced in one Kafka
transaction that also commits the batch id, so a batch Spark replays after a driver crash is recognised
and skipped instead of written twice.

It is a ``foreachBatch`` function on the driver, meant for small outputs such as the page-stats rows:
the batch's rows are collected to the driver (Arrow) and produced by one transactional producer.
(Transactions spanning executor tasks would need two-phase commit, KIP-939; Spark's own Kafka sink
is at least once.)

- **Identity.** The transactional id is ``samsa-pipeline-<query id>``, where the query id is the one
  Spark keeps in the checkpoint (``<checkpointLocation>/metadata``, ``{"id": ...}``): the same for
  every run of the query from that checkpoint, wherever the checkpoint is moved, and different for a
  new checkpoint. The query's own consumer group has the same name; nothing ever joins it.
- **Start.** ``init_transactions`` once per run of the query (at its first batch): it fences an
  earlier driver of the same query that is still alive (a zombie: its next transactional request gets
  PRODUCER_FENCED) and makes the coordinator finish that driver's open transaction (aborted) or its
  commit in flight (completed) before this run writes anything.
- **Per batch.** Read the group's committed offset of partition 0 of the output topic (OffsetFetch with
  ``require_stable``, so a commit still in flight is waited for, never read half done). The offset is
  the next batch to write, ``last batch id + 1``, and its metadata is JSON ``{"queryId", "batchId",
  "records"}``. A batch id below it was written already: skipped (its rows are still computed, since
  Spark commits the stateful operators' state only when the batch's plan runs, but not produced).
  Otherwise begin a transaction, produce the rows, ``send_offsets_to_transaction`` ``batch id + 1``
  with that metadata (AddOffsetsToTxn, TxnOffsetCommit), and commit. The rows and the batch id become
  visible together or not at all.
- **Failures.** A retriable commit error (a timeout) commits again until ``timeout_s``. An abortable
  error (a delivery failed), or a retriable one that outlasted that, aborts the transaction and redoes
  the batch, up to ``attempts`` times, each attempt first reading the committed batch again (a commit
  that timed out may have taken effect: then the batch is done). A fatal error (fenced) is raised and
  fails the query; so is the last attempt's.

``read_committed`` consumers of the output topic therefore see each batch's rows once. Kafka-idiomatic
readers can also see how far the query got with ``samsa consumer-groups --describe`` on its group.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from pipeline.kafka import ensure_topic, produce_waiting, records_of
from pipeline.options import WriteOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

TRANSACTIONAL_ID_PREFIX = "samsa-pipeline-"
# The output topic's partition whose committed offset in the query's group records the batch: it
# exists whenever the sink can write, which a group commit needs (UNKNOWN_TOPIC_OR_PARTITION otherwise).
COMMIT_PARTITION = 0

ClientFactory = Callable[[dict[str, Any]], Any]


def ensure_output_topic(client: Mapping[str, str], topic: str, timeout_s: float) -> None:
    """Creates the output topic with the broker's defaults (partitions, replication) unless it exists:
    an empty first batch commits to its partition 0 before any record could have auto-created it."""
    ensure_topic(client, topic, -1, -1, timeout_s)


class CheckpointError(RuntimeError):
    """The query's checkpoint holds no query id (the sink runs before Spark started the query)."""


@dataclass(frozen=True)
class CommittedBatch:
    """The last batch the query's group records as written."""

    batch_id: int
    query_id: str | None = None
    records: int | None = None


def query_id_of(checkpoint: Path) -> str:
    """The query id Spark keeps in ``checkpoint/metadata`` (a JSON line ``{"id": "<uuid>"}``, written
    when the query first starts and kept by every restart from that checkpoint)."""
    path = checkpoint / "metadata"
    try:
        first_line = path.read_text().splitlines()[0]
        query_id = json.loads(first_line)["id"]
    except (OSError, IndexError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"no Spark query id in {path} (is the query started?): {e}") from None
    if not isinstance(query_id, str) or not query_id:
        raise CheckpointError(f"no Spark query id in {path}: {first_line!r}")
    return query_id


def transactional_id_for(query_id: str) -> str:
    return f"{TRANSACTIONAL_ID_PREFIX}{query_id}"


def commit_metadata(query_id: str | None, batch_id: int, records: int) -> str:
    return json.dumps({"queryId": query_id, "batchId": batch_id, "records": records}, separators=(",", ":"))


def committed_batch(offset: int, metadata: str | None) -> CommittedBatch | None:
    """What a committed ``offset`` (the next batch) and its metadata say; None for no commit yet.

    The offset is the record: the metadata only adds the query id and row count for people and tools,
    and a batch id in it that disagrees is reported, not believed.
    """
    if offset < 0:
        return None
    batch_id = offset - 1
    query_id, records = None, None
    try:
        parsed = json.loads(metadata) if metadata else {}
        if isinstance(parsed, dict):
            query_id = parsed.get("queryId") if isinstance(parsed.get("queryId"), str) else None
            records = parsed.get("records") if isinstance(parsed.get("records"), int) else None
            said = parsed.get("batchId")
            if said is not None and said != batch_id:
                log.warning(
                    "committed offset %d says batch %d but its metadata says %r", offset, batch_id, said
                )
    except ValueError:
        log.warning("committed offset %d has metadata that is not JSON: %r", offset, metadata)
    return CommittedBatch(batch_id, query_id, records)


def _error(e: KafkaException) -> KafkaError | None:
    error = e.args[0] if e.args else None
    return error if isinstance(error, KafkaError) else None


def _requires_abort(e: KafkaException) -> bool:
    error = _error(e)
    return error is not None and bool(error.txn_requires_abort())


def _fatal(e: KafkaException) -> bool:
    error = _error(e)
    return error is not None and bool(error.fatal())


def _retriable(e: KafkaException) -> bool:
    error = _error(e)
    return error is not None and bool(error.retriable()) and not error.fatal()


class TransactionalTopicSink:
    """``writeStream.foreachBatch(sink)``: every micro-batch's rows produced to ``options.topic`` (and
    any ``topic`` column) in one transaction with the batch id, once per batch across driver restarts.

    ``checkpoint`` is the query's ``checkpointLocation`` (for its query id); ``transactional_id``, if
    given, is used instead of the one derived from it (and names the group too).
    """

    def __init__(
        self,
        options: WriteOptions,
        checkpoint: Path,
        *,
        transactional_id: str | None = None,
        timeout_s: float = 60.0,
        attempts: int = 3,
        producer_factory: ClientFactory = Producer,
        consumer_factory: ClientFactory = Consumer,
        ensure: Callable[[Mapping[str, str], str, float], None] = ensure_output_topic,
    ) -> None:
        if options.topic is None:
            raise ValueError(
                "the transactional topic sink needs the 'topic' option (it commits to its partition 0)"
            )
        self.options = options
        self.topic: str = options.topic
        self.checkpoint = checkpoint
        self.timeout_s = timeout_s
        self.attempts = attempts
        self._explicit_id = transactional_id
        self._producer_factory = producer_factory
        self._consumer_factory = consumer_factory
        self._ensure = ensure
        self._producer: Any = None
        self._consumer: Any = None
        self._group_metadata: Any = None
        self._query_id: str | None = None
        self._transactional_id: str | None = None
        self._schema_checked = False

    @property
    def transactional_id(self) -> str:
        """Also the name of the query's consumer group; known once the query has started."""
        if self._transactional_id is None:
            if self._explicit_id is not None:
                self._transactional_id = self._explicit_id
            else:
                self._query_id = query_id_of(self.checkpoint)
                self._transactional_id = transactional_id_for(self._query_id)
        return self._transactional_id

    def start(self) -> None:
        """Creates the output topic if missing and the clients, and runs ``init_transactions``
        (fencing an earlier driver); once."""
        if self._producer is not None:
            return
        self._ensure(self.options.client, self.topic, self.timeout_s)
        transactional_id = self.transactional_id
        if self._query_id is None:
            try:
                self._query_id = query_id_of(self.checkpoint)
            except CheckpointError:
                self._query_id = None  # an explicit id: the metadata then names no query
        producer = self._producer_factory(
            {
                "acks": "all",
                "linger.ms": 5,
                "transaction.timeout.ms": max(int(self.timeout_s * 1000), 1000),
                **self.options.client,
                "transactional.id": transactional_id,
                "enable.idempotence": True,
            }
        )
        producer.init_transactions(self.timeout_s)
        consumer = self._consumer_factory(
            {
                **self.options.client,
                "group.id": transactional_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                # OffsetFetch with require_stable: a commit in flight is waited for, not read stale.
                "isolation.level": "read_committed",
            }
        )
        self._group_metadata = consumer.consumer_group_metadata()
        self._producer, self._consumer = producer, consumer
        log.info("topic sink of %s: transactional id %s initialised", self.topic, transactional_id)

    def last_committed(self) -> CommittedBatch | None:
        """The last batch the query's group records as written (None: none yet)."""
        self.start()
        [found] = self._consumer.committed(
            [TopicPartition(self.topic, COMMIT_PARTITION)], timeout=self.timeout_s
        )
        if found.error is not None:
            raise KafkaException(found.error)
        return committed_batch(found.offset, found.metadata)

    def write_batch(self, batch_id: int, batches: Callable[[], Iterable[pa.RecordBatch]]) -> int | None:
        """Writes batch ``batch_id`` (``batches()`` gives its rows) in one transaction with its id;
        returns how many records were written, or None if the batch was written before (skipped)."""
        records: list[tuple[str, dict[str, Any]]] | None = None
        for attempt in range(1, self.attempts + 1):
            # Asked before every attempt: a commit that timed out may have taken effect after all.
            done = self.last_committed()
            if done is not None and batch_id <= done.batch_id:
                log.info(
                    "batch %d of %s was written before (the group is at batch %d): skipped",
                    batch_id,
                    self.transactional_id,
                    done.batch_id,
                )
                return None
            if records is None:
                # Materialised once: a transaction redone after an abort produces the same records.
                records = [record for batch in batches() for record in records_of(self.options, batch)]
            try:
                self._transaction(batch_id, records)
                return len(records)
            except KafkaException as e:
                if not (_requires_abort(e) or _retriable(e)) or attempt == self.attempts:
                    raise
                log.warning("batch %d: transaction failed (%s); attempt %d", batch_id, e, attempt + 1)
        raise AssertionError("unreachable")

    def _transaction(self, batch_id: int, records: list[tuple[str, dict[str, Any]]]) -> None:
        producer = self._producer
        failures: list[KafkaError] = []

        def delivered(error: KafkaError | None, _message: Any) -> None:
            if error is not None:
                failures.append(error)

        producer.begin_transaction()
        try:
            for topic, record in records:
                produce_waiting(producer, topic, {**record, "on_delivery": delivered})
            position = TopicPartition(
                self.topic,
                COMMIT_PARTITION,
                batch_id + 1,
                commit_metadata(self._query_id, batch_id, len(records)),
            )
            producer.send_offsets_to_transaction([position], self._group_metadata, self.timeout_s)
            self._commit()
        except KafkaException as e:
            if failures:
                log.warning(
                    "batch %d: %d records not delivered, first: %s", batch_id, len(failures), failures[0]
                )
            if not _fatal(e):  # abortable, or retriable: nothing of this attempt may stay open
                self._abort(batch_id)
            raise
        except Exception:
            # Not Kafka's doing (a bad row, an interrupted driver): nothing of the batch may stay open.
            self._abort(batch_id)
            raise
        log.info("batch %d: %d records committed to %s", batch_id, len(records), self.topic)

    def _commit(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                self._producer.commit_transaction(max(0.1, deadline - time.monotonic()))
                return
            except KafkaException as e:
                # A retriable error leaves the outcome open: committing again is how to learn it.
                if not _retriable(e) or time.monotonic() >= deadline:
                    raise
                log.info("commit_transaction: %s; retrying", e)
                time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    def _abort(self, batch_id: int) -> None:
        try:
            self._producer.abort_transaction(self.timeout_s)
        except KafkaException as e:
            # Fatal (fenced) or out of time: the coordinator aborts it at its timeout or at the next
            # init_transactions; the caller raises the original error.
            log.warning("batch %d: abort_transaction failed: %s", batch_id, e)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` entry point, on the driver."""
        if not self._schema_checked:
            from pipeline.source import check_write_schema

            check_write_schema(df.schema, self.options)
            self._schema_checked = True
        # Computed even when the batch turns out to be written already: Spark commits the state of the
        # query's stateful operators (the windows) only when the batch's plan runs, and fails the batch
        # otherwise (STATE_STORE_COMMIT_VALIDATION_FAILED).
        table = df.toArrow()
        self.write_batch(batch_id, table.to_batches)

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
        if self._producer is not None:
            self._producer.flush(self.timeout_s)
        self._producer = self._consumer = self._group_metadata = None
