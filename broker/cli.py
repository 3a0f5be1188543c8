"""The ``samsa`` command: one entry point whose subcommands are Samsa's processes and tools."""

from __future__ import annotations

import argparse
import logging
import os
import sys

import uvloop

from broker.config import ConfigError, KafkaConfig

LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT, stream=sys.stderr)


def _broker(args: argparse.Namespace) -> int:
    from broker.server import KafkaServer

    try:
        config = KafkaConfig.load(args.config, args.override)
    except (ConfigError, OSError) as e:
        print(f"samsa broker: configuration error: {e}", file=sys.stderr)
        return 1
    server = KafkaServer(config)
    try:
        uvloop.run(server.run())
    except (ValueError, OSError, RuntimeError) as e:
        logging.getLogger("broker").error("broker failed to start: %s", e)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="samsa", description="Samsa, a Kafka-compatible broker")
    parser.add_argument(
        "--log-level",
        default=os.environ.get("SAMSA_LOG_LEVEL", "INFO"),
        help="DEBUG, INFO, WARNING or ERROR (default INFO, or $SAMSA_LOG_LEVEL)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    broker = commands.add_parser("broker", help="run a broker")
    broker.add_argument("--config", help="a Kafka-style server.properties file")
    broker.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="set a property (repeatable)"
    )
    broker.set_defaults(run=_broker)
    args = parser.parse_args(argv)
    _setup_logging(args.log_level)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
