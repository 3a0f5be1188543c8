"""GroupMetadataManager: the groups this broker coordinates, and their persistence in ``__consumer_offsets``.

A group lives in partition ``abs(hashCode(group id)) % offsets.topic.num.partitions`` of
``__consumer_offsets`` (Java's ``String.hashCode`` and Kafka's ``Utils.abs``, so the mapping is
Kafka's), and the broker leading that partition is the group's coordinator. When this broker becomes
the leader of an offsets partition it reads the partition from its log start to its end and rebuilds
the groups and committed offsets there (clients meanwhile get COORDINATOR_LOAD_IN_PROGRESS); when it
stops leading it drops them (NOT_COORDINATOR from then on).

Group metadata (after each rebalance) and offset commits are appended to the partition through the
broker, with ``offsets.commit.required.acks`` (all) and ``offsets.commit.timeout.ms``; a commit is
visible to OffsetFetch only once its record is replicated. Deleted groups and expired or deleted
offsets are written as tombstones, which compaction eventually removes.

Transactional offset commits (TxnOffsetCommit) are written in a transactional batch carrying the
producer's id and epoch, and stay pending in their group, per producer, until the transaction's marker
is written to the partition: ``handle_txn_completion`` (called once the WriteTxnMarkers handler has
appended it) makes them the group's offsets on a commit and drops them on an abort. Loading replays the
markers in the log the same way; offsets whose marker is not there yet load as pending.

The manager does not import the broker: the broker hands it an ``OffsetsTopic``. Writes answer with a
future of their outcome (``server_common.futures``), done once the records are replicated.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from coordinator.group_metadata import (
    CommittedOffset,
    GroupMetadata,
    GroupState,
    MemberMetadata,
    OffsetAndMetadata,
    TopicPartition,
)
from coordinator.offsets_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    UnknownRecordError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)
from protocol import record_batch
from protocol.errors import ErrorCode
from protocol.primitives import DecodeError
from protocol.topic import GROUP_METADATA_TOPIC
from server_common.futures import all_of, completed, then
from storage.fetch import FetchDataInfo
from storage.producer_state import parse_end_txn_marker

log = logging.getLogger(__name__)

INT32_MIN = -(2**31)
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as an int32."""
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: like Math.abs, except that Integer.MIN_VALUE (which has no positive
    int32) becomes 0 rather than staying negative."""
    return 0 if n == INT32_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group, as Kafka computes it."""
    return kafka_abs(java_string_hash(group_id)) % num_partitions


@dataclass(frozen=True)
class OffsetConfig:
    """Kafka's offsets.* settings (and offset.metadata.max.bytes), with its defaults."""

    num_partitions: int = 50
    max_metadata_size: int = 4096
    load_buffer_size: int = 5 * 1024 * 1024
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    retention_check_interval_ms: int = 600_000
    commit_timeout_ms: int = 5000
    commit_required_acks: int = -1
    compression: int = 0  # offsets.topic.compression.codec: a record batch compression id


@dataclass(slots=True)
class AppendResult:
    error: int
    base_offset: int = -1


class PartitionLog(Protocol):
    """What loading reads of a partition's log (``storage.log.Log`` has it)."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def read(self, offset: int, max_bytes: int) -> FetchDataInfo: ...


class OffsetsTopic(Protocol):
    """This broker's replicas of ``__consumer_offsets``, as the broker provides them."""

    def leader_log(self, partition: int) -> PartitionLog | None:
        """The log of the partition if this broker leads it, else None."""
        ...

    def append(
        self, partition: int, records: bytes, required_acks: int, timeout_ms: int
    ) -> asyncio.Future[AppendResult]:
        """Appends one batch to the partition's leader replica now; the future gives the outcome once
        ``required_acks`` is met (at once for acks 0 and 1) or ``timeout_ms`` passes."""
        ...


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class LoadedPartition:
    """What a partition's log holds once replayed: the last group record and offsets per group, and
    the transactional offsets whose transaction has no marker in the log (per producer id, group)."""

    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartition, CommittedOffset]] = field(default_factory=dict)
    removed_groups: set[str] = field(default_factory=set)
    pending: dict[int, dict[str, dict[TopicPartition, CommittedOffset]]] = field(default_factory=dict)

    def apply(
        self,
        key: OffsetCommitKey | GroupMetadataKey,
        value: bytes | None,
        record_offset: int,
        producer_id: int | None = None,
    ) -> None:
        """One record; ``producer_id`` is set for the records of a transactional batch."""
        if isinstance(key, OffsetCommitKey):
            tp = (key.topic, key.partition)
            if producer_id is not None:
                pending = self.pending.setdefault(producer_id, {}).setdefault(key.group, {})
                if value is None:
                    pending.pop(tp, None)
                else:
                    pending[tp] = CommittedOffset(decode_offset_commit_value(value), record_offset)
                return
            offsets = self.offsets.setdefault(key.group, {})
            if value is None:
                offsets.pop(tp, None)
            else:
                offsets[tp] = CommittedOffset(decode_offset_commit_value(value), record_offset)
        elif value is None:
            self.groups.pop(key.group, None)
            self.removed_groups.add(key.group)
        else:
            self.groups[key.group] = decode_group_metadata_value(value)
            self.removed_groups.discard(key.group)

    def complete_txn(self, producer_id: int, commit: bool) -> None:
        """The producer's marker: its pending offsets become the groups' unless a newer record already
        holds a partition's offset (commit), or go (abort)."""
        pending = self.pending.pop(producer_id, None)
        if pending is None or not commit:
            return
        for group_id, offsets in pending.items():
            loaded = self.offsets.setdefault(group_id, {})
            for tp, committed in offsets.items():
                current = loaded.get(tp)
                if current is None or current.older_than(committed):
                    loaded[tp] = committed

    def pending_by_group(self) -> dict[str, dict[int, dict[TopicPartition, CommittedOffset]]]:
        """The open transactions' offsets as each group keeps them: producer id -> offsets."""
        by_group: dict[str, dict[int, dict[TopicPartition, CommittedOffset]]] = {}
        for producer_id, groups in self.pending.items():
            for group_id, offsets in groups.items():
                if offsets:
                    by_group.setdefault(group_id, {})[producer_id] = dict(offsets)
        return by_group


def read_partition(partition_log: PartitionLog, buffer_size: int, name: str) -> LoadedPartition:
    """Replays the log from its start to its current end (Kafka reads up to the log end too: this
    broker leads the partition, so what it holds is what followers will hold). Blocking file work: run
    it off the event loop. Records that do not parse are logged and skipped."""
    loaded = LoadedPartition()
    offset, end = partition_log.log_start_offset, partition_log.log_end_offset
    while offset < end:
        data = bytes(partition_log.read(offset, buffer_size).records)
        before = offset
        for pos, header in record_batch.iter_headers(data):
            offset = header.last_offset + 1
            if header.is_control:
                _replay_marker(loaded, data, pos, header.producer_id, name)
                continue
            producer_id = header.producer_id if header.is_transactional else None
            for record in record_batch.decode_records(data, pos):
                if record.key is None:
                    log.warning("%s: ignoring a record without key at offset %d", name, record.offset)
                    continue
                try:
                    loaded.apply(decode_key(record.key), record.value, record.offset, producer_id)
                except (DecodeError, UnknownRecordError) as e:
                    log.warning("%s: ignoring the record at offset %d: %s", name, record.offset, e)
        if offset == before:
            break  # nothing more below the end (the rest was compacted or truncated away)
    return loaded


def _replay_marker(loaded: LoadedPartition, data: bytes, pos: int, producer_id: int, name: str) -> None:
    """A control batch: a transaction marker completes the producer's pending offsets."""
    records = record_batch.decode_records(data, pos)
    if not records:
        return  # emptied by compaction
    try:
        is_abort, _ = parse_end_txn_marker(records[0])
    except ValueError as e:
        log.warning("%s: ignoring the control record at offset %d: %s", name, records[0].offset, e)
        return
    loaded.complete_txn(producer_id, not is_abort)


def _tombstones_written(group: GroupMetadata, partition: int, removed: int, result: AppendResult) -> int:
    """How many removed offsets the tombstones made durable (none when they were not written)."""
    if result.error == ErrorCode.NONE:
        return removed
    log.warning(
        "tombstones of group %s were not written to %s-%d: %s",
        group.group_id,
        GROUP_METADATA_TOPIC,
        partition,
        ErrorCode(result.error).name,
    )
    return 0


def append_error_to_coordinator_error(error: int, *, for_commit: bool) -> int:
    """Kafka's translation of an append's error into what a group request answers."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error == ErrorCode.REQUEST_TIMED_OUT:
        # A group write that times out asks the members to find the coordinator again; a commit
        # that does is retried as it is.
        return error if for_commit else ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE if for_commit else ErrorCode.UNKNOWN_SERVER_ERROR
    return error


class GroupMetadataManager:
    """The group cache of this broker's offsets partitions, their loading, and writes to them."""

    def __init__(
        self,
        broker_id: int,
        config: OffsetConfig,
        topic: OffsetsTopic,
        time_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.topic = topic
        self.time_ms = time_ms
        self.groups: dict[str, GroupMetadata] = {}
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()
        self._epochs: dict[int, int] = {}
        self._loads: dict[int, asyncio.Task[None]] = {}
        # The groups with open transactional offsets per producer id: a marker names a producer and an
        # offsets partition, not groups (Kafka's openGroupsForProducer).
        self._open_groups_for_producer: dict[int, set[str]] = {}
        # Markers written to a partition while it loads, replayed once its groups are installed (the
        # load may have read the log before the marker landed).
        self._markers_while_loading: dict[int, list[tuple[int, bool]]] = {}

    # -- partitions -------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    def is_group_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned_partitions

    def is_group_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading_partitions

    @property
    def is_loading(self) -> bool:
        return bool(self.loading_partitions)

    def _update_epoch(self, partition: int, epoch: int | None) -> bool:
        """Kafka's maybeUpdateCoordinatorEpoch: records a newer epoch; False if ``epoch`` is older
        than one already seen (a stale election or resignation, to be ignored)."""
        current = self._epochs.get(partition)
        if current is None:
            if epoch is not None:
                self._epochs[partition] = epoch
            return True
        if epoch is not None and epoch > current:
            self._epochs[partition] = epoch
        return epoch is None or epoch == self._epochs[partition]

    # -- the group cache --------------------------------------------------------------------------

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        """Adds the group unless one of that id is there; returns the one in the cache."""
        return self.groups.setdefault(group.group_id, group)

    def get_or_maybe_create_group(self, group_id: str, create: bool) -> GroupMetadata | None:
        if create:
            return self.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.time_ms))
        return self.groups.get(group_id)

    def group_not_exists(self, group_id: str) -> bool:
        """True if this broker coordinates the group and has no live group of that id."""
        if not self.is_group_local(group_id):
            return False
        group = self.groups.get(group_id)
        return group is None or group.is_(GroupState.DEAD)

    def current_groups(self) -> list[GroupMetadata]:
        return list(self.groups.values())

    # -- loading ----------------------------------------------------------------------------------

    def schedule_load(
        self, partition: int, epoch: int, on_group_loaded: Callable[[GroupMetadata], None]
    ) -> None:
        """Starts loading the partition this broker now leads (unless it is loaded or loading)."""
        if partition in self.owned_partitions or partition in self.loading_partitions:
            self._update_epoch(partition, epoch)
            log.debug("%s-%d is already loaded or loading", GROUP_METADATA_TOPIC, partition)
            return
        self.loading_partitions.add(partition)
        task = asyncio.get_running_loop().create_task(
            self._load(partition, epoch, on_group_loaded), name=f"load-{GROUP_METADATA_TOPIC}-{partition}"
        )
        self._loads[partition] = task
        task.add_done_callback(partial(self._load_ended, partition))

    def _load_ended(self, partition: int, task: asyncio.Task[None]) -> None:
        if self._loads.get(partition) is task:
            del self._loads[partition]

    async def _load(
        self, partition: int, epoch: int, on_group_loaded: Callable[[GroupMetadata], None]
    ) -> None:
        name = f"{GROUP_METADATA_TOPIC}-{partition}"
        try:
            if not self._update_epoch(partition, epoch):
                log.info("not loading %s: epoch %d is older than %d", name, epoch, self._epochs[partition])
                return
            partition_log = self.topic.leader_log(partition)
            if partition_log is None:
                log.info("not loading %s: this broker no longer leads it", name)
                return
            started = time.monotonic()
            self._markers_while_loading[partition] = []
            loaded = await asyncio.get_running_loop().run_in_executor(
                None, read_partition, partition_log, self.config.load_buffer_size, name
            )
            groups = self._install(loaded, on_group_loaded)
            self.owned_partitions.add(partition)
            for producer_id, is_commit in self._markers_while_loading.pop(partition, []):
                self._complete_txn(producer_id, {partition}, is_commit)
            log.info(
                "loaded %d groups from %s (epoch %d) in %.0f ms",
                groups,
                name,
                epoch,
                (time.monotonic() - started) * 1000,
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("error loading offsets and group metadata from %s", name)
        finally:
            self.loading_partitions.discard(partition)
            self._markers_while_loading.pop(partition, None)

    def _install(self, loaded: LoadedPartition, on_group_loaded: Callable[[GroupMetadata], None]) -> int:
        count = 0
        pending = loaded.pending_by_group()
        for producer_id, groups in loaded.pending.items():
            for group_id, offsets in groups.items():
                if offsets:
                    self._add_producer_group(producer_id, group_id)
        with_offsets = {g for g, offsets in loaded.offsets.items() if offsets}
        for group_id in set(loaded.groups) | with_offsets | set(pending):
            value = loaded.groups.get(group_id)
            group = self._group_from_value(group_id, value) if value is not None else None
            if group is None:
                # Offsets without a live group: a simple consumer's, a transactional producer's, or
                # a group since deleted.
                group = GroupMetadata(group_id, GroupState.EMPTY, self.time_ms)
            group.initialize_offsets(loaded.offsets.get(group_id, {}), pending.get(group_id))
            current = self.add_group(group)
            if current is not group:
                log.debug(
                    "group %s was created while %s loaded; keeping the live one",
                    group_id,
                    GROUP_METADATA_TOPIC,
                )
                continue
            count += 1
            on_group_loaded(group)
        return count

    def _group_from_value(self, group_id: str, value: GroupMetadataValue) -> GroupMetadata:
        group = GroupMetadata(
            group_id, GroupState.STABLE if value.members else GroupState.EMPTY, self.time_ms
        )
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.current_state_timestamp = (
            value.current_state_timestamp if value.current_state_timestamp >= 0 else None
        )
        for m in value.members:
            member = MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout,
                m.session_timeout,
                value.protocol_type,
                [(value.protocol or "", m.subscription)],
                m.assignment,
            )
            group.add(member)
        group.leader_id = value.leader
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def remove_groups_for_partition(
        self, partition: int, epoch: int | None, on_group_unloaded: Callable[[GroupMetadata], None]
    ) -> None:
        """This broker stopped leading the partition: its groups go (NOT_COORDINATOR from now on)."""
        if not self._update_epoch(partition, epoch):
            log.info("not unloading %s-%d: epoch %s is stale", GROUP_METADATA_TOPIC, partition, epoch)
            return
        task = self._loads.pop(partition, None)
        if task is not None:
            task.cancel()
        self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        self._markers_while_loading.pop(partition, None)
        removed = 0
        for group_id, group in list(self.groups.items()):
            if self.partition_for(group_id) == partition:
                on_group_unloaded(group)
                del self.groups[group_id]
                self._remove_group_from_all_producers(group_id)
                removed += 1
        if removed:
            log.info("unloaded %d groups of %s-%d", removed, GROUP_METADATA_TOPIC, partition)

    def shutdown(self) -> None:
        for task in self._loads.values():
            task.cancel()
        self._loads.clear()

    # -- writes -----------------------------------------------------------------------------------

    def _batch(
        self,
        records: Iterable[tuple[bytes, bytes | None]],
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> bytes:
        """One batch of records; a transactional one when ``producer_id`` is given (TxnOffsetCommit:
        the producer's id and epoch, which the log fences, and no sequence, which a coordinator's
        append is not checked for)."""
        now = self.time_ms()
        return record_batch.encode_batch(
            [record_batch.Record(i, now, key, value) for i, (key, value) in enumerate(records)],
            base_offset=0,
            compression=self.config.compression,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            is_transactional=producer_id != NO_PRODUCER_ID,
        )

    def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> asyncio.Future[int]:
        """Appends the group's metadata record with ``assignment`` (member id -> bytes); the future
        gives the error a group request should answer (NONE once it is replicated)."""
        members = []
        for member in group.members.values():
            if group.protocol_name is None:
                raise AssertionError(f"group {group.group_id} has members but no protocol")
            members.append(
                MemberMetadataValue(
                    member.member_id,
                    member.group_instance_id,
                    member.client_id,
                    member.client_host,
                    member.rebalance_timeout_ms,
                    member.session_timeout_ms,
                    member.metadata(group.protocol_name),
                    assignment[member.member_id],
                )
            )
        value = GroupMetadataValue(
            group.protocol_type or "",
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            group.current_state_timestamp if group.current_state_timestamp is not None else -1,
            members,
        )
        batch = self._batch([(group_metadata_key(group.group_id), group_metadata_value(value))])
        appended = self.topic.append(
            self.partition_for(group.group_id),
            batch,
            self.config.commit_required_acks,
            self.config.commit_timeout_ms,
        )
        return then(appended, partial(self._group_stored, group))

    @staticmethod
    def _group_stored(group: GroupMetadata, result: AppendResult) -> int:
        if result.error != ErrorCode.NONE:
            log.debug(
                "metadata of group %s (generation %d) was not stored: %s",
                group.group_id,
                group.generation_id,
                ErrorCode(result.error).name,
            )
        return append_error_to_coordinator_error(result.error, for_commit=False)

    def valid_metadata(self, metadata: str | None) -> bool:
        return metadata is None or len(metadata) <= self.config.max_metadata_size

    def store_offsets(
        self,
        group: GroupMetadata,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> asyncio.Future[dict[TopicPartition, int]]:
        """Appends the commits and makes them pending; the future gives each partition's error once
        the records are replicated (then OffsetFetch sees them). Metadata longer than
        offset.metadata.max.bytes is refused (OFFSET_METADATA_TOO_LARGE).

        With ``producer_id`` the commit is a transaction's (TxnOffsetCommit): the records go in a
        transactional batch of that producer and epoch (the log refuses an epoch older than the
        producer's: INVALID_PRODUCER_EPOCH), and they stay pending until the transaction's marker is
        written (``handle_txn_completion``)."""
        valid = {tp: o for tp, o in offsets.items() if self.valid_metadata(o.metadata)}
        if not valid:
            return completed({tp: ErrorCode.OFFSET_METADATA_TOO_LARGE for tp in offsets})
        is_txn = producer_id != NO_PRODUCER_ID
        if not group.has_received_consistent_offset_commits:
            log.warning(
                "group %s with leader %s has received offset commits from consumers as well as from "
                "transactional producers; mixing both kinds of commit will generally cause surprises "
                "and should be avoided",
                group.group_id,
                group.leader_id,
            )
        batch = self._batch(
            (
                (offset_commit_key(group.group_id, topic, partition), offset_commit_value(o))
                for (topic, partition), o in valid.items()
            ),
            producer_id,
            producer_epoch,
        )
        if is_txn:
            self._add_producer_group(producer_id, group.group_id)
            group.prepare_txn_offset_commit(producer_id, valid)
        else:
            group.prepare_offset_commit(valid)
        appended = self.topic.append(
            self.partition_for(group.group_id),
            batch,
            self.config.commit_required_acks,
            self.config.commit_timeout_ms,
        )
        return then(appended, partial(self._offsets_stored, group, offsets, valid, producer_id))

    def _offsets_stored(
        self,
        group: GroupMetadata,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        valid: dict[TopicPartition, OffsetAndMetadata],
        producer_id: int,
        result: AppendResult,
    ) -> dict[TopicPartition, int]:
        is_txn = producer_id != NO_PRODUCER_ID
        if result.error == ErrorCode.NONE:
            if not group.is_(GroupState.DEAD):
                for i, (tp, o) in enumerate(valid.items()):
                    committed = CommittedOffset(o, result.base_offset + i)
                    if is_txn:
                        group.on_txn_offset_commit_append(producer_id, tp, committed)
                    else:
                        group.on_offset_commit_append(tp, committed)
            error: int = ErrorCode.NONE
        else:
            if not group.is_(GroupState.DEAD):
                for tp, o in valid.items():
                    if is_txn:
                        group.fail_pending_txn_offset_commit(producer_id, tp, o)
                    else:
                        group.fail_pending_offset_write(tp, o)
                if is_txn and not group.has_pending_offset_commits_from_producer(producer_id):
                    self._remove_producer_group(producer_id, group.group_id)
            log.debug(
                "%soffset commit of group %s failed: %s",
                "transactional " if is_txn else "",
                group.group_id,
                ErrorCode(result.error).name,
            )
            error = append_error_to_coordinator_error(result.error, for_commit=True)
        return {tp: error if tp in valid else ErrorCode.OFFSET_METADATA_TOO_LARGE for tp in offsets}

    # -- transactions -----------------------------------------------------------------------------

    def _add_producer_group(self, producer_id: int, group_id: str) -> None:
        self._open_groups_for_producer.setdefault(producer_id, set()).add(group_id)

    def _remove_producer_group(self, producer_id: int, group_id: str) -> None:
        groups = self._open_groups_for_producer.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self._open_groups_for_producer[producer_id]

    def _remove_group_from_all_producers(self, group_id: str) -> None:
        for producer_id in list(self._open_groups_for_producer):
            self._remove_producer_group(producer_id, group_id)

    def open_groups_for_producer(self, producer_id: int) -> set[str]:
        return set(self._open_groups_for_producer.get(producer_id, ()))

    def handle_txn_completion(self, producer_id: int, partitions: Iterable[int], is_commit: bool) -> None:
        """The producer's transaction marker is written to these offsets partitions: the pending
        transactional offsets of their groups become committed offsets (commit) or go (abort).
        (Kafka's handleTxnCompletion; called on the event loop, so it needs no scheduling.)"""
        partitions = set(partitions)
        for partition in partitions:
            markers = self._markers_while_loading.get(partition)
            if markers is not None:
                markers.append((producer_id, is_commit))
        self._complete_txn(producer_id, partitions, is_commit)

    def _complete_txn(self, producer_id: int, partitions: set[int], is_commit: bool) -> None:
        for group_id in self.open_groups_for_producer(producer_id):
            if self.partition_for(group_id) not in partitions:
                continue
            group = self.groups.get(group_id)
            if group is None:
                log.info(
                    "group %s moved away from broker %d after the marker of producer %d was written; its "
                    "new coordinator loads the outcome",
                    group_id,
                    self.broker_id,
                    producer_id,
                )
            elif not group.is_(GroupState.DEAD):
                group.complete_pending_txn_offset_commit(producer_id, is_commit)
            self._remove_producer_group(producer_id, group_id)

    def get_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The committed offsets of the given partitions (None: nothing committed), or of every
        partition with one when ``partitions`` is None. Pending commits are not visible yet."""
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return {tp: None for tp in partitions or []}
        wanted = list(group.offsets) if partitions is None else partitions
        return {tp: group.offset(tp) for tp in wanted}

    def unstable_partitions(self, group_id: str, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Those of ``partitions`` with a commit still pending, transactional or not (OffsetFetch with
        require_stable answers UNSTABLE_OFFSET_COMMIT for them)."""
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return set()
        return {tp for tp in partitions if group.has_pending_offset_commits_for_partition(tp)}

    def cleanup_group_metadata(
        self,
        groups: Iterable[GroupMetadata],
        selector: Callable[[GroupMetadata], dict[TopicPartition, OffsetAndMetadata]],
    ) -> asyncio.Future[int]:
        """Removes the offsets ``selector`` picks from each group, turns groups left empty without
        offsets Dead, and writes the tombstones (acks 0, as Kafka: a lost tombstone is written again
        by the next cleanup). The future gives how many offsets were removed."""
        written: list[asyncio.Future[int]] = []
        for group in list(groups):
            removed = selector(group)
            if group.is_(GroupState.EMPTY) and not group.has_offsets:
                log.info(
                    "group %s transitioned to Dead in generation %d", group.group_id, group.generation_id
                )
                group.transition_to(GroupState.DEAD)
            tombstones: list[tuple[bytes, bytes | None]] = [
                (offset_commit_key(group.group_id, topic, partition), None) for topic, partition in removed
            ]
            if group.is_(GroupState.DEAD) and self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
                # A group that never rebalanced (generation 0) only stored offsets: no group record.
                if group.generation_id > 0:
                    tombstones.append((group_metadata_key(group.group_id), None))
            if not tombstones:
                continue
            partition = self.partition_for(group.group_id)
            appended = self.topic.append(partition, self._batch(tombstones), 0, self.config.commit_timeout_ms)
            written.append(then(appended, partial(_tombstones_written, group, partition, len(removed))))
        return then(all_of(written), sum)

    async def expire_offsets(self) -> int:
        """One round of offsets.retention.minutes expiration over every group (Kafka's
        delete-expired-group-metadata task)."""
        now = self.time_ms()
        retention = self.config.retention_ms
        removed = await self.cleanup_group_metadata(
            self.current_groups(), lambda g: g.remove_expired_offsets(now, retention)
        )
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed
