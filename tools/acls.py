"""``samsa acls``: kafka-acls.sh for Samsa (Kafka 3.9's AclCommand) — add, remove and list ACLs.

With ``--bootstrap-server`` (and ``--command-config`` for a secured listener) it goes through the admin
APIs as Kafka's tool does: CreateAcls, DeleteAcls and DescribeAcls, sent to any broker. With the
deprecated ``--authorizer-properties zookeeper.connect=HOST:PORT[/chroot]`` it changes the ACLs in
ZooKeeper directly, as Kafka's tool does with its AclAuthorizer (how ACLs can be set before any broker
runs); it prints Kafka's deprecation warning.

Resources: ``--topic``, ``--group``, ``--cluster``, ``--transactional-id``, ``--delegation-token``,
``--user-principal`` (each repeatable), with ``--resource-pattern-type`` literal (default), prefixed,
or for ``--list``/``--remove`` the filters any and match. ACLs: ``--allow-principal``/``--deny-principal``
(``User:alice``, ``User:*``), ``--allow-host``/``--deny-host`` (default ``*``), ``--operation``
(default All). ``--producer`` (WRITE, DESCRIBE, CREATE on the topics; WRITE, DESCRIBE on the
transactional ids; with ``--idempotent`` IDEMPOTENT_WRITE on the cluster) and ``--consumer`` (READ,
DESCRIBE on the topics, READ on the groups) build the usual sets. ``--remove`` asks for confirmation
unless ``--force``. ``--list --principal P`` lists only P's ACLs.

Output, messages and exit codes are AclCommand's: ``Adding ACLs for resource `ResourcePattern(...)`:``
then one tab-indented entry a line; ``Current ACLs for resource ...`` for ``--list``; a bad command line
prints its message and the usage on stderr, exit 1; a failed request prints ``Error while executing ACL
command: <exception>: <message>`` and the exception line on stdout, exit 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from broker.authorization import SUPPORTED_OPERATIONS
from protocol.api import ApiKey
from protocol.errors import ErrorCode, description
from protocol.messages import (
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
)
from server_common.acl_authorizer import (
    ACL_AUTHORIZER_CLASS_NAMES,
    ANY_ENTRY,
    WILDCARD_HOST,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourcePatternFilter,
    operation_name,
    parse_operation,
)
from server_common.acls import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType
from server_common.principal import KafkaPrincipal
from tools import command_config
from tools.admin_client import AdminClient, AdminError
from tools.configs import java_exception
from tools.usage import UsageError, UsageParser, run_command

DEPRECATION = (
    "Warning: support for ACL configuration directly through the authorizer is deprecated and will be "
    "removed in a future release. Please use --bootstrap-server instead to set ACLs through the admin client."
)
CLUSTER_FILTER = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
NEWLINE = "\n"

# The options Kafka's checkInvalidArgs names, as joptsimple prints an option ("[list]").
_OPTION_NAMES = {
    "list": "list",
    "producer": "producer",
    "consumer": "consumer",
    "allow_host": "allow-host",
    "allow_principal": "allow-principal",
    "deny_host": "deny-host",
    "deny_principal": "deny-principal",
    "operation": "operation",
}


class CommandError(Exception):
    """A request the cluster refused: Kafka's ExecutionException wrapping the error."""

    def __init__(self, code: int, message: str | None) -> None:
        self.code = code
        self.message = message or description(code)
        super().__init__(self.message)

    def java(self) -> str:
        return f"{java_exception(self.code)}: {self.message}"


# -- command line -------------------------------------------------------------------------------------


def _pattern_type(value: str) -> PatternType:
    """Kafka's PatternTypeConverter: the enum name in any case, UNKNOWN refused."""
    try:
        pattern_type = PatternType[value.strip().upper()]
    except KeyError:
        pattern_type = PatternType.UNKNOWN
    if pattern_type == PatternType.UNKNOWN:
        raise argparse.ArgumentTypeError(f"Unknown resource-pattern-type: {value}")
    return pattern_type


def _parser() -> UsageParser:
    p = UsageParser(prog="samsa acls", description="This tool helps to manage acls on kafka.")
    p.add_argument(
        "--bootstrap-server",
        metavar="server to connect to",
        help="A list of host/port pairs to use for establishing the connection to the Kafka cluster. This "
        "list should be in the form host1:port1,host2:port2,... This config is required for acl management "
        "using admin client API.",
    )
    command_config.add_argument(p, help="A property file containing configs to be passed to Admin Client.")
    p.add_argument(
        "--authorizer",
        metavar="authorizer",
        help="DEPRECATED: Fully qualified class name of the authorizer, which defaults to "
        "kafka.security.authorizer.AclAuthorizer if --bootstrap-server is not provided. " + DEPRECATION,
    )
    p.add_argument(
        "--authorizer-properties",
        action="append",
        metavar="authorizer-properties",
        help="DEPRECATED: The properties required to configure an instance of the Authorizer specified by "
        "--authorizer. These are key=val pairs. For the default authorizer, example values are: "
        "zookeeper.connect=localhost:2181. " + DEPRECATION,
    )
    p.add_argument(
        "--topic",
        action="append",
        metavar="topic",
        help="topic to which ACLs should be added or removed. A value of '*' indicates ACL should apply to "
        "all topics.",
    )
    p.add_argument("--cluster", action="store_true", help="Add/Remove cluster ACLs.")
    p.add_argument(
        "--group",
        action="append",
        metavar="group",
        help="Consumer Group to which the ACLs should be added or removed. A value of '*' indicates the ACLs "
        "should apply to all groups.",
    )
    p.add_argument(
        "--transactional-id",
        action="append",
        metavar="transactional-id",
        help="The transactionalId to which ACLs should be added or removed. A value of '*' indicates the "
        "ACLs should apply to all transactionalIds.",
    )
    p.add_argument(
        "--idempotent",
        action="store_true",
        help="Enable idempotence for the producer. This should be used in combination with the --producer "
        "option. Note that idempotence is enabled automatically if the producer is authorized to a "
        "particular transactional-id.",
    )
    p.add_argument(
        "--delegation-token",
        action="append",
        metavar="delegation-token",
        help="Delegation token to which ACLs should be added or removed. A value of '*' indicates ACL should "
        "apply to all tokens.",
    )
    p.add_argument(
        "--user-principal",
        action="append",
        metavar="user-principal",
        help="Specifies a user principal as a resource in relation with the operation. For instance one "
        "could grant CreateTokens or DescribeTokens permission on a given user principal.",
    )
    p.add_argument(
        "--resource-pattern-type",
        type=_pattern_type,
        default=PatternType.LITERAL,
        metavar="ANY|MATCH|LITERAL|PREFIXED",
        help=(
            "The type of the resource pattern or pattern filter. When adding acls, this should be a "
            "specific pattern type, e.g. 'literal' or 'prefixed'. When listing or removing acls, a "
            "specific pattern type can be used to list or remove acls from specific resource patterns, "
            "or use the filter values of 'any' or 'match', where 'any' will match any pattern type, but"
            " will match the resource name exactly, where as 'match' will perform pattern matching to "
            "list or remove all acls that affect the supplied resource(s). WARNING: 'match', when used "
            "in combination with the '--remove' switch, should be used with care. (default: LITERAL)"
        ),
    )
    p.add_argument("--add", action="store_true", help="Indicates you are trying to add ACLs.")
    p.add_argument("--remove", action="store_true", help="Indicates you are trying to remove ACLs.")
    p.add_argument(
        "--list",
        action="store_true",
        help="List ACLs for the specified resource, use --topic <topic> or --group <group> or --cluster to "
        "specify a resource.",
    )
    p.add_argument(
        "--operation",
        action="append",
        metavar="operation",
        help="Operation that is being allowed or denied. Valid operation names are: "
        + ", ".join(
            operation_name(o) for o in AclOperation if o not in (AclOperation.UNKNOWN, AclOperation.ANY)
        )
        + " (default: All)",
    )
    p.add_argument(
        "--allow-principal",
        action="append",
        metavar="allow-principal",
        help="principal is in principalType:name format. Note that principalType must be supported by the "
        "Authorizer being used. For example, User:'*' is the wild card indicating all users.",
    )
    p.add_argument(
        "--deny-principal",
        action="append",
        metavar="deny-principal",
        help="principal is in principalType:name format. By default anyone not added through "
        "--allow-principal is denied access. You only need to use this option as negation to already "
        "allowed set. AND PLEASE REMEMBER DENY RULES TAKES PRECEDENCE OVER ALLOW RULES.",
    )
    p.add_argument(
        "--principal",
        action="append",
        metavar="principal",
        help="List ACLs for the specified principal. principal is in principalType:name format. Multiple "
        "--principal option can be passed.",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        metavar="allow-host",
        help="Host from which principals listed in --allow-principal will have access. If you have "
        "specified --allow-principal then the default for this option will be set to '*' which allows "
        "access from all hosts.",
    )
    p.add_argument(
        "--deny-host",
        action="append",
        metavar="deny-host",
        help="Host from which principals listed in --deny-principal will be denied access. If you have "
        "specified --deny-principal then the default for this option will be set to '*' which denies "
        "access from all hosts.",
    )
    p.add_argument(
        "--producer",
        action="store_true",
        help="Convenience option to add/remove ACLs for producer role. This will generate ACLs that allows "
        "WRITE,DESCRIBE and CREATE on topic.",
    )
    p.add_argument(
        "--consumer",
        action="store_true",
        help="Convenience option to add/remove ACLs for consumer role. This will generate ACLs that allows "
        "READ,DESCRIBE on topic and READ on group.",
    )
    p.add_argument("--force", action="store_true", help="Assume Yes to all queries and do not prompt.")
    return p


def _has(args: argparse.Namespace, name: str) -> bool:
    value = getattr(args, name)
    return bool(value) if isinstance(value, bool) else value is not None


def check_args(args: argparse.Namespace) -> None:
    """Kafka's AclCommandOptions.checkArgs, with its messages."""
    if args.bootstrap_server is not None and args.authorizer is not None:
        raise UsageError("Only one of --bootstrap-server or --authorizer must be specified")
    if args.bootstrap_server is None:
        if args.authorizer_properties is None:
            raise UsageError('Missing required argument "[authorizer-properties]"')
        print(DEPRECATION, file=sys.stderr)
    if args.command_config is not None and args.bootstrap_server is None:
        raise UsageError("The --command-config option can only be used with --bootstrap-server option")
    if args.authorizer_properties is not None and args.bootstrap_server is not None:
        raise UsageError("The --authorizer-properties option can only be used with --authorizer option")
    if sum((args.add, args.remove, args.list)) != 1:
        raise UsageError("Command must include exactly one action: --list, --add, --remove. ")
    for used, invalid in (
        ("list", ("producer", "consumer", "allow_host", "allow_principal", "deny_host", "deny_principal")),
        ("producer", ("operation", "deny_principal", "deny_host")),
        ("consumer", ("operation", "deny_principal", "deny_host")),
    ):
        if _has(args, used):
            for other in invalid:
                if _has(args, other):
                    first, second = _OPTION_NAMES[used], _OPTION_NAMES[other]
                    raise UsageError(f'Option "[{first}]" can\'t be used with option "[{second}]"')
    if args.principal is not None and not args.list:
        raise UsageError("The --principal option is only available if --list is set")
    if args.producer and args.topic is None:
        raise UsageError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise UsageError("The --idempotent option is only available if --producer is set")
    if args.consumer and (
        args.topic is None
        or args.group is None
        or (not args.producer and (args.cluster or args.transactional_id is not None))
    ):
        raise UsageError(
            "With --consumer you must specify a --topic and a --group and no --cluster or --transactional-id "
            "option should be specified."
        )


def _principals(values: list[str] | None) -> list[KafkaPrincipal]:
    found: list[KafkaPrincipal] = []
    for value in values or []:
        text = value.strip()
        principal_type, sep, _ = text.partition(":")
        if not sep:
            raise UsageError(f"expected a string in format principalType:principalName but got {text}")
        principal = KafkaPrincipal(principal_type, text[len(principal_type) + 1 :])
        if principal not in found:
            found.append(principal)
    return found


def _hosts(hosts: list[str] | None, principals: list[str] | None) -> list[str]:
    if hosts is not None:
        return list(dict.fromkeys(h.strip() for h in hosts))
    return [WILDCARD_HOST] if principals is not None else []


def entries(args: argparse.Namespace, operations: Iterable[AclOperation]) -> list[AccessControlEntry]:
    """Kafka's getAcl: every (principal, operation, host) of the allow and the deny options."""
    operations = list(dict.fromkeys(operations))
    found: list[AccessControlEntry] = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        chosen_hosts = _hosts(hosts, principals)
        chosen = _principals(principals)
        if not chosen or not chosen_hosts:
            continue
        for principal in chosen:
            for operation in operations:
                for host in chosen_hosts:
                    entry = AccessControlEntry(str(principal), host, operation, permission)
                    if entry not in found:
                        found.append(entry)
    return found


def resource_filters(args: argparse.Namespace, die_if_none: bool = True) -> list[ResourcePatternFilter]:
    """Kafka's getResourceFilter: one filter per resource named, with the pattern type given."""
    pattern_type: PatternType = args.resource_pattern_type
    filters: list[ResourcePatternFilter] = []

    def add(f: ResourcePatternFilter) -> None:
        if f not in filters:
            filters.append(f)

    for topic in args.topic or []:
        add(ResourcePatternFilter(ResourceType.TOPIC, topic.strip(), pattern_type))
    if pattern_type == PatternType.LITERAL and (args.cluster or args.idempotent):
        add(CLUSTER_FILTER)
    for group in args.group or []:
        add(ResourcePatternFilter(ResourceType.GROUP, group.strip(), pattern_type))
    for transactional_id in args.transactional_id or []:
        add(ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, transactional_id, pattern_type))
    for token in args.delegation_token or []:
        add(ResourcePatternFilter(ResourceType.DELEGATION_TOKEN, token.strip(), pattern_type))
    for user in args.user_principal or []:
        add(ResourcePatternFilter(ResourceType.USER, user.strip(), pattern_type))
    if not filters and die_if_none:
        raise UsageError(
            "You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
            "--delegation-token <Delegation Token ID>"
        )
    return filters


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    return [parse_operation(o.strip()) for o in (args.operation or ["All"])]


def filter_to_acls(args: argparse.Namespace) -> dict[ResourcePatternFilter, list[AccessControlEntry]]:
    """Kafka's getResourceFilterToAcls: the entries for each resource, from the options or from the
    --producer / --consumer sets; operations a resource type does not support refused."""
    result: dict[ResourcePatternFilter, list[AccessControlEntry]] = {}
    if not args.producer and not args.consumer:
        acls = entries(args, _operations(args))
        for f in resource_filters(args):
            result[f] = acls
    if args.producer:
        filters = resource_filters(args)
        topic_acls = entries(args, (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE))
        txn_acls = entries(args, (AclOperation.WRITE, AclOperation.DESCRIBE))
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                result[f] = topic_acls
            elif f.resource_type == ResourceType.TRANSACTIONAL_ID:
                result[f] = txn_acls
        if args.idempotent:
            result[CLUSTER_FILTER] = entries(args, (AclOperation.IDEMPOTENT_WRITE,))
    if args.consumer:
        filters = resource_filters(args)
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                acls = entries(args, (AclOperation.READ, AclOperation.DESCRIBE))
            elif f.resource_type == ResourceType.GROUP:
                acls = entries(args, (AclOperation.READ,))
            else:
                continue
            result[f] = acls + [a for a in result.get(f, []) if a not in acls]
    for f, acls in result.items():
        valid = (*SUPPORTED_OPERATIONS[f.resource_type], AclOperation.ALL)
        if any(a.operation not in valid for a in acls):
            raise UsageError(
                f"ResourceType {f.resource_type.name} only supports operations "
                + ", ".join(operation_name(o) for o in valid)
            )
    return result


def resource_to_acls(args: argparse.Namespace) -> dict[ResourcePattern, list[AccessControlEntry]]:
    """Kafka's getResourceToAcls, for --add."""
    pattern_type: PatternType = args.resource_pattern_type
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError(
            f"A '--resource-pattern-type' value of '{pattern_type.name}' is not valid when adding acls."
        )
    result = {
        ResourcePattern(f.resource_type, f.name or "", f.pattern_type): acls
        for f, acls in filter_to_acls(args).items()
    }
    if any(not acls for acls in result.values()):
        raise UsageError(
            "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."
        )
    return result


# -- output ------------------------------------------------------------------------------------------


def _entry_key(e: AccessControlEntry) -> tuple[str, str, int, int]:
    return (e.principal, e.host, e.operation, e.permission_type)


def _lines(acls: Iterable[AccessControlEntry]) -> str:
    return NEWLINE.join(f"\t{a}" for a in sorted(acls, key=_entry_key))


def adding_message(resource: ResourcePattern, acls: Iterable[AccessControlEntry]) -> str:
    return f"Adding ACLs for resource `{resource}`: {NEWLINE} {_lines(acls)} {NEWLINE}"


def current_message(resource: ResourcePattern, acls: Iterable[AccessControlEntry]) -> str:
    return f"Current ACLs for resource `{resource}`: {NEWLINE} {_lines(acls)} {NEWLINE}"


def group_bindings(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, list[AccessControlEntry]]:
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        acls = grouped.setdefault(b.pattern, [])
        if b.entry not in acls:
            acls.append(b.entry)
    return grouped


def print_listing(args: argparse.Namespace, bindings: list[AclBinding]) -> None:
    grouped = group_bindings(bindings)
    principals = _principals(args.principal)
    if not principals:
        for resource, acls in grouped.items():
            print(current_message(resource, acls))
        return
    for principal in principals:
        print(f"ACLs for principal `{principal}`")
        for resource, acls in grouped.items():
            mine = [a for a in acls if a.principal == str(principal)]
            if mine:
                print(current_message(resource, mine))


def _confirm(args: argparse.Namespace, message: str) -> bool:
    if args.force:
        return True
    print(message)
    return sys.stdin.readline().strip().lower() == "y"


def removal_filters(
    args: argparse.Namespace,
) -> list[tuple[ResourcePatternFilter, list[AccessControlEntry], list[AclBindingFilter]]]:
    """For each resource filter the user confirmed: its entries and the binding filters to delete."""
    chosen = []
    for f, acls in filter_to_acls(args).items():
        if not acls:
            question = f"Are you sure you want to delete all ACLs for resource filter `{f}`? (y/n)"
            binding_filters = [AclBindingFilter(f, ANY_ENTRY)]
        else:
            question = (
                f"Are you sure you want to remove ACLs: {NEWLINE} {_lines(acls)} {NEWLINE} from resource "
                f"filter `{f}`? (y/n)"
            )
            binding_filters = [
                AclBindingFilter(
                    f, AccessControlEntryFilter(a.principal, a.host, a.operation, a.permission_type)
                )
                for a in acls
            ]
        if _confirm(args, question):
            chosen.append((f, acls, binding_filters))
    return chosen


# -- through the admin APIs --------------------------------------------------------------------------


def _filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    """A filter as the fields DescribeAclsRequest and DeleteAclsRequest's filters both carry."""
    pf, ef = f.pattern_filter, f.entry_filter
    return {
        "resource_type_filter": pf.resource_type,
        "resource_name_filter": pf.name,
        "pattern_type_filter": pf.pattern_type,
        "principal_filter": ef.principal,
        "host_filter": ef.host,
        "operation": ef.operation,
        "permission_type": ef.permission_type,
    }


async def describe_acls(admin: AdminClient, f: AclBindingFilter) -> list[AclBinding]:
    response = await admin.send(ApiKey.DESCRIBE_ACLS, DescribeAclsRequest(**_filter_fields(f)))
    if response.error_code != ErrorCode.NONE:
        raise CommandError(response.error_code, response.error_message)
    return [
        AclBinding(
            ResourcePattern(ResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type)),
            AccessControlEntry(
                a.principal, a.host, AclOperation(a.operation), AclPermissionType(a.permission_type)
            ),
        )
        for r in response.resources
        for a in r.acls
    ]


async def create_acls(admin: AdminClient, bindings: list[AclBinding]) -> None:
    request = CreateAclsRequest(
        creations=[
            CreateAclsRequest.AclCreation(
                resource_type=b.pattern.resource_type,
                resource_name=b.pattern.name,
                resource_pattern_type=b.pattern.pattern_type,
                **b.entry.wire_fields(),
            )
            for b in bindings
        ]
    )
    response = await admin.send(ApiKey.CREATE_ACLS, request)
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            raise CommandError(result.error_code, result.error_message)


async def delete_acls(admin: AdminClient, filters: list[AclBindingFilter]) -> None:
    request = DeleteAclsRequest(
        filters=[DeleteAclsRequest.DeleteAclsFilter(**_filter_fields(f)) for f in filters]
    )
    response = await admin.send(ApiKey.DELETE_ACLS, request)
    for result in response.filter_results:
        if result.error_code != ErrorCode.NONE:
            raise CommandError(result.error_code, result.error_message)
        for matching in result.matching_acls:
            if matching.error_code != ErrorCode.NONE:
                raise CommandError(matching.error_code, matching.error_message)


async def _run_admin(args: argparse.Namespace) -> None:
    security = command_config.client_security(args.command_config)
    if args.add:
        to_add = resource_to_acls(args)
    async with AdminClient(args.bootstrap_server, client_id="samsa-acls", security=security) as admin:
        if args.add:
            for resource, acls in to_add.items():
                print(adding_message(resource, acls))
                await create_acls(admin, [AclBinding(resource, a) for a in acls])
        elif args.remove:
            for _, _, binding_filters in removal_filters(args):
                await delete_acls(admin, binding_filters)
        else:
            filters = resource_filters(args, die_if_none=False)
            binding_filters = [AclBindingFilter(f, ANY_ENTRY) for f in filters] or [
                AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY), ANY_ENTRY)
            ]
            bindings: list[AclBinding] = []
            for binding_filter in binding_filters:
                bindings += await describe_acls(admin, binding_filter)
            print_listing(args, bindings)


# -- directly in ZooKeeper (deprecated --authorizer-properties) --------------------------------------


def _authorizer_properties(values: list[str]) -> dict[str, str]:
    """Kafka's CommandLineUtils.parseKeyValueArgs: ``key=value`` pairs."""
    props: dict[str, str] = {}
    for value in values:
        for item in value.split(","):
            if not item.strip():
                continue
            key, sep, val = item.partition("=")
            if not sep:
                raise UsageError(f"Invalid command line properties: {value}")
            props[key.strip()] = val.strip()
    return props


async def _run_zookeeper(args: argparse.Namespace) -> None:
    from zk.acls import ZkAclStore  # only this mode needs kazoo
    from zk.client import ZkClient

    props = _authorizer_properties(args.authorizer_properties)
    connect = props.get("zookeeper.connect")
    if not connect:
        raise UsageError('Missing required configuration "zookeeper.connect" which has no default value.')
    if args.authorizer is not None and args.authorizer not in ACL_AUTHORIZER_CLASS_NAMES:
        raise AdminError(f"Class {args.authorizer} cannot be found")
    to_add = resource_to_acls(args) if args.add else {}
    zk = ZkClient(connect, int(props.get("zookeeper.session.timeout.ms", "18000")), operation_timeout=30)
    await zk.start(timeout=float(props.get("zookeeper.connection.timeout.ms", "18000")) / 1000)
    try:
        store = ZkAclStore(zk)
        await store.create_paths()
        authorizer = AclAuthorizer(store=store)
        await authorizer.load()
        if args.add:
            for resource, acls in to_add.items():
                print(adding_message(resource, acls))
                for error in await authorizer.create_acls([AclBinding(resource, a) for a in acls]):
                    if error is not None:
                        print(f"Error while adding ACLs: {error.message or description(error.code)}")
        elif args.remove:
            for _, _, binding_filters in removal_filters(args):
                for removed in await authorizer.delete_acls(binding_filters):
                    for _, error in removed:
                        if error is not None:
                            print(f"Error while removing ACLs: {error.message or description(error.code)}")
        else:
            filters = resource_filters(args, die_if_none=False)
            bindings = (
                [b for f in filters for b in authorizer.acls(AclBindingFilter(f, ANY_ENTRY))]
                if filters
                else authorizer.acls()
            )
            print_listing(args, bindings)
    finally:
        await zk.close()


# -- main ----------------------------------------------------------------------------------------------


async def _run(args: argparse.Namespace) -> None:
    if args.bootstrap_server is not None:
        await _run_admin(args)
    else:
        await _run_zookeeper(args)


def main(argv: Sequence[str]) -> int:
    try:
        return run_command(_parser(), argv, check_args, _run, full_help=True)
    except CommandError as e:
        print(f"Error while executing ACL command: {e.java()}")
        print(f"java.util.concurrent.ExecutionException: {e.java()}")
        return 1
    except AdminError as e:
        print(f"Error while executing ACL command: {e}")
        return 1
