"""``samsa console``: serves the web console for the cluster at ``--bootstrap-server`` until SIGINT or
SIGTERM, and prints ``console=http://HOST:PORT`` once it listens (``--port 0``: a free port)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

import uvloop
from aiohttp import web

from console.app import Console, build_app
from console.client import ConsoleClient
from console.cluster import SnapshotCache
from console.metrics import MetricsHistory
from tools import command_config
from tools.admin_client import AdminError, parse_bootstrap

log = logging.getLogger("console")
PASSWORD_ENV = "SAMSA_CONSOLE_PASSWORD"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="samsa console", description="The web console for a Kafka-compatible cluster."
    )
    p.add_argument("--bootstrap-server", required=True, help="the cluster: HOST:PORT[,HOST:PORT...]")
    p.add_argument(
        "--metrics",
        action="append",
        default=[],
        metavar="URL[,URL...]",
        help="the brokers' Prometheus endpoints (http://HOST:PORT/metrics), for the throughput charts",
    )
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: localhost only)")
    p.add_argument(
        "--port", type=int, default=8080, help="the port to listen on; 0 picks a free one (default 8080)"
    )
    p.add_argument("--user", help="ask browsers for this user name (HTTP basic auth) ...")
    p.add_argument("--password", help=f"... and this password (or the environment's {PASSWORD_ENV})")
    p.add_argument("--refresh", type=float, default=2.0, help="seconds between live updates (default 2)")
    command_config.add_argument(
        p, "--command-config", help="the cluster's client settings (TLS, SASL) as the tools take them"
    )
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=os.environ.get("SAMSA_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    password = args.password or os.environ.get(PASSWORD_ENV)
    if args.user and not password:
        print("samsa console: --user needs --password (or " + PASSWORD_ENV + ")", file=sys.stderr)
        return 2
    try:
        parse_bootstrap(args.bootstrap_server)
        security = command_config.client_security(args.command_config)
    except AdminError as e:
        print(f"samsa console: {e}", file=sys.stderr)
        return 2
    urls = [u.strip() for item in args.metrics for u in item.split(",") if u.strip()]
    client = ConsoleClient(args.bootstrap_server, security)
    console = Console(
        client=client,
        snapshots=SnapshotCache(client, max_age=min(2.0, args.refresh)),
        metrics=MetricsHistory(urls),
        refresh=args.refresh,
        user=args.user,
        password=password,
    )
    return uvloop.run(_serve(console, args.host, args.port))


async def _serve(console: Console, host: str, port: int) -> int:
    runner = web.AppRunner(build_app(console), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as e:
        print(f"samsa console: cannot listen on {host}:{port}: {e}", file=sys.stderr)
        await runner.cleanup()
        return 1
    # The handlers before the console= line: whoever reads it may signal at once (and expects code 0).
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    bound = runner.addresses[0]
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    print(f"console=http://{shown}:{bound[1]}", flush=True)
    await stop.wait()
    log.info("stopping")
    await runner.cleanup()
    return 0
