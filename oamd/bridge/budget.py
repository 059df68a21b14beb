"""The connection's byte budget (``DaemonConfig.max_connection_bytes``, see
``oamd.limits.MAX_CONNECTION_BYTES``): what a request may add to what the connection holds.

What it holds (``Budget.held_bytes``) is kept by the objects, change by change: each session's
and NPC's history and footprint, each world's document (the parts of ``BridgeState``), and the
params of the operations still pending. A request that adds is refused -32055 ``limit_reached``
when that plus what the request adds would exceed the budget, checked where that size is known:

- when the request is read: a create by the size of what it creates; an operation that waits in
  a queue or runs a while by its params, which the connection then holds (``held``) until the
  operation ends;
- when a turn or an ``npc/update`` commits: by what it adds beyond the params it held, so one
  that would take the connection over fails, leaving no trace;
- when a world grows, however it is written: by the growth (``WorldState.room``).

Reading, deleting, resetting, compacting and cancelling are never refused, so the client can
always make room.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from oamd.agent.footprint import json_size
from oamd.errors import LimitReached

__all__ = ["Budget", "Part", "params_size"]


class Part(Protocol):
    """What a connection holds of one kind (its sessions; the game extension's NPCs and worlds):
    its bytes, and a way to let go of all of it."""

    def held_bytes(self) -> int: ...

    def clear(self) -> None: ...


def params_size(params: Any) -> int:
    """The JSON size of a request's params (or of one of them): what its queued work holds."""
    return json_size(params)


class Budget:
    """One connection's budget: ``limit`` bytes for what its ``parts`` hold and what its pending
    operations reserved. It reads the parts' own mapping (it does not hold the state), so a
    store's room check that holds the budget is no cycle back to the connection."""

    __slots__ = ("__weakref__", "_parts", "limit", "reserved")

    def __init__(self, limit: int, parts: Mapping[str, Part]) -> None:
        self.limit = limit
        self.reserved = 0
        """The params of the operations still waiting or running (``held``)."""
        self._parts = parts

    def held_bytes(self) -> int:
        """About how much the connection holds, as JSON: a sum over its objects (a few hundred
        at most), each of which keeps its own count, and the reserved params."""
        return self.reserved + sum(part.held_bytes() for part in self._parts.values())

    def check_room(self, adding: int) -> None:
        """Refuses ``adding`` more bytes when the connection would then hold more than its
        budget; never refuses what adds nothing.

        Raises:
            LimitReached: ``data.limit`` is the budget.
        """
        if adding <= 0:
            return
        holds = self.held_bytes()
        if holds + adding > self.limit:
            raise LimitReached(
                "bytes",
                self.limit,
                f"This connection holds about {holds} bytes and this would add {adding}; the "
                f"limit is {self.limit}. Delete, reset or compact sessions, NPCs or worlds first.",
            )

    def held(self, size: int, work: Callable[[], Awaitable[Any]]) -> _Held:
        """``work`` holding ``size`` bytes of the budget until it ends (call it last in a
        handler: nothing may fail between this and returning the work)."""
        return _Held(self, size, work)


class _Held:
    """A request's work, holding ``size`` bytes of the connection's budget from the moment the
    handler returns it until it ends, however it ends.

    It can always be withdrawn (the connection refuses a request past the in-flight cap by
    withdrawing its work and running it unanswered): queued work gives its place up in order;
    other work then does nothing. Either way it ends, and what it held is released.
    """

    __slots__ = ("_budget", "_queued", "_size", "_withdrawn", "_work")

    def __init__(self, budget: Budget, size: int, work: Callable[[], Awaitable[Any]]) -> None:
        # here, not at the top: the budget is made before ``initialize`` is answered, which
        # must not wait for the event loop's libraries (``agent.queue`` imports anyio)
        from oamd.agent.queue import Scheduled

        self._budget, self._size, self._work = budget, size, work
        self._queued = work if isinstance(work, Scheduled) else None
        self._withdrawn = False
        budget.reserved += size

    async def __call__(self) -> Any:
        try:
            if self._withdrawn and self._queued is None:
                return None
            return await self._work()
        finally:
            self._budget.reserved -= self._size
            self._size = 0

    def withdraw(self) -> None:
        self._withdrawn = True
        if self._queued is not None:
            self._queued.withdraw()  # waits its turn, then ends Cancelled
