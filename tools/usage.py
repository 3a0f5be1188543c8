"""Command-line mistakes, as Kafka's tools report them (CommandLineUtils): the message, then the usage,
on stderr, and exit code 1. Each tool's ``main`` catches ``UsageError`` and prints it so."""

from __future__ import annotations

import argparse
from typing import NoReturn


class UsageError(Exception):
    """A command line the tool cannot take: bad or missing options, or options that do not go together."""


class UsageParser(argparse.ArgumentParser):
    """argparse, raising ``UsageError`` where it would print and exit with 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)
