"""How the typed API builds a request: params without the members left unset, a turn's events
handed to the caller's ``on_text`` / ``on_reset`` / ``on_event`` callbacks as they stream, and the cancel a turn
that timed out sends."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from oamd.client._errors import ConnectionClosed

if TYPE_CHECKING:
    from oamd.client._client import Client

__all__ = [
    "CANCEL_SEND_SECONDS",
    "EventCallback",
    "TextCallback",
    "cancelling_on_timeout",
    "event_router",
    "npc_reset",
    "npc_text",
    "present",
    "session_reset",
    "session_text",
]

EventCallback = Callable[[dict[str, Any]], None]
"""Receives each event of a turn as sent (``{"type": "text", "delta": …}``, ``modelStep``…)."""

TextCallback = Callable[[str], None]
"""Receives each piece of a turn's text as it streams (``on_text``), or the whole text that
replaces what streamed so far (``on_reset``)."""


CANCEL_SEND_SECONDS = 1.0
"""How long a timed-out turn waits to queue its cancel (while the outbox is full); past it the
cancel is not sent and the turn runs on in the daemon."""


async def cancelling_on_timeout(
    client: Client, request: Awaitable[Any], method: str, params: dict[str, Any]
) -> Any:
    """``request``'s result; should it time out, the notification ``method`` (``session/cancel``,
    ``npc/cancel``) goes out before the ``TimeoutError`` is raised, so the daemon stops the
    turn's model work (and its ``tool/call``s) instead of running it for nobody. A notification:
    nothing waits for its answer, and the line follows the turn's own in the outbox.

    Raises:
        TimeoutError: the request's ``timeout`` passed.
    """
    try:
        return await request
    except TimeoutError:
        with contextlib.suppress(ConnectionClosed):  # then no turn runs on for us anyway
            with anyio.move_on_after(CANCEL_SEND_SECONDS, shield=True):
                await client.notify(method, params)
        raise


def present(**members: Any) -> dict[str, Any]:
    """The members that were given (not ``None``), under their wire names."""
    return {name: value for name, value in members.items() if value is not None}


def event_router(
    on_text: TextCallback | None,
    on_event: EventCallback | None,
    text_of: Callable[[dict[str, Any]], str | None],
    on_reset: TextCallback | None = None,
    reset_of: Callable[[dict[str, Any]], str | None] | None = None,
) -> Callable[[dict[str, Any]], None] | None:
    """A notification callback passing each event to ``on_event``, its text (``text_of``) to
    ``on_text`` and the text a reset puts in place of what streamed so far (``reset_of``) to
    ``on_reset``; ``None`` when no callback is given (the turn is then not streamed)."""
    if on_text is None and on_event is None and on_reset is None:
        return None

    def route(params: dict[str, Any]) -> None:
        event = params.get("event")
        if not isinstance(event, dict):
            return
        if on_event is not None:
            on_event(event)
        if on_reset is not None and reset_of is not None:
            replaced = reset_of(event)
            if replaced is not None:
                on_reset(replaced)
                return
        if on_text is not None:
            text = text_of(event)
            if text:
                on_text(text)

    return route


def session_text(event: dict[str, Any]) -> str | None:
    """A ``session/event`` text delta; a reset's is not one (``session_reset`` has its text)."""
    if event.get("type") == "text" and not event.get("isReset"):
        return event.get("delta")
    return None


def session_reset(event: dict[str, Any]) -> str | None:
    """The whole text a ``session/event`` reset puts in place of what streamed before it."""
    if event.get("type") == "text" and event.get("isReset"):
        text = event.get("text")
        return text if isinstance(text, str) else ""
    return None


def npc_text(event: dict[str, Any]) -> str | None:
    """An ``npc/event`` line delta (a ``lineReset`` is not one: ``npc_reset`` has its line)."""
    return event.get("delta") if event.get("type") == "lineDelta" else None


def npc_reset(event: dict[str, Any]) -> str | None:
    """The line an ``npc/event`` ``lineReset`` puts in place of what streamed before it."""
    if event.get("type") == "lineReset":
        line = event.get("line")
        return line if isinstance(line, str) else ""
    return None
