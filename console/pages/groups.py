"""The Consumer groups pages: the list of every group (state, protocol, members, total lag,
coordinator) and a group's page (members with their assignments, committed offsets and lag per
partition, a chart of its lag over time), both live; and the group's actions as ``samsa
consumer-groups`` does them: reset offsets (a dry-run plan, then execute) and delete.

Each refresh of a groups view samples the lag it read into the console's LagHistory (console/group_lag.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from aiohttp import web

from console.app import Console, console_of, fragment, message
from console.client import ClusterUnavailable
from console.group_lag import history, list_groups, read_group, requests
from console.live import Sections, live_page, view
from protocol.errors import ErrorCode
from tools.admin_client import AdminError
from tools.consumer_groups.command import CommandError
from tools.consumer_groups.delete import delete_groups, deletion_failure
from tools.consumer_groups.reset_offsets import ResetPlan, ResetScenario, commit_offsets, plan_reset
from tools.usage import UsageError

NAV = ("/groups", "Consumer groups")
routes = web.RouteTableDef()

SCENARIOS = {
    "earliest": "to the earliest offset",
    "latest": "to the latest offset",
    "datetime": "to a time (UTC)",
    "offset": "to an offset",
    "shift": "shift by",
}


@view("groups")
async def groups_view(console: Console, query: Mapping[str, str]) -> Sections:
    snapshot = await console.snapshots.get()
    listed = await list_groups(await console.client.admin(), snapshot)
    lag = history(console.state)
    for g in listed.groups:
        lag.record(g.group_id, g.lag, g.lag_by_topic)
    return {"groups": console.render("groups/_list.html", listed=listed)}


@view("group")
async def group_view(console: Console, query: Mapping[str, str]) -> Sections:
    group_id = query.get("group", "")
    try:
        detail = await read_group(await console.client.admin(), group_id)
    except CommandError as e:
        return {"summary": console.render("_message.html", text=str(e), ok=False)}
    lag = history(console.state)
    if detail.group.state != "Dead":
        lag.record(group_id, detail.lag, detail.lag_by_topic)
    series, labels = lag.series(group_id)
    return {
        "summary": console.render("groups/_summary.html", detail=detail),
        "members": console.render("groups/_members.html", detail=detail),
        "offsets": console.render("groups/_offsets.html", detail=detail),
        "lag-chart": console.render(
            "groups/_lag_chart.html", series=json.dumps(series), labels=json.dumps(labels)
        ),
    }


@routes.get("/groups")
async def groups_page(request: web.Request) -> web.Response:
    return await live_page(request, "groups/list.html", "Consumer groups", "groups")


@routes.get("/groups/{group:.+}")
async def group_page(request: web.Request) -> web.Response:
    group_id = request.match_info["group"]
    console = console_of(request)
    topics: list[str] = []
    try:
        topics = (await read_group(await console.client.admin(), group_id)).topics
    except (CommandError, AdminError, ClusterUnavailable):
        pass  # the page's sections say why, and recover by themselves
    # The view reads the group from the query: the event stream's URL carries it.
    with_group = request.clone(rel_url=request.rel_url.with_query(group=group_id))
    return await live_page(
        with_group,
        "groups/page.html",
        f"Consumer group {group_id}",
        "group",
        group_id=group_id,
        topics=topics,
        scenarios=SCENARIOS,
    )


def scenario_of(form: Mapping[str, str]) -> ResetScenario:
    """The reset form as ``--reset-offsets`` options; ValueError in words for a value it cannot use."""
    scope, topic = form.get("scope", "all"), form.get("topic", "").strip()
    kind, value = form.get("scenario", ""), form.get("value", "").strip()
    if scope == "topic":
        if not topic:
            raise ValueError("Choose the topic whose offsets to reset.")
        scenario = ResetScenario(topics=[topic])
    else:
        scenario = ResetScenario(all_topics=True)
    if kind == "earliest":
        scenario.to_earliest = True
    elif kind == "latest":
        scenario.to_latest = True
    elif kind == "datetime":
        scenario.to_datetime = kafka_datetime(value)
    elif kind in ("offset", "shift"):
        if not re.fullmatch(r"[-+]?\d+", value):
            raise ValueError(f"{'The offset' if kind == 'offset' else 'The shift'} must be a whole number.")
        if kind == "offset":
            scenario.to_offset = int(value)
        else:
            scenario.shift_by = int(value)
    else:
        raise ValueError("Choose how to reset the offsets.")
    return scenario


def kafka_datetime(value: str) -> str:
    """A time as ``--to-datetime`` takes it (``yyyy-MM-ddTHH:mm:ss.SSS``, UTC unless a zone is given),
    completing the seconds and milliseconds a browser's time field leaves out."""
    if not value:
        raise ValueError("Give the time to reset to, e.g. 2024-01-31T12:00:00.000 (UTC).")
    value = value.replace(" ", "T", 1)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}", value):
        value += ":00.000"
    elif re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", value):
        value += ".000"
    return value


@routes.post("/groups/{group:.+}/reset")
async def reset_offsets(request: web.Request) -> web.Response:
    """Dry run (the plan, and a button to execute it) or execute (the plan computed again, as
    ``--execute`` does, and committed)."""
    group_id = request.match_info["group"]
    form = {k: str(v) for k, v in (await request.post()).items()}
    execute = form.get("mode") == "execute"
    admin = await console_of(request).client.admin()
    try:
        scenario = scenario_of(form)
        plan: ResetPlan = await plan_reset(requests(admin), group_id, scenario)
        if execute:
            await commit_offsets(admin, group_id, plan.offsets)
    except (ValueError, UsageError, CommandError) as e:
        return message(request, str(e), ok=False)
    return fragment(
        request,
        "groups/_reset_plan.html",
        group_id=group_id,
        plan=plan,
        rows=[(topic, partition, offset) for (topic, partition), offset in sorted(plan.offsets.items())],
        executed=execute,
        form={k: form.get(k, "") for k in ("scope", "topic", "scenario", "value")},
    )


@routes.post("/groups/{group:.+}/delete")
async def delete_group(request: web.Request) -> web.Response:
    group_id = request.match_info["group"]
    console = console_of(request)
    results = await delete_groups(await console.client.admin(), [group_id])
    code = results[group_id]
    if code != ErrorCode.NONE:
        return message(request, deletion_failure(group_id, code), ok=False)
    history(console.state).forget(group_id)
    return message(request, f"Group '{group_id}' was deleted.")
