"""Session: a handle on one ``session/*`` conversation, made by ``Bridge.create_session``.

It holds the session's id and nothing of its state (that lives in the daemon); each method is one
request, its result a model from ``_results``; each takes ``timeout=`` (seconds), past which it
raises ``TimeoutError``, and for a turn that model work is cancelled (``respond``). Keywords are the wire's members in snake_case;
there is no catch-all (a misspelt keyword raises ``TypeError`` before anything is sent).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from oamd.client._events import SessionEventNotification, typed_handler
from oamd.client._link import BridgeLink
from oamd.client._params import (
    EventCallback,
    TextCallback,
    cancelling_on_timeout,
    event_router,
    present,
    session_reset,
    session_text,
)
from oamd.client._results import SessionAck, SessionCompactResult, SessionRespondResult

__all__ = ["Session"]


class Session:
    """A conversation with the model; its tools are the bridge's client tools it was created with."""

    def __init__(self, bridge: BridgeLink, session_id: str, warnings: list[str]) -> None:
        self.bridge = bridge
        self.id = session_id
        self.warnings = warnings
        """What ``session/create`` warned about (unknown options, a tool without description…)."""

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

    def on_event(self, handler: Callable[[SessionEventNotification], Any]) -> Callable[[], None]:
        """Calls ``handler`` (plain or ``async def``) with every ``session/event`` of this session
        from now on, whichever task or peer started the turn; returns the function that removes
        it. Only streamed turns have events (``respond`` with ``on_text`` or ``on_event``)."""

        def ours(note: SessionEventNotification) -> bool:
            return note.session == self.id

        typed = typed_handler(handler, SessionEventNotification, ours)
        return self.bridge.client.on_notification("session/event", typed)

    @property
    def _cancel(self) -> tuple[str, dict[str, Any]]:
        """What a timed-out turn sends: ``session/cancel`` ends the running and queued turns of
        the session (the protocol cannot cancel one request)."""
        return "session/cancel", {"session": self.id}

    async def respond(
        self,
        prompt: str,
        *,
        schema: dict[str, Any] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_tool_rounds: int | None = None,
        max_tool_calls: int | None = None,
        enabled_tools: list[str] | None = None,
        on_text: TextCallback | None = None,
        on_reset: TextCallback | None = None,
        on_event: EventCallback | None = None,
        timeout: float | None = None,
    ) -> SessionRespondResult:
        """Runs one turn (``session/respond``); ``''`` continues the conversation.

        With ``on_text``, ``on_reset`` or ``on_event`` the turn streams: ``on_text`` receives each
        text delta, ``on_reset`` the whole text that replaces what streamed so far (a reset: a
        step of the turn started its text over; show this text instead, then append later
        deltas), ``on_event`` every ``session/event`` payload, all before this returns. A UI
        that shows ``on_text`` should pass ``on_reset`` too. ``schema`` asks for structured
        output (``result.structured``).

        Past ``timeout`` seconds the turn is cancelled, so the model stops working for nobody:
        ``session/cancel`` is sent, which ends every running and queued turn of this session (the
        protocol cannot cancel one request), and ``TimeoutError`` is raised.

        Raises:
            RpcError: the turn failed (``cancelled``, ``guardrail_violation``…).
            TimeoutError: ``timeout`` passed (the session's turns were cancelled).
        """
        params = {
            "session": self.id,
            "prompt": prompt,
            **present(
                schema=schema,
                toolChoice=tool_choice,
                maxToolRounds=max_tool_rounds,
                maxToolCalls=max_tool_calls,
                enabledTools=enabled_tools,
            ),
        }
        route = event_router(on_text, on_event, session_text, on_reset, session_reset)
        if route is not None:
            params["stream"] = True
        turn = self.bridge.client.request(
            "session/respond", params, on_notification=route, timeout=timeout
        )
        result = await cancelling_on_timeout(self.bridge.client, turn, *self._cancel)
        return SessionRespondResult.model_validate(result)

    async def cancel(self, *, timeout: float | None = None) -> int:
        """Cancels the running and queued turns; returns how many were cancelled."""
        result = await self.bridge.client.request(
            "session/cancel", {"session": self.id}, timeout=timeout
        )
        return int(result["cancelled"])

    async def reset(self, *, timeout: float | None = None) -> SessionAck:
        """Forgets the conversation, keeping instructions and tools."""
        result = await self.bridge.client.request(
            "session/reset", {"session": self.id}, timeout=timeout
        )
        return SessionAck.model_validate(result)

    async def delete(self, *, timeout: float | None = None) -> None:
        await self.bridge.client.request("session/delete", {"session": self.id}, timeout=timeout)

    async def transcript(self, *, timeout: float | None = None) -> dict[str, Any]:
        """The conversation, to save; ``Bridge.create_session(history=…)`` restores it."""
        result = await self.bridge.client.request(
            "session/transcript", {"session": self.id}, timeout=timeout
        )
        return result["transcript"]

    async def set_instructions(
        self, instructions: str | None, *, timeout: float | None = None
    ) -> SessionAck:
        """Replaces the instructions (``None`` clears them), after the turns queued before."""
        params = {"session": self.id, "instructions": instructions}
        result = await self.bridge.client.request(
            "session/setInstructions", params, timeout=timeout
        )
        return SessionAck.model_validate(result)

    async def set_context_note(
        self, note: str | None, *, timeout: float | None = None
    ) -> SessionAck:
        """Replaces the context note, text the model reads beside the instructions (``None``
        clears it), after the turns queued before."""
        params = {"session": self.id, "note": note}
        result = await self.bridge.client.request("session/setContextNote", params, timeout=timeout)
        return SessionAck.model_validate(result)

    async def set_tools(
        self, tools: Iterable[str | dict[str, Any]], *, timeout: float | None = None
    ) -> list[str]:
        """Replaces the session's tools (registered names or definitions); returns warnings."""
        params = {"session": self.id, "tools": self.bridge.tools.definitions(tools)}
        result = await self.bridge.client.request("session/setTools", params, timeout=timeout)
        return list(result.get("warnings", []))

    async def compact(
        self,
        *,
        keep_recent_turns: int | None = None,
        summary_instructions: str | None = None,
        timeout: float | None = None,
    ) -> SessionCompactResult:
        """Folds all but the ``keep_recent_turns`` latest turns (default 2) into a summary the
        model writes (``session/compact``), guided by ``summary_instructions``; ``summary`` is
        ``None`` when there was nothing to fold. A ``timeout`` cancels as ``respond``'s does.

        Raises:
            TimeoutError: ``timeout`` passed (the session's operations were cancelled).
        """
        params = {
            "session": self.id,
            **present(keepRecentTurns=keep_recent_turns, summaryInstructions=summary_instructions),
        }
        compaction = self.bridge.client.request("session/compact", params, timeout=timeout)
        result = await cancelling_on_timeout(self.bridge.client, compaction, *self._cancel)
        return SessionCompactResult.model_validate(result)
