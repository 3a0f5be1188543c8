"""ControllerFence: which LeaderAndIsr, UpdateMetadata and StopReplica requests a broker accepts.

Those of the active controller, meant for this incarnation of the broker. Anyone can connect and send
these requests; the fence holds without authentication, on what ZooKeeper says:

- The broker epoch (KIP-380) must be this broker's: the czxid of its registration ``/brokers/ids/<id>``.
  A request without one (-1: a version older than KIP-380, or a sender that does not know it) or with
  an older one gets STALE_BROKER_EPOCH; Samsa's controller always sends it. A newer one happens for a
  moment after the broker registered again (the controller saw the new registration before the broker
  learnt its czxid, the race Kafka's ``isBrokerEpochStale`` notes): it is accepted only if ZooKeeper
  shows this session's registration with that czxid.
- The controller id and epoch must be ZooKeeper's ``/controller`` and ``/controller_epoch``. The fence
  keeps them as last read. A request naming anything else has them read again (a new controller's
  first request may come before the fence heard of it), and a watch on both znodes has them read again
  before the next request once they change (a deposed controller is then refused at its old epoch). An
  epoch older than the one known is refused without a read. Kafka's broker adopts any newer controller
  epoch it is sent, relying on the authorizer (CLUSTER_ACTION); this fence believes nothing ZooKeeper
  does not say.

Kafka has no error code for a sender that is not the active controller (an unauthorized one gets
CLUSTER_AUTHORIZATION_FAILED, which belongs with authentication), so a controller id or epoch
ZooKeeper does not confirm gets STALE_CONTROLLER_EPOCH, the code of a controller that is no longer the
active one.

When ZooKeeper cannot be read (not connected, or no answer within ``READ_TIMEOUT``), a request that
needs a read is neither believed nor answered: the caller closes the connection, since a controller
resends a request whose connection broke but not one answered with an error. Reads are shared:
requests that arrive while one is in flight wait for the next, so a flood of forged requests costs
ZooKeeper one read at a time, and a request holds its handler worker for at most about two reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import KazooException

from protocol.errors import ErrorCode
from zk import znodes
from zk.client import ZkClient
from zk.kafka_zk_client import KafkaZkClient

NO_BROKER_EPOCH = -1  # Kafka's AbstractControlRequest.UNKNOWN_BROKER_EPOCH
INITIAL_CONTROLLER_EPOCH = 0  # Kafka's: no controller elected yet
# ZooKeeper answers a read in milliseconds; one that takes longer is as good as lost, and meanwhile the
# request holds a handler worker.
READ_TIMEOUT = 3.0


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a controller request is refused: the ``error`` to answer with and a ``detail`` for the log.
    ``unanswered``: ZooKeeper could not be read; close the connection instead of answering."""

    error: int
    detail: str
    unanswered: bool = False


class _ZooKeeperUnreachableError(Exception):
    pass


class _SharedRead:
    """Runs ``read`` on behalf of concurrent callers, one run at a time. A caller waits for a run that
    started after it called (an earlier one may predate the change it needs to see) and shares its
    outcome with every caller that arrived before that run started."""

    def __init__(self, zk: ZkClient, read: Callable[[], Awaitable[None]]) -> None:
        self._zk = zk
        self._read = read
        self._lock = asyncio.Lock()
        self._calls = 0
        self._answered = 0  # the calls made before the latest run started
        self._failure: str | None = None  # why the latest run failed

    async def __call__(self) -> None:
        """Raises _ZooKeeperUnreachableError if the run failed."""
        self._calls += 1
        call = self._calls
        async with self._lock:
            if self._answered < call:
                self._answered, self._failure = self._calls, None
                try:
                    # Not connected: fail now rather than hold a worker until kazoo reconnects.
                    if not self._zk.kazoo.connected:
                        raise _ZooKeeperUnreachableError("not connected")
                    async with asyncio.timeout(READ_TIMEOUT):
                        await self._read()
                except TimeoutError:
                    self._failure = f"no answer within {READ_TIMEOUT:g} s"
                except (KazooException, _ZooKeeperUnreachableError) as e:
                    self._failure = str(e) or type(e).__name__
            failure = self._failure
        if failure is not None:
            raise _ZooKeeperUnreachableError(failure)


class ControllerFence:
    def __init__(self, kafka_zk: KafkaZkClient, broker_id: int) -> None:
        self._kafka_zk = kafka_zk
        self._broker_id = broker_id
        # The active controller as last read from ZooKeeper (None: no controller elected).
        self.controller_id: int | None = None
        self.controller_epoch = INITIAL_CONTROLLER_EPOCH
        self._changes = 0  # watch notifications of /controller and /controller_epoch so far
        self._changes_read = -1  # ... as counted when the values above were read (-1: never read)
        self._read_controller = _SharedRead(kafka_zk.zk, self._read_active_controller)
        self._registered_epoch: int | None = None  # this session's registration's czxid, as last read
        self._read_registration = _SharedRead(kafka_zk.zk, self._read_registered_epoch)

    def start(self) -> None:
        """Watches ``/controller`` and ``/controller_epoch`` (before the broker serves requests)."""
        self._kafka_zk.zk.watch_data(znodes.CONTROLLER, self._on_change)
        self._kafka_zk.zk.watch_data(znodes.CONTROLLER_EPOCH, self._on_change)

    def _on_change(self, data: bytes | None, stat: Any) -> None:
        # Only noted: the next request reads both znodes, in order with the reads requests make.
        self._changes += 1

    async def _read_active_controller(self) -> None:
        changes = self._changes
        controller_id = await self._kafka_zk.get_controller_id()
        epoch = await self._kafka_zk.get_controller_epoch()
        self.controller_id = controller_id
        self.controller_epoch = INITIAL_CONTROLLER_EPOCH if epoch is None else epoch
        self._changes_read = changes

    async def _read_registered_epoch(self) -> None:
        self._registered_epoch = await self._kafka_zk.get_registered_broker_epoch(self._broker_id)

    def _active(self) -> str:
        if self.controller_id is None:
            return f"no active controller (latest epoch {self.controller_epoch})"
        return f"controller {self.controller_id} at epoch {self.controller_epoch}"

    async def check(
        self, controller_id: int, controller_epoch: int, broker_epoch: int, current_broker_epoch: int
    ) -> Refusal | None:
        """None if a request of controller ``controller_id`` at ``controller_epoch`` for broker epoch
        ``broker_epoch`` may be applied by this broker, whose epoch is ``current_broker_epoch``; else
        why not."""
        sender = f"controller {controller_id} at epoch {controller_epoch}"
        if broker_epoch == NO_BROKER_EPOCH:
            return Refusal(ErrorCode.STALE_BROKER_EPOCH, f"{sender} sent no broker epoch")
        if broker_epoch < current_broker_epoch:
            return Refusal(
                ErrorCode.STALE_BROKER_EPOCH,
                f"{sender} sent broker epoch {broker_epoch}, older than ours ({current_broker_epoch})",
            )
        if controller_epoch < self.controller_epoch:
            return Refusal(ErrorCode.STALE_CONTROLLER_EPOCH, f"{sender} is older than {self._active()}")
        error = ErrorCode.STALE_CONTROLLER_EPOCH
        try:
            if self._changes != self._changes_read or (controller_id, controller_epoch) != (
                self.controller_id,
                self.controller_epoch,
            ):
                await self._read_controller()
            if (controller_id, controller_epoch) != (self.controller_id, self.controller_epoch):
                return Refusal(error, f"ZooKeeper names {self._active()}, not {sender}")
            if broker_epoch > current_broker_epoch:
                error = ErrorCode.STALE_BROKER_EPOCH
                await self._read_registration()
                if broker_epoch != self._registered_epoch:
                    return Refusal(
                        error,
                        f"{sender} sent broker epoch {broker_epoch}, which is neither ours "
                        f"({current_broker_epoch}) nor that of this session's registration in ZooKeeper "
                        f"({self._registered_epoch})",
                    )
        except _ZooKeeperUnreachableError as e:
            return Refusal(
                error,
                f"{sender} (broker epoch {broker_epoch}) cannot be confirmed: ZooKeeper cannot be read "
                f"({e}); closing the connection unanswered, so that a controller resends it",
                unanswered=True,
            )
        return None
