"""``samsa consumer-groups``: kafka-consumer-groups.sh for Samsa — list, describe and delete consumer
groups, and reset or delete their committed offsets.

Flags, output and messages are those of Kafka 3.x's ConsumerGroupCommand (``--bootstrap-server`` mode):
``--list [--state [STATES]]``; ``--describe`` of ``--group G`` (repeatable) or ``--all-groups`` with
``--offsets`` (the default), ``--members [--verbose]`` or ``--state``; ``--delete``; ``--reset-offsets``
with one scenario (``--to-earliest``, ``--to-latest``, ``--to-current``, ``--to-offset``, ``--shift-by``,
``--to-datetime``, ``--by-duration``, ``--from-file``), a scope (``--topic t[:p,p]`` repeatable, or
``--all-topics``), and ``--dry-run`` (the default: only print the plan), ``--execute`` or ``--export``;
``--delete-offsets --group G --topic t[:p,p]``.

Lag is the partition's log end offset (ListOffsets latest, read_uncommitted: the high watermark) minus
the committed offset, "-" where either is unknown. ``--execute`` commits with OffsetCommit at
generation -1 and no member id, as Kafka's Admin client does, and only for a group that is Empty or
Dead (unknown). Usage errors print the message and the usage on stderr and exit 1.

One difference: kafka-consumer-groups.sh exits 0 after printing ``Error: ...``; Samsa exits 1, so that a
script can tell. ``--command-config FILE`` gives the client's security settings (tools/command_config.py).

The modules: ``options`` (the command line and its checks), ``command`` (what every action shares: the
requests about groups and offsets), ``describe`` (--list, --describe), ``reset_offsets``, ``delete``
(--delete, --delete-offsets).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from tools import command_config
from tools.admin_client import AdminClient, AdminError
from tools.consumer_groups import options
from tools.consumer_groups.command import CommandError, GroupCommand, print_error
from tools.consumer_groups.delete import DeleteGroups, DeleteOffsets
from tools.consumer_groups.describe import DescribeGroups, ListGroups
from tools.consumer_groups.reset_offsets import ResetOffsets
from tools.usage import UsageError

_COMMANDS: dict[str, type[GroupCommand]] = {
    "list": ListGroups,
    "describe": DescribeGroups,
    "delete": DeleteGroups,
    "reset_offsets": ResetOffsets,
    "delete_offsets": DeleteOffsets,
}


async def _run(args: argparse.Namespace) -> bool:
    """Runs the action; True if it reported an error."""
    action = next(a for a in options.ACTIONS if getattr(args, a))
    async with AdminClient(
        args.bootstrap_server,
        client_id="samsa-consumer-groups",
        timeout=args.timeout / 1000,
        security=command_config.client_security(args.command_config),
    ) as admin:
        command = _COMMANDS[action](admin, args)
        await command.run()
        return command.failed


def main(argv: list[str]) -> int:
    parser = options.parser()
    if not argv:
        parser.print_help(sys.stderr)
        print(
            "This tool helps to list all consumer groups, describe a consumer group, delete consumer group "
            "info, or reset consumer group offsets.",
            file=sys.stderr,
        )
        return 1
    try:
        args = parser.parse_args(argv)
        options.check_args(args)
        failed = asyncio.run(_run(args))
    except UsageError as e:
        print(e, file=sys.stderr)
        parser.print_usage(sys.stderr)
        return 1
    except (CommandError, AdminError) as e:
        print_error(f"Executing consumer group command failed due to {e}")
        return 1
    return 1 if failed else 0
