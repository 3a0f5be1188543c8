"""``samsa log-dirs``: Kafka 3.9's kafka-log-dirs.sh (LogDirsCommand) for Samsa.

``--describe --bootstrap-server S [--broker-list 1,2] [--topic-list t1,t2]`` sends DescribeLogDirs (every
partition) to each broker asked for (all brokers of the cluster by default) and prints::

    Querying brokers for log directories information
    Received log directory information from brokers 1,2,3
    {"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"t-0","size":75,"offsetLag":0,
    "isFuture":false}],"error":null,"logDir":"/data/1"}]}],"version":1}     (one line)

The JSON is Kafka's, key for key and in the order Jackson writes Kafka's HashMaps (``brokers`` before
``version``, ``partitions``, ``error``, ``logDir``); its lists are sorted (brokers by id, log dirs by
path, partitions by topic and number) where Kafka's follow its HashMaps' order. ``error`` is the Java
class of a log dir's error (``org.apache.kafka.common.errors.KafkaStorageException`` for an offline dir)
or null; ``offsetLag`` is the high watermark minus the log end offset of a current replica, or how far a
future replica (``isFuture``, one being moved between dirs by AlterReplicaLogDirs) trails the current one.
``--topic-list`` keeps the partitions of those topics only. A broker in ``--broker-list`` that is not in
the cluster: ``ERROR: The given brokers do not exist from --broker-list: 4. Current existent brokers:
1,2,3`` on stderr, exit 1. ``--command-config FILE``: the client's security settings
(tools/command_config.py).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from typing import Any

from network.client_security import ClientSecurity
from protocol.api import ApiKey
from protocol.errors import ErrorCode, description
from protocol.messages import DescribeLogDirsRequest
from tools import command_config
from tools.admin_client import AdminClient, AdminError
from tools.partition_leaders import exception_class
from tools.usage import UsageError, UsageParser

CLIENT_ID = "log-dirs-tool"
REQUEST_TIMEOUT = 30.0
USAGE_TEXT = "This tool helps to query log directory usage on the specified brokers."


class LogDirsError(Exception):
    """Printed on stderr; exit code 1."""


def _split(value: str) -> list[str]:
    return [item for item in value.split(",") if item]


def parse_brokers(value: str) -> set[int]:
    """--broker-list as Kafka reads it (Integer.valueOf of each comma-separated item)."""
    brokers = set()
    for item in _split(value):
        if not re.fullmatch(r"[+-]?[0-9]+", item) or not -(2**31) <= int(item) < 2**31:
            raise LogDirsError(f'For input string: "{item}"')
        brokers.add(int(item))
    return brokers


def _ids(ids: set[int]) -> str:
    return ",".join(str(i) for i in sorted(ids))


def log_dirs_json(descriptions: dict[int, Any], topics: set[str]) -> str:
    """LogDirsCommand.formatAsJson of each broker's DescribeLogDirs results."""
    brokers = []
    for broker in sorted(descriptions):
        log_dirs = []
        for result in sorted(descriptions[broker], key=lambda r: r.log_dir):
            replicas = sorted(
                (topic.name, p.partition_index, p)
                for topic in result.topics
                if not topics or topic.name in topics
                for p in topic.partitions
            )
            log_dirs.append(
                {
                    "partitions": [
                        {
                            "partition": f"{name}-{index}",
                            "size": p.partition_size,
                            "offsetLag": p.offset_lag,
                            "isFuture": p.is_future_key,
                        }
                        for name, index, p in replicas
                    ],
                    "error": None
                    if result.error_code == ErrorCode.NONE
                    else exception_class(result.error_code),
                    "logDir": result.log_dir,
                }
            )
        brokers.append({"broker": broker, "logDirs": log_dirs})
    return json.dumps({"brokers": brokers, "version": 1}, separators=(",", ":"), ensure_ascii=False)


async def describe(
    bootstrap: str, brokers: set[int], topics: set[str], security: ClientSecurity | None = None
) -> None:
    async with AdminClient(
        bootstrap, client_id=CLIENT_ID, timeout=REQUEST_TIMEOUT, security=security
    ) as admin:
        cluster = set(admin.brokers)
        missing = brokers - cluster
        if missing:
            raise LogDirsError(
                f"ERROR: The given brokers do not exist from --broker-list: {_ids(missing)}. "
                f"Current existent brokers: {_ids(cluster)}"
            )
        wanted = brokers or cluster
        print("Querying brokers for log directories information", flush=True)

        async def ask(broker: int) -> Any:
            response = await admin.send_to_node(
                ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest(topics=None), broker
            )
            if response.results:
                return response.results
            # Kafka's Admin client: no log dir at all is a failure (before v3 DescribeLogDirs had no
            # error code: an unauthorized request got an empty answer).
            code = response.error_code or ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            raise LogDirsError(f"{exception_class(code)}: {description(code)}")

        results = await asyncio.gather(*(ask(b) for b in sorted(wanted)))
    print(f"Received log directory information from brokers {_ids(wanted)}")
    print(log_dirs_json(dict(zip(sorted(wanted), results, strict=True)), topics))


def _parser() -> UsageParser:
    p = UsageParser(prog="samsa log-dirs", description=USAGE_TEXT)
    p.add_argument(
        "--bootstrap-server",
        metavar="The server(s) to use for bootstrapping",
        help="REQUIRED: the server(s) to use for bootstrapping",
    )
    command_config.add_argument(p)
    p.add_argument(
        "--describe",
        action="store_true",
        help="Describe the specified log directories on the specified brokers.",
    )
    p.add_argument(
        "--topic-list",
        default="",
        metavar="Topic list",
        help='The list of topics to be queried in the form "topic1,topic2,topic3". All topics will be '
        "queried if no topic list is specified (default: )",
    )
    p.add_argument(
        "--broker-list",
        default="",
        metavar="Broker list",
        help='The list of brokers to be queried in the form "0,1,2". All brokers in the cluster will be '
        "queried if no broker list is specified (default: )",
    )
    return p


def main(argv: list[str]) -> int:
    parser = _parser()
    if not argv:
        print(USAGE_TEXT, file=sys.stderr)
        parser.print_help(sys.stderr)
        return 1
    try:
        args = parser.parse_args(argv)
        for name, given in (
            ("bootstrap-server", args.bootstrap_server is not None),
            ("describe", args.describe),
        ):
            if not given:
                raise UsageError(f'Missing required argument "[{name}]"')
        brokers = parse_brokers(args.broker_list)
        security = command_config.client_security(args.command_config)
        asyncio.run(describe(args.bootstrap_server, brokers, set(_split(args.topic_list)), security))
        return 0
    except UsageError as e:
        print(e, file=sys.stderr)
        parser.print_help(sys.stderr)
        return 1
    except (LogDirsError, AdminError) as e:
        print(e, file=sys.stderr)
        return 1
