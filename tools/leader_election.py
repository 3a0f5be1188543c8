"""``samsa leader-election``: kafka-leader-election.sh for Samsa.

``--bootstrap-server S --election-type preferred|unclean`` with exactly one of ``--topic T --partition
P``, ``--all-topic-partitions`` or ``--path-to-json-file F`` (``{"partitions":[{"topic":"foo",
"partition":1}]}``) sends ElectLeaders and prints, as Kafka's LeaderElectionCommand does::

    Successfully completed leader election (PREFERRED) for partitions foo-0, foo-1
    Valid replica already elected for partitions foo-2
    Error completing leader election (PREFERRED) for partition: foo-3: org.apache.kafka.common.errors.
    PreferredLeaderNotAvailableException: ...     (one line)

``--command-config FILE`` (Kafka 3.9: ``--admin.config``) gives the client's security settings
(tools/command_config.py). Option errors and failed elections end with a message on stderr and exit
code 1. With ``--all-topic-partitions`` the brokers report only the partitions that needed an election.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import NoReturn

from network.client_security import ClientSecurity
from protocol.api import ApiKey
from protocol.errors import ErrorCode, description
from protocol.messages import ElectLeadersRequest
from tools import command_config
from tools.admin_client import AdminClient, AdminError

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
REQUEST_TIMEOUT_MS = 30_000
# Kafka's exception classes whose names are not the error's name in camel case with "Exception".
_EXCEPTIONS = {
    ErrorCode.REQUEST_TIMED_OUT: "TimeoutException",
    ErrorCode.UNKNOWN_SERVER_ERROR: "UnknownServerException",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "InvalidTopicException",
}


class CommandFailed(Exception):
    """Kafka's AdminCommandFailedException: its message goes to stderr, the exit code is 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CommandFailed(message)


def _election_type(value: str) -> str:
    if value.upper() not in ELECTION_TYPES:
        raise argparse.ArgumentTypeError(f"Value [{value}] is not one of [PREFERRED, UNCLEAN]")
    return value.upper()


def _parser() -> _Parser:
    p = _Parser(
        prog="samsa leader-election",
        description="This tool attempts to elect a new leader for a set of topic partitions. The type of "
        "elections supported are preferred replicas and unclean replicas.",
    )
    p.add_argument("--bootstrap-server", metavar="host:port", help="The broker(s) to connect to. REQUIRED.")
    # --admin.config is Kafka 3.9's name for it (KIP-1147 renames it --command-config).
    command_config.add_argument(
        p,
        "--command-config",
        "--admin.config",
        help="Configuration properties files to pass to the admin client",
    )
    p.add_argument(
        "--election-type",
        type=_election_type,
        metavar="election type",
        help='"preferred" for preferred leader election or "unclean" for unclean leader election. REQUIRED.',
    )
    p.add_argument("--topic", metavar="topic name", help="Name of topic for which to perform an election.")
    p.add_argument("--partition", type=int, metavar="partition id", help="REQUIRED if --topic is specified.")
    p.add_argument(
        "--all-topic-partitions",
        action="store_true",
        help="Perform election on all of the eligible topic partitions.",
    )
    p.add_argument(
        "--path-to-json-file",
        metavar="Path to JSON file",
        help='The partitions to elect leaders for: {"partitions": [{"topic": "foo", "partition": 1}]}',
    )
    return p


def _validate(args: argparse.Namespace) -> None:
    """LeaderElectionCommandOptions.validate, with its messages."""
    missing = [
        n
        for n, v in (("bootstrap-server", args.bootstrap_server), ("election-type", args.election_type))
        if not v
    ]
    if missing:
        raise CommandFailed("Missing required option(s): " + ", ".join(missing))
    chosen = [args.topic is not None, args.all_topic_partitions, args.path_to_json_file is not None]
    if sum(chosen) != 1:
        raise CommandFailed(
            "One and only one of the following options is required: "
            "topic, all-topic-partitions, path-to-json-file"
        )
    if args.topic is not None and args.partition is None:
        raise CommandFailed("Missing required option(s): partition")
    if args.topic is None and args.partition is not None:
        raise CommandFailed("Option partition is only allowed if topic is used")


def parse_election_json(text: str) -> list[tuple[str, int]]:
    """The partitions of a --path-to-json-file (Kafka's parseReplicaElectionData)."""
    try:
        body = json.loads(text)
    except ValueError:
        raise CommandFailed("Replica election data is empty") from None
    if not isinstance(body, dict) or "partitions" not in body:
        raise CommandFailed('Replica election data is missing "partitions" field')
    try:
        partitions = [(item["topic"], int(item["partition"])) for item in body["partitions"]]
    except (KeyError, TypeError, ValueError):
        raise CommandFailed("Replica election data names a partition without topic or partition") from None
    duplicates = sorted(tp for tp, n in Counter(partitions).items() if n > 1)
    if duplicates:
        raise CommandFailed(
            "Replica election data contains duplicate partitions: "
            + "["
            + ", ".join(f"{t}-{p}" for t, p in duplicates)
            + "]"
        )
    return partitions


def java_exception(code: int, message: str | None) -> str:
    """How Kafka's tool prints a per-partition failure: the exception's class and message."""
    error = ErrorCode(code)
    name = _EXCEPTIONS.get(error) or "".join(w.capitalize() for w in error.name.split("_")) + "Exception"
    return f"org.apache.kafka.common.errors.{name}: {message or description(code)}"


@dataclass
class ElectionResult:
    """ElectLeaders' answer per partition: elected, already led by a valid replica, or failed (with
    Kafka's exception text)."""

    succeeded: list[tuple[str, int]] = field(default_factory=list)
    noop: list[tuple[str, int]] = field(default_factory=list)
    failed: dict[tuple[str, int], str] = field(default_factory=dict)


async def elect_leaders(
    admin: AdminClient, election_type: str, partitions: list[tuple[str, int]] | None
) -> ElectionResult:
    """Sends ElectLeaders (``partitions`` None: every partition that needs an election) and sorts the
    answer; CommandFailed when the whole request failed."""
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in partitions or []:
        by_topic[topic].append(partition)
    request = ElectLeadersRequest(
        election_type=ELECTION_TYPES[election_type],
        topic_partitions=None
        if partitions is None
        else [ElectLeadersRequest.TopicPartitions(topic=t, partitions=p) for t, p in by_topic.items()],
        timeout_ms=REQUEST_TIMEOUT_MS,
    )
    if election_type == "UNCLEAN" and admin.version(ApiKey.ELECT_LEADERS) < 1:
        raise CommandFailed("The broker does not support unclean leader election (ElectLeaders v1)")
    response = await admin.send(ApiKey.ELECT_LEADERS, request)
    if response.error_code != ErrorCode.NONE:
        raise CommandFailed(java_exception(response.error_code, None))
    results = {
        (t.topic, p.partition_id): (p.error_code, p.error_message)
        for t in response.replica_election_results
        for p in t.partition_result
    }
    result = ElectionResult()
    for tp, (code, message) in sorted(results.items()):
        if code == ErrorCode.NONE:
            result.succeeded.append(tp)
        elif code == ErrorCode.ELECTION_NOT_NEEDED:
            result.noop.append(tp)
        else:
            result.failed[tp] = java_exception(code, message)
    return result


async def elect(
    bootstrap: str,
    election_type: str,
    partitions: list[tuple[str, int]] | None,
    security: ClientSecurity | None = None,
) -> int:
    async with AdminClient(
        bootstrap, client_id="leader-election", timeout=REQUEST_TIMEOUT_MS / 1000, security=security
    ) as admin:
        result = await elect_leaders(admin, election_type, partitions)
    if result.succeeded:
        print(
            f"Successfully completed leader election ({election_type}) for partitions "
            + ", ".join(f"{t}-{p}" for t, p in result.succeeded)
        )
    if result.noop:
        print("Valid replica already elected for partitions " + ", ".join(f"{t}-{p}" for t, p in result.noop))
    for (topic, partition), error in result.failed.items():
        print(
            f"Error completing leader election ({election_type}) for partition: {topic}-{partition}: {error}"
        )
    if result.failed:
        raise CommandFailed(f"{len(result.failed)} replica(s) could not be elected")
    return 0


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
        _validate(args)
        if args.path_to_json_file is not None:
            try:
                with open(args.path_to_json_file, encoding="utf-8") as f:
                    partitions: list[tuple[str, int]] | None = parse_election_json(f.read())
            except OSError as e:
                raise CommandFailed(f"{args.path_to_json_file} ({e.strerror})") from None
        elif args.topic is not None:
            partitions = [(args.topic, args.partition)]
        else:
            partitions = None
        security = command_config.client_security(args.command_config)
        return asyncio.run(elect(args.bootstrap_server, args.election_type, partitions, security))
    except (CommandFailed, AdminError) as e:
        print(e, file=sys.stderr)
        return 1
