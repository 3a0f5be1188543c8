"""``samsa delete-records``: Kafka 3.9's kafka-delete-records.sh (DeleteRecordsCommand) for Samsa.

``--bootstrap-server S --offset-json-file F`` where F is::

    {"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}

deletes every record below each offset (``-1``: below the high watermark) by sending DeleteRecords to
each partition's leader, as Kafka's Admin ``deleteRecords`` does (retried while a leader is missing or
moving, up to ``default.api.timeout.ms``, 60 s, also the request's timeout; ``tools/partition_leaders.py``),
and prints::

    Executing records delete operation
    Records delete operation completed:
    partition: foo-1	low_watermark: 1
    partition: foo-2	error: org.apache.kafka.common.errors.OffsetOutOfRangeException: The requested ...

(the partitions sorted by topic and partition; Kafka prints them in its HashMap's order). The exit code is
0 even when a partition failed, as Kafka's. A file that cannot be read or parsed, or that names a partition
twice (``Offset json file contains duplicate topic partitions: foo-1``), prints the message on stderr and
exits 1; so does a missing option (with the usage). ``--command-config FILE``: the client's security
settings (tools/command_config.py) and ``default.api.timeout.ms``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import defaultdict
from typing import Any

from network.client_security import ClientSecurity
from protocol.api import ApiKey
from protocol.messages import DeleteRecordsRequest
from tools import command_config
from tools.admin_client import AdminClient, AdminError
from tools.partition_leaders import (
    DEFAULT_API_TIMEOUT_MS,
    Failure,
    TopicPartition,
    api_timeout_ms,
    send_to_leaders,
    tp_name,
)
from tools.usage import UsageError, UsageParser

EARLIEST_VERSION = 1
OFFSET_JSON_HELP = (
    "REQUIRED: The JSON file with offset per partition. The format to use is:\n"
    '{"partitions":\n  [{"topic": "foo", "partition": 1, "offset": 1}],\n "version":1\n}'
)


class DeleteRecordsError(Exception):
    """Kafka's AdminOperationException / AdminCommandFailedException / JsonMappingException: the message
    on stderr, exit 1."""


def _json_text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _is_int(value: Any, bits: int) -> bool:
    return type(value) is int and -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)


def _field(obj: dict[str, Any], name: str, kind: str) -> Any:
    """JsonObject.apply(name).to(kind): the field, of Kafka's type ``kind`` (String, Integer, Long)."""
    if name not in obj:
        raise DeleteRecordsError(f"No such field exists: `{name}`")
    value = obj[name]
    ok = {
        "String": isinstance(value, str),
        "Integer": _is_int(value, 32),
        "Long": _is_int(value, 64),
    }[kind]
    if not ok:
        raise DeleteRecordsError(f"Expected `{kind}` value, received {_json_text(value)}")
    return value


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DeleteRecordsError(f"Expected JSON object, received {_json_text(value)}")
    return value


def parse_offset_json(text: str) -> dict[TopicPartition, int]:
    """DeleteRecordsCommand.parseOffsetJsonStringWithoutDedup and its duplicate check: the offset of
    each partition, in the file's order."""
    try:
        body = json.loads(text)
    except ValueError:
        raise DeleteRecordsError("The input string is not a valid JSON") from None
    body = _object(body)
    version = _field(body, "version", "Integer") if "version" in body else EARLIEST_VERSION
    if version != 1:
        raise DeleteRecordsError(f"Not supported version field value {version}")
    if "partitions" not in body:
        raise DeleteRecordsError("Missing partitions field")
    partitions = body["partitions"]
    if not isinstance(partitions, list):
        raise DeleteRecordsError(f"Expected JSON array, received {_json_text(partitions)}")
    offsets: dict[TopicPartition, list[int]] = defaultdict(list)
    for item in partitions:
        entry = _object(item)
        topic = _field(entry, "topic", "String")
        partition = _field(entry, "partition", "Integer")
        offsets[(topic, partition)].append(_field(entry, "offset", "Long"))
    duplicates = [tp for tp, found in offsets.items() if len(found) > 1]
    if duplicates:
        raise DeleteRecordsError(
            "Offset json file contains duplicate topic partitions: "
            + ",".join(tp_name(tp) for tp in duplicates)
        )
    return {tp: found[0] for tp, found in offsets.items()}


def _request(
    offsets: dict[TopicPartition, int], tps: list[TopicPartition], timeout_ms: int
) -> DeleteRecordsRequest:
    topics: dict[str, list[DeleteRecordsRequest.DeleteRecordsPartition]] = {}
    for topic, partition in tps:
        topics.setdefault(topic, []).append(
            DeleteRecordsRequest.DeleteRecordsPartition(
                partition_index=partition, offset=offsets[(topic, partition)]
            )
        )
    return DeleteRecordsRequest(
        topics=[DeleteRecordsRequest.DeleteRecordsTopic(name=t, partitions=ps) for t, ps in topics.items()],
        timeout_ms=timeout_ms,
    )


def _results(response: Any) -> list[tuple[TopicPartition, int, int]]:
    return [
        ((t.name, p.partition_index), p.error_code, p.low_watermark)
        for t in response.topics
        for p in t.partitions
    ]


async def delete_records(
    bootstrap: str,
    offsets: dict[TopicPartition, int],
    *,
    security: ClientSecurity | None = None,
    timeout_ms: int = DEFAULT_API_TIMEOUT_MS,
) -> dict[TopicPartition, int | Failure]:
    """The new low watermark (or the failure) of each partition."""
    print("Executing records delete operation", flush=True)
    if not offsets:
        results: dict[TopicPartition, Any] = {}
    else:
        async with AdminClient(
            bootstrap, client_id="adminclient-1", timeout=timeout_ms / 1000, security=security
        ) as admin:
            results = await send_to_leaders(
                admin,
                ApiKey.DELETE_RECORDS,
                offsets,
                lambda tps: _request(offsets, tps, timeout_ms),
                _results,
                timeout_ms=timeout_ms,
                call="deleteRecords",
            )
    print("Records delete operation completed:")
    for tp in sorted(results):
        result = results[tp]
        if isinstance(result, Failure):
            print(f"partition: {tp_name(tp)}\terror: {result}")
        else:
            print(f"partition: {tp_name(tp)}\tlow_watermark: {result}")
    return results


def _parser() -> UsageParser:
    p = UsageParser(
        prog="samsa delete-records",
        description="This tool helps to delete records of the given partitions down to the specified offset.",
    )
    p.add_argument(
        "--bootstrap-server",
        metavar="server(s) to use for bootstrapping",
        help="REQUIRED: The server to connect to.",
    )
    p.add_argument("--offset-json-file", metavar="Offset json file path", help=OFFSET_JSON_HELP)
    command_config.add_argument(p, help="A property file containing configs to be passed to Admin Client.")
    return p


def run(args: argparse.Namespace) -> int:
    try:
        with open(args.offset_json_file, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise DeleteRecordsError(f"{args.offset_json_file}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise DeleteRecordsError("The input string is not a valid JSON") from None
    props = command_config.read_command_config(args.command_config)
    security = command_config.security_from(props, str(args.command_config))
    timeout_ms = api_timeout_ms(props)
    offsets = parse_offset_json(text)
    asyncio.run(delete_records(args.bootstrap_server, offsets, security=security, timeout_ms=timeout_ms))
    return 0


def main(argv: list[str]) -> int:
    parser = _parser()
    if not argv:
        print(parser.description, file=sys.stderr)
        parser.print_help(sys.stderr)
        return 1
    try:
        args = parser.parse_args(argv)
        for name in ("bootstrap_server", "offset_json_file"):
            if getattr(args, name) is None:
                raise UsageError(f'Missing required argument "[{name.replace("_", "-")}]"')
        return run(args)
    except UsageError as e:
        print(e, file=sys.stderr)
        parser.print_help(sys.stderr)
        return 1
    except (DeleteRecordsError, AdminError) as e:
        print(e, file=sys.stderr)
        return 1
