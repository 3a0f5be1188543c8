"""``samsa transactions``: kafka-transactions.sh for Samsa — list and describe transactions, describe a
partition's producers, find hanging transactions and abort them.

The subcommands, their options, columns and messages are those of Kafka 3.x's TransactionsCommand:

- ``list [--duration-filter MS]``: ListTransactions to every broker; TransactionalId, Coordinator,
  ProducerId, TransactionState.
- ``describe --transactional-id ID``: FindCoordinator (key type TRANSACTION), then DescribeTransactions.
- ``describe-producers --topic T --partition P [--broker-id B]``: DescribeProducers to the leader, or to
  broker B's replica.
- ``find-hanging (--broker-id B | --topic T [--partition P]) [--max-transaction-timeout MIN]``: open
  transactions older than the maximum transaction timeout (15 minutes by default) that their coordinator
  does not know of, or whose transaction no longer includes the partition: no marker will close them,
  and the partition's last stable offset stays behind them (read_committed consumers stop there).
- ``abort --topic T --partition P (--start-offset N | --producer-id --producer-epoch
  --coordinator-epoch)``: WriteTxnMarkers with an ABORT marker to the partition's leader. With
  ``--start-offset`` the producer is the one whose open transaction starts there (DescribeProducers).

``--bootstrap-server`` is required; Samsa takes it before or after the subcommand (Kafka only before).
Usage errors print the message and the usage on stderr and exit 1; a failed command prints its error on
stderr and exits 1. ``--command-config FILE`` (before the subcommand, as Kafka's) gives the client's
security settings (tools/command_config.py).

The modules: ``options`` (the command line), ``admin`` (the requests, with the Admin client's routing and
retries), ``commands`` (the five commands and their tables).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import TextIO

from tools import command_config
from tools.admin_client import AdminClient, AdminError
from tools.transactions import options
from tools.transactions.admin import TransactionsAdmin
from tools.transactions.commands import COMMANDS, Clock, CommandError
from tools.usage import UsageError

CLIENT_TIMEOUT_S = 30.0


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


async def _run(args: argparse.Namespace, out: TextIO, now: Clock) -> None:
    async with AdminClient(
        args.bootstrap_server,
        client_id="samsa-transactions",
        timeout=CLIENT_TIMEOUT_S,
        security=command_config.client_security(args.command_config),
    ) as admin:
        await COMMANDS[args.command](TransactionsAdmin(admin), args, out, now)


def main(argv: list[str]) -> int:
    parser = options.parser()
    if not argv:
        parser.print_help(sys.stderr)
        return 1
    try:
        args = parser.parse_args(argv)
        options.check_args(args)
        asyncio.run(_run(args, sys.stdout, wall_clock_ms))
    except options.ParseError as e:
        print(e, file=sys.stderr)
        e.parser.print_usage(sys.stderr)
        return 1
    except UsageError as e:
        print(e, file=sys.stderr)
        parser.print_usage(sys.stderr)
        return 1
    except (options.CheckError, CommandError, AdminError) as e:
        print(e, file=sys.stderr)
        return 1
    return 0
