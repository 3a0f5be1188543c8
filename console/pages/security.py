"""The ACLs and users page (read-only, live): every ACL of the cluster, from DescribeAcls with a filter
that matches any binding (``tools.acls.describe_acls``, the function ``samsa acls --list`` uses), and the
users that have SCRAM credentials, from DescribeUserScramCredentials
(``tools.configs.describe_user_scram_credentials``, as ``samsa configs --describe --entity-type users``).

A cluster without an authorizer answers DescribeAcls with SECURITY_DISABLED: the page says so in words.
Each section fails on its own (a console user allowed to read one but not the other still sees it). The
query's ``q`` keeps the ACLs whose resource, principal, host, operation or permission contains it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aiohttp import web

from console.app import Console
from console.live import Sections, live_page, view
from protocol.errors import ErrorCode
from server_common.acl_authorizer import (
    ANY_ENTRY,
    AclBinding,
    AclBindingFilter,
    ResourcePatternFilter,
    operation_name,
    permission_type_name,
)
from server_common.acls import PatternType, ResourceType
from tools import acls, configs

NAV = ("/security", "ACLs and users")
routes = web.RouteTableDef()

MATCH_ANY = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY), ANY_ENTRY)


@dataclass(frozen=True, order=True)
class AclRow:
    """One ACL binding in the words the page shows (Kafka's names: TOPIC, LITERAL, Read, Allow)."""

    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str

    @classmethod
    def of(cls, binding: AclBinding) -> AclRow:
        pattern, entry = binding.pattern, binding.entry
        return cls(
            pattern.resource_type.name,
            pattern.name,
            pattern.pattern_type.name,
            entry.principal,
            entry.host,
            operation_name(entry.operation),
            permission_type_name(entry.permission_type),
        )

    def matches(self, text: str) -> bool:
        needle = text.lower()
        return any(needle in str(value).lower() for value in vars(self).values())


async def read_acls(console: Console, text: str = "") -> list[AclRow]:
    """Every ACL of the cluster (those containing ``text`` when given), sorted by resource then principal;
    acls.CommandError when the cluster refuses (SECURITY_DISABLED: it has no authorizer)."""
    bindings = await acls.describe_acls(await console.client.admin(), MATCH_ANY)
    rows = {AclRow.of(b) for b in bindings}
    return sorted(r for r in rows if not text or r.matches(text))


def _acls_section(
    console: Console, rows: list[AclRow] | None, error: acls.CommandError | None, q: str
) -> str:
    disabled = error is not None and error.code == ErrorCode.SECURITY_DISABLED
    return console.render(
        "security/_acls.html",
        rows=rows or [],
        error=None if error is None else error.message,
        denied=error is not None and error.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        disabled=disabled,
        q=q,
    )


@view("security")
async def security_view(console: Console, query: Mapping[str, str]) -> Sections:
    q = query.get("q", "").strip()
    try:
        acl_rows, acl_error = await read_acls(console, q), None
    except acls.CommandError as e:
        acl_rows, acl_error = None, e
    try:
        users = await configs.describe_user_scram_credentials(await console.client.admin())
        users_error = None
    except configs.CommandError as e:
        users, users_error = [], e.message
    return {
        "acls": _acls_section(console, acl_rows, acl_error, q),
        "users": console.render("security/_users.html", users=users, error=users_error),
    }


@routes.get("/security")
async def security_page(request: web.Request) -> web.Response:
    return await live_page(
        request, "security/page.html", "ACLs and users", "security", q=request.query.get("q", "")
    )
