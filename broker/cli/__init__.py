"""The ``samsa`` command: one entry point whose subcommands are Samsa's processes and tools.

Each subcommand lives with the package it belongs to and is found by name, so that this entry point
does not make ``broker`` depend on the others: ``samsa controller`` runs ``controller.main:main``.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys

LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"

# subcommand -> (module:function taking argv and returning an exit code, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "broker": ("broker.cli.broker_command:main", "run a broker"),
    "controller": ("controller.main:main", "run a controller (one is active, the others stand by)"),
    "up": ("broker.cli.up:main", "start a local cluster: ZooKeeper, controllers and brokers"),
    "topics": ("broker.cli.topics:main", "create, describe, alter, delete and list topics"),
    "consumer-groups": ("broker.cli.consumer_groups:main", "list, describe and delete groups; reset offsets"),
    "console-producer": ("broker.cli.console:producer_main", "produce lines from stdin"),
    "console-consumer": ("broker.cli.console:consumer_main", "print records to stdout"),
    "reassign-partitions": ("broker.cli.reassign_partitions:main", "move partitions between brokers"),
    "leader-election": ("broker.cli.leader_election:main", "elect preferred (or unclean) partition leaders"),
    "replica-verification": (
        "broker.cli.replica_verification:main",
        "check that every replica holds the same data up to the high watermark",
    ),
    "pipeline": ("pipeline.cli:main", "the Spark data pipeline: generate activity, run the page-stats job"),
}


def setup_logging(level: str | None = None) -> None:
    level = (level or os.environ.get("SAMSA_LOG_LEVEL") or "INFO").upper()
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
    # kazoo narrates every connection at INFO; its session changes are logged by broker.zk.client.
    logging.getLogger("kazoo").setLevel(max(logging.WARNING, logging.getLogger().level))


def _usage() -> str:
    lines = ["usage: samsa <command> [options]", "", "commands:"]
    lines += [f"  {name:<18} {text}" for name, (_, text) in COMMANDS.items()]
    lines += [
        "",
        "`samsa <command> --help` describes a command's options. SAMSA_LOG_LEVEL sets the log level.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"samsa: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, function = COMMANDS[name][0].split(":")
    return getattr(importlib.import_module(module_name), function)(rest)


if __name__ == "__main__":
    sys.exit(main())
