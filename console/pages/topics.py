"""The Topics pages.

``/topics``: every topic (name, internal, partitions, replication factor, size, messages, message rate,
under-replicated partitions) from the shared snapshot, filtered by the query string (``name``: a
substring; ``internal=hide``), live; and the form that creates a topic (CreateTopics).

``/topics/<name>``: the topic's partitions (leader, replicas with those out of the ISR marked, ISR, log
start and end offsets, size) from the snapshot, its configs (DescribeConfigs; non-default ones marked),
the reassignments of its partitions in progress (ListPartitionReassignments), live; and its actions:
delete, add partitions, set or delete a config, preferred-leader election, reassignment. The actions are
console/topic_actions.py's; a reassignment's targets are kept in ``Console.state`` so that the progress
view can say when the partitions have the replicas asked for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import Any

from aiohttp import web

from console import topic_actions
from console.app import Console, console_of, fragment, message
from console.cluster import TopicInfo
from console.live import Sections, live_page, view
from console.topic_actions import ActionError, ConfigRow
from tools.admin_client import AdminClient

NAV = ("/topics", "Topics")
routes = web.RouteTableDef()

# Console.state key: {topic: {partition: replicas asked for}} of the reassignments started here.
REASSIGNMENTS = "topics.reassignments"


def _targets(console: Console) -> dict[str, dict[int, list[int]]]:
    targets: dict[str, dict[int, list[int]]] = console.state.setdefault(REASSIGNMENTS, {})
    return targets


def _filtered(topics: Mapping[str, TopicInfo], query: Mapping[str, str]) -> list[TopicInfo]:
    needle = query.get("name", "").strip().lower()
    hide_internal = query.get("internal") == "hide"
    return [
        t
        for name, t in sorted(topics.items())
        if needle in name.lower() and not (hide_internal and t.internal)
    ]


@view("topics")
async def topics_view(console: Console, query: Mapping[str, str]) -> Sections:
    snapshot = await console.snapshots.get()
    shown = _filtered(snapshot.topics, query)
    return {
        "topic-list": console.render(
            "topics/_list.html", topics=shown, total=len(snapshot.topics), warnings=snapshot.warnings
        )
    }


@routes.get("/topics")
async def topics_page(request: web.Request) -> web.Response:
    return await live_page(
        request,
        "topics/page.html",
        "Topics",
        "topics",
        name_filter=request.query.get("name", ""),
        hide_internal=request.query.get("internal") == "hide",
    )


@routes.post("/topics")
async def create_topic(request: web.Request) -> web.Response:
    console = console_of(request)
    form = await request.post()
    name = str(form.get("name", "")).strip()
    try:
        await topic_actions.create_topic(
            await console.client.admin(),
            name,
            str(form.get("partitions", "")),
            str(form.get("replication_factor", "")),
            str(form.get("configs", "")),
        )
    except ActionError as e:
        return message(request, str(e), ok=False)
    console.snapshots.invalidate()
    return fragment(request, "topics/_created.html", name=name)


# -- one topic ----------------------------------------------------------------------------------------


@view("topic")
async def topic_view(console: Console, query: Mapping[str, str]) -> Sections:
    name = query.get("topic", "")
    snapshot = await console.snapshots.knowing(name)
    topic = snapshot.topics.get(name)
    if topic is None or topic.error is not None:
        why = f"Topic {name} does not exist." if topic is None else f"Topic {name}: {topic.error}"
        missing = console.render("_message.html", text=why, ok=False)
        return {"topic-summary": missing, "partitions": "", "configs": "", "reassignment": ""}
    admin = await console.client.admin()
    partitions = [p.partition for p in topic.partitions]
    (configs, configs_error), (ongoing, ongoing_error) = await asyncio.gather(
        _configs(admin, name), _reassignments(admin, name, partitions)
    )
    current = {p.partition: p.replicas for p in topic.partitions}
    progress = topic_actions.progress(_targets(console).get(name, {}), ongoing, current)
    return {
        "topic-summary": console.render("topics/_summary.html", topic=topic, warnings=snapshot.warnings),
        "partitions": console.render("topics/_partitions.html", topic=topic),
        "configs": console.render("topics/_configs.html", configs=configs, error=configs_error),
        "reassignment": console.render("topics/_reassignment.html", progress=progress, error=ongoing_error),
    }


async def _configs(admin: AdminClient, name: str) -> tuple[list[ConfigRow], str | None]:
    """The configs, or why they could not be read (the rest of the page still shows)."""
    try:
        return await topic_actions.topic_configs(admin, name), None
    except ActionError as e:
        return [], str(e)


async def _reassignments(
    admin: AdminClient, name: str, partitions: list[int]
) -> tuple[dict[int, Any], str | None]:
    try:
        return await topic_actions.reassignments(admin, name, partitions), None
    except ActionError as e:
        return {}, str(e)


@routes.get("/topics/{name}")
async def topic_page(request: web.Request) -> web.Response:
    console = console_of(request)
    name = request.match_info["name"]
    topic = (await console.snapshots.knowing(name)).topics.get(name)
    return await live_page(
        request,
        "topics/topic.html",
        f"Topic {name}",
        "topic",
        query={"topic": name},
        name=name,
        partitions=topic.partitions if topic is not None else [],
    )


async def _action(request: web.Request, work: Awaitable[str]) -> web.Response:
    """Runs an action and answers its outcome in words; the next snapshot is a new one."""
    console = console_of(request)
    try:
        text = await work
    except ActionError as e:
        return message(request, str(e), ok=False)
    console.snapshots.invalidate()
    return message(request, text)


@routes.post("/topics/{name}/delete")
async def delete_topic(request: web.Request) -> web.Response:
    console = console_of(request)
    name = request.match_info["name"]
    response = await _action(request, topic_actions.delete_topic(await console.client.admin(), name))
    _targets(console).pop(name, None)
    return response


@routes.post("/topics/{name}/partitions")
async def add_partitions(request: web.Request) -> web.Response:
    console = console_of(request)
    form = await request.post()
    return await _action(
        request,
        topic_actions.add_partitions(
            await console.client.admin(), request.match_info["name"], str(form.get("count", ""))
        ),
    )


@routes.post("/topics/{name}/configs")
async def alter_config(request: web.Request) -> web.Response:
    console = console_of(request)
    form = await request.post()
    return await _action(
        request,
        topic_actions.alter_config(
            await console.client.admin(),
            request.match_info["name"],
            str(form.get("key", "")),
            str(form.get("value", "")),
            delete=form.get("op") == "delete",
        ),
    )


@routes.post("/topics/{name}/elect")
async def elect_leaders(request: web.Request) -> web.Response:
    console = console_of(request)
    name = request.match_info["name"]
    topic = (await console.snapshots.get(fresh=True)).topics.get(name)
    if topic is None:
        return message(request, f"Topic {name} does not exist.", ok=False)
    admin = await console.client.admin()
    return await _action(
        request, topic_actions.elect_preferred_leaders(admin, name, [p.partition for p in topic.partitions])
    )


@routes.post("/topics/{name}/reassign")
async def reassign(request: web.Request) -> web.Response:
    console = console_of(request)
    name = request.match_info["name"]
    form = await request.post()
    topic = (await console.snapshots.get(fresh=True)).topics.get(name)
    if topic is None:
        return message(request, f"Topic {name} does not exist.", ok=False)
    fields = {
        p.partition: str(form[f"replicas-{p.partition}"])
        for p in topic.partitions
        if f"replicas-{p.partition}" in form
    }
    current = {p.partition: p.replicas for p in topic.partitions}
    try:
        text, started = await topic_actions.start_reassignment(
            await console.client.admin(), name, fields, current
        )
    except ActionError as e:
        return message(request, str(e), ok=False)
    _targets(console)[name] = started
    console.snapshots.invalidate()
    return message(request, text + " Its progress shows below.")
