"""Session: a handle on one ``session/*`` conversation, made by ``Bridge.create_session``.

It holds the session's id and nothing of its state (that lives in the daemon); each method is one
request, its result a model from ``_results``. Keywords are the wire's members in snake_case;
there is no catch-all (a misspelt keyword raises ``TypeError`` before anything is sent).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from oamd.client._params import EventCallback, TextCallback, event_router, present, session_text
from oamd.client._results import SessionAck, SessionCompactResult, SessionRespondResult

if TYPE_CHECKING:
    from oamd.client._bridge import Bridge

__all__ = ["Session"]


class Session:
    """A conversation with the model; its tools are the bridge's client tools it was created with."""

    def __init__(self, bridge: Bridge, session_id: str, warnings: list[str]) -> None:
        self.bridge = bridge
        self.id = session_id
        self.warnings = warnings
        """What ``session/create`` warned about (unknown options, a tool without description…)."""

    def __repr__(self) -> str:
        return f"Session({self.id!r})"

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
        on_event: EventCallback | None = None,
    ) -> SessionRespondResult:
        """Runs one turn (``session/respond``); ``''`` continues the conversation.

        With ``on_text`` or ``on_event`` the turn streams: ``on_text`` receives each text delta,
        ``on_event`` every ``session/event`` payload, all before this returns. ``schema`` asks for
        structured output (``result.structured``).

        Raises:
            RpcError: the turn failed (``cancelled``, ``guardrail_violation``…).
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
        route = event_router(on_text, on_event, session_text)
        if route is not None:
            params["stream"] = True
        result = await self.bridge.client.request("session/respond", params, on_notification=route)
        return SessionRespondResult.model_validate(result)

    async def cancel(self) -> int:
        """Cancels the running and queued turns; returns how many were cancelled."""
        result = await self.bridge.client.request("session/cancel", {"session": self.id})
        return int(result["cancelled"])

    async def reset(self) -> SessionAck:
        """Forgets the conversation, keeping instructions and tools."""
        result = await self.bridge.client.request("session/reset", {"session": self.id})
        return SessionAck.model_validate(result)

    async def delete(self) -> None:
        await self.bridge.client.request("session/delete", {"session": self.id})

    async def transcript(self) -> dict[str, Any]:
        """The conversation, to save; ``Bridge.create_session(history=…)`` restores it."""
        result = await self.bridge.client.request("session/transcript", {"session": self.id})
        return result["transcript"]

    async def set_instructions(self, instructions: str | None) -> SessionAck:
        """Replaces the instructions (``None`` clears them), after the turns queued before."""
        params = {"session": self.id, "instructions": instructions}
        result = await self.bridge.client.request("session/setInstructions", params)
        return SessionAck.model_validate(result)

    async def set_context_note(self, note: str | None) -> SessionAck:
        """Replaces the context note, text the model reads beside the instructions (``None``
        clears it), after the turns queued before."""
        params = {"session": self.id, "note": note}
        result = await self.bridge.client.request("session/setContextNote", params)
        return SessionAck.model_validate(result)

    async def set_tools(self, tools: Iterable[str | dict[str, Any]]) -> list[str]:
        """Replaces the session's tools (registered names or definitions); returns warnings."""
        params = {"session": self.id, "tools": self.bridge.tools.definitions(tools)}
        result = await self.bridge.client.request("session/setTools", params)
        return list(result.get("warnings", []))

    async def compact(
        self, *, keep_recent_turns: int | None = None, summary_instructions: str | None = None
    ) -> SessionCompactResult:
        """Folds all but the ``keep_recent_turns`` latest turns (default 2) into a summary the
        model writes (``session/compact``), guided by ``summary_instructions``; ``summary`` is
        ``None`` when there was nothing to fold."""
        params = {
            "session": self.id,
            **present(keepRecentTurns=keep_recent_turns, summaryInstructions=summary_instructions),
        }
        result = await self.bridge.client.request("session/compact", params)
        return SessionCompactResult.model_validate(result)
