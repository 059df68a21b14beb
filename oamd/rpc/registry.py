"""The method registry and the handler contract.

A handler is a plain (synchronous) function ``Request -> Reply``. Handlers run one at a time in
arrival order, so they validate params and do the order-sensitive step (create the session, take a
place in its queue) and return at once: ``Result(value)`` when the answer is ready, or
``Deferred(work)`` for anything that awaits a model or the client. Being synchronous, a handler
cannot await a turn by mistake and hold up every later request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from oamd.errors import InternalError
from oamd.log import get_logger
from oamd.rpc.context import Request

__all__ = ["Deferred", "Handler", "Registry", "Reply", "Request", "Result"]

log = get_logger("oamd.rpc")


@dataclass(frozen=True, slots=True)
class Result:
    """The handler's answer, ready now."""

    value: Any


class Withdrawable(Protocol):
    """Work that took a place in a queue when its handler ran, and can give it up."""

    def __call__(self) -> Awaitable[Any]: ...

    def withdraw(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Deferred:
    """Work that runs concurrently after the handler returned; its return value is the result.

    It runs in its own cancel scope: cancelled (by ``shutdown``, a socket client's disconnect, or the
    end of the drain after stdio's end of input) it answers -32009.
    Work with a commit point (a turn) must leave no trace when cancelled before it.

    ``withdraw`` is set for work that took a place in a queue when the handler ran
    (``Deferred.queued``): when the connection refuses the request (too many in flight) it calls
    it and runs the work anyway, unanswered, so the place is given up in order without doing
    anything.
    """

    work: Callable[[], Awaitable[Any]]
    withdraw: Callable[[], None] | None = None

    @classmethod
    def queued(cls, work: Withdrawable) -> Deferred:
        return cls(work, work.withdraw)


Reply = Result | Deferred


Handler = Callable[[Request], Reply]


class Registry:
    """Maps ``namespace/verb`` to a handler; lists methods and emitted notifications in order."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self._notifications: list[str] = []
        self._client_requests: list[str] = []

    def register(self, method: str, handler: Handler) -> None:
        """Adds (or replaces: extensions may override built-ins) the handler of ``method``."""
        self._handlers[method] = handler

    def register_on_first_use(
        self, what: str, methods: Sequence[str], load: Callable[[Registry], None]
    ) -> None:
        """Lists ``methods`` now and loads their handlers when one of them is first called:
        ``load`` registers the real handlers in place of these stand-ins (start-up stays light).

        A ``load`` that fails answers that request -32603 naming ``what`` and is tried again on
        the next call; every other method keeps working.
        """

        def stand_in(req: Request) -> Reply:
            try:
                load(self)
            except Exception as exc:
                log.error("namespace_unavailable", namespace=what, exc_info=exc)
                raise InternalError(
                    f"The {what} methods could not be loaded ({type(exc).__name__}: {exc})."
                ) from exc
            handler = self._handlers.get(req.method)
            if handler is None or handler is stand_in:
                raise InternalError(f"The {what} methods do not include '{req.method}'.")
            return handler(req)

        for method in methods:
            self._handlers[method] = stand_in

    def declare_notification(self, method: str) -> None:
        """Records a notification the daemon may send, for ``initialize``'s capabilities."""
        if method not in self._notifications:
            self._notifications.append(method)

    def declare_client_request(self, method: str) -> None:
        """Records a request the daemon may send to the client (``tool/call``)."""
        if method not in self._client_requests:
            self._client_requests.append(method)

    def get(self, method: str) -> Handler | None:
        return self._handlers.get(method)

    @property
    def handlers(self) -> dict[str, Handler]:
        """The live method → handler map (the connection reads it directly on the hot path)."""
        return self._handlers

    @property
    def methods(self) -> list[str]:
        return sorted(self._handlers)

    @property
    def notifications(self) -> list[str]:
        return list(self._notifications)

    @property
    def client_requests(self) -> list[str]:
        return list(self._client_requests)
