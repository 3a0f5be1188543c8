"""ElectLeaders on the broker, in process: the controller's answer (a fake channel) comes at once, and
the response is parked in the ReplicaManager's elect-leader purgatory until this broker's metadata
shows the new leader (Kafka's DelayedElectLeader), or times out."""

from __future__ import annotations

from broker.metadata_cache import MetadataCache
from broker.replica_admin import ReplicaAdmin
from broker.replica_manager import METADATA_UPDATE, ReplicaManager
from network.handler_pool import Parked
from network.request_channel import Request
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode
from protocol.messages import ElectLeadersRequest, ElectLeadersResponse, Message
from storage.log_manager import LogManager
from tests.broker.controller_requests import update_metadata

BROKERS = {1: ("h1", 9092), 2: ("h2", 9092)}


class _ControllerChannel:
    """The active controller, which elects every partition it is asked for."""

    async def send(self, key: ApiKey, version: int, body: ElectLeadersRequest) -> Message:
        assert body.topic_partitions is not None
        return ElectLeadersResponse(
            error_code=ErrorCode.NONE,
            replica_election_results=[
                ElectLeadersResponse.ReplicaElectionResult(
                    topic=t.topic,
                    partition_result=[
                        ElectLeadersResponse.PartitionResult(partition_id=p, error_code=ErrorCode.NONE)
                        for p in t.partitions
                    ],
                )
                for t in body.topic_partitions
            ],
        )


def _elect(timeout_ms: int) -> Request:
    body = ElectLeadersRequest(
        election_type=0,
        topic_partitions=[ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0])],
        timeout_ms=timeout_ms,
    )
    definition = api(ApiKey.ELECT_LEADERS)
    assert definition is not None
    return Request(None, definition, 1, 1, "test", body, 0, 1)  # type: ignore[arg-type]


def _admin(logs: LogManager) -> tuple[ReplicaAdmin, ReplicaManager, MetadataCache]:
    cache = MetadataCache("cluster")
    # Broker 2 is the preferred replica; broker 1 leads.
    cache.update(update_metadata(BROKERS, "t", {0: [2, 1]}, leader=1), 6)
    manager = ReplicaManager(1, logs, cache)
    return ReplicaAdmin(cache, _ControllerChannel(), manager), manager, cache  # type: ignore[arg-type]


async def test_parked_until_the_metadata_shows_the_preferred_leader(logs: LogManager) -> None:
    admin, manager, cache = _admin(logs)
    parked = await admin.handle_elect_leaders(_elect(5000))
    assert isinstance(parked, Parked) and not parked.response.done()
    cache.update(update_metadata(BROKERS, "t", {0: [2, 1]}, leader_epoch=1), 6)
    manager.elect_leader_purgatory.check(METADATA_UPDATE)
    response = await parked.response
    assert isinstance(response, ElectLeadersResponse)
    [result] = response.replica_election_results[0].partition_result
    assert (result.partition_id, result.error_code) == (0, ErrorCode.NONE)


async def test_times_out_when_the_metadata_never_shows_it(logs: LogManager) -> None:
    admin, _, _ = _admin(logs)
    parked = await admin.handle_elect_leaders(_elect(30))
    assert isinstance(parked, Parked)
    response = await parked.response
    assert isinstance(response, ElectLeadersResponse)
    [result] = response.replica_election_results[0].partition_result
    assert result.error_code == ErrorCode.REQUEST_TIMED_OUT
