"""The command line of ``samsa transactions``: kafka-transactions.sh's subcommands and their options, and
the checks its commands make before they contact the cluster (with Kafka's messages)."""

from __future__ import annotations

import argparse
from typing import NoReturn

from tools import command_config
from tools.usage import UsageError, UsageParser

COMMANDS = ("list", "describe", "describe-producers", "abort", "find-hanging")
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15
SHORT_MIN, SHORT_MAX = -(2**15), 2**15 - 1


class ParseError(UsageError):
    """A command line argparse refused, with the (sub)parser whose usage goes with the message."""

    def __init__(self, message: str, parser: argparse.ArgumentParser) -> None:
        super().__init__(message)
        self.parser = parser


class CheckError(Exception):
    """A combination of options a command refuses before it starts: the message alone on stderr, exit 1
    (kafka-transactions.sh's printErrorAndExit)."""


class _Parser(UsageParser):
    def error(self, message: str) -> NoReturn:
        raise ParseError(message, self)


def _short(text: str) -> int:
    """A Java short, as argparse4j's Short type reads one."""
    value = int(text)
    if not SHORT_MIN <= value <= SHORT_MAX:
        raise ValueError(text)
    return value


_short.__name__ = "short"  # argparse names the type in its message: "invalid short value"


def _bootstrap(p: argparse.ArgumentParser, *, top: bool) -> None:
    # kafka-transactions.sh takes --bootstrap-server before the command only; Samsa also takes it after
    # (a subcommand's default must not overwrite the value given before it, hence SUPPRESS).
    p.add_argument(
        "--bootstrap-server",
        metavar="host:port",
        default=None if top else argparse.SUPPRESS,
        help="hostname and port for the broker to connect to, in the form `host:port` (multiple "
        "comma-separated entries can be given). REQUIRED.",
    )


def parser() -> UsageParser:
    p = _Parser(
        prog="samsa transactions",
        description="Analyze the transactional state of producers in the cluster: detect and recover from "
        "hanging transactions.",
    )
    _bootstrap(p, top=True)
    # Before the command only, as kafka-transactions.sh takes it.
    command_config.add_argument(p, help="Property file containing configs to be passed to admin client")
    commands = p.add_subparsers(dest="command", title="commands", metavar="COMMAND", required=True)

    listing = commands.add_parser("list", help="list transactions")
    _bootstrap(listing, top=False)
    listing.add_argument(
        "--duration-filter",
        type=int,
        metavar="MS",
        help="only the transactions running for longer than this many milliseconds (< 0: all of them)",
    )

    describe = commands.add_parser(
        "describe",
        help="describe the state of an active transactional-id",
        description="Describe the state of an active transactional-id.",
    )
    _bootstrap(describe, top=False)
    describe.add_argument("--transactional-id", required=True, help="transactional id")

    producers = commands.add_parser(
        "describe-producers", help="describe the states of active producers for a topic partition"
    )
    _bootstrap(producers, top=False)
    producers.add_argument(
        "--broker-id",
        type=int,
        help="describe the producer state on this broker's replica (default: the partition's leader)",
    )
    producers.add_argument("--topic", required=True, help="topic name")
    producers.add_argument("--partition", type=int, required=True, help="partition number")

    abort = commands.add_parser(
        "abort", help="abort a hanging transaction (requires administrative privileges)"
    )
    _bootstrap(abort, top=False)
    abort.add_argument("--topic", required=True, help="topic name")
    abort.add_argument("--partition", type=int, required=True, help="partition number")
    newer = abort.add_argument_group(
        "Brokers on versions 3.0 and above",
        "For newer brokers (and Samsa), only the start offset of the transaction to be aborted is required",
    )
    newer.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
    older = abort.add_argument_group(
        "Brokers on versions older than 3.0", "For older brokers, you must provide all of these arguments"
    )
    older.add_argument("--producer-id", type=int, help="producer id")
    older.add_argument("--producer-epoch", type=_short, help="producer epoch")
    older.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")

    hanging = commands.add_parser("find-hanging", help="find hanging transactions")
    _bootstrap(hanging, top=False)
    hanging.add_argument("--broker-id", type=int, help="broker id to search for hanging transactions")
    hanging.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
        metavar="MINUTES",
        help="maximum transaction timeout in minutes to limit the scope of the search (15 minutes by "
        "default)",
    )
    hanging.add_argument(
        "--topic", help="topic name to limit search to (required if --partition is specified)"
    )
    hanging.add_argument("--partition", type=int, help="partition number")
    return p


def check_args(args: argparse.Namespace) -> None:
    """The checks kafka-transactions.sh makes before it sends anything."""
    if not args.bootstrap_server:
        raise UsageError("argument --bootstrap-server is required")
    if args.command == "abort":
        if args.start_offset is None and args.producer_id is None:
            raise CheckError(
                "The transaction to abort must be identified either with --start-offset (for brokers on 3.0 "
                "or above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older "
                "brokers)"
            )
        if args.start_offset is None:
            if args.producer_epoch is None:
                raise CheckError("Missing required argument --producer-epoch")
            if args.coordinator_epoch is None:
                raise CheckError("Missing required argument --coordinator-epoch")
    if args.command == "find-hanging":
        if args.topic is None and args.broker_id is None:
            raise CheckError(
                "The `find-hanging` command requires either --topic or --broker-id to limit the scope of "
                "the search"
            )
        if args.partition is not None and args.topic is None:
            raise CheckError("The --partition argument requires --topic to be provided")
