"""``samsa controller --config FILE [--override k=v ...] [--zookeeper host:port[/chroot]] [--id N]``: runs a
controller until SIGTERM or SIGINT. Any number may run; one is active, the others stand by.

The shutdown is bounded (``ControllerServer.shutdown``); a second SIGTERM or SIGINT exits at once. Exit
codes: 0 after a shutdown that completed; 1 for a configuration error, a failure, or a shutdown cut
short by a second signal (Kafka's halt code).
"""

from __future__ import annotations

import argparse
import logging
import sys

import uvloop
from kazoo.handlers.threading import KazooTimeoutError

from controller.config import ControllerConfig
from server_common.config import ConfigError
from server_common.log import setup_logging


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="samsa controller", description="Run a Samsa controller (one is active, the others stand by)."
    )
    parser.add_argument("--config", help="a Kafka-style properties file")
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="set a property (repeatable)"
    )
    parser.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]", help="sets zookeeper.connect")
    parser.add_argument("--id", type=int, metavar="N", help="sets controller.id")
    parser.add_argument(
        "--log-level", help="DEBUG, INFO, WARNING or ERROR (default INFO, or $SAMSA_LOG_LEVEL)"
    )
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    overrides = list(args.override)
    if args.zookeeper is not None:
        overrides.append(f"zookeeper.connect={args.zookeeper}")
    if args.id is not None:
        overrides.append(f"controller.id={args.id}")
    try:
        config = ControllerConfig.load(args.config, overrides)
    except (ConfigError, OSError) as e:
        print(f"samsa controller: configuration error: {e}", file=sys.stderr)
        return 1
    from controller.server import ControllerServer

    try:
        uvloop.run(ControllerServer(config).run())
    except (OSError, KazooTimeoutError) as e:
        logging.getLogger("controller").error("controller failed: %s", e)
        return 1
    return 0
