"""How the typed API builds a request: params without the members left unset, and a turn's
events handed to the caller's ``on_text`` / ``on_event`` callbacks as they stream."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["EventCallback", "TextCallback", "event_router", "npc_text", "present", "session_text"]

EventCallback = Callable[[dict[str, Any]], None]
"""Receives each event of a turn as sent (``{"type": "text", "delta": …}``, ``modelStep``…)."""

TextCallback = Callable[[str], None]
"""Receives each piece of a turn's text as it streams."""


def present(**members: Any) -> dict[str, Any]:
    """The members that were given (not ``None``), under their wire names."""
    return {name: value for name, value in members.items() if value is not None}


def event_router(
    on_text: TextCallback | None,
    on_event: EventCallback | None,
    text_of: Callable[[dict[str, Any]], str | None],
) -> Callable[[dict[str, Any]], None] | None:
    """A notification callback passing each event to ``on_event`` and its text (``text_of``) to
    ``on_text``; ``None`` when neither is given (the turn is then not streamed)."""
    if on_text is None and on_event is None:
        return None

    def route(params: dict[str, Any]) -> None:
        event = params.get("event")
        if not isinstance(event, dict):
            return
        if on_event is not None:
            on_event(event)
        if on_text is not None:
            text = text_of(event)
            if text:
                on_text(text)

    return route


def session_text(event: dict[str, Any]) -> str | None:
    """A ``session/event`` text delta (a reset, which replaces the text, reaches ``on_event`` only)."""
    if event.get("type") == "text" and not event.get("isReset"):
        return event.get("delta")
    return None


def npc_text(event: dict[str, Any]) -> str | None:
    """An ``npc/event`` line delta (a ``lineReset`` reaches ``on_event`` only)."""
    return event.get("delta") if event.get("type") == "lineDelta" else None
