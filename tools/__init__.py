"""The ``samsa`` command: one entry point whose subcommands are Samsa's processes and tools.

The tools (``samsa topics``, ``samsa up``, ...) live in this package: Kafka clients, as Kafka's
``kafka.tools``. The processes' subcommands live with their packages and are found by name, so that this
entry point makes ``tools`` depend on neither: ``samsa broker`` runs ``broker.main:main`` and ``samsa
controller`` runs ``controller.main:main``.
"""

from __future__ import annotations

import importlib
import sys

# subcommand -> (module:function taking argv and returning an exit code, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "broker": ("broker.main:main", "run a broker"),
    "controller": ("controller.main:main", "run a controller (one is active, the others stand by)"),
    "up": ("tools.up:main", "start a local cluster: ZooKeeper, controllers and brokers"),
    "topics": ("tools.topics:main", "create, describe, alter, delete and list topics"),
    "configs": (
        "tools.configs:main",
        "describe and alter configs of topics, brokers, users, clients (quotas, SCRAM credentials)",
    ),
    "acls": ("tools.acls:main", "add, remove and list ACLs"),
    "consumer-groups": ("tools.consumer_groups:main", "list, describe and delete groups; reset offsets"),
    "transactions": (
        "tools.transactions:main",
        "list and describe transactions and producers; find and abort hanging transactions",
    ),
    "console-producer": ("tools.console:producer_main", "produce lines from stdin"),
    "console-consumer": ("tools.console:consumer_main", "print records to stdout"),
    "reassign-partitions": ("tools.reassign_partitions:main", "move partitions between brokers"),
    "leader-election": ("tools.leader_election:main", "elect preferred (or unclean) partition leaders"),
    "replica-verification": (
        "tools.replica_verification:main",
        "check that every replica holds the same data up to the high watermark",
    ),
    "dump-log": ("tools.dump_log:main", "print log segments, indexes and snapshots (a stopped broker's too)"),
    "log-dirs": ("tools.log_dirs:main", "describe the brokers' log dirs and the replicas in them"),
    "get-offsets": ("tools.get_offsets:main", "print partitions' offsets (earliest, latest, by timestamp)"),
    "delete-records": ("tools.delete_records:main", "delete records up to the offsets given in a JSON file"),
    "broker-api-versions": ("tools.broker_api_versions:main", "print the API versions every broker supports"),
    "producer-perf-test": ("tools.producer_perf_test:main", "produce as fast as asked and print throughput"),
    "consumer-perf-test": ("tools.consumer_perf_test:main", "consume and print throughput"),
    "console": ("console.cli:main", "serve the web console: brokers, topics, messages, groups, in a browser"),
    "pipeline": ("pipeline.cli:main", "the Spark data pipeline: generate activity, run the page-stats job"),
}


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
