"""``samsa broker --config server.properties [--override key=value ...]``: runs a broker until SIGTERM.

SIGTERM or SIGINT starts a shutdown bounded by the configured timeouts (``KafkaServer.shutdown``); a
second one exits at once. Exit codes: 0 after a shutdown that completed; 1 for a configuration error, a
failed start, or a shutdown cut short by a second signal (Kafka's halt code).
"""

from __future__ import annotations

import argparse
import logging
import sys

import uvloop

from broker.config import KafkaConfig
from server_common.config import ConfigError
from server_common.log import setup_logging


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="samsa broker", description="Run a Samsa broker.")
    parser.add_argument("--config", help="a Kafka-style server.properties file")
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="set a property (repeatable)"
    )
    parser.add_argument(
        "--log-level", help="DEBUG, INFO, WARNING or ERROR (default INFO, or $SAMSA_LOG_LEVEL)"
    )
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
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
