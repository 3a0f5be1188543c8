"""``samsa configs``: kafka-configs.sh for Samsa (Kafka 3.9's ConfigCommand) — describe and alter the
configs of users (SCRAM credentials), topics, brokers and broker loggers.

With ``--bootstrap-server`` it goes through the admin APIs as Kafka's tool does:

- users: DescribeUserScramCredentials / AlterUserScramCredentials. ``--add-config
  'SCRAM-SHA-512=[iterations=8192,password=alice-secret]'`` (iterations default 4096) sends the salted
  password with a fresh salt, never the password; ``--delete-config SCRAM-SHA-512`` deletes it.
  Describe prints ``SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=8192``.
- topics: DescribeConfigs (with synonyms) and IncrementalAlterConfigs;
- brokers (``--entity-name <id>`` or ``--entity-default``): DescribeConfigs and AlterConfigs with the
  broker's whole dynamic config, as Kafka's tool does;
- broker-loggers: DescribeConfigs and IncrementalAlterConfigs of the loggers' levels.

With ``--zookeeper`` (deprecated in Kafka, kept for the one use it still has: storing SCRAM credentials
before any broker runs) it reads and writes ``/config/users/<user>`` directly (zk/user_configs.py).

Messages, output lines and exit codes are ConfigCommand's: a bad command line prints its message on
stderr and exits 1; a request that fails prints ``Error while executing config command with args
'...'`` and the error on stderr, exit 1.

- users and clients (``--user``, ``--client``, ``--user-defaults``, ``--client-defaults``, or both
  ``users`` and ``clients`` for a user/client pair): client quotas (``producer_byte_rate``,
  ``consumer_byte_rate``, ``request_percentage``, ``controller_mutation_rate``) through
  DescribeClientQuotas / AlterClientQuotas, printed as ``Quota configs for user-principal 'alice' are
  producer_byte_rate=1048576.0`` (tools/config_quotas.py).

Departures: the entity types ips, client-metrics and groups are refused saying so (Samsa has no
connection-rate quotas, client metrics or group configs), as is ``--bootstrap-controller`` (KRaft's);
an invalid SCRAM credential property is reported without echoing the password, and so is the command
line repeated after a failed request.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.api import ApiKey
from protocol.errors import ErrorCode, description
from protocol.messages import (
    AlterConfigsRequest,
    AlterUserScramCredentialsRequest,
    DescribeConfigsRequest,
    DescribeUserScramCredentialsRequest,
    IncrementalAlterConfigsRequest,
)
from protocol.topic import topic_name_error
from server_common.config import read_properties
from server_common.scram import MECHANISMS, MECHANISMS_BY_TYPE, ScramCredential, secure_random_salt
from tools import command_config, config_quotas
from tools.admin_client import AdminClient, AdminError
from tools.usage import CommandLineError, UsageError, UsageParser, run_command

TOPICS, CLIENTS, USERS, BROKERS, IPS = "topics", "clients", "users", "brokers", "ips"
BROKER_LOGGERS, CLIENT_METRICS, GROUPS = "broker-loggers", "client-metrics", "groups"
# ConfigCommand.BrokerSupportedConfigTypes, in its order.
ENTITY_TYPES = (TOPICS, CLIENTS, USERS, BROKERS, IPS, BROKER_LOGGERS, CLIENT_METRICS, GROUPS)
ZK_ENTITY_TYPES = (USERS, BROKERS)
UNSUPPORTED = {
    IPS: "connection quotas",
    CLIENT_METRICS: "client metrics subscriptions (KIP-714)",
    GROUPS: "group configs (KIP-848)",
}
QUOTA_CONFIGS = frozenset(
    {"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}
)
DEFAULT_SCRAM_ITERATIONS = 4096

# ConfigResource.Type and ConfigEntry.ConfigSource (ids on the wire, names as Java prints them).
TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE = 2, 4, 8
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations
TIMEOUT_MS = 30_000

# Kafka's split of --add-config: on commas (and then on '=') outside square brackets.
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
_SCRAM_VALUE = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)


class CommandError(Exception):
    """A request the cluster refused (Kafka's ExecutionException wrapping the error)."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message or description(code))
        self.code = code
        self.message = message or description(code)

    def java(self) -> str:
        """The first line of the stack trace Kafka's tool prints."""
        return f"java.util.concurrent.ExecutionException: {java_exception(self.code)}: {self.message}"


def java_exception(code: int) -> str:
    """The Java exception class Kafka raises for an error code (Errors' naming)."""
    try:
        name = ErrorCode(code).name
    except ValueError:
        return "org.apache.kafka.common.errors.UnknownServerException"
    name = name.removesuffix("_FAILED") if name.endswith("_AUTHORIZATION_FAILED") else name
    camel = "".join(part.capitalize() for part in name.split("_"))
    return f"org.apache.kafka.common.errors.{camel}Exception"


def _scala_list(kind: str, items: Sequence[str]) -> str:
    return f"{kind}({', '.join(items)})"


# -- command line -----------------------------------------------------------------------------------


class _EntityName(argparse.Action):
    """--entity-name and --entity-default, in command-line order, into one list ("" = default)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        names = getattr(namespace, "entity_names", None) or []
        names.append("" if option_string == "--entity-default" else values)
        namespace.entity_names = names


def _parser() -> UsageParser:
    p = UsageParser(
        prog="samsa configs",
        description="This tool helps to manipulate and describe entity config for a topic, client, user, "
        "broker, ip, client-metrics or group",
    )
    p.add_argument(
        "--bootstrap-server", metavar="server to connect to", help="The Kafka servers to connect to."
    )
    p.add_argument(
        "--bootstrap-controller",
        metavar="controller to connect to",
        help="The Kafka controllers to connect to.",
    )
    p.add_argument(
        "--zookeeper",
        metavar="urls",
        help="DEPRECATED. The connection string for the zookeeper connection in the form host:port. Required "
        "when configuring SCRAM credentials for users before any broker runs. Not allowed otherwise.",
    )
    command_config.add_argument(
        p,
        help="Property file containing configs to be passed to Admin Client. This is used only with "
        "--bootstrap-server option for describing and altering broker configs.",
    )
    p.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    p.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    p.add_argument(
        "--all",
        action="store_true",
        help="List all configs for the given entity, including static configs if available.",
    )
    p.add_argument(
        "--entity-type",
        action="append",
        default=[],
        metavar="ENTITY_TYPE",
        help="Type of entity (topics/clients/users/brokers/broker-loggers/ips/client-metrics/groups)",
    )
    p.add_argument(
        "--entity-name",
        action=_EntityName,
        dest="entity_names",
        metavar="ENTITY_NAME",
        help="Name of entity (topic name/client id/user principal name/broker id/ip/client metrics/group id)",
    )
    p.add_argument(
        "--entity-default",
        action=_EntityName,
        nargs=0,
        dest="entity_names",
        help="Default entity name for clients/users/brokers/ips (applies to corresponding entity type)",
    )
    p.add_argument(
        "--add-config",
        metavar="ADD_CONFIG",
        help="Key Value pairs of configs to add. Square brackets can be used to group values which contain "
        "commas: 'k1=v1,k2=[v1,v2,v2],k3=v3'. For users: "
        "SCRAM-SHA-256=[iterations=8192,password=alice-secret] or SCRAM-SHA-512=[password=alice-secret].",
    )
    p.add_argument(
        "--add-config-file", metavar="ADD_CONFIG_FILE", help="Path to a properties file with configs to add."
    )
    p.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="DELETE_CONFIG",
        help="config keys to remove 'k1,k2'",
    )
    p.add_argument("--force", action="store_true", help="Suppress console prompts")
    for flag, text in (
        ("topic", "The topic's name."),
        ("client", "The client's ID."),
        ("user", "The user's principal name."),
        ("broker", "The broker's ID."),
        ("broker-logger", "The broker's ID for its logger config."),
        ("ip", "The IP address."),
        ("group", "The group's ID."),
        ("client-metrics", "The client metrics config resource name."),
    ):
        p.add_argument(f"--{flag}", help=text)
    for flag, text in (
        ("client-defaults", "The config defaults for all clients."),
        ("user-defaults", "The config defaults for all users."),
        ("broker-defaults", "The config defaults for all brokers."),
        ("ip-defaults", "The config defaults for all IPs."),
    ):
        p.add_argument(f"--{flag}", action="store_true", help=text)
    return p


_ENTITY_FLAGS = (
    ("topic", TOPICS),
    ("client", CLIENTS),
    ("user", USERS),
    ("broker", BROKERS),
    ("broker_logger", BROKER_LOGGERS),
    ("ip", IPS),
    ("client_metrics", CLIENT_METRICS),
    ("group", GROUPS),
)
_DEFAULT_FLAGS = (
    ("client_defaults", CLIENTS),
    ("user_defaults", USERS),
    ("broker_defaults", BROKERS),
    ("ip_defaults", IPS),
)


def entity_types(args: argparse.Namespace) -> list[str]:
    return list(args.entity_type) + [
        t for flag, t in (*_ENTITY_FLAGS, *_DEFAULT_FLAGS) if getattr(args, flag)
    ]


def entity_names(args: argparse.Namespace) -> list[str]:
    names = list(args.entity_names or [])
    names += [getattr(args, flag) for flag, _ in _ENTITY_FLAGS if getattr(args, flag) is not None]
    names += ["" for flag, _ in _DEFAULT_FLAGS if getattr(args, flag)]
    return names


def check_args(args: argparse.Namespace) -> None:
    """ConfigCommandOptions.checkArgs."""
    if args.alter == args.describe:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    if args.describe and (args.add_config is not None or args.delete_config or args.add_config_file):
        raise UsageError(
            'Option "[describe]" can\'t be used with option "[alter, add-config, delete-config]"'
        )
    types = entity_types(args)
    duplicated = sorted({t for t in types if types.count(t) > 1})
    if duplicated:
        raise CommandLineError(f"Duplicate entity type(s) specified: {','.join(duplicated)}")
    over_zk = (
        args.zookeeper is not None and args.bootstrap_server is None and args.bootstrap_controller is None
    )
    allowed, connect = (
        (ZK_ENTITY_TYPES, "--zookeeper")
        if over_zk
        else (ENTITY_TYPES, "--bootstrap-server or --bootstrap-controller")
    )
    for t in types:
        if t not in allowed:
            raise CommandLineError(
                f"Invalid entity type {t}, the entity type must be one of {', '.join(allowed)} "
                f"with a {connect} argument"
            )
    if not types:
        raise CommandLineError("At least one entity type must be specified")
    if len(types) > 1 and set(types) != {USERS, CLIENTS}:
        raise CommandLineError(f"Only '{USERS}' and '{CLIENTS}' entity types may be specified together")
    specific = any(getattr(args, f) not in (None, False) for f, _ in (*_ENTITY_FLAGS, *_DEFAULT_FLAGS))
    if (args.entity_names or args.entity_type) and specific:
        raise CommandLineError(
            "--entity-{type,name,default} should not be used in conjunction with specific entity flags"
        )
    names = entity_names(args)
    has_name, has_default = any(names), any(n == "" for n in names)
    connects = sum(x is not None for x in (args.bootstrap_server, args.bootstrap_controller, args.zookeeper))
    if connects == 0:
        raise CommandLineError(
            "One of the required --bootstrap-server, --boostrap-controller, or --zookeeper arguments "
            "must be specified"
        )
    if connects > 1:
        raise CommandLineError(
            "Only one of --bootstrap-server, --boostrap-controller, and --zookeeper can be specified"
        )
    if args.bootstrap_controller is not None:
        raise CommandLineError(
            "--bootstrap-controller is for KRaft controllers; Samsa's controllers (ZooKeeper mode) serve "
            "only their brokers: use --bootstrap-server"
        )
    if args.all and args.zookeeper is not None:
        raise CommandLineError("--bootstrap-server must be specified for --all")
    if has_name and (BROKERS in types or BROKER_LOGGERS in types):
        for broker_id in names:
            if broker_id and not _is_int(broker_id):
                raise CommandLineError(
                    f"The entity name for {types[0]} must be a valid integer broker id, "
                    f"but it is: {broker_id}"
                )
    if args.describe:
        if not ({USERS, CLIENTS, BROKERS, IPS} & set(types)) and has_default:
            raise CommandLineError(
                f"--entity-default must not be specified with --describe of {','.join(types)}"
            )
        if BROKER_LOGGERS in types and not has_name:
            raise CommandLineError(f"An entity name must be specified with --describe of {','.join(types)}")
    if args.alter:
        if {USERS, CLIENTS, BROKERS, IPS} & set(types):
            if not has_name and not has_default:
                raise CommandLineError(
                    "An entity-name or default entity must be specified with --alter of users, clients, "
                    "brokers or ips"
                )
        elif not has_name:
            raise CommandLineError(f"An entity name must be specified with --alter of {','.join(types)}")
        if args.add_config is not None and args.add_config_file is not None:
            raise CommandLineError("Only one of --add-config or --add-config-file must be specified")
        if args.add_config is None and args.add_config_file is None and not args.delete_config:
            raise CommandLineError(
                "At least one of --add-config, --add-config-file, or --delete-config must be specified "
                "with --alter"
            )
    for t in types:
        if t in UNSUPPORTED:
            raise CommandLineError(f"Entity type {t} is not supported by Samsa: it has no {UNSUPPORTED[t]}")


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def parse_configs_to_add(add_config: str | None, add_config_file: str | None = None) -> dict[str, str]:
    """ConfigCommand.parseConfigsToBeAdded: ``k1=v1,k2=[v1,v2],k3=v3`` (brackets group values with commas
    and are removed), or a properties file."""
    props: dict[str, str] = {}
    if add_config_file is not None:
        try:
            props.update(read_properties(Path(add_config_file).read_text(encoding="utf-8")))
        except OSError as e:
            raise CommandLineError(f"{add_config_file}: {e.strerror or e}") from None
    if add_config is not None:
        items = re.split("," + _OUTSIDE_BRACKETS, add_config)
        while items and items[-1] == "":  # Java's split drops trailing empty strings
            items.pop()
        pairs = [re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item) for item in items]
        if not all(len(pair) == 2 for pair in pairs):
            raise CommandLineError(
                'Invalid entity config: all configs to be added must be in the format "key=val".'
            )
        for key, value in pairs:
            props[key.strip()] = re.sub(r"\[?\]?", "", value).strip()
    for key in props:
        if not re.fullmatch(r"[a-zA-Z0-9._-]*", key):
            raise CommandLineError(f"Invalid character found for config key: {key}")
    return props


def parse_configs_to_delete(values: list[str]) -> list[str]:
    """--delete-config k1,k2 (repeatable), trimmed."""
    return [k.strip() for value in values for k in value.split(",")]


def scram_iterations_and_password(mechanism: str, value: str, *, zookeeper: bool = False) -> tuple[int, str]:
    """``[iterations=N,]password=P`` (ConfigCommand's iterationsAndPasswordBytes; -1 or none: 4096)."""
    enum_name = mechanism.replace("-", "_")
    match = _SCRAM_VALUE.fullmatch(value)
    if match is None or (match.group(1) is not None and not _is_int(match.group(1))):
        # Kafka echoes the value, password included; not here.
        raise CommandLineError(
            f"Invalid credential property {enum_name}=<redacted>: expected [iterations=N,]password=P"
        )
    text, password = match.groups()
    iterations = int(text) if text is not None and text != "-1" else DEFAULT_SCRAM_ITERATIONS
    minimum = MECHANISMS[mechanism].min_iterations
    if iterations < minimum:
        raise CommandLineError(
            f"Iterations {iterations} is less than the minimum {minimum} required for "
            f"{enum_name if zookeeper else mechanism}"
        )
    return iterations, password


# -- over the admin APIs ----------------------------------------------------------------------------


class ConfigService:
    def __init__(self, admin: AdminClient, args: argparse.Namespace) -> None:
        self.admin = admin
        self.args = args
        self.types = entity_types(args)
        self.names = entity_names(args)

    async def alter(self) -> None:
        args, kind = self.args, self.types[0]
        if len(self.types) != len(self.names):
            raise CommandLineError("An entity name must be specified for every entity type")
        name = self.names[0]
        to_add = parse_configs_to_add(args.add_config, args.add_config_file)
        to_delete = parse_configs_to_delete(args.delete_config)
        if kind == TOPICS:
            await self._alter_incrementally(TOPIC_RESOURCE, kind, name, to_add, to_delete)
        elif kind == BROKERS:
            await self._alter_broker(name, to_add, to_delete)
        elif kind == BROKER_LOGGERS:
            loggers = {
                e.name for e in await self._resource_configs(BROKER_LOGGER_RESOURCE, kind, name, True, False)
            }
            invalid = [k for k in to_delete if k not in loggers] + [k for k in to_add if k not in loggers]
            if invalid:
                raise CommandLineError(f"Invalid broker logger(s): {','.join(invalid)}")
            await self._incremental(BROKER_LOGGER_RESOURCE, name, to_add, to_delete)
        elif kind == CLIENTS or len(self.types) == 2:  # a client, or a user and a client
            await self._alter_clients(to_add, to_delete)
        else:
            await self._alter_user(name, to_add, to_delete)
        if name:
            print(f"Completed updating config for {kind[:-1]} {name}.")
        else:
            print(f"Completed updating default config for {kind} in the cluster.")

    async def _alter_user(self, user: str, to_add: dict[str, str], to_delete: list[str]) -> None:
        unknown_add = [k for k in to_add if k not in MECHANISMS and k not in QUOTA_CONFIGS]
        unknown_delete = [k for k in to_delete if k not in MECHANISMS and k not in QUOTA_CONFIGS]
        if unknown_add:
            raise CommandLineError(
                f"Only quota and SCRAM credential configs can be added for '{USERS}' using "
                "--bootstrap-server. "
                f"Unexpected config names: {_scala_list('Set', unknown_add)}"
            )
        if unknown_delete:
            raise CommandLineError(
                f"Only quota and SCRAM credential configs can be deleted for '{USERS}' using "
                "--bootstrap-server. "
                f"Unexpected config names: {_scala_list('ArrayBuffer', unknown_delete)}"
            )
        quotas = [k for k in (*to_add, *to_delete) if k in QUOTA_CONFIGS]
        scram = [k for k in (*to_add, *to_delete) if k in MECHANISMS]
        if scram and not user:
            raise CommandLineError(
                "The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                "Credentials using --bootstrap-server."
            )
        if scram and quotas:
            raise CommandLineError(
                f"Cannot alter both quota and SCRAM credential configs simultaneously for '{USERS}' using "
                "--bootstrap-server."
            )
        if quotas:
            await self._alter_quotas(to_add, to_delete)
            return
        upsertions = []
        for mechanism, value in to_add.items():
            iterations, password = scram_iterations_and_password(mechanism, value)
            salt = secure_random_salt()  # as Kafka's Admin client: UserScramCredentialUpsertion
            upsertions.append(
                AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                    name=user,
                    mechanism=MECHANISMS[mechanism].type,
                    iterations=iterations,
                    salt=salt,
                    salted_password=MECHANISMS[mechanism].salted_password(password, salt, iterations),
                )
            )
        deletions = [
            AlterUserScramCredentialsRequest.ScramCredentialDeletion(name=user, mechanism=MECHANISMS[m].type)
            for m in to_delete
        ]
        request = AlterUserScramCredentialsRequest(upsertions=upsertions, deletions=deletions)
        response = await self.admin.send_to_controller(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request, lambda r: [x.error_code for x in r.results]
        )
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise CommandError(result.error_code, result.error_message)

    async def _alter_clients(self, to_add: dict[str, str], to_delete: list[str]) -> None:
        """A client's or a user/client pair's configs: client quotas only."""
        unknown_add = [k for k in to_add if k not in QUOTA_CONFIGS]
        unknown_delete = [k for k in to_delete if k not in QUOTA_CONFIGS]
        if unknown_add:
            raise CommandLineError(
                f"Only quota configs can be added for '{CLIENTS}' using --bootstrap-server. "
                f"Unexpected config names: {_scala_list('Set', unknown_add)}"
            )
        if unknown_delete:
            raise CommandLineError(
                f"Only quota configs can be deleted for '{CLIENTS}' using --bootstrap-server. "
                f"Unexpected config names: {_scala_list('ArrayBuffer', unknown_delete)}"
            )
        await self._alter_quotas(to_add, to_delete)

    async def _quotas(self, names: list[str]) -> list[tuple[config_quotas.Entity, dict[str, float]]]:
        """DescribeClientQuotas with ConfigCommand's strict filter for the entity types and names."""
        request = config_quotas.describe_request(self.types, names)
        response = await self.admin.send(ApiKey.DESCRIBE_CLIENT_QUOTAS, request)
        if response.error_code != ErrorCode.NONE:
            raise CommandError(response.error_code, response.error_message)
        return config_quotas.described_entities(response)

    async def _alter_quotas(self, to_add: dict[str, str], to_delete: list[str]) -> None:
        """ConfigCommand.alterQuotaConfigs: the entity's quotas read, then one AlterClientQuotas entry."""
        found = await self._quotas(self.names)
        old = found[0][1] if found else {}
        request = config_quotas.alter_request(self.types, self.names, old, to_add, to_delete)
        response = await self.admin.send(ApiKey.ALTER_CLIENT_QUOTAS, request)
        for entry in response.entries:
            if entry.error_code != ErrorCode.NONE:
                raise CommandError(entry.error_code, entry.error_message)

    async def _alter_incrementally(
        self, resource: int, kind: str, name: str, to_add: dict[str, str], to_delete: list[str]
    ) -> None:
        old = {e.name for e in await self._resource_configs(resource, kind, name, False, False)}
        invalid = [k for k in to_delete if k not in old]
        if invalid:
            raise CommandLineError(f"Invalid config(s): {','.join(invalid)}")
        await self._incremental(resource, name, to_add, to_delete)

    async def _incremental(
        self, resource: int, name: str, to_add: dict[str, str], to_delete: list[str]
    ) -> None:
        changes = [
            IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=SET, value=v)
            for k, v in to_add.items()
        ]
        changes += [
            IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=DELETE, value="")
            for k in to_delete
        ]
        request = IncrementalAlterConfigsRequest(
            resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(
                    resource_type=resource, resource_name=name, configs=changes
                )
            ],
            validate_only=False,
        )
        response = await self._send_for(resource, name, ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
        for result in response.responses:
            if result.error_code != ErrorCode.NONE:
                raise CommandError(result.error_code, result.error_message)

    async def _alter_broker(self, name: str, to_add: dict[str, str], to_delete: list[str]) -> None:
        """Kafka's tool sends the broker's whole dynamic config with the legacy AlterConfigs."""
        old = {e.name: e for e in await self._resource_configs(BROKER_RESOURCE, BROKERS, name, False, False)}
        invalid = [k for k in to_delete if k not in old]
        if invalid:
            raise CommandLineError(f"Invalid config(s): {','.join(invalid)}")
        new: dict[str, str | None] = {k: e.value for k, e in old.items()}
        new.update(to_add)
        for k in to_delete:
            new.pop(k, None)
        sensitive = sorted(k for k, v in new.items() if v is None)
        if sensitive:
            raise CommandLineError(
                "All sensitive broker config entries must be specified for --alter, missing entries: "
                f"{_scala_list('Set', sensitive)}"
            )
        request = AlterConfigsRequest(
            resources=[
                AlterConfigsRequest.AlterConfigsResource(
                    resource_type=BROKER_RESOURCE,
                    resource_name=name,
                    configs=[AlterConfigsRequest.AlterableConfig(name=k, value=v) for k, v in new.items()],
                )
            ],
            validate_only=False,
        )
        response = await self._send_for(BROKER_RESOURCE, name, ApiKey.ALTER_CONFIGS, request)
        for result in response.responses:
            if result.error_code != ErrorCode.NONE:
                raise CommandError(result.error_code, result.error_message)

    async def _send_for(self, resource: int, name: str, key: ApiKey, request: Any) -> Any:
        """A broker's own configs and loggers go to that broker (as Kafka's Admin client sends them)."""
        if resource in (BROKER_RESOURCE, BROKER_LOGGER_RESOURCE) and name:
            return await self.admin.send_to_node(key, request, int(name))
        return await self.admin.send(key, request)

    async def _resource_configs(
        self, resource: int, kind: str, name: str, include_synonyms: bool, describe_all: bool
    ) -> list[Any]:
        """ConfigCommand.getResourceConfig: the entries, by name; only the dynamic ones unless --all."""
        if kind == TOPICS and name:
            problem = topic_name_error(name)
            if problem is not None:
                raise CommandError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is illegal: {problem}")
        dynamic = {
            TOPICS: DYNAMIC_TOPIC_CONFIG,
            BROKERS: DYNAMIC_BROKER_CONFIG if name else DYNAMIC_DEFAULT_BROKER_CONFIG,
        }.get(kind)
        request = DescribeConfigsRequest(
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=resource, resource_name=name, configuration_keys=None
                )
            ],
            include_synonyms=include_synonyms,
            include_documentation=False,
        )
        response = await self._send_for(resource, name, ApiKey.DESCRIBE_CONFIGS, request)
        result = response.results[0]
        if result.error_code != ErrorCode.NONE:
            raise CommandError(result.error_code, result.error_message)
        entries = [e for e in result.configs if describe_all or dynamic is None or e.config_source == dynamic]
        return sorted(entries, key=lambda e: e.name)

    async def describe(self) -> None:
        kind = self.types[0]
        if kind in (USERS, CLIENTS):
            await self._describe_users()
            return
        resource = {TOPICS: TOPIC_RESOURCE, BROKERS: BROKER_RESOURCE, BROKER_LOGGERS: BROKER_LOGGER_RESOURCE}[
            kind
        ]
        describe_all = self.args.all
        if self.names:
            names = self.names[:1]
        elif kind == TOPICS:
            names = sorted(t.name for t in (await self.admin.metadata(None)).topics)
        else:
            names = [str(b) for b in sorted(self.admin.brokers)] + [""]
        for name in names:
            if name == "":
                print(f"Default configs for {kind} in the cluster are:")
            else:
                print(f"{'All' if describe_all else 'Dynamic'} configs for {kind[:-1]} {name} are:")
            for entry in await self._resource_configs(resource, kind, name, True, describe_all):
                synonyms = ", ".join(
                    f"{CONFIG_SOURCES.get(s.source, 'UNKNOWN')}:{s.name}={_java(s.value)}"
                    for s in entry.synonyms
                )
                sensitive = _java_bool(entry.is_sensitive)
                print(f"  {entry.name}={_java(entry.value)} sensitive={sensitive} synonyms={{{synonyms}}}")

    async def _describe_users(self) -> None:
        """Quota lines, then the SCRAM credentials unless clients or the default user are named
        (ConfigCommand.describeClientQuotaAndUserScramCredentialConfigs)."""
        for entity, values in await self._quotas(self.names):
            print(config_quotas.quota_line(entity, values))
        if CLIENTS in self.types or "" in self.names:
            return
        for user in await describe_user_scram_credentials(self.admin, self.names):
            if user.error is not None:
                print(
                    f"Error retrieving SCRAM credential configs for user-principal '{user.user}': "
                    f"{java_exception(user.error.code).rsplit('.', 1)[1]}: {user.error.message}"
                )
                continue
            text = ", ".join(f"{mechanism}=iterations={n}" for mechanism, n in user.credentials)
            print(f"SCRAM credential configs for user-principal '{user.user}' are {text}")


@dataclass(frozen=True)
class UserScramCredentials:
    """One user's SCRAM credentials as DescribeUserScramCredentials tells them: (mechanism name,
    iterations) pairs (never the credential itself), or the error the broker answered for that user."""

    user: str
    credentials: list[tuple[str, int]]
    error: CommandError | None = None


async def describe_user_scram_credentials(
    admin: AdminClient, names: Sequence[str] = ()
) -> list[UserScramCredentials]:
    """DescribeUserScramCredentials for ``names`` (none: every user that has a credential); users
    without one are left out, as Kafka's DescribeUserScramCredentialsResult.users() does. CommandError
    when the whole request fails (CLUSTER_AUTHORIZATION_FAILED)."""
    request = DescribeUserScramCredentialsRequest(
        users=[DescribeUserScramCredentialsRequest.UserName(name=n) for n in names]
    )
    response = await admin.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request)
    if response.error_code != ErrorCode.NONE:
        raise CommandError(response.error_code, response.error_message)
    users = []
    for result in response.results:
        if result.error_code == ErrorCode.RESOURCE_NOT_FOUND:
            continue
        if result.error_code != ErrorCode.NONE:
            users.append(
                UserScramCredentials(result.user, [], CommandError(result.error_code, result.error_message))
            )
            continue
        credentials = [
            (
                MECHANISMS_BY_TYPE[c.mechanism].name if c.mechanism in MECHANISMS_BY_TYPE else "UNKNOWN",
                c.iterations,
            )
            for c in result.credential_infos
        ]
        users.append(UserScramCredentials(result.user, credentials))
    return users


def _java(value: str | None) -> str:
    return "null" if value is None else value


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


# -- over ZooKeeper ---------------------------------------------------------------------------------


async def _run_zookeeper(args: argparse.Namespace) -> None:
    """Kafka's processCommandWithZk, for users (SCRAM credentials); brokers' configs need a broker."""
    from zk.client import ZkClient
    from zk.user_configs import UserConfigs

    print("Warning: --zookeeper is deprecated and will be removed in a future version of Kafka.")
    print("Use --bootstrap-server instead to specify a broker to connect to.")
    types, names = entity_types(args), entity_names(args)
    if types[0] != USERS or len(types) != 1:
        raise CommandLineError(
            "Samsa's --zookeeper mode handles users' SCRAM credentials only: use --bootstrap-server"
        )
    zk = ZkClient(args.zookeeper, 30_000, operation_timeout=30)
    await zk.start(timeout=30)
    try:
        users = UserConfigs(zk)
        if args.alter:
            await _alter_user_over_zk(users, names[0], args)
            entity = "default user-principal" if not names[0] else f"user-principal '{names[0]}'"
            print(f"Completed updating config for entity: {entity}.")
        else:
            listed = names[:1] if names else await users.users()
            for user in listed:
                config = await users.user_config(user) if user else {}
                if config or names:
                    entity = "default user-principal" if not user else f"user-principal '{user}'"
                    print(f"Configs for {entity} are {','.join(f'{k}={v}' for k, v in config.items())}")
    finally:
        await zk.close()


async def _alter_user_over_zk(users: Any, user: str, args: argparse.Namespace) -> None:
    to_add = parse_configs_to_add(args.add_config, args.add_config_file)
    to_delete = parse_configs_to_delete(args.delete_config)
    if not user:
        raise CommandLineError("Samsa's --zookeeper mode stores SCRAM credentials of named users only")
    if any(k not in MECHANISMS for k in (*to_add, *to_delete)):
        raise CommandLineError(
            f"--bootstrap-server option must be specified to update {USERS} configs: "
            f"{{add: {{{', '.join(to_add)}}}, delete: {_scala_list('ArrayBuffer', to_delete)}}}. "
            "User configuration updates using ZooKeeper are only supported for SCRAM credential updates."
        )
    values = {}
    for mechanism, value in to_add.items():
        iterations, password = scram_iterations_and_password(mechanism, value, zookeeper=True)
        values[mechanism] = ScramCredential.from_password(mechanism, password, iterations).to_string()

    def change(configs: dict[str, str]) -> dict[str, str]:
        invalid = [k for k in to_delete if k not in configs]
        if invalid:
            raise CommandLineError(f"Invalid config(s): {','.join(invalid)}")
        configs.update(values)
        for k in to_delete:
            configs.pop(k, None)
        return configs

    await users.alter(user, change)


# -- main -------------------------------------------------------------------------------------------


async def _run(args: argparse.Namespace) -> None:
    if args.zookeeper is not None:
        await _run_zookeeper(args)
        return
    security = command_config.client_security(args.command_config)
    bootstrap = args.bootstrap_server or args.bootstrap_controller
    async with AdminClient(bootstrap, client_id="samsa-configs", security=security) as admin:
        service = ConfigService(admin, args)
        await (service.alter() if args.alter else service.describe())


def _redacted(argv: list[str]) -> str:
    """The command line as Kafka's error message repeats it, with SCRAM passwords hidden."""
    return re.sub(r"password=[^,\]]*", "password=<redacted>", " ".join(argv))


def main(argv: list[str]) -> int:
    try:
        return run_command(_parser(), argv, check_args, _run)
    except CommandError as e:
        print(f"Error while executing config command with args '{_redacted(argv)}'", file=sys.stderr)
        print(e.java(), file=sys.stderr)
        return 1
    except AdminError as e:
        print(f"Error while executing config command with args '{_redacted(argv)}'", file=sys.stderr)
        print(e, file=sys.stderr)
        return 1
