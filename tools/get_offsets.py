"""``samsa get-offsets``: Kafka 3.9's kafka-get-offsets.sh (GetOffsetShell) for Samsa.

Prints one line ``topic:partition:offset`` per partition, sorted by ``topic-partition`` as a string (as
Kafka's TreeMap on ``TopicPartition.toString``), of the partitions chosen by

- ``--topic-partitions`` — comma-separated patterns ``REGEX:N``, ``REGEX:N-M`` (M exclusive), ``REGEX:N-``,
  ``REGEX:-M`` or ``REGEX`` (every partition), the regex optional (any topic); or
- ``--topic REGEX`` and/or ``--partitions 0,1,...`` (cannot be combined with ``--topic-partitions``);
- every topic when neither is given; ``--exclude-internal-topics`` drops ``__consumer_offsets`` and
  ``__transaction_state``.

``--time``: ``-1``/``latest`` (the high watermark; the default), ``-2``/``earliest`` (the log start
offset), ``-3``/``max-timestamp`` (the offset of the record with the newest timestamp), ``-4``/
``earliest-local``, ``-5``/``latest-tiered`` (Samsa has no tiered storage: the log start offset, and
none), or a timestamp in ms (the first offset whose record timestamp is at or after it). A partition with
no such offset (a timestamp after the newest record) is not printed. The offsets come from ListOffsets to
each partition's leader, read-uncommitted, as Kafka's Admin ``listOffsets`` asks for them (retried while
a leader is missing or moving, up to ``default.api.timeout.ms``, 60 s; ``tools/partition_leaders.py``).

A partition that fails prints ``Skip getting offsets for topic-partition t-0 due to error: <Java
exception>: <message>`` on stderr and the tool goes on. Errors print ``Error occurred: <message>`` on
stderr and exit 1; a missing ``--bootstrap-server`` prints the message and the usage. ``--command-config
FILE``: the client's security settings (tools/command_config.py) and ``default.api.timeout.ms``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from network.client_security import ClientSecurity
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode
from protocol.messages import ListOffsetsRequest
from tools import command_config
from tools.admin_client import AdminClient, AdminError, parse_bootstrap
from tools.partition_leaders import (
    DEFAULT_API_TIMEOUT_MS,
    Failure,
    TopicPartition,
    api_timeout_ms,
    send_to_leaders,
    tp_name,
)
from tools.topic_filter import topic_filter
from tools.usage import CommandLineError, UsageError, UsageParser

USAGE_TEXT = "An interactive shell for getting topic-partition offsets."
CLIENT_ID = "GetOffsetShell"
TOPIC_PARTITION_PATTERN = r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?"
INT_MAX = 2**31 - 1
READ_UNCOMMITTED = 0
UNKNOWN_OFFSET = -1
# The special --time values (ListOffsetsRequest's timestamps) and the ListOffsets version each needs.
SPECS = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5}
MIN_VERSION = {-3: 7, -4: 8, -5: 9}
TIME_HELP = (
    "<timestamp> / -1 or latest / -2 or earliest / -3 or max-timestamp / -4 or earliest-local / "
    "-5 or latest-tiered"
)


class TerseError(Exception):
    """Kafka's TerseException: ``Error occurred: <message>`` on stderr, exit 1."""


def _java_int(text: str, bits: int = 32) -> int:
    """Integer.parseInt / Long.parseLong: an optional sign and digits, in range; ValueError else."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(text)
    value = int(text)
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise ValueError(text)
    return value


def java_split(text: str, sep: str = ",") -> list[str]:
    """Java's ``String.split``: trailing empty strings dropped."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_offset_spec(value: str) -> int:
    """GetOffsetShell.parseOffsetSpec: the ListOffsets timestamp for a --time value."""
    if value in SPECS:
        return SPECS[value]
    try:
        return _java_int(value, 64)
    except ValueError:
        raise TerseError(
            f"Malformed time argument {value}. Please use -1 or latest / -2 or earliest / "
            "-3 or max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a specified long format "
            "timestamp"
        ) from None


@dataclass(frozen=True)
class Rule:
    """One topic pattern and the partitions it allows (TopicFilterAndPartitionFilter)."""

    topic: re.Pattern[str]
    allows: Callable[[int], bool]

    def topic_allowed(self, topic: str) -> bool:
        return self.topic.fullmatch(topic) is not None

    def partition_allowed(self, topic: str, partition: int) -> bool:
        return self.topic_allowed(topic) and self.allows(partition)


def _include_list(pattern: str) -> re.Pattern[str]:
    try:
        return topic_filter(pattern)
    except ValueError:
        raise TerseError(f"{pattern} is an invalid regex.") from None


def parse_rule(spec: str) -> Rule:
    """GetOffsetShell.parseRuleSpec: ``[REGEX][:N | :N-M | :N- | :-M]``."""
    match = re.fullmatch(TOPIC_PARTITION_PATTERN, spec)
    if match is None:
        raise TerseError(f"Invalid rule specification: {spec}")
    groups = [g or None for g in match.groups()]
    topic = _include_list(groups[0] or ".*")
    try:
        if groups[1] is not None:
            one = _java_int(groups[1])
            return Rule(topic, lambda p: p == one)
        low = _java_int(groups[2]) if groups[2] is not None else 0
        high = _java_int(groups[3]) if groups[3] is not None else INT_MAX
    except ValueError as e:
        raise TerseError(f'For input string: "{e}"') from None
    return Rule(topic, lambda p: low <= p < high)


def parse_rules(args: argparse.Namespace) -> list[Rule]:
    """The filters of --topic-partitions, or of --topic and --partitions."""
    if args.topic_partitions is not None:
        if args.topic is not None or args.partitions is not None:
            raise TerseError("--topic-partitions cannot be used with --topic or --partitions")
        return [parse_rule(spec) for spec in java_split(args.topic_partitions)]
    ids: set[int] = set()
    if args.partitions:
        try:
            ids = {_java_int(p) for p in java_split(args.partitions)}
        except ValueError:
            raise TerseError(
                "--partitions expects a comma separated list of numeric partition ids, but received: "
                + args.partitions
            ) from None
    return [
        Rule(_include_list(args.topic if args.topic is not None else ".*"), lambda p: not ids or p in ids)
    ]


def _parser() -> UsageParser:
    p = UsageParser(prog="samsa get-offsets", description=USAGE_TEXT)
    p.add_argument(
        "--bootstrap-server",
        metavar="HOST1:PORT1,...,HOST3:PORT3",
        help="REQUIRED. The server(s) to connect to in the form HOST1:PORT1,HOST2:PORT2.",
    )
    p.add_argument(
        "--topic-partitions",
        metavar="topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3",
        help="Comma separated list of topic-partition patterns to get the offsets for, with the format of "
        f"'{TOPIC_PARTITION_PATTERN}'. The first group is an optional regex for the topic name, if omitted, "
        "it matches any topic name. The section after ':' describes a 'partition' pattern, which can be: a "
        "number, a range in the format of 'NUMBER-NUMBER' (lower inclusive, upper exclusive), an inclusive "
        "lower bound in the format of 'NUMBER-', an exclusive upper bound in the format of '-NUMBER' or may "
        "be omitted to accept all partitions.".replace("%", "%%"),
    )
    p.add_argument(
        "--topic",
        metavar="topic",
        help="The topic to get the offsets for. It also accepts a regular expression. If not present, all "
        "authorized topics are queried. Cannot be used if --topic-partitions is present.",
    )
    p.add_argument(
        "--partitions",
        metavar="partition ids",
        help="Comma separated list of partition ids to get the offsets for. If not present, all partitions "
        "of the authorized topics are queried. Cannot be used if --topic-partitions is present.",
    )
    p.add_argument(
        "--time",
        default="latest",
        metavar="<timestamp>",
        help="timestamp of the offsets before that. [Note: No offset is returned, if the timestamp greater "
        f"than recently committed record timestamp is given.] {TIME_HELP} (default: latest)",
    )
    command_config.add_argument(p, help="Property file containing configs to be passed to Admin Client.")
    p.add_argument(
        "--exclude-internal-topics",
        action="store_true",
        help="By default, internal topics are included. If specified, internal topics are excluded.",
    )
    return p


async def partitions_matching(
    admin: AdminClient, rules: list[Rule], exclude_internal: bool
) -> list[TopicPartition]:
    """GetOffsetShell.listPartitionInfos: every partition of the topics (internal ones unless excluded)
    that some rule allows."""
    metadata = await admin.metadata(None)
    found = []
    for topic in metadata.topics:
        if topic.error_code != ErrorCode.NONE or (exclude_internal and topic.is_internal):
            continue
        if not any(rule.topic_allowed(topic.name) for rule in rules):
            continue
        for p in topic.partitions:
            if any(rule.partition_allowed(topic.name, p.partition_index) for rule in rules):
                found.append((topic.name, p.partition_index))
    return found


def list_offsets_request(
    partitions: list[TopicPartition], timestamp: int, timeout_ms: int
) -> ListOffsetsRequest:
    topics: dict[str, list[ListOffsetsRequest.ListOffsetsPartition]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(
            ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)
        )
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=READ_UNCOMMITTED,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()],
        timeout_ms=timeout_ms,
    )


def list_offsets_results(response: Any) -> list[tuple[TopicPartition, int, int]]:
    return [
        ((t.name, p.partition_index), p.error_code, p.offset) for t in response.topics for p in t.partitions
    ]


async def fetch_offsets(
    bootstrap: str,
    rules: list[Rule],
    timestamp: int,
    *,
    exclude_internal: bool = False,
    security: ClientSecurity | None = None,
    timeout_ms: int = DEFAULT_API_TIMEOUT_MS,
) -> dict[TopicPartition, int | Failure]:
    """The offset (or the failure) of each partition chosen; -1 where there is none."""
    async with AdminClient(
        bootstrap, client_id=CLIENT_ID, timeout=timeout_ms / 1000, security=security
    ) as admin:
        partitions = await partitions_matching(admin, rules, exclude_internal)
        if not partitions:
            raise TerseError("Could not match any topic-partitions with the specified filters")
        low, version = MIN_VERSION.get(timestamp, 1), admin.version(ApiKey.LIST_OFFSETS)
        if version < low:
            broker = admin.versions[ApiKey.LIST_OFFSETS]
            failure = Failure(
                ErrorCode.UNSUPPORTED_VERSION,
                f"The node does not support LIST_OFFSETS with version in range [{low},"
                f"{api(ApiKey.LIST_OFFSETS).valid_versions.high}]. The "
                f"supported range is [{broker[0]},{broker[1]}].",
            )
            return dict.fromkeys(partitions, failure)
        return await list_offsets(admin, partitions, timestamp, timeout_ms)


async def list_offsets(
    admin: AdminClient,
    partitions: list[TopicPartition],
    timestamp: int,
    timeout_ms: int = DEFAULT_API_TIMEOUT_MS,
) -> dict[TopicPartition, int | Failure]:
    """ListOffsets at ``timestamp`` (or a special one: latest -1, earliest -2, ...) for each partition, at
    its leader, with the Admin client's retries: each partition's offset or its failure."""
    return await send_to_leaders(
        admin,
        ApiKey.LIST_OFFSETS,
        partitions,
        lambda tps: list_offsets_request(tps, timestamp, timeout_ms),
        list_offsets_results,
        timeout_ms=timeout_ms,
        call="listOffsets",
    )


def run(args: argparse.Namespace) -> int:
    rules = parse_rules(args)
    timestamp = parse_offset_spec(args.time)
    props = command_config.read_command_config(args.command_config)
    security = command_config.security_from(props, str(args.command_config))
    results = asyncio.run(
        fetch_offsets(
            args.bootstrap_server,
            rules,
            timestamp,
            exclude_internal=args.exclude_internal_topics,
            security=security,
            timeout_ms=api_timeout_ms(props),
        )
    )
    for tp in sorted(results, key=tp_name):
        result = results[tp]
        if isinstance(result, Failure):
            print(
                f"Skip getting offsets for topic-partition {tp_name(tp)} due to error: {result}",
                file=sys.stderr,
            )
        elif result != UNKNOWN_OFFSET:
            print(f"{tp[0]}:{tp[1]}:{result}")
    return 0


def main(argv: list[str]) -> int:
    parser = _parser()
    if not argv:
        print(USAGE_TEXT, file=sys.stderr)
        parser.print_help(sys.stderr)
        return 1
    try:
        try:
            args = parser.parse_args(argv)
        except UsageError as e:
            raise TerseError(str(e)) from None
        if args.bootstrap_server is None:
            raise UsageError('Missing required argument "[bootstrap-server]"')
        try:
            parse_bootstrap(args.bootstrap_server)
        except AdminError as e:
            raise UsageError(str(e)) from None
        return run(args)
    except UsageError as e:
        print(e, file=sys.stderr)
        parser.print_help(sys.stderr)
        return 1
    except (TerseError, CommandLineError, AdminError) as e:
        print(f"Error occurred: {e}", file=sys.stderr)
        return 1
