"""TopicAdmin: CreateTopics, DeleteTopics, CreatePartitions and Metadata's topic auto-creation, in Kafka's
ZooKeeper-mode semantics (ZkAdminManager, AdminZkClient).

The broker checks a request, computes replica assignments from the brokers registered in
``/brokers/ids`` and writes ZooKeeper; the controller does the rest (partition states, leaders,
LeaderAndIsr, UpdateMetadata). Like Kafka, the answer waits until this broker's metadata cache (filled
by the controller's UpdateMetadata) shows the outcome: every partition of a created topic (or of a
topic that got partitions) with a leader, a deleted topic gone. A request whose timeout passes first is
answered REQUEST_TIMED_OUT for those topics (the change itself still goes on); a timeout of 0 or less
answers at once, REQUEST_TIMED_OUT for every topic written, as Kafka does.

The work one request may cause is bounded as Kafka's KRaft controller bounds it: a CreateTopics (all its
topics together, ``validate_only`` or not) or CreatePartitions that would create more than
``MAX_PARTITIONS_PER_BATCH`` partitions is refused whole with POLICY_VIOLATION, before any assignment is
computed; assignments are computed off the event loop. Each refused request is logged once
(``broker.refusals``), its topics' errors summarised.

Authorization is Kafka 3.9's KafkaApis (``broker.authorization``): CreateTopics needs CREATE on the
cluster or on each topic (else TOPIC_AUTHORIZATION_FAILED), and only a topic the principal may
DESCRIBE_CONFIGS is answered with its configs, partitions, replication factor and id (else its
``topic_config_error_code`` is TOPIC_AUTHORIZATION_FAILED); DeleteTopics needs DELETE on each topic, and a
topic named by id that the principal may not DESCRIBE is answered without its name; CreatePartitions
needs ALTER on each topic.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from broker.admin_zk import AdminZkClient
from broker.authorization import ALLOW_ALL, Authorization
from broker.config import KafkaConfig
from broker.config_entries import ConfigDescriber, check_topic_configs
from broker.config_listener import ConfigChangeListener
from broker.dynamic_config import DynamicBrokerConfig
from broker.metadata_cache import MetadataCache
from broker.refusals import log_refusal
from network.request_channel import Request
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from protocol.topic import is_internal, topic_name_error
from server_common.acls import CLUSTER_NAME, AclOperation, ResourceType
from server_common.replica_assignment import (
    BrokerMetadata,
    assign_replicas,
    ignore_partial_racks,
    new_partitions_assignment,
    validate_topic_assignment,
)
from zk import znodes

# KRaft's metadata log: Kafka 3.9 refuses to create it in either mode (KafkaApis.handleCreateTopicsRequest).
CLUSTER_METADATA_TOPIC = "__cluster_metadata"

log = logging.getLogger(__name__)

NO_NUM_PARTITIONS = -1
NO_REPLICATION_FACTOR = -1
ZERO_UUID = uuid.UUID(int=0)
POLL_SECONDS = 0.01  # how often a waiting request looks at the metadata cache again

# Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH and its refusal (KRaft's, which Kafka added
# after larger requests ran its controller out of memory; one CreateTopics of 2^31-1 partitions grew a
# broker by gigabytes here).
MAX_PARTITIONS_PER_BATCH = 10_000
EXCESSIVE_PARTITIONS = "Excessively large number of partitions per request."
EXAMPLE_CHARS = 200  # of a topic name or error message quoted in a refusal's log line

# Kafka's answers to a topic the principal may not create / alter (their messages are Kafka's).
_CREATE_DENIED = KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
_ALTER_DENIED_MESSAGE = "The topic authorization is failed."
_DELETE_DENIED = KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def _partitions_requested(
    topics: Iterable[CreateTopicsRequest.CreatableTopic], default_num_partitions: int
) -> int:
    """The partitions a CreateTopics would create at most (Kafka's validateTotalNumberOfPartitions): an
    explicit assignment's size, the default for -1, nothing for a count refused anyway."""
    total = 0
    for topic in topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == NO_NUM_PARTITIONS:
            total += default_num_partitions
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


def _fail_topic(
    result: CreateTopicsResponse.CreatableTopicResult, error: KafkaError, *, checked: bool = True
) -> None:
    """Sets a CreateTopics result to ``error``, its other fields to what Kafka answers for a failed topic.
    ``checked``: the topic failed in the creation proper, which clears its ``topic_config_error_code``
    (Kafka's handleCreateTopicsResults); a topic refused before (duplicate, not authorized) keeps it."""
    result.error_code, result.error_message = error.code, error.message
    result.num_partitions, result.replication_factor, result.configs = -1, -1, []
    result.topic_id = ZERO_UUID
    if checked:
        result.topic_config_error_code = ErrorCode.NONE


def _partitions_result(
    name: str, error: KafkaError | None
) -> CreatePartitionsResponse.CreatePartitionsTopicResult:
    return CreatePartitionsResponse.CreatePartitionsTopicResult(
        name=name,
        error_code=ErrorCode.NONE if error is None else error.code,
        error_message=None if error is None else error.message,
    )


def _clip(text: str) -> str:
    return text if len(text) <= EXAMPLE_CHARS else f"{text[:EXAMPLE_CHARS]}..."


def _log_refusals(request: Request, errors: Sequence[tuple[str | None, KafkaError]], topics: int) -> None:
    """Logs the topics a request (of ``topics`` topics) refused as one line: each error with how many
    topics got it and the first of them, so that a request naming thousands of topics is still one
    short line. A REQUEST_TIMED_OUT is no refusal: the change was written."""
    refused = [(topic, error) for topic, error in errors if error.code != ErrorCode.REQUEST_TIMED_OUT]
    if not refused:
        return
    by_code: dict[ErrorCode, list[tuple[str | None, KafkaError]]] = {}
    for topic, error in refused:
        by_code.setdefault(error.code, []).append((topic, error))
    detail = ", ".join(
        f"{code.name} x{len(group)} ({_clip(repr(group[0][0]))}: {_clip(group[0][1].message)})"
        for code, group in by_code.items()
    )
    log_refusal(request, refused[0][1].code, f"{len(refused)} of {topics} topics refused: {detail}")


class TopicAdmin:
    # A class default too: tests build the handlers without the constructor.
    authorization: Authorization = ALLOW_ALL

    def __init__(
        self,
        config: KafkaConfig,
        admin_zk: AdminZkClient,
        metadata_cache: MetadataCache,
        dynamic: DynamicBrokerConfig,
        listener: ConfigChangeListener,
        *,
        authorization: Authorization = ALLOW_ALL,
    ) -> None:
        self.config = config
        self.authorization = authorization
        self.admin_zk = admin_zk
        self.metadata_cache = metadata_cache
        self.dynamic = dynamic
        self.listener = listener
        self.describer = ConfigDescriber(dynamic)

    # -- waiting for the controller ----------------------------------------------------------------

    def _leaders_seen(self, topic: str, partitions: Iterable[int]) -> Callable[[], bool]:
        """A check that passes once each of the partitions has been seen with a leader; a call looks
        only at those not seen yet, so that waiting on 10,000 partitions does not scan them all every
        POLL_SECONDS."""
        waiting = list(partitions)

        def check() -> bool:
            while waiting:
                found = self.metadata_cache.partition(topic, waiting[-1])
                if found is None or found.leader < 0:
                    return False
                waiting.pop()
            return True

        return check

    def _gone(self, topic: str) -> Callable[[], bool]:
        """A check that passes once the topic is no longer in the metadata cache."""
        return lambda: not self.metadata_cache.contains(topic)

    async def _wait(self, done: Callable[[], bool], timeout_ms: int) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while not done():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            await asyncio.sleep(min(POLL_SECONDS, remaining))

    async def _await_outcome(
        self, pending: dict[str, Callable[[], bool]], timeout_ms: int, what: str
    ) -> dict[str, KafkaError]:
        """Waits until each pending topic's check passes; the topics still pending at the end, with
        REQUEST_TIMED_OUT."""
        if pending and timeout_ms > 0:
            await self._wait(lambda: all(check() for check in pending.values()), timeout_ms)
        return {
            topic: KafkaError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"{what} of topic '{topic}' was written but not yet seen applied within {timeout_ms} ms",
            )
            for topic, check in pending.items()
            if timeout_ms <= 0 or not check()
        }

    # -- CreateTopics -----------------------------------------------------------------------------

    async def handle_create_topics(self, request: Request) -> CreateTopicsResponse:
        body: CreateTopicsRequest = request.body
        results = [
            CreateTopicsResponse.CreatableTopicResult(name=topic.name, error_message=None)
            for topic in body.topics
        ]
        creatable, describable = self._create_topics_authorized(request, body)
        for result in results:
            if result.name != CLUSTER_METADATA_TOPIC and result.name not in describable:
                result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        denied = {t.name for t in body.topics} - creatable - {CLUSTER_METADATA_TOPIC}
        requested = _partitions_requested(
            (t for t in body.topics if t.name not in denied), self.config["num.partitions"]
        )
        if requested > MAX_PARTITIONS_PER_BATCH:
            # Kafka refuses the whole request before looking at any topic (but those the principal may
            # not create keep their TOPIC_AUTHORIZATION_FAILED).
            refusal = KafkaError(ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS)
            for result in results:
                if result.name in denied:
                    _fail_topic(result, _CREATE_DENIED, checked=False)
                else:
                    _fail_topic(result, refusal)
            log_refusal(
                request,
                refusal.code,
                f"{requested} partitions in {len(results)} topics, over the limit of "
                f"{MAX_PARTITIONS_PER_BATCH} per request",
            )
            return CreateTopicsResponse(throttle_time_ms=0, topics=results)
        errors, refused_early, pending = await self._create_topics(body, results, denied, describable)
        late = await self._await_outcome(pending, body.timeout_ms, "The creation")
        refused = []
        for i, result in enumerate(results):
            error = errors.get(i) or late.get(result.name)
            if error is not None:
                _fail_topic(result, error, checked=i not in refused_early)
                refused.append((result.name, error))
        _log_refusals(request, refused, len(results))
        return CreateTopicsResponse(throttle_time_ms=0, topics=results)

    def _create_topics_authorized(
        self, request: Request, body: CreateTopicsRequest
    ) -> tuple[set[str], set[str]]:
        """The topics of a CreateTopics the principal may create (CREATE on the cluster: all; else those
        with CREATE on the topic) and those it may DESCRIBE_CONFIGS (Kafka's handleCreateTopicsRequest:
        neither the cluster check nor the configs check logs a denial)."""
        authorization = self.authorization
        names = {t.name for t in body.topics} - {CLUSTER_METADATA_TOPIC}
        if authorization.authorize(
            request, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False
        ):
            creatable = names
        else:
            creatable = authorization.filter_authorized(
                request, AclOperation.CREATE, ResourceType.TOPIC, names
            )
        describable = authorization.filter_authorized(
            request, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names, log_if_denied=False
        )
        return creatable, describable

    async def _create_topics(
        self,
        body: CreateTopicsRequest,
        results: list[CreateTopicsResponse.CreatableTopicResult],
        denied: set[str],
        describable: set[str],
    ) -> tuple[dict[int, KafkaError], set[int], dict[str, Callable[[], bool]]]:
        """Checks and (unless ``validate_only``) writes each topic, filling in its result (configs,
        partitions, replication factor and id only for the ``describable`` topics); returns the topics'
        errors (by index), the indexes refused before any check of the topic itself (Kafka's order: the
        metadata topic, duplicates, then the ``denied`` topics) and, by topic written, the check that its
        creation was applied."""
        counts = Counter(t.name for t in body.topics)
        brokers = await self.admin_zk.registered_brokers()
        errors: dict[int, KafkaError] = {}
        early: set[int] = set()
        pending: dict[str, Callable[[], bool]] = {}
        for i, (topic, result) in enumerate(zip(body.topics, results, strict=True)):
            if topic.name == CLUSTER_METADATA_TOPIC:
                errors[i] = KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.",
                )
                early.add(i)
                continue
            if counts[topic.name] > 1:
                errors[i] = KafkaError(ErrorCode.INVALID_REQUEST, "Found multiple entries for this topic.")
                early.add(i)
                continue
            if topic.name in denied:
                errors[i] = _CREATE_DENIED
                early.add(i)
                continue
            try:
                assignment, configs = await self._prepare_topic(topic, brokers)
                if topic.name in describable:
                    result.num_partitions = len(assignment)
                    result.replication_factor = len(assignment[0])
                    result.configs = [
                        CreateTopicsResponse.CreatableTopicConfigs(
                            name=e.name,
                            value=e.value,
                            read_only=e.read_only,
                            config_source=e.source,
                            is_sensitive=e.sensitive,
                        )
                        for e in self.describer.topic_entries(configs)
                    ]
                if not body.validate_only:
                    topic_id = await self._write_topic(topic.name, configs, assignment)
                    if topic.name in describable:
                        result.topic_id = topic_id
                    pending[topic.name] = self._leaders_seen(topic.name, assignment)
            except KafkaError as e:
                errors[i] = e
        return errors, early, pending

    async def _prepare_topic(
        self, topic: CreateTopicsRequest.CreatableTopic, brokers: list[BrokerMetadata]
    ) -> tuple[dict[int, list[int]], dict[str, str]]:
        """The topic's assignment and configs, checked as Kafka checks them (in Kafka's order)."""
        name = topic.name
        if self.metadata_cache.contains(name):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        nulls = [c.name for c in topic.configs if c.value is None]
        if nulls:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Null value not supported for topic configs : {','.join(nulls)}"
            )
        explicit = bool(topic.assignments)
        if explicit and (
            topic.num_partitions != NO_NUM_PARTITIONS or topic.replication_factor != NO_REPLICATION_FACTOR
        ):
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        if explicit:
            assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        else:
            num_partitions = topic.num_partitions
            if num_partitions == NO_NUM_PARTITIONS:
                num_partitions = self.config["num.partitions"]
            replication_factor = topic.replication_factor
            if replication_factor == NO_REPLICATION_FACTOR:
                replication_factor = self.config["default.replication.factor"]
            # 10,000 partitions take milliseconds to assign: off the event loop.
            assignment = await asyncio.to_thread(assign_replicas, brokers, num_partitions, replication_factor)
        await self._check_new_name(name)
        if explicit:
            validate_topic_assignment(assignment, {b.id for b in brokers})
        configs = {c.name: c.value for c in topic.configs if c.value is not None}  # no nulls: refused above
        check_topic_configs(configs, self.dynamic.log_defaults(), ErrorCode.INVALID_CONFIG)
        return assignment, configs

    async def _check_new_name(self, name: str) -> None:
        problem = topic_name_error(name)
        if problem:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        if await self.admin_zk.topic_exists(name):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if "." in name or "_" in name:
            # Metric names turn '.' into '_', so Kafka refuses topics that differ only there.
            key = name.replace(".", "_")
            colliding = sorted(t for t in await self.admin_zk.all_topics() if t.replace(".", "_") == key)
            if name in colliding:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            if colliding:
                raise KafkaError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Topic '{name}' collides with existing topics: {', '.join(colliding)}",
                )

    async def _write_topic(
        self, name: str, configs: dict[str, str], assignment: dict[int, list[int]]
    ) -> uuid.UUID:
        topic_id = await self.admin_zk.create_topic(name, configs, assignment)
        # This broker's logs of the topic get its configs even before the /config/topics watch fires.
        self.listener.apply_topic(name, configs)
        return topic_id

    async def auto_create_topic(self, name: str) -> None:
        """Metadata's auto-creation: the broker defaults, racks only if every broker has one; a topic
        that already exists (another broker got there first) is fine. Does not wait for leaders."""
        brokers = ignore_partial_racks(await self.admin_zk.registered_brokers())
        assignment = assign_replicas(
            brokers, self.config["num.partitions"], self.config["default.replication.factor"]
        )
        try:
            await self._check_new_name(name)
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            return
        await self._write_unless_created_meanwhile(name, {}, assignment, "auto-created topic")

    async def create_internal_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        """Creates an internal topic (``__consumer_offsets`` on the first FindCoordinator), as Kafka's
        createInternalTopic: INVALID_REPLICATION_FACTOR while fewer brokers are registered than the
        replication factor asks; a topic another broker created first is fine."""
        brokers = ignore_partial_racks(await self.admin_zk.registered_brokers())
        if len(brokers) < replication_factor:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Number of alive brokers '{len(brokers)}' does not meet the required replication factor "
                f"'{replication_factor}' for the internal topic {name}. This error can be ignored if the "
                "cluster is starting up and not all brokers are up yet.",
            )
        assignment = assign_replicas(brokers, num_partitions, replication_factor)
        await self._write_unless_created_meanwhile(name, configs, assignment, "created internal topic")

    async def _write_unless_created_meanwhile(
        self, name: str, configs: dict[str, str], assignment: dict[int, list[int]], what: str
    ) -> None:
        """Writes a topic the broker creates by itself; one another broker created first is fine."""
        try:
            await self._write_topic(name, configs, assignment)
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        else:
            log.info(
                "%s %s with %d partitions and replication factor %d",
                what,
                name,
                len(assignment),
                len(assignment[0]),
            )

    # -- DeleteTopics -----------------------------------------------------------------------------

    async def handle_delete_topics(self, request: Request) -> DeleteTopicsResponse:
        body: DeleteTopicsRequest = request.body
        version = request.version
        if version >= 6:
            entries = [(t.name, t.topic_id) for t in body.topics]
        else:
            entries = [(name, ZERO_UUID) for name in body.topic_names]
        results = [
            DeleteTopicsResponse.DeletableTopicResult(name=name, topic_id=topic_id, error_message=None)
            for name, topic_id in entries
        ]
        refusal: KafkaError | None = None
        if not self.config["delete.topic.enable"]:
            code = ErrorCode.INVALID_REQUEST if version < 3 else ErrorCode.TOPIC_DELETION_DISABLED
            refusal = KafkaError(code, "Topic deletion is disabled.")
        elif any(name is not None and topic_id != ZERO_UUID for name, topic_id in entries):
            refusal = KafkaError(
                ErrorCode.INVALID_REQUEST, "Topic name and topic ID can not both be specified."
            )
        if refusal is not None:
            for result in results:
                result.error_code, result.error_message = refusal.code, refusal.message
            _log_refusals(request, [(result.name, refusal) for result in results], len(results))
            return DeleteTopicsResponse(throttle_time_ms=0, responses=results)

        pending: dict[str, Callable[[], bool]] = {}
        errors: dict[str, KafkaError] = {}
        unknown_ids: list[tuple[str | None, KafkaError]] = []
        for result in results:
            if result.topic_id != ZERO_UUID:
                result.name = self.metadata_cache.topic_name(result.topic_id)
        # Kafka's handleDeleteTopicsRequest: DESCRIBE and DELETE asked for every topic named or found.
        named = [result.name for result in results if result.name is not None]
        describable = self.authorization.filter_authorized(
            request, AclOperation.DESCRIBE, ResourceType.TOPIC, named
        )
        deletable = self.authorization.filter_authorized(
            request, AclOperation.DELETE, ResourceType.TOPIC, named
        )
        for result in results:
            if result.topic_id != ZERO_UUID and result.name is None:
                unknown = KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_ID,
                    f"Topic id {znodes.topic_id_string(result.topic_id)} is not known.",
                )
                result.error_code, result.error_message = unknown.code, unknown.message
                unknown_ids.append((None, unknown))
                continue
            name = result.name
            if name is None:
                # v6+ allows a null name; with no topic ID either it names no topic (was answered NONE).
                missing = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Neither topic name nor ID given.")
                result.error_code, result.error_message = missing.code, missing.message
                unknown_ids.append((None, missing))
                continue
            if name not in deletable or (result.topic_id != ZERO_UUID and name not in describable):
                # A topic named by id that the principal may not describe: its name is not told (the id is
                # not secret). Kafka sets no message.
                if result.topic_id != ZERO_UUID and name not in describable:
                    result.name = None
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                unknown_ids.append((result.name, _DELETE_DENIED))
                continue
            if name in pending or name in errors:
                continue
            try:
                if is_internal(name):
                    raise KafkaError(
                        ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic {name} is internal and cannot be deleted."
                    )
                if not self.metadata_cache.contains(name):
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
                await self.admin_zk.mark_for_deletion(name)
                pending[name] = self._gone(name)
            except KafkaError as e:
                errors[name] = e
        errors.update(await self._await_outcome(pending, body.timeout_ms, "The deletion"))
        for result in results:
            error = errors.get(result.name) if result.name is not None else None
            if error is not None:
                result.error_code, result.error_message = error.code, error.message
        _log_refusals(request, [*unknown_ids, *errors.items()], len(results))
        return DeleteTopicsResponse(throttle_time_ms=0, responses=results)

    # -- CreatePartitions -------------------------------------------------------------------------

    async def handle_create_partitions(self, request: Request) -> CreatePartitionsResponse:
        body: CreatePartitionsRequest = request.body
        counts = Counter(t.name for t in body.topics)
        alterable = self.authorization.filter_authorized(
            request,
            AclOperation.ALTER,
            ResourceType.TOPIC,
            (t.name for t in body.topics if counts[t.name] == 1),
        )
        errors: dict[int, KafkaError] = {}
        current: dict[int, tuple[znodes.TopicAssignment, int]] = {}
        for i, topic in enumerate(body.topics):
            try:
                if counts[topic.name] > 1:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
                if topic.name not in alterable:
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, _ALTER_DENIED_MESSAGE)
                current[i] = await self._current_assignment(topic.name)
            except KafkaError as e:
                errors[i] = e
        added = sum(max(0, body.topics[i].count - len(found.partitions)) for i, (found, _) in current.items())
        if added > MAX_PARTITIONS_PER_BATCH:
            # As CreateTopics: the whole request, before any assignment is computed.
            refusal = KafkaError(ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS)
            log_refusal(
                request,
                refusal.code,
                f"{added} partitions to add in {len(body.topics)} topics, over the limit of "
                f"{MAX_PARTITIONS_PER_BATCH} per request",
            )
            return CreatePartitionsResponse(
                throttle_time_ms=0, results=[_partitions_result(t.name, refusal) for t in body.topics]
            )
        brokers = await self.admin_zk.registered_brokers()
        pending: dict[str, Callable[[], bool]] = {}
        for i, (found, version) in current.items():
            topic = body.topics[i]
            try:
                await self._add_partitions(topic, found, version, brokers, body.validate_only)
                if not body.validate_only:
                    pending[topic.name] = self._leaders_seen(topic.name, range(topic.count))
            except KafkaError as e:
                errors[i] = e
        late = await self._await_outcome(pending, body.timeout_ms, "The partition increase")
        outcomes = [
            (topic.name, errors.get(i) or late.get(topic.name)) for i, topic in enumerate(body.topics)
        ]
        _log_refusals(
            request, [(name, error) for name, error in outcomes if error is not None], len(outcomes)
        )
        return CreatePartitionsResponse(
            throttle_time_ms=0, results=[_partitions_result(name, error) for name, error in outcomes]
        )

    async def _current_assignment(self, name: str) -> tuple[znodes.TopicAssignment, int]:
        """The assignment of a topic partitions may be added to, and its znode's version."""
        if await self.admin_zk.is_queued_for_deletion(name):
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion.")
        found = await self.admin_zk.topic_assignment(name)
        if found is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        if found[0].adding_replicas or found[0].removing_replicas:
            raise KafkaError(
                ErrorCode.REASSIGNMENT_IN_PROGRESS,
                f"A partition reassignment is in progress for the topic '{name}'.",
            )
        return found

    async def _add_partitions(
        self,
        topic: CreatePartitionsRequest.CreatePartitionsTopic,
        current: znodes.TopicAssignment,
        version: int,
        brokers: list[BrokerMetadata],
        validate_only: bool,
    ) -> None:
        """Checks and (unless ``validate_only``) writes the topic's larger assignment."""
        manual = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
        added = await asyncio.to_thread(
            new_partitions_assignment, topic.name, current.partitions, brokers, topic.count, manual
        )
        if not validate_only:
            current.partitions.update(added)
            await self.admin_zk.set_topic_assignment(topic.name, current, version)
