"""Fair sharing of model generations among the clients of ``oamd serve``.

At most ``slots`` generations (model steps) run at once across every connection; when one ends,
its slot goes to the *client* whose turn it is, round-robin over the clients that are waiting, and
each client's own waiters are served first come, first served. A client that queued fifty turns
therefore delays another client's turn by at most one generation per waiting client, where a
plain FIFO ``CapacityLimiter`` would make it wait for all fifty.

Why around generations and not a per-connection bound on deferred work: the model is the scarce,
shared resource. Deferred work mostly waits — for the engine's ``tool/call`` replies, for its
place in a session's queue — and holds nothing while it does; bounding it would stall a client's
cheap requests behind its own slow ones, and could deadlock a turn waiting for a slot held by a
later turn of the same session. A slot is held only while a model step streams, never across a
``tool/call`` round trip.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Hashable

import anyio

from oamd.agent.models import ModelFactory, ModelMaker
from oamd.backends.base import GenerationEvent, GenerationRequest, LanguageModel, ScoredText, Scores
from oamd.backends.delegating import DelegatingModel

__all__ = ["FairGenerations"]


class _Ticket:
    __slots__ = ("event", "granted")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.granted = False


class FairGenerations:
    """A capacity limiter that hands free slots to waiting clients in turn (not in arrival order)."""

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._waiting: dict[Hashable, deque[_Ticket]] = {}  # insertion order is the round

    def models_for(self, factory: ModelFactory, client: Hashable) -> ModelFactory:
        """``factory`` for one client: the same backends, each generation taking a fair slot."""

        def fair(make: ModelMaker) -> ModelMaker:
            return lambda spec, path: _FairModel(make(spec, path), self, client)

        return ModelFactory(
            _FairModel(factory.system, self, client),
            {name: fair(make) for name, make in factory.types.items()},
            factory.allow_scripted,
            factory.bind,
        )

    async def acquire(self, client: Hashable) -> None:
        if self._free > 0:
            self._free -= 1
            return
        ticket = _Ticket()
        self._waiting.setdefault(client, deque()).append(ticket)
        try:
            await ticket.event.wait()
        except BaseException:
            if ticket.granted:
                self.release()  # handed over just as we were cancelled: pass it on
            else:
                queue = self._waiting.get(client)
                if queue is not None:
                    queue.remove(ticket)
                    if not queue:
                        del self._waiting[client]
            raise

    def release(self) -> None:
        if not self._waiting:
            self._free += 1
            return
        client = next(iter(self._waiting))
        queue = self._waiting.pop(client)
        ticket = queue.popleft()
        if queue:
            self._waiting[client] = queue  # back of the round
        ticket.granted = True
        ticket.event.set()


class _FairModel(DelegatingModel):
    """A backend seen by one client: every generation and every scoring holds a fair slot while
    it runs (both are model work); the rest passes through."""

    def __init__(self, inner: LanguageModel, fair: FairGenerations, client: Hashable) -> None:
        super().__init__(inner)
        self._fair = fair
        self._client = client

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        await self._fair.acquire(self._client)
        events = self.inner.generate(request)
        try:
            async for event in events:
                yield event
        finally:
            self._fair.release()
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()

    async def score(self, candidates: list[ScoredText]) -> Scores:
        await self._fair.acquire(self._client)
        try:
            return await self.inner.score(candidates)
        finally:
            self._fair.release()
