"""``samsa replica-verification``: kafka-replica-verification.sh for Samsa — checks that every replica of
the chosen partitions holds the same record batches up to the high watermark.

As Kafka's ReplicaVerificationTool: the partitions of the topics matching ``--topic-white-list`` (alias
``--topics-include``, a regular expression, default ``.*``) start at the offsets of ``--time`` (-1: the
high watermark, -2: the log start, else a timestamp); each round sends every broker one Fetch for the
replicas it holds, with replica id -2 (Kafka's debugging consumer, which brokers serve from followers
too, up to their high watermark), then compares the replicas batch by batch — last offset and CRC —
as far as every replica has data below its own high watermark. A CRC difference prints
``<time>: partition t-0 has unmatched checksum at offset 41; replica 1's checksum 123; replica 2's
checksum 456``; different offsets print ``... replica 1's offset 41 doesn't match replica 2's offset
39`` and stop the tool (exit 1). Every ``--report-interval-ms`` it prints ``<time>: max lag is 0 for
partition t-0 at offset 100 among 3 partitions`` (the largest gap between a partition's verified offset
and its highest high watermark).

Three additions. ``--command-config FILE`` gives the client's security settings (TLS, SASL;
tools/command_config.py; Kafka's tool has no such option). A replica a broker refuses to serve is reported
once per error (``<time>: partition t-0: replica 2 cannot be read: NOT_LEADER_OR_FOLLOWER``) instead of
stalling silently. ``--once`` verifies until every partition is verified up to the high watermark its first
fetch saw (giving up when nothing moves on for 5 s), prints the report and exits: 0 when every replica could
be read, matched and got there, else 1. Without it the tool runs until interrupted, as Kafka's.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

from network.client import NetworkClient
from network.client_security import ClientSecurity
from protocol import record_batch
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode
from protocol.messages import FetchRequest, ListOffsetsRequest
from tools import command_config
from tools.admin_client import AdminClient, AdminError, parse_bootstrap
from tools.topic_filter import topic_filter

DEBUGGING_CONSUMER_ID = -2
MAX_FETCH_VERSION = 12  # later versions name topics by id
FETCH_MAX_BYTES = 50 * 1024 * 1024
# --once gives up when no replica moved on for this long (a follower's high watermark trails the
# leader's by a fetch; one that stays behind, or a replica that cannot be read, ends the check).
STALL_TIMEOUT = 5.0


class ToolError(Exception):
    """Printed on stderr; exit code 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ToolError(f"{message}\n{self.format_usage()}")


def _parser() -> _Parser:
    p = _Parser(
        prog="samsa replica-verification",
        description="Validate that all replicas for a set of topics have the same data.",
    )
    p.add_argument(
        "--bootstrap-server",
        "--broker-list",
        dest="bootstrap_server",
        metavar="hostname:port,...,hostname:port",
        help="REQUIRED: the servers to connect to",
    )
    command_config.add_argument(p)
    p.add_argument(
        "--topic-white-list",
        "--topics-include",
        dest="topics",
        default=".*",
        metavar="Java regex (String)",
        help="List of topics to verify replica consistency (default .*)",
    )
    p.add_argument("--fetch-size", type=int, default=1024 * 1024, metavar="bytes", help="per partition")
    p.add_argument("--max-wait-ms", type=int, default=1000, metavar="ms", help="of each fetch request")
    p.add_argument(
        "--time",
        type=int,
        default=-1,
        metavar="timestamp/-1(latest)/-2(earliest)",
        help="Timestamp for getting the initial offsets.",
    )
    p.add_argument(
        "--report-interval-ms", type=int, default=30_000, metavar="ms", help="The reporting interval."
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="Samsa: verify up to the high watermarks, report and exit (1 if a replica differs or lags)",
    )
    return p


def _now() -> str:
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


@dataclass(frozen=True)
class Fetched:
    """One replica's answer for one partition."""

    error: int
    high_watermark: int
    records: Any


@dataclass(frozen=True)
class BatchInfo:
    last_offset: int
    next_offset: int
    checksum: int


class OffsetMismatch(Exception):
    pass


def _batches(records: Any) -> Iterator[BatchInfo]:
    if not records:
        return
    for _, header in record_batch.iter_headers(memoryview(records)):
        last = header.base_offset + header.last_offset_delta
        yield BatchInfo(last, last + 1, header.crc)


class ReplicaVerifier:
    def __init__(
        self,
        replicas: dict[tuple[str, int], list[int]],
        endpoints: dict[int, tuple[str, int]],
        fetch_version: int,
        args: argparse.Namespace,
        out: Callable[[str], None] = print,
        security: ClientSecurity | None = None,
    ) -> None:
        self.replicas = replicas
        self.security = security
        self.endpoints = endpoints
        self.fetch_version = fetch_version
        self.args = args
        self.out = out
        self.positions: dict[tuple[str, int], int] = {}
        self.high_watermarks: dict[tuple[str, int], int] = {}  # the highest of each partition's replicas
        self.clients: dict[int, NetworkClient] = {}
        self.mismatches = 0
        self.unreadable: set[tuple[tuple[str, int], int, str]] = set()
        self.max_lag = -1
        self.offset_with_max_lag = -1
        self.partition_with_max_lag: tuple[str, int] | None = None

    def _client(self, broker_id: int) -> NetworkClient:
        client = self.clients.get(broker_id)
        if client is None:
            host, port = self.endpoints[broker_id]
            timeout = self.args.max_wait_ms / 1000 + 30
            client = self.clients[broker_id] = NetworkClient(
                host,
                port,
                f"broker-{DEBUGGING_CONSUMER_ID}-fetcher",
                request_timeout=timeout,
                security=self.security,
            )
        return client

    async def close(self) -> None:
        for client in self.clients.values():
            await client.close()

    # -- fetching -----------------------------------------------------------------------------------

    async def fetch_round(self) -> dict[tuple[str, int], dict[int, Fetched]]:
        """One Fetch per broker for the replicas it holds; per partition, per replica, what came back."""
        by_broker: dict[int, list[tuple[str, int]]] = {}
        for tp, replicas in self.replicas.items():
            for replica in replicas:
                by_broker.setdefault(replica, []).append(tp)
        answers = await asyncio.gather(*(self._fetch(b, tps) for b, tps in sorted(by_broker.items())))
        fetched: dict[tuple[str, int], dict[int, Fetched]] = {tp: {} for tp in self.replicas}
        for broker_id, answer in zip(sorted(by_broker), answers, strict=True):
            for tp, result in answer.items():
                fetched[tp][broker_id] = result
        return fetched

    async def _fetch(
        self, broker_id: int, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], Fetched]:
        if broker_id not in self.endpoints:
            return dict.fromkeys(partitions, Fetched(ErrorCode.BROKER_NOT_AVAILABLE, -1, None))
        by_topic: dict[str, list[Any]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(
                FetchRequest.FetchPartition(
                    partition=partition,
                    fetch_offset=self.positions[(topic, partition)],
                    partition_max_bytes=self.args.fetch_size,
                )
            )
        request = FetchRequest(
            replica_id=DEBUGGING_CONSUMER_ID,
            max_wait_ms=self.args.max_wait_ms,
            min_bytes=1,
            max_bytes=FETCH_MAX_BYTES,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=t, partitions=p) for t, p in by_topic.items()],
            forgotten_topics_data=[],
            rack_id="",
        )
        spec = api(ApiKey.FETCH)
        assert spec is not None
        try:
            response = await self._client(broker_id).send(spec, self.fetch_version, request)
        except (OSError, TimeoutError):
            return dict.fromkeys(partitions, Fetched(ErrorCode.NETWORK_EXCEPTION, -1, None))
        if response.error_code != ErrorCode.NONE:
            return dict.fromkeys(partitions, Fetched(response.error_code, -1, None))
        return {
            (t.topic, p.partition_index): Fetched(p.error_code, p.high_watermark, p.records)
            for t in response.responses
            for p in t.partitions
        }

    # -- verifying ----------------------------------------------------------------------------------

    def verify(self, fetched: dict[tuple[str, int], dict[int, Fetched]]) -> bool:
        """Compares what each partition's replicas returned; returns whether any offset moved on.
        Raises OffsetMismatch when replicas disagree on where a batch ends (Kafka exits there)."""
        progressed = False
        self.max_lag = -1
        for tp in sorted(fetched):
            answers = fetched[tp]
            readable = True
            for replica, answer in sorted(answers.items()):
                if answer.error != ErrorCode.NONE:
                    readable = False
                    name = ErrorCode(answer.error).name
                    if (tp, replica, name) not in self.unreadable:
                        self.unreadable.add((tp, replica, name))
                        self.out(
                            f"{_now()}: partition {tp[0]}-{tp[1]}: replica {replica} cannot be read: {name}"
                        )
            if readable and self._verify_partition(tp, answers):
                progressed = True
            max_hw = self.high_watermarks[tp] = max((a.high_watermark for a in answers.values()), default=-1)
            lag = max_hw - self.positions[tp]
            if lag > self.max_lag:
                self.max_lag, self.offset_with_max_lag, self.partition_with_max_lag = (
                    lag,
                    self.positions[tp],
                    tp,
                )
        return progressed

    def _verify_partition(self, tp: tuple[str, int], answers: dict[int, Fetched]) -> bool:
        batches = {replica: _batches(answer.records) for replica, answer in sorted(answers.items())}
        progressed = False
        while True:
            first: tuple[int, BatchInfo] | None = None
            for replica, found in batches.items():
                batch = next(found, None)
                if batch is None or batch.last_offset >= answers[replica].high_watermark:
                    return progressed  # only up to every replica's high watermark
                if first is None:
                    first = (replica, batch)
                    continue
                if batch.last_offset != first[1].last_offset:
                    self.out(
                        f"{_now()}: partition {tp[0]}-{tp[1]}: replica {first[0]}'s offset "
                        f"{first[1].last_offset} doesn't match replica {replica}'s offset {batch.last_offset}"
                    )
                    raise OffsetMismatch
                if batch.checksum != first[1].checksum:
                    self.mismatches += 1
                    self.out(
                        f"{_now()}: partition {tp[0]}-{tp[1]} has unmatched checksum at offset "
                        f"{batch.last_offset}; replica {first[0]}'s checksum {first[1].checksum}; "
                        f"replica {replica}'s checksum {batch.checksum}"
                    )
            assert first is not None
            self.positions[tp] = first[1].next_offset
            progressed = True

    def report(self) -> None:
        tp = self.partition_with_max_lag
        name = "null" if tp is None else f"{tp[0]}-{tp[1]}"
        self.out(
            f"{_now()}: max lag is {self.max_lag} for partition {name} at offset {self.offset_with_max_lag} "
            f"among {len(self.replicas)} partitions"
        )


async def _initial_offsets(
    admin: AdminClient,
    leaders: dict[tuple[str, int], int],
    endpoints: dict[int, tuple[str, int]],
    timestamp: int,
) -> dict[tuple[str, int], int]:
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for tp, leader in leaders.items():
        if leader not in endpoints:
            raise ToolError(f"partition {tp[0]}-{tp[1]} has no available leader")
        by_leader.setdefault(leader, []).append(tp)
    spec = api(ApiKey.LIST_OFFSETS)
    assert spec is not None
    offsets: dict[tuple[str, int], int] = {}
    for leader, partitions in sorted(by_leader.items()):
        by_topic: dict[str, list[Any]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(
                ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)
            )
        request = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=p) for t, p in by_topic.items()],
        )
        client = NetworkClient(
            *endpoints[leader], "replica-verification", request_timeout=admin.timeout, security=admin.security
        )
        try:
            response = await client.send(spec, admin.version(ApiKey.LIST_OFFSETS), request)
        except (OSError, TimeoutError) as e:
            raise ToolError(f"ListOffsets to broker {leader} failed: {e}") from None
        finally:
            await client.close()
        for t in response.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE:
                    raise ToolError(
                        f"ListOffsets for {t.name}-{p.partition_index}: {ErrorCode(p.error_code).name}"
                    )
                offsets[(t.name, p.partition_index)] = max(p.offset, 0)
    return offsets


async def run(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    try:
        include = topic_filter(args.topics)
    except ValueError as e:
        raise ToolError(str(e)) from None
    security = command_config.client_security(args.command_config)
    async with AdminClient(
        args.bootstrap_server, client_id="replica-verification", security=security
    ) as admin:
        metadata = await admin.metadata(None)
        endpoints = dict(admin.brokers)
        topics = [t for t in metadata.topics if t.error_code == ErrorCode.NONE and include.fullmatch(t.name)]
        if not topics:
            raise ToolError(
                "No topics found. --topic-white-list, if specified, is either filtering out all topics "
                "or there is no topic."
            )
        replicas = {(t.name, p.partition_index): list(p.replica_nodes) for t in topics for p in t.partitions}
        leaders = {(t.name, p.partition_index): p.leader_id for t in topics for p in t.partitions}
        verifier = ReplicaVerifier(
            replicas, endpoints, min(admin.version(ApiKey.FETCH), MAX_FETCH_VERSION), args, out, security
        )
        verifier.positions = await _initial_offsets(admin, leaders, endpoints, args.time)
    out(f"{_now()}: verification process is started")
    last_report = time.monotonic()
    targets: dict[tuple[str, int], int] | None = None  # --once: the high watermarks of the first round
    last_progress = time.monotonic()
    try:
        while True:
            if verifier.verify(await verifier.fetch_round()):
                last_progress = time.monotonic()
            if args.once:
                if targets is None:
                    targets = dict(verifier.high_watermarks)
                reached = all(verifier.positions[tp] >= hw for tp, hw in targets.items())
                if reached or time.monotonic() - last_progress > STALL_TIMEOUT:
                    verifier.report()
                    return 1 if verifier.mismatches or verifier.unreadable or not reached else 0
            if time.monotonic() - last_report > args.report_interval_ms / 1000:
                verifier.report()
                last_report = time.monotonic()
    except OffsetMismatch:
        return 1
    finally:
        await verifier.close()


def main(argv: list[str]) -> int:
    try:
        parser = _parser()
        if not argv:
            raise ToolError(
                f"Validate that all replicas for a set of topics have the same data.\n{parser.format_usage()}"
            )
        args = parser.parse_args(argv)
        if not args.bootstrap_server:
            raise ToolError(f'Missing required argument "[bootstrap-server]"\n{parser.format_usage()}')
        parse_bootstrap(args.bootstrap_server)
        return asyncio.run(run(args, lambda line: print(line, flush=True)))
    except (ToolError, AdminError) as e:
        print(e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
