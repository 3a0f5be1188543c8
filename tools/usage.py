"""Command-line mistakes, as Kafka's tools report them (CommandLineUtils): the message, then the usage,
on stderr, and exit code 1. Each tool's ``main`` catches ``UsageError`` and prints it so, or lets
``run_command`` do it (with ``CommandLineError``, a refusal printed without the usage)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NoReturn


class UsageError(Exception):
    """A command line the tool cannot take: bad or missing options, or options that do not go together."""


class CommandLineError(Exception):
    """Kafka's IllegalArgumentException / InvalidConfigurationException from the tool: the message alone
    on stderr."""


class UsageParser(argparse.ArgumentParser):
    """argparse, raising ``UsageError`` where it would print and exit with 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def run_command(
    parser: argparse.ArgumentParser,
    argv: Sequence[str],
    check: Callable[[argparse.Namespace], object],
    run: Callable[[argparse.Namespace], Coroutine[Any, Any, object]],
    *,
    full_help: bool = False,
    no_args_text: str | None = None,
) -> int:
    """A tool's command line as Kafka's tools take it: none at all prints the help (and
    ``no_args_text``) on stderr, exit 1; else it is parsed, ``check``ed and ``run``, exit 0. A
    ``UsageError`` prints its message and the usage (``full_help``: the whole help) on stderr, a
    ``CommandLineError`` its message alone, exit 1; other errors are the caller's to report."""
    if not argv:
        parser.print_help(sys.stderr)
        if no_args_text is not None:
            print(no_args_text, file=sys.stderr)
        return 1
    try:
        args = parser.parse_args(list(argv))
        check(args)
        asyncio.run(run(args))
    except UsageError as e:
        print(e, file=sys.stderr)
        (parser.print_help if full_help else parser.print_usage)(sys.stderr)
        return 1
    except CommandLineError as e:
        print(e, file=sys.stderr)
        return 1
    return 0
