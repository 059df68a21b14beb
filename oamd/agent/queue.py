"""TurnQueue: one session's (or NPC's) turn-affecting operations, one after another.

Rules:

1. **The place in line is taken when the handler schedules**, so pipelined requests run in
   arrival order; operations of different queues run in parallel.
2. **``commit()`` is the point of no return.** Work calls it right before it changes state,
   with no await between the commit and the change. A cancel that comes before the commit wins:
   the operation ends with ``Cancelled`` and leaves no trace. After it, the operation completes
   normally and a cancel does not count it.
3. **``cancel_all()`` cancels the running operation and every queued one** that has not
   committed, and returns how many it cancelled.
4. **At most ``MAX_QUEUED_OPERATIONS`` wait or run at once**; one more fails -32055
   ``limit_reached`` before it takes a place, so a client cannot pile up work (and the params
   each queued turn holds) without bound. The daemon's own follow-ups (compaction) are exempt.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import anyio

from oamd.errors import Cancelled, LimitReached
from oamd.limits import MAX_QUEUED_OPERATIONS

__all__ = ["Operation", "OperationState", "Scheduled", "TurnQueue"]

T = TypeVar("T")


class OperationState(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    COMMITTED = "committed"
    CANCELLED = "cancelled"


class Operation:
    """One scheduled operation; the work it runs receives it to call ``commit``."""

    __slots__ = ("_scope", "state")

    def __init__(self) -> None:
        self.state = OperationState.QUEUED
        self._scope: anyio.CancelScope | None = None

    def commit(self) -> None:
        """Marks the point of no return.

        Raises:
            Cancelled: a cancel came first; the caller must change nothing.
        """
        if self.state is OperationState.CANCELLED:
            raise Cancelled()
        self.state = OperationState.COMMITTED

    @property
    def committed(self) -> bool:
        return self.state is OperationState.COMMITTED

    def withdraw(self) -> None:
        """Gives the place in line up without running the work: the operation still waits for
        the one before it, so the ones after it keep their order, then ends ``Cancelled``."""
        if self.state is OperationState.QUEUED:
            self.state = OperationState.CANCELLED

    def cancel(self) -> bool:
        """Cancels the operation unless it committed; returns whether it did."""
        if self.state in (OperationState.COMMITTED, OperationState.CANCELLED):
            return False
        self.state = OperationState.CANCELLED
        if self._scope is not None:
            self._scope.cancel()
        return True


class Scheduled(Generic[T]):
    """What ``TurnQueue.schedule`` returns: call it to run the operation in its place; or
    ``withdraw()`` first, and the call only waits its turn and ends ``Cancelled``."""

    __slots__ = ("_run", "operation")

    def __init__(self, run: Callable[[], Awaitable[T]], operation: Operation) -> None:
        self._run = run
        self.operation = operation

    def __call__(self) -> Awaitable[T]:
        return self._run()

    def withdraw(self) -> None:
        self.operation.withdraw()


class TurnQueue:
    def __init__(self) -> None:
        self._operations: list[Operation] = []
        self._tail: anyio.Event | None = None

    def schedule(
        self, work: Callable[[Operation], Awaitable[T]], *, follow_up: bool = False
    ) -> Scheduled[T]:
        """Takes a place in line now; returns the coroutine function that runs ``work`` there.

        The returned function raises ``Cancelled`` when the operation was cancelled before it
        committed (including while it waited for its turn).

        Raises:
            LimitReached: ``MAX_QUEUED_OPERATIONS`` are already waiting or running (not for a
                ``follow_up`` the daemon schedules itself).
        """
        if len(self._operations) >= MAX_QUEUED_OPERATIONS and not follow_up:
            raise LimitReached(
                "queued operations",
                MAX_QUEUED_OPERATIONS,
                f"{MAX_QUEUED_OPERATIONS} operations are already queued or running here; wait "
                "for their answers (or cancel them) before sending more.",
            )
        operation = Operation()
        operation._scope = anyio.CancelScope()
        previous, done = self._tail, anyio.Event()
        self._tail = done
        self._operations.append(operation)

        async def run() -> T:
            try:
                assert operation._scope is not None
                with operation._scope:
                    if previous is not None:
                        await previous.wait()
                    if operation.state is OperationState.CANCELLED:
                        raise Cancelled()  # withdrawn, or cancelled at the moment its turn came
                    if operation.state is OperationState.QUEUED:
                        operation.state = OperationState.RUNNING
                    result = await work(operation)
                if operation.state is OperationState.CANCELLED:
                    raise Cancelled()
                return result
            except Exception:
                if operation.state is OperationState.CANCELLED:
                    raise Cancelled() from None
                raise
            finally:
                done.set()
                self._operations.remove(operation)

        return Scheduled(run, operation)

    def cancel_all(self) -> int:
        return sum(op.cancel() for op in list(self._operations))

    @property
    def pending(self) -> int:
        """Operations running or waiting (committed ones still finishing included)."""
        return len(self._operations)
