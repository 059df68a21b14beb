"""What a handler is given: a ``Request``, the narrow context of one message (its id, method and
params, the connection's state, and the few things a handler may ask of its connection), never
the connection itself.

The connection is seen through ``ConnectionPort``, a protocol ``Connection`` implements, so this
module (and ``registry``, which hands requests to handlers) imports nothing of ``connection`` at
any level: the connection depends on the contract, not the other way round.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

__all__ = ["ClientCall", "ConnectionPort", "Request"]

Work = Callable[[], Awaitable[Any]]


class ClientCall(Protocol):
    """A request the daemon sent to the client (``tool/call``), waiting for its reply."""

    id: str

    @property
    def reply(self) -> Any: ...

    async def wait(self) -> Any: ...

    def abandon(self) -> None: ...


class ConnectionPort(Protocol):
    """What a request may ask of the connection it came in on."""

    state: Any

    def send_notification(self, method: str, params: dict[str, Any]) -> None: ...

    def start_call(self, method: str, params: dict[str, Any]) -> ClientCall: ...

    def start_deferred(self, msg_id: Any, work: Work, *, respond: bool = True) -> None: ...

    async def wait_writable(self) -> None: ...

    def begin_shutdown(self, *, reply_pending: bool = False) -> None: ...

    def close_after_reply(self) -> None: ...

    async def cancel_all(self) -> None: ...


class Request:
    """One message as its handler sees it, and what the handler may do beyond answering it."""

    __slots__ = ("_conn", "id", "method", "params")

    def __init__(self, conn: ConnectionPort, id: Any, method: str, params: dict[str, Any]) -> None:
        self._conn = conn
        self.id = id
        self.method = method
        self.params = params

    @property
    def is_notification(self) -> bool:
        return self.id is None

    @property
    def state(self) -> Any:
        """The per-connection state the application attached (sessions, NPCs, worlds)."""
        return self._conn.state

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Sends a notification to the client (an event, ``world/changed``, ``tool/cancel``)."""
        self._conn.send_notification(method, params)

    def call(self, method: str, params: dict[str, Any]) -> ClientCall:
        """Sends a request to the client (``tool/call``); its reply bypasses every queue."""
        return self._conn.start_call(method, params)

    def follow_up(self, work: Work) -> None:
        """Runs the daemon's own work after this request (compaction, prefill), unanswered and
        cancelled with the rest at shutdown."""
        self._conn.start_deferred(None, work, respond=False)

    async def wait_writable(self) -> None:
        """Until the connection's outbox has room: a streaming turn's pace."""
        await self._conn.wait_writable()

    @property
    def port(self) -> ConnectionPort:
        """The connection as the contract sees it, for what outlives this request (a store's
        change sink): such a holder must read ``port.state`` each time, never keep the state,
        since a closed connection lets go of its state to break the cycle through the sink."""
        return self._conn

    def begin_shutdown(self) -> None:
        """``shutdown``: every later request fails -32023, after this one's answer."""
        self._conn.begin_shutdown(reply_pending=not self.is_notification)

    def close_after_reply(self) -> None:
        self._conn.close_after_reply()

    async def cancel_all(self) -> None:
        """Cancels the connection's other in-flight work and waits (bounded) for its answers."""
        await self._conn.cancel_all()
