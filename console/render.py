"""The console's Jinja2 environment: templates from the package, HTML escaped by default (record keys,
values and headers are anyone's bytes), and the filters pages format numbers with."""

from __future__ import annotations

import datetime
from typing import Any

import jinja2

UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def size(value: int | float | None) -> str:
    """Bytes in binary units: ``1.5 MiB``; an em dash when unknown."""
    if value is None:
        return "—"
    amount = float(value)
    for unit in UNITS:
        if abs(amount) < 1024 or unit == UNITS[-1]:
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    raise AssertionError("unreachable")


def number(value: int | float | None) -> str:
    """Thousands separated: ``1,234,567``; rates keep one decimal below 100."""
    if value is None:
        return "—"
    if isinstance(value, float) and abs(value) < 100:
        return f"{value:,.1f}"
    return f"{round(value):,}"


def timestamp(ms: int | None) -> str:
    """A record or event time (ms since the epoch) in UTC, as ISO 8601 to the millisecond."""
    if ms is None or ms < 0:
        return "—"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("console", "templates"),
        autoescape=jinja2.select_autoescape(["html"], default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(size=size, number=number, timestamp=timestamp)
    return env


def render(env: jinja2.Environment, template: str, **context: Any) -> str:
    return env.get_template(template).render(**context)
