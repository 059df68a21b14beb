"""Npc: a handle on one NPC (``npc/*``), made by ``Bridge.create_npc``.

It holds the NPC's id and nothing of its state (persona, memory and relationship live in the
daemon); each method is one request and takes ``timeout=`` (seconds), past which it raises
``TimeoutError``; a timed-out ``talk`` is cancelled too. Keywords are the wire's members in snake_case; there is no
catch-all (a misspelt keyword raises ``TypeError`` before anything is sent).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oamd.client._events import NpcEventNotification, typed_handler
from oamd.client._game_results import NpcTalkResult, NpcUpdateResult
from oamd.client._link import BridgeLink
from oamd.client._params import (
    EventCallback,
    TextCallback,
    cancelling_on_timeout,
    event_router,
    npc_reset,
    npc_text,
    present,
)
from oamd.client._tools import Tools

__all__ = ["Npc"]


class Npc:
    """An NPC: a persona with memory, a relationship to the player and tools."""

    def __init__(
        self, bridge: BridgeLink, npc_id: str, tools: list[str], warnings: list[str]
    ) -> None:
        self.bridge = bridge
        self.id = npc_id
        self.tools = tools
        """Every tool the NPC can use: the client's, and its memory and world tools."""
        self.warnings = warnings

    def __repr__(self) -> str:
        return f"Npc({self.id!r})"

    def on_event(self, handler: Callable[[NpcEventNotification], Any]) -> Callable[[], None]:
        """Calls ``handler`` (plain or ``async def``) with every ``npc/event`` of this NPC from
        now on; returns the function that removes it. Only streamed exchanges have events
        (``talk`` with ``on_text`` or ``on_event``)."""

        def ours(note: NpcEventNotification) -> bool:
            return note.npc == self.id

        typed = typed_handler(handler, NpcEventNotification, ours)
        return self.bridge.client.on_notification("npc/event", typed)

    async def talk(
        self,
        line: str,
        *,
        context: Any = None,
        tool_choice: str | dict[str, Any] | None = None,
        on_text: TextCallback | None = None,
        on_reset: TextCallback | None = None,
        on_event: EventCallback | None = None,
        timeout: float | None = None,
    ) -> NpcTalkResult:
        """The player says ``line`` (``''``: nothing) and the NPC answers (``npc/talk``).

        With ``on_text``, ``on_reset`` or ``on_event`` the line streams: ``on_text`` receives each
        delta of the NPC's line, ``on_reset`` the line that replaces what streamed so far (a
        ``lineReset``: the daemon took the streamed words back, e.g. a fallback line replaced them;
        show this line instead, then append later deltas), ``on_event`` every ``npc/event``
        payload, all before this returns. A subtitle that shows ``on_text`` should pass
        ``on_reset`` too; ``result.line`` is always what stands.
        ``context`` (text or JSON) applies to this exchange only.

        Past ``timeout`` seconds the exchange is cancelled: ``npc/cancel`` is sent, which ends
        every running and queued exchange of this NPC (the protocol cannot cancel one request),
        and ``TimeoutError`` is raised.

        Raises:
            RpcError: the exchange failed (``npc_not_found``, ``cancelled``…).
            TimeoutError: ``timeout`` passed (the NPC's exchanges were cancelled).
        """
        params = {
            "npc": self.id,
            "line": line,
            **present(context=context, toolChoice=tool_choice),
        }
        route = event_router(on_text, on_event, npc_text, on_reset, npc_reset)
        if route is not None:
            params["stream"] = True
        exchange = self.bridge.client.request(
            "npc/talk", params, on_notification=route, timeout=timeout
        )
        cancel = {"npc": self.id}
        result = await cancelling_on_timeout(self.bridge.client, exchange, "npc/cancel", cancel)
        return NpcTalkResult.model_validate(result)

    async def bark(self, situation: Any = None, *, timeout: float | None = None) -> str:
        """A one-off line for ``situation`` (text or JSON), outside the conversation."""
        params = {"npc": self.id, **present(situation=situation)}
        result = await self.bridge.client.request("npc/bark", params, timeout=timeout)
        return str(result["line"])

    async def state(
        self, *, settle: bool | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """The NPC's save state, for ``Bridge.restore_npc``: after the exchanges queued before it
        (``settle=False``: at once, as it stands)."""
        params = {"npc": self.id, **present(settle=settle)}
        result = await self.bridge.client.request("npc/state", params, timeout=timeout)
        return result["state"]

    async def update(
        self,
        *,
        persona: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
        memory: dict[str, Any] | None = None,
        tools: Tools | None = None,
        timeout: float | None = None,
    ) -> NpcUpdateResult:
        """Changes the NPC after the exchanges queued before (``npc/update``): ``persona``,
        ``options`` and ``memory`` are merge patches (a ``None`` member inside one resets that
        field), ``tools`` replaces the client tools. ``self.tools`` is not refreshed.

        Raises:
            RpcError: ``invalid_params`` naming the member, ``limit_reached``…
        """
        params = {
            "npc": self.id,
            **present(
                persona=persona,
                options=options,
                memory=memory,
                tools=self.bridge.tools.definitions(tools) if tools is not None else None,
            ),
        }
        result = await self.bridge.client.request("npc/update", params, timeout=timeout)
        return NpcUpdateResult.model_validate(result)

    async def reset(self, *, clear_memory: bool = False, timeout: float | None = None) -> None:
        """Forgets the conversation (and the memory too with ``clear_memory``)."""
        await self.bridge.client.request(
            "npc/reset", {"npc": self.id, "clearMemory": clear_memory}, timeout=timeout
        )

    async def cancel(self, *, timeout: float | None = None) -> int:
        """Cancels the running and queued exchanges; returns how many were cancelled."""
        result = await self.bridge.client.request("npc/cancel", {"npc": self.id}, timeout=timeout)
        return int(result["cancelled"])

    async def delete(self, *, timeout: float | None = None) -> None:
        await self.bridge.client.request("npc/delete", {"npc": self.id}, timeout=timeout)
