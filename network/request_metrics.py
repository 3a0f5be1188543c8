"""The network layer's metrics: Kafka's RequestMetrics per API, the request and response queues, the
connections per listener, and how idle the event loop and the request handlers are.

A request's way through the server is stamped on it (``Request.received_at`` .. ``response_sent_at``,
see network/request_channel.py) by the processor and the handler pool; once its response has been
handed to the socket in full (a request without a response: once it is complete) ``NetworkMetrics.
record`` turns the stamps into Kafka's time histograms (RequestChannel.Request.updateRequestMetrics) and
hands the request to the request log (network/request_log.py). Error counts come from the response when
it is complete (Kafka's RequestChannel.sendResponse: ``updateErrorMetrics(response.errorCounts)``): every
``...ErrorCode`` field of the response, top level and nested (topics, partitions), each occurrence
counted under its code's Errors name, NONE included, as AbstractResponse.errorCounts does.

Hot path: per request a few float subtractions, one counter and nine histogram children kept per API
(no label lookups but the version's and the error code's), and per response one walk over its error
code fields planned once per (API, version) from the schema.

The idle shares (Kafka's NetworkProcessorAvgIdlePercent and RequestHandlerAvgIdlePercent, 0..1): every
processor and handler of Samsa runs on the one event loop, so ``LoopIdleSampler`` samples, once a
second, the CPU time of the loop's thread (``time.thread_time``) against the wall clock; the network
idle share is the loop's idle share over the last minute. The handlers' idle share is the share of
the handler workers' time (``num.io.threads`` times the wall time) not spent inside a handler (from
being taken off the queue to returning: the local time), over the same minute, and at most the loop's
idle share (a busy loop leaves workers waiting for it, which is not idleness).
"""

from __future__ import annotations

import asyncio
import logging
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from network.request_channel import Request
from network.request_log import RequestLog
from protocol.api import ApiKey
from protocol.errors import ErrorCode
from protocol.schema import FieldSpec, MessageSpec
from server_common.metrics import SIZE_BUCKETS, Counter, CounterChild, Histogram, HistogramChild, Metrics

if TYPE_CHECKING:
    from network.socket_server import SocketServer

log = logging.getLogger(__name__)

# Kafka's RequestMetrics names for a Fetch from a follower and from a consumer: a Fetch is counted under
# "Fetch" and under one of these (RequestChannel.Request.updateRequestMetrics).
FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"
_FETCH = int(ApiKey.FETCH)
_NOTHING: tuple[None, tuple[float, ...], float] = (None, (), 0.0)  # a series not observed this time

# A plan for reading a response's error codes: (attribute, None) for an error code field,
# (attribute, sub-plan) for a struct or an array of structs that holds some.
Plan = tuple[tuple[str, Any], ...]


def _plan(spec: MessageSpec, fields: list[FieldSpec], version: int) -> Plan:
    plan: list[tuple[str, Any]] = []
    for f in fields:
        if version not in f.versions:
            continue
        if f.type == "int16" and f.name.endswith("ErrorCode"):
            plan.append((f.attr, None))
            continue
        element = f.element_type
        sub_fields = f.fields if f.fields is not None else spec.structs.get(element)
        if sub_fields is None:
            continue
        sub = _plan(spec, sub_fields, version)
        if sub:
            plan.append((f.attr, sub))
    return tuple(plan)


# A plan compiled into a function counting a response's error codes into a dict: the walk of a Produce
# or Fetch response runs once per request, and as straight-line code it costs a fraction of a generic
# recursive walk (the attribute names come from Kafka's schemas, never from a request).
ErrorWalker = Callable[[Any, dict[int, int]], None]


def _compile(plan: Plan) -> ErrorWalker:
    lines = ["def walk(o0, counts):", "    pass"]
    names = iter(range(1_000_000))

    def emit(plan: Plan, obj: str, indent: str) -> None:
        for attr, sub in plan:
            if sub is None:
                lines.append(f"{indent}c = {obj}.{attr}")
                lines.append(f"{indent}counts[c] = counts.get(c, 0) + 1")
                continue
            n = next(names)
            value, item = f"v{n}", f"o{n}"
            lines.append(f"{indent}{value} = {obj}.{attr}")
            lines.append(f"{indent}if type({value}) is list:")
            lines.append(f"{indent}    for {item} in {value}:")
            emit(sub, item, indent + "        ")
            lines.append(f"{indent}elif {value} is not None:")
            emit(sub, value, indent + "    ")

    emit(plan, "o0", "    ")
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), "<error walker>", "exec"), namespace)
    walker: ErrorWalker = namespace["walk"]
    return walker


def error_counts(
    body: Any, version: int, walkers: dict[tuple[type, int], ErrorWalker] | None = None
) -> dict[int, int]:
    """Kafka's AbstractResponse.errorCounts for a response message: code -> occurrences."""
    key = (type(body), version)
    walker = walkers.get(key) if walkers is not None else None
    if walker is None:
        spec: MessageSpec = type(body)._spec
        walker = _compile(_plan(spec, spec.fields, version))
        if walkers is not None:
            walkers[key] = walker
    counts: dict[int, int] = {}
    walker(body, counts)
    return counts


def error_name(code: int) -> str:
    """The Errors enum name of a code (UNKNOWN_SERVER_ERROR for a code Kafka does not define, as
    Errors.forCode answers)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR.name


def is_follower_fetch(body: Any, version: int) -> bool:
    """Kafka's FetchRequest.isFromFollower: the replica id (v15+: the replica state's) is a broker's."""
    if body is None:
        return False
    if version >= 15:
        state = body.replica_state
        return state is not None and state.replica_id >= 0
    return body.replica_id >= 0


class _ApiMetrics:
    """The series of one ``request`` label value (an API's name, or FetchConsumer / FetchFollower)."""

    __slots__ = (
        "_requests",
        "_requests_by_version",
        "local",
        "name",
        "queue",
        "remote",
        "request_bytes",
        "response_bytes",
        "response_queue",
        "send",
        "size_bounds",
        "throttle",
        "time_bounds",
        "total",
    )

    def __init__(self, name: str, families: NetworkMetrics) -> None:
        self.name = name
        self._requests = families.requests
        self._requests_by_version: dict[int, CounterChild] = {}
        self.queue: HistogramChild = families.request_queue_time.labels(name)
        self.local: HistogramChild = families.local_time.labels(name)
        self.remote: HistogramChild = families.remote_time.labels(name)
        self.throttle: HistogramChild = families.throttle_time.labels(name)
        self.response_queue: HistogramChild = families.response_queue_time.labels(name)
        self.send: HistogramChild = families.response_send_time.labels(name)
        self.total: HistogramChild = families.total_time.labels(name)
        self.request_bytes: HistogramChild = families.request_bytes.labels(name)
        self.response_bytes: HistogramChild = families.response_bytes.labels(name)
        self.time_bounds = families.total_time.bounds
        self.size_bounds = families.request_bytes.bounds

    def requests(self, version: int) -> CounterChild:
        child = self._requests_by_version.get(version)
        if child is None:
            child = self._requests_by_version[version] = self._requests.labels(self.name, str(version))
        return child

    def observe(
        self,
        request: Request,
        queue_ms: float,
        local_ms: float,
        remote_ms: float,
        response_queue_ms: float,
        send_ms: float,
        total_ms: float,
    ) -> None:
        """One request into every series of this API, with ``HistogramChild.observe``'s arithmetic in
        one loop rather than a call per histogram (this runs once per request)."""
        child = self._requests_by_version.get(request.version) or self.requests(request.version)
        child.value += 1
        find = bisect_left
        response_size = request.response_size
        for h, bounds, value in (
            (self.queue, self.time_bounds, queue_ms),
            (self.local, self.time_bounds, local_ms),
            (self.remote, self.time_bounds, remote_ms),
            (self.throttle, self.time_bounds, request.throttle_time_ms),
            (self.response_queue, self.time_bounds, response_queue_ms),
            (self.send, self.time_bounds, send_ms),
            (self.total, self.time_bounds, total_ms),
            (self.request_bytes, self.size_bounds, request.size),
            (self.response_bytes, self.size_bounds, response_size) if response_size else _NOTHING,
        ):
            if h is not None:
                h.counts[find(bounds, value)] += 1
                h.sum += value


class NetworkMetrics:
    """The network metrics of one SocketServer (a broker's or a controller's), in its registry."""

    def __init__(self, metrics: Metrics, request_log: RequestLog | None = None) -> None:
        self.metrics = metrics
        self.request_log = request_log if request_log is not None else RequestLog()
        self.requests: Counter = self._counter(
            "kafka_network_requestmetrics_requests",
            "Requests handled, by API and version (RequestMetrics RequestsPerSec).",
            ("request", "version"),
        )
        self.errors: Counter = self._counter(
            "kafka_network_requestmetrics_errors",
            "Error codes in responses, each occurrence, by API and Errors name, NONE included "
            "(RequestMetrics ErrorsPerSec).",
            ("request", "error"),
        )

        def time_histogram(name: str, what: str) -> Histogram:
            return self._histogram(f"kafka_network_requestmetrics_{name}", what, ("request",))

        self.request_queue_time = time_histogram(
            "requestqueuetimems", "Milliseconds a request waited for a request handler (RequestQueueTimeMs)."
        )
        self.local_time = time_histogram(
            "localtimems", "Milliseconds a request handler worked on a request (LocalTimeMs)."
        )
        self.remote_time = time_histogram(
            "remotetimems",
            "Milliseconds a response waited after its handler returned: followers' acks, a long poll, "
            "a rebalance (RemoteTimeMs).",
        )
        self.throttle_time = time_histogram(
            "throttletimems", "The throttle_time_ms of responses, in milliseconds (ThrottleTimeMs)."
        )
        self.response_queue_time = time_histogram(
            "responsequeuetimems",
            "Milliseconds a complete response waited for the responses before it on its connection "
            "(ResponseQueueTimeMs).",
        )
        self.response_send_time = time_histogram(
            "responsesendtimems",
            "Milliseconds from a response's turn on its connection until it was handed to the socket in "
            "full (ResponseSendTimeMs).",
        )
        self.total_time = time_histogram(
            "totaltimems", "Milliseconds from a request's arrival to its response sent (TotalTimeMs)."
        )
        self.request_bytes = self._histogram(
            "kafka_network_requestmetrics_requestbytes",
            "Request sizes in bytes, size prefix and header included (RequestBytes).",
            ("request",),
            SIZE_BUCKETS,
        )
        self.response_bytes = self._histogram(
            "kafka_network_requestmetrics_responsebytes",
            "Response sizes in bytes, size prefix and header included.",
            ("request",),
            SIZE_BUCKETS,
        )
        self.connections_created: Counter = self._counter(
            "kafka_server_socketserver_connectioncreation",
            "Connections accepted, by listener (socket-server-metrics connection-creation-total).",
            ("listener",),
        )
        self.connections_closed: Counter = self._counter(
            "kafka_server_socketserver_connectionclose",
            "Connections closed, by listener (socket-server-metrics connection-close-total).",
            ("listener",),
        )
        self._by_api: dict[int, _ApiMetrics] = {}
        self._fetch_split: tuple[_ApiMetrics, _ApiMetrics] | None = None
        self._errors: dict[tuple[int, int], CounterChild] = {}
        self._walkers: dict[tuple[type, int], ErrorWalker] = {}
        self._created: dict[str, CounterChild] = {}
        self._closed: dict[str, CounterChild] = {}

    def _counter(self, name: str, doc: str, labels: tuple[str, ...]) -> Counter:
        self.metrics.unregister(name)  # a SocketServer made again in the same process takes over
        return self.metrics.counter(name, doc, labels)

    def _histogram(
        self, name: str, doc: str, labels: tuple[str, ...], buckets: Iterable[float] | None = None
    ) -> Histogram:
        self.metrics.unregister(name)
        if buckets is None:
            return self.metrics.histogram(name, doc, labels)
        return self.metrics.histogram(name, doc, labels, tuple(buckets))

    def gauge(self, name: str, doc: str, read: Callable[[], Any], labels: tuple[str, ...] = ()) -> None:
        self.metrics.unregister(name)
        self.metrics.gauge(name, doc, read, labels)

    # -- per request ----------------------------------------------------------------------------

    def _api(self, request: Request) -> _ApiMetrics:
        api = request.api
        found = self._by_api.get(api.key)
        if found is None:
            found = self._by_api[api.key] = _ApiMetrics(api.name, self)
        return found

    def completed(self, request: Request, body: Any) -> None:
        """``request``'s response ``body`` is ready: its error codes are counted, its throttle kept."""
        version = request.version
        request.throttle_time_ms = getattr(body, "throttle_time_ms", 0) or 0
        try:
            counts = error_counts(body, version, self._walkers)
        except Exception:  # a response the schema does not describe: no error counts, never a failure
            log.debug("no error counts for a %s v%d response", request.api.name, version, exc_info=True)
            return
        key = request.api.key
        errors = self._errors
        for code, n in counts.items():
            child = errors.get((key, code))
            if child is None:
                child = errors[(key, code)] = self.errors.labels(request.api.name, error_name(code))
            child.inc(n)

    def record(self, request: Request) -> None:
        """``request`` is done (its response handed to the socket, or it has none): its times go into
        the histograms of its API (and a Fetch's FetchConsumer / FetchFollower), then to the request log."""
        received = request.received_at
        dequeued = request.dequeued_at or received
        local_done = request.api_local_done_at or dequeued
        complete = request.response_complete_at or local_done
        response_dequeued = request.response_dequeued_at or complete
        sent = request.response_sent_at or response_dequeued
        queue_ms = (dequeued - received) * 1000
        local_ms = (local_done - dequeued) * 1000
        remote_ms = (complete - local_done) * 1000
        response_queue_ms = (response_dequeued - complete) * 1000
        send_ms = (sent - response_dequeued) * 1000
        total_ms = (sent - received) * 1000
        m = self._by_api.get(request.api.key) or self._api(request)
        m.observe(request, queue_ms, local_ms, remote_ms, response_queue_ms, send_ms, total_ms)
        if request.api.key == _FETCH:
            split = self._fetch_split
            if split is None:
                consumer, follower = _ApiMetrics(FETCH_CONSUMER, self), _ApiMetrics(FETCH_FOLLOWER, self)
                split = self._fetch_split = (consumer, follower)
            m = split[is_follower_fetch(request.body, request.version)]
            m.observe(request, queue_ms, local_ms, remote_ms, response_queue_ms, send_ms, total_ms)
        request_log = self.request_log
        if request_log.enabled or (request_log.slow_ms and total_ms >= request_log.slow_ms):
            request_log.log(request, total_ms, queue_ms, local_ms, remote_ms, response_queue_ms, send_ms)

    # -- per connection -------------------------------------------------------------------------

    def connection_created(self, listener: str) -> None:
        child = self._created.get(listener)
        if child is None:
            child = self._created[listener] = self.connections_created.labels(listener)
        child.inc()

    def connection_closed(self, listener: str) -> None:
        child = self._closed.get(listener)
        if child is None:
            child = self._closed[listener] = self.connections_closed.labels(listener)
        child.inc()


class LoopIdleSampler:
    """Samples the event loop thread's CPU time and the handlers' busy time once a ``interval`` and
    answers the idle shares over the last ``window`` seconds (see the module's docstring)."""

    def __init__(
        self,
        handler_busy: Callable[[], float],
        io_threads: Callable[[], int],
        *,
        interval: float = 1.0,
        window: float = 60.0,
    ) -> None:
        """``handler_busy()``: seconds the handler workers have spent in handlers so far;
        ``io_threads()``: how many workers there are now."""
        self._handler_busy = handler_busy
        self._io_threads = io_threads
        self.interval = interval
        # (wall seconds, loop thread CPU seconds, handler busy seconds, worker seconds so far)
        size = max(2, int(window / interval) + 1)
        self._samples: deque[tuple[float, float, float, float]] = deque(maxlen=size)
        self._worker_seconds = 0.0

    def sample(self) -> None:
        """Takes one sample; must run on the event loop's thread."""
        now = time.monotonic()
        samples = self._samples
        if samples:
            self._worker_seconds += (now - samples[-1][0]) * max(self._io_threads(), 1)
        samples.append((now, time.thread_time(), self._handler_busy(), self._worker_seconds))

    async def run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.interval)

    def _span(self) -> tuple[float, float, float, float] | None:
        samples = self._samples
        if len(samples) < 2:
            return None
        (w0, c0, b0, s0), (w1, c1, b1, s1) = samples[0], samples[-1]
        if w1 <= w0:
            return None
        return w1 - w0, c1 - c0, b1 - b0, s1 - s0

    def loop_idle(self) -> float:
        """The share of the last window the event loop's thread did not use the CPU (1.0 until two
        samples have been taken)."""
        span = self._span()
        if span is None:
            return 1.0
        wall, cpu, _, _ = span
        return min(max(1.0 - cpu / wall, 0.0), 1.0)

    def handler_idle(self) -> float:
        span = self._span()
        if span is None:
            return 1.0
        _, _, busy, worker = span
        idle = 1.0 - busy / worker if worker > 0 else 1.0
        return min(max(idle, 0.0), self.loop_idle())


def register_network_metrics(server: SocketServer, sampler: LoopIdleSampler) -> None:
    """The gauges read from a SocketServer's state when scraped."""
    metrics = server.network_metrics

    def connection_counts() -> list[tuple[tuple[str, ...], int]]:
        counts = {a.endpoint.listener: 0 for a in server.acceptors}
        for processor in server.processors:
            for connection in processor.connections:
                counts[connection.listener] = counts.get(connection.listener, 0) + 1
        return [((listener,), n) for listener, n in counts.items()]

    metrics.gauge(
        "kafka_server_socketserver_connectioncount",
        "Open connections, by listener (socket-server-metrics connection-count).",
        connection_counts,
        ("listener",),
    )
    metrics.gauge(
        "kafka_network_requestchannel_requestqueuesize",
        "Requests waiting for a request handler (RequestChannel RequestQueueSize).",
        lambda: len(server.channel),
    )
    metrics.gauge(
        "kafka_network_requestchannel_responsequeuesize",
        "Responses complete but not yet handed to the socket (RequestChannel ResponseQueueSize).",
        lambda: sum(c.responses_queued() for p in server.processors for c in p.connections),
    )
    metrics.gauge(
        "kafka_network_socketserver_networkprocessoravgidlepercent",
        "Share (0..1) of the last minute the event loop, which runs every network processor, was idle "
        "(SocketServer NetworkProcessorAvgIdlePercent).",
        sampler.loop_idle,
    )
    metrics.gauge(
        "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
        "Share (0..1) of the request handler workers' time over the last minute not spent in a handler, "
        "at most the event loop's idle share (KafkaRequestHandlerPool RequestHandlerAvgIdlePercent).",
        sampler.handler_idle,
    )
