"""ZkClient: kazoo, bridged to asyncio.

kazoo runs its I/O, callbacks and watches on its own threads. ``ZkClient`` turns kazoo's async results
into asyncio futures on the caller's loop, delivers watch and session events to that loop, and retries
an operation that failed because the connection was lost until the connection is back (as Kafka's
``retryRequestsUntilConnected``), giving up after ``operation_timeout``. Retries are capped: kazoo
reconnects with a backoff of at most one second instead of its default of an hour. ``operation_timeout``
does not bound a request made while disconnected: kazoo holds it until it reconnects. A read that must
not wait that long (a broker's controlled shutdown) passes a ``timeout`` of its own, which bounds it all.

A retried write can find its own earlier attempt already applied (NodeExists, BadVersion); callers
that write with versions re-read and decide, as Kafka's controller does. A write too large for the
server is refused before it is sent (``ZkRequestTooLargeError``): the server answers one by closing the
connection, which a retry would only repeat until ``operation_timeout``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.protocol.states import ZnodeStat
from kazoo.retry import KazooRetry

if TYPE_CHECKING:
    from server_common.metrics import HistogramChild

log = logging.getLogger(__name__)

_RETRYABLE = (ConnectionLoss, OperationTimeoutError)

# ZooKeeper's default jute.maxbuffer: the server closes the connection of a request longer than this.
JUTE_MAX_BUFFER = 0xFFFFF
# The bytes of a request besides its ops, and of an op besides its path and data, at most: the request
# and multi headers, the length prefixes, the open ACL and the flags of a create.
_REQUEST_FRAMING = 32
_OP_FRAMING = 64


class ZkTransactionError(KazooException):
    """A multi-op transaction failed; ``errors`` holds each op's result (the failing op's real error)."""

    def __init__(self, errors: Sequence[Any]) -> None:
        self.errors = list(errors)
        failing = next(
            (e for e in self.errors if type(e).__name__ not in ("RolledBackError", "RuntimeInconsistency")),
            None,
        )
        self.cause = failing
        super().__init__(f"ZooKeeper transaction failed: {failing!r}")


class ZkRequestTooLargeError(KazooException):
    """A write longer than the server's jute.maxbuffer, refused before it was sent."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            f"the ZooKeeper request would be {size} bytes, over ZooKeeper's limit of {limit} bytes "
            "(jute.maxbuffer)"
        )


@dataclass(frozen=True)
class ZkOp:
    """One operation of a transaction: ``kind`` is check, create, set or delete."""

    kind: str
    path: str
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False  # for create: the controller creates /controller in its election transaction


class ZkClient:
    def __init__(self, hosts: str, session_timeout_ms: int = 18000, operation_timeout: float = 30.0) -> None:
        self.hosts = hosts
        self.operation_timeout = operation_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connected = asyncio.Event()
        self._session_listeners: list[Callable[[str], None]] = []
        self._kazoo = KazooClient(
            hosts=hosts,
            timeout=session_timeout_ms / 1000,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=1.5, max_delay=1.0),
            command_retry=KazooRetry(max_tries=3, delay=0.1, backoff=2, max_delay=1.0),
        )
        self._kazoo.add_listener(self._on_state)
        self._watches: list[Any] = []
        # Told each request's latency in ms on the event loop (zk/zk_metrics.py sets it), or None.
        self.request_latency: HistogramChild | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self, timeout: float = 30.0) -> None:
        self._loop = asyncio.get_running_loop()
        await self._loop.run_in_executor(None, lambda: self._create_chroot(timeout))
        await self._loop.run_in_executor(None, lambda: self._kazoo.start(timeout=timeout))
        self._connected.set()
        log.info("connected to ZooKeeper at %s (session 0x%x)", self.hosts, self.session_id)

    async def close(self) -> None:
        self._session_listeners.clear()  # a deliberate close is not a lost session
        self._loop = None
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._kazoo.stop)
        await loop.run_in_executor(None, self._kazoo.close)

    def _create_chroot(self, timeout: float) -> None:
        # "host:port/samsa" puts everything under /samsa; like Kafka, create that path if it is missing.
        servers, _, chroot = self.hosts.partition("/")
        if not chroot.strip("/"):
            return
        bare = KazooClient(hosts=servers, timeout=self._kazoo._session_timeout / 1000)
        bare.start(timeout=timeout)
        try:
            bare.ensure_path("/" + chroot.strip("/"))
        finally:
            bare.stop()
            bare.close()

    @property
    def session_id(self) -> int:
        return self._kazoo.client_id[0] if self._kazoo.client_id else 0

    @property
    def kazoo(self) -> KazooClient:
        return self._kazoo

    def add_session_listener(self, listener: Callable[[str], None]) -> None:
        """``listener(state)`` runs on the event loop with "SUSPENDED", "LOST" (the session expired: its
        ephemeral nodes are gone) or "CONNECTED"."""
        self._session_listeners.append(listener)

    def _on_state(self, state: str) -> None:  # on a kazoo thread
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(self._state_changed, state)

    def _state_changed(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
        log.info("ZooKeeper session %s", state.lower())
        for listener in list(self._session_listeners):
            listener(state)

    # -- the bridge -----------------------------------------------------------------------------

    def _future(self, async_result: Any, started: float) -> asyncio.Future:
        """``started``: when the request was handed to kazoo (monotonic), for its latency."""
        loop = self._loop or asyncio.get_running_loop()
        future = loop.create_future()

        def observe(elapsed_ms: float) -> None:
            latency = self.request_latency
            if latency is not None:
                latency.observe(elapsed_ms)

        def fail(e: BaseException, elapsed_ms: float) -> None:  # on the loop
            observe(elapsed_ms)
            if not future.done():
                future.set_exception(e)

        def succeed(value: Any, elapsed_ms: float) -> None:  # on the loop
            observe(elapsed_ms)
            if not future.done():
                future.set_result(value)

        def done(result: Any) -> None:  # on a kazoo thread
            elapsed_ms = (time.monotonic() - started) * 1000
            try:
                value = result.get_nowait()
            except Exception as e:
                loop.call_soon_threadsafe(fail, e, elapsed_ms)
            else:
                loop.call_soon_threadsafe(succeed, value, elapsed_ms)

        async_result.rawlink(done)
        return future

    async def _call(self, start: Callable[[], Any], timeout: float | None = None) -> Any:
        """Runs the operation ``start`` begins, retried as the module says; with ``timeout``, raises
        TimeoutError once that many seconds have passed, however far it got. Only reads should pass one:
        a write given up on is still sent if kazoo held it, once the connection is back."""
        if timeout is not None:
            async with asyncio.timeout(timeout):
                return await self._call(start)
        deadline = time.monotonic() + self.operation_timeout
        while True:
            try:
                started = time.monotonic()
                return await self._future(start(), started)
            except _RETRYABLE as e:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise
                log.debug("ZooKeeper operation interrupted (%s); retrying once reconnected", type(e).__name__)
                try:
                    async with asyncio.timeout(remaining):
                        await self._connected.wait()
                except TimeoutError:
                    raise e from None
            except SessionExpiredError:
                # kazoo starts a new session by itself; the operation can go to the new one.
                async with asyncio.timeout(max(deadline - time.monotonic(), 0.01)):
                    await self._connected.wait()

    def _check_size(self, writes: Sequence[tuple[str, bytes]]) -> None:
        """Raises ZkRequestTooLargeError if the (path, data) writes, as one request, could be longer
        than JUTE_MAX_BUFFER (an upper bound: chroot and framing included)."""
        chroot = len(self._kazoo.chroot.encode())
        size = _REQUEST_FRAMING + sum(
            _OP_FRAMING + chroot + len(path.encode()) + len(data) for path, data in writes
        )
        if size > JUTE_MAX_BUFFER:
            raise ZkRequestTooLargeError(size, JUTE_MAX_BUFFER)

    # -- operations -----------------------------------------------------------------------------

    async def get(self, path: str, timeout: float | None = None) -> tuple[bytes, ZnodeStat] | None:
        """(data, stat), or None if the node does not exist; TimeoutError past ``timeout`` s if given."""
        try:
            return await self._call(lambda: self._kazoo.get_async(path), timeout)
        except NoNodeError:
            return None

    async def get_children(self, path: str) -> list[str] | None:
        try:
            return await self._call(lambda: self._kazoo.get_children_async(path))
        except NoNodeError:
            return None

    async def exists(self, path: str) -> ZnodeStat | None:
        return await self._call(lambda: self._kazoo.exists_async(path))

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        self._check_size([(path, data)])
        return await self._call(
            lambda: self._kazoo.create_async(
                path, data, ephemeral=ephemeral, sequence=sequence, makepath=makepath
            )
        )

    async def create_returning_stat(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False
    ) -> ZnodeStat:
        """Creates a node and returns its stat (an ephemeral node's ``czxid`` is a broker's epoch)."""
        self._check_size([(path, data)])
        _, stat = await self._call(
            lambda: self._kazoo.create_async(path, data, ephemeral=ephemeral, include_data=True)
        )
        return stat

    async def ensure_path(self, path: str) -> None:
        await self._call(lambda: self._kazoo.ensure_path_async(path))

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        self._check_size([(path, data)])
        return await self._call(lambda: self._kazoo.set_async(path, data, version))

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        if recursive:
            for child in await self.get_children(path) or []:
                await self.delete(f"{path}/{child}", recursive=True)
        try:
            await self._call(lambda: self._kazoo.delete_async(path, version))
        except NoNodeError:
            pass

    async def transaction(self, ops: Sequence[ZkOp]) -> list[Any]:
        """Runs ``ops`` atomically; raises ZkTransactionError (with every op's result) if any fails."""
        self._check_size([(op.path, op.data) for op in ops])

        def start() -> Any:
            t = self._kazoo.transaction()
            for op in ops:
                if op.kind == "check":
                    t.check(op.path, op.version)
                elif op.kind == "create":
                    t.create(op.path, op.data, ephemeral=op.ephemeral)
                elif op.kind == "set":
                    t.set_data(op.path, op.data, op.version)
                elif op.kind == "delete":
                    t.delete(op.path, op.version)
                else:
                    raise ValueError(f"unknown transaction op {op.kind}")
            return t.commit_async()

        results = await self._call(start)
        if any(isinstance(r, Exception) for r in results):
            raise ZkTransactionError(results)
        return results

    # -- watches --------------------------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> None:
        """``callback(children)`` runs on the event loop now and after every change (re-armed by kazoo,
        also across sessions). The node must exist (see ``znodes.PERSISTENT_PATHS``)."""
        loop = self._loop or asyncio.get_running_loop()

        def on_change(children: list[str]) -> None:  # on a kazoo thread
            loop.call_soon_threadsafe(callback, list(children))

        self._watches.append(self._kazoo.ChildrenWatch(path, on_change))

    def watch_data(self, path: str, callback: Callable[[bytes | None, ZnodeStat | None], None]) -> None:
        """``callback(data, stat)`` runs on the event loop now and after every change; ``data`` is None
        while the node does not exist."""
        loop = self._loop or asyncio.get_running_loop()

        def on_change(data: bytes | None, stat: ZnodeStat | None) -> None:  # on a kazoo thread
            loop.call_soon_threadsafe(callback, data, stat)

        self._watches.append(self._kazoo.DataWatch(path, on_change))
