"""The command line of ``samsa consumer-groups``: kafka-consumer-groups.sh's options, and
ConsumerGroupCommandOptions.checkArgs with Kafka's messages for a combination it refuses."""

from __future__ import annotations

import argparse
import sys

from tools import command_config
from tools.usage import UsageError, UsageParser

STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
SCENARIOS = (
    "to_offset",
    "shift_by",
    "to_datetime",
    "by_duration",
    "to_earliest",
    "to_latest",
    "to_current",
    "from_file",
)
DESCRIBE_VIEWS = ("members", "offsets", "state")


def option_name(name: str) -> str:
    """An option as joptsimple prints it: ``[reset-offsets]``."""
    return f"[{name.replace('_', '-')}]"


def parser() -> UsageParser:
    p = UsageParser(
        prog="samsa consumer-groups",
        description="List all consumer groups, describe a consumer group, delete consumer group info, "
        "or reset consumer group offsets.",
    )
    p.add_argument("--bootstrap-server", metavar="SERVER", help="REQUIRED: The server(s) to connect to.")
    command_config.add_argument(
        p, help="Property file containing configs to be passed to Admin Client and Consumer."
    )
    p.add_argument("--group", action="append", metavar="GROUP", help="The consumer group we wish to act on.")
    p.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC",
        help="The topic whose consumer group offsets are reset or deleted; partitions may be given as "
        "topic1:0,1,2. Repeatable.",
    )
    p.add_argument(
        "--all-topics",
        action="store_true",
        help="Consider all topics assigned to a group in --reset-offsets.",
    )
    p.add_argument("--list", action="store_true", help="List all consumer groups.")
    p.add_argument(
        "--describe",
        action="store_true",
        help="Describe consumer group and list offset lag (number of messages not yet processed).",
    )
    p.add_argument("--all-groups", action="store_true", help="Apply to all consumer groups.")
    p.add_argument("--delete", action="store_true", help="Delete the groups (--group g1 --group g2).")
    p.add_argument(
        "--timeout",
        type=int,
        default=5000,
        metavar="MS",
        help="The time to wait for the cluster's answers, e.g. for a group to stabilize (default 5000 ms).",
    )
    p.add_argument(
        "--reset-offsets",
        action="store_true",
        help="Reset offsets of consumer group; the group must be inactive. --dry-run (the default) shows "
        "the plan, --execute applies it, --export prints it as CSV.",
    )
    p.add_argument(
        "--delete-offsets",
        action="store_true",
        help="Delete offsets of consumer group. Supports one consumer group at the time, and multiple "
        "topics.",
    )
    p.add_argument("--dry-run", action="store_true", help="Only show results without executing changes.")
    p.add_argument("--execute", action="store_true", help="Execute operation (reset-offsets).")
    p.add_argument("--export", action="store_true", help="Export the reset plan as CSV.")
    p.add_argument("--to-offset", type=int, metavar="OFFSET", help="Reset offsets to a specific offset.")
    p.add_argument("--from-file", metavar="PATH", help="Reset offsets to values defined in CSV file.")
    p.add_argument(
        "--to-datetime",
        metavar="DATETIME",
        help="Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'",
    )
    p.add_argument(
        "--by-duration",
        metavar="DURATION",
        help="Reset offsets to offset by duration from current timestamp. Format: 'PnDTnHnMnS'",
    )
    p.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    p.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    p.add_argument("--to-current", action="store_true", help="Reset offsets to current offset.")
    p.add_argument(
        "--shift-by",
        type=int,
        metavar="N",
        help="Reset offsets shifting current offset by 'n', where 'n' can be positive or negative.",
    )
    p.add_argument("--members", action="store_true", help="With --describe: describe members of the group.")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="With --describe --members: also show each member's assignment.",
    )
    p.add_argument(
        "--offsets",
        action="store_true",
        help="With --describe: list the group's partitions with their offset lag (the default).",
    )
    p.add_argument(
        "--state",
        nargs="?",
        const="",
        metavar="STATES",
        help="With --describe: the state of the group. With --list: the state of every group, or only the "
        "groups in these states (comma-separated, e.g. stable,empty).",
    )
    return p


def check_args(args: argparse.Namespace) -> None:
    """ConsumerGroupCommandOptions.checkArgs, with its messages."""
    if not args.bootstrap_server:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError(
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
            "--delete-offsets"
        )
    action = chosen[0]
    for option in ("members", "verbose", "offsets", "state"):
        allowed = ("describe", "list") if option == "state" else ("describe",)
        if _given(args, option) and action not in allowed:
            raise UsageError(
                f"Option(s) {option_name(option)} are unavailable given other options on the command line"
            )
    scope = f"{option_name('group')}, {option_name('all_groups')}"
    if action == "describe":
        if not args.group and not args.all_groups:
            raise UsageError(f"Option {option_name('describe')} takes one of these options: {scope}")
        if sum(_given(args, v) for v in DESCRIBE_VIEWS) > 1:
            views = ", ".join(map(option_name, DESCRIBE_VIEWS))
            raise UsageError(f"Option {option_name('describe')} takes at most one of these options: {views}")
        if args.state:
            raise UsageError(
                f"Option {option_name('describe')} does not take a value for {option_name('state')}"
            )
    if action == "delete":
        if not args.group and not args.all_groups:
            raise UsageError(f"Option {option_name('delete')} takes one of these options: {scope}")
        if args.topic:
            raise UsageError(
                "The consumer does not support topic-specific offset deletion from a consumer group."
            )
    if action == "delete_offsets" and (not args.group or not args.topic):
        raise UsageError(
            f"Option {option_name('delete_offsets')} takes the following options: "
            f"{option_name('group')}, {option_name('topic')}"
        )
    if action == "reset_offsets":
        if args.dry_run and args.execute:
            raise UsageError(
                f"Option {option_name('reset_offsets')} only accepts one of {option_name('execute')} and "
                f"{option_name('dry_run')}"
            )
        if not args.dry_run and not args.execute:
            # Kafka's words, the missing space after "missing." included.
            print(
                "WARN: No action will be performed as the --execute option is missing.In a future major "
                "release, the default behavior of this command will be to prompt the user before executing "
                "the reset rather than doing a dry run. You should add the --dry-run option explicitly if "
                "you are scripting this command and want to keep the current default behavior without "
                "prompting.",
                file=sys.stderr,
            )
        if not args.group and not args.all_groups:
            raise UsageError(f"Option {option_name('reset_offsets')} takes one of these options: {scope}")
        given = [s for s in SCENARIOS if _given(args, s)]
        if len(given) > 1:
            raise UsageError(
                f'Option "{option_name(given[0])}" can\'t be used with option "{option_name(given[1])}"'
            )
    if args.group and args.all_groups:
        raise UsageError(
            f'Option "{option_name("group")}" can\'t be used with option "{option_name("all_groups")}"'
        )
    if args.group and action == "list":
        raise UsageError(
            f'Option "{option_name("group")}" can\'t be used with option "{option_name("list")}"'
        )
    if args.topic and action in ("list", "describe"):
        raise UsageError(
            f'Option "{option_name("topic")}" can\'t be used with option "{option_name(action)}"'
        )
    if action == "list" and args.state:
        parse_states(args.state)


def _given(args: argparse.Namespace, option: str) -> bool:
    value = getattr(args, option)
    return value is not None and value is not False


def parse_states(text: str) -> list[str]:
    """ConsumerGroupState.parse over a comma-separated list, case-insensitively."""
    by_name = {s.lower(): s for s in STATES}
    states = [by_name.get(s.strip().lower()) for s in text.split(",")]
    if None in states:
        raise UsageError(f"Invalid state list '{text}'. Valid states are: {', '.join(STATES)}")
    return sorted(set(states), key=STATES.index)  # type: ignore[arg-type]
