"""The topic patterns the tools take (``--topic``, ``--topic-white-list``), read as Kafka's
TopicFilter.IncludeList reads them."""

from __future__ import annotations

import re


def topic_filter(pattern: str) -> re.Pattern[str]:
    """Commas mean "or", spaces and surrounding quotes are dropped; ValueError for a bad regex."""
    regex = pattern.strip().replace(",", "|").replace(" ", "")
    regex = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", regex))
    try:
        return re.compile(regex)
    except re.error:
        raise ValueError(f"{pattern} is an invalid regex") from None
