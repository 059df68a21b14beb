"""Watching connections: an optional observer of their lifetimes, and the request whose deferred
work runs in the current task.

Off unless a ``ConnectionWatch`` is set in the context (``CONNECTION_WATCH``; ``oamd --inspect``
sets one for the daemon's whole task tree): then each ``Connection`` reports itself to it when it
starts serving and when it has closed. ``current_request`` tells the code that deferred work runs
(a turn, its tracer) which request it serves, on which connection. A watch runs on the
protocol's path: what it raises is logged and costs nothing else.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol

from oamd.log import get_logger
from oamd.rpc.context import Request

__all__ = [
    "CONNECTION_WATCH",
    "ConnectionWatch",
    "WatchedConnection",
    "current_request",
    "report",
]

log = get_logger("oamd.rpc")


class WatchedConnection(Protocol):
    """What a watch may read of a connection (``Connection`` is one)."""

    state: Any

    @property
    def lifecycle(self) -> Any: ...

    @property
    def in_flight_count(self) -> int: ...

    def extra(self, attribute: Any, default: Any = None) -> Any: ...


class ConnectionWatch(Protocol):
    def opened(self, conn: WatchedConnection) -> None:
        """``conn`` starts serving (its ``state`` is set; nothing has been read yet)."""

    def closed(self, conn: WatchedConnection) -> None:
        """``conn`` has closed: everything it ran has ended (its ``state`` is still set)."""


CONNECTION_WATCH: ContextVar[ConnectionWatch | None] = ContextVar(
    "oamd_connection_watch", default=None
)
"""The watch of every connection that starts serving in this context (``None``: unwatched)."""

CURRENT_REQUEST: ContextVar[Request | None] = ContextVar("oamd_current_request", default=None)
"""Set by the connection in the task of each request's deferred work."""


def current_request() -> Request | None:
    """The request whose deferred work runs in this task (``None`` elsewhere)."""
    return CURRENT_REQUEST.get()


def report(watch: ConnectionWatch, event: str, conn: WatchedConnection) -> None:
    """Tells ``watch`` that ``conn`` ``opened`` or ``closed``, containing what it raises."""
    try:
        getattr(watch, event)(conn)
    except Exception:
        log.exception("connection_watch_failed", event=event)
