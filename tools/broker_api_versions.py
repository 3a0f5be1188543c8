"""``samsa broker-api-versions``: Kafka 3.9's kafka-broker-api-versions.sh (BrokerApiVersionsCommand) for
Samsa.

``--bootstrap-server S`` finds every broker with Metadata, asks each for ApiVersions and prints, per broker,
Kafka's ``NodeApiVersions.toString(true)``::

    localhost:9092 (id: 1 rack: null) -> (
        Produce(0): 0 to 11 [usable: 11],
        Fetch(1): 0 to 17 [usable: 17],
        ...
        DescribeQuorum(55): UNSUPPORTED,
        ...
    )

one line per API this tool knows (Samsa's protocol schemas: ``protocol.api.ApiKey``), in key order:
``Name(key): min to max`` (or ``min`` alone when they are equal) as the broker advertises it, then
``[usable: N]`` with N the newest version both the broker and this tool speak, ``[unusable: node too
new]`` / ``[unusable: node too old]`` when they share none; ``UNSUPPORTED`` for an API the broker does not
advertise; ``UNKNOWN(key): ...`` for one it advertises that this tool does not know. A broker that cannot be
asked prints ``host:port (id: 1 rack: null) -> ERROR: <message>``. The brokers come in id order (Kafka's
follow its HashMap's order). ``--command-config FILE``: the client's security settings
(tools/command_config.py).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from network.client_security import ClientSecurity
from protocol.api import ApiKey, api
from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsRequest
from tools import command_config
from tools.admin_client import AdminClient, AdminError
from tools.partition_leaders import java_exception
from tools.usage import UsageError, UsageParser

USAGE_TEXT = "This tool helps to retrieve broker version information."
CLIENT_ID = "admin-1"
SOFTWARE_NAME = "samsa"
SOFTWARE_VERSION = "0.1.0"
REQUEST_TIMEOUT = 5.0  # Kafka's tool: DEFAULT_REQUEST_TIMEOUT_MS
AWAIT_BROKERS_BACKOFF = 0.05
AWAIT_BROKERS_TIMEOUT = 30.0


def api_version_text(key: int, low: int, high: int) -> str:
    """NodeApiVersions.apiVersionToText: one API as the broker advertises it and what this tool can use."""
    spec = api(key)
    versions = str(low) if low == high else f"{low} to {high}"
    if spec is None:
        return f"UNKNOWN({key}): {versions}"
    if spec.valid_versions.high < low:
        usable = "[unusable: node too new]"
    elif high < spec.valid_versions.low:
        usable = "[unusable: node too old]"
    else:
        usable = f"[usable: {min(spec.valid_versions.high, high)}]"
    return f"{spec.name}({key}): {versions} {usable}"


def node_api_versions(advertised: dict[int, tuple[int, int]]) -> str:
    """NodeApiVersions.toString(true): every API advertised or known to this tool, in key order."""
    lines = {key: api_version_text(key, low, high) for key, (low, high) in advertised.items()}
    for key in ApiKey:
        if key not in lines:
            lines[key] = f"{api(key).name}({int(key)}): UNSUPPORTED"
    return "(\n\t" + ",\n\t".join(lines[k] for k in sorted(lines)) + "\n)"


def node_text(host: str, port: int, node_id: int, rack: str | None) -> str:
    """Kafka's Node.toString."""
    return f"{host}:{port} (id: {node_id} rack: {'null' if rack is None else rack})"


async def broker_versions(bootstrap: str, security: ClientSecurity | None = None) -> list[str]:
    """Each broker's block of output, in broker id order."""
    async with AdminClient(
        bootstrap, client_id=CLIENT_ID, timeout=REQUEST_TIMEOUT, security=security
    ) as admin:
        deadline = time.monotonic() + AWAIT_BROKERS_TIMEOUT
        while True:  # Kafka's awaitBrokers (which waits for ever)
            brokers = (await admin.metadata([])).brokers
            if brokers:
                break
            if time.monotonic() > deadline:
                raise AdminError(f"No broker in the cluster's metadata after {AWAIT_BROKERS_TIMEOUT:.0f} s")
            await asyncio.sleep(AWAIT_BROKERS_BACKOFF)
        request = ApiVersionsRequest(
            client_software_name=SOFTWARE_NAME, client_software_version=SOFTWARE_VERSION
        )

        async def ask(node_id: int) -> Any:
            try:
                return await admin.send_to_node(ApiKey.API_VERSIONS, request, node_id)
            except AdminError as e:
                return e

        ordered = sorted(brokers, key=lambda b: b.node_id)
        responses = await asyncio.gather(*(ask(b.node_id) for b in ordered))
    blocks = []
    for broker, response in zip(ordered, responses, strict=True):
        node = node_text(broker.host, broker.port, broker.node_id, broker.rack)
        if isinstance(response, AdminError):
            blocks.append(f"{node} -> ERROR: {response}")
        elif response.error_code != ErrorCode.NONE:
            blocks.append(f"{node} -> ERROR: {java_exception(response.error_code)}")
        else:
            advertised = {v.api_key: (v.min_version, v.max_version) for v in response.api_keys}
            blocks.append(f"{node} -> {node_api_versions(advertised)}")
    return blocks


def _parser() -> UsageParser:
    p = UsageParser(prog="samsa broker-api-versions", description=USAGE_TEXT)
    command_config.add_argument(p, help="A property file containing configs to be passed to Admin Client.")
    p.add_argument(
        "--bootstrap-server",
        metavar="server(s) to use for bootstrapping",
        help="REQUIRED: The server to connect to.",
    )
    return p


def main(argv: list[str]) -> int:
    parser = _parser()
    if not argv:
        print(USAGE_TEXT, file=sys.stderr)
        parser.print_help(sys.stderr)
        return 1
    try:
        args = parser.parse_args(argv)
        if args.bootstrap_server is None:
            raise UsageError('Missing required argument "[bootstrap-server]"')
        security = command_config.client_security(args.command_config)
        for block in asyncio.run(broker_versions(args.bootstrap_server, security)):
            print(block)
        return 0
    except UsageError as e:
        print(e, file=sys.stderr)
        parser.print_help(sys.stderr)
        return 1
    except AdminError as e:
        print(e, file=sys.stderr)
        return 1
