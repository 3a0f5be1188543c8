"""The log of refused requests: one WARNING line per request a handler refuses with an error code
(a bad CRC, a batch too large, an invalid topic name, a policy violation, a request from someone who is
not the controller), naming the peer, the client id, the API and the error.

A client that sends bad requests in a loop must not be able to fill the disk, so lines go through a
token bucket (``BURST`` lines at once, then ``PER_SECOND``); what the bucket drops is counted, and the
next line that is written says how many were left out.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from server_common.log import LogThrottle

if TYPE_CHECKING:
    from network.request_channel import Request

log = logging.getLogger(__name__)

BURST = 20
PER_SECOND = 2.0

# Errors that describe the cluster's state rather than a bad request: clients meet them in normal
# operation (a leader moved, the ISR shrank, a topic is still being created) and retry.
ROUTINE_ERRORS = frozenset(
    {
        ErrorCode.NONE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)


_refusals = LogThrottle(BURST, PER_SECOND)


def log_refusal(request: Request, error: int, detail: str | None = None) -> None:
    """Logs that ``request`` was refused with ``error``; ``detail`` says what was wrong (the partition or
    topic at fault and why), as the error message sent back does."""
    if not _refusals.allow():
        return
    suppressed, _refusals.suppressed = _refusals.suppressed, 0
    log.warning(
        "refused %s v%d from %s (client %s): %s%s%s",
        request.api.name,
        request.version,
        request.peer,
        request.client_id,
        _name(error),
        f": {detail}" if detail else "",
        f" ({suppressed} more refusals not logged)" if suppressed else "",
    )


def log_partition_refusals(request: Request, errors: Iterable[tuple[str, int, str | None]]) -> None:
    """Logs, in one line, the partitions (``topic-partition``, error, message) of ``request`` refused for
    something other than a routine error."""
    refused = [(tp, code, message) for tp, code, message in errors if code not in ROUTINE_ERRORS]
    if refused:
        detail = "; ".join(f"{tp}: {_name(code)}{f' ({m})' if m else ''}" for tp, code, m in refused)
        log_refusal(request, refused[0][1], detail)


def _name(error: int) -> str:
    try:
        return ErrorCode(error).name
    except ValueError:
        return f"error {error}"
